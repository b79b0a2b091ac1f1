//! A partition's log: an ordered set of segments, the offsets (log start, log end, high
//! watermark, recovery point), the leader epoch cache, flush policy, retention and
//! recovery. Thread-safe: one mutex guards the segments; the offsets are also mirrored in
//! atomics so that reading them never waits for an append.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::batch::header::{
    self, set_base_offset, set_partition_leader_epoch, validate_batch, BatchHeader, Compression, ATTRIBUTES_OFFSET,
    ATTR_TIMESTAMP_TYPE, CRC_OFFSET, MAX_TIMESTAMP_OFFSET, RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD,
};
use crate::batch::produced::ProducedBatch;
use crate::crc::crc32c;
use crate::error::CodecError;

use super::checkpoint::{read_epochs, write_epochs, write_epochs_with, LEADER_EPOCH_CHECKPOINT};
use super::config::{LogConfig, TimestampType};
use super::error::{IoContext, StorageError, StorageResult};
use super::events::warn;
use super::fd_budget::FdBudget;
use super::fileio::fsync_dir;
use super::segment::{parse_segment_file_name, PreparedBatch, Segment, TailChecks, INDEX_SUFFIX, LOG_SUFFIX, NO_TIMESTAMP, TIME_INDEX_SUFFIX};

mod dir_move;
pub use dir_move::CopyPass;

/// Bytes to preallocate for a new active segment (`preallocate=true`: `segment.bytes`).
fn preallocation(cfg: &LogConfig) -> Option<u64> {
    cfg.preallocate.then_some(cfg.segment_bytes as u64)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The current time, read from the clock at most once and only if something needs it (a
/// clock read costs as much as a small part of an append).
pub struct LazyNow {
    given: Option<i64>,
    cached: std::cell::Cell<Option<i64>>,
}

impl LazyNow {
    pub fn new(given: Option<i64>) -> Self {
        LazyNow { given, cached: std::cell::Cell::new(None) }
    }
    pub fn get(&self) -> i64 {
        if let Some(t) = self.given.or(self.cached.get()) {
            return t;
        }
        let t = now_ms();
        self.cached.set(Some(t));
        t
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker's timestamp for LogAppendTime topics, -1 for CreateTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub num_batches: usize,
    pub bytes: usize,
}

/// A byte range of a segment file to serve. Holding it keeps the descriptor open.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Arc<File>,
    pub path: PathBuf,
    pub position: u64,
    pub length: u64,
}

#[derive(Debug, Clone)]
pub struct ReadInfo {
    pub range: Option<FileRange>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// A sealed segment as the cleaner plans with it.
#[derive(Debug, Clone, Copy)]
pub struct CleanerSegment {
    pub base: i64,
    /// The next segment's base offset.
    pub end: i64,
    pub size: u64,
    pub offset_index_bytes: u64,
    pub time_index_bytes: u64,
}

/// See `PartitionLog::cleaner_view`.
#[derive(Debug, Clone)]
pub struct CleanerView {
    pub segments: Vec<CleanerSegment>,
    pub active_base: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub first_unstable_offset: i64,
    pub config: LogConfig,
    pub generation: u64,
}

/// How to open an existing partition directory.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// From `recovery-point-offset-checkpoint`: data below it was fsynced.
    pub recovery_point: Option<i64>,
    /// From `log-start-offset-checkpoint`.
    pub log_start_offset: Option<i64>,
    /// The log dir had a clean-shutdown marker: skip recovery.
    pub clean_shutdown: bool,
    /// Bound shared by the log manager on sealed segments' open descriptors.
    pub fd_budget: Option<Arc<FdBudget>>,
}

pub type Hook = Arc<dyn Fn() + Send + Sync>;

/// Appends at least this large validate their batches before taking the log's lock.
const VALIDATE_UNLOCKED_BYTES: usize = 64 * 1024;
/// CreateTime appends at least this large verify their CRCs on a second thread while the
/// bytes are written (undone if a CRC is wrong): the write and the CRC overlap instead of
/// adding up. Below it, starting a thread costs more than it saves: the CRC runs at ~30 GB/s
/// (a 1 MiB batch in ~35 us, a thread start plus join costs ~20-60 us on a busy machine).
const PARALLEL_CRC_BYTES: usize = 16 * 1024 * 1024;

struct LogState {
    config: Arc<LogConfig>,
    segments: BTreeMap<i64, Box<Segment>>,
    epochs: Vec<(i32, i64)>,
    last_flush_ms: i64,
    /// New files were created in the directory since the last directory fsync.
    dir_dirty: bool,
    /// The epoch cache changed but writing `leader-epoch-checkpoint` failed; retried on
    /// the next change, flush and close.
    epochs_dirty: bool,
    /// `leader-epoch-checkpoint` was written without fsync (as Kafka does on the append
    /// path); the next flush makes it durable. Recovery rebuilds epochs from the batches.
    epochs_unsynced: bool,
    /// The partition directory itself was created and its parent not yet fsynced.
    parent_dir_dirty: bool,
    /// Files of deleted segments (renamed `*.deleted`) and when to remove them
    /// (`file.delete.delay.ms` after the delete), oldest first.
    pending_deletes: Vec<(i64, Vec<PathBuf>)>,
    /// The last `max_timestamp_offset` answer with the (log end, log start) it was computed at:
    /// ListOffsets(-3) is polled, and finding the record inside the batch costs a read and a
    /// scan. Appends and DeleteRecords move one of the two offsets; truncation clears it.
    max_timestamp_answer: Option<MaxTimestampAnswer>,
    /// Bumped whenever sealed segments change in place or are replaced (truncation, a cleaner
    /// swap): the cleaner swaps its output in only if nothing changed while it worked.
    generation: u64,
    closed: bool,
    /// Closed by a write that failed midway (a full truncation, a cleaner swap past its commit
    /// point): what is on disk is not what the log served, and nothing must be written on top
    /// of it until a restart resolves it; the log dir goes offline.
    closed_by_failure: bool,
}

#[derive(Clone, Copy)]
struct MaxTimestampAnswer {
    log_end_offset: i64,
    log_start_offset: i64,
    answer: (i64, i64),
}

/// Lock-free attempts of `set_high_watermark` before it takes the log's lock (the bounds moved under
/// each: a truncation or a log start move racing it).
const HIGH_WATERMARK_TRIES: usize = 4;

/// An aborted transaction of a partition: its producer, its first offset, its ABORT marker's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
    pub marker_offset: i64,
}

/// A partition's producer table, shared by the log's append paths and the broker.
pub type SharedProducers = Arc<Mutex<crate::storage::producer_state::ProducerTable>>;

pub struct PartitionLog {
    topic: String,
    partition: i32,
    /// The partition directory; replaced only when a move between log dirs swaps in the copy.
    dir: RwLock<PathBuf>,
    state: Mutex<LogState>,
    log_end_offset: AtomicI64,
    high_watermark: AtomicI64,
    /// The first offset of a transaction still open or whose marker the ISR lacks (set by the
    /// broker, which tracks transactions; `i64::MAX`: none): the cleaner stops below it.
    first_unstable_offset: AtomicI64,
    /// The aborted transactions whose markers are in the log, oldest marker first, as the broker's
    /// transaction state lists them (Kafka's .txnindex entries; set by the broker, which tracks
    /// transactions): a read_committed fetch is told the ones it overlaps.
    aborted_transactions: RwLock<Arc<Vec<AbortedTransaction>>>,
    /// The partition's idempotent-producer state (set by the broker, which snapshots and replays
    /// it): the native Produce paths check, append and record a producer's batch under its lock.
    producers: RwLock<Option<SharedProducers>>,
    log_start_offset: AtomicI64,
    recovery_point: AtomicI64,
    /// Called (without the log's lock) after the log start offset moved, to persist it.
    on_log_start_change: Mutex<Option<Hook>>,
    /// Called (without the log's lock) after a truncation lowered the recovery point, to persist it:
    /// a checkpoint left above the truncation would skip the recovery of the rewritten segments.
    on_recovery_point_lowered: Mutex<Option<Hook>>,
    /// Called (without the log's lock) after the high watermark moved up: the native Fetch path's
    /// parked long polls on this partition (`hw_watched` says whether one is set, read first).
    on_high_watermark_up: Mutex<Option<Hook>>,
    /// Someone besides the high watermark hook waits for this log's high watermark to move (the
    /// broker's Python long polls): whoever moves it without the broker tells the broker at once.
    high_watermark_waited: AtomicBool,
    hw_watched: AtomicBool,
    /// Called (without the log's lock) after an append as the leader: the native Fetch path's
    /// parked replicas' fetches on this partition (`append_watched` says whether one is set).
    on_leader_append: Mutex<Option<Hook>>,
    append_watched: AtomicBool,
    fd_budget: Option<Arc<FdBudget>>,
    /// Opening deferred writes it could not make (see `has_deferred_writes`).
    deferred_writes: bool,
}

/// The batches of one append. A produce request usually carries one batch: it is kept
/// inline, so the append path allocates nothing.
pub enum PreparedBatches<'a> {
    None,
    One([PreparedBatch<'a>; 1]),
    Many(Vec<PreparedBatch<'a>>),
}

impl<'a> PreparedBatches<'a> {
    fn push(&mut self, b: PreparedBatch<'a>) {
        *self = match std::mem::replace(self, PreparedBatches::None) {
            PreparedBatches::None => PreparedBatches::One([b]),
            PreparedBatches::One([a]) => PreparedBatches::Many(vec![a, b]),
            PreparedBatches::Many(mut v) => {
                v.push(b);
                PreparedBatches::Many(v)
            }
        };
    }
}

impl<'a> std::ops::Deref for PreparedBatches<'a> {
    type Target = [PreparedBatch<'a>];
    fn deref(&self) -> &Self::Target {
        match self {
            PreparedBatches::None => &[],
            PreparedBatches::One(a) => a,
            PreparedBatches::Many(v) => v,
        }
    }
}

impl std::ops::DerefMut for PreparedBatches<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            PreparedBatches::None => &mut [],
            PreparedBatches::One(a) => a,
            PreparedBatches::Many(v) => v,
        }
    }
}

/// Validate the batches of one append and copy out their headers for rewriting. Checks
/// magic, lengths, CRC and `RecordsCount == LastOffsetDelta + 1` for every batch.
pub fn prepare_batches<'a>(
    records: &'a [u8],
    timestamp_type: TimestampType,
    now: &LazyNow,
    max_message_bytes: i64,
) -> StorageResult<PreparedBatches<'a>> {
    prepare_batches_with(records, timestamp_type, now, max_message_bytes, false)
}

/// Check the stored CRC of every batch of `records` (whole batches, back to back).
pub fn verify_batch_crcs(records: &[u8]) -> StorageResult<()> {
    let mut pos = 0usize;
    while pos < records.len() {
        let h = BatchHeader::parse(&records[pos..], pos)?;
        let end = pos + h.size();
        if end > records.len() {
            return Err(CodecError::Truncated { field: "batch.records", offset: pos, needed: h.size(), available: records.len() - pos }.into());
        }
        crate::batch::header::verify_crc(&records[pos..end], &h, pos)?;
        pos = end;
    }
    Ok(())
}

/// `prepare_batches`; with `defer_crc` (CreateTime only) every check but the CRC, which the
/// caller runs itself (`verify_batch_crcs`).
pub fn prepare_batches_with<'a>(
    records: &'a [u8],
    timestamp_type: TimestampType,
    now: &LazyNow,
    max_message_bytes: i64,
    defer_crc: bool,
) -> StorageResult<PreparedBatches<'a>> {
    if records.is_empty() {
        return Err(StorageError::InvalidArgument("no record batches to append".into()));
    }
    let mut out = PreparedBatches::None;
    let mut pos = 0usize;
    while pos < records.len() {
        let rest = &records[pos..];
        let h = match timestamp_type {
            // Full check (magic, lengths, CRC, records count) in one pass.
            TimestampType::CreateTime if !defer_crc => validate_batch(rest, pos)?,
            TimestampType::CreateTime => {
                let h = BatchHeader::parse(rest, pos)?;
                check_counts(&h, pos)?;
                h
            }
            TimestampType::LogAppendTime => BatchHeader::parse(rest, pos)?,
        };
        let size = h.size();
        if size > rest.len() {
            return Err(CodecError::Truncated { field: "batch.records", offset: pos, needed: size, available: rest.len() }.into());
        }
        let header: &[u8; RECORD_BATCH_OVERHEAD] =
            rest[..RECORD_BATCH_OVERHEAD].try_into().expect("a parsed header is RECORD_BATCH_OVERHEAD bytes");
        out.push(prepare_batch(header, &h, &rest[RECORD_BATCH_OVERHEAD..size], pos, timestamp_type, now, max_message_bytes)?);
        pos += size;
    }
    Ok(out)
}

/// One batch of an append whose header `h` (bytes `header`, the batch at `pos` of the input) was
/// checked as the timestamp type asks (see `prepare_batches_with`): its size limit, and for
/// LogAppendTime its CRC and counts, and the header rewritten.
fn prepare_batch<'a>(
    header: &[u8; RECORD_BATCH_OVERHEAD],
    h: &BatchHeader,
    body: &'a [u8],
    pos: usize,
    timestamp_type: TimestampType,
    now: &LazyNow,
    max_message_bytes: i64,
) -> StorageResult<PreparedBatch<'a>> {
    let size = h.size();
    if size as i64 > max_message_bytes {
        return Err(StorageError::RecordTooLarge { size, limit: "max.message.bytes", max: max_message_bytes });
    }
    let mut header = *header;
    let mut max_ts = h.max_timestamp;
    match timestamp_type {
        TimestampType::CreateTime => {}
        TimestampType::LogAppendTime => {
            // One pass over the records serves both the check of the stored CRC and the
            // CRC of the rewritten header (CRC-32C combine).
            let body_crc = crc32c(body);
            let computed = crc32c::crc32c_combine(crc32c(&header[ATTRIBUTES_OFFSET..]), body_crc, body.len());
            if computed != h.crc {
                return Err(CodecError::CrcMismatch { offset: pos, stored: h.crc, computed }.into());
            }
            check_counts(h, pos)?;
            let attrs = h.attributes | ATTR_TIMESTAMP_TYPE;
            header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
            let now_ms = now.get();
            header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&now_ms.to_be_bytes());
            let crc = crc32c::crc32c_combine(crc32c(&header[ATTRIBUTES_OFFSET..]), body_crc, body.len());
            header[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            max_ts = now_ms;
        }
    }
    Ok(PreparedBatch { header, body, base_offset: h.base_offset, last_offset: h.last_offset(), max_timestamp: max_ts })
}

/// `prepare_batches_with` for the batch of a Produce partition, whose header the produce checks
/// read already ([`ProducedBatch`]): the same checks, without parsing it again.
pub fn prepare_produced<'a>(
    records: &'a [u8],
    produced: &ProducedBatch,
    timestamp_type: TimestampType,
    now: &LazyNow,
    max_message_bytes: i64,
    defer_crc: bool,
) -> StorageResult<PreparedBatches<'a>> {
    let batch = produced.bytes(records)?;
    let h = produced.header();
    if timestamp_type == TimestampType::CreateTime {
        // what `validate_batch` checks of a header, in its order, without parsing it
        if !defer_crc {
            produced.verify_crc(batch)?;
            header::check_counts(h, 0)?;
        } else {
            check_counts(h, 0)?;
        }
    }
    let body = &batch[RECORD_BATCH_OVERHEAD..];
    let prepared = prepare_batch(produced.header_bytes(), h, body, 0, timestamp_type, now, max_message_bytes)?;
    Ok(PreparedBatches::One([prepared]))
}

