//! One segment: a `.log` file of record batches exactly as on the wire, plus its `.index`
//! and `.timeindex`, all named by the 20-digit base offset. A segment knows nothing of the
//! network or of other segments; the partition log decides when to roll, read and delete.
//!
//! Descriptors and indexes are opened lazily: a sealed segment that is never read costs a
//! few paths in memory and no descriptor.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;


use crate::batch::header::{validate_stored_batch, BatchHeader, RECORD_BATCH_OVERHEAD};

use super::error::{IoContext, StorageError, StorageResult};
use super::events::warn;
use super::fd_budget::{FdBudget, FdSlot};
use super::fileio::{pread_some, pwrite_all_vectored};
use super::index_file::LoadOutcome;
use super::offset_index::OffsetIndex;
use super::time_index::TimeIndex;

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Suffix of segment files waiting for `file.delete.delay.ms` before removal.
pub const DELETED_SUFFIX: &str = ".deleted";
/// Kafka's "no timestamp".
pub const NO_TIMESTAMP: i64 = -1;
/// Bytes read at once when walking batch headers: the first read is small (a lookup usually
/// needs one or two headers and should not drag 8 KiB of cold data through the caches), each
/// refill doubles up to the maximum (a walk over many small batches).
const HEADER_READ_FIRST: usize = 512;
const HEADER_READ_MAX: usize = 16 * 1024;
/// Bytes read at once when checking the CRCs of data about to be served for the first time.
const VERIFY_READ_CHUNK: usize = 1 << 20;

/// Whether the batch of `size` bytes at `at` ends by `end`, the end of the range being verified
/// (a batch boundary); checked before a read sized by `size`, a length the CRC does not cover.
fn batch_within(at: u64, size: usize, end: u64) -> Result<(), String> {
    if size as u64 > end.saturating_sub(at) {
        return Err(format!("batch of {size} bytes runs past the end of the range (byte {end})"));
    }
    Ok(())
}

/// Disjoint byte ranges of a segment remembered as checked (a few consumers reading at
/// different places); beyond this many the smallest is forgotten (checked again if re-read).
const MAX_VERIFIED_RANGES: usize = 8;

/// Byte ranges of a `.log` whose batches were checked (header sanity, CRC-32C, offsets
/// increasing): written by this process, or validated by recovery or by an earlier read.
/// Every range starts and ends at a batch boundary.
#[derive(Debug, Default, Clone)]
pub struct VerifiedRanges {
    ranges: Vec<(u64, u64)>,
}

impl VerifiedRanges {
    /// The range holding `pos` (start <= pos < end), or ending at it.
    fn covering(&self, pos: u64) -> Option<(u64, u64)> {
        self.ranges.iter().copied().find(|&(s, e)| s <= pos && pos <= e)
    }
    /// Whether [start, end) was checked.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        start >= end || self.ranges.iter().any(|&(s, e)| s <= start && end <= e)
    }
    /// End of the checked range holding `pos` (`pos` itself if none).
    fn checked_until(&self, pos: u64) -> u64 {
        self.covering(pos).map_or(pos, |(_, e)| e)
    }
    pub fn add(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // The common case, an append right after the data written before: extend in place.
        if let Some(last) = self.ranges.last_mut() {
            if last.1 == start {
                last.1 = end;
                return;
            }
        }
        let (mut s, mut e) = (start, end);
        self.ranges.retain(|&(a, b)| {
            if b < s || a > e {
                true
            } else {
                s = s.min(a);
                e = e.max(b);
                false
            }
        });
        let at = self.ranges.partition_point(|&(a, _)| a < s);
        self.ranges.insert(at, (s, e));
        if self.ranges.len() > MAX_VERIFIED_RANGES {
            if let Some(i) = (0..self.ranges.len()).min_by_key(|&i| self.ranges[i].1 - self.ranges[i].0) {
                self.ranges.remove(i);
            }
        }
    }
    /// Forget everything at or after `pos` (the file was cut there).
    pub fn truncate(&mut self, pos: u64) {
        self.ranges.retain(|&(s, _)| s < pos);
        for r in self.ranges.iter_mut() {
            r.1 = r.1.min(pos);
        }
    }
    pub fn clear(&mut self) {
        self.ranges.clear();
    }
}

pub fn segment_file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// Parse `00000000000000000123.log` into 123.
pub fn parse_segment_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// A batch about to be written: its rewritten 61-byte header and the bytes after it.
pub struct PreparedBatch<'a> {
    pub header: [u8; RECORD_BATCH_OVERHEAD],
    pub body: &'a [u8],
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

impl PreparedBatch<'_> {
    pub fn size(&self) -> usize {
        RECORD_BATCH_OVERHEAD + self.body.len()
    }
}

/// What a scan of the whole log file found (recovery or index rebuild).
/// What recovery checks beyond each batch's CRC and size ([`Segment::scan_checked`]).
#[derive(Debug, Clone, Copy)]
pub struct TailChecks {
    /// Batches expected at this offset or later are checked (the recovery point: below it the
    /// data was flushed, and a compacted-then-retyped log may hold gaps there).
    pub from: i64,
    /// A compacted log has gaps between batches.
    pub allow_gaps: bool,
    /// The highest leader epoch of the batches before this segment.
    pub last_epoch: i32,
    /// The base offset of the next segment (None: this is the active one). A zero tail is
    /// preallocated space (trimmed, nothing dropped) only in the active segment, or in a sealed one
    /// whose batches reach the next segment (a roll's trim lost in a crash). Otherwise the zeros are
    /// batches a power loss never wrote (a roll does not fsync the old segment): dropped bytes, so
    /// recovery deletes the later segments rather than leave a hole in the offsets (as Kafka does).
    pub next_base: Option<i64>,
}

