//! `.timeindex`: sparse map from timestamp to offset. 12-byte entries (timestamp int64,
//! offset relative to the segment base int32), timestamps strictly increasing; each entry is
//! (max timestamp so far, last offset of the batch that holds it). The last entry of a
//! sealed segment is the segment's largest timestamp.

use super::error::StorageResult;
use super::index_file::{FixedIndex, IndexEntry, LoadOutcome};

pub const TIME_INDEX_ENTRY_SIZE: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub offset: i64,
}

impl IndexEntry for TimeEntry {
    const SIZE: usize = TIME_INDEX_ENTRY_SIZE;
    #[inline(always)]
    fn decode(e: &[u8], base_offset: i64) -> Self {
        let ts = i64::from_be_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
        let rel = i32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        TimeEntry { timestamp: ts, offset: base_offset + rel as i64 }
    }
    #[inline]
    fn encode(&self, base_offset: i64, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&((self.offset - base_offset) as i32).to_be_bytes());
    }
}

pub type TimeIndex = FixedIndex<TimeEntry>;

impl FixedIndex<TimeEntry> {
    /// Load and check: timestamps strictly increasing, offsets non-decreasing and below
    /// `next_offset` (the segment's end).
    pub fn load(&mut self, next_offset: i64) -> StorageResult<LoadOutcome> {
        let base = self.base_offset();
        self.load_checked(|prev, e| {
            e.offset >= base
                && e.offset < next_offset.max(base + 1)
                && prev.is_none_or(|p| e.timestamp > p.timestamp && e.offset >= p.offset)
        })
    }

    /// (timestamp, offset) of the last entry.
    pub fn last(&self) -> Option<(i64, i64)> {
        self.last_entry().map(|e| (e.timestamp, e.offset))
    }

    /// Greatest entry with timestamp <= `ts`, as (timestamp, offset).
    pub fn lookup(&self, ts: i64) -> Option<(i64, i64)> {
        self.last_where(|e| e.timestamp <= ts).map(|e| (e.timestamp, e.offset))
    }

    /// Append (timestamp, offset) if the timestamp is larger than the last entry's.
    pub fn maybe_append(&mut self, ts: i64, offset: i64) -> bool {
        if let Some(last) = self.last_entry() {
            if ts <= last.timestamp || offset < last.offset {
                return false;
            }
        }
        self.push(TimeEntry { timestamp: ts, offset });
        true
    }

    /// Drop entries for offsets >= `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        self.truncate_while(|e| e.offset < offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::offset_index::OffsetIndex;

    #[test]
    fn both_indexes_round_trip_search_and_truncate_through_the_shared_plumbing() {
        let dir = std::env::temp_dir().join(format!("klog-fixed-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut oi = OffsetIndex::new(dir.join("a.index"), 100);
        let mut ti = TimeIndex::new(dir.join("a.timeindex"), 100);
        oi.file_mut().reset();
        ti.file_mut().reset();
        for i in 0..10i64 {
            oi.append(100 + i * 10 + 9, (i * 1000) as u64);
            assert!(ti.maybe_append(5_000 + i * 100, 100 + i * 10 + 9));
        }
        assert!(!ti.maybe_append(5_000, 300)); // not increasing: skipped
        assert_eq!(oi.lookup(99), (100, 0));
        assert_eq!(oi.lookup(135), (129, 2000));
        assert_eq!(oi.lookup_by_position(2500), Some((129, 2000)));
        assert_eq!(ti.lookup(5_250), Some((5_200, 129)));
        assert_eq!(ti.lookup(4_000), None);
        oi.file_mut().persist(false).unwrap();
        ti.file_mut().persist(false).unwrap();
        let mut oi2 = OffsetIndex::new(dir.join("a.index"), 100);
        let mut ti2 = TimeIndex::new(dir.join("a.timeindex"), 100);
        assert_eq!(oi2.load(10_000).unwrap(), LoadOutcome::Valid);
        assert_eq!(ti2.load(200).unwrap(), LoadOutcome::Valid);
        assert_eq!((oi2.len(), ti2.len()), (10, 10));
        assert_eq!(oi2.last(), Some((199, 9000)));
        oi2.truncate_to_position(3000);
        ti2.truncate_to_offset(130);
        assert_eq!((oi2.len(), ti2.len()), (3, 3));
        // Positions past the log's end are invalid: the index needs a rebuild.
        let mut oi3 = OffsetIndex::new(dir.join("a.index"), 100);
        assert!(matches!(oi3.load(5_000).unwrap(), LoadOutcome::Rebuild(_)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
