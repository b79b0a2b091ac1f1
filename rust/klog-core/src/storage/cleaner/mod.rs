//! The log cleaner: Kafka's log compaction on klog's partition logs.
//!
//! A compacted log has a clean section (already compacted: every key's record there was the
//! latest when it was cleaned) and a dirty section after it, from the first dirty offset kept per
//! partition in `cleaner-offset-checkpoint` (Kafka's file, in each log dir) up to the first
//! uncleanable offset: the active segment's base, the high watermark, the first unstable offset
//! (the first offset of a transaction still open or whose marker the ISR lacks), or the first
//! segment with a record younger than `min.compaction.lag.ms`, whichever is lowest. One cleaning
//! pass (aborted transactions and markers as Kafka's cleaner treats them: see `txn`):
//!
//! 1. reads the dirty section into a key -> latest offset map bounded by the thread's share of
//!    `log.cleaner.dedupe.buffer.size`; when the keys do not all fit, the pass stops where they
//!    still do (the rest stays dirty for the next pass);
//! 2. rewrites every sealed segment from the log's start to that point, grouped into segments of at
//!    most `segment.bytes` (and `segment.index.bytes` of index), keeping only what `filter`
//!    decides, and swaps each group's cleaned segment in (see `swap`);
//! 3. moves the partition's first dirty offset past what it indexed.
//!
//! Logs are chosen dirtiest first (dirty bytes / cleanable bytes, above `min.cleanable.dirty.ratio`,
//! or any dirty bytes at all once a dirty record is older than `max.compaction.lag.ms`) by
//! `log.cleaner.threads` threads that never touch Python. The log's lock is held only to plan and
//! to swap: appends, reads (sendfile of the old segments too: retired files stay readable until
//! file.delete.delay.ms) and retention run meanwhile; a swap finding the sealed segments changed
//! (truncation, retention, another swap) is abandoned and the work redone later.

pub mod filter;
pub mod offset_map;
pub mod swap;
pub mod throttle;
pub mod txn;

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::batch::header::{BatchHeader, RECORD_BATCH_OVERHEAD};

use super::checkpoint::{read_offsets, write_offsets};
use super::error::{IoContext, StorageError, StorageResult};
use super::events::warn;
use super::fileio::{pread_some, pwrite_all_vectored};
use super::offset_index::OffsetIndex;
use super::partition_log::{now_ms, CleanerSegment, CleanerView, PartitionLog};
use super::segment::{INDEX_SUFFIX, LOG_SUFFIX, NO_TIMESTAMP, TIME_INDEX_SUFFIX};
use super::time_index::TimeIndex;
use filter::{filter_batch, for_each_key, FilterRules, Outcome, Scratch};
use offset_map::{key_digest, OffsetMap};
use swap::{suffixed, CLEANED_SUFFIX};
use throttle::IoThrottle;
use txn::{read_aborted, TxnAction, TxnTracker};

pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Producers whose last batch a pass tracks (8 bytes of id + 8 of offset each, plus the map's
/// overhead); beyond it, an emptied batch of an untracked producer is kept as an empty header
/// (never wrong, only less compact).
pub const MAX_TRACKED_PRODUCERS: usize = 1 << 16;
/// Cleaned segments are swapped in together once this many bytes of them are written (or at
/// the end of the pass): fewer fsyncs and directory syncs; bounds the extra disk a pass holds.
pub const SWAP_BATCH_BYTES: u64 = 128 * 1024 * 1024;
/// Threads fsyncing a batch of cleaned segments at once.
const SYNC_THREADS: usize = 8;

/// The broker's `log.cleaner.*` settings.
#[derive(Debug, Clone, Copy)]
pub struct CleanerConfig {
    /// `log.cleaner.threads`
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size`: the key maps of all threads together.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.load.factor`
    pub dedupe_buffer_load_factor: f64,
    /// `log.cleaner.io.buffer.size`: read and write buffers of all threads together.
    pub io_buffer_size: u64,
    /// `log.cleaner.backoff.ms`: sleep when no log needs cleaning.
    pub backoff_ms: u64,
    /// `producer.id.expiration.ms`: batches of producers idle longer are not kept for their state.
    pub producer_id_expiration_ms: i64,
    /// `log.cleaner.io.max.bytes.per.second`: bytes read and written by all threads together
    /// (`f64::MAX`: no limit).
    pub io_max_bytes_per_second: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            dedupe_buffer_size: 128 * 1024 * 1024,
            dedupe_buffer_load_factor: 0.9,
            io_buffer_size: 512 * 1024,
            backoff_ms: 15_000,
            producer_id_expiration_ms: 86_400_000,
            io_max_bytes_per_second: f64::MAX,
        }
    }
}

