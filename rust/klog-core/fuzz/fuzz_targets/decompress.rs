//! Every codec's bounded decompression on arbitrary bytes: an error or at most `limit` bytes.
//! The check itself is `checks/decompress.rs`, shared with klog-core's `tests/fuzz_seeds.rs` (CI's seeded run).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks/mod.rs"]
mod checks;

fuzz_target!(|input: &[u8]| checks::decompress::check(input));
