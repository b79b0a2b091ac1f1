//! Moving a partition's log to another log dir of the same broker while it is served (Kafka's
//! AlterReplicaLogDirs): the files are copied into a future directory (`<topic>-<partition>.<id>-future`
//! in the target dir) in passes that hold the log's lock only to list what to copy, then
//! [`PartitionLog::swap_in_future`] copies the last bytes under the lock, renames the future
//! directory to `<topic>-<partition>`, opens it and swaps its segments into this same log object
//! (every holder of the log keeps working), and renames the old directory for deletion.
//!
//! Segment `.log` files only grow until they are sealed, so a pass copies each one from where the
//! last pass stopped. A truncation or a cleaner swap rewrites bytes already copied: both bump the
//! log's generation, and a swap at another generation than the copy started at refuses (the caller
//! copies again from scratch). Index files are copied as they are: a stale or short one is rebuilt
//! from its `.log` when first loaded, as after any crash.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions as FileOptions};
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::{now_ms, LogState, OpenOptions, PartitionLog};
use crate::storage::checkpoint::{write_epochs, LEADER_EPOCH_CHECKPOINT};
use crate::storage::error::{IoContext, StorageError, StorageResult};
use crate::storage::fileio::fsync_dir;
use crate::storage::partition_metadata::{read_topic_id, write_topic_id};
use crate::storage::segment::{segment_file_name, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};

/// The transaction index files the broker keeps next to the segments (`<base>.txnindex`).
const TXN_INDEX_SUFFIX: &str = ".txnindex";

/// What one copy pass did.
#[derive(Debug, Clone, Copy)]
pub struct CopyPass {
    /// Bytes copied by this pass.
    pub copied: u64,
    /// The log's generation when the pass listed its files.
    pub generation: u64,
    /// The log end offset when the pass listed its files: everything below it is in the copy
    /// once `complete`.
    pub copied_end_offset: i64,
    /// The pass copied everything it listed (false: it stopped at its byte budget).
    pub complete: bool,
}

/// One file to copy: its source, its length to copy, and whether it may only grow (a `.log`).
struct Planned {
    src: PathBuf,
    len: u64,
    grows: bool,
}

/// Copy `src` into `dst` up to `len` bytes. A growing file is copied from the end of what `dst`
/// holds; any other is copied whole unless `dst` has its length already (`rewrite`: always).
/// At most `budget` bytes of a growing file are copied (the rest by a later pass). Returns the
/// bytes copied; an error if `dst` is longer than a growing `src` (it was cut).
fn copy_file(p: &Planned, dst: &Path, rewrite: bool, budget: u64) -> StorageResult<u64> {
    let have = match fs::metadata(dst) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).ctx("stat", dst),
    };
    let from = if p.grows {
        if have > p.len {
            return Err(StorageError::InvalidArgument(format!(
                "{} is shorter than its copy {}: the log changed during the move",
                p.src.display(),
                dst.display()
            )));
        }
        have
    } else if have == p.len && !rewrite {
        return Ok(0);
    } else {
        0
    };
    if from == p.len && dst.exists() {
        return Ok(0);
    }
    let len = if p.grows { p.len.min(from.saturating_add(budget)) } else { p.len };
    let mut src = File::open(&p.src).ctx("open", &p.src)?;
    src.seek(SeekFrom::Start(from)).ctx("seek", &p.src)?;
    let mut out = FileOptions::new().create(true).write(true).truncate(from == 0).open(dst).ctx("create", dst)?;
    out.seek(SeekFrom::Start(from)).ctx("seek", dst)?;
    let n = io::copy(&mut io::Read::take(&mut src, len - from), &mut out).ctx("copy to", dst)?;
    if n != len - from {
        return Err(StorageError::InvalidArgument(format!("{} ended before byte {}", p.src.display(), p.len)));
    }
    out.sync_data().ctx("fsync", dst)?;
    Ok(n)
}