impl CleanerConfig {
    pub fn validate(&self) -> StorageResult<()> {
        if self.threads == 0 {
            return Err(StorageError::config("log.cleaner.threads", "must be at least 1"));
        }
        if self.dedupe_buffer_size / (self.threads as u64) < 2 * offset_map::SLOT_BYTES as u64 {
            return Err(StorageError::config(
                "log.cleaner.dedupe.buffer.size",
                format!("{} bytes over {} threads leave no room for a key map", self.dedupe_buffer_size, self.threads),
            ));
        }
        if !(self.dedupe_buffer_load_factor > 0.0 && self.dedupe_buffer_load_factor <= 1.0) {
            return Err(StorageError::config("log.cleaner.io.buffer.load.factor", format!("{} is outside (0, 1]", self.dedupe_buffer_load_factor)));
        }
        if !(self.io_max_bytes_per_second > 0.0) {
            return Err(StorageError::config("log.cleaner.io.max.bytes.per.second", format!("{} is not positive", self.io_max_bytes_per_second)));
        }
        if self.io_buffer_size < 2 * RECORD_BATCH_OVERHEAD as u64 {
            return Err(StorageError::config("log.cleaner.io.buffer.size", format!("{} is too small", self.io_buffer_size)));
        }
        Ok(())
    }
    /// Key-map bytes of one thread (Kafka caps one thread's map at 2 GiB).
    pub fn map_bytes_per_thread(&self) -> usize {
        (self.dedupe_buffer_size / self.threads as u64).min(i32::MAX as u64) as usize
    }
    fn io_bytes_per_thread(&self) -> usize {
        ((self.io_buffer_size / self.threads as u64 / 2) as usize).max(RECORD_BATCH_OVERHEAD)
    }
}

/// Counters of the cleaner (summed over passes).
#[derive(Debug, Clone, Copy, Default)]
pub struct CleanStats {
    pub passes: u64,
    pub aborted: u64,
    /// Bytes of segments rewritten.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Bytes of dirty log read to build key maps.
    pub map_bytes_read: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub elapsed_secs: f64,
    pub map_elapsed_secs: f64,
    /// Largest key map allocated by a pass.
    pub peak_map_bytes: u64,
}

impl CleanStats {
    fn add(&mut self, o: &CleanStats) {
        self.passes += o.passes;
        self.aborted += o.aborted;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.map_bytes_read += o.map_bytes_read;
        self.records_read += o.records_read;
        self.records_kept += o.records_kept;
        self.elapsed_secs += o.elapsed_secs;
        self.map_elapsed_secs += o.map_elapsed_secs;
        self.peak_map_bytes = self.peak_map_bytes.max(o.peak_map_bytes);
    }
}

/// Where a log's dirty section lies and how dirty it is (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub first_dirty: i64,
    pub first_uncleanable: i64,
    /// The checkpointed first dirty offset was outside the log and was reset.
    pub reset_checkpoint: bool,
    pub clean_bytes: u64,
    pub cleanable_bytes: u64,
    pub dirty_ratio: f64,
    /// A dirty record is older than `max.compaction.lag.ms`.
    pub overdue: bool,
    /// The log's generation the plan was made at: its offsets hold only while the log was neither
    /// truncated nor swapped nor moved (a truncation can bring back offsets above the high
    /// watermark the plan saw below it).
    pub generation: u64,
}

impl Plan {
    pub fn is_cleanable(&self, min_ratio: f64) -> bool {
        (self.overdue && self.cleanable_bytes > 0) || self.dirty_ratio > min_ratio
    }
}

/// The sealed segment holding `offset` (or the first after it).
fn floor_index(segs: &[CleanerSegment], offset: i64) -> usize {
    segs.partition_point(|s| s.end <= offset)
}