impl TailChecks {
    pub const NONE: TailChecks = TailChecks { from: i64::MAX, allow_gaps: true, last_epoch: -1, next_base: None };
}

#[derive(Debug, Clone)]
pub struct ScanResult {
    pub valid_bytes: u64,
    pub dropped_bytes: u64,
    /// Offset after the last valid batch (the segment base if none).
    pub next_offset: i64,
    /// `(epoch, base offset)` of every batch where the leader epoch changed.
    pub epochs: Vec<(i32, i64)>,
    pub batches: u64,
}

/// Reads batch headers at arbitrary positions through a small buffer.
struct HeaderReader<'a> {
    file: &'a File,
    path: &'a Path,
    limit: u64,
    buf: Vec<u8>,
    start: u64,
    chunk: usize,
}

impl<'a> HeaderReader<'a> {
    fn new(file: &'a File, path: &'a Path, limit: u64) -> Self {
        HeaderReader { file, path, limit, buf: Vec::new(), start: 0, chunk: HEADER_READ_FIRST }
    }

    /// Header of the batch at `pos`; `None` at the limit. A header that does not parse or a
    /// batch running past the limit is corruption (the log only ever holds whole batches).
    fn at(&mut self, pos: u64) -> StorageResult<Option<BatchHeader>> {
        if pos >= self.limit {
            return Ok(None);
        }
        if pos + RECORD_BATCH_OVERHEAD as u64 > self.limit {
            return Err(StorageError::corrupt(
                self.path,
                pos,
                format!("{} bytes left, less than a batch header", self.limit - pos),
            ));
        }
        let have = pos >= self.start && pos + RECORD_BATCH_OVERHEAD as u64 <= self.start + self.buf.len() as u64;
        if !have {
            let len = (self.limit - pos).min(self.chunk as u64) as usize;
            self.chunk = (self.chunk * 2).min(HEADER_READ_MAX);
            self.buf.resize(len, 0);
            let n = pread_some(self.file, &mut self.buf, pos).ctx("read", self.path)?;
            self.buf.truncate(n);
            self.start = pos;
            if n < RECORD_BATCH_OVERHEAD {
                return Err(StorageError::corrupt(self.path, pos, "file shorter than expected"));
            }
        }
        let off = (pos - self.start) as usize;
        let h = BatchHeader::parse(&self.buf[off..], pos as usize)
            .map_err(|e| StorageError::corrupt(self.path, pos, e.to_string()))?;
        if pos + h.size() as u64 > self.limit {
            return Err(StorageError::corrupt(
                self.path,
                pos,
                format!("batch of {} bytes runs past the end of the data at {}", h.size(), self.limit),
            ));
        }
        Ok(Some(h))
    }
}

pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    /// The `.log` descriptor, opened on demand; a sealed segment's may be closed by the
    /// manager's descriptor budget when unused (and is reopened on the next use).
    log: Arc<FdSlot>,
    /// The active segment keeps its descriptor here too: appends use it without a lock, and
    /// the extra reference keeps the budget from ever closing it.
    pinned: Option<Arc<File>>,
    fd_budget: Option<Arc<FdBudget>>,
    size: Option<u64>,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    indexes_ready: bool,
    /// Offset after the last batch: exact for the active segment, an upper bound (the next
    /// segment's base) for sealed ones.
    end_offset: i64,
    /// Set up for appends: indexes loaded, counters below valid.
    active_ready: bool,
    bytes_since_index: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// Max timestamp of the first batch (what `segment.ms` counts from), once known.
    first_batch_timestamp: Option<i64>,
    created_ms: i64,
    /// Position of damage found outside recovery: nothing from here on is served.
    corrupt_at: Option<u64>,
    /// Log bytes written but not fsynced.
    unflushed: bool,
    /// What may be served without checking CRCs first.
    verified: VerifiedRanges,
    /// The file was preallocated: it is longer than the data until trimmed.
    preallocated: bool,
}

/// Allocate `bytes` for `file` (blocks reserved on file systems that can; a sparse length
/// elsewhere, as Kafka's `RandomAccessFile.setLength`).
fn preallocate_file(file: &File, bytes: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: plain syscall on an open descriptor.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, bytes as libc::off_t) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL)) {
            return Err(e); // e.g. ENOSPC: the roll fails, nothing is written into a half-made file
        }
    }
    file.set_len(bytes)
}

impl Segment {
    fn paths(dir: &Path, base: i64) -> (PathBuf, PathBuf, PathBuf) {
        (
            dir.join(segment_file_name(base, LOG_SUFFIX)),
            dir.join(segment_file_name(base, INDEX_SUFFIX)),
            dir.join(segment_file_name(base, TIME_INDEX_SUFFIX)),
        )
    }

    /// A segment of existing files, nothing opened yet.
    pub fn lazy(dir: &Path, base_offset: i64, end_offset: i64) -> Self {
        let (log_path, idx, tidx) = Self::paths(dir, base_offset);
        Segment {
            base_offset,
            log_path,
            log: Arc::new(FdSlot::default()),
            pinned: None,
            fd_budget: None,
            size: None,
            offset_index: OffsetIndex::new(idx, base_offset),
            time_index: TimeIndex::new(tidx, base_offset),
            indexes_ready: false,
            end_offset,
            active_ready: false,
            bytes_since_index: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
            created_ms: 0,
            corrupt_at: None,
            unflushed: false,
            verified: VerifiedRanges::default(),
            preallocated: false,
        }
    }

