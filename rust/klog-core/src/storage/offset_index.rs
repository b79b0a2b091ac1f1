//! `.index`: sparse map from offset to file position. 8-byte entries (offset relative to the
//! segment base int32, position int32), one per batch once `index.interval.bytes` were
//! appended since the previous entry. Entry = (last offset of the batch, start of the batch),
//! the pairing Kafka's `DumpLogSegments --index-sanity-check` verifies.

use std::path::PathBuf;

use super::error::StorageResult;
use super::index_file::{IndexFile, LoadOutcome};

pub const OFFSET_INDEX_ENTRY_SIZE: usize = 8;

#[inline]
fn decode(e: &[u8]) -> (i32, i32) {
    (
        i32::from_be_bytes([e[0], e[1], e[2], e[3]]),
        i32::from_be_bytes([e[4], e[5], e[6], e[7]]),
    )
}

pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

impl OffsetIndex {
    pub fn new(path: PathBuf, base_offset: i64) -> Self {
        OffsetIndex { base_offset, file: IndexFile::new(path, OFFSET_INDEX_ENTRY_SIZE) }
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

    /// Load and check: offsets and positions strictly increasing, positions inside the log.
    pub fn load(&mut self, log_size: u64) -> StorageResult<LoadOutcome> {
        self.file.load(|raw| {
            let mut prev: Option<(i32, i32)> = None;
            for (i, e) in raw.chunks_exact(OFFSET_INDEX_ENTRY_SIZE).enumerate() {
                let (rel, pos) = decode(e);
                if rel < 0 || pos < 0 || pos as u64 >= log_size.max(1) {
                    return i;
                }
                if let Some((pr, pp)) = prev {
                    if rel <= pr || pos <= pp {
                        return i;
                    }
                }
                prev = Some((rel, pos));
            }
            raw.len() / OFFSET_INDEX_ENTRY_SIZE
        })
    }

    fn entry(&self, i: usize) -> (i64, u64) {
        let (rel, pos) = decode(self.file.entry(i));
        (self.base_offset + rel as i64, pos as u64)
    }

    pub fn last_entry(&self) -> Option<(i64, u64)> {
        let n = self.file.len();
        (n > 0).then(|| self.entry(n - 1))
    }

    /// Greatest entry with offset <= `target`, or the segment start.
    pub fn lookup(&self, target: i64) -> (i64, u64) {
        let n = self.file.len();
        // partition_point: first index whose offset > target.
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).0 <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            (self.base_offset, 0)
        } else {
            self.entry(lo - 1)
        }
    }

    /// Greatest entry with position <= `position`, if any.
    pub fn lookup_by_position(&self, position: u64) -> Option<(i64, u64)> {
        let n = self.file.len();
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).1 <= position {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > 0).then(|| self.entry(lo - 1))
    }

    pub fn append(&mut self, offset: i64, position: u64) {
        let rel = (offset - self.base_offset) as i32;
        let mut e = [0u8; OFFSET_INDEX_ENTRY_SIZE];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&(position as i32).to_be_bytes());
        self.file.append(&e);
    }

    /// Drop entries for offsets >= `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        let n = self.file.len();
        let keep = (0..n).take_while(|&i| self.entry(i).0 < offset).count();
        self.file.truncate_entries(keep);
    }

    /// Drop entries for batches starting at or after `position`.
    pub fn truncate_to_position(&mut self, position: u64) {
        let n = self.file.len();
        let keep = (0..n).take_while(|&i| self.entry(i).1 < position).count();
        self.file.truncate_entries(keep);
    }
}
