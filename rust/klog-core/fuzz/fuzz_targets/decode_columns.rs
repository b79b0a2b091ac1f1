//! The columnar decoder (the consumer's and the Spark source's fast path) on arbitrary input:
//! never panics, and agrees with the row decoder on how many records there are.
//! The check itself is `checks/decode_columns.rs`, shared with klog-core's `tests/fuzz_seeds.rs` (CI's seeded run).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks/mod.rs"]
mod checks;

fuzz_target!(|input: &[u8]| checks::decode_columns::check(input));