    /// Create the files of a new, empty active segment (an existing empty `.log` is reused;
    /// a non-empty one is an error: offsets must never be assigned twice).
    ///
    /// With `preallocate` (Kafka's `preallocate=true`), the file's blocks for that many bytes are
    /// allocated up front (fewer extent updates and no fragmentation while it fills); the
    /// zero tail is trimmed when the segment is sealed or closed, and recovery trims it too.
    pub fn create(dir: &Path, base_offset: i64, now_ms: i64, preallocate: Option<u64>) -> StorageResult<Self> {
        let mut s = Self::lazy(dir, base_offset, base_offset);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&s.log_path)
            .ctx("create segment", &s.log_path)?;
        let len = f.metadata().ctx("stat", &s.log_path)?.len();
        if len != 0 {
            return Err(StorageError::corrupt(
                &s.log_path,
                0,
                format!("new segment file already holds {len} bytes"),
            ));
        }
        if let Some(bytes) = preallocate.filter(|&b| b > 0) {
            preallocate_file(&f, bytes).ctx("preallocate segment", &s.log_path)?;
            s.preallocated = true;
        }
        let f = Arc::new(f);
        s.log.set(Some(f.clone()));
        s.pinned = Some(f);
        s.size = Some(0);
        s.offset_index.file_mut().reset();
        s.time_index.file_mut().reset();
        s.offset_index.file_mut().persist(false)?;
        s.time_index.file_mut().persist(false)?;
        s.indexes_ready = true;
        s.active_ready = true;
        s.created_ms = now_ms;
        Ok(s)
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }
    pub fn set_end_offset(&mut self, end: i64) {
        self.end_offset = end;
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn corrupt_at(&self) -> Option<u64> {
        self.corrupt_at
    }
    pub fn offset_index_len(&self) -> usize {
        self.offset_index.len()
    }
    pub fn time_index_len(&self) -> usize {
        self.time_index.len()
    }

    /// Count this segment's descriptor against `budget` whenever it is sealed and open.
    pub fn with_fd_budget(mut self, budget: Option<Arc<FdBudget>>) -> Self {
        self.fd_budget = budget;
        self
    }

    /// The `.log` file, opened on first use (and again after the descriptor budget closed it).
    pub fn log_file(&mut self) -> StorageResult<Arc<File>> {
        if let Some(f) = &self.pinned {
            return Ok(f.clone());
        }
        if let Some(f) = self.log.get() {
            if let Some(b) = &self.fd_budget {
                b.touch(&self.log);
            }
            return Ok(f);
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.log_path)
            .ctx("open segment", &self.log_path)?;
        let f = Arc::new(f);
        self.log.set(Some(f.clone()));
        if let Some(b) = &self.fd_budget {
            b.register(&self.log);
        }
        Ok(f)
    }

    /// Whether the `.log` descriptor is open (for tests and stats).
    pub fn is_log_open(&self) -> bool {
        self.log.is_open()
    }

    /// Keep the descriptor for appends (the active segment).
    fn pin(&mut self) -> StorageResult<()> {
        if self.pinned.is_none() {
            let f = self.log_file()?;
            self.pinned = Some(f);
        }
        Ok(())
    }

    /// No longer active: the descriptor counts against the budget like any sealed segment's.
    fn unpin(&mut self) {
        if self.pinned.take().is_some() {
            if let Some(b) = &self.fd_budget {
                b.register(&self.log);
            }
        }
    }

    /// Bytes in the `.log` file.
    pub fn size(&mut self) -> StorageResult<u64> {
        if let Some(s) = self.size {
            return Ok(s);
        }
        let len = match self.pinned.clone().or_else(|| self.log.get()) {
            Some(f) => f.metadata().ctx("stat", &self.log_path)?.len(),
            None => fs::metadata(&self.log_path).ctx("stat", &self.log_path)?.len(),
        };
        self.size = Some(len);
        Ok(len)
    }

    /// Readable limit: the size, or the first damaged byte.
    fn limit(&mut self) -> StorageResult<u64> {
        let size = self.size()?;
        Ok(self.corrupt_at.map_or(size, |c| c.min(size)))
    }

    /// Find the end offset of the (active) segment cheaply, without keeping anything open:
    /// the last offset-index entry, then a walk over the headers after it. `None` if the
    /// tail does not parse (the caller then recovers the segment).
    pub fn probe_end_offset(&mut self) -> StorageResult<Option<i64>> {
        let f = match File::open(&self.log_path) {
            Ok(f) => f,
            Err(e) => return Err(e).ctx("open segment", &self.log_path),
        };
        let size = f.metadata().ctx("stat", &self.log_path)?.len();
        self.size = Some(size);
        if size == 0 {
            self.end_offset = self.base_offset;
            return Ok(Some(self.base_offset));
        }
        let mut start = 0u64;
        let idx_path = self.offset_index.file().path().to_path_buf();
        if let Ok(idx) = File::open(&idx_path) {
            let len = idx.metadata().map(|m| m.len()).unwrap_or(0);
            if len >= 8 && len % 8 == 0 {
                let mut e = [0u8; 8];
                if super::fileio::pread_exact(&idx, &mut e, len - 8).is_ok() {
                    let rel = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
                    let pos = i32::from_be_bytes([e[4], e[5], e[6], e[7]]);
                    if rel >= 0 && pos >= 0 && (pos as u64) < size {
                        start = pos as u64;
                    }
                }
            }
        }
        let mut r = HeaderReader::new(&f, &self.log_path, size);
        let mut pos = start;
        let mut end = None;
        loop {
            match r.at(pos) {
                Ok(Some(h)) => {
                    if h.base_offset < self.base_offset {
                        return Ok(None);
                    }
                    end = Some(h.next_offset());
                    pos += h.size() as u64;
                }
                Ok(None) => break,
                Err(_) => return Ok(None),
            }
        }
        match end {
            Some(e) => {
                self.end_offset = e;
                Ok(Some(e))
            }
            None => Ok(None),
        }
    }

    /// Load both indexes if not yet loaded. A missing, short or inconsistent index is
    /// rebuilt from the log (reported as a warning); damage found while rebuilding marks the
    /// segment corrupt from there on (outside recovery, klog never cuts data silently).
    pub fn ensure_indexes(&mut self, index_interval: u64) -> StorageResult<()> {
        if self.indexes_ready {
            return Ok(());
        }
        let size = self.size()?;
        let a = self.offset_index.load(size)?;
        let b = self.time_index.load(self.end_offset.max(self.base_offset + 1))?;
        self.indexes_ready = true;
        let reason = match (a, b) {
            (LoadOutcome::Valid, LoadOutcome::Valid) => None,
            (LoadOutcome::Rebuild(r), _) => Some(format!("{}: {r}", self.offset_index.file().path().display())),
            (_, LoadOutcome::Rebuild(r)) => Some(format!("{}: {r}", self.time_index.file().path().display())),
        };
        if let Some(reason) = reason {
            let res = self.scan(false, index_interval)?;
            warn(format!(
                "rebuilt indexes of {} ({} batches, {} bytes) because {reason}",
                self.log_path.display(),
                res.batches,
                res.valid_bytes
            ));
            self.persist_indexes(false)?;
        }
        Ok(())
    }

    /// Read every batch of the `.log`, checking CRCs and offsets, and rebuild both indexes.
    /// With `truncate` (recovery), cut the file at the first invalid byte; otherwise mark
    /// the segment corrupt from there. Either way one warning names file, offset and bytes.
    pub fn scan(&mut self, truncate: bool, index_interval: u64) -> StorageResult<ScanResult> {
        self.scan_checked(truncate, index_interval, &TailChecks::NONE)
    }

    /// [`Self::scan`] that also refuses, from `checks.from` on, what a replica's own appends never
    /// write: a gap before a batch (unless the log is compacted) or a leader epoch below an earlier
    /// batch's. A batch's base offset and leader epoch lie outside its CRC, so a damaged one passes
    /// the CRC check and would otherwise leave a hole a follower never fetches again.
    pub fn scan_checked(&mut self, truncate: bool, index_interval: u64, checks: &TailChecks) -> StorageResult<ScanResult> {
        let size = self.size()?;
        let file = self.log_file()?;
        self.offset_index.file_mut().reset();
        self.time_index.file_mut().reset();
        self.indexes_ready = true;
        self.bytes_since_index = 0;
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        self.first_batch_timestamp = None;
        let map = if size > 0 {
            // SAFETY: klog is the only writer of its segment files and does not truncate this
            // one while the mapping lives (it is dropped at the end of this function).
            Some(unsafe { memmap2::MmapOptions::new().populate().map(&*file) }.ctx("mmap segment", &self.log_path)?)
        } else {
            None
        };
        let data: &[u8] = map.as_deref().unwrap_or(&[]);
        let data = &data[..(size as usize).min(data.len())];
        let mut pos = 0usize;
        let mut next_offset = self.base_offset;
        let mut epochs: Vec<(i32, i64)> = Vec::new();
        let mut batches = 0u64;
        let mut failure: Option<String> = None;
        let mut last_epoch = checks.last_epoch;
        while pos < data.len() {
            match validate_stored_batch(&data[pos..], pos) {
                Ok(h) => {
                    if h.base_offset < next_offset {
                        failure = Some(format!(
                            "batch base offset {} is below the expected {next_offset}",
                            h.base_offset
                        ));
                        break;
                    }
                    let checked = next_offset >= checks.from;
                    if checked && !checks.allow_gaps && h.base_offset > next_offset {
                        failure = Some(format!(
                            "batch base offset {} is above the expected {next_offset} (a gap in a log that is not compacted)",
                            h.base_offset
                        ));
                        break;
                    }
                    if checked && h.partition_leader_epoch >= 0 && h.partition_leader_epoch < last_epoch {
                        failure = Some(format!(
                            "batch leader epoch {} is below the epoch {last_epoch} of an earlier batch",
                            h.partition_leader_epoch
                        ));
                        break;
                    }
                    last_epoch = last_epoch.max(h.partition_leader_epoch);
                    if h.last_offset() - self.base_offset > i32::MAX as i64 {
                        failure = Some(format!("batch offset {} too far from segment base", h.last_offset()));
                        break;
                    }
                    self.index_batch(pos as u64, h.last_offset(), h.max_timestamp, h.size() as u64, index_interval);
                    if self.first_batch_timestamp.is_none() {
                        self.first_batch_timestamp = Some(h.max_timestamp);
                    }
                    if epochs.last().is_none_or(|&(e, _)| h.partition_leader_epoch > e) && h.partition_leader_epoch >= 0 {
                        epochs.push((h.partition_leader_epoch, h.base_offset));
                    }
                    next_offset = h.next_offset();
                    pos += h.size();
                    batches += 1;
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        let mut dropped = data.len() - pos;
        // A zero tail of the active segment is preallocated space (`preallocate=true`) never
        // written: not data. In a sealed segment it is lost data (see `TailChecks::zero_tail_is_space`).
        let all_zero = failure.is_some() && truncate && data[pos..].iter().all(|&b| b == 0);
        let zero_tail = all_zero && checks.next_base.is_none_or(|n| next_offset >= n);
        if zero_tail {
            dropped = 0;
        } else if all_zero {
            failure = Some(format!(
                "{dropped} bytes of zeros in a sealed segment whose batches end before the next segment's base {} (never written)",
                checks.next_base.unwrap_or(next_offset)
            ));
        }
        drop(map);
        // As at seal/close: the last time-index entry is the segment's largest timestamp.
        if self.max_timestamp >= 0 {
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        }
        if zero_tail {
            file.set_len(pos as u64).ctx("trim segment", &self.log_path)?;
            warn(format!(
                "recovery trimmed {} at byte {pos} (offset {next_offset}): {} bytes of preallocated zeros, no data",
                self.log_path.display(),
                size - pos as u64
            ));
            self.size = Some(pos as u64);
            self.preallocated = false;
        } else if let Some(reason) = &failure {
            if truncate {
                file.set_len(pos as u64).ctx("truncate segment", &self.log_path)?;
                self.size = Some(pos as u64);
                warn(format!(
                    "recovery truncated {} at byte {pos} (offset {next_offset}), dropping {dropped} bytes: {reason}",
                    self.log_path.display()
                ));
            } else {
                self.corrupt_at = Some(pos as u64);
                warn(format!(
                    "corrupt segment {} at byte {pos} (offset {next_offset}); {dropped} bytes after it will not be served: {reason}",
                    self.log_path.display()
                ));
            }
        }
        if truncate || failure.is_none() {
            self.corrupt_at = None;
        }
        self.verified.clear();
        self.verified.add(0, pos as u64);
        if truncate {
            // What recovery kept may be only in the page cache: the next flush syncs it.
            self.unflushed = true;
        }
        self.end_offset = next_offset;
        Ok(ScanResult { valid_bytes: pos as u64, dropped_bytes: dropped as u64, next_offset, epochs, batches })
    }

    /// Index maintenance for one batch at `pos` (Kafka's rule: an entry when more than
    /// `index_interval` bytes were appended since the last one).
    fn index_batch(&mut self, pos: u64, last_offset: i64, max_ts: i64, size: u64, index_interval: u64) {
        if max_ts > self.max_timestamp {
            self.max_timestamp = max_ts;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_index > index_interval {
            self.offset_index.append(last_offset, pos);
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += size;
    }

    /// Prepare the segment for appends after it was opened from disk: load indexes, find
    /// the max timestamp and counters by walking the batches after the last index entry.
    /// A tail that does not parse is recovered (truncated) here.
    pub fn activate(&mut self, index_interval: u64) -> StorageResult<()> {
        if self.active_ready {
            return Ok(());
        }
        self.ensure_indexes(index_interval)?;
        let size = self.size()?;
        let file = self.log_file()?;
        let start = self.offset_index.last().map_or(0, |e| e.1);
        if let Some((ts, off)) = self.time_index.last() {
            self.max_timestamp = ts;
            self.offset_of_max_timestamp = off;
        }
        let mut r = HeaderReader::new(&file, &self.log_path, size);
        let mut pos = start;
        let mut end = self.base_offset;
        let mut damaged = false;
        loop {
            match r.at(pos) {
                Ok(Some(h)) => {
                    if pos == 0 {
                        self.first_batch_timestamp = Some(h.max_timestamp);
                    }
                    if h.max_timestamp > self.max_timestamp {
                        self.max_timestamp = h.max_timestamp;
                        self.offset_of_max_timestamp = h.last_offset();
                    }
                    end = h.next_offset();
                    pos += h.size() as u64;
                }
                Ok(None) => break,
                Err(_) => {
                    damaged = true;
                    break;
                }
            }
        }
        if damaged || self.corrupt_at.is_some() {
            self.scan(true, index_interval)?;
        } else {
            if pos > 0 {
                self.end_offset = end;
            }
            self.bytes_since_index = size - start;
            if start > 0 || self.first_batch_timestamp.is_none() {
                let mut h0 = HeaderReader::new(&file, &self.log_path, size);
                if let Ok(Some(h)) = h0.at(0) {
                    self.first_batch_timestamp = Some(h.max_timestamp);
                }
            }
        }
        self.pin()?;
        self.active_ready = true;
        Ok(())
    }

    /// Append prepared batches at the end of the file in one vectored write. On failure the
    /// file is cut back to its previous size and nothing else changes.
    pub fn append(&mut self, batches: &[PreparedBatch<'_>], index_interval: u64) -> StorageResult<()> {
        self.append_checked(batches, index_interval, None)
    }

    /// `append`, running `check` (the CRC verification of a large append) on a second thread
    /// while the bytes are written; if it fails, the written bytes are cut away again and
    /// nothing was appended. Readers never see the bytes before this returns Ok.
    pub fn append_checked(
        &mut self,
        batches: &[PreparedBatch<'_>],
        index_interval: u64,
        check: Option<&(dyn Fn() -> StorageResult<()> + Sync)>,
    ) -> StorageResult<()> {
        debug_assert!(self.active_ready);
        let start = self.size()?;
        self.pin()?;
        let Some(file) = self.pinned.as_deref() else {
            return Err(StorageError::Closed(self.log_path.display().to_string()));
        };
        let write = || match batches {
            // The usual produce request: one batch, no allocation.
            [b] => pwrite_all_vectored(file, start, &[&b.header, b.body]),
            _ => {
                let mut bufs: Vec<&[u8]> = Vec::with_capacity(batches.len() * 2);
                for b in batches {
                    bufs.push(&b.header);
                    bufs.push(b.body);
                }
                pwrite_all_vectored(file, start, &bufs)
            }
        };
        let (written, checked) = match check {
            None => (write(), Ok(())),
            Some(check) => std::thread::scope(|scope| {
                let verifier = scope.spawn(check);
                let written = write();
                let checked = verifier.join().unwrap_or_else(|_| {
                    Err(StorageError::InvalidArgument("batch verification thread panicked".into()))
                });
                (written, checked)
            }),
        };
        if let Err(e) = written {
            // Leave no partial batch behind (disk full, file size limit, I/O error).
            let _ = file.set_len(start);
            return Err(StorageError::io("append to", &self.log_path, e));
        }
        if let Err(e) = checked {
            let _ = file.set_len(start);
            return Err(e);
        }
        let mut pos = start;
        for b in batches {
            if self.first_batch_timestamp.is_none() {
                self.first_batch_timestamp = Some(b.max_timestamp);
            }
            self.index_batch(pos, b.last_offset, b.max_timestamp, b.size() as u64, index_interval);
            pos += b.size() as u64;
        }
        self.size = Some(pos);
        // Validated before they were written.
        self.verified.add(start, pos);
        if let Some(last) = batches.last() {
            self.end_offset = last.last_offset + 1;
        }
        self.unflushed = true;
        Ok(())
    }

    /// Position and header of the first batch whose last offset is >= `offset`.
    pub fn find_batch(&mut self, offset: i64, index_interval: u64) -> StorageResult<Option<(u64, BatchHeader)>> {
        self.ensure_indexes(index_interval)?;
        let limit = self.limit()?;
        let file = self.log_file()?;
        let (_, start) = self.offset_index.lookup(offset);
        let mut r = HeaderReader::new(&file, &self.log_path, limit);
        let mut pos = start;
        while let Some(h) = r.at(pos)? {
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.size() as u64;
        }
        Ok(None)
    }

    /// The byte range of whole batches to serve for a read starting at `offset`: batches
    /// with last offset < `upper` only, at most `max_bytes` unless `min_one_batch` lets the
    /// first batch through (KIP-74). `None` if this segment holds nothing at or after
    /// `offset`; an empty range if the first batch is not visible.
    pub fn read_range(
        &mut self,
        offset: i64,
        upper: i64,
        max_bytes: u64,
        min_one_batch: bool,
        index_interval: u64,
    ) -> StorageResult<Option<(u64, u64)>> {
        let Some((start, first)) = self.find_batch(offset, index_interval)? else {
            if let Some(c) = self.corrupt_at {
                if offset < self.end_offset {
                    // The offset lies in or after damaged bytes: never skip to later data.
                    return Err(StorageError::corrupt(
                        &self.log_path,
                        c,
                        format!("offset {offset} is in or after damaged data; not served"),
                    ));
                }
            }
            return Ok(None);
        };
        if first.last_offset() >= upper {
            return Ok(Some((start, 0)));
        }
        let limit = self.limit()?;
        let file = self.log_file()?;
        // End of the visible data in this segment.
        let visible_end = if upper >= self.end_offset {
            limit
        } else {
            match self.find_batch(upper, index_interval)? {
                Some((p, _)) => p,
                None => limit,
            }
        };
        let wanted_end = start.saturating_add(max_bytes);
        let target = wanted_end.min(visible_end);
        // Walk the headers before `target`, from the nearest indexed batch: finds the last
        // batch boundary <= target and checks that the batches there chain up (damage on
        // the way is reported, not served). Cost: at most ~index.interval.bytes of headers.
        let mut pos = match self.offset_index.lookup_by_position(target) {
            Some((_, p)) if p > start => p,
            _ => start,
        };
        let mut r = HeaderReader::new(&file, &self.log_path, visible_end);
        while pos < target {
            let Some(h) = r.at(pos)? else { break };
            if pos + h.size() as u64 > target {
                break;
            }
            pos += h.size() as u64;
        }
        let end = if pos == start && min_one_batch { start + first.size() as u64 } else { pos };
        // Damage inside the range cuts it short (the intact batches before it are served);
        // damage at its start is an error.
        let end = self.verify_range(start, end, first.base_offset)?;
        Ok(Some((start, end - start)))
    }

    /// Check the batches of [start, end) (header sanity, CRC-32C, offsets increasing) unless
    /// already checked, so that damage outside the recovery range is reported rather than
    /// served. `start` is a batch boundary holding `start_offset`. Damage marks the segment
    /// corrupt from there (one warning). Returns where the intact data ends: `end`, or the
    /// damaged batch's position; damage at `start` itself is an error naming file, byte and
    /// offset.
    pub fn verify_range(&mut self, start: u64, end: u64, start_offset: i64) -> StorageResult<u64> {
        // `end` is a batch boundary (the read walked the headers up to it): no intact batch crosses it.
        if let Some(c) = self.corrupt_at {
            if c <= start {
                return Err(StorageError::corrupt(&self.log_path, c, format!("data from offset {start_offset} on is damaged; not served")));
            }
        }
        // never past the data (nor the damage): a batch running past it is then refused by its header
        let end = end.min(self.limit()?);
        let mut pos = self.verified.checked_until(start);
        if pos >= end {
            return Ok(end);
        }
        let file = self.log_file()?;
        let from = pos;
        // Resuming after a checked range, the offset expected there is not known: each
        // header's base offset is then only checked against the segment base and its successor.
        let mut expected = if pos == start { Some(start_offset) } else { None };
        let mut buf: Vec<u8> = Vec::new();
        let mut failure: Option<(u64, Option<i64>, String)> = None;
        'outer: while pos < end {
            let want = ((end - pos) as usize).min(VERIFY_READ_CHUNK).max(RECORD_BATCH_OVERHEAD);
            buf.resize(want, 0);
            let n = pread_some(&file, &mut buf, pos).ctx("read", &self.log_path)?;
            buf.truncate(n);
            let mut off = 0usize;
            while pos + (off as u64) < end {
                let at = pos + off as u64;
                let rest = &buf[off..];
                let h = match BatchHeader::parse(rest, at as usize) {
                    Ok(h) => h,
                    Err(_) if rest.len() < RECORD_BATCH_OVERHEAD && off > 0 => break,
                    Err(e) => {
                        failure = Some((at, expected, e.to_string()));
                        break 'outer;
                    }
                };
                // before any read sized by it: a damaged length would allocate up to 2 GiB
                if let Err(e) = batch_within(at, h.size(), end) {
                    failure = Some((at, Some(h.base_offset), e));
                    break 'outer;
                }
                if h.size() > rest.len() {
                    if off > 0 {
                        break; // refill from this batch
                    }
                    // A batch larger than the chunk: read it whole.
                    buf.resize(h.size(), 0);
                    let n = pread_some(&file, &mut buf, at).ctx("read", &self.log_path)?;
                    if n < h.size() {
                        failure = Some((at, Some(h.base_offset), format!("batch of {} bytes runs past the end of the file", h.size())));
                        break 'outer;
                    }
                    continue;
                }
                if let Err(e) = validate_stored_batch(&rest[..h.size()], at as usize) {
                    failure = Some((at, Some(h.base_offset), e.to_string()));
                    break 'outer;
                }
                if expected.is_some_and(|x| h.base_offset < x) || h.base_offset < self.base_offset {
                    failure = Some((
                        at,
                        Some(h.base_offset),
                        format!("batch base offset {} is below the expected {}", h.base_offset, expected.unwrap_or(self.base_offset)),
                    ));
                    break 'outer;
                }
                expected = Some(h.next_offset());
                off += h.size();
            }
            pos += off as u64;
        }
        self.verified.add(from, pos);
        let Some((at, offset, reason)) = failure else { return Ok(end) };
        let offset = offset.or(expected).map_or("unknown".to_owned(), |o| o.to_string());
        let reason = format!("batch at offset {offset}: {reason}");
        if self.corrupt_at.is_none_or(|c| at < c) {
            self.corrupt_at = Some(at);
            warn(format!(
                "corrupt segment {} at byte {at} (offset {offset}); not serving it or anything after it: {reason}",
                self.log_path.display()
            ));
        }
        if at > start {
            return Ok(at);
        }
        Err(StorageError::corrupt(&self.log_path, at, reason))
    }

    /// Largest timestamp in the segment and the offset holding it (loads the time index).
    pub fn max_timestamp_and_offset(&mut self, index_interval: u64) -> StorageResult<(i64, i64)> {
        if self.active_ready {
            return Ok((self.max_timestamp, self.offset_of_max_timestamp));
        }
        self.ensure_indexes(index_interval)?;
        if !self.active_ready {
            if let Some((ts, off)) = self.time_index.last() {
                if ts > self.max_timestamp {
                    self.max_timestamp = ts;
                    self.offset_of_max_timestamp = off;
                }
            }
        }
        Ok((self.max_timestamp, self.offset_of_max_timestamp))
    }

    /// Largest timestamp, or the file's modification time when the segment has none (what
    /// Kafka's time retention uses).
    pub fn largest_timestamp_for_retention(&mut self, index_interval: u64) -> StorageResult<i64> {
        let (ts, _) = self.max_timestamp_and_offset(index_interval)?;
        if ts >= 0 {
            return Ok(ts);
        }
        let m = fs::metadata(&self.log_path).ctx("stat", &self.log_path)?;
        Ok(m.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64))
    }

    /// First batch at or after the time-index entry for `ts` whose max timestamp >= `ts`,
    /// starting no earlier than `min_offset`.
    pub fn find_batch_by_timestamp(
        &mut self,
        ts: i64,
        min_offset: i64,
        index_interval: u64,
    ) -> StorageResult<Option<(u64, BatchHeader)>> {
        self.ensure_indexes(index_interval)?;
        let from = self.time_index.lookup(ts).map_or(self.base_offset, |(_, off)| off);
        let from = from.max(min_offset);
        let limit = self.limit()?;
        let file = self.log_file()?;
        let (_, start) = self.offset_index.lookup(from);
        let mut r = HeaderReader::new(&file, &self.log_path, limit);
        let mut pos = start;
        while let Some(h) = r.at(pos)? {
            if h.last_offset() >= min_offset && h.max_timestamp >= ts {
                return Ok(Some((pos, h)));
            }
            pos += h.size() as u64;
        }
        Ok(None)
    }

    /// Read `len` bytes at `pos` (whole batches for record-level lookups).
    pub fn read_bytes(&mut self, pos: u64, len: usize) -> StorageResult<Vec<u8>> {
        let file = self.log_file()?;
        let mut buf = vec![0u8; len];
        super::fileio::pread_exact(&file, &mut buf, pos).ctx("read", &self.log_path)?;
        Ok(buf)
    }

    /// Whether the next append of `bytes` bytes with max timestamp `max_ts` should go to a
    /// new segment.
    pub fn should_roll(
        &self,
        cfg: &super::config::LogConfig,
        bytes: u64,
        max_ts: i64,
        last_offset: i64,
        now_ms: impl Fn() -> i64,
    ) -> bool {
        let size = self.size.unwrap_or(0);
        if size == 0 {
            return false;
        }
        if size + bytes > cfg.segment_bytes as u64 {
            return true;
        }
        if last_offset - self.base_offset > i32::MAX as i64 {
            return true;
        }
        if self.offset_index.len() >= cfg.max_offset_index_entries()
            || self.time_index.len() >= cfg.max_time_index_entries()
        {
            return true;
        }
        let waited = match self.first_batch_timestamp {
            Some(t) if t >= 0 && max_ts >= 0 => max_ts - t,
            _ => now_ms() - self.created_ms,
        };
        waited > cfg.roll_ms()
    }

    /// Stop being the active segment: add the final time-index entry (so the last entry is
    /// the segment's largest timestamp) and write the indexes.
    pub fn seal(&mut self) -> StorageResult<()> {
        self.trim_preallocated()?;
        self.unpin();
        if self.max_timestamp >= 0 {
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        }
        self.persist_indexes(false)?;
        self.active_ready = false;
        Ok(())
    }

    /// Cut a preallocated file back to its data (at seal and close).
    fn trim_preallocated(&mut self) -> StorageResult<()> {
        if !self.preallocated {
            return Ok(());
        }
        let size = self.size()?;
        self.log_file()?.set_len(size).ctx("trim preallocated segment", &self.log_path)?;
        self.preallocated = false;
        Ok(())
    }

    /// Rename the segment's files with a `.deleted` suffix (Kafka's asynchronous delete) and
    /// return the new paths, to be removed after `file.delete.delay.ms`. Descriptors held by
    /// handed-out file ranges stay valid; the next start removes leftovers.
    pub fn rename_for_delete(&mut self) -> StorageResult<Vec<PathBuf>> {
        self.pinned = None;
        self.log.set(None);
        self.offset_index.file_mut().unload();
        self.time_index.file_mut().unload();
        self.indexes_ready = false;
        let mut renamed = Vec::with_capacity(3);
        for path in [self.log_path.clone(), self.offset_index.file().path().to_path_buf(), self.time_index.file().path().to_path_buf()] {
            let mut target = path.clone().into_os_string();
            target.push(DELETED_SUFFIX);
            let target = PathBuf::from(target);
            match fs::rename(&path, &target) {
                Ok(()) => renamed.push(target),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("rename for delete", &path),
            }
        }
        Ok(renamed)
    }

    pub fn persist_indexes(&mut self, fsync: bool) -> StorageResult<()> {
        self.offset_index.file_mut().persist(fsync)?;
        self.time_index.file_mut().persist(fsync)?;
        Ok(())
    }

    /// fsync the log data (and write and fsync the indexes).
    pub fn flush(&mut self) -> StorageResult<()> {
        if self.unflushed {
            self.log_file()?.sync_data().ctx("fsync", &self.log_path)?;
            self.unflushed = false;
        }
        self.persist_indexes(true)
    }

    /// Cut the segment so that it ends before the batch holding `offset`. Returns the
    /// bytes removed.
    pub fn truncate_to(&mut self, offset: i64, index_interval: u64) -> StorageResult<u64> {
        self.ensure_indexes(index_interval)?;
        let size = self.size()?;
        let Some((pos, _)) = self.find_batch(offset, index_interval)? else {
            return Ok(0);
        };
        let file = self.log_file()?;
        file.set_len(pos).ctx("truncate segment", &self.log_path)?;
        self.size = Some(pos);
        self.preallocated = false;
        self.verified.truncate(pos);
        self.offset_index.truncate_to_position(pos);
        self.time_index.truncate_to_offset(offset);
        self.persist_indexes(false)?;
        self.end_offset = offset.min(self.end_offset);
        self.active_ready = false;
        if self.corrupt_at.is_some_and(|c| c >= pos) {
            self.corrupt_at = None;
        }
        // Recompute max timestamp and counters from what remains.
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        self.first_batch_timestamp = None;
        Ok(size - pos)
    }

    /// Close descriptors and drop loaded indexes (after persisting them).
    pub fn close(&mut self) -> StorageResult<()> {
        self.seal()?;
        self.offset_index.file_mut().unload();
        self.time_index.file_mut().unload();
        self.indexes_ready = false;
        self.pinned = None;
        self.log.set(None);
        Ok(())
    }

    /// Delete the segment's files.
    pub fn delete(&mut self) -> StorageResult<()> {
        self.pinned = None;
        self.log.set(None);
        self.offset_index.file_mut().delete()?;
        self.time_index.file_mut().delete()?;
        match fs::remove_file(&self.log_path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).ctx("delete segment", &self.log_path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verified_ranges_merge_and_truncate() {
        let mut v = VerifiedRanges::default();
        v.add(0, 100);
        v.add(100, 250); // adjacent: merged
        v.add(400, 500);
        assert!(v.covers(10, 250) && !v.covers(10, 260) && !v.covers(300, 450));
        assert_eq!(v.checked_until(50), 250);
        assert_eq!(v.checked_until(300), 300);
        v.add(250, 400); // fills the gap
        assert!(v.covers(0, 500));
        v.truncate(120);
        assert!(v.covers(0, 120) && !v.covers(0, 121));
    }

    #[test]
    fn a_batch_length_past_the_verified_range_is_refused_before_any_read_sized_by_it() {
        assert!(batch_within(100, 50, 150).is_ok());
        let e = batch_within(1144, 0x7ff0_000c, 114_400).unwrap_err();
        assert!(e.contains("2146435084 bytes runs past the end of the range"), "{e}");
        assert!(batch_within(200, 1, 100).is_err());
    }

    #[test]
    fn verified_ranges_are_bounded() {
        let mut v = VerifiedRanges::default();
        for i in 0..(MAX_VERIFIED_RANGES as u64 + 5) {
            v.add(i * 100, i * 100 + 10 + i);
        }
        assert_eq!(v.ranges.len(), MAX_VERIFIED_RANGES);
        // the largest (latest here) are kept
        assert!(v.covers(1200, 1222));
    }
}
