//! The log manager: a set of log dirs, each holding `<topic>-<partition>` directories plus
//! the Kafka checkpoint files and the clean-shutdown marker. Opens every partition at start
//! (cheaply: indexes and descriptors load on first use), runs recovery when the marker is
//! missing, and creates, finds and deletes partitions.
//!
//! A log dir whose files cannot be written (disk full, I/O error) goes offline, as in Kafka:
//! the manager stops writing there (flushes, checkpoints, new partitions, the clean-shutdown
//! marker) and keeps going with the other dirs; the caller refuses appends to its partitions
//! and keeps serving reads of what is readable. It stays offline until the next start, which
//! itself tolerates a full disk (the writes recovery would make are deferred).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::cleaner::{CleanStats, CleanerConfig, LogCleaner};
use super::checkpoint::{read_offsets, write_offsets, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT};
use super::config::LogConfig;
use super::error::{IoContext, StorageError, StorageResult};
use super::events::warn;
use super::fd_budget::FdBudget;
use super::fileio::fsync_dir;
use super::partition_log::{now_ms, OpenOptions, PartitionLog};

pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";
/// Kafka's limit on topic name length (a partition directory name must fit in 255 bytes).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Most threads a shutdown closes logs on, whatever `num.recovery.threads.per.data.dir` says.
pub const MAX_CLOSE_THREADS: usize = 64;

pub type TopicPartition = (String, i32);

/// Check a topic name as Kafka does: 1-249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(topic: &str) -> StorageResult<()> {
    let bad = |why: String| StorageError::InvalidArgument(format!("invalid topic name {topic:?}: {why}"));
    if topic.is_empty() {
        return Err(bad("empty".into()));
    }
    if topic == "." || topic == ".." {
        return Err(bad("'.' and '..' are not allowed".into()));
    }
    if topic.len() > MAX_TOPIC_NAME_LEN {
        return Err(bad(format!("longer than {MAX_TOPIC_NAME_LEN} characters")));
    }
    if let Some(c) = topic.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(bad(format!("character {c:?} is not one of [a-zA-Z0-9._-]")));
    }
    Ok(())
}

/// Split `<topic>-<partition>` at the last `-`.
pub fn parse_partition_dir_name(name: &str) -> Option<TopicPartition> {
    let (topic, p) = name.rsplit_once('-')?;
    if topic.is_empty() || p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let p: i32 = p.parse().ok()?;
    validate_topic_name(topic).ok()?;
    Some((topic.to_owned(), p))
}

struct Shared {
    dirs: Vec<PathBuf>,
    logs: Mutex<HashMap<TopicPartition, (usize, Arc<PartitionLog>)>>,
    /// Serializes checkpoint file writes.
    checkpoint_lock: Mutex<()>,
    /// Per log dir: why it is offline (None: online).
    offline: Mutex<Vec<Option<String>>>,
}

impl Shared {
    fn is_offline(&self, dir: usize) -> bool {
        self.offline.lock().unwrap_or_else(|p| p.into_inner())[dir].is_some()
    }

    /// Take `dir` offline over `error` (the first reason is kept); true if it was online.
    fn mark_offline(&self, dir: usize, error: &str) -> bool {
        let mut offline = self.offline.lock().unwrap_or_else(|p| p.into_inner());
        if offline[dir].is_some() {
            return false;
        }
        offline[dir] = Some(error.to_owned());
        drop(offline);
        warn(format!(
            "log dir {} is offline: {error}; its partitions refuse writes (KAFKA_STORAGE_ERROR) until a restart",
            self.dirs[dir].display()
        ));
        true
    }

    /// Run a write to `dir`; an error takes the dir offline instead of propagating.
    fn write_or_offline(&self, dir: usize, what: impl FnOnce() -> StorageResult<()>) {
        if self.is_offline(dir) {
            return;
        }
        if let Err(e) = what() {
            self.mark_offline(dir, &e.to_string());
        }
    }

    fn logs_in(&self, dir: usize) -> Vec<Arc<PartitionLog>> {
        let logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = logs.values().filter(|(d, _)| *d == dir).map(|(_, l)| l.clone()).collect();
        v.sort_by(|a, b| (a.topic(), a.partition()).cmp(&(b.topic(), b.partition())));
        v
    }

    fn write_log_start_checkpoint(&self, dir: usize) -> StorageResult<()> {
        let _g = self.checkpoint_lock.lock().unwrap_or_else(|p| p.into_inner());
        let entries: Vec<_> =
            self.logs_in(dir).iter().map(|l| (l.topic().to_owned(), l.partition(), l.log_start_offset())).collect();
        write_offsets(&self.dirs[dir].join(LOG_START_OFFSET_CHECKPOINT), &entries)
    }

    fn write_recovery_point_checkpoint(&self, dir: usize) -> StorageResult<()> {
        let _g = self.checkpoint_lock.lock().unwrap_or_else(|p| p.into_inner());
        let entries: Vec<_> =
            self.logs_in(dir).iter().map(|l| (l.topic().to_owned(), l.partition(), l.recovery_point())).collect();
        write_offsets(&self.dirs[dir].join(RECOVERY_POINT_CHECKPOINT), &entries)
    }
}

/// What a log dir holds at the start: whether it was shut down cleanly, its checkpoints, and its
/// partition directories (sorted); made if missing, and a deletion a crash interrupted finished.
struct LogDirListing {
    clean: bool,
    recovery_points: HashMap<TopicPartition, i64>,
    log_starts: HashMap<TopicPartition, i64>,
    entries: Vec<(PathBuf, TopicPartition)>,
}

fn list_log_dir(dir: &Path, excluded_topics: &[String]) -> StorageResult<LogDirListing> {
    fs::create_dir_all(dir).ctx("create log dir", dir)?;
    let clean = dir.join(CLEAN_SHUTDOWN_MARKER).exists();
    let read_ckpt = |name: &str| match read_offsets(&dir.join(name)) {
        Ok(m) => m,
        Err(e) => {
            warn(format!("ignoring unreadable checkpoint: {e}"));
            HashMap::new()
        }
    };
    let recovery_points = read_ckpt(RECOVERY_POINT_CHECKPOINT);
    let log_starts = read_ckpt(LOG_START_OFFSET_CHECKPOINT);
    let mut entries: Vec<(PathBuf, TopicPartition)> = Vec::new();
    for entry in fs::read_dir(dir).ctx("list log dir", dir)? {
        let entry = entry.ctx("list log dir", dir)?;
        if !entry.file_type().ctx("stat", &entry.path())?.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with("-delete") {
            // A topic deletion interrupted by a crash: finish it.
            fs::remove_dir_all(entry.path()).ctx("delete", &entry.path())?;
            continue;
        }
        if name.ends_with("-stray") || name.ends_with("-future") {
            continue;
        }
        if let Some(tp) = parse_partition_dir_name(name) {
            if excluded_topics.iter().any(|t| *t == tp.0) {
                continue;
            }
            entries.push((entry.path(), tp));
        }
    }
    entries.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(LogDirListing { clean, recovery_points, log_starts, entries })
}

