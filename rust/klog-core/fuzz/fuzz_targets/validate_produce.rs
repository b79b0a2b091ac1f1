//! The produce validator on arbitrary batches: never panics, and whatever it accepts the strict
//! decoder reads back with the same number of records (offset deltas 0..n-1, nothing left over).
//! The check itself is `checks/validate_produce.rs`, shared with klog-core's `tests/fuzz_seeds.rs` (CI's seeded run).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks/mod.rs"]
mod checks;

fuzz_target!(|input: &[u8]| checks::validate_produce::check(input));
