//! Shared by the targets: re-seal the CRC of the batch at the start of the input, so the fuzzer
//! explores what lies behind the CRC check instead of failing it almost always.

use klog_core::batch::{ATTRIBUTES_OFFSET, CRC_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};
use klog_core::crc::crc32c;

/// When the input's first byte is even and a whole batch header is there, rewrite the CRC of
/// the first batch (as far as the input holds it). Returns the rest of the input.
pub fn reseal(input: &[u8]) -> Vec<u8> {
    let Some((&mode, rest)) = input.split_first() else { return Vec::new() };
    let mut data = rest.to_vec();
    if mode & 1 == 0 && data.len() >= RECORD_BATCH_OVERHEAD {
        let length = i32::from_be_bytes(data[LENGTH_OFFSET..LENGTH_OFFSET + 4].try_into().unwrap());
        let end = (LOG_OVERHEAD as i64 + length as i64).clamp(RECORD_BATCH_OVERHEAD as i64, data.len() as i64) as usize;
        let crc = crc32c(&data[ATTRIBUTES_OFFSET..end]);
        data[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }
    data
}

/// Re-seal the CRC of every whole batch in `data` (back-to-back batches, as in a segment file).
#[allow(dead_code)]
pub fn reseal_all(data: &mut [u8]) {
    let mut pos = 0usize;
    while data.len() - pos >= RECORD_BATCH_OVERHEAD {
        let length = i32::from_be_bytes(data[pos + LENGTH_OFFSET..pos + LENGTH_OFFSET + 4].try_into().unwrap());
        let size = LOG_OVERHEAD as i64 + length as i64;
        if size < RECORD_BATCH_OVERHEAD as i64 || size > (data.len() - pos) as i64 {
            return;
        }
        let end = pos + size as usize;
        let crc = crc32c(&data[pos + ATTRIBUTES_OFFSET..end]);
        data[pos + CRC_OFFSET..pos + CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        pos = end;
    }
}
