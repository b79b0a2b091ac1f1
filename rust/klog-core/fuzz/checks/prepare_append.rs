//! The storage append path's batch checks (lengths, CRC, counts, LogAppendTime rewrite) on
//! arbitrary input: an error or batches that tile the input exactly.
use klog_core::storage::config::TimestampType;
use klog_core::storage::partition_log::{prepare_batches, LazyNow};

pub fn check(input: &[u8]) {
    let flags = input.first().copied().unwrap_or(0);
    let data = super::common::reseal(input);
    let ts = if flags & 2 != 0 { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
    let now = LazyNow::new(Some(1_700_000_000_000));
    if let Ok(batches) = prepare_batches(&data, ts, &now, 1 << 20) {
        let total: usize = batches.iter().map(|b| b.size()).sum();
        assert_eq!(total, data.len());
    }
}
