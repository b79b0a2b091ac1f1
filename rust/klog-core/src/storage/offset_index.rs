//! `.index`: sparse map from offset to file position. 8-byte entries (offset relative to the
//! segment base int32, position int32), one per batch once `index.interval.bytes` were
//! appended since the previous entry. Entry = (last offset of the batch, start of the batch),
//! the pairing Kafka's `DumpLogSegments --index-sanity-check` verifies.

use super::error::StorageResult;
use super::index_file::{FixedIndex, IndexEntry, LoadOutcome};

pub const OFFSET_INDEX_ENTRY_SIZE: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub offset: i64,
    /// As stored (int32): negative only in a damaged file.
    pub position: i64,
}

impl IndexEntry for OffsetEntry {
    const SIZE: usize = OFFSET_INDEX_ENTRY_SIZE;
    #[inline(always)]
    fn decode(e: &[u8], base_offset: i64) -> Self {
        let rel = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let pos = i32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        OffsetEntry { offset: base_offset + rel as i64, position: pos as i64 }
    }
    #[inline]
    fn encode(&self, base_offset: i64, out: &mut [u8]) {
        out[..4].copy_from_slice(&((self.offset - base_offset) as i32).to_be_bytes());
        out[4..8].copy_from_slice(&(self.position as i32).to_be_bytes());
    }
}

pub type OffsetIndex = FixedIndex<OffsetEntry>;

impl FixedIndex<OffsetEntry> {
    /// Load and check: offsets and positions strictly increasing, positions inside the log.
    pub fn load(&mut self, log_size: u64) -> StorageResult<LoadOutcome> {
        let base = self.base_offset();
        self.load_checked(|prev, e| {
            e.offset >= base
                && e.position >= 0
                && (e.position as u64) < log_size.max(1)
                && prev.is_none_or(|p| e.offset > p.offset && e.position > p.position)
        })
    }

    /// (offset, position) of the last entry.
    pub fn last(&self) -> Option<(i64, u64)> {
        self.last_entry().map(|e| (e.offset, e.position as u64))
    }

    /// Greatest entry with offset <= `target`, or the segment start.
    pub fn lookup(&self, target: i64) -> (i64, u64) {
        self.last_where(|e| e.offset <= target).map_or((self.base_offset(), 0), |e| (e.offset, e.position as u64))
    }

    /// Greatest entry with position <= `position`, if any.
    pub fn lookup_by_position(&self, position: u64) -> Option<(i64, u64)> {
        self.last_where(|e| e.position as u64 <= position).map(|e| (e.offset, e.position as u64))
    }

    pub fn append(&mut self, offset: i64, position: u64) {
        self.push(OffsetEntry { offset, position: position as i64 });
    }

    /// Drop entries for offsets >= `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        self.truncate_while(|e| e.offset < offset);
    }

    /// Drop entries for batches starting at or after `position`.
    pub fn truncate_to_position(&mut self, position: u64) {
        self.truncate_while(|e| (e.position as u64) < position);
    }
}