/// Kafka's `cleanableOffsets` + `calculateCleanableBytes` + `maxCompactionDelay`.
pub fn plan(log: &PartitionLog, view: &CleanerView, checkpoint: Option<i64>, now: i64) -> StorageResult<Plan> {
    let cfg = &view.config;
    let ls = view.log_start_offset;
    let mut first_dirty = checkpoint.unwrap_or(ls);
    let mut reset_checkpoint = false;
    if first_dirty < ls || first_dirty > view.log_end_offset {
        if checkpoint.is_some() && !(cfg.compact && cfg.delete) && first_dirty > view.log_end_offset {
            warn(format!("{}: cleaner checkpoint {first_dirty} is past the log end {}; cleaning from the log start", log.name(), view.log_end_offset));
        }
        first_dirty = ls;
        reset_checkpoint = true;
    }
    let segs = &view.segments;
    let dirty_from = floor_index(segs, first_dirty);
    let mut uncleanable = view.high_watermark.min(view.active_base).min(view.first_unstable_offset);
    if cfg.min_compaction_lag_ms > 0 {
        for s in &segs[dirty_from..] {
            if let Some((largest, _)) = log.segment_timestamps(s.base)? {
                if largest > now.saturating_sub(cfg.min_compaction_lag_ms) {
                    uncleanable = uncleanable.min(s.base);
                    break;
                }
            }
        }
    }
    let first_uncleanable = first_dirty.max(uncleanable);
    // The first uncleanable segment: the one holding first_uncleanable, else the active one.
    let fu_index = floor_index(segs, first_uncleanable);
    let fu_base = segs.get(fu_index).map_or(view.active_base, |s| s.base);
    let from = floor_index(segs, first_dirty.min(fu_base));
    let cleanable_bytes: u64 = segs[from..].iter().take_while(|s| s.base < fu_base).map(|s| s.size).sum();
    let clean_bytes: u64 = segs.iter().take_while(|s| s.base < first_dirty).map(|s| s.size).sum();
    let total = clean_bytes + cleanable_bytes;
    let dirty_ratio = if total == 0 { 0.0 } else { cleanable_bytes as f64 / total as f64 };
    let mut overdue = false;
    if cfg.max_compaction_lag_ms < i64::MAX {
        let until = now.saturating_sub(cfg.max_compaction_lag_ms);
        for s in &segs[dirty_from..] {
            if let Some((_, first_ts)) = log.segment_timestamps(s.base)? {
                if first_ts > 0 && first_ts < until {
                    overdue = true;
                    break;
                }
            }
        }
    }
    Ok(Plan {
        first_dirty,
        first_uncleanable: fu_base.max(first_dirty),
        reset_checkpoint,
        clean_bytes,
        cleanable_bytes,
        dirty_ratio,
        overdue,
        generation: view.generation,
    })
}

/// Reads whole batches of a segment file in order through one buffer (no lock held; a file cut
/// underneath is reported as an error, and the pass abandoned).
struct BatchReader {
    file: Arc<File>,
    path: PathBuf,
    limit: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
    buf_len: usize,
    chunk: usize,
}

impl BatchReader {
    fn new(file: Arc<File>, path: PathBuf, start: u64, limit: u64, chunk: usize, buf: Vec<u8>) -> Self {
        BatchReader { file, path, limit, pos: start, buf, buf_start: start, buf_len: 0, chunk }
    }

    fn fill(&mut self, at: u64, need: usize) -> StorageResult<()> {
        let want = need.max(self.chunk).min((self.limit - at) as usize).max(need);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let mut got = 0;
        while got < want {
            let n = pread_some(&self.file, &mut self.buf[got..want], at + got as u64).ctx("read", &self.path)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got < need {
            return Err(StorageError::corrupt(&self.path, at + got as u64, "segment ended inside a batch (changed while being cleaned?)"));
        }
        self.buf_start = at;
        self.buf_len = got;
        Ok(())
    }

    /// The next batch: its position, header and bytes.
    fn next(&mut self) -> StorageResult<Option<(u64, BatchHeader, &[u8])>> {
        let at = self.pos;
        if at >= self.limit {
            return Ok(None);
        }
        if self.limit - at < RECORD_BATCH_OVERHEAD as u64 {
            return Err(StorageError::corrupt(&self.path, at, "less than a batch header left"));
        }
        let in_buf = |s: &Self, n: usize| at >= s.buf_start && at + n as u64 <= s.buf_start + s.buf_len as u64;
        if !in_buf(self, RECORD_BATCH_OVERHEAD) {
            self.fill(at, RECORD_BATCH_OVERHEAD)?;
        }
        let off = (at - self.buf_start) as usize;
        let h = BatchHeader::parse(&self.buf[off..self.buf_len], at as usize).map_err(|e| StorageError::corrupt(&self.path, at, e.to_string()))?;
        let size = h.size();
        if at + size as u64 > self.limit {
            return Err(StorageError::corrupt(&self.path, at, format!("batch of {size} bytes runs past the end of the data")));
        }
        if !in_buf(self, size) {
            self.fill(at, size)?;
        }
        let off = (at - self.buf_start) as usize;
        self.pos = at + size as u64;
        Ok(Some((at, h, &self.buf[off..off + size])))
    }

    fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
}

/// A cleaned segment being written: `<base>.log.cleaned` and its two indexes.
struct CleanedWriter {
    file: File,
    path: PathBuf,
    written: u64,
    pending: Vec<u8>,
    flush_at: usize,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    index_interval: u64,
    bytes_since_index: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
}

impl CleanedWriter {
    fn create(dir: &Path, base: i64, index_interval: u64, flush_at: usize) -> StorageResult<Self> {
        let path = suffixed(dir, base, LOG_SUFFIX, CLEANED_SUFFIX);
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).ctx("create", &path)?;
        let mut offset_index = OffsetIndex::new(suffixed(dir, base, INDEX_SUFFIX, CLEANED_SUFFIX), base);
        let mut time_index = TimeIndex::new(suffixed(dir, base, TIME_INDEX_SUFFIX, CLEANED_SUFFIX), base);
        offset_index.file_mut().reset();
        time_index.file_mut().reset();
        Ok(CleanedWriter {
            file,
            path,
            written: 0,
            pending: Vec::with_capacity(flush_at + RECORD_BATCH_OVERHEAD),
            flush_at,
            offset_index,
            time_index,
            index_interval,
            bytes_since_index: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base,
        })
    }