/// The checks `validate_batch` makes besides lengths and CRC: RecordsCount = LastOffsetDelta + 1
/// > 0 and a known compression codec.
fn check_counts(h: &BatchHeader, pos: usize) -> StorageResult<()> {
    if h.records_count <= 0 || h.records_count as i64 != h.last_offset_delta as i64 + 1 {
        return Err(CodecError::invalid(
            "batch.records_count",
            pos + RECORDS_COUNT_OFFSET,
            format!("records count {} != last offset delta {} + 1", h.records_count, h.last_offset_delta),
        )
        .into());
    }
    Compression::from_attributes(h.attributes, pos)?;
    Ok(())
}

fn list_segment_bases(dir: &Path) -> StorageResult<Vec<i64>> {
    super::cleaner::swap::finish_interrupted_swaps(dir)?;
    let mut bases = Vec::new();
    let mut indexes: Vec<(i64, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).ctx("list", dir)? {
        let entry = entry.ctx("list", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(b) = parse_segment_file_name(name, LOG_SUFFIX) {
            bases.push(b);
        } else if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".swap") || name.ends_with(".tmp") {
            // (`.cleaned` and `.swap` files of an interrupted cleaner swap were resolved before.)
            // Left over from an interrupted delete, compaction or checkpoint write.
            let _ = fs::remove_file(entry.path());
        } else if let Some(b) =
            parse_segment_file_name(name, INDEX_SUFFIX).or_else(|| parse_segment_file_name(name, TIME_INDEX_SUFFIX))
        {
            indexes.push((b, entry.path()));
        }
    }
    bases.sort_unstable();
    // An index without its log is an orphan of an interrupted delete.
    for (b, p) in indexes {
        if bases.binary_search(&b).is_err() {
            let _ = fs::remove_file(p);
        }
    }
    Ok(bases)
}

