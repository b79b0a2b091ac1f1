//! The file under an offset or time index: fixed-size big-endian entries, loaded lazily
//! (memory-mapped read-only while unchanged, an owned buffer once entries are added).
//!
//! New entries live in memory and reach the file on `persist` (flush, roll, close). An index
//! carries no checksum and is rebuilt from the log by recovery, so it need not be written
//! before the log data it describes; this keeps no index descriptor open per partition and
//! makes an index append a memory write.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::error::{IoContext, StorageResult};
use super::fileio::pwrite_all_vectored;

enum Bytes {
    Owned(Vec<u8>),
    Mapped(Mmap),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped(m) => m,
        }
    }
}

/// What loading found: all entries valid, or a reason to rebuild the index from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    Valid,
    Rebuild(String),
}

pub struct IndexFile {
    path: PathBuf,
    entry_size: usize,
    data: Option<Bytes>,
    /// Valid entries in `data` (only meaningful once loaded).
    entries: usize,
    /// Leading entries known to be in the file exactly as in memory.
    persisted: usize,
    /// The file may hold bytes past `persisted` entries that must be cut.
    file_too_long: bool,
}

impl IndexFile {
    pub fn new(path: PathBuf, entry_size: usize) -> Self {
        IndexFile { path, entry_size, data: None, entries: 0, persisted: 0, file_too_long: false }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn is_loaded(&self) -> bool {
        self.data.is_some()
    }
    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    /// Raw bytes of the valid entries.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            Some(d) => &d.as_slice()[..self.entries * self.entry_size],
            None => &[],
        }
    }
    #[inline]
    pub fn entry(&self, i: usize) -> &[u8] {
        let s = self.entry_size;
        &self.bytes()[i * s..(i + 1) * s]
    }

    /// Load the file. `count_valid` returns how many leading entries are valid. A file whose
    /// size is not a whole number of entries, or with bytes past the valid entries (a zero
    /// tail or garbage), is reported as needing a rebuild: klog writes indexes exactly, so
    /// anything else means a crash or damage.
    pub fn load(&mut self, count_valid: impl Fn(&[u8]) -> usize) -> StorageResult<LoadOutcome> {
        let (bytes, existed) = match File::open(&self.path) {
            Ok(f) => {
                let len = f.metadata().ctx("stat index", &self.path)?.len() as usize;
                if len == 0 {
                    (Bytes::Owned(Vec::new()), true)
                } else {
                    // SAFETY: klog owns the file; it is only rewritten through `persist`,
                    // which first replaces this mapping with an owned copy.
                    let m = unsafe { Mmap::map(&f) }.ctx("mmap index", &self.path)?;
                    (Bytes::Mapped(m), true)
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Bytes::Owned(Vec::new()), false),
            Err(e) => return Err(e).ctx("open index", &self.path),
        };
        let raw = bytes.as_slice();
        let whole = raw.len() / self.entry_size;
        let valid = count_valid(&raw[..whole * self.entry_size]).min(whole);
        let outcome = if !existed {
            LoadOutcome::Rebuild("file is missing".into())
        } else if raw.len() % self.entry_size != 0 {
            LoadOutcome::Rebuild(format!(
                "size {} is not a multiple of the entry size {}",
                raw.len(),
                self.entry_size
            ))
        } else if valid < whole {
            LoadOutcome::Rebuild(format!("entry {valid} of {whole} is invalid or zero"))
        } else {
            LoadOutcome::Valid
        };
        self.file_too_long = raw.len() != valid * self.entry_size;
        self.entries = valid;
        self.persisted = valid;
        self.data = Some(bytes);
        Ok(outcome)
    }

    fn owned(&mut self) -> &mut Vec<u8> {
        let keep = self.entries * self.entry_size;
        if !matches!(self.data, Some(Bytes::Owned(_))) {
            let v = match &self.data {
                Some(d) => d.as_slice()[..keep].to_vec(),
                None => Vec::new(),
            };
            self.data = Some(Bytes::Owned(v));
        }
        match &mut self.data {
            Some(Bytes::Owned(v)) => {
                v.truncate(keep);
                v
            }
            _ => unreachable!("index data was just made owned"),
        }
    }

    /// Start an empty index (a new segment, or a rebuild). The file is cut on `persist`.
    pub fn reset(&mut self) {
        self.data = Some(Bytes::Owned(Vec::new()));
        self.entries = 0;
        self.persisted = 0;
        self.file_too_long = true;
    }

    /// Append one encoded entry (in memory; see `persist`).
    pub fn append(&mut self, entry: &[u8]) {
        debug_assert_eq!(entry.len(), self.entry_size);
        self.owned().extend_from_slice(entry);
        self.entries += 1;
    }

    /// Keep only the first `n` entries.
    pub fn truncate_entries(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let keep = n * self.entry_size;
        self.owned().truncate(keep);
        self.entries = n;
        if self.persisted > n {
            self.persisted = n;
            self.file_too_long = true;
        }
    }

    /// Whether memory holds entries the file lacks (or the file has extra bytes).
    pub fn is_dirty(&self) -> bool {
        self.is_loaded() && (self.persisted < self.entries || self.file_too_long)
    }

    /// Write entries the file lacks, cut extra bytes, optionally fsync.
    pub fn persist(&mut self, fsync: bool) -> StorageResult<()> {
        if !self.is_dirty() {
            return Ok(());
        }
        // The file is about to change under any mapping: switch to an owned copy first.
        self.owned();
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .ctx("open index for writing", &self.path)?;
        let s = self.entry_size;
        if self.file_too_long {
            f.set_len((self.persisted * s) as u64).ctx("truncate index", &self.path)?;
        }
        let tail = &self.bytes()[self.persisted * s..];
        pwrite_all_vectored(&f, (self.persisted * s) as u64, &[tail]).ctx("write index", &self.path)?;
        if fsync {
            f.sync_data().ctx("fsync index", &self.path)?;
        }
        self.persisted = self.entries;
        self.file_too_long = false;
        Ok(())
    }

    /// Forget the loaded entries (memory back to the page cache). Unpersisted entries are
    /// lost, so callers persist first.
    pub fn unload(&mut self) {
        self.data = None;
        self.entries = 0;
        self.persisted = 0;
        self.file_too_long = false;
    }

    pub fn delete(&mut self) -> StorageResult<()> {
        self.unload();
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).ctx("delete index", &self.path),
        }
    }
}