impl PartitionLog {
    /// The files a copy needs now: every segment's `.log` (up to its size), the indexes of the
    /// sealed ones (`with_indexes`), and the transaction indexes.
    fn copy_plan(&self, st: &mut LogState, with_indexes: bool) -> StorageResult<Vec<Planned>> {
        let dir = self.dir();
        let last = st.segments.keys().next_back().copied();
        let mut plan = Vec::new();
        for (&base, seg) in st.segments.iter_mut() {
            plan.push(Planned { src: seg.log_path().to_path_buf(), len: seg.size()?, grows: true });
            if with_indexes && Some(base) != last {
                for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                    let src = dir.join(segment_file_name(base, suffix));
                    if let Ok(m) = fs::metadata(&src) {
                        plan.push(Planned { src, len: m.len(), grows: false });
                    }
                }
            }
        }
        for entry in fs::read_dir(&dir).ctx("list", &dir)? {
            let entry = entry.ctx("list", &dir)?;
            if entry.file_name().to_string_lossy().ends_with(TXN_INDEX_SUFFIX) {
                let len = entry.metadata().ctx("stat", &entry.path())?.len();
                plan.push(Planned { src: entry.path(), len, grows: false });
            }
        }
        Ok(plan)
    }

    /// One copy pass into `future` (created if missing) of at most about `max_bytes` (Kafka's
    /// `replica.alter.log.dirs.io.max.bytes.per.second` paces the passes), without holding the
    /// log's lock while copying: appends go on meanwhile.
    pub fn copy_pass(&self, future: &Path, max_bytes: u64) -> StorageResult<CopyPass> {
        let (plan, generation, end) = {
            let mut st = self.lock()?;
            let plan = self.copy_plan(&mut st, true)?;
            (plan, st.generation, self.log_end_offset())
        };
        fs::create_dir_all(future).ctx("create future log dir", future)?;
        let mut copied = 0;
        for p in &plan {
            if copied >= max_bytes {
                return Ok(CopyPass { copied, generation, copied_end_offset: end, complete: false });
            }
            let name = p.src.file_name().expect("a file in the partition dir");
            match copy_file(p, &future.join(name), false, max_bytes - copied) {
                Ok(n) => copied += n,
                // retention or a roll removed or renamed it since the listing: the next pass sees it
                Err(StorageError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let complete = copied < max_bytes;
        Ok(CopyPass { copied, generation, copied_end_offset: end, complete })
    }

    /// Finish a move: under the log's lock (appends wait), seal the active segment, copy what the
    /// passes have not, drop copies of segments retention deleted, write the epoch checkpoint,
    /// rename `future` to `<topic>-<partition>` in its log dir and swap it in. Returns the old
    /// directory renamed `<name>.<id>-delete` and the `file.delete.delay.ms` after which to remove
    /// it; None (nothing changed) if the log's generation is no longer `generation`.
    pub fn swap_in_future(&self, future: &Path, generation: u64) -> StorageResult<Option<(PathBuf, i64)>> {
        let mut st = self.lock()?;
        if st.generation != generation {
            return Ok(None);
        }
        let leo = self.log_end_offset();
        let now = now_ms();
        // A sealed segment needs no index rebuild in the copy; a new empty active one is cheap to open.
        if Self::active(&mut st)?.size()? > 0 {
            let cfg = st.config.clone();
            self.roll_locked(&mut st, &cfg, leo, now)?;
        }
        let plan = self.copy_plan(&mut st, true)?;
        let mut wanted = BTreeSet::new();
        for p in &plan {
            let name = p.src.file_name().expect("a file in the partition dir");
            let suffix_rewrite = p.src.to_string_lossy().ends_with(TXN_INDEX_SUFFIX);
            copy_file(p, &future.join(name), suffix_rewrite, u64::MAX)?;
            wanted.insert(name.to_owned());
        }
        for entry in fs::read_dir(future).ctx("list", future)? {
            let entry = entry.ctx("list", future)?;
            let name = entry.file_name();
            let s = name.to_string_lossy();
            let copied_kind = [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX].iter().any(|x| s.ends_with(x));
            if copied_kind && !wanted.contains(&name) {
                fs::remove_file(entry.path()).ctx("remove", &entry.path())?;
            }
        }
        write_epochs(&future.join(LEADER_EPOCH_CHECKPOINT), &st.epochs)?;
        let old = self.dir();
        if let Some(topic_id) = read_topic_id(&old)? {
            write_topic_id(future, &topic_id)?;
        }
        fsync_dir(future).ctx("fsync", future)?;
        let target_dir = future.parent().ok_or_else(|| StorageError::InvalidArgument("future dir has no parent".into()))?;
        let name = old.file_name().ok_or_else(|| StorageError::InvalidArgument("log dir has no name".into()))?;
        let target = target_dir.join(name);
        fs::rename(future, &target).ctx("rename future log", future)?;
        fsync_dir(target_dir).ctx("fsync", target_dir)?;
        let opened = PartitionLog::open(
            &target,
            &self.topic,
            self.partition,
            (*st.config).clone(),
            OpenOptions {
                recovery_point: Some(leo),
                log_start_offset: Some(self.log_start_offset()),
                clean_shutdown: true,
                fd_budget: self.fd_budget.clone(),
            },
        );
        let opened = match opened {
            Ok(l) if l.log_end_offset() == leo => l,
            other => {
                // Back to a future dir: the old log stays the only one (a start never sees two).
                let _ = fs::rename(&target, future);
                return Err(match other {
                    Err(e) => e,
                    Ok(l) => StorageError::InvalidArgument(format!(
                        "the copy of {} ends at {} instead of {leo}",
                        self.name(),
                        l.log_end_offset()
                    )),
                });
            }
        };
        let mut fresh = opened.state.into_inner().unwrap_or_else(|p| p.into_inner());
        fresh.config = st.config.clone();
        // the cleaner's view of the old segments must not be swapped into the new ones
        fresh.generation = st.generation + 1;
        let old_state = std::mem::replace(&mut *st, fresh);
        *self.dir.write().unwrap_or_else(|p| p.into_inner()) = target;
        self.recovery_point.store(leo, Ordering::Release);
        drop(old_state); // its descriptors; readers holding slices keep theirs
        drop(st);
        let id = format!("{:032x}", (now as u128) << 64 | std::process::id() as u128 ^ (self as *const _ as u128));
        let doomed = old.with_file_name(format!("{}.{id}-delete", name.to_string_lossy()));
        fs::rename(&old, &doomed).ctx("rename for delete", &old)?;
        if let Some(parent) = doomed.parent() {
            let _ = fsync_dir(parent);
        }
        Ok(Some((doomed, self.config()?.file_delete_delay_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::records::{BatchWriter, EncodeOptions};
    use crate::batch::BatchIter;
    use crate::storage::config::LogConfig;
    use crate::storage::test_dir::TempDir;

    fn batch(n: usize) -> Vec<u8> {
        let mut w = BatchWriter::new(EncodeOptions::default());
        for i in 0..n {
            w.append::<&[u8], &[u8]>(1000 + i as i64, None, Some(format!("value-{i}").as_bytes()), &[]).unwrap();
        }
        w.finish().unwrap()
    }

    /// The base offset of every batch, read segment by segment (a read stops at a segment's end).
    fn offsets(log: &PartitionLog) -> Vec<i64> {
        let mut out = Vec::new();
        let mut from = log.log_start_offset();
        while from < log.log_end_offset() {
            let r = log.read(from, u64::MAX, None, true).unwrap();
            let Some(range) = r.range else { break };
            let mut buf = vec![0u8; range.length as usize];
            crate::storage::fileio::pread_exact(&range.file, &mut buf, range.position).unwrap();
            for b in BatchIter::new(&buf) {
                let h = b.unwrap().1;
                out.push(h.base_offset);
                from = h.last_offset() + 1;
            }
        }
        out
    }

    #[test]
    fn a_log_moved_while_appended_to_keeps_every_batch_and_takes_appends_in_its_new_dir() {
        let d = TempDir::new("plog-move");
        let (a, b) = (d.0.join("a"), d.0.join("b"));
        let cfg = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let log = PartitionLog::open(&a.join("t-0"), "t", 0, cfg, OpenOptions::default()).unwrap();
        for _ in 0..40 {
            log.append(&batch(5), 3, 0).unwrap();
        }
        let future = b.join("t-0.0123-future");
        let first = log.copy_pass(&future, u64::MAX).unwrap();
        assert!(first.copied > 4096 && first.copied_end_offset == 200, "{first:?}");
        for _ in 0..10 {
            log.append(&batch(5), 4, 0).unwrap(); // appends go on between passes
        }
        let second = log.copy_pass(&future, u64::MAX).unwrap();
        assert!(second.copied > 0 && second.copied < first.copied && second.generation == first.generation);
        log.append(&batch(5), 4, 0).unwrap(); // copied only by the swap
        let (doomed, _) = log.swap_in_future(&future, first.generation).unwrap().unwrap();
        assert_eq!(log.dir(), b.join("t-0"));
        assert!(!future.exists() && !a.join("t-0").exists() && doomed.starts_with(&a));
        assert_eq!(offsets(&log), (0..255).step_by(5).collect::<Vec<_>>());
        assert_eq!(log.leader_epoch_entries().unwrap(), vec![(3, 0), (4, 200)]);
        log.append(&batch(5), 4, 0).unwrap();
        assert_eq!(log.log_end_offset(), 260);
        log.close().unwrap();
        let reopened = PartitionLog::open(&b.join("t-0"), "t", 0, cfg, OpenOptions { clean_shutdown: true, ..Default::default() }).unwrap();
        assert_eq!(offsets(&reopened), (0..260).step_by(5).collect::<Vec<_>>());
    }

    #[test]
    fn a_pass_stops_at_its_byte_budget_and_the_next_goes_on_from_there() {
        let d = TempDir::new("plog-move-budget");
        let log = PartitionLog::open(&d.0.join("a").join("t-0"), "t", 0, LogConfig::default(), OpenOptions::default()).unwrap();
        for _ in 0..20 {
            log.append(&batch(5), 0, 0).unwrap();
        }
        let future = d.0.join("b").join("t-0.2-future");
        let size = fs::metadata(d.0.join("a").join("t-0").join(segment_file_name(0, LOG_SUFFIX))).unwrap().len();
        let first = log.copy_pass(&future, 100).unwrap();
        assert_eq!((first.copied, first.complete), (100, false));
        let rest = log.copy_pass(&future, u64::MAX).unwrap();
        assert_eq!((rest.copied, rest.complete), (size - 100, true));
        assert!(log.swap_in_future(&future, rest.generation).unwrap().is_some());
        assert_eq!(offsets(&log), (0..100).step_by(5).collect::<Vec<_>>());
    }

    #[test]
    fn a_swap_after_a_truncation_refuses_and_changes_nothing() {
        let d = TempDir::new("plog-move-truncated");
        let log = PartitionLog::open(&d.0.join("a").join("t-0"), "t", 0, LogConfig::default(), OpenOptions::default()).unwrap();
        for _ in 0..4 {
            log.append(&batch(2), 0, 0).unwrap();
        }
        let future = d.0.join("b").join("t-0.1-future");
        let pass = log.copy_pass(&future, u64::MAX).unwrap();
        log.truncate_to(4).unwrap();
        assert!(log.swap_in_future(&future, pass.generation).unwrap().is_none());
        assert_eq!(log.dir(), d.0.join("a").join("t-0"));
        assert_eq!(offsets(&log), vec![0, 2]);
    }
}
