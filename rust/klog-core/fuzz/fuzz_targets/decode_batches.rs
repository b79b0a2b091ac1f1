//! The consumer-side decoder (batches, records, headers, control keys) on arbitrary input, in
//! both the strict (produce/disk) and the fetch (partial trailing batch, compacted) modes.
//! The check itself is `checks/decode_batches.rs`, shared with klog-core's `tests/fuzz_seeds.rs` (CI's seeded run).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks/mod.rs"]
mod checks;

fuzz_target!(|input: &[u8]| checks::decode_batches::check(input));
