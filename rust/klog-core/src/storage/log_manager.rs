//! The log manager: a set of log dirs, each holding `<topic>-<partition>` directories plus
//! the Kafka checkpoint files and the clean-shutdown marker. Opens every partition at start
//! (cheaply: indexes and descriptors load on first use), runs recovery when the marker is
//! missing, and creates, finds and deletes partitions.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

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
}

impl Shared {
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

pub struct LogManager {
    shared: Arc<Shared>,
    /// Bound on sealed segments' open `.log` descriptors, shared by all logs.
    fd_budget: Arc<FdBudget>,
    default_config: Mutex<LogConfig>,
    /// Directories of deleted partitions (renamed `*-delete`) and when to remove them
    /// (`file.delete.delay.ms` after the delete).
    deleted_dirs: Mutex<Vec<(i64, PathBuf)>>,
    closed: Mutex<bool>,
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
        });
        let mut loaded: HashMap<TopicPartition, (usize, Arc<PartitionLog>)> = HashMap::new();
        let mut had_recovery = vec![false; log_dirs.len()];
        for (di, dir) in log_dirs.iter().enumerate() {
            fs::create_dir_all(dir).ctx("create log dir", dir)?;
            let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
            let clean = marker.exists();
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
            for (path, tp) in entries {
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
                    recovery_point: recovery_points.get(&tp).copied(),
                    log_start_offset: log_starts.get(&tp).copied(),
                    clean_shutdown: clean,
                    fd_budget: Some(fd_budget.clone()),
                };
                let log = PartitionLog::open(&path, &tp.0, tp.1, default_config.clone(), opts)?;
                loaded.insert(tp, (di, Arc::new(log)));
            }
            had_recovery[di] = !clean;
        }
        *shared.logs.lock().unwrap_or_else(|p| p.into_inner()) = loaded;
        let mgr = LogManager {
            shared,
            fd_budget,
            default_config: Mutex::new(default_config),
            deleted_dirs: Mutex::new(Vec::new()),
            closed: Mutex::new(false),
        };
        for (di, dir) in log_dirs.iter().enumerate() {
            for log in mgr.shared.logs_in(di) {
                mgr.install_hook(&log, di);
            }
            if had_recovery[di] {
                mgr.shared.write_recovery_point_checkpoint(di)?;
                mgr.shared.write_log_start_checkpoint(di)?;
            }
            // Running: a crash from now on must trigger recovery.
            match fs::remove_file(dir.join(CLEAN_SHUTDOWN_MARKER)) {
                Ok(()) => fsync_dir(dir).ctx("fsync", dir)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("remove clean shutdown marker", dir),
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
    }

    fn check_open(&self) -> StorageResult<()> {
        if *self.closed.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(StorageError::Closed("log manager".into()));
        }
        Ok(())
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

    /// Create the partition's log (in the log dir with the fewest partitions), or return the
    /// existing one (its config replaced when one is given).
    pub fn create(&self, topic: &str, partition: i32, config: Option<LogConfig>) -> StorageResult<Arc<PartitionLog>> {
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
        let mut counts = vec![0usize; self.shared.dirs.len()];
        for (d, _) in logs.values() {
            counts[*d] += 1;
        }
        let di = (0..counts.len()).min_by_key(|&i| counts[i]).unwrap_or(0);
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

    /// Delete every partition of `topic`; returns how many were deleted.
    pub fn delete_topic(&self, topic: &str) -> StorageResult<usize> {
        self.check_open()?;
        let victims: Vec<(TopicPartition, usize, Arc<PartitionLog>)> = {
            let mut logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<TopicPartition> = logs.keys().filter(|(t, _)| t == topic).cloned().collect();
            keys.into_iter()
                .filter_map(|k| logs.remove(&k).map(|(d, l)| (k, d, l)))
                .collect()
        };
        let mut dirs_touched = std::collections::BTreeSet::new();
        let now = now_ms();
        for (_, d, log) in &victims {
            log.set_log_start_hook(None);
            if let Some((renamed, delay)) = log.rename_for_delete()? {
                if delay == 0 {
                    fs::remove_dir_all(&renamed).ctx("delete", &renamed)?;
                } else {
                    let mut pending = self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner());
                    pending.push((now.saturating_add(delay), renamed));
                }
            }
            dirs_touched.insert(*d);
        }
        for d in dirs_touched {
            self.shared.write_recovery_point_checkpoint(d)?;
            self.shared.write_log_start_checkpoint(d)?;
        }
        Ok(victims.len())
    }

    pub fn partitions(&self) -> Vec<TopicPartition> {
        let logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = logs.keys().cloned().collect();
        v.sort();
        v
    }

    fn all_logs(&self) -> Vec<Arc<PartitionLog>> {
        let logs = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
        logs.values().map(|(_, l)| l.clone()).collect()
    }

    /// Write `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` of every dir.
    pub fn checkpoint(&self) -> StorageResult<()> {
        for d in 0..self.shared.dirs.len() {
            self.shared.write_recovery_point_checkpoint(d)?;
            self.shared.write_log_start_checkpoint(d)?;
        }
        Ok(())
    }

    /// Flush every log. On Linux: write all, one `syncfs` per log dir, then move the recovery
    /// points (one sync instead of several fsyncs per partition); elsewhere log by log.
    pub fn flush_all(&self) -> StorageResult<()> {
        let logs = self.all_logs();
        let mut ends = Vec::with_capacity(logs.len());
        for l in &logs {
            ends.push(l.write_without_sync()?);
        }
        if !self.sync_all_dirs()? {
            for l in &logs {
                l.flush()?;
            }
            return Ok(());
        }
        for (l, leo) in logs.iter().zip(ends) {
            l.mark_flushed(leo);
        }
        Ok(())
    }

    fn sync_all_dirs_probe(&self) -> bool {
        cfg!(target_os = "linux")
    }

    /// `syncfs` every log dir; false if the platform has no such call.
    fn sync_all_dirs(&self) -> StorageResult<bool> {
        for dir in &self.shared.dirs {
            if !super::fileio::syncfs_of(dir).ctx("syncfs", dir)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Flush the logs whose `flush.ms` has elapsed; returns how many were flushed.
    pub fn flush_due(&self, now: i64) -> StorageResult<usize> {
        let mut n = 0;
        for l in self.all_logs() {
            if l.flush_if_due(now)? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Remove deleted segments' files and deleted partitions' directories whose
    /// `file.delete.delay.ms` has passed; returns how many segments and directories were removed.
    pub fn delete_expired_files(&self, now: i64) -> StorageResult<usize> {
        let mut n = self.remove_deleted_dirs(Some(now))?;
        for l in self.all_logs() {
            n += l.delete_expired_files(now)?;
        }
        Ok(n)
    }

    /// Directories of deleted partitions waiting for `file.delete.delay.ms`.
    pub fn pending_deleted_dirs(&self) -> Vec<PathBuf> {
        let pending = self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner());
        pending.iter().map(|(_, p)| p.clone()).collect()
    }

    /// Remove the deleted partition directories due by `now` (all of them with `None`).
    fn remove_deleted_dirs(&self, now: Option<i64>) -> StorageResult<usize> {
        let due: Vec<PathBuf> = {
            let mut pending = self.deleted_dirs.lock().unwrap_or_else(|p| p.into_inner());
            let (due, keep): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(at, _)| now.is_none_or(|n| *at <= n));
            *pending = keep;
            due.into_iter().map(|(_, p)| p).collect()
        };
        for dir in &due {
            match fs::remove_dir_all(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("delete", dir),
            }
        }
        Ok(due.len())
    }

    /// Retention over every log; returns the number of segments deleted.
    pub fn apply_retention(&self, now: Option<i64>) -> StorageResult<usize> {
        let now = now.unwrap_or_else(now_ms);
        let mut n = 0;
        for l in self.all_logs() {
            n += l.apply_retention(now)?;
        }
        Ok(n)
    }

    /// Flush and close every log, write the checkpoints, then the clean-shutdown marker.
    pub fn close(&self) -> StorageResult<()> {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return Ok(());
        }
        let logs = self.all_logs();
        if self.sync_all_dirs_probe() {
            let mut ends = Vec::with_capacity(logs.len());
            for l in &logs {
                ends.push(l.close_without_sync()?);
            }
            // One filesystem sync instead of several fsyncs per partition.
            if !self.sync_all_dirs()? {
                return Err(StorageError::InvalidArgument("syncfs became unavailable".into()));
            }
            for (l, leo) in logs.iter().zip(ends) {
                l.mark_flushed(leo);
            }
        } else {
            for l in &logs {
                l.close()?;
            }
        }
        self.checkpoint()?;
        // Nothing is served after close: deleted partitions waiting for file.delete.delay.ms can go now.
        self.remove_deleted_dirs(None)?;
        for dir in &self.shared.dirs {
            let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
            let f = fs::File::create(&marker).ctx("write clean shutdown marker", &marker)?;
            f.sync_all().ctx("fsync", &marker)?;
            fsync_dir(dir).ctx("fsync", dir)?;
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
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("a.b_c-9").is_ok());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a b").unwrap_err().to_string().contains("' '"));
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }
}
