//! The storage append path's batch checks (lengths, CRC, counts, LogAppendTime rewrite) on
//! arbitrary input: an error or batches that tile the input exactly.
//! The check itself is `checks/prepare_append.rs`, shared with klog-core's `tests/fuzz_seeds.rs` (CI's seeded run).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks/mod.rs"]
mod checks;

fuzz_target!(|input: &[u8]| checks::prepare_append::check(input));
