//! The produce validator on arbitrary batches: never panics, and whatever it accepts the strict
//! decoder reads back with the same number of records (offset deltas 0..n-1, nothing left over).
use klog_core::batch::validate::{validate_produce_batch, ProducePolicy};
use klog_core::batch::{decode_all, DecodeOptions};

pub fn check(input: &[u8]) {
    let flags = input.first().copied().unwrap_or(0);
    let data = super::common::reseal(input);
    let policy = ProducePolicy {
        compacted: flags & 2 != 0,
        topic_partition: "fuzzed-0",
        create_time: flags & 4 != 0,
        now_ms: 1_700_000_000_000,
        before_max_ms: if flags & 8 != 0 { 1000 } else { i64::MAX },
        after_max_ms: if flags & 8 != 0 { 1000 } else { i64::MAX },
        max_decompressed_bytes: 1 << 20,
        verify_crc: flags & 32 == 0,
    };
    let budget = if flags & 16 != 0 { Some(4096) } else { None };
    if let Ok(v) = validate_produce_batch(&data, &policy, budget) {
        let opts = DecodeOptions { max_decompressed_size: 1 << 20, verify_crc: policy.verify_crc, ..Default::default() };
        let decoded = decode_all(&data, &opts).expect("a validated batch decodes strictly");
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded[0].1.len(), v.records);
        if policy.compacted {
            assert!(decoded[0].1.iter().all(|r| r.key.is_some()));
        }
    }
}
