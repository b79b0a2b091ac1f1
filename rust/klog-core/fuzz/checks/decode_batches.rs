//! The consumer-side decoder (batches, records, headers, control keys) on arbitrary input, in
//! both the strict (produce/disk) and the fetch (partial trailing batch, compacted) modes.
use klog_core::batch::{decode_all, BatchIter, DecodeOptions};

pub fn check(input: &[u8]) {
    let data = super::common::reseal(input);
    for opts in [
        DecodeOptions { max_decompressed_size: 1 << 20, ..Default::default() },
        DecodeOptions { max_decompressed_size: 1 << 20, ..DecodeOptions::fetch() },
    ] {
        if let Ok(batches) = decode_all(&data, &opts) {
            for (h, records) in batches {
                assert!(records.len() <= h.records_count as usize);
            }
        }
    }
    for item in BatchIter::new(&data) {
        if item.is_err() {
            break;
        }
    }
}