impl PartitionLog {
    /// Open (or create) the log in `dir`. Without a clean shutdown, segments from the one
    /// holding the recovery point on are re-validated: CRCs checked, indexes rebuilt, a torn
    /// or corrupt tail cut, later segments deleted, each drop reported in one warning.
    pub fn open(
        dir: &Path,
        topic: &str,
        partition: i32,
        config: LogConfig,
        opts: OpenOptions,
    ) -> StorageResult<PartitionLog> {
        config.validate()?;
        let created_dir = !dir.exists();
        fs::create_dir_all(dir).ctx("create partition dir", dir)?;
        let interval = config.index_interval_bytes as u64;
        let now = now_ms();
        let bases = list_segment_bases(dir)?;
        let mut segments: BTreeMap<i64, Box<Segment>> = BTreeMap::new();
        for (i, &b) in bases.iter().enumerate() {
            let end = bases.get(i + 1).copied().unwrap_or(b);
            segments.insert(b, Box::new(Segment::lazy(dir, b, end).with_fd_budget(opts.fd_budget.clone())));
        }
        let mut dir_dirty = false;
        let mut recovered: Option<(i64, Vec<(i32, i64)>)> = None;
        // Writes recovery could not make (disk full): kept in memory, retried on flush and close.
        let mut deferred = false;
        if segments.is_empty() {
            let base = opts.log_start_offset.unwrap_or(0).max(0);
            segments.insert(base, Box::new(Segment::create(dir, base, now, preallocation(&config))?.with_fd_budget(opts.fd_budget.clone())));
            dir_dirty = true;
        } else if !opts.clean_shutdown {
            let rp = opts.recovery_point.unwrap_or(i64::MIN);
            // Nothing was appended after the last flush when the active segment parses and
            // ends exactly at the recovery point (the common case for idle partitions).
            let (&last_base, last) = segments.iter_mut().next_back().expect("segments is not empty");
            let flushed_to_end = last_base <= rp && last.probe_end_offset()? == Some(rp);
            if !flushed_to_end {
                let first = segments.range(..=rp).next_back().map_or(bases[0], |(b, _)| *b);
                // What was appended to the active segment after the last flush is checked for gaps and
                // falling epochs. Only the active segment: logs open with the broker's default config, before
                // topic overrides are known, so a compacted log cannot be told apart here, and the cleaner
                // (which leaves gaps) never rewrites the active segment.
                let checks_from = rp.max(last_base);
                recovered = Some((first, recover_from(dir, &mut segments, first, checks_from, config.compact,
                                                      interval, &opts.fd_budget, &mut deferred)?));
            }
        } else {
            let (_, last) = segments.iter_mut().next_back().expect("segments is not empty");
            if last.probe_end_offset()?.is_none() {
                warn(format!(
                    "active segment {} of a cleanly shut down log does not parse; recovering it",
                    last.log_path().display()
                ));
                let b = last.base_offset();
                recovered = Some((b, recover_from(dir, &mut segments, b, b, config.compact, interval,
                                                  &opts.fd_budget, &mut deferred)?));
            }
        }
        let leo = segments.values().next_back().map_or(0, |s| s.end_offset());
        let first_base = *segments.keys().next().expect("segments is not empty");
        let mut log_start = opts.log_start_offset.unwrap_or(first_base).max(first_base);
        if log_start > leo {
            // The checkpoint says everything was deleted: start empty at the log start.
            warn(format!(
                "log start offset {log_start} of {} is past its end {leo}; starting an empty log there",
                dir.display()
            ));
            for (_, mut s) in std::mem::take(&mut segments) {
                s.delete()?;
            }
            segments.insert(log_start, Box::new(Segment::create(dir, log_start, now, preallocation(&config))?.with_fd_budget(opts.fd_budget.clone())));
            dir_dirty = true;
        }
        let leo = segments.values().next_back().map_or(0, |s| s.end_offset());
        log_start = log_start.min(leo);

        // Leader epoch cache: the checkpoint, cut at the log end, plus epochs seen by recovery.
        let epoch_path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let mut epochs = match read_epochs(&epoch_path) {
            Ok(e) => e,
            Err(e) => {
                warn(format!("ignoring unreadable {}: {e}", epoch_path.display()));
                Vec::new()
            }
        };
        let before = epochs.clone();
        // An epoch may start exactly at the log end: assigned when the partition became leader, before
        // its first append (`assign_epoch_start`).
        epochs.retain(|&(_, o)| o <= leo);
        if let Some((from, seen)) = &recovered {
            // Recovery rescanned these segments; their batches carry the epochs.
            epochs.retain(|&(_, o)| o < *from);
            for &(e, o) in seen {
                if epochs.last().is_none_or(|&(le, _)| e > le) {
                    epochs.push((e, o));
                }
            }
        }
        let mut epochs_dirty = false;
        if epochs != before {
            if let Err(e) = write_epochs(&epoch_path, &epochs) {
                warn(format!("could not write {} at open (retried on flush): {e}", epoch_path.display()));
                epochs_dirty = true;
                deferred = true;
            }
        }
        // After recovery the recovered bytes may still be only in the page cache (kill -9):
        // the recovery point stays where the last flush put it; the next flush syncs them.
        let recovery_point = match (&recovered, opts.recovery_point) {
            (Some(_), rp) => rp.unwrap_or(log_start).clamp(log_start, leo),
            (None, rp) => rp.unwrap_or(leo).clamp(log_start, leo),
        };
        let log = PartitionLog {
            topic: topic.to_owned(),
            partition,
            dir: RwLock::new(dir.to_path_buf()),
            state: Mutex::new(LogState {
                config: Arc::new(config),
                segments,
                epochs,
                last_flush_ms: now,
                dir_dirty,
                epochs_dirty,
                epochs_unsynced: false,
                parent_dir_dirty: created_dir,
                pending_deletes: Vec::new(),
                max_timestamp_answer: None,
                generation: 0,
                closed: false,
                closed_by_failure: false,
            }),
            log_end_offset: AtomicI64::new(leo),
            high_watermark: AtomicI64::new(leo),
            first_unstable_offset: AtomicI64::new(i64::MAX),
            aborted_transactions: RwLock::new(Arc::new(Vec::new())),
            producers: RwLock::new(None),
            log_start_offset: AtomicI64::new(log_start),
            recovery_point: AtomicI64::new(recovery_point),
            on_log_start_change: Mutex::new(None),
            on_recovery_point_lowered: Mutex::new(None),
            on_high_watermark_up: Mutex::new(None),
            high_watermark_waited: AtomicBool::new(false),
            hw_watched: AtomicBool::new(false),
            on_leader_append: Mutex::new(None),
            append_watched: AtomicBool::new(false),
            fd_budget: opts.fd_budget.clone(),
            deferred_writes: deferred,
        };
        Ok(log)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Opening could not write what recovery rebuilt (indexes, epoch checkpoint), e.g. on a
    /// full disk: it is kept in memory and served; the log dir should not take writes.
    pub fn has_deferred_writes(&self) -> bool {
        self.deferred_writes
    }
    pub fn partition(&self) -> i32 {
        self.partition
    }
    /// Record the id of the topic this log belongs to in its directory's `partition.metadata`
    /// (Kafka's `assignTopicId`), unless it names it already; an error if it names another.
    pub fn assign_topic_id(&self, topic_id: &str) -> StorageResult<()> {
        super::partition_metadata::assign_topic_id(&self.dir(), topic_id)
    }

    /// The topic id this log's `partition.metadata` names; None without the file.
    pub fn recorded_topic_id(&self) -> StorageResult<Option<String>> {
        super::partition_metadata::read_topic_id(&self.dir())
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }
    pub fn first_unstable_offset(&self) -> i64 {
        self.first_unstable_offset.load(Ordering::Acquire)
    }
    /// The broker's first unstable offset (see the field); the cleaner never cleans past it. Raised
    /// below the high watermark (a transaction ended after its marker's high watermark was set), the
    /// last stable offset moves up: the high watermark hook is called as for a high watermark moving
    /// up (a read_committed long poll parked on the log may have records now).
    pub fn set_first_unstable_offset(&self, offset: i64) {
        let old = self.first_unstable_offset.swap(offset, Ordering::AcqRel);
        if offset > old && old < self.high_watermark() {
            self.call_high_watermark_hook();
        }
    }
    /// The last stable offset at high watermark `high_watermark`: no read_committed consumer reads
    /// at or past it. Never below the log start (an open transaction's first records deleted by
    /// DeleteRecords), as Kafka's first unstable offset is raised to the log start.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        high_watermark.min(self.first_unstable_offset().max(self.log_start_offset()))
    }
    pub fn aborted_transactions(&self) -> Arc<Vec<AbortedTransaction>> {
        self.aborted_transactions.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// The broker's list of the log's aborted transactions (see the field), replaced whole.
    pub fn set_aborted_transactions(&self, aborted: Vec<AbortedTransaction>) {
        *self.aborted_transactions.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(aborted);
    }
    /// One more aborted transaction, its marker after the others' (the list is copied only while a
    /// reader holds it).
    pub fn add_aborted_transaction(&self, aborted: AbortedTransaction) {
        let mut list = self.aborted_transactions.write().unwrap_or_else(|p| p.into_inner());
        Arc::make_mut(&mut list).push(aborted);
    }
    /// The partition's producer state, when the broker set it.
    pub fn producers(&self) -> Option<SharedProducers> {
        self.producers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn set_producers(&self, producers: Option<SharedProducers>) {
        *self.producers.write().unwrap_or_else(|p| p.into_inner()) = producers;
    }
    /// (producer id, first offset) of each aborted transaction a read_committed fetch of
    /// [`from`, `to`) overlaps (its marker at or after `from`, its first offset before `to`), in the
    /// list's order: Kafka's collectAbortedTransactions.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        self.aborted_transactions()
            .iter()
            .filter(|a| a.marker_offset >= from && a.first_offset < to)
            .map(|a| (a.producer_id, a.first_offset))
            .collect()
    }

    /// Set the high watermark, clamped to [log start, log end].
    ///
    /// Without the log's lock: the broker mirrors the high watermark after every append, often while
    /// the native front appends to the same log on its own thread (holding the lock through the
    /// write), and waiting for that write held back every answer behind it. The bounds are atomics;
    /// an append only raises the log end, and a truncation or a log start move that lands between
    /// the clamp and the exchange is seen by the check after it, which clamps again.
    pub fn set_high_watermark(&self, hw: i64) -> i64 {
        let (old, v) = self.exchange_high_watermark(hw, false);
        if v > old {
            self.call_high_watermark_hook();
        }
        v
    }

    /// Raise the high watermark to `hw` (clamped as by `set_high_watermark`), never lower it: the
    /// high watermark now. For the writers that each move a one-replica log's high watermark to a
    /// log end they read earlier (the native front and the broker's mirror): with a plain set, the
    /// one that read the older end and stored last moved it back.
    pub fn raise_high_watermark(&self, hw: i64) -> i64 {
        let (old, v) = self.exchange_high_watermark(hw, true);
        if v > old {
            self.call_high_watermark_hook();
        }
        v
    }

    fn call_high_watermark_hook(&self) {
        if self.hw_watched.load(Ordering::Acquire) {
            let hook = self.on_high_watermark_up.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(hook) = hook {
                hook();
            }
        }
    }

    /// The exchange of `set_high_watermark` (and, `raise_only`, of `raise_high_watermark`): (the
    /// value replaced, the value now).
    fn exchange_high_watermark(&self, hw: i64, raise_only: bool) -> (i64, i64) {
        let clamped = || hw.min(self.log_end_offset()).max(self.log_start_offset());
        let in_bounds = |v: i64| v <= self.log_end_offset() && v >= self.log_start_offset();
        let mut current = self.high_watermark.load(Ordering::Acquire);
        let mut replaced = None;
        for _ in 0..HIGH_WATERMARK_TRIES {
            let v = clamped();
            if raise_only && v <= current && replaced.is_none() {
                return (current, current);
            }
            match self.high_watermark.compare_exchange(current, v, Ordering::AcqRel, Ordering::Acquire) {
                Ok(previous) => {
                    let old = *replaced.get_or_insert(previous);
                    if in_bounds(v) {
                        return (old, v);
                    }
                    // a truncation or log start move landed between the clamp and the exchange: clamp
                    // again, lowering it if need be (the bounds win over `raise_only`)
                    current = v;
                }
                Err(now) => current = now,
            }
        }
        // the bounds kept moving (or crossed, mid-way through a truncation): settle under the lock
        let _g = self.state.lock();
        let v = clamped();
        if !raise_only || replaced.is_some() {
            let previous = self.high_watermark.swap(v, Ordering::AcqRel);
            return (replaced.unwrap_or(previous), v);
        }
        // (other raisers still exchange without the lock: compare, never overwrite a higher one)
        let mut now = self.high_watermark.load(Ordering::Acquire);
        while v > now {
            match self.high_watermark.compare_exchange(now, v, Ordering::AcqRel, Ordering::Acquire) {
                Ok(previous) => return (previous, v),
                Err(seen) => now = seen,
            }
        }
        (now, now)
    }

    /// Whether the broker waits for this log's high watermark outside the hook (see the field).
    pub fn high_watermark_waited(&self) -> bool {
        self.high_watermark_waited.load(Ordering::Acquire)
    }

    pub fn set_high_watermark_waited(&self, waited: bool) {
        self.high_watermark_waited.store(waited, Ordering::Release);
    }

    /// Whether a high watermark hook is set (`set_high_watermark_hook`).
    pub fn has_high_watermark_hook(&self) -> bool {
        self.hw_watched.load(Ordering::Acquire)
    }

    /// Call `hook` (without the log's lock) each time the high watermark moves up; None: no more.
    pub fn set_high_watermark_hook(&self, hook: Option<Hook>) {
        let mut slot = self.on_high_watermark_up.lock().unwrap_or_else(|p| p.into_inner());
        self.hw_watched.store(hook.is_some(), Ordering::Release);
        *slot = hook;
    }

    /// Whether a leader append hook is set (`set_leader_append_hook`).
    pub fn has_leader_append_hook(&self) -> bool {
        self.append_watched.load(Ordering::Acquire)
    }

    /// Call `hook` (without the log's lock) after each append as the leader (`append`,
    /// `append_at`, `append_produced`); None: no more.
    pub fn set_leader_append_hook(&self, hook: Option<Hook>) {
        let mut slot = self.on_leader_append.lock().unwrap_or_else(|p| p.into_inner());
        self.append_watched.store(hook.is_some(), Ordering::Release);
        *slot = hook;
    }

    fn leader_appended(&self) {
        if self.append_watched.load(Ordering::Acquire) {
            let hook = self.on_leader_append.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(hook) = hook {
                hook();
            }
        }
    }

    pub fn set_log_start_hook(&self, hook: Option<Hook>) {
        *self.on_log_start_change.lock().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    /// Call `hook` (without the log's lock) after a truncation lowered the recovery point
    /// (Kafka's LogManager checkpoints the recovery points right after truncating); None: no more.
    pub fn set_recovery_point_lowered_hook(&self, hook: Option<Hook>) {
        *self.on_recovery_point_lowered.lock().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    fn run_recovery_point_lowered_hook(&self) {
        let hook = self.on_recovery_point_lowered.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(h) = hook {
            h();
        }
    }

    fn lock(&self) -> StorageResult<MutexGuard<'_, LogState>> {
        let g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if g.closed {
            return Err(StorageError::Closed(self.name()));
        }
        Ok(g)
    }

    pub fn config(&self) -> StorageResult<Arc<LogConfig>> {
        Ok(self.lock()?.config.clone())
    }

    /// Every call errors until a restart: the log was closed, deleted, or closed by a full
    /// truncation that failed midway.
    pub fn is_closed(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed
    }

    pub fn update_config(&self, config: LogConfig) -> StorageResult<()> {
        config.validate()?;
        self.lock()?.config = Arc::new(config);
        Ok(())
    }

    pub fn leader_epoch_entries(&self) -> StorageResult<Vec<(i32, i64)>> {
        Ok(self.lock()?.epochs.clone())
    }

    /// Whether a consumer that read records of `last_fetched_epoch` up to `fetch_offset` has
    /// diverged from this log ([`consumer_epoch_diverges`] over its epochs, without copying them).
    pub fn consumer_epoch_diverges(&self, last_fetched_epoch: i32, fetch_offset: i64) -> StorageResult<bool> {
        let st = self.lock()?;
        Ok(consumer_epoch_diverges(&st.epochs, self.log_end_offset(), last_fetched_epoch, fetch_offset))
    }

    /// Become leader at `epoch`: record that it starts at the log end (Kafka's
    /// `maybeAssignEpochStartOffset`), so the first append of that epoch writes no checkpoint.
    /// No-op when the latest epoch is already `epoch` or newer. The checkpoint is written
    /// without fsync (made durable by the next flush; recovery rebuilds epochs from batches).
    pub fn assign_epoch_start(&self, epoch: i32) -> StorageResult<()> {
        if epoch < 0 {
            return Err(StorageError::InvalidArgument(format!("negative leader epoch {epoch} for {}", self.name())));
        }
        let mut st = self.lock()?;
        if st.epochs.last().is_none_or(|&(e, _)| epoch > e) {
            let leo = self.log_end_offset();
            st.epochs.push((epoch, leo));
            self.save_epochs(&mut st);
        }
        Ok(())
    }

    /// Append batches as the leader: validate, assign offsets from the log end, stamp the
    /// leader epoch (and the time for LogAppendTime topics), write them in one vectored
    /// write. All or nothing: on error the log is as before.
    pub fn append(&self, records: &[u8], leader_epoch: i32, now_ms: i64) -> StorageResult<AppendInfo> {
        self.append_at(records, leader_epoch, &LazyNow::new(Some(now_ms)))
    }

    /// `append` with the time read only when needed (LogAppendTime, time-based roll or flush).
    pub fn append_at(&self, records: &[u8], leader_epoch: i32, now: &LazyNow) -> StorageResult<AppendInfo> {
        let info = self.append_leader(records, None, leader_epoch, now)?;
        self.leader_appended();
        Ok(info)
    }

    /// `append_at` of the batch of a Produce partition (`records`) that the produce checks
    /// accepted as `produced`: its header is not parsed again.
    pub fn append_produced(
        &self,
        records: &[u8],
        produced: &ProducedBatch,
        leader_epoch: i32,
        now: &LazyNow,
    ) -> StorageResult<AppendInfo> {
        let info = self.append_leader(records, Some(produced), leader_epoch, now)?;
        self.leader_appended();
        Ok(info)
    }

    fn append_leader(
        &self,
        records: &[u8],
        produced: Option<&ProducedBatch>,
        leader_epoch: i32,
        now: &LazyNow,
    ) -> StorageResult<AppendInfo> {
        let mut st = self.lock()?;
        let cfg: LogConfig = *st.config;
        let prepare = |defer_crc: bool| match produced {
            Some(p) => prepare_produced(records, p, cfg.message_timestamp_type, now, cfg.max_message_bytes, defer_crc),
            None => prepare_batches_with(records, cfg.message_timestamp_type, now, cfg.max_message_bytes, defer_crc),
        };
        // Large inputs are validated (CRC) without holding the lock, so reads are not held up;
        // the largest overlap the CRC with the write.
        let parallel_crc =
            records.len() >= PARALLEL_CRC_BYTES && cfg.message_timestamp_type == TimestampType::CreateTime;
        let mut batches = if parallel_crc {
            prepare(true)?
        } else if records.len() >= VALIDATE_UNLOCKED_BYTES {
            drop(st);
            let b = prepare(false)?;
            st = self.lock()?;
            b
        } else {
            prepare(false)?
        };
        if let Some(&(latest, _)) = st.epochs.last() {
            if leader_epoch < latest {
                return Err(StorageError::InvalidArgument(format!(
                    "leader epoch {leader_epoch} is older than the latest epoch {latest} of {}",
                    self.name()
                )));
            }
        }
        let base = self.log_end_offset();
        let mut next = base;
        let mut first_transactional = None;
        for b in batches.iter_mut() {
            let delta = b.last_offset - b.base_offset;
            set_base_offset(&mut b.header, next);
            set_partition_leader_epoch(&mut b.header, leader_epoch);
            b.base_offset = next;
            b.last_offset = next + delta;
            next = b.last_offset + 1;
            if first_transactional.is_none() && header::read_i16(&b.header, ATTRIBUTES_OFFSET) & header::ATTR_TRANSACTIONAL != 0 {
                first_transactional = Some(b.base_offset);
            }
        }
        // Before the log end moves past it: a transactional batch bounds the first unstable offset
        // (the broker sets it again once it has accounted the transaction). Whoever moves the high
        // watermark from the log end without the broker (the native front) stops there.
        if let Some(first) = first_transactional {
            self.first_unstable_offset.fetch_min(first, Ordering::AcqRel);
        }
        let verify = move || match produced {
            Some(p) => Ok(p.verify_crc(records)?),
            None => verify_batch_crcs(records),
        };
        let check: Option<&(dyn Fn() -> StorageResult<()> + Sync)> = if parallel_crc { Some(&verify) } else { None };
        let info = self.write_batches_checked(&mut st, &cfg, &batches, now, check)?;
        if st.epochs.last().is_none_or(|&(e, _)| leader_epoch > e) && leader_epoch >= 0 {
            st.epochs.push((leader_epoch, base));
            self.save_epochs(&mut st);
        }
        let lat = if cfg.message_timestamp_type == TimestampType::LogAppendTime { now.get() } else { NO_TIMESTAMP };
        Ok(AppendInfo { log_append_time: lat, ..info })
    }

    /// Append batches that already carry offsets (a follower copying the leader). Offsets
    /// must start at or after the log end and increase, but for an empty log whose end falls
    /// inside the first batch: it restarts at that batch's base (the leader's DeleteRecords moved
    /// its log start into the batch, and the follower fetches from there), as Kafka's follower
    /// does on an UnexpectedAppendOffsetException.
    pub fn append_as_follower(&self, records: &[u8]) -> StorageResult<AppendInfo> {
        let cfg = self.config()?;
        let now = LazyNow::new(None);
        let batches = prepare_batches(records, TimestampType::CreateTime, &now, i64::MAX)?;
        let mut st = self.lock()?;
        let leo = self.log_end_offset();
        let restart_at = batches
            .first()
            .filter(|b| leo == self.log_start_offset() && b.base_offset < leo && b.last_offset >= leo)
            .map(|b| b.base_offset);
        let mut expect = restart_at.unwrap_or(leo);
        for b in batches.iter() {
            if b.base_offset < expect {
                return Err(StorageError::InvalidArgument(format!(
                    "out of order offsets: batch at offset {} but {} expects at least {expect}",
                    b.base_offset,
                    self.name()
                )));
            }
            expect = b.last_offset + 1;
        }
        let (restarted, rp_lowered) = match restart_at {
            Some(base) => {
                let (_, started, lowered) = self.restart_at_locked(&mut st, base)?;
                (started, lowered)
            }
            None => (false, false),
        };
        let first = batches[0].base_offset;
        if first > self.log_end_offset() {
            // A gap (e.g. the leader's log starts later): begin a new segment at it.
            self.roll_locked(&mut st, &cfg, first, now.get())?;
        }
        let info = self.write_batches(&mut st, &cfg, &batches, &now)?;
        let mut changed = false;
        for b in batches.iter() {
            let epoch = i32::from_be_bytes(b.header[12..16].try_into().unwrap_or([0xff; 4]));
            if epoch >= 0 && st.epochs.last().is_none_or(|&(e, _)| epoch > e) {
                st.epochs.push((epoch, b.base_offset));
                changed = true;
            }
        }
        if changed {
            self.save_epochs(&mut st);
        }
        drop(st);
        if restarted {
            self.run_log_start_hook();
        }
        if rp_lowered {
            self.run_recovery_point_lowered_hook();
        }
        Ok(info)
    }

    fn write_batches(
        &self,
        st: &mut LogState,
        cfg: &LogConfig,
        batches: &[PreparedBatch<'_>],
        now: &LazyNow,
    ) -> StorageResult<AppendInfo> {
        self.write_batches_checked(st, cfg, batches, now, None)
    }

    fn write_batches_checked(
        &self,
        st: &mut LogState,
        cfg: &LogConfig,
        batches: &[PreparedBatch<'_>],
        now: &LazyNow,
        check: Option<&(dyn Fn() -> StorageResult<()> + Sync)>,
    ) -> StorageResult<AppendInfo> {
        let interval = cfg.index_interval_bytes as u64;
        let bytes: usize = batches.iter().map(|b| b.size()).sum();
        let first = batches.first().map_or(0, |b| b.base_offset);
        let last = batches.last().map_or(0, |b| b.last_offset);
        let (mut max_ts, mut max_ts_off) = (NO_TIMESTAMP, first);
        for b in batches {
            if b.max_timestamp > max_ts {
                max_ts = b.max_timestamp;
                max_ts_off = b.last_offset;
            }
        }
        {
            let active = Self::active(st)?;
            active.activate(interval)?;
            if active.should_roll(cfg, bytes as u64, max_ts, last, || now.get()) {
                self.roll_locked(st, cfg, first, now.get())?;
            }
        }
        let active = Self::active(st)?;
        active.activate(interval)?;
        active.append_checked(batches, interval, check)?;
        self.log_end_offset.store(last + 1, Ordering::Release);
        self.maybe_flush(st, cfg, now)?;
        Ok(AppendInfo {
            base_offset: first,
            last_offset: last,
            log_append_time: NO_TIMESTAMP,
            log_start_offset: self.log_start_offset(),
            max_timestamp: max_ts,
            offset_of_max_timestamp: max_ts_off,
            num_batches: batches.len(),
            bytes,
        })
    }

    /// Persist the epoch cache. Called after the data it describes is written, so a failure
    /// (disk full) must not fail that operation: it is reported and retried later; a crash
    /// before a retry rebuilds the cache from the batches' epochs during recovery.
    fn save_epochs(&self, st: &mut LogState) {
        match write_epochs_with(&self.dir().join(LEADER_EPOCH_CHECKPOINT), &st.epochs, false) {
            Ok(()) => {
                st.epochs_dirty = false;
                st.epochs_unsynced = true;
            }
            Err(e) => {
                if !st.epochs_dirty {
                    warn(format!("could not write the leader epoch checkpoint (will retry): {e}"));
                }
                st.epochs_dirty = true;
            }
        }
    }

    fn active(st: &mut LogState) -> StorageResult<&mut Segment> {
        st.segments
            .values_mut()
            .next_back()
            .map(|b| &mut **b)
            .ok_or_else(|| StorageError::InvalidArgument("log has no segments".into()))
    }

    fn maybe_flush(&self, st: &mut LogState, cfg: &LogConfig, now: &LazyNow) -> StorageResult<()> {
        let unflushed = self.log_end_offset() - self.recovery_point();
        let by_count = cfg.flush_messages.is_some_and(|n| unflushed >= n);
        let by_time = cfg.flush_ms.is_some_and(|ms| unflushed > 0 && now.get() - st.last_flush_ms >= ms);
        if by_count || by_time {
            self.flush_locked(st, now.get())?;
        }
        Ok(())
    }

    /// Seal the active segment and start a new one at `new_base` (no-op if the active
    /// segment is empty and already starts there).
    fn roll_locked(&self, st: &mut LogState, _cfg: &LogConfig, new_base: i64, now: i64) -> StorageResult<()> {
        let active = Self::active(st)?;
        let size = active.size()?;
        if size == 0 {
            if active.base_offset() == new_base {
                return Ok(());
            }
            // An empty active segment is replaced, not kept as an empty sealed one.
            let b = active.base_offset();
            if let Some(mut s) = st.segments.remove(&b) {
                s.delete()?;
            }
        } else {
            active.seal()?;
            active.set_end_offset(new_base);
        }
        let seg = Box::new(Segment::create(&self.dir(), new_base, now, preallocation(st.config.as_ref()))?.with_fd_budget(self.fd_budget.clone()));
        st.segments.insert(new_base, seg);
        st.dir_dirty = true;
        Ok(())
    }

    /// Start a new segment at the log end.
    pub fn roll(&self) -> StorageResult<()> {
        let mut st = self.lock()?;
        let cfg = st.config.clone();
        let leo = self.log_end_offset();
        self.roll_locked(&mut st, &cfg, leo, now_ms())
    }

    fn flush_locked(&self, st: &mut LogState, now: i64) -> StorageResult<()> {
        let rp = self.recovery_point();
        let leo = self.log_end_offset();
        // Segments that may hold data at or after the recovery point.
        let first = st.segments.range(..=rp).next_back().map_or(i64::MIN, |(b, _)| *b);
        for (_, s) in st.segments.range_mut(first..) {
            s.flush()?;
        }
        self.sync_metadata(st)?;
        self.recovery_point.store(leo, Ordering::Release);
        st.last_flush_ms = now;
        Ok(())
    }

    /// Make the epoch checkpoint and directory entries durable.
    fn sync_metadata(&self, st: &mut LogState) -> StorageResult<()> {
        if st.epochs_dirty || st.epochs_unsynced {
            write_epochs(&self.dir().join(LEADER_EPOCH_CHECKPOINT), &st.epochs)?;
            st.epochs_dirty = false;
            st.epochs_unsynced = false;
        }
        if st.dir_dirty {
            fsync_dir(&self.dir()).ctx("fsync", &self.dir())?;
            st.dir_dirty = false;
        }
        if st.parent_dir_dirty {
            if let Some(parent) = self.dir().parent() {
                fsync_dir(parent).ctx("fsync", parent)?;
            }
            st.parent_dir_dirty = false;
        }
        Ok(())
    }

    /// fsync everything appended so far; the recovery point becomes the log end.
    pub fn flush(&self) -> StorageResult<()> {
        let mut st = self.lock()?;
        self.flush_locked(&mut st, now_ms())
    }

    /// Flush if `flush.ms` has elapsed since the last flush and there is unflushed data.
    pub fn flush_if_due(&self, now: i64) -> StorageResult<bool> {
        let mut st = self.lock()?;
        let due = st.config.flush_ms.is_some_and(|ms| now - st.last_flush_ms >= ms)
            && self.log_end_offset() > self.recovery_point();
        if due {
            self.flush_locked(&mut st, now)?;
        }
        Ok(due)
    }

    /// Whole batches starting with the one holding `offset`; see `Segment::read_range`.
    pub fn read(&self, offset: i64, max_bytes: u64, max_offset: Option<i64>, min_one_batch: bool) -> StorageResult<ReadInfo> {
        let mut st = self.lock()?;
        let interval = st.config.index_interval_bytes as u64;
        let (ls, leo) = (self.log_start_offset(), self.log_end_offset());
        let mut info = ReadInfo { range: None, high_watermark: self.high_watermark(), log_start_offset: ls, log_end_offset: leo };
        if offset < ls || offset > leo {
            return Err(StorageError::OffsetOutOfRange {
                partition: self.name(),
                offset,
                log_start_offset: ls,
                log_end_offset: leo,
            });
        }
        let upper = max_offset.unwrap_or(leo).min(leo);
        if offset >= upper {
            return Ok(info);
        }
        let first = st.segments.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for (&base, seg) in st.segments.range_mut(first..) {
            if base >= upper {
                break;
            }
            if let Some((pos, len)) = seg.read_range(offset.max(base), upper, max_bytes, min_one_batch, interval)? {
                if len > 0 {
                    info.range =
                        Some(FileRange { file: seg.log_file()?, path: seg.log_path().to_path_buf(), position: pos, length: len });
                }
                return Ok(info);
            }
        }
        Ok(info)
    }

    /// (offset, timestamp) of the first record with timestamp >= `ts` (at or after the log
    /// start), or `None` if there is none.
    pub fn offset_for_timestamp(&self, ts: i64) -> StorageResult<Option<(i64, i64)>> {
        let mut st = self.lock()?;
        let interval = st.config.index_interval_bytes as u64;
        let ls = self.log_start_offset();
        for seg in st.segments.values_mut() {
            let (max_ts, _) = seg.max_timestamp_and_offset(interval)?;
            if max_ts < ts {
                continue;
            }
            if let Some((pos, h)) = seg.find_batch_by_timestamp(ts, ls, interval)? {
                let bytes = seg.read_bytes(pos, h.size())?;
                return Ok(Some(first_record_at_or_after(&bytes, &h, ts, ls)));
            }
        }
        Ok(None)
    }

    /// (offset, timestamp) of the record with the largest timestamp, (-1, -1) if none.
    pub fn max_timestamp_offset(&self) -> StorageResult<(i64, i64)> {
        let mut st = self.lock()?;
        // Appends hold the lock, so both offsets are stable while it is held.
        let (leo, start) = (self.log_end_offset(), self.log_start_offset());
        if let Some(c) = st.max_timestamp_answer {
            if c.log_end_offset == leo && c.log_start_offset == start {
                return Ok(c.answer);
            }
        }
        let answer = Self::find_max_timestamp_offset(&mut st, start)?;
        st.max_timestamp_answer = Some(MaxTimestampAnswer { log_end_offset: leo, log_start_offset: start, answer });
        Ok(answer)
    }

    fn find_max_timestamp_offset(st: &mut LogState, log_start_offset: i64) -> StorageResult<(i64, i64)> {
        let interval = st.config.index_interval_bytes as u64;
        let (mut best_ts, mut best_off, mut best_seg) = (NO_TIMESTAMP, -1i64, None);
        for (b, seg) in st.segments.iter_mut() {
            let (ts, off) = seg.max_timestamp_and_offset(interval)?;
            if ts > best_ts {
                best_ts = ts;
                best_off = off;
                best_seg = Some(*b);
            }
        }
        let Some(b) = best_seg else { return Ok((-1, -1)) };
        // The index holds the batch's last offset; find the record within the batch.
        let seg = st.segments.get_mut(&b).expect("segment key was just read");
        if let Some((pos, h)) = seg.find_batch(best_off, interval)? {
            let bytes = seg.read_bytes(pos, h.size())?;
            let (off, ts) = first_record_at_or_after(&bytes, &h, best_ts, log_start_offset);
            if ts == best_ts {
                return Ok((off, ts));
            }
        }
        Ok((best_off, best_ts))
    }

    /// Move the log start offset up to `offset` (Kafka's DeleteRecords), deleting segments
    /// entirely below it. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> StorageResult<i64> {
        let new_start = {
            let mut st = self.lock()?;
            let hw = self.high_watermark();
            let ls = self.log_start_offset();
            if offset > hw || offset < 0 {
                return Err(StorageError::DeleteBeyondHighWatermark {
                    partition: self.name(),
                    offset,
                    log_start_offset: ls,
                    high_watermark: hw,
                });
            }
            if offset <= ls {
                return Ok(ls);
            }
            self.log_start_offset.store(offset, Ordering::Release);
            self.delete_segments_below_start(&mut st)?;
            offset
        };
        self.run_log_start_hook();
        Ok(new_start)
    }

    fn run_log_start_hook(&self) {
        let hook = self.on_log_start_change.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(h) = hook {
            h();
        }
    }

    /// Delete sealed segments whose every offset is below the log start; cut the epoch cache.
    fn delete_segments_below_start(&self, st: &mut LogState) -> StorageResult<usize> {
        let ls = self.log_start_offset();
        let bases: Vec<i64> = st.segments.keys().copied().collect();
        let mut n = 0;
        let now = now_ms();
        for w in bases.windows(2) {
            if w[1] <= ls {
                if let Some(s) = st.segments.remove(&w[0]) {
                    self.retire_or_close(st, s, now)?;
                    n += 1;
                }
            }
        }
        Self::truncate_epochs_from_start(st, ls, &self.dir())?;
        Ok(n)
    }

    /// `retire_segment` of a segment already out of the segment map (retention, DeleteRecords, a
    /// truncation): if it fails, its files stay on disk while the log no longer knows them, and a
    /// retry would find nothing left to retire (the files leaked, to come back at the next start),
    /// so the log is closed until a restart (`closed_by_failure`: every later call errors and the
    /// caller takes the dir offline, as Kafka's deleteSegments hands the IOException to the
    /// LogDirFailureChannel).
    fn retire_or_close(&self, st: &mut LogState, seg: Box<Segment>, now: i64) -> StorageResult<()> {
        let base = seg.base_offset();
        Self::retire_segment(st, seg, now).inspect_err(|e| {
            self.close_after_failure(st, &format!("retiring segment {base} failed: {e}"));
        })
    }

    /// Delete a segment that retention or delete-records removed from the log, as Kafka does:
    /// its files are renamed `*.deleted` now and removed `file.delete.delay.ms` later (readers
    /// that already hold its descriptor finish undisturbed; nothing new can find it).
    fn retire_segment(st: &mut LogState, mut seg: Box<Segment>, now: i64) -> StorageResult<()> {
        let delay = st.config.file_delete_delay_ms;
        if delay == 0 {
            return seg.delete();
        }
        let files = seg.rename_for_delete()?;
        if !files.is_empty() {
            st.pending_deletes.push((now.saturating_add(delay), files));
        }
        Ok(())
    }

    /// Remove the `*.deleted` files whose `file.delete.delay.ms` has passed; returns how many
    /// segments' files were removed. Called periodically by the broker's maintenance.
    pub fn delete_expired_files(&self, now: i64) -> StorageResult<usize> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Self::remove_pending(&mut st, Some(now))
    }

    /// Files of segments waiting for removal (renamed `*.deleted`).
    pub fn pending_deleted_files(&self) -> Vec<PathBuf> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.pending_deletes.iter().flat_map(|(_, f)| f.iter().cloned()).collect()
    }

    /// Remove pending `*.deleted` files due by `now` (all of them with `None`).
    fn remove_pending(st: &mut LogState, now: Option<i64>) -> StorageResult<usize> {
        let due = st.pending_deletes.iter().take_while(|(at, _)| now.is_none_or(|n| *at <= n)).count();
        for (_, files) in st.pending_deletes.drain(..due) {
            for f in files {
                match fs::remove_file(&f) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).ctx("delete", &f),
                }
            }
        }
        Ok(due)
    }

    fn truncate_epochs_from_start(st: &mut LogState, start: i64, dir: &Path) -> StorageResult<()> {
        // Keep the latest epoch starting at or before `start`, moved up to `start`.
        let before = st.epochs.clone();
        let keep_from = st.epochs.iter().rposition(|&(_, o)| o <= start);
        if let Some(i) = keep_from {
            st.epochs.drain(..i);
            if let Some(e) = st.epochs.first_mut() {
                e.1 = e.1.max(start);
            }
        }
        if st.epochs != before {
            write_epochs(&dir.join(LEADER_EPOCH_CHECKPOINT), &st.epochs)?;
        }
        Ok(())
    }

    /// Remove every batch from the one holding `offset` on (replication's truncation).
    /// An offset below the log start empties the log and restarts it there.
    pub fn truncate_to(&self, offset: i64) -> StorageResult<()> {
        let (rp_lowered, start_moved) = self.truncate_to_locked(offset)?;
        if start_moved {
            self.run_log_start_hook();
        }
        if rp_lowered {
            self.run_recovery_point_lowered_hook();
        }
        Ok(())
    }

    /// `truncate_to` under the log's lock: (the recovery point went down, the log start moved);
    /// the caller runs the hooks once the lock is released.
    fn truncate_to_locked(&self, offset: i64) -> StorageResult<(bool, bool)> {
        let mut st = self.lock()?;
        let interval = st.config.index_interval_bytes as u64;
        let leo = self.log_end_offset();
        if offset >= leo {
            // Kafka's truncateTo trims the epoch cache even then: a leader that appended nothing
            // in its epoch left an entry at the log end that the new leader's history replaces.
            let before = st.epochs.len();
            st.epochs.retain(|&(_, o)| o < leo);
            if st.epochs.len() != before {
                self.save_epochs(&mut st);
            }
            return Ok((false, false));
        }
        if offset < 0 {
            return Err(StorageError::InvalidArgument(format!("cannot truncate {} to negative offset {offset}", self.name())));
        }
        // The log end may come back to the same offset with other batches.
        st.max_timestamp_answer = None;
        st.generation += 1;
        let mut new_leo = offset;
        let now = now_ms();
        let old_start = self.log_start_offset();
        // Whole segments cut off are retired like retention's (renamed `*.deleted`, removed after
        // file.delete.delay.ms): a fetch already holding their slices finishes reading them.
        if offset <= self.log_start_offset() {
            self.restart_segments_at(&mut st, offset, now)?;
            self.log_start_offset.store(offset, Ordering::Release);
        } else {
            let later: Vec<i64> = st.segments.range(offset..).map(|(b, _)| *b).collect();
            let keep_first = *st.segments.keys().next().ok_or_else(|| self.no_segments())?;
            for b in later {
                if b == keep_first {
                    continue;
                }
                if let Some(s) = st.segments.remove(&b) {
                    self.retire_or_close(&mut st, s, now)?;
                }
            }
            let seg = Self::active(&mut st)?;
            if let Some((_, h)) = seg.find_batch(offset, interval)? {
                new_leo = h.base_offset.min(offset);
            }
            seg.truncate_to(offset, interval)?;
            seg.set_end_offset(new_leo);
        }
        self.log_end_offset.store(new_leo, Ordering::Release);
        // Read-modify-writes, not a load and a store: a high watermark set lower in between (the
        // setter's compare-and-exchange runs without the lock) must not be raised back to new_leo,
        // and a setter whose exchange follows this one then sees the new log end and clamps to it.
        self.high_watermark.fetch_min(new_leo, Ordering::AcqRel);
        let old_rp = self.recovery_point.fetch_min(new_leo, Ordering::AcqRel);
        let before = st.epochs.len();
        st.epochs.retain(|&(_, o)| o < new_leo);
        if st.epochs.len() != before {
            self.save_epochs(&mut st);
        }
        Ok((old_rp > new_leo, self.log_start_offset() != old_start))
    }

    /// Empty the log and restart it at `offset` (Kafka's `truncateFullyAndStartAt`): a follower
    /// whose log ends before the leader's log start keeps nothing it holds. Every segment is retired
    /// (as `truncate_to` retires them), a new empty one starts at `offset`, and the log start, log
    /// end, recovery point and high watermark all become `offset`; the epoch cache is cleared (the
    /// leader's epochs come with the batches fetched from `offset` on).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> StorageResult<()> {
        if offset < 0 {
            return Err(StorageError::InvalidArgument(format!("cannot restart {} at negative offset {offset}", self.name())));
        }
        let (hw_up, start_moved, rp_lowered) = {
            let mut st = self.lock()?;
            self.restart_at_locked(&mut st, offset)?
        };
        if start_moved {
            self.run_log_start_hook(); // the log manager checkpoints the new log start
        }
        if rp_lowered {
            self.run_recovery_point_lowered_hook();
        }
        if hw_up {
            self.call_high_watermark_hook();
        }
        Ok(())
    }

    /// `truncate_fully_and_start_at` under the log's lock: (the high watermark moved up, the log
    /// start moved, the recovery point went down); the caller runs the hooks once the lock is released.
    fn restart_at_locked(&self, st: &mut LogState, offset: i64) -> StorageResult<(bool, bool, bool)> {
        st.max_timestamp_answer = None;
        // the cleaner abandons what it planned on the segments retired here
        st.generation += 1;
        self.restart_segments_at(st, offset, now_ms())?;
        // the bounds move so that the start never passes the end (a lock-free high watermark
        // setter clamps between them)
        let old_start = self.log_start_offset();
        if offset >= self.log_end_offset() {
            self.log_end_offset.store(offset, Ordering::Release);
            self.log_start_offset.store(offset, Ordering::Release);
        } else {
            self.log_start_offset.store(offset, Ordering::Release);
            self.log_end_offset.store(offset, Ordering::Release);
        }
        let old_hw = self.high_watermark.swap(offset, Ordering::AcqRel);
        let old_rp = self.recovery_point.swap(offset, Ordering::AcqRel);
        if !st.epochs.is_empty() {
            st.epochs.clear();
            self.save_epochs(st);
        }
        Ok((offset > old_hw, offset != old_start, old_rp > offset))
    }

    /// Retire every segment and go on with a new empty one at `offset` (a full truncation). The
    /// new segment is made first, so a failed create (ENOSPC, EMFILE, EIO) leaves the log as it
    /// was; only when a segment already has base `offset` must that name be freed first. A failure
    /// once the segments changed closes the log (every later call errors): left without segments,
    /// or with the new one under the old bounds, it must not be served.
    fn restart_segments_at(&self, st: &mut LogState, offset: i64, now: i64) -> StorageResult<()> {
        let pre = preallocation(st.config.as_ref());
        let dir = self.dir();
        let create = || Segment::create(&dir, offset, now, pre).map(|s| Box::new(s.with_fd_budget(self.fd_budget.clone())));
        let clash = st.segments.contains_key(&offset);
        let new = if clash { None } else { Some(create()?) };
        st.dir_dirty = true;
        let old = std::mem::take(&mut st.segments);
        if let Some(new) = new {
            st.segments.insert(offset, new);
        }
        let mut res = Ok(());
        for (_, s) in old {
            // the others are still retired: a file left behind would come back at the next start
            if let Err(e) = Self::retire_segment(st, s, now) {
                res = res.and(Err(e));
            }
        }
        if clash && res.is_ok() {
            match create() {
                Ok(s) => {
                    st.segments.insert(offset, s);
                }
                Err(e) => res = Err(e),
            }
        }
        if let Err(e) = &res {
            self.close_after_failure(st, &format!("a full truncation to {offset} failed midway: {e}"));
        }
        res
    }

    /// Close the log until a restart over a write that failed midway (see `closed_by_failure`).
    fn close_after_failure(&self, st: &mut LogState, what: &str) {
        st.closed = true;
        st.closed_by_failure = true;
        warn(format!("{} is closed until a restart: {what}", self.name()));
    }

    /// The log was closed by a write that failed midway (a full truncation, a cleaner swap):
    /// its log dir must go offline, as Kafka's LogDirFailureChannel takes it on an IOException.
    pub fn closed_by_failure(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed_by_failure
    }

    /// The error of a log found without segments (closed after a failed full truncation).
    fn no_segments(&self) -> StorageError {
        StorageError::Closed(format!("{} (it has no segments)", self.name()))
    }

    /// Delete old segments by `retention.ms` and `retention.bytes` (and those wholly below
    /// the log start), never beyond the high watermark. Returns how many were deleted.
    pub fn apply_retention(&self, now: i64) -> StorageResult<usize> {
        let deleted = {
            let mut st = self.lock()?;
            let cfg = st.config.clone();
            let interval = cfg.index_interval_bytes as u64;
            let hw = self.high_watermark();
            let leo = self.log_end_offset();
            let ls = self.log_start_offset();
            let bases: Vec<i64> = st.segments.keys().copied().collect();
            let mut total: i64 = 0;
            for b in &bases {
                total += st.segments.get_mut(b).expect("key from map").size()? as i64;
            }
            // `cleanup.policy` without `delete` (compact only): no time or size retention, only
            // segments wholly below the log start go.
            let mut excess = if cfg.delete && cfg.retention_bytes >= 0 { total - cfg.retention_bytes } else { 0 };
            let mut count = 0usize;
            for (i, b) in bases.iter().enumerate() {
                let end = bases.get(i + 1).copied().unwrap_or(leo);
                let seg = st.segments.get_mut(b).expect("key from map");
                let size = seg.size()? as i64;
                // An empty sealed segment (all its records cleaned away) does not stop retention.
                if end > hw || (size == 0 && i + 1 == bases.len()) {
                    break;
                }
                let by_start = end <= ls;
                let by_time = cfg.delete
                    && cfg.retention_ms >= 0
                    && now - seg.largest_timestamp_for_retention(interval)? > cfg.retention_ms;
                let by_size = cfg.delete && cfg.retention_bytes >= 0 && excess - size >= 0;
                if !(by_start || by_time || by_size) {
                    break;
                }
                excess -= size;
                count += 1;
            }
            if count == 0 {
                0
            } else {
                if count == bases.len() {
                    // Everything expired, the active segment too: roll so it can go.
                    self.roll_locked(&mut st, &cfg, leo, now)?;
                }
                for b in &bases[..count] {
                    if let Some(s) = st.segments.remove(b) {
                        self.retire_or_close(&mut st, s, now)?;
                    }
                }
                let first = *st.segments.keys().next().expect("a segment remains");
                if first > self.log_start_offset() {
                    self.log_start_offset.store(first, Ordering::Release);
                }
                Self::truncate_epochs_from_start(&mut st, self.log_start_offset(), &self.dir())?;
                count
            }
        };
        if deleted > 0 {
            self.run_log_start_hook();
        }
        Ok(deleted)
    }

    /// What the log cleaner needs to choose and plan a cleaning: the sealed segments (the active
    /// one is never cleaned), the offsets and the config, and the generation a swap must match.
    pub fn cleaner_view(&self) -> StorageResult<CleanerView> {
        let mut st = self.lock()?;
        let config = *st.config;
        let bases: Vec<i64> = st.segments.keys().copied().collect();
        let active_base = *bases.last().ok_or_else(|| self.no_segments())?;
        let interval = config.index_interval_bytes as u64;
        let mut segments = Vec::with_capacity(bases.len().saturating_sub(1));
        for (i, &b) in bases[..bases.len() - 1].iter().enumerate() {
            let seg = st.segments.get_mut(&b).expect("key from map");
            seg.ensure_indexes(interval)?;
            segments.push(CleanerSegment {
                base: b,
                end: bases[i + 1],
                size: seg.size()?,
                offset_index_bytes: (seg.offset_index_len() * super::offset_index::OFFSET_INDEX_ENTRY_SIZE) as u64,
                time_index_bytes: (seg.time_index_len() * super::time_index::TIME_INDEX_ENTRY_SIZE) as u64,
            });
        }
        Ok(CleanerView {
            segments,
            active_base,
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
            high_watermark: self.high_watermark(),
            first_unstable_offset: self.first_unstable_offset(),
            config,
            generation: st.generation,
        })
    }

    /// (largest timestamp, first batch's max timestamp) of the sealed segment at `base`, for
    /// `min.compaction.lag.ms` and `max.compaction.lag.ms`; None if it is gone.
    pub fn segment_timestamps(&self, base: i64) -> StorageResult<Option<(i64, i64)>> {
        let mut st = self.lock()?;
        let interval = st.config.index_interval_bytes as u64;
        let Some(seg) = st.segments.get_mut(&base) else { return Ok(None) };
        let (largest, _) = seg.max_timestamp_and_offset(interval)?;
        let first = seg.find_batch(base, interval)?.map_or(NO_TIMESTAMP, |(_, h)| h.max_timestamp);
        Ok(Some((largest, first)))
    }

    /// The open `.log` of the segment at `base`, its size and the position of the batch holding
    /// `offset` (0 for None): what the cleaner reads without holding the log's lock. A
    /// descriptor stays valid when the segment is retired meanwhile.
    pub fn segment_file_for_cleaning(&self, base: i64, offset: Option<i64>) -> StorageResult<Option<(Arc<File>, PathBuf, u64, u64)>> {
        let mut st = self.lock()?;
        let interval = st.config.index_interval_bytes as u64;
        let Some(seg) = st.segments.get_mut(&base) else { return Ok(None) };
        let position = match offset {
            Some(o) => seg.find_batch(o, interval)?.map_or(seg.size()?, |(p, _)| p),
            None => 0,
        };
        Ok(Some((seg.log_file()?, seg.log_path().to_path_buf(), seg.size()?, position)))
    }

    /// Swap cleaned segments (`<base>.log.cleaned` and its indexes, written and fsynced by the
    /// cleaner) in, one per group of sealed segments (`groups`, oldest first; each cleaned segment
    /// takes its group's first base offset), if the log's sealed segments did not change since
    /// the cleaner read them (`generation`). Kafka's protocol, crash-safe at every step:
    /// 1. `.cleaned` -> `.swap`, groups in descending offset order and within a group the indexes
    ///    first and the `.log` last; then fsync the dir: the commit point;
    /// 2. the old segments are retired (renamed `.deleted`, removed after file.delete.delay.ms;
    ///    readers holding them finish undisturbed);
    /// 3. `.swap` -> the final names.
    ///
    /// Opening the log after a crash in step 1 finds a `.cleaned` file at or below every `.swap`
    /// and rolls all of them back; after step 1 it completes every swap (see `cleaner::swap`).
    /// A failure in step 1 is rolled back and the log goes on unchanged; a later one, or a
    /// rollback that fails, closes the log until that restart (`closed_by_failure`).
    /// Returns the new generation, or None when the log changed and nothing was swapped.
    pub fn swap_in_cleaned(&self, groups: &[Vec<i64>], generation: u64) -> StorageResult<Option<u64>> {
        self.swap_in_cleaned_until(groups, generation, 3)
    }

    /// `swap_in_cleaned` stopping after `steps` of its 3 steps (tests of the crash points).
    #[doc(hidden)]
    pub fn swap_in_cleaned_until(&self, groups: &[Vec<i64>], generation: u64, steps: u8) -> StorageResult<Option<u64>> {
        use super::cleaner::swap::{rename_suffix, CLEANED_SUFFIX, SWAP_SUFFIX};
        let mut st = self.lock()?;
        let active = *st.segments.keys().next_back().ok_or_else(|| self.no_segments())?;
        if groups.is_empty()
            || st.generation != generation
            || groups.iter().any(|g| g.is_empty() || g.iter().any(|b| !st.segments.contains_key(b) || *b >= active))
        {
            return Ok(None);
        }
        let ends: Vec<i64> = groups
            .iter()
            .map(|g| {
                let last = *g.last().expect("group is not empty");
                st.segments.range(last + 1..).next().map(|(b, _)| *b).expect("the active segment follows")
            })
            .collect();
        // Every group's cleaned `.log` must be there: renaming skips a missing file, and the
        // old segments retired below would then leave the group's offsets with no data.
        for g in groups {
            let cleaned = super::cleaner::swap::suffixed(&self.dir(), g[0], LOG_SUFFIX, CLEANED_SUFFIX);
            if !cleaned.is_file() {
                return Err(StorageError::corrupt(&cleaned, 0, "the cleaned segment to swap in is missing".to_owned()));
            }
        }
        // Step 1. A failure before the commit point is rolled back: every rename made is undone,
        // newest first (the lowest group's `.log.cleaned` is back before any other, so a restart
        // finds a `.cleaned` file at or below every `.swap` one whatever lands on disk), and
        // fsynced, and the log goes on unchanged. A rollback that fails or cannot be fsynced
        // closes the log: the `.swap` files left would look committed at the next start, which
        // completes them; that is right only if nothing was written on top of them.
        let dir = self.dir();
        let mut renamed: Vec<(i64, &str)> = Vec::new();
        let committed = (|| -> StorageResult<()> {
            for g in groups.iter().rev() {
                for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX] {
                    if rename_suffix(&dir, g[0], suffix, CLEANED_SUFFIX, SWAP_SUFFIX)? {
                        renamed.push((g[0], suffix));
                    }
                }
            }
            fsync_dir(&dir).ctx("fsync", &dir)
        })();
        if let Err(e) = committed {
            let undone = renamed
                .iter()
                .rev()
                .try_for_each(|(b, suffix)| rename_suffix(&dir, *b, suffix, SWAP_SUFFIX, CLEANED_SUFFIX).map(drop))
                .and_then(|()| fsync_dir(&dir).ctx("fsync", &dir));
            if let Err(undo) = undone {
                self.close_after_failure(&mut st, &format!("a log cleaner swap failed ({e}) and could not be rolled back: {undo}"));
            }
            return Err(e);
        }
        if steps < 2 {
            return Ok(None);
        }
        // Steps 2 and 3, past the commit point: the swap can only go forward (the next start
        // completes it). A failure here leaves the segment map without segments already retired
        // and their replacement not in it yet: the log is closed rather than serve it.
        let now = now_ms();
        let forward = (|| -> StorageResult<bool> {
            for b in groups.iter().flatten() {
                if let Some(s) = st.segments.remove(b) {
                    Self::retire_segment(&mut st, s, now)?;
                }
            }
            if steps < 3 {
                return Ok(false);
            }
            for (g, end) in groups.iter().zip(ends) {
                for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                    rename_suffix(&dir, g[0], suffix, SWAP_SUFFIX, "")?;
                }
                st.segments.insert(g[0], Box::new(Segment::lazy(&dir, g[0], end).with_fd_budget(self.fd_budget.clone())));
            }
            Ok(true)
        })();
        match forward {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => {
                self.close_after_failure(&mut st, &format!("a log cleaner swap failed after its commit point: {e}"));
                return Err(e);
            }
        }
        // Not fsynced here: if these renames are lost in a crash, opening the log finds the
        // committed `.swap` files again and completes the swaps (the next directory fsync, at a
        // flush or the next swap, makes them durable).
        st.dir_dirty = true;
        st.generation += 1;
        st.max_timestamp_answer = None;
        Ok(Some(st.generation))
    }

    /// Number of segments and their total bytes.
    pub fn segment_stats(&self) -> StorageResult<(usize, u64)> {
        let mut st = self.lock()?;
        let mut total = 0;
        for s in st.segments.values_mut() {
            total += s.size()?;
        }
        Ok((st.segments.len(), total))
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> StorageResult<Vec<i64>> {
        Ok(self.lock()?.segments.keys().copied().collect())
    }

    /// Flush, write indexes and the epoch checkpoint, close every descriptor.
    pub fn close(&self) -> StorageResult<()> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.closed {
            return Ok(());
        }
        self.flush_locked(&mut st, now_ms())?;
        for s in st.segments.values_mut() {
            s.close()?;
        }
        write_epochs(&self.dir().join(LEADER_EPOCH_CHECKPOINT), &st.epochs)?;
        st.epochs_dirty = false;
        // Nothing is served after close: files waiting for file.delete.delay.ms can go now.
        Self::remove_pending(&mut st, None)?;
        st.closed = true;
        Ok(())
    }

    /// Close and remove the directory (renamed to `<dir>.<id>-delete` first, like Kafka, so a
    /// crash midway leaves a directory that the next start removes).
    pub fn delete(&self) -> StorageResult<()> {
        match self.rename_for_delete()? {
            Some((target, _)) => fs::remove_dir_all(&target).ctx("delete", &target),
            None => Ok(()),
        }
    }

    /// Close the log and rename its directory `<dir>.<id>-delete` (Kafka's asynchronous delete):
    /// nothing can find it any more, while readers holding its descriptors finish undisturbed.
    /// Returns the renamed directory and the log's `file.delete.delay.ms`, after which the caller
    /// removes it; None when the directory was already gone.
    pub fn rename_for_delete(&self) -> StorageResult<Option<(PathBuf, i64)>> {
        let delay = self.state.lock().unwrap_or_else(|p| p.into_inner()).config.file_delete_delay_ms;
        Ok(self.close_and_rename("delete", "rename for delete")?.map(|target| (target, delay)))
    }

    /// Close the log and rename its directory `<dir>.<id>-stray`, its files kept (Kafka's
    /// `LogManager` with a log whose `partition.metadata` names another topic id than the
    /// metadata's): a start skips it. Returns the renamed directory; None when it was already gone.
    pub fn rename_stray(&self) -> StorageResult<Option<PathBuf>> {
        self.close_and_rename("stray", "rename stray log")
    }

    /// Close the log and rename its directory `<dir>.<id>-<suffix>` (`id`: 32 hex digits, the
    /// form of Kafka's dashless random UUID).
    fn close_and_rename(&self, suffix: &str, op: &'static str) -> StorageResult<Option<PathBuf>> {
        {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.segments.clear();
            st.pending_deletes.clear(); // inside the directory: they go with it
            st.closed = true;
        }
        let name = self.dir().file_name().and_then(|n| n.to_str()).unwrap_or("partition").to_owned();
        let id = format!("{:032x}", (now_ms() as u128) << 64 | std::process::id() as u128 ^ (self as *const _ as u128));
        let target = self.dir().with_file_name(format!("{name}.{id}-{suffix}"));
        match fs::rename(self.dir(), &target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).ctx(op, &self.dir()),
        }
        if let Some(parent) = target.parent() {
            let _ = fsync_dir(parent);
        }
        Ok(Some(target))
    }
}