    /// Account for the batch just appended to `pending` (from `start`): Kafka's index rule.
    fn index_batch(&mut self, start: usize, last_offset: i64, max_ts: i64) -> StorageResult<()> {
        let size = (self.pending.len() - start) as u64;
        let pos = self.written + start as u64;
        if max_ts > self.max_timestamp {
            self.max_timestamp = max_ts;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_index > self.index_interval {
            self.offset_index.append(last_offset, pos);
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += size;
        if self.pending.len() >= self.flush_at {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> StorageResult<()> {
        if !self.pending.is_empty() {
            pwrite_all_vectored(&self.file, self.written, &[&self.pending]).ctx("write", &self.path)?;
            self.written += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }

    /// Write everything (the last time-index entry is the segment's largest timestamp, as at a
    /// roll). Returns the bytes written and the three files, which the caller fsyncs before the
    /// swap (together with other groups', see `sync_all`).
    fn finish(mut self) -> StorageResult<(u64, [PathBuf; 3])> {
        self.flush_pending()?;
        if self.max_timestamp >= 0 {
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        }
        self.offset_index.file_mut().persist(false)?;
        self.time_index.file_mut().persist(false)?;
        let index = self.offset_index.file().path().to_path_buf();
        let time_index = self.time_index.file().path().to_path_buf();
        Ok((self.written, [self.path, index, time_index]))
    }
}

/// fsync cleaned files before their swap, several at once (a journaling file system commits
/// concurrent fsyncs together: a batch of cleaned segments costs about one fsync, not three each).
fn sync_all(paths: &[PathBuf]) -> StorageResult<()> {
    let per_thread = paths.len().div_ceil(SYNC_THREADS).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = paths
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk.iter().try_for_each(|p| File::open(p).and_then(|f| f.sync_data()).ctx("fsync", p))
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or_else(|_| Err(StorageError::InvalidArgument("fsync thread panicked".into()))))
    })
}

fn remove_cleaned(dir: &Path, base: i64) {
    for s in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        let _ = std::fs::remove_file(suffixed(dir, base, s, CLEANED_SUFFIX));
    }
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose log bytes fit in `segment.bytes`, each
/// index in `segment.index.bytes`, and whose offsets fit the int32 offsets of one index.
fn group_segments(segs: &[CleanerSegment], max_size: u64, max_index: u64) -> Vec<Vec<CleanerSegment>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let mut g = vec![segs[i]];
        let (mut size, mut idx, mut tidx) = (segs[i].size, segs[i].offset_index_bytes, segs[i].time_index_bytes);
        i += 1;
        while i < segs.len()
            && size + segs[i].size <= max_size
            && idx + segs[i].offset_index_bytes <= max_index
            && tidx + segs[i].time_index_bytes <= max_index
            && (segs[i].size == 0 || segs[i].end - 1 - g[0].base <= i32::MAX as i64)
        {
            size += segs[i].size;
            idx += segs[i].offset_index_bytes;
            tidx += segs[i].time_index_bytes;
            g.push(segs[i]);
            i += 1;
        }
        groups.push(g);
    }
    groups
}

