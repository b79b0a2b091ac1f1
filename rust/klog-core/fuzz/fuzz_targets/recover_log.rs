//! Opening a partition directory after a crash (recovery: segment scan, index and epoch-checkpoint load)
//! with an arbitrary `.log`, `.index` and `leader-epoch-checkpoint`: an error or a log that serves what it
//! kept, never a panic. Input: flags, u16 index length + index bytes, u16 checkpoint length + checkpoint
//! bytes, then the segment.
//! The check itself is `checks/recover_log.rs`, shared with klog-core's `tests/fuzz_seeds.rs` (CI's seeded run).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks/mod.rs"]
mod checks;

fuzz_target!(|input: &[u8]| checks::recover_log::check(input));
