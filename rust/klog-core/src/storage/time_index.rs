//! `.timeindex`: sparse map from timestamp to offset. 12-byte entries (timestamp int64,
//! offset relative to the segment base int32), timestamps strictly increasing; each entry is
//! (max timestamp so far, last offset of the batch that holds it). The last entry of a
//! sealed segment is the segment's largest timestamp.

use std::path::PathBuf;

use super::error::StorageResult;
use super::index_file::{IndexFile, LoadOutcome};

pub const TIME_INDEX_ENTRY_SIZE: usize = 12;

#[inline]
fn decode(e: &[u8]) -> (i64, i32) {
    (
        i64::from_be_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]),
        i32::from_be_bytes([e[8], e[9], e[10], e[11]]),
    )
}

pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

impl TimeIndex {
    pub fn new(path: PathBuf, base_offset: i64) -> Self {
        TimeIndex { base_offset, file: IndexFile::new(path, TIME_INDEX_ENTRY_SIZE) }
    }

    pub fn file(&self) -> &IndexFile {
        &self.file
    }
    pub fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }
    pub fn is_loaded(&self) -> bool {
        self.file.is_loaded()
    }
    pub fn len(&self) -> usize {
        self.file.len()
    }
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// Load and check: timestamps strictly increasing, offsets non-decreasing and below
    /// `next_offset` (the segment's end).
    pub fn load(&mut self, next_offset: i64) -> StorageResult<LoadOutcome> {
        let base = self.base_offset;
        self.file.load(|raw| {
            let mut prev: Option<(i64, i32)> = None;
            for (i, e) in raw.chunks_exact(TIME_INDEX_ENTRY_SIZE).enumerate() {
                let (ts, rel) = decode(e);
                if rel < 0 || base + rel as i64 >= next_offset.max(base + 1) {
                    return i;
                }
                if let Some((pts, prel)) = prev {
                    if ts <= pts || rel < prel {
                        return i;
                    }
                }
                prev = Some((ts, rel));
            }
            raw.len() / TIME_INDEX_ENTRY_SIZE
        })
    }

    fn entry(&self, i: usize) -> (i64, i64) {
        let (ts, rel) = decode(self.file.entry(i));
        (ts, self.base_offset + rel as i64)
    }

    /// (timestamp, offset) of the last entry.
    pub fn last_entry(&self) -> Option<(i64, i64)> {
        let n = self.file.len();
        (n > 0).then(|| self.entry(n - 1))
    }

    /// Greatest entry with timestamp <= `ts`.
    pub fn lookup(&self, ts: i64) -> Option<(i64, i64)> {
        let n = self.file.len();
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).0 <= ts {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > 0).then(|| self.entry(lo - 1))
    }

    /// Append (timestamp, offset) if the timestamp is larger than the last entry's.
    pub fn maybe_append(&mut self, ts: i64, offset: i64) -> bool {
        if let Some((last_ts, last_off)) = self.last_entry() {
            if ts <= last_ts || offset < last_off {
                return false;
            }
        }
        let mut e = [0u8; TIME_INDEX_ENTRY_SIZE];
        e[..8].copy_from_slice(&ts.to_be_bytes());
        e[8..].copy_from_slice(&((offset - self.base_offset) as i32).to_be_bytes());
        self.file.append(&e);
        true
    }

    /// Drop entries for offsets >= `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        let n = self.file.len();
        let keep = (0..n).take_while(|&i| self.entry(i).1 < offset).count();
        self.file.truncate_entries(keep);
    }
}