/// Whether `log` was truncated, swapped, moved or closed since `plan` was made: a pass that failed
/// then failed because of it (a segment cut under its reader, a directory renamed away).
pub fn log_changed_since(log: &PartitionLog, plan: &Plan) -> bool {
    log.cleaner_view().map_or(true, |v| v.generation != plan.generation)
}

/// What one pass did: the new first dirty offset and its counters; None if abandoned (the log
/// changed underneath or the cleaner is stopping).
pub type PassResult = Option<(i64, CleanStats)>;

/// Clean `log` once over `plan`'s dirty section with a key map of at most `map_bytes`.
pub fn clean_log(
    log: &PartitionLog,
    plan: &Plan,
    cfg: &CleanerConfig,
    map_bytes: usize,
    now: i64,
    throttle: &IoThrottle,
    stop: &AtomicBool,
) -> StorageResult<PassResult> {
    let started = Instant::now();
    let view = log.cleaner_view()?;
    if view.generation != plan.generation {
        return Ok(None); // planned before a truncation, swap or move: its bounds may not hold now
    }
    let lcfg = view.config;
    let mut stats = CleanStats { passes: 1, ..Default::default() };
    if plan.first_dirty >= plan.first_uncleanable {
        return Ok(Some((plan.first_dirty, stats)));
    }
    let io = cfg.io_bytes_per_thread();
    // 1. The key map over the dirty section (the keys of aborted transactions left out).
    let aborted = read_aborted(&log.dir());
    let mut txns = TxnTracker::new(&aborted);
    let mut map = OffsetMap::new(map_bytes, cfg.dedupe_buffer_load_factor);
    let mut producers: HashMap<i64, i64> = HashMap::new();
    let mut buf = Vec::new();
    let mut full = false;
    let dirty: Vec<CleanerSegment> =
        view.segments.iter().copied().filter(|s| s.end > plan.first_dirty && s.base < plan.first_uncleanable).collect();
    for (i, seg) in dirty.iter().enumerate() {
        let Some((file, path, size, pos)) = log.segment_file_for_cleaning(seg.base, (i == 0).then_some(plan.first_dirty))? else {
            return Ok(None);
        };
        let mut r = BatchReader::new(file, path.clone(), pos, size, io, std::mem::take(&mut buf));
        while let Some((at, h, bytes)) = r.next()? {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            stats.map_bytes_read += h.size() as u64;
            throttle.charge(h.size() as u64, stop);
            if h.last_offset() < plan.first_dirty {
                continue;
            }
            if h.base_offset >= plan.first_uncleanable {
                break;
            }
            if h.producer_id >= 0 && !h.is_control() && (producers.len() < MAX_TRACKED_PRODUCERS || producers.contains_key(&h.producer_id)) {
                producers.insert(h.producer_id, h.last_offset());
            }
            if txns.on_batch(&h, bytes, at as usize) == TxnAction::DiscardRecords {
                map.update_latest_offset(h.last_offset());
                continue;
            }
            let first_dirty = plan.first_dirty;
            let complete = for_each_key(bytes, at as usize, |k, offset| offset < first_dirty || map.put(key_digest(k), offset))
                .map_err(|e| StorageError::corrupt(&path, at, e.to_string()))?;
            if !complete {
                full = true;
                break;
            }
            map.update_latest_offset(h.last_offset());
        }
        buf = r.into_buffer();
        if full {
            break;
        }
        map.update_latest_offset(seg.end.min(plan.first_uncleanable) - 1);
    }
    if map.latest_offset() < plan.first_dirty {
        // Not even one key fits (cannot happen with at least one slot free): nothing to do.
        return Ok(Some((plan.first_dirty, stats)));
    }
    let end_offset = map.latest_offset() + 1;
    stats.peak_map_bytes = map.memory_bytes() as u64;
    stats.map_elapsed_secs = started.elapsed().as_secs_f64();

    // 2. Rewrite the segments below end_offset, group by group.
    let rules = FilterRules { map: &map, now_ms: now, delete_retention_ms: lcfg.delete_retention_ms };
    let to_clean: Vec<CleanerSegment> = view.segments.iter().copied().filter(|s| s.base < end_offset).collect();
    let groups = group_segments(&to_clean, lcfg.segment_bytes as u64, lcfg.segment_index_bytes as u64);
    let mut generation = view.generation;
    let mut scratch = Scratch::default();
    let mut txns = TxnTracker::new(&aborted);
    let dir = log.dir().to_path_buf();
    // Written, not yet swapped: (group's bases, its cleaned files).
    let mut pending: Vec<(Vec<i64>, [PathBuf; 3])> = Vec::new();
    let mut pending_bytes = 0u64;
    let abandon = |pending: &[(Vec<i64>, [PathBuf; 3])]| {
        for (g, _) in pending {
            remove_cleaned(&dir, g[0]);
        }
    };
    for (gi, group) in groups.iter().enumerate() {
        let base = group[0].base;
        let mut w = CleanedWriter::create(&dir, base, lcfg.index_interval_bytes as u64, io)?;
        let result = (|| -> StorageResult<bool> {
            for (si, seg) in group.iter().enumerate() {
                let Some((file, path, size, _)) = log.segment_file_for_cleaning(seg.base, None)? else { return Ok(false) };
                let last_segment = si + 1 == group.len();
                let mut r = BatchReader::new(file, path.clone(), 0, size, io, std::mem::take(&mut buf));
                while let Some((at, h, bytes)) = r.next()? {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(false);
                    }
                    stats.bytes_read += h.size() as u64;
                    let last_of_segment = last_segment && at + h.size() as u64 == size;
                    let producer_state = h.producer_id >= 0
                        && !h.is_control()
                        && now.saturating_sub(h.max_timestamp) < cfg.producer_id_expiration_ms
                        && producers.get(&h.producer_id).is_none_or(|&last| last == h.last_offset());
                    let start = w.pending.len();
                    let action = txns.on_batch(&h, bytes, at as usize);
                    let f = filter_batch(bytes, at as usize, &rules, last_of_segment || producer_state, action, &mut scratch, &mut w.pending)
                        .map_err(|e| StorageError::corrupt(&path, at, e.to_string()))?;
                    stats.records_read += f.records_read;
                    stats.records_kept += f.records_kept;
                    let kept = (w.pending.len() - start) as u64;
                    if f.outcome != Outcome::Dropped {
                        // a batch emptied but kept to end its segment (Kafka keeps none of these) holds no
                        // record: its timestamp must not be the segment's largest, which ListOffsets
                        // MAX_TIMESTAMP and by-timestamp lookups answer from (Kafka's kept empty batch of
                        // a producer's state counts, as here)
                        let max_ts = if f.outcome == Outcome::Emptied && !producer_state { NO_TIMESTAMP } else { f.max_timestamp };
                        w.index_batch(start, h.last_offset(), max_ts)?;
                    }
                    throttle.charge(h.size() as u64 + kept, stop);
                }
                buf = r.into_buffer();
            }
            Ok(true)
        })();
        let finished = match result {
            Ok(true) => w.finish(),
            Ok(false) => {
                remove_cleaned(&dir, base);
                abandon(&pending);
                return Ok(None);
            }
            Err(e) => Err(e),
        };
        let (written, files) = match finished {
            Ok(f) => f,
            Err(e) => {
                remove_cleaned(&dir, base);
                abandon(&pending);
                return Err(e);
            }
        };
        stats.bytes_written += written;
        pending_bytes += written;
        pending.push((group.iter().map(|s| s.base).collect(), files));
        if pending_bytes < SWAP_BATCH_BYTES && gi + 1 < groups.len() {
            continue;
        }
        let files: Vec<PathBuf> = pending.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
        let swapped = sync_all(&files).and_then(|()| {
            let batch: Vec<Vec<i64>> = pending.iter().map(|(g, _)| g.clone()).collect();
            log.swap_in_cleaned(&batch, generation)
        });
        match swapped {
            Ok(Some(g)) => generation = g,
            Ok(None) => {
                abandon(&pending);
                return Ok(None);
            }
            Err(e) => {
                abandon(&pending);
                return Err(e);
            }
        }
        pending.clear();
        pending_bytes = 0;
    }
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(Some((end_offset, stats)))
}