/// Recover segments from `first` on: rescan each (CRC, offsets), rebuild indexes, cut the
/// first damaged one and delete every segment after it; fsync what is kept.
fn recover_from(
    dir: &Path,
    segments: &mut BTreeMap<i64, Box<Segment>>,
    first: i64,
    checks_from: i64,
    compacted: bool,
    interval: u64,
    fd_budget: &Option<Arc<FdBudget>>,
    deferred: &mut bool,
) -> StorageResult<Vec<(i32, i64)>> {
    let mut epochs: Vec<(i32, i64)> = Vec::new();
    let bases: Vec<i64> = segments.range(first..).map(|(b, _)| *b).collect();
    let mut cut_after: Option<usize> = None;
    let mut expected_next: Option<i64> = None;
    for (i, b) in bases.iter().enumerate() {
        if let Some(n) = expected_next {
            if *b < n {
                warn(format!(
                    "recovery: segment {} starts at offset {b}, below the previous segment's end {n}",
                    dir.join(super::segment::segment_file_name(*b, LOG_SUFFIX)).display()
                ));
                cut_after = Some(i);
                break;
            }
        }
        let seg = segments.get_mut(b).expect("key from map");
        let last_epoch = epochs.last().map_or(-1, |&(e, _)| e);
        let next_base = bases.get(i + 1).copied();
        let checks = TailChecks { from: checks_from, allow_gaps: compacted, last_epoch, next_base };
        let res = seg.scan_checked(true, interval, &checks)?;
        // Written, not fsynced: a crash before the next flush recovers this range again. On a
        // full disk the rebuilt index stays in memory (served from there, written on a flush).
        if let Err(e) = seg.persist_indexes(false) {
            warn(format!("could not write the rebuilt indexes of {} (kept in memory): {e}", seg.log_path().display()));
            *deferred = true;
        }
        expected_next = Some(res.next_offset);
        for &(e, o) in &res.epochs {
            if epochs.last().is_none_or(|&(le, _)| e > le) {
                epochs.push((e, o));
            }
        }
        if res.dropped_bytes > 0 {
            cut_after = Some(i + 1);
            break;
        }
    }
    let mut dir_changed = false;
    if let Some(i) = cut_after {
        for b in &bases[i..] {
            dir_changed = true;
            if let Some(mut s) = segments.remove(b) {
                let size = s.size().unwrap_or(0);
                warn(format!("recovery deleted segment {} ({size} bytes) after a damaged one", s.log_path().display()));
                s.delete()?;
            }
        }
    }
    // Sealed segments' end offsets are their successors' bases; the last one knows its own.
    let keys: Vec<i64> = segments.keys().copied().collect();
    for w in keys.windows(2) {
        if let Some(s) = segments.get_mut(&w[0]) {
            if s.end_offset() < w[1] {
                s.set_end_offset(w[1]);
            }
        }
    }
    if segments.is_empty() {
        segments.insert(first, Box::new(Segment::create(dir, first, now_ms(), None)?.with_fd_budget(fd_budget.clone())));
        dir_changed = true;
    }
    if dir_changed {
        fsync_dir(dir).ctx("fsync", dir)?;
    }
    Ok(epochs)
}

