//! Rewriting one batch for the cleaned log (sans-IO): which records survive, and the bytes of the
//! batch that holds them. Kafka's `MemoryRecords.filterTo` with the log cleaner's record filter:
//!
//! - a record survives if it is past the offset map's latest offset, or it holds the latest offset
//!   of its key and has a value or is a tombstone whose batch's delete horizon has not passed;
//!   keyless records never survive (compacted topics refuse them at produce);
//! - a batch whose records all survive and needs no new delete horizon is copied byte for byte
//!   (its CRC untouched); otherwise the survivors are written into a batch with the original base
//!   offset, last offset delta, partition leader epoch, producer id/epoch/base sequence, timestamp
//!   type and compression codec, a new CRC, and MaxTimestamp over the survivors (CreateTime);
//! - a batch with a surviving tombstone and no delete horizon gets one (KIP-534): now +
//!   `delete.retention.ms` in BaseTimestamp with attribute bit 6 set, record timestamp deltas
//!   re-based so every record keeps its timestamp;
//! - a batch left without records is dropped, or kept as an empty header when the caller asks
//!   (the last batch of a producer, to keep its sequence state; the last batch of a cleaned
//!   segment) in Kafka's `writeEmptyHeader` form;
//! - transactions (see `txn`): every record of a batch of an aborted transaction goes; a
//!   transaction marker is copied unchanged until its transaction has no batch left, then gets a
//!   delete horizon like a tombstone's and is dropped once that passed.

use crate::batch::header::*;
use crate::batch::records::{open_batch, parse_record, DecodeOptions, SkipHeaders};
use crate::compression::{self, DEFAULT_MAX_DECOMPRESSED_SIZE};
use crate::crc::crc32c;
use crate::error::{CodecError, CodecResult};
use crate::varint::{read_varint, read_varlong, varint_size, varlong_size, write_varint, write_varlong};

use super::offset_map::{key_digest, OffsetMap};
use super::txn::TxnAction;

/// Kafka's "no timestamp".
const NO_TIMESTAMP: i64 = -1;

/// What became of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing written.
    Dropped,
    /// The original bytes, unchanged.
    Copied,
    /// A new batch holding the surviving records.
    Rewritten,
    /// An empty batch header (no records) kept for the producer's or the segment's sake.
    Emptied,
}

#[derive(Debug, Clone, Copy)]
pub struct Filtered {
    pub outcome: Outcome,
    pub records_read: u64,
    pub records_kept: u64,
    /// MaxTimestamp of the written batch (for the time index); meaningless when dropped.
    pub max_timestamp: i64,
    /// The written batch carries (or already carried) a delete horizon and a surviving tombstone.
    pub holds_tombstones_until: Option<i64>,
}

/// What the filter needs to decide: the key map, the clock and the topic's tombstone retention.
pub struct FilterRules<'a> {
    pub map: &'a OffsetMap,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
}

/// Scratch buffers reused across batches (no allocation per batch once warm).
#[derive(Default)]
pub struct Scratch {
    kept: Vec<(usize, usize, i64)>,
    records: Vec<u8>,
}

fn decode_options() -> DecodeOptions {
    DecodeOptions {
        verify_crc: true,
        allow_partial_trailing: false,
        allow_compacted: true,
        max_decompressed_size: DEFAULT_MAX_DECOMPRESSED_SIZE,
    }
}