/// The logs a cleaner serves: (log dir index, log) of every open partition.
pub type LogLister = Arc<dyn Fn() -> Vec<(usize, Arc<PartitionLog>)> + Send + Sync>;

/// Takes a log dir (its index) offline over an error (the log manager's).
pub type DirFailure = Arc<dyn Fn(usize, &str) + Send + Sync>;

struct CleanerState {
    in_progress: HashSet<(String, i32)>,
    /// Partitions whose cleaning failed with an unexpected error: skipped until restart (Kafka's
    /// uncleanable partitions).
    uncleanable: HashSet<(String, i32)>,
    /// Per log dir: first dirty offset of each partition.
    checkpoints: Vec<HashMap<(String, i32), i64>>,
    stats: CleanStats,
    stopping: bool,
}

/// The cleaner threads of a log manager.
pub struct LogCleaner {
    shared: Arc<CleanerShared>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

struct CleanerShared {
    config: CleanerConfig,
    dirs: Vec<PathBuf>,
    logs: LogLister,
    /// Called when a pass left its log closed (a swap failed past its commit point).
    dir_failed: DirFailure,
    state: Mutex<CleanerState>,
    wake: Condvar,
    stop: AtomicBool,
    throttle: IoThrottle,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CleanerShared {
    /// Kafka's `grabFilthiestCompactedLog`: the compacted log with the highest dirty ratio among
    /// those cleanable now, marked in progress. The state stays locked from the first look to
    /// the mark (as Kafka's `inLock`): two threads choosing at once must not both take one log,
    /// since one pass's abandon would delete the other's `.cleaned` files before its swap.
    fn grab_filthiest(&self, now: i64) -> Option<(usize, Arc<PartitionLog>, Plan)> {
        let logs = (self.logs)();
        let mut st = lock(&self.state);
        let mut best: Option<(usize, Arc<PartitionLog>, Plan)> = None;
        for (d, log) in logs {
            let key = (log.topic().to_owned(), log.partition());
            if st.in_progress.contains(&key) || st.uncleanable.contains(&key) {
                continue;
            }
            let checkpoint = st.checkpoints.get(d).and_then(|c| c.get(&key).copied());
            // Only compacted logs are looked at further (the view loads every sealed segment's indexes).
            if !log.config().is_ok_and(|c| c.compact) {
                continue;
            }
            let Ok(view) = log.cleaner_view() else { continue };
            let p = match plan(&log, &view, checkpoint, now) {
                Ok(p) => p,
                Err(e) => {
                    warn(format!("log cleaner: cannot plan {}: {e}", log.name()));
                    continue;
                }
            };
            if p.clean_bytes + p.cleanable_bytes == 0 || !p.is_cleanable(view.config.min_cleanable_dirty_ratio) {
                continue;
            }
            if best.as_ref().is_none_or(|(_, _, b)| p.dirty_ratio > b.dirty_ratio) {
                best = Some((d, log, p));
            }
        }
        if let Some((_, log, _)) = &best {
            let fresh = st.in_progress.insert((log.topic().to_owned(), log.partition()));
            assert!(fresh, "a log in progress was chosen again");
        }
        best
    }

    fn done(&self, dir: usize, log: &PartitionLog, end_offset: Option<i64>, failed: bool) {
        let key = (log.topic().to_owned(), log.partition());
        let mut st = lock(&self.state);
        st.in_progress.remove(&key);
        if failed {
            st.uncleanable.insert(key.clone());
        }
        if let Some(end) = end_offset {
            if let Some(c) = st.checkpoints.get_mut(dir) {
                c.insert(key, end);
            }
            let live: HashSet<(String, i32)> = (self.logs)().into_iter().filter(|(d, _)| *d == dir).map(|(_, l)| (l.topic().to_owned(), l.partition())).collect();
            if let Some(c) = st.checkpoints.get_mut(dir) {
                c.retain(|k, _| live.contains(k));
                let mut entries: Vec<(String, i32, i64)> = c.iter().map(|((t, p), o)| (t.clone(), *p, *o)).collect();
                entries.sort();
                if let Err(e) = write_offsets(&self.dirs[dir].join(CLEANER_OFFSET_CHECKPOINT), &entries) {
                    warn(format!("log cleaner: could not write {CLEANER_OFFSET_CHECKPOINT}: {e}"));
                }
            }
        }
    }

    /// One round: clean the filthiest log if any. True if a log was cleaned.
    fn run_once(&self, map_bytes: usize) -> bool {
        let now = now_ms();
        let Some((dir, log, p)) = self.grab_filthiest(now) else { return false };
        match clean_log(&log, &p, &self.config, map_bytes, now, &self.throttle, &self.stop) {
            Err(e) if log.closed_by_failure() => {
                // A swap that failed past its commit point (or could not be rolled back) closed the
                // log; its dir goes offline, as Kafka's cleaner takes it on an IOException: nothing
                // is written there on top of the half-done swap, which the next start resolves.
                warn(format!("log cleaner: cleaning {} failed and closed it: {e}", log.name()));
                (self.dir_failed)(dir, &e.to_string());
                self.done(dir, &log, None, true);
                false
            }
            Ok(Some((end, stats))) => {
                lock(&self.state).stats.add(&stats);
                self.done(dir, &log, Some(end), false);
                true
            }
            Ok(None) => {
                lock(&self.state).stats.aborted += 1;
                self.done(dir, &log, p.reset_checkpoint.then_some(p.first_dirty), false);
                false
            }
            Err(StorageError::Closed(_)) => {
                self.done(dir, &log, None, false);
                false
            }
            Err(_) if log_changed_since(&log, &p) => {
                // truncated, moved or deleted underneath (a segment cut or a directory gone): abandoned, as
                // Kafka aborts a cleaning on those; the next pass plans again
                lock(&self.state).stats.aborted += 1;
                self.done(dir, &log, None, false);
                false
            }
            Err(e @ StorageError::Io { .. }) => {
                // An I/O error of the pass itself (a read, a `.cleaned` write, a swap rolled back
                // before its commit point): the dir goes offline, as Kafka's cleaner hands any
                // IOException to the LogDirFailureChannel; the log is left as it was.
                warn(format!("log cleaner: cleaning {} failed: {e}; its log dir goes offline", log.name()));
                (self.dir_failed)(dir, &e.to_string());
                self.done(dir, &log, None, true);
                false
            }
            Err(e) => {
                // Not an I/O error (damaged data): Kafka's cleaner marks such a log uncleanable.
                warn(format!("log cleaner: cleaning {} failed; it will not be cleaned again until restart: {e}", log.name()));
                self.done(dir, &log, None, true);
                false
            }
        }
    }

    fn thread_main(self: Arc<Self>) {
        let map_bytes = self.config.map_bytes_per_thread();
        while !self.stop.load(Ordering::Acquire) {
            if self.run_once(map_bytes) {
                continue;
            }
            let st = lock(&self.state);
            if st.stopping {
                break;
            }
            let _ = self.wake.wait_timeout(st, Duration::from_millis(self.config.backoff_ms));
        }
    }
}

impl LogCleaner {
    /// Start `config.threads` cleaner threads over the logs `logs` lists, with the first dirty
    /// offsets read from each log dir's `cleaner-offset-checkpoint`.
    pub fn start(config: CleanerConfig, dirs: Vec<PathBuf>, logs: LogLister) -> StorageResult<LogCleaner> {
        let online = vec![true; dirs.len()];
        Self::start_online(config, dirs, &online, logs, Arc::new(|_, _| {}))
    }