pub struct LogManager {
    shared: Arc<Shared>,
    /// Bound on sealed segments' open `.log` descriptors, shared by all logs.
    fd_budget: Arc<FdBudget>,
    default_config: Mutex<LogConfig>,
    /// Directories of deleted partitions (renamed `*-delete`) and when to remove them
    /// (`file.delete.delay.ms` after the delete).
    deleted_dirs: Mutex<Vec<(i64, usize, PathBuf)>>,
    /// The log cleaner's threads, once started.
    cleaner: Mutex<Option<LogCleaner>>,
    closed: Mutex<bool>,
    /// Per log dir: cordoned (`cordoned.log.dirs`, KIP-1066): no new log is made there unless named.
    cordoned: Mutex<Vec<bool>>,
}

/// Let the process keep as many descriptors open as it may (each active segment holds one).
fn raise_fd_limit() {
    #[cfg(unix)]
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

impl LogManager {
    pub fn open(log_dirs: &[PathBuf], default_config: LogConfig) -> StorageResult<LogManager> {
        Self::open_with(log_dirs, default_config, None)
    }

    /// `open`, keeping at most `max_open_segment_files` sealed segments' `.log` descriptors
    /// open (default: `FdBudget::default_max_open()`); the least recently used idle ones are
    /// closed and reopened on demand.
    pub fn open_with(
        log_dirs: &[PathBuf],
        default_config: LogConfig,
        max_open_segment_files: Option<usize>,
    ) -> StorageResult<LogManager> {
        Self::open_excluding(log_dirs, default_config, max_open_segment_files, &[])
    }

    /// `open_with`, leaving the partition directories of `excluded_topics` alone (a combined
    /// broker/controller's `__cluster_metadata-0` belongs to the Raft layer, as in Kafka's LogManager).
    pub fn open_excluding(
        log_dirs: &[PathBuf],
        default_config: LogConfig,
        max_open_segment_files: Option<usize>,
        excluded_topics: &[String],
    ) -> StorageResult<LogManager> {
        Self::open_with_offline(log_dirs, default_config, max_open_segment_files, excluded_topics, &[])
    }

    /// `open_excluding`, with the log dirs of `offline` (each with why) offline from the start,
    /// never read nor written (Kafka's `initialOfflineDirs`: their `meta.properties` could not be
    /// read). A log dir that cannot be made, listed or loaded (an I/O error) goes offline too, as
    /// Kafka's `createAndValidateLogDirs` and `loadLogs` take it; an error when none is left.
    pub fn open_with_offline(
        log_dirs: &[PathBuf],
        default_config: LogConfig,
        max_open_segment_files: Option<usize>,
        excluded_topics: &[String],
        offline: &[(PathBuf, String)],
    ) -> StorageResult<LogManager> {
        default_config.validate()?;
        if max_open_segment_files == Some(0) {
            return Err(StorageError::InvalidArgument("max_open_segment_files must be at least 1".into()));
        }
        raise_fd_limit();
        let fd_budget = Arc::new(FdBudget::new(max_open_segment_files.unwrap_or_else(FdBudget::default_max_open)));
        if log_dirs.is_empty() {
            return Err(StorageError::InvalidArgument("at least one log dir is required".into()));
        }
        let shared = Arc::new(Shared {
            dirs: log_dirs.to_vec(),
            logs: Mutex::new(HashMap::new()),
            checkpoint_lock: Mutex::new(()),
            offline: Mutex::new(vec![None; log_dirs.len()]),
        });
        let mut loaded: HashMap<TopicPartition, (usize, Arc<PartitionLog>)> = HashMap::new();
        let mut had_recovery = vec![false; log_dirs.len()];
        'dirs: for (di, dir) in log_dirs.iter().enumerate() {
            if let Some((_, why)) = offline.iter().find(|(d, _)| d == dir) {
                shared.mark_offline(di, why);
                continue;
            }
            let listing = match list_log_dir(dir, excluded_topics) {
                Ok(listing) => listing,
                Err(e @ StorageError::Io { .. }) => {
                    shared.mark_offline(di, &format!("Failed to create or validate data directory {}: {e}", dir.display()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut dir_logs = Vec::with_capacity(listing.entries.len());
            for (path, tp) in listing.entries {
                if let Some((other, _)) = loaded.get(&tp) {
                    return Err(StorageError::InvalidArgument(format!(
                        "partition {}-{} is in two log dirs: {} and {}",
                        tp.0,
                        tp.1,
                        log_dirs[*other].display(),
                        dir.display()
                    )));
                }
                let opts = OpenOptions {
                    recovery_point: listing.recovery_points.get(&tp).copied(),
                    log_start_offset: listing.log_starts.get(&tp).copied(),
                    clean_shutdown: listing.clean,
                    fd_budget: Some(fd_budget.clone()),
                };
                match PartitionLog::open(&path, &tp.0, tp.1, default_config.clone(), opts) {
                    Ok(log) => dir_logs.push((tp, Arc::new(log))),
                    Err(e @ StorageError::Io { .. }) => {
                        // none of the dir's logs is served (those opened so far close here)
                        shared.mark_offline(di, &format!("Error while loading log dir {}: {e}", dir.display()));
                        continue 'dirs;
                    }
                    Err(e) => return Err(e),
                }
            }
            loaded.extend(dir_logs.into_iter().map(|(tp, log)| (tp, (di, log))));
            had_recovery[di] = !listing.clean;
        }
        if (0..log_dirs.len()).all(|di| shared.is_offline(di)) {
            let why: Vec<String> =
                shared.offline.lock().unwrap_or_else(|p| p.into_inner()).iter().flatten().cloned().collect();
            return Err(StorageError::io(
                "open log dirs",
                &log_dirs[0],
                io::Error::other(format!("none of the log dirs can be created or validated ({})", why.join("; "))),
            ));
        }
        *shared.logs.lock().unwrap_or_else(|p| p.into_inner()) = loaded;
        let mgr = LogManager {
            shared,
            fd_budget,
            default_config: Mutex::new(default_config),
            deleted_dirs: Mutex::new(Vec::new()),
            cleaner: Mutex::new(None),
            closed: Mutex::new(false),
            cordoned: Mutex::new(vec![false; log_dirs.len()]),
        };
        for (di, dir) in log_dirs.iter().enumerate() {
            if mgr.shared.is_offline(di) {
                continue; // failed at the start: nothing of it is loaded, nothing written
            }
            for log in mgr.shared.logs_in(di) {
                mgr.install_hook(&log, di);
            }
            if had_recovery[di] {
                // On a full disk the dir starts offline (read-only) rather than not at all.
                mgr.shared.write_or_offline(di, || {
                    mgr.shared.write_recovery_point_checkpoint(di)?;
                    mgr.shared.write_log_start_checkpoint(di)
                });
            }
            // Running: a crash from now on must trigger recovery.
            match fs::remove_file(dir.join(CLEAN_SHUTDOWN_MARKER)) {
                Ok(()) => mgr.shared.write_or_offline(di, || fsync_dir(dir).ctx("fsync", dir)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("remove clean shutdown marker", dir),
            }
            let deferred = mgr.shared.logs_in(di).iter().filter(|l| l.has_deferred_writes()).count();
            if deferred > 0 {
                mgr.shared.mark_offline(
                    di,
                    &format!("{deferred} partition(s) could not write their recovered indexes or epoch checkpoint"),
                );
            }
        }
        Ok(mgr)
    }

    fn install_hook(&self, log: &Arc<PartitionLog>, dir: usize) {
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        log.set_log_start_hook(Some(Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                if let Err(e) = s.write_log_start_checkpoint(dir) {
                    warn(format!("could not persist the log start offset: {e}"));
                }
            }
        })));
        // A truncation (a follower's, whoever calls it) checkpoints the dir's recovery points at
        // once, as Kafka's LogManager.truncateTo: until the periodic checkpoint a crash would reopen
        // the log at the old, higher recovery point, skipping the recovery (and the flush) of the
        // segments rewritten below it. A failed write takes the dir offline.
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        log.set_recovery_point_lowered_hook(Some(Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                s.write_or_offline(dir, || s.write_recovery_point_checkpoint(dir));
            }
        })));
    }

    fn check_open(&self) -> StorageResult<()> {
        if *self.closed.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(StorageError::Closed("log manager".into()));
        }
        Ok(())
    }

    /// Log dirs that are offline, with the error that took each offline.
    pub fn offline_dirs(&self) -> Vec<(PathBuf, String)> {
        let offline = self.shared.offline.lock().unwrap_or_else(|p| p.into_inner());
        offline.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| (self.shared.dirs[i].clone(), e.clone()))).collect()
    }

    /// Cordon the log dirs `dirs` (each one of `log_dirs`) and uncordon the others (Kafka's
    /// `cordoned.log.dirs`, KIP-1066): a new log is made in a cordoned dir only when it is named.
    pub fn set_cordoned_dirs(&self, dirs: &[PathBuf]) -> StorageResult<()> {
        let mut cordoned = vec![false; self.shared.dirs.len()];
        for dir in dirs {
            let Some(di) = self.shared.dirs.iter().position(|d| d == dir) else {
                return Err(StorageError::InvalidArgument(format!("{} is not a log dir", dir.display())));
            };
            cordoned[di] = true;
        }
        *self.cordoned.lock().unwrap_or_else(|p| p.into_inner()) = cordoned;
        Ok(())
    }

    /// The cordoned log dirs (see `set_cordoned_dirs`).
    pub fn cordoned_dirs(&self) -> Vec<PathBuf> {
        let cordoned = self.cordoned.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.dirs.iter().zip(cordoned.iter()).filter(|(_, c)| **c).map(|(d, _)| d.clone()).collect()
    }

    /// The log dir a new log goes to when none is named (Kafka's `LogManager.nextLogDirs`): the
    /// online dir that is not cordoned holding the fewest partitions (`counts`, per dir; the first
    /// such on a tie); when every online dir is cordoned, the online dir holding the fewest. None:
    /// every dir is offline.
    fn next_log_dir(&self, counts: &[usize]) -> Option<usize> {
        let cordoned = self.cordoned.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let online: Vec<usize> = (0..counts.len()).filter(|&i| !self.shared.is_offline(i)).collect();
        let open = online.iter().copied().filter(|&i| !cordoned[i]).min_by_key(|&i| counts[i]);
        open.or_else(|| online.into_iter().min_by_key(|&i| counts[i]))
    }

    /// Take the log dir `dir` (one of `log_dirs`) offline over `error` (e.g. an append failed
    /// with ENOSPC); true if it was online.
    pub fn mark_dir_offline(&self, dir: &Path, error: &str) -> StorageResult<bool> {
        let Some(di) = self.shared.dirs.iter().position(|d| d == dir) else {
            return Err(StorageError::InvalidArgument(format!("{} is not a log dir", dir.display())));
        };
        Ok(self.shared.mark_offline(di, error))
    }

    /// Start the log cleaner (`log.cleaner.threads` threads compacting every log whose
    /// `cleanup.policy` holds `compact`); an error if it runs already.
    pub fn start_cleaner(&self, config: CleanerConfig) -> StorageResult<()> {
        self.check_open()?;
        let mut c = self.cleaner.lock().unwrap_or_else(|p| p.into_inner());
        if c.is_some() {
            return Err(StorageError::InvalidArgument("the log cleaner is already running".into()));
        }
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let lister = Arc::new(move || match weak.upgrade() {
            Some(s) => {
                let logs = s.logs.lock().unwrap_or_else(|p| p.into_inner());
                // an offline dir is neither read nor written until a restart: its logs are not cleaned
                let mut v: Vec<(usize, Arc<PartitionLog>)> =
                    logs.values().filter(|(d, _)| !s.is_offline(*d)).map(|(d, l)| (*d, l.clone())).collect();
                v.sort_by(|a, b| (a.1.topic(), a.1.partition()).cmp(&(b.1.topic(), b.1.partition())));
                v
            }
            None => Vec::new(),
        });
        // a pass whose swap failed past its commit point closed its log: the dir goes offline
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let dir_failed = Arc::new(move |dir: usize, error: &str| {
            if let Some(s) = weak.upgrade() {
                s.mark_offline(dir, error);
            }
        });
        let online: Vec<bool> = (0..self.shared.dirs.len()).map(|d| !self.shared.is_offline(d)).collect();
        *c = Some(LogCleaner::start_online(config, self.shared.dirs.clone(), &online, lister, dir_failed)?);
        Ok(())
    }

    /// Ask the cleaner threads to look for work now.
    pub fn wake_cleaner(&self) {
        if let Some(c) = self.cleaner.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            c.wake();
        }
    }

    /// The cleaner's counters (None when it was not started).
    pub fn cleaner_stats(&self) -> Option<CleanStats> {
        self.cleaner.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|c| c.stats())
    }

    /// Each cleaned partition's first dirty offset.
    pub fn cleaner_checkpoints(&self) -> Vec<(String, i32, i64)> {
        self.cleaner.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or_else(Vec::new, |c| c.checkpoints())
    }

    fn stop_cleaner(&self) {
        let c = self.cleaner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(c) = c {
            c.stop();
        }
    }

    /// The bound on sealed segments' open descriptors, and how many are open now.
    pub fn open_segment_files(&self) -> (usize, usize) {
        (self.fd_budget.max_open(), self.fd_budget.open_count())
    }

    pub fn log_dirs(&self) -> &[PathBuf] {
        &self.shared.dirs
    }

    pub fn default_config(&self) -> LogConfig {
        self.default_config.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<PartitionLog>> {
        let logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
        logs.get(&(topic.to_owned(), partition)).map(|(_, l)| l.clone())
    }

    /// Create the partition's log (in the log dir with the fewest partitions, leaving out the
    /// cordoned ones while another is online: see `next_log_dir`), or return the
    /// existing one (its config replaced when one is given).
    pub fn create(&self, topic: &str, partition: i32, config: Option<LogConfig>) -> StorageResult<Arc<PartitionLog>> {
        self.create_in(topic, partition, config, None)
    }

    /// `create`, with a new log made in the log dir `log_dir` (one of `log_dirs`, online) when one
    /// is given: the dir the cluster metadata names for the replica, or the one AlterReplicaLogDirs
    /// asked for before the replica existed (Kafka's `getOrCreateLog` with a target directory id or
    /// a preferred log dir). An existing log is returned wherever it is.
    pub fn create_in(
        &self,
        topic: &str,
        partition: i32,
        config: Option<LogConfig>,
        log_dir: Option<&Path>,
    ) -> StorageResult<Arc<PartitionLog>> {
        self.check_open()?;
        validate_topic_name(topic)?;
        if partition < 0 {
            return Err(StorageError::InvalidArgument(format!("invalid partition {partition} of {topic}: negative")));
        }
        if let Some(c) = &config {
            c.validate()?;
        }
        let mut logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
        let key = (topic.to_owned(), partition);
        if let Some((_, l)) = logs.get(&key) {
            let l = l.clone();
            drop(logs);
            if let Some(c) = config {
                l.update_config(c)?;
            }
            return Ok(l);
        }
        let di = match log_dir {
            Some(dir) => self.online_dir_index(dir)?,
            None => {
                let mut counts = vec![0usize; self.shared.dirs.len()];
                for (d, _) in logs.values() {
                    counts[*d] += 1;
                }
                let Some(di) = self.next_log_dir(&counts) else {
                    return Err(StorageError::io(
                        "create partition in",
                        &self.shared.dirs[0],
                        io::Error::other("every log dir is offline"),
                    ));
                };
                di
            }
        };
        let dir = self.shared.dirs[di].join(format!("{topic}-{partition}"));
        let cfg = config.unwrap_or_else(|| self.default_config());
        let opts = OpenOptions {
            recovery_point: None,
            log_start_offset: None,
            clean_shutdown: true,
            fd_budget: Some(self.fd_budget.clone()),
        };
        // Durable at the log's first flush (which also fsyncs this log dir).
        let log = Arc::new(PartitionLog::open(&dir, topic, partition, cfg, opts)?);
        logs.insert(key, (di, log.clone()));
        drop(logs);
        self.install_hook(&log, di);
        Ok(log)
    }

    /// The index of the log dir `dir` (one of `log_dirs`), online.
    fn online_dir_index(&self, dir: &Path) -> StorageResult<usize> {
        let Some(di) = self.shared.dirs.iter().position(|d| d == dir) else {
            return Err(StorageError::InvalidArgument(format!("{} is not a log dir", dir.display())));
        };
        if self.shared.is_offline(di) {
            return Err(StorageError::io("move a partition to", dir, io::Error::other("the log dir is offline")));
        }
        Ok(di)
    }

    /// One copy pass of a move of the partition's log into `future` (a directory inside another
    /// online log dir; see `PartitionLog::copy_pass`).
    pub fn copy_to_future(&self, topic: &str, partition: i32, future: &Path, max_bytes: u64) -> StorageResult<super::partition_log::CopyPass> {
        self.check_open()?;
        let log = self.get(topic, partition).ok_or_else(|| StorageError::InvalidArgument(format!("no partition {topic}-{partition}")))?;
        self.online_dir_index(future.parent().unwrap_or(future))?;
        log.copy_pass(future, max_bytes)
    }

    /// Finish a move (`PartitionLog::swap_in_future`): the log now lives in `future`'s log dir,
    /// the old directory is removed after `file.delete.delay.ms`, both dirs' checkpoints are
    /// rewritten. False (nothing changed) if the log was truncated or cleaned since the copy's
    /// `generation`.
    pub fn swap_in_future(&self, topic: &str, partition: i32, future: &Path, generation: u64) -> StorageResult<bool> {
        self.check_open()?;
        let key = (topic.to_owned(), partition);
        let (from, log) = {
            let logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
            let Some((d, l)) = logs.get(&key) else {
                return Err(StorageError::InvalidArgument(format!("no partition {topic}-{partition}")));
            };
            (*d, l.clone())
        };
        let to = self.online_dir_index(future.parent().unwrap_or(future))?;
        let Some((doomed, delay)) = log.swap_in_future(future, generation)? else {
            return Ok(false);
        };
        // the log's entry moves to its new dir only if it is still this log: a delete that took it out
        // of the map meanwhile (and renames the moved dir away) must not see it come back
        let still_listed = match self.shared.logs.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&key) {
            Some(entry) if Arc::ptr_eq(&entry.1, &log) => {
                entry.0 = to;
                true
            }
            _ => false,
        };
        if still_listed {
            self.install_hook(&log, to);
        }
        // the move is done: failing to remove the old copy takes its dir offline, it does not undo the move
        if delay == 0 {
            self.remove_deleted_dir(from, &doomed);
        } else {
            self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner()).push((now_ms().saturating_add(delay), from, doomed));
        }
        for d in [from, to] {
            self.shared.write_or_offline(d, || {
                self.shared.write_recovery_point_checkpoint(d)?;
                self.shared.write_log_start_checkpoint(d)
            });
        }
        Ok(true)
    }

    /// Delete every partition of `topic`; returns how many were deleted.
    pub fn delete_topic(&self, topic: &str) -> StorageResult<usize> {
        self.delete_partitions(topic, 0)
    }

    /// Delete the partitions of `topic` numbered `first` and up (a topic or its added partitions
    /// whose creation failed midway); returns how many were deleted.
    pub fn delete_partitions(&self, topic: &str, first: i32) -> StorageResult<usize> {
        self.delete_where(|t, p| t == topic && p >= first)
    }

    /// Delete one partition (a replica this broker no longer hosts after a reassignment); returns
    /// whether it was there.
    pub fn delete_partition(&self, topic: &str, partition: i32) -> StorageResult<bool> {
        Ok(self.delete_where(|t, p| t == topic && p == partition)? > 0)
    }

    /// Stop serving one partition's log and rename its directory `<topic>-<partition>.<id>-stray`,
    /// its files kept (Kafka's stray log: its `partition.metadata` names another topic id than the
    /// cluster's metadata); returns the renamed directory, None when the log was not open.
    pub fn mark_stray(&self, topic: &str, partition: i32) -> StorageResult<Option<PathBuf>> {
        self.check_open()?;
        let key: TopicPartition = (topic.to_owned(), partition);
        let Some((d, log)) = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner()).remove(&key) else {
            return Ok(None);
        };
        log.set_log_start_hook(None);
        log.set_recovery_point_lowered_hook(None);
        let renamed = log.rename_stray()?;
        self.shared.write_or_offline(d, || {
            self.shared.write_recovery_point_checkpoint(d)?;
            self.shared.write_log_start_checkpoint(d)
        });
        Ok(renamed)
    }

    fn delete_where(&self, doomed: impl Fn(&str, i32) -> bool) -> StorageResult<usize> {
        self.check_open()?;
        let victims: Vec<(TopicPartition, usize, Arc<PartitionLog>)> = {
            let mut logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<TopicPartition> =
                logs.keys().filter(|(t, p)| doomed(t, *p)).cloned().collect();
            keys.into_iter()
                .filter_map(|k| logs.remove(&k).map(|(d, l)| (k, d, l)))
                .collect()
        };
        let mut dirs_touched = std::collections::BTreeSet::new();
        let now = now_ms();
        for (_, d, log) in &victims {
            log.set_log_start_hook(None);
            log.set_recovery_point_lowered_hook(None);
            if let Some((renamed, delay)) = log.rename_for_delete()? {
                if delay == 0 {
                    self.remove_deleted_dir(*d, &renamed);
                } else {
                    let mut pending = self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner());
                    pending.push((now.saturating_add(delay), *d, renamed));
                }
            }
            dirs_touched.insert(*d);
        }
        for d in dirs_touched {
            self.shared.write_or_offline(d, || {
                self.shared.write_recovery_point_checkpoint(d)?;
                self.shared.write_log_start_checkpoint(d)
            });
        }
        Ok(victims.len())
    }

    pub fn partitions(&self) -> Vec<TopicPartition> {
        let logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = logs.keys().cloned().collect();
        v.sort();
        v
    }

    /// The logs in online dirs, with their dir.
    fn online_logs(&self) -> Vec<(usize, Arc<PartitionLog>)> {
        let offline = self.shared.offline.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
        logs.values().filter(|(d, _)| offline[*d].is_none()).map(|(d, l)| (*d, l.clone())).collect()
    }

    /// Write `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` of every
    /// online dir (a dir that fails goes offline; the others are still written).
    pub fn checkpoint(&self) -> StorageResult<()> {
        for d in 0..self.shared.dirs.len() {
            self.shared.write_or_offline(d, || {
                self.shared.write_recovery_point_checkpoint(d)?;
                self.shared.write_log_start_checkpoint(d)
            });
        }
        Ok(())
    }

    /// Flush every log in an online dir, log by log: each fsyncs only what it has not flushed
    /// (a filesystem-wide `syncfs` would also wait for other processes' dirty pages). A dir
    /// whose writes fail goes offline; the others are still flushed.
    pub fn flush_all(&self) -> StorageResult<()> {
        for (d, l) in self.online_logs() {
            self.shared.write_or_offline(d, || l.flush());
        }
        Ok(())
    }

    /// Flush the logs (in online dirs) whose `flush.ms` has elapsed; returns how many were
    /// flushed. A dir whose flush fails goes offline.
    pub fn flush_due(&self, now: i64) -> StorageResult<usize> {
        let mut n = 0;
        for (d, l) in self.online_logs() {
            match l.flush_if_due(now) {
                Ok(true) => n += 1,
                Ok(false) => {}
                Err(e) => {
                    self.shared.mark_offline(d, &e.to_string());
                }
            }
        }
        Ok(n)
    }

    /// Remove deleted segments' files and deleted partitions' directories whose
    /// `file.delete.delay.ms` has passed; returns how many segments and directories were removed.
    pub fn delete_expired_files(&self, now: i64) -> StorageResult<usize> {
        let mut n = self.remove_deleted_dirs(Some(now));
        for (d, l) in self.online_logs() {
            if self.shared.is_offline(d) {
                continue;
            }
            match l.delete_expired_files(now) {
                Ok(removed) => n += removed,
                Err(e) => {
                    self.shared.mark_offline(d, &e.to_string());
                }
            }
        }
        Ok(n)
    }

    /// Directories of deleted partitions waiting for `file.delete.delay.ms`.
    pub fn pending_deleted_dirs(&self) -> Vec<PathBuf> {
        let pending = self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner());
        pending.iter().map(|(_, _, p)| p.clone()).collect()
    }

    /// Remove the deleted partition directories due by `now` (all of them with `None`).
    fn remove_deleted_dirs(&self, now: Option<i64>) -> usize {
        let due: Vec<(usize, PathBuf)> = {
            let mut pending = self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner());
            let (due, keep): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(at, _, _)| now.is_none_or(|n| *at <= n));
            *pending = keep;
            due.into_iter().map(|(_, d, p)| (d, p)).collect()
        };
        due.iter().filter(|(d, path)| self.remove_deleted_dir(*d, path)).count()
    }

    /// Remove a deleted (or moved-away) partition's directory `path` in log dir `dir`. A failure takes
    /// that dir offline (Kafka's deletion hands the IOException to its LogDirFailureChannel) instead of
    /// failing the deletion or move whose last step this is, and the other directories due are still
    /// removed. True when the directory is gone.
    fn remove_deleted_dir(&self, dir: usize, path: &Path) -> bool {
        match fs::remove_dir_all(path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            Err(e) => {
                self.shared.mark_offline(dir, &StorageError::io("delete", path, e).to_string());
                false
            }
        }
    }

    /// Retention over every log in an online dir; returns the number of segments deleted. A log
    /// whose retention fails takes its dir offline (Kafka's log dir failure, KIP-112): the other
    /// dirs' logs are still retained, this pass and the next.
    pub fn apply_retention(&self, now: Option<i64>) -> StorageResult<usize> {
        let now = now.unwrap_or_else(now_ms);
        let mut n = 0;
        for (d, l) in self.online_logs() {
            if self.shared.is_offline(d) {
                continue; // an earlier log of this pass failed it
            }
            match l.apply_retention(now) {
                Ok(deleted) => n += deleted,
                Err(e) => {
                    self.shared.mark_offline(d, &e.to_string());
                }
            }
        }
        Ok(n)
    }

    /// Flush and close every log, write the checkpoints, then the clean-shutdown marker.
    pub fn close(&self) -> StorageResult<()> {
        self.close_with(1)
    }

    /// `close` with the logs flushed and closed on `threads` threads at once (Kafka's
    /// `num.recovery.threads.per.data.dir` × dirs; at most `MAX_CLOSE_THREADS`). Each log fsyncs
    /// only what it has not flushed: a filesystem-wide `syncfs` would also wait for every other
    /// process's dirty pages on that disk, which made shutdowns on a busy machine take seconds.
    pub fn close_with(&self, threads: usize) -> StorageResult<()> {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return Ok(());
        }
        // No swap may run while the logs close.
        self.stop_cleaner();
        // Logs in offline dirs are not written: without the marker, the next start recovers them.
        let logs = self.online_logs();
        let threads = threads.clamp(1, MAX_CLOSE_THREADS).min(logs.len().max(1));
        let next = AtomicUsize::new(0);
        let close_logs = || loop {
            let Some((d, l)) = logs.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
            self.shared.write_or_offline(*d, || l.close());
        };
        if threads == 1 {
            close_logs();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(close_logs);
                }
            });
        }
        self.checkpoint()?;
        // Nothing is served after close: deleted partitions waiting for file.delete.delay.ms can go now.
        self.remove_deleted_dirs(None);
        for (di, dir) in self.shared.dirs.iter().enumerate() {
            let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
            self.shared.write_or_offline(di, || {
                let f = fs::File::create(&marker).ctx("write clean shutdown marker", &marker)?;
                f.sync_all().ctx("fsync", &marker)?;
                fsync_dir(dir).ctx("fsync", dir)
            });
        }
        *closed = true;
        Ok(())
    }
}