/// Within one whole batch, the (offset, timestamp) of the first record with timestamp >= `ts`
/// and offset >= `min_offset`, decoding (and decompressing) the records. If the records do
/// not decode, the answer is the batch's first eligible offset and its max timestamp, which
/// never skips a matching record.
pub fn first_record_at_or_after(batch: &[u8], h: &BatchHeader, ts: i64, min_offset: i64) -> (i64, i64) {
    use crate::batch::records::{open_batch, DecodeOptions};
    let fallback = (h.base_offset.max(min_offset), h.max_timestamp);
    let opts = DecodeOptions { verify_crc: false, ..DecodeOptions::fetch() };
    let Ok(view) = open_batch(batch, 0, &opts) else { return fallback };
    for r in view.records() {
        let Ok(r) = r else { return fallback };
        let (rts, roff) = (view.record_timestamp(r.timestamp_delta), h.base_offset + r.offset_delta as i64);
        if rts >= ts && roff >= min_offset {
            return (roff, rts);
        }
    }
    fallback
}

/// Whether a consumer that read records of `last_fetched_epoch` up to `fetch_offset` has diverged
/// from a log whose epochs are `epochs` ((epoch, start offset), ascending) and whose end is
/// `log_end` (Kafka's `Partition.readRecords` over `LeaderEpochFileCache.endOffsetFor`; the Python
/// path's `klog/broker/handlers/fetch.py::_diverged` over `LeaderEpochCache.end_offset_for`): the
/// epoch is newer than every one the log knows, the log knows it only under an older epoch, or it
/// ends before `fetch_offset`. No epochs at all counts as diverging (the caller's slow path decides).
pub fn consumer_epoch_diverges(epochs: &[(i32, i64)], log_end: i64, last_fetched_epoch: i32, fetch_offset: i64) -> bool {
    let (epoch, end) = match epochs.iter().position(|&(epoch, _)| epoch > last_fetched_epoch) {
        None => match epochs.last() {
            Some(&(latest, _)) if latest == last_fetched_epoch => (latest, log_end),
            _ => return true,
        },
        Some(0) => (last_fetched_epoch, epochs[0].1),
        Some(higher) => (epochs[higher - 1].0, epochs[higher].1),
    };
    epoch < last_fetched_epoch || end < fetch_offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::produced::{accept_produced_batch, ProduceRequestRules};
    use crate::batch::records::{BatchWriter, EncodeOptions};
    use crate::batch::validate::ProducePolicy;
    use crate::batch::BatchIter;

    use crate::storage::test_dir::TempDir;

    fn batch(n: usize, ts: i64) -> Vec<u8> {
        let mut w = BatchWriter::new(EncodeOptions::default());
        for i in 0..n {
            let v = format!("value-{i}");
            w.append::<&[u8], &[u8]>(ts + i as i64, Some(b"k"), Some(v.as_bytes()), &[]).unwrap();
        }
        w.finish().unwrap()
    }

    fn read_all(log: &PartitionLog, from: i64) -> Vec<(i64, i64)> {
        let r = log.read(from, u64::MAX, None, true).unwrap();
        let Some(range) = r.range else { return vec![] };
        let mut buf = vec![0u8; range.length as usize];
        super::super::fileio::pread_exact(&range.file, &mut buf, range.position).unwrap();
        BatchIter::new(&buf).map(|b| b.map(|(_, h)| (h.base_offset, h.last_offset())).unwrap()).collect()
    }

    fn open(dir: &Path, cfg: LogConfig, clean: bool) -> PartitionLog {
        PartitionLog::open(dir, "t", 0, cfg, OpenOptions { clean_shutdown: clean, ..Default::default() }).unwrap()
    }

    #[test]
    fn the_leader_append_hook_hears_each_leader_append_and_not_a_followers() {
        use std::sync::atomic::AtomicUsize;
        let d = TempDir::new("plog-append-hook");
        let log = open(&d.0, LogConfig::default(), true);
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        log.set_leader_append_hook(Some(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        assert!(log.has_leader_append_hook());
        log.append(&batch(2, 100), 0, 0).unwrap();
        assert!(log.append(b"not a batch", 0, 0).is_err()); // refused: nothing appended, no call
        log.set_high_watermark(2);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let other = TempDir::new("plog-append-hook-follower");
        let follower = open(&other.0, LogConfig::default(), true);
        follower.set_leader_append_hook(log.on_leader_append.lock().unwrap().clone());
        let read = log.read(0, 1 << 20, None, true).unwrap();
        let range = read.range.unwrap();
        let mut bytes = vec![0u8; range.length as usize];
        std::os::unix::fs::FileExt::read_exact_at(&*range.file, &mut bytes, range.position).unwrap();
        follower.append_as_follower(&bytes).unwrap();
        assert_eq!((calls.load(Ordering::SeqCst), follower.log_end_offset()), (1, 2));
        log.set_leader_append_hook(None);
        log.append(&batch(1, 100), 0, 0).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_high_watermark_hook_hears_every_move_up_and_nothing_else() {
        use std::sync::atomic::AtomicUsize;
        let d = TempDir::new("plog-hw-hook");
        let log = open(&d.0, LogConfig::default(), true);
        log.append(&batch(5, 100), 0, 0).unwrap();
        log.set_high_watermark(0);
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        log.set_high_watermark_hook(Some(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        assert!(log.has_high_watermark_hook());
        log.set_high_watermark(2);
        log.set_high_watermark(2); // no move
        log.set_high_watermark(1); // down
        log.set_high_watermark(9); // clamped to the log end (5): up
        assert_eq!((calls.load(Ordering::SeqCst), log.high_watermark()), (2, 5));
        log.set_high_watermark_hook(None);
        log.set_high_watermark(0);
        log.set_high_watermark(3);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_transactional_batch_bounds_the_first_unstable_offset_before_the_log_end_passes_it() {
        let d = TempDir::new("plog-txn-bound");
        let log = open(&d.0, LogConfig::default(), true);
        log.append(&batch(3, 100), 0, 0).unwrap();
        assert_eq!(log.first_unstable_offset(), i64::MAX); // no transaction: no bound
        let mut w = BatchWriter::new(EncodeOptions { producer_id: 7, is_transactional: true, ..Default::default() });
        w.append::<&[u8], &[u8]>(100, Some(b"k"), Some(b"v"), &[]).unwrap();
        let txn = w.finish().unwrap();
        log.append(&txn, 0, 0).unwrap();
        assert_eq!(log.first_unstable_offset(), 3);
        log.append(&batch(2, 100), 0, 0).unwrap();
        log.append(&txn, 0, 0).unwrap(); // a later batch of a transaction does not raise it
        assert_eq!((log.first_unstable_offset(), log.log_end_offset()), (3, 7));
        log.set_first_unstable_offset(i64::MAX); // the broker: the transaction is over
        log.append(&batch(1, 100), 0, 0).unwrap();
        assert_eq!(log.first_unstable_offset(), i64::MAX);
    }

    #[test]
    fn a_read_committed_fetch_is_told_the_aborted_transactions_it_overlaps_in_marker_order() {
        let d = TempDir::new("plog-aborted");
        let log = open(&d.0, LogConfig::default(), true);
        let aborted = |producer_id, first_offset, marker_offset| AbortedTransaction { producer_id, first_offset, marker_offset };
        log.set_aborted_transactions(vec![aborted(7, 2, 5), aborted(8, 4, 9)]);
        log.add_aborted_transaction(aborted(7, 10, 12));
        let held = log.aborted_transactions(); // a reader's copy stays as it was
        log.add_aborted_transaction(aborted(9, 13, 20));
        assert_eq!(held.len(), 3);
        assert_eq!(log.aborted_between(0, 30), vec![(7, 2), (8, 4), (7, 10), (9, 13)]);
        assert_eq!(log.aborted_between(6, 11), vec![(8, 4), (7, 10)]); // marker >= 6, first < 11
        assert_eq!(log.aborted_between(0, 2), vec![]); // a read stopping before the first one
        assert_eq!(log.aborted_between(21, 30), vec![]); // every marker before the read
        log.set_aborted_transactions(Vec::new());
        assert_eq!(log.aborted_between(0, 30), vec![]);
    }

    #[test]
    fn a_first_unstable_offset_raised_below_the_high_watermark_calls_the_high_watermark_hook() {
        // a transaction ended after its marker's high watermark was set: the last stable offset moved up
        use std::sync::atomic::AtomicUsize;
        let d = TempDir::new("plog-fuo-hook");
        let log = open(&d.0, LogConfig::default(), true);
        log.append(&batch(6, 100), 0, 0).unwrap();
        log.set_first_unstable_offset(3);
        log.set_high_watermark(6);
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        log.set_high_watermark_hook(Some(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        log.set_first_unstable_offset(2); // lowered: nothing new to read
        log.set_first_unstable_offset(i64::MAX); // raised from below the high watermark
        log.set_first_unstable_offset(i64::MAX); // unchanged
        assert_eq!((calls.load(Ordering::SeqCst), log.last_stable_offset(log.high_watermark())), (1, 6));
        log.set_first_unstable_offset(7); // lowered above the high watermark, raised again: the LSO stayed
        log.set_first_unstable_offset(i64::MAX);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn setting_the_high_watermark_does_not_wait_for_an_append_holding_the_log() {
        let d = TempDir::new("plog-hw-unlocked");
        let log = Arc::new(open(&d.0, LogConfig::default(), true));
        log.append(&batch(5, 100), 0, 0).unwrap();
        let held = log.state.lock().unwrap(); // as an append on the front's thread holds it through its write
        let (tx, rx) = std::sync::mpsc::channel();
        let setter = log.clone();
        let thread = std::thread::spawn(move || tx.send(setter.set_high_watermark(9)).unwrap());
        let set = rx.recv_timeout(std::time::Duration::from_secs(10));
        drop(held);
        thread.join().unwrap();
        assert_eq!(set, Ok(5)); // clamped to the log end, without the lock
        assert_eq!(log.high_watermark(), 5);
    }

    #[test]
    fn raising_the_high_watermark_never_lowers_it_and_clamps_to_the_log() {
        let d = TempDir::new("plog-hw-raise");
        let log = open(&d.0, LogConfig::default(), true);
        for _ in 0..8 {
            log.append(&batch(1, 100), 0, 0).unwrap();
        }
        log.set_high_watermark(4);
        assert_eq!(log.raise_high_watermark(2), 4); // lower: stays
        assert_eq!(log.raise_high_watermark(6), 6);
        assert_eq!(log.raise_high_watermark(99), 8); // clamped to the log end
        log.truncate_to(5).unwrap();
        assert_eq!(log.high_watermark(), 5); // a truncation still lowers it
        assert_eq!(log.raise_high_watermark(3), 5);
    }

    #[test]
    fn two_writers_raising_to_log_ends_they_read_earlier_never_move_the_high_watermark_back() {
        // the native front and the broker's mirror, each storing an end it read a moment before
        const END: i64 = 200_000;
        let d = TempDir::new("plog-hw-raisers");
        let log = Arc::new(open(&d.0, LogConfig::default(), true));
        for _ in 0..END / 1000 {
            log.append(&batch(1000, 100), 0, 0).unwrap();
        }
        for _ in 0..8 {
            log.set_high_watermark(0);
            let raisers: Vec<_> = (0..2)
                .map(|n| {
                    let log = log.clone();
                    std::thread::spawn(move || {
                        // one writer a step ahead of the other
                        for end in (n..=END).step_by(1 + n as usize) {
                            log.raise_high_watermark(end);
                        }
                    })
                })
                .collect();
            let mut seen = log.high_watermark();
            while raisers.iter().any(|t| !t.is_finished()) {
                let now = log.high_watermark();
                assert!(now >= seen, "the high watermark moved back from {seen} to {now}");
                seen = now;
            }
            for t in raisers {
                t.join().unwrap();
            }
            assert_eq!(log.high_watermark(), END);
        }
    }

    #[test]
    fn the_high_watermark_stays_within_the_log_while_appends_and_truncations_race_it() {
        let d = TempDir::new("plog-hw-race");
        let log = Arc::new(open(&d.0, LogConfig::default(), true));
        log.append(&batch(2, 100), 0, 0).unwrap();
        let writer = log.clone();
        let thread = std::thread::spawn(move || {
            for round in 0..200 {
                writer.append(&batch(3, 100), 0, 0).unwrap();
                if round % 10 == 9 {
                    writer.truncate_to(writer.log_end_offset() - 4).unwrap();
                }
            }
        });
        while !thread.is_finished() {
            let v = log.set_high_watermark(i64::MAX);
            assert!(v >= log.log_start_offset());
        }
        thread.join().unwrap();
        assert!(log.high_watermark() <= log.log_end_offset());
        assert_eq!(log.set_high_watermark(i64::MAX), log.log_end_offset());
    }

    #[test]
    fn append_assigns_consecutive_offsets_and_reads_whole_batches() {
        let d = TempDir::new("plog-append");
        let log = open(&d.0, LogConfig::default(), true);
        let a = log.append(&batch(3, 100), 0, 0).unwrap();
        let b = log.append(&[batch(2, 200), batch(1, 300)].concat(), 0, 0).unwrap();
        assert_eq!((a.base_offset, a.last_offset, b.base_offset, b.last_offset, b.num_batches), (0, 2, 3, 5, 2));
        assert_eq!(read_all(&log, 0), vec![(0, 2), (3, 4), (5, 5)]);
        assert_eq!(read_all(&log, 4), vec![(3, 4), (5, 5)]);
        assert!(matches!(log.read(7, 10, None, true), Err(StorageError::OffsetOutOfRange { .. })));
    }

    #[test]
    fn an_epoch_assigned_at_creation_is_checkpointed_and_the_first_append_of_it_rewrites_nothing() {
        let d = TempDir::new("plog-epoch-start");
        let log = open(&d.0, LogConfig::default(), true);
        log.assign_epoch_start(0).unwrap();
        let checkpoint = d.0.join(LEADER_EPOCH_CHECKPOINT);
        let written = fs::metadata(&checkpoint).unwrap().modified().unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&checkpoint).unwrap());
        log.append(&batch(2, 0), 0, 0).unwrap();
        let after = fs::metadata(&checkpoint).unwrap();
        // written atomically by rename: an untouched inode means the append did not rewrite it
        assert_eq!((std::os::unix::fs::MetadataExt::ino(&after), after.modified().unwrap()), (inode, written));
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(0, 0)]);
        log.assign_epoch_start(0).unwrap();                       // same epoch again: no new entry
        log.assign_epoch_start(2).unwrap();                       // a newer one starts at the log end
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(0, 0), (2, 2)]);
        assert!(log.assign_epoch_start(-1).is_err());
        drop(log);
        let reopened = open(&d.0, LogConfig::default(), true);
        assert_eq!(reopened.leader_epoch_entries().unwrap(), vec![(0, 0), (2, 2)]);
    }

    /// A segment DeleteRecords or retention cannot retire (its rename to `*.deleted` fails: here a
    /// non-empty directory holds that name) is out of the segment map with its files on disk. The
    /// old code answered that call with the error but the retry with Ok (nothing left to retire:
    /// the files leaked, and a retention pass found nothing either); now the log closes until a
    /// restart (the caller takes the dir offline) and the restart finds every file again.
    #[test]
    fn a_segment_below_the_log_start_that_cannot_be_retired_closes_the_log_instead_of_leaking() {
        for retention in [false, true] {
            let d = TempDir::new("plog-retire-fails");
            let cfg = LogConfig { segment_bytes: 200, retention_ms: if retention { 0 } else { -1 }, ..LogConfig::default() };
            let log = open(&d.0, cfg.clone(), true);
            for _ in 0..5 {
                log.append(&batch(2, 100), 0, 0).unwrap();
            }
            log.set_high_watermark(10);
            let bases = log.segment_bases().unwrap();
            assert!(bases.len() > 2, "{bases:?}");
            let obstacle = d.0.join(format!("{:020}.log.deleted", bases[0]));
            fs::create_dir_all(obstacle.join("x")).unwrap();
            if retention {
                assert!(log.apply_retention(now_ms()).is_err());
                assert!(log.apply_retention(now_ms()).is_err(), "a retry must not find the leak done");
                assert!(log.delete_records_before(bases[2]).is_err());
            } else {
                assert!(log.delete_records_before(bases[1]).is_err());
                assert!(log.delete_records_before(bases[1]).is_err(), "a retry must not answer Ok");
                assert!(log.delete_records_before(bases[2]).is_err());
                assert!(log.apply_retention(now_ms()).is_err());
            }
            assert!(log.closed_by_failure() && log.is_closed());
            assert!(d.0.join(format!("{:020}.log", bases[0])).exists(), "the failed segment's log is still there");
            drop(log);
            fs::remove_dir_all(&obstacle).unwrap();
            // the next start finds the segment again; nothing above the old log start was lost
            let reopened = PartitionLog::open(&d.0, "t", 0, cfg.clone(), OpenOptions { clean_shutdown: false, ..Default::default() }).unwrap();
            assert_eq!(reopened.segment_bases().unwrap()[0], bases[0]);
            assert_eq!(reopened.log_end_offset(), 10);
            assert_eq!(read_all(&reopened, 0).first(), Some(&(0, 1)));
        }
    }

    #[test]
    fn truncating_fully_restarts_an_empty_log_at_the_offset_past_its_end() {
        use std::sync::atomic::AtomicUsize;
        let d = TempDir::new("plog-truncate-fully");
        let cfg = LogConfig { segment_bytes: 200, ..LogConfig::default() };
        let log = open(&d.0, cfg.clone(), true);
        for _ in 0..5 {
            log.append(&batch(2, 100), 1, 0).unwrap();
        }
        log.set_high_watermark(4);
        let bases = log.segment_bases().unwrap();
        assert!(bases.len() > 1);
        let generation = log.cleaner_view().unwrap().generation;
        let starts = Arc::new(AtomicUsize::new(0));
        let seen = starts.clone();
        log.set_log_start_hook(Some(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        // the leader's log starts at 100, past this log's end 10: delete_records_before(100) is refused here
        assert!(log.delete_records_before(100).is_err());
        log.truncate_fully_and_start_at(100).unwrap();
        let offsets = |l: &PartitionLog| (l.log_start_offset(), l.log_end_offset(), l.high_watermark(), l.recovery_point());
        assert_eq!(offsets(&log), (100, 100, 100, 100));
        assert_eq!(log.segment_bases().unwrap(), vec![100]);
        assert!(log.leader_epoch_entries().unwrap().is_empty());
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        assert!(log.cleaner_view().unwrap().generation > generation);
        for b in &bases {
            assert!(!d.0.join(format!("{b:020}.log")).exists());
        }
        assert_eq!(read_all(&log, 100), vec![]);
        assert!(log.read(5, 1 << 20, None, true).is_err()); // below the log start now
        log.append(&batch(2, 100), 3, 0).unwrap(); // the batches fetched from the leader's log start
        assert_eq!(read_all(&log, 100), vec![(100, 101)]);
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(3, 100)]);
        assert!(log.truncate_fully_and_start_at(-1).is_err());
        log.flush().unwrap();
        drop(log);
        let reopened = open(&d.0, cfg, false);
        assert_eq!((reopened.log_start_offset(), reopened.log_end_offset()), (100, 102));
        assert_eq!(reopened.leader_epoch_entries().unwrap(), vec![(3, 100)]);
        assert_eq!(read_all(&reopened, 100), vec![(100, 101)]);
    }

    #[test]
    fn an_empty_follower_log_whose_end_falls_inside_the_first_batch_restarts_at_its_base() {
        use std::sync::atomic::AtomicUsize;
        let d = TempDir::new("plog-restart-in-batch");
        let leader = open(&d.0.join("leader"), LogConfig::default(), true);
        leader.append(&batch(3, 100), 2, 0).unwrap(); // offsets 0..=2
        leader.append(&batch(2, 100), 2, 0).unwrap(); // 3..=4
        let read = leader.read(0, 1 << 20, None, true).unwrap();
        let range = read.range.unwrap();
        let mut bytes = vec![0u8; range.length as usize];
        std::os::unix::fs::FileExt::read_exact_at(&*range.file, &mut bytes, range.position).unwrap();
        // the leader's log start is 1 (DeleteRecords inside its first batch): the follower restarted there
        let follower = open(&d.0.join("follower"), LogConfig::default(), true);
        follower.truncate_fully_and_start_at(1).unwrap();
        let starts = Arc::new(AtomicUsize::new(0));
        let seen = starts.clone();
        follower.set_log_start_hook(Some(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        follower.append_as_follower(&bytes).unwrap();
        assert_eq!((follower.log_start_offset(), follower.log_end_offset()), (0, 5));
        assert_eq!(read_all(&follower, 0), vec![(0, 2), (3, 4)]);
        assert_eq!(follower.leader_epoch_entries().unwrap(), vec![(2, 0)]);
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        // a log holding batches is never restarted: an older batch is refused
        let holding = open(&d.0.join("holding"), LogConfig::default(), true);
        holding.append(&batch(2, 100), 2, 0).unwrap();
        assert!(holding.append_as_follower(&bytes).is_err());
        assert_eq!((holding.log_start_offset(), holding.log_end_offset()), (0, 2));
    }

    #[test]
    fn truncating_at_the_log_end_drops_an_epoch_that_wrote_nothing() {
        let d = TempDir::new("plog-epoch-at-end");
        let log = open(&d.0, LogConfig::default(), true);
        log.append(&batch(2, 0), 1, 0).unwrap();
        log.assign_epoch_start(3).unwrap(); // led epoch 3, appended nothing, then became a follower
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(1, 0), (3, 2)]);
        log.truncate_to(2).unwrap();
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(1, 0)]);
        assert_eq!(log.log_end_offset(), 2);
        log.truncate_to(5).unwrap(); // past the end: nothing else changes
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(1, 0)]);
        drop(log);
        assert_eq!(open(&d.0, LogConfig::default(), true).leader_epoch_entries().unwrap(), vec![(1, 0)]);
    }

    #[test]
    fn a_failed_validation_appends_nothing() {
        let d = TempDir::new("plog-invalid");
        let log = open(&d.0, LogConfig::default(), true);
        let mut bad = batch(2, 0);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let both = [batch(1, 0), bad].concat();
        assert!(matches!(log.append(&both, 0, 0), Err(StorageError::InvalidRecords(CodecError::CrcMismatch { .. }))));
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(fs::metadata(d.0.join("00000000000000000000.log")).unwrap().len(), 0);
    }

    #[test]
    fn reopen_without_clean_shutdown_recovers_a_torn_tail() {
        let d = TempDir::new("plog-torn");
        let cfg = LogConfig { index_interval_bytes: 1, ..Default::default() };
        {
            let log = open(&d.0, cfg.clone(), true);
            for i in 0..10 {
                log.append(&batch(2, i * 10), 3, 0).unwrap();
            }
        }
        let path = d.0.join("00000000000000000000.log");
        let len = fs::metadata(&path).unwrap().len();
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 5).unwrap();
        let _serial = WARNINGS.lock().unwrap_or_else(|p| p.into_inner());
        super::super::events::take_warnings();
        let log = open(&d.0, cfg, false);
        assert_eq!(log.log_end_offset(), 18);
        let warnings = super::super::events::take_warnings();
        assert!(warnings.iter().any(|w| w.contains("recovery truncated") && w.contains("offset 18")), "{warnings:?}");
        assert_eq!(read_all(&log, 0).len(), 9);
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(3, 0)]);
        assert_eq!(log.append(&batch(1, 0), 3, 0).unwrap().base_offset, 18);
    }

    /// The storage warnings go to one process-wide queue: tests that read it run one at a time.
    static WARNINGS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Ten 2-record batches in epoch 3, then `damage` applied to the last batch's bytes (its
    /// header fields outside the CRC), then an unclean reopen with `recovery_point`.
    fn reopen_with_last_batch_damaged(name: &str, cfg: LogConfig, recovery_point: Option<i64>,
                                      damage: impl Fn(&mut [u8])) -> (TempDir, PartitionLog, Vec<String>) {
        let d = TempDir::new(name);
        {
            let log = open(&d.0, cfg.clone(), true);
            for i in 0..10 {
                log.append(&batch(2, i * 10), 3, 0).unwrap();
            }
        }
        let path = d.0.join("00000000000000000000.log");
        let mut data = fs::read(&path).unwrap();
        let last = BatchIter::new(&data).map(|b| b.unwrap().0).last().unwrap();
        damage(&mut data[last..]);
        fs::write(&path, &data).unwrap();
        let _serial = WARNINGS.lock().unwrap_or_else(|p| p.into_inner());
        super::super::events::take_warnings();
        let opts = OpenOptions { clean_shutdown: false, recovery_point, ..Default::default() };
        let log = PartitionLog::open(&d.0, "t", 0, cfg, opts).unwrap();
        (d, log, super::super::events::take_warnings())
    }

    #[test]
    fn recovery_cuts_a_batch_whose_base_offset_rose_outside_its_crc() {
        // bit 5 of the base offset's low byte: offset 18 reads as 50, which the CRC does not cover
        let (_d, log, warnings) = reopen_with_last_batch_damaged("plog-gap", LogConfig::default(), None, |b| b[7] ^= 0x20);
        assert_eq!(log.log_end_offset(), 18);
        assert!(warnings.iter().any(|w| w.contains("recovery truncated") && w.contains("above the expected 18")),
                "{warnings:?}");
        assert_eq!(log.append(&batch(1, 0), 3, 0).unwrap().base_offset, 18);
    }

    /// A log of three segments (offsets 0.., each batch one 500-byte record) reopened after a crash
    /// (recovery point 0) with the bytes of the first segment from its `keep`-th batch on zeroed
    /// (past its last batch: 4 KiB of zeros appended): (the directory, the log, its first segment's
    /// batch count).
    fn reopen_with_first_segment_zeroed_from(name: &str, keep: usize) -> (TempDir, PartitionLog, usize) {
        let d = TempDir::new(name);
        let cfg = LogConfig { segment_bytes: 20000, ..Default::default() };
        let one = || {
            let mut w = BatchWriter::new(EncodeOptions::default());
            w.append::<&[u8], &[u8]>(0, None, Some(&[b'x'; 500]), &[]).unwrap();
            w.finish().unwrap()
        };
        {
            let log = open(&d.0, cfg.clone(), true);
            for _ in 0..80 {
                log.append(&one(), 0, 0).unwrap();
            }
            assert_eq!(log.segment_bases().unwrap().len(), 3);
            log.close().unwrap();
        }
        let path = d.0.join("00000000000000000000.log");
        let mut data = fs::read(&path).unwrap();
        let starts: Vec<usize> = BatchIter::new(&data).map(|b| b.unwrap().0).collect();
        match starts.get(keep) {
            Some(&cut) => data[cut..].fill(0),
            None => data.resize(data.len() + 4096, 0), // every batch kept, zeros after them
        }
        fs::write(&path, &data).unwrap();
        let opts = OpenOptions { clean_shutdown: false, recovery_point: Some(0), ..Default::default() };
        let log = PartitionLog::open(&d.0, "t", 0, cfg, opts).unwrap();
        (d, log, starts.len())
    }

    #[test]
    fn a_read_over_a_batch_whose_length_was_damaged_stops_there_without_reading_that_length() {
        let d = TempDir::new("plog-huge-length");
        let cfg = LogConfig { index_interval_bytes: 4096, ..Default::default() };
        {
            let log = open(&d.0, cfg.clone(), true);
            for _ in 0..200 {
                log.append(&batch(1, 0), 0, 0).unwrap();
            }
            log.close().unwrap();
        }
        let path = d.0.join("00000000000000000000.log");
        let mut data = fs::read(&path).unwrap();
        let at = BatchIter::new(&data).map(|b| b.unwrap().0).nth(2).unwrap();
        // a length field (outside the CRC) damaged to ~2 GiB
        data[at + 8..at + 12].copy_from_slice(&0x7ff0_0000i32.to_be_bytes());
        fs::write(&path, &data).unwrap();
        let _serial = WARNINGS.lock().unwrap_or_else(|p| p.into_inner());
        super::super::events::take_warnings();
        // the two intact batches before it are served; the damaged one is refused from its header
        // alone (before the fix, a 2 GiB buffer was allocated to read it, then found short of the file)
        let log = open(&d.0, cfg.clone(), true);
        assert_eq!(read_all(&log, 0), vec![(0, 0), (1, 1)]);
        let warnings = super::super::events::take_warnings();
        assert!(warnings.iter().any(|w| w.contains("runs past the end of the range")), "{warnings:?}");
        drop(log);
        // a read from the damaged batch itself: an error naming the file and byte
        let log = open(&d.0, cfg, true);
        let err = log.read(2, 1 << 20, None, true).unwrap_err();
        assert!(matches!(err, StorageError::CorruptLog { .. }), "{err}");
        let err = err.to_string();
        assert!(err.contains("00000000000000000000.log") && err.contains(&format!("at byte {at}")), "{err}");
        assert!(err.contains("runs past the end of the"), "{err}");
    }

    #[test]
    fn a_full_truncation_whose_new_segment_cannot_be_made_keeps_the_log() {
        let d = TempDir::new("plog-restart-create-fails");
        let log = open(&d.0, LogConfig { file_delete_delay_ms: 60_000, ..Default::default() }, true);
        for i in 0..10 {
            log.append(&batch(1, i), 0, 0).unwrap();
        }
        // something in the way of the new segment's file: its create fails (as on ENOSPC, EMFILE, EIO)
        fs::create_dir(d.0.join("00000000000000000050.log")).unwrap();
        assert!(log.truncate_fully_and_start_at(50).is_err());
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 10));
        assert_eq!(log.segment_bases().unwrap(), vec![0]);
        assert_eq!(read_all(&log, 0).len(), 10);
        log.truncate_to(5).unwrap();
        assert_eq!(log.log_end_offset(), 5);
        assert!(log.cleaner_view().is_ok());
    }

    #[test]
    fn a_full_truncation_that_fails_after_retiring_the_segments_closes_the_log_instead_of_panicking() {
        let d = TempDir::new("plog-restart-retire-fails");
        let log = open(&d.0, LogConfig { file_delete_delay_ms: 60_000, ..Default::default() }, true);
        for i in 0..10 {
            log.append(&batch(1, i), 0, 0).unwrap();
        }
        // the segment at 0 must go before a new one takes its name; its rename to `.deleted` fails
        fs::create_dir(d.0.join("00000000000000000000.log.deleted")).unwrap();
        assert!(log.truncate_to(0).is_err());
        // no segments left: every call errors (a panic here crossed the FFI as a PanicException)
        assert!(log.is_closed());
        assert!(matches!(log.truncate_to(3), Err(StorageError::Closed(_))));
        assert!(matches!(log.cleaner_view(), Err(StorageError::Closed(_))));
        assert!(matches!(log.swap_in_cleaned(&[vec![0]], 0), Err(StorageError::Closed(_))));
        assert!(log.read(0, 1 << 20, None, true).is_err());
        assert!(log.append(&batch(1, 0), 0, 0).is_err());
    }

    #[test]
    fn recovery_deletes_the_segments_after_a_sealed_one_whose_last_batches_are_zeros() {
        // a power loss after a roll: the sealed segment's size reached the disk, its last blocks did not
        let (_d, log, n) = reopen_with_first_segment_zeroed_from("plog-zero-sealed", 29);
        assert!(n > 29);
        // offsets 29..n are gone: the later segments go too (the replica refetches from 29), no hole
        assert_eq!(log.segment_bases().unwrap(), vec![0]);
        assert_eq!(log.log_end_offset(), 29);
        assert_eq!(read_all(&log, 0).last().map(|b| b.1), Some(28));
    }

    #[test]
    fn recovery_keeps_the_segments_after_a_sealed_one_whose_zero_tail_follows_its_last_batch() {
        // zeros after every batch (a roll's trim of preallocated space lost in a crash): nothing is missing
        let (_d, log, n) = reopen_with_first_segment_zeroed_from("plog-zero-sealed-full", usize::MAX);
        assert_eq!(log.segment_bases().unwrap().len(), 3);
        assert_eq!(log.log_end_offset(), 80);
        assert_eq!(read_all(&log, 0).len(), n, "the first segment's batches are all served");
        assert_eq!(read_all(&log, n as i64).first(), Some(&(n as i64, n as i64)));
    }

    #[test]
    fn recovery_keeps_gaps_of_a_compacted_log_and_of_data_below_the_recovery_point() {
        let compacted = LogConfig { compact: true, ..Default::default() };
        let (_d, log, _) = reopen_with_last_batch_damaged("plog-gap-compact", compacted, None, |b| b[7] ^= 0x20);
        assert_eq!(log.log_end_offset(), 52);   // the cleaner leaves gaps: nothing tells this one apart
        // flushed up to offset 19 (past the damaged batch's expected offset 18): not rescanned for gaps
        let (_d, log, _) = reopen_with_last_batch_damaged("plog-gap-flushed", LogConfig::default(), Some(19),
                                                          |b| b[7] ^= 0x20);
        assert_eq!(log.log_end_offset(), 52);
    }

    #[test]
    fn recovery_keeps_the_gaps_a_cleaner_left_in_sealed_segments() {
        // logs open with the default config (not compacted) before topic overrides are known: a sealed
        // segment whose first batches the cleaner removed must survive an unclean reopen without a
        // recovery point (CI caught this: the cut emptied a compacted log)
        let d = TempDir::new("plog-cleaned-gap");
        {
            let log = open(&d.0, LogConfig::default(), true);
            for i in 0..3 {
                log.append(&batch(2, i * 10), 3, 0).unwrap();
            }
            log.roll().unwrap();
            log.append(&batch(2, 100), 3, 0).unwrap();
        }
        let sealed = d.0.join("00000000000000000000.log");
        let data = fs::read(&sealed).unwrap();
        let second = BatchIter::new(&data).nth(1).unwrap().unwrap().0;
        fs::write(&sealed, &data[second..]).unwrap();   // offsets 0-1 cleaned away: the segment starts at 2
        // the recovery point a restart checkpointed while the topic was empty
        let opts = OpenOptions { clean_shutdown: false, recovery_point: Some(0), ..Default::default() };
        let log = PartitionLog::open(&d.0, "t", 0, LogConfig::default(), opts).unwrap();
        assert_eq!(log.log_end_offset(), 8);
        assert_eq!(read_all(&log, 0), vec![(2, 3), (4, 5)]);   // a read stops at the segment's end
        assert_eq!(read_all(&log, 6), vec![(6, 7)]);
    }

    #[test]
    fn recovery_cuts_a_batch_whose_leader_epoch_fell_outside_its_crc() {
        // the leader epoch (bytes 12..16) of the last batch: 3 reads as 1
        let (_d, log, warnings) = reopen_with_last_batch_damaged("plog-epoch", LogConfig::default(), None, |b| b[15] ^= 0x02);
        assert_eq!(log.log_end_offset(), 18);
        assert!(warnings.iter().any(|w| w.contains("leader epoch 1 is below the epoch 3")), "{warnings:?}");
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(3, 0)]);
    }

    #[test]
    fn log_append_time_rewrites_the_batch_with_a_valid_crc() {
        let d = TempDir::new("plog-lat");
        let cfg = LogConfig { message_timestamp_type: TimestampType::LogAppendTime, ..Default::default() };
        let log = open(&d.0, cfg, true);
        let r = log.append(&batch(3, 5), 0, 1234).unwrap();
        assert_eq!((r.log_append_time, r.max_timestamp), (1234, 1234));
        let got = log.read(0, 1 << 20, None, true).unwrap().range.unwrap();
        let mut buf = vec![0u8; got.length as usize];
        super::super::fileio::pread_exact(&got.file, &mut buf, 0).unwrap();
        let h = validate_batch(&buf, 0).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 1234);
    }

    fn stored_bytes(log: &PartitionLog) -> Vec<u8> {
        let got = log.read(0, 1 << 20, None, true).unwrap().range.unwrap();
        let mut buf = vec![0u8; got.length as usize];
        super::super::fileio::pread_exact(&got.file, &mut buf, 0).unwrap();
        buf
    }

    fn produced(b: &[u8]) -> ProducedBatch {
        let rules = ProduceRequestRules { version: 9, max_message_bytes: i64::MAX };
        accept_produced_batch(b, &rules, Some(&ProducePolicy::default()), None).unwrap()
    }

    #[test]
    fn a_produced_batch_is_appended_as_the_same_bytes_its_records_would_be() {
        for timestamp_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            let cfg = LogConfig { message_timestamp_type: timestamp_type, ..Default::default() };
            let (d1, d2) = (TempDir::new("plog-produced"), TempDir::new("plog-records"));
            let (by_produced, by_records) = (open(&d1.0, cfg, true), open(&d2.0, cfg, true));
            for (i, b) in [batch(3, 5), batch(1, 9), batch(4, 2)].iter().enumerate() {
                let now = LazyNow::new(Some(1234 + i as i64));
                let a = by_produced.append_produced(b, &produced(b), 7, &now).unwrap();
                let r = by_records.append_at(b, 7, &now).unwrap();
                let fields = |a: &AppendInfo| (a.base_offset, a.last_offset, a.max_timestamp, a.offset_of_max_timestamp, a.log_append_time);
                assert_eq!(fields(&a), fields(&r), "{timestamp_type:?}");
            }
            assert_eq!(stored_bytes(&by_produced), stored_bytes(&by_records), "{timestamp_type:?}");
            assert_eq!(by_produced.leader_epoch_entries().unwrap(), vec![(7, 0)]);
        }
    }

    #[test]
    fn a_produced_batch_whose_buffer_changed_since_its_checks_appends_nothing() {
        let d = TempDir::new("plog-produced-changed");
        let log = open(&d.0, LogConfig::default(), true);
        let b = batch(2, 0);
        let checked = produced(&b);
        let mut body_changed = b.clone();
        *body_changed.last_mut().unwrap() ^= 1;
        let now = LazyNow::new(Some(0));
        assert!(matches!(log.append_produced(&body_changed, &checked, 0, &now),
                         Err(StorageError::InvalidRecords(CodecError::CrcMismatch { .. }))));
        let mut header_changed = b.clone();
        header_changed[RECORDS_COUNT_OFFSET + 3] ^= 1;
        assert!(matches!(log.append_produced(&header_changed, &checked, 0, &now),
                         Err(StorageError::InvalidRecords(CodecError::Invalid { field: "batch", .. }))));
        assert!(log.append_produced(&b[..b.len() - 1], &checked, 0, &now).is_err());
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(log.append_produced(&b, &checked, 0, &now).unwrap().last_offset, 1);
    }

    #[test]
    fn record_level_timestamp_lookup_inside_a_batch() {
        let d = TempDir::new("plog-ts");
        let log = open(&d.0, LogConfig::default(), true);
        log.append(&batch(5, 1000), 0, 0).unwrap(); // 1000..1004
        log.append(&batch(5, 2000), 0, 0).unwrap(); // 2000..2004
        assert_eq!(log.offset_for_timestamp(1003).unwrap(), Some((3, 1003)));
        assert_eq!(log.offset_for_timestamp(1500).unwrap(), Some((5, 2000)));
        assert_eq!(log.offset_for_timestamp(3000).unwrap(), None);
        assert_eq!(log.max_timestamp_offset().unwrap(), (9, 2004));
    }

    // epochs 2 from 0, 5 from 100, 7 from 250; the log ends at 300
    const EPOCHS: &[(i32, i64)] = &[(2, 0), (5, 100), (7, 250)];

    #[test]
    fn a_consumer_of_the_latest_epoch_has_not_diverged_up_to_the_log_end() {
        assert!(!consumer_epoch_diverges(EPOCHS, 300, 7, 300));
        assert!(!consumer_epoch_diverges(EPOCHS, 300, 7, 260));
    }

    #[test]
    fn an_older_epoch_ends_where_the_next_starts() {
        // epoch 5 ends at 250: a consumer at or below it read no truncated record
        assert!(!consumer_epoch_diverges(EPOCHS, 300, 5, 250));
        assert!(!consumer_epoch_diverges(EPOCHS, 300, 5, 120));
        // past where epoch 5 ended on this log: its records there were truncated
        assert!(consumer_epoch_diverges(EPOCHS, 300, 5, 251));
    }

    #[test]
    fn an_epoch_the_log_knows_only_under_an_older_one_diverges() {
        // epoch 6 was never this log's: the largest known epoch below it is 5, which is older
        assert!(consumer_epoch_diverges(EPOCHS, 300, 6, 200));
        assert!(consumer_epoch_diverges(EPOCHS, 300, 3, 50));
    }

    #[test]
    fn an_epoch_older_than_every_known_one_ends_where_the_first_starts() {
        let epochs = &[(4, 40), (6, 90)];
        assert!(!consumer_epoch_diverges(epochs, 120, 1, 40));
        assert!(consumer_epoch_diverges(epochs, 120, 1, 41));
    }

    #[test]
    fn an_epoch_newer_than_every_known_one_or_no_epochs_diverges() {
        assert!(consumer_epoch_diverges(EPOCHS, 300, 8, 300));
        assert!(consumer_epoch_diverges(&[], 300, 0, 0));
    }
}