    /// `start`, reading the checkpoints of the dirs `online` marks only (an offline dir is not
    /// read; `logs` lists none of its logs), with `dir_failed` taking a dir offline when a pass
    /// left one of its logs closed.
    pub fn start_online(config: CleanerConfig, dirs: Vec<PathBuf>, online: &[bool], logs: LogLister, dir_failed: DirFailure) -> StorageResult<LogCleaner> {
        config.validate()?;
        let checkpoints = dirs
            .iter()
            .zip(online)
            .map(|(d, &online)| {
                if !online {
                    return HashMap::new();
                }
                let p = d.join(CLEANER_OFFSET_CHECKPOINT);
                read_offsets(&p).unwrap_or_else(|e| {
                    warn(format!("ignoring unreadable {}: {e}", p.display()));
                    HashMap::new()
                })
            })
            .collect();
        let shared = Arc::new(CleanerShared {
            config,
            dirs,
            logs,
            dir_failed,
            state: Mutex::new(CleanerState {
                in_progress: HashSet::new(),
                uncleanable: HashSet::new(),
                checkpoints,
                stats: CleanStats::default(),
                stopping: false,
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            throttle: IoThrottle::new(config.io_max_bytes_per_second),
        });
        let mut threads = Vec::with_capacity(config.threads);
        for i in 0..config.threads {
            let s = shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("klog-log-cleaner-{i}"))
                .spawn(move || s.thread_main())
                .map_err(|e| StorageError::io("start log cleaner thread", Path::new(""), e))?;
            threads.push(t);
        }
        Ok(LogCleaner { shared, threads: Mutex::new(threads) })
    }

    /// Look for work now instead of at the end of the backoff.
    pub fn wake(&self) {
        self.shared.wake.notify_all();
    }

    pub fn stats(&self) -> CleanStats {
        lock(&self.shared.state).stats
    }

    /// First dirty offset of every partition cleaned so far (from the checkpoints).
    pub fn checkpoints(&self) -> Vec<(String, i32, i64)> {
        let st = lock(&self.shared.state);
        let mut v: Vec<_> = st.checkpoints.iter().flat_map(|c| c.iter().map(|((t, p), o)| (t.clone(), *p, *o))).collect();
        v.sort();
        v
    }

    /// Stop the threads (a pass in progress is abandoned at its next batch) and wait for them.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        lock(&self.shared.state).stopping = true;
        self.shared.wake.notify_all();
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for LogCleaner {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests;
