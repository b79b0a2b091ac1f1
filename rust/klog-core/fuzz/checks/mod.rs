//! What each fuzz target checks, one module per target, as plain functions of the input: the libFuzzer
//! binaries in `fuzz_targets/` call them, and so does klog-core's `tests/fuzz_seeds.rs` (the committed seeds
//! and seeded mutations of them under `cargo test`, which is CI's short run).
#![allow(dead_code)] // each libFuzzer binary uses one check

pub mod common;
pub mod validate_produce;
pub mod decode_batches;
pub mod decode_columns;
pub mod decompress;
pub mod prepare_append;
pub mod recover_log;