/// Directory of a partition log inside a log dir.
pub fn partition_dir(log_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{partition}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dir_names_split_at_the_last_dash() {
        assert_eq!(parse_partition_dir_name("my-topic-12"), Some(("my-topic".into(), 12)));
        assert_eq!(parse_partition_dir_name("orders"), None);
        assert_eq!(parse_partition_dir_name("orders-x"), None);
        assert_eq!(parse_partition_dir_name("-3"), None);
    }

    #[test]
    fn a_log_truncated_fully_reopens_at_its_new_start_from_the_checkpoint() {
        use crate::batch::records::{BatchWriter, EncodeOptions};
        let tmp = super::super::test_dir::TempDir::new("truncate-fully-reopen");
        let dir = tmp.0.join("a");
        let batch = || {
            let mut w = BatchWriter::new(EncodeOptions::default());
            w.append::<&[u8], &[u8]>(0, None, Some(b"v"), &[]).unwrap();
            w.finish().unwrap()
        };
        let mgr = LogManager::open(std::slice::from_ref(&dir), LogConfig::default()).unwrap();
        let log = mgr.create("t", 0, None).unwrap();
        for _ in 0..3 {
            log.append(&batch(), 0, 0).unwrap();
        }
        log.truncate_fully_and_start_at(50).unwrap();
        // the log start hook wrote the checkpoint at once, not only at a clean stop
        let starts = read_offsets(&dir.join(LOG_START_OFFSET_CHECKPOINT)).unwrap();
        assert_eq!(starts.get(&("t".to_owned(), 0)), Some(&50));
        drop(log);
        mgr.close().unwrap();
        let mgr = LogManager::open(std::slice::from_ref(&dir), LogConfig::default()).unwrap();
        let log = mgr.get("t", 0).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
        log.append(&batch(), 0, 0).unwrap();
        assert_eq!(log.log_end_offset(), 51);
        drop(log);
        mgr.close().unwrap();
    }

    #[test]
    fn a_stray_log_is_renamed_with_its_files_kept_and_skipped_by_the_next_start() {
        use crate::batch::records::{BatchWriter, EncodeOptions};
        let tmp = super::super::test_dir::TempDir::new("stray");
        let dir = tmp.0.join("a");
        let mgr = LogManager::open(std::slice::from_ref(&dir), LogConfig::default()).unwrap();
        let log = mgr.create("t", 0, None).unwrap();
        let mut w = BatchWriter::new(EncodeOptions::default());
        w.append::<&[u8], &[u8]>(0, None, Some(b"v"), &[]).unwrap();
        log.append(&w.finish().unwrap(), 0, 0).unwrap();
        drop(log);
        let stray = mgr.mark_stray("t", 0).unwrap().expect("renamed");
        let name = stray.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with("t-0.") && name.ends_with("-stray") && name.len() == "t-0.".len() + 32 + 6, "{name}");
        assert!(fs::metadata(stray.join("00000000000000000000.log")).unwrap().len() > 0);
        assert!(mgr.get("t", 0).is_none());
        assert_eq!(mgr.mark_stray("t", 0).unwrap(), None);
        // the partition gets a new, empty log beside it
        assert_eq!(mgr.create("t", 0, None).unwrap().log_end_offset(), 0);
        mgr.close().unwrap();
        let mgr = LogManager::open(std::slice::from_ref(&dir), LogConfig::default()).unwrap();
        assert_eq!(mgr.partitions(), vec![("t".to_owned(), 0)]);
        assert_eq!(mgr.get("t", 0).unwrap().log_end_offset(), 0);
        assert!(stray.is_dir());
        mgr.close().unwrap();
    }

    /// Set a file's immutable attribute (`chattr +i`): even root cannot unlink it then, which makes a
    /// directory's removal fail on demand.
    fn set_immutable(file: &Path) {
        let status = std::process::Command::new("chattr").arg("+i").arg(file).status();
        assert!(matches!(status, Ok(s) if s.success()), "chattr on {} failed: {status:?} (needs root and ext4)", file.display());
    }

    /// Clears the immutable attribute of every file under its directory when dropped (before the
    /// `TempDir` holding them, declared earlier), so a failed test leaves nothing it cannot remove.
    struct ImmutableFiles(PathBuf);

    impl Drop for ImmutableFiles {
        fn drop(&mut self) {
            fn walk(dir: &Path) {
                for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        walk(&path);
                    } else {
                        let _ = std::process::Command::new("chattr").arg("-i").arg(&path).status();
                    }
                }
            }
            walk(&self.0);
        }
    }

    #[test]
    fn a_deleted_partitions_directory_that_cannot_be_removed_takes_its_dir_offline_and_the_others_go() {
        for delay in [0, 1_000] {
            let tmp = super::super::test_dir::TempDir::new("undeletable");
            let _release = ImmutableFiles(tmp.0.clone());
            let dirs = [tmp.0.join("a"), tmp.0.join("b")];
            let config = LogConfig { file_delete_delay_ms: delay, ..LogConfig::default() };
            let mgr = LogManager::open(&dirs, config).unwrap();
            let stuck_log = mgr.create_in("t", 0, None, Some(&dirs[0])).unwrap();
            let stuck_file = stuck_log.dir().join("stuck");
            drop(stuck_log);
            let other = mgr.create_in("t", 1, None, Some(&dirs[1])).unwrap().dir();
            fs::write(&stuck_file, b"").unwrap();
            set_immutable(&stuck_file);
            // the deletion itself succeeds: both partitions are gone from the manager
            assert_eq!(mgr.delete_topic("t").unwrap(), 2);
            assert!(mgr.get("t", 0).is_none() && mgr.get("t", 1).is_none());
            if delay > 0 {
                assert_eq!(mgr.pending_deleted_dirs().len(), 2);
                assert_eq!(mgr.delete_expired_files(now_ms() + delay + 1).unwrap(), 1, "delay {delay}");
                assert!(mgr.pending_deleted_dirs().is_empty());
            }
            let offline: Vec<PathBuf> = mgr.offline_dirs().into_iter().map(|(d, _)| d).collect();
            assert_eq!(offline, vec![dirs[0].clone()], "delay {delay}");
            assert!(!other.exists(), "delay {delay}: the other dir's partition was left behind");
            let leftover: Vec<PathBuf> = fs::read_dir(&dirs[0]).unwrap().map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().ends_with("-delete")).collect();
            assert_eq!(leftover.len(), 1, "delay {delay}");
            mgr.close().unwrap();
        }
    }

    /// The `.log` files of a partition directory, by base offset.
    fn segment_files(dir: &Path) -> Vec<(i64, PathBuf)> {
        let mut v: Vec<(i64, PathBuf)> = fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name()?.to_str()?.to_owned();
                let base = name.strip_suffix(".log")?.parse().ok()?;
                Some((base, p))
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_truncation_checkpoints_the_recovery_point_so_a_crash_recovers_the_rewritten_segments() {
        use crate::batch::records::{BatchWriter, EncodeOptions};
        let tmp = super::super::test_dir::TempDir::new("truncate-rp-checkpoint");
        let dir = tmp.0.join("a");
        let cfg = LogConfig { segment_bytes: 20000, ..LogConfig::default() };
        let batch = |v: u8| {
            let mut w = BatchWriter::new(EncodeOptions::default());
            w.append::<&[u8], &[u8]>(0, None, Some(&[v; 500]), &[]).unwrap();
            w.finish().unwrap()
        };
        let rp_on_disk = || read_offsets(&dir.join(RECOVERY_POINT_CHECKPOINT)).unwrap().get(&("t".to_owned(), 0)).copied();
        let mgr = LogManager::open(std::slice::from_ref(&dir), cfg.clone()).unwrap();
        let log = mgr.create("t", 0, None).unwrap();
        for _ in 0..120 {
            log.append(&batch(b'a'), 0, 0).unwrap();
        }
        log.flush().unwrap();
        mgr.checkpoint().unwrap();
        assert_eq!(rp_on_disk(), Some(120));
        // a follower's truncation across segment boundaries, then other batches past the old recovery point
        log.truncate_to(50).unwrap();
        assert_eq!(rp_on_disk(), Some(50), "the checkpoint follows the truncation at once");
        for _ in 0..80 {
            log.append(&batch(b'b'), 1, 0).unwrap();
        }
        assert_eq!(log.log_end_offset(), 130);
        // a crash: no close, no checkpoint, no clean-shutdown marker; a rewritten batch was torn
        drop(log);
        drop(mgr);
        let part = dir.join("t-0");
        let (_, seg) = segment_files(&part).into_iter().filter(|(b, _)| *b <= 60).next_back().unwrap();
        let mut data = fs::read(&seg).unwrap();
        let mut pos = 0;
        loop {
            let base = i64::from_be_bytes(data[pos..pos + 8].try_into().unwrap());
            let len = i32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap()) as usize;
            if base == 60 {
                data[pos + 100] ^= 0xff;
                break;
            }
            pos += 12 + len;
        }
        fs::write(&seg, &data).unwrap();
        let mgr = LogManager::open(std::slice::from_ref(&dir), cfg).unwrap();
        let log = mgr.get("t", 0).unwrap();
        // recovery ran from the truncation point: the torn batch and everything after it are cut
        assert!(log.recovery_point() <= 50, "recovery point {}", log.recovery_point());
        assert_eq!(log.log_end_offset(), 60);
        // a truncation that leaves the recovery point alone writes nothing
        log.flush().unwrap();
        mgr.checkpoint().unwrap();
        let before = rp_on_disk();
        log.truncate_to(70).unwrap();
        assert_eq!(rp_on_disk(), before);
        // and a full restart below the recovery point checkpoints it too
        log.truncate_fully_and_start_at(40).unwrap();
        assert_eq!(rp_on_disk(), Some(40));
        drop(log);
        mgr.close().unwrap();
    }

    #[test]
    fn create_in_makes_the_log_in_the_named_dir_and_keeps_an_existing_one_where_it_is() {
        let tmp = super::super::test_dir::TempDir::new("create-in");
        let (a, b) = (tmp.0.join("a"), tmp.0.join("b"));
        let mgr = LogManager::open(&[a.clone(), b.clone()], LogConfig::default()).unwrap();
        // both dirs hold nothing: left alone the manager picks `a`; named, it uses `b`
        mgr.create_in("t", 0, None, Some(&b)).unwrap();
        assert!(b.join("t-0").is_dir() && !a.join("t-0").exists());
        mgr.create_in("t", 0, None, Some(&a)).unwrap();
        assert!(!a.join("t-0").exists());
        assert!(mgr.create_in("t", 1, None, Some(&tmp.0.join("elsewhere"))).is_err());
        mgr.mark_dir_offline(&a, "test").unwrap();
        assert!(mgr.create_in("t", 2, None, Some(&a)).is_err());
        assert!(!a.join("t-2").exists());
    }

    /// The log dirs holding `topic`'s partitions `0..count`, in partition order.
    fn placed(mgr: &LogManager, topic: &str, count: i32) -> Vec<PathBuf> {
        (0..count).map(|p| mgr.get(topic, p).unwrap().dir().parent().unwrap().to_path_buf()).collect()
    }

    #[test]
    fn new_logs_go_to_the_least_loaded_dir_that_is_not_cordoned() {
        let tmp = super::super::test_dir::TempDir::new("cordoned");
        let (a, b, c) = (tmp.0.join("a"), tmp.0.join("b"), tmp.0.join("c"));
        let mgr = LogManager::open(&[a.clone(), b.clone(), c.clone()], LogConfig::default()).unwrap();
        mgr.create("held", 0, None).unwrap(); // `a` holds one partition already
        mgr.set_cordoned_dirs(&[b.clone()]).unwrap();
        assert_eq!(mgr.cordoned_dirs(), vec![b.clone()]);
        // the new topic spreads over `a` and `c`, fewest partitions first: `c`, then a tie won by `a`
        for p in 0..4 {
            mgr.create("spread", p, None).unwrap();
        }
        assert_eq!(placed(&mgr, "spread", 4), vec![c.clone(), a.clone(), c.clone(), a.clone()]);
        // named, a cordoned dir still gets the log (the controller's assignment, AlterReplicaLogDirs)
        mgr.create_in("named", 0, None, Some(&b)).unwrap();
        assert_eq!(placed(&mgr, "named", 1), vec![b.clone()]);
        // uncordoned, `b` (one partition against three each) gets the next ones
        mgr.set_cordoned_dirs(&[]).unwrap();
        mgr.create("after", 0, None).unwrap();
        assert_eq!(placed(&mgr, "after", 1), vec![b.clone()]);
        assert!(mgr.set_cordoned_dirs(&[tmp.0.join("elsewhere")]).is_err());
        assert!(mgr.cordoned_dirs().is_empty()); // a refused call changes nothing
        mgr.close().unwrap();
    }

    #[test]
    fn with_every_online_dir_cordoned_new_logs_go_to_the_least_loaded_online_dir() {
        let tmp = super::super::test_dir::TempDir::new("all-cordoned");
        let (a, b, c) = (tmp.0.join("a"), tmp.0.join("b"), tmp.0.join("c"));
        let mgr = LogManager::open(&[a.clone(), b.clone(), c.clone()], LogConfig::default()).unwrap();
        mgr.create("held", 0, None).unwrap(); // in `a`
        mgr.set_cordoned_dirs(&[a.clone(), b.clone()]).unwrap();
        mgr.mark_dir_offline(&c, "test").unwrap(); // the only dir not cordoned is offline
        for p in 0..2 {
            mgr.create("t", p, None).unwrap();
        }
        assert_eq!(placed(&mgr, "t", 2), vec![b.clone(), a.clone()]);
        mgr.mark_dir_offline(&a, "test").unwrap();
        mgr.mark_dir_offline(&b, "test").unwrap();
        assert!(mgr.create("none", 0, None).is_err());
    }

    #[test]
    fn a_log_dir_that_failed_or_cannot_be_listed_starts_offline_and_is_never_touched() {
        let tmp = super::super::test_dir::TempDir::new("offline-at-start");
        let (a, b, c) = (tmp.0.join("a"), tmp.0.join("b"), tmp.0.join("c"));
        let mgr = LogManager::open(&[a.clone(), b.clone(), c.clone()], LogConfig::default()).unwrap();
        for (p, dir) in [(0, &a), (1, &b), (2, &c)] {
            mgr.create_in("t", p, None, Some(dir)).unwrap();
        }
        mgr.close().unwrap();
        drop(mgr);
        // b replaced by a plain file; c named offline by the caller (its meta.properties could not be read)
        fs::remove_dir_all(&b).unwrap();
        fs::write(&b, b"not a dir").unwrap();
        let offline = [(c.clone(), "meta.properties: I/O error".to_string())];
        let mgr = LogManager::open_with_offline(&[a.clone(), b.clone(), c.clone()], LogConfig::default(), None, &[], &offline)
            .unwrap();
        let reasons: HashMap<PathBuf, String> = mgr.offline_dirs().into_iter().collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[&b].contains("Failed to create or validate data directory"), "{reasons:?}");
        assert_eq!(reasons[&c], "meta.properties: I/O error");
        assert_eq!(mgr.partitions(), vec![("t".to_string(), 0)]);
        // a new log goes to the online dir; nothing is written to the offline ones, even at close
        mgr.create("t", 3, None).unwrap();
        assert!(a.join("t-3").is_dir());
        mgr.close().unwrap();
        assert!(c.join(CLEAN_SHUTDOWN_MARKER).exists(), "the marker of c's previous clean close stays");
        assert!(c.join("t-2").is_dir() && fs::read(&b).unwrap() == b"not a dir");
        // with no dir left online the manager does not open
        let every = [(a.clone(), "x".to_string()), (c.clone(), "y".to_string())];
        let err = LogManager::open_with_offline(&[a, b, c], LogConfig::default(), None, &[], &every).err().unwrap();
        assert!(err.to_string().contains("none of the log dirs can be created or validated"), "{err}");
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("a.b_c-9").is_ok());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a b").unwrap_err().to_string().contains("' '"));
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }
}