/// One fixed-width entry of an index file (`.index`: 8 bytes, `.timeindex`: 12 bytes), with
/// offsets stored relative to the segment's base offset.
pub trait IndexEntry: Copy {
    const SIZE: usize;
    fn decode(raw: &[u8], base_offset: i64) -> Self;
    fn encode(&self, base_offset: i64, out: &mut [u8]);
}

/// A sorted index of fixed-width entries over an `IndexFile`: the plumbing shared by the
/// offset and time indexes (loading with a validity check, binary search, append, truncate).
pub struct FixedIndex<E: IndexEntry> {
    base_offset: i64,
    file: IndexFile,
    _entry: std::marker::PhantomData<E>,
}

impl<E: IndexEntry> FixedIndex<E> {
    pub fn new(path: PathBuf, base_offset: i64) -> Self {
        FixedIndex { base_offset, file: IndexFile::new(path, E::SIZE), _entry: std::marker::PhantomData }
    }
    pub fn base_offset(&self) -> i64 {
        self.base_offset
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
    #[inline(always)]
    pub fn entry(&self, i: usize) -> E {
        E::decode(self.file.entry(i), self.base_offset)
    }
    pub fn last_entry(&self) -> Option<E> {
        let n = self.len();
        (n > 0).then(|| self.entry(n - 1))
    }

    /// Load the file, keeping the leading entries for which `valid(previous, entry)` holds.
    pub fn load_checked(&mut self, valid: impl Fn(Option<E>, E) -> bool) -> StorageResult<LoadOutcome> {
        let base = self.base_offset;
        self.file.load(|raw| {
            let mut prev: Option<E> = None;
            for (i, e) in raw.chunks_exact(E::SIZE).enumerate() {
                let e = E::decode(e, base);
                if !valid(prev, e) {
                    return i;
                }
                prev = Some(e);
            }
            raw.len() / E::SIZE
        })
    }

    /// How many leading entries satisfy `pred` (which must hold for a prefix: entries are
    /// sorted by the key it tests).
    #[inline]
    pub fn partition_point(&self, pred: impl Fn(&E) -> bool) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.entry(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The last entry satisfying `pred` (a prefix predicate, as for `partition_point`).
    pub fn last_where(&self, pred: impl Fn(&E) -> bool) -> Option<E> {
        let n = self.partition_point(pred);
        (n > 0).then(|| self.entry(n - 1))
    }

    /// Keep only the leading entries satisfying `pred` (a prefix predicate).
    pub fn truncate_while(&mut self, pred: impl Fn(&E) -> bool) {
        let keep = self.partition_point(pred);
        self.file.truncate_entries(keep);
    }

    /// Append an entry (in memory; the file is written on `persist`).
    pub fn push(&mut self, e: E) {
        let mut raw = [0u8; 16];
        let raw = &mut raw[..E::SIZE];
        e.encode(self.base_offset, raw);
        self.file.append(raw);
    }
}