/// Call `f(key, offset)` for every keyed record of a data batch (control batches have none that
/// matter); used to build the offset map.
pub fn for_each_key(batch: &[u8], at: usize, mut f: impl FnMut(&[u8], i64) -> bool) -> CodecResult<bool> {
    let view = open_batch(batch, at, &decode_options())?;
    if view.is_control() {
        return Ok(true);
    }
    for r in view.records() {
        let r = r?;
        if let Some(k) = r.key {
            if !f(k, view.header.base_offset + r.offset_delta as i64) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Filter the whole batch `batch` (at byte `at` of its segment, for errors), appending what
/// survives to `out`.
pub fn filter_batch(
    batch: &[u8],
    at: usize,
    rules: &FilterRules<'_>,
    retain_empty: bool,
    txn: TxnAction,
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
) -> CodecResult<Filtered> {
    let view = open_batch(batch, at, &decode_options())?;
    let h = view.header;
    let horizon = h.delete_horizon();
    let tombstones_expired = horizon.is_some_and(|t| rules.now_ms >= t);
    // A marker stays as it is while its transaction has batches, or while its horizon runs.
    let marker_goes = view.is_control() && matches!(txn, TxnAction::MarkerOfEmptyTxn | TxnAction::IndexedMarkerOfEmptyTxn);
    let removable = txn == TxnAction::MarkerOfEmptyTxn;
    if view.is_control() && (!marker_goes || (horizon.is_some() && (!tombstones_expired || !removable))) {
        out.extend_from_slice(batch);
        let n = h.records_count as u64;
        let holds = if marker_goes { horizon } else { None };
        return Ok(Filtered { outcome: Outcome::Copied, records_read: n, records_kept: n, max_timestamp: h.max_timestamp, holds_tombstones_until: holds });
    }
    let discard = txn == TxnAction::DiscardRecords || (marker_goes && tombstones_expired);
    let data: &[u8] = &view.records_data;
    let base = if view.compression == Compression::None { at + RECORD_BATCH_OVERHEAD } else { 0 };
    scratch.kept.clear();
    let (mut pos, mut read, mut prev_delta) = (0usize, 0u64, -1i64);
    let mut tombstone_kept = false;
    let mut max_ts = NO_TIMESTAMP;
    for _ in 0..h.records_count {
        let start = pos;
        let r = parse_record(data, &mut pos, base, &mut SkipHeaders)?;
        let delta = r.offset_delta as i64;
        if delta <= prev_delta || delta > h.last_offset_delta as i64 {
            return Err(CodecError::invalid(
                "record.offset_delta",
                at,
                format!("offset delta {delta} out of sequence (after {prev_delta}, last offset delta {})", h.last_offset_delta),
            ));
        }
        prev_delta = delta;
        read += 1;
        let offset = h.base_offset + delta;
        let keep = !discard
            && (marker_goes
                || offset > rules.map.latest_offset()
                || match r.key {
                    None => false,
                    Some(k) => offset >= rules.map.get(key_digest(k)) && (r.value.is_some() || !tombstones_expired),
                });
        if keep {
            let ts = view.record_timestamp(r.timestamp_delta);
            max_ts = max_ts.max(ts);
            // a marker of an empty transaction is held like a tombstone (it gets the horizon)
            tombstone_kept |= r.value.is_none() || marker_goes;
            scratch.kept.push((start, pos, r.timestamp_delta));
        }
    }
    if pos != data.len() {
        return Err(CodecError::invalid("batch.records", at, format!("{} bytes left after the last of {} records", data.len() - pos, h.records_count)));
    }
    let kept = scratch.kept.len() as u64;
    let new_horizon = (tombstone_kept && horizon.is_none()).then(|| rules.now_ms.saturating_add(rules.delete_retention_ms));
    let holds = if tombstone_kept { new_horizon.or(horizon) } else { None };
    if kept == read && read > 0 && new_horizon.is_none() {
        out.extend_from_slice(batch);
        return Ok(Filtered { outcome: Outcome::Copied, records_read: read, records_kept: kept, max_timestamp: h.max_timestamp, holds_tombstones_until: holds });
    }
    if kept == 0 {
        if !retain_empty {
            return Ok(Filtered { outcome: Outcome::Dropped, records_read: read, records_kept: 0, max_timestamp: NO_TIMESTAMP, holds_tombstones_until: None });
        }
        if read == 0 {
            out.extend_from_slice(batch); // already an empty header
        } else {
            let start = out.len();
            out.resize(start + RECORD_BATCH_OVERHEAD, 0);
            let attrs = h.attributes & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL);
            write_header(&mut out[start..], &h, attrs, NO_TIMESTAMP, h.max_timestamp, 0);
        }
        return Ok(Filtered { outcome: Outcome::Emptied, records_read: read, records_kept: 0, max_timestamp: h.max_timestamp, holds_tombstones_until: None });
    }
    // Record timestamps are BaseTimestamp + delta: a new base (the delete horizon) re-bases them.
    let new_base = new_horizon.or(horizon).unwrap_or(h.base_timestamp);
    let records = &mut scratch.records;
    records.clear();
    for &(start, end, ts_delta) in &scratch.kept {
        if new_base == h.base_timestamp {
            records.extend_from_slice(&data[start..end]);
            continue;
        }
        let new_delta = h.base_timestamp.wrapping_add(ts_delta).wrapping_sub(new_base);
        let mut p = start;
        read_varint(data, &mut p, "record.length", base)?;
        let attrs = data[p];
        p += 1;
        read_varlong(data, &mut p, "record.timestamp_delta", base)?;
        let offset_delta = read_varint(data, &mut p, "record.offset_delta", base)?;
        let tail = &data[p..end];
        let body = 1 + varlong_size(new_delta) + varint_size(offset_delta) + tail.len();
        write_varint(records, body as i32);
        records.push(attrs);
        write_varlong(records, new_delta);
        write_varint(records, offset_delta);
        records.extend_from_slice(tail);
    }
    let start = out.len();
    out.resize(start + RECORD_BATCH_OVERHEAD, 0);
    if view.compression == Compression::None {
        out.extend_from_slice(records);
    } else {
        compression::compress_into(view.compression, records, None, out)?;
    }
    let mut attrs = h.attributes & !ATTR_DELETE_HORIZON;
    if new_horizon.or(horizon).is_some() {
        attrs |= ATTR_DELETE_HORIZON;
    }
    let max_ts = if h.is_log_append_time() { h.max_timestamp } else { max_ts };
    write_header(&mut out[start..], &h, attrs, new_base, max_ts, kept as i32);
    Ok(Filtered { outcome: Outcome::Rewritten, records_read: read, records_kept: kept, max_timestamp: max_ts, holds_tombstones_until: holds })
}

/// Fill the 61-byte header of `batch` (header space + records section) from `h` with the given
/// attributes, timestamps and record count, then its CRC.
fn write_header(batch: &mut [u8], h: &BatchHeader, attributes: i16, base_ts: i64, max_ts: i64, count: i32) {
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    let b = &mut batch[..RECORD_BATCH_OVERHEAD];
    b[BASE_OFFSET_OFFSET..][..8].copy_from_slice(&h.base_offset.to_be_bytes());
    b[LENGTH_OFFSET..][..4].copy_from_slice(&length.to_be_bytes());
    b[PARTITION_LEADER_EPOCH_OFFSET..][..4].copy_from_slice(&h.partition_leader_epoch.to_be_bytes());
    b[MAGIC_OFFSET] = MAGIC_V2 as u8;
    b[ATTRIBUTES_OFFSET..][..2].copy_from_slice(&attributes.to_be_bytes());
    b[LAST_OFFSET_DELTA_OFFSET..][..4].copy_from_slice(&h.last_offset_delta.to_be_bytes());
    b[BASE_TIMESTAMP_OFFSET..][..8].copy_from_slice(&base_ts.to_be_bytes());
    b[MAX_TIMESTAMP_OFFSET..][..8].copy_from_slice(&max_ts.to_be_bytes());
    b[PRODUCER_ID_OFFSET..][..8].copy_from_slice(&h.producer_id.to_be_bytes());
    b[PRODUCER_EPOCH_OFFSET..][..2].copy_from_slice(&h.producer_epoch.to_be_bytes());
    b[BASE_SEQUENCE_OFFSET..][..4].copy_from_slice(&h.base_sequence.to_be_bytes());
    b[RECORDS_COUNT_OFFSET..][..4].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}
