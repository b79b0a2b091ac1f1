//! raft-rs `Storage` over the `__cluster_metadata-0` partition in Kafka's format.
//!
//! Mapping (the log stays byte-compatible with KRaft's):
//! - each Raft entry is one v2 record batch; term = the batch's partitionLeaderEpoch;
//! - a normal entry's data is an encoded batch of metadata records; it is stored with its base
//!   offset and leader epoch rewritten (both outside the CRC);
//! - a leader's first entry of its term is a LEADER_CHANGE control batch (the node fills it in;
//!   an entry left empty is stored as one with LeaderId -1), a conf change a KRAFT_VOTERS control
//!   batch listing the voters after it, the raft-rs conf change carried in a tagged field;
//! - Kafka offsets advance by each batch's record count, so raft index i and the batch's offsets
//!   differ: `entries` keeps (base offset, next offset, term, kind) per index, rebuilt on open by
//!   scanning the log from the latest snapshot (index = snapshot index + 1 at its end offset);
//! - HardState goes to `quorum-state` (Kafka's JSON), written atomically when term or vote
//!   change (commit is a lower bound there: a commit alone is not worth an fsync);
//! - snapshots are `<end offset:20>-<term:10>.checkpoint` files of batches: SNAPSHOT_HEADER
//!   (carrying raft index and end offset in a klog tag), KRAFT_VOTERS, the application's
//!   batches, SNAPSHOT_FOOTER; written via `.checkpoint.part`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError as RaftStorageError};

use super::control::{self, CarriedConfChange};
use crate::batch::header::{set_base_offset, set_partition_leader_epoch, BatchHeader, BatchIter};
use crate::storage::{LogConfig, OpenOptions, PartitionLog};

pub const METADATA_TOPIC: &str = "__cluster_metadata";
pub const QUORUM_STATE_FILE: &str = "quorum-state";
const CHECKPOINT_SUFFIX: &str = ".checkpoint";
/// Bytes read from the log per pread when scanning or serving entries.
const READ_CHUNK_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum MetadataLogError {
    #[error("metadata log {path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    #[error(transparent)]
    Codec(#[from] crate::error::CodecError),
    #[error("metadata log io on {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

pub type MetadataLogResult<T> = Result<T, MetadataLogError>;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> MetadataLogError + '_ {
    move |source| MetadataLogError::Io { path: path.display().to_string(), source }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Data,
    LeaderChange,
    ConfChange { v2: bool },
}

impl EntryKind {
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Data => "data",
            EntryKind::LeaderChange => "leader_change",
            EntryKind::ConfChange { .. } => "conf_change",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct EntryMeta {
    base_offset: i64,
    next_offset: i64,
    term: u64,
    kind: EntryKind,
}

#[derive(Debug, Clone, Default)]
struct SnapshotId {
    index: u64,
    term: u64,
    end_offset: i64,
    path: Option<PathBuf>,
    voters: Vec<u64>,
}

struct Inner {
    dir: PathBuf,
    log: PartitionLog,
    snapshot: SnapshotId,
    /// entries[k] is raft index snapshot.index + 1 + k.
    entries: Vec<EntryMeta>,
    /// (index, voters after it) for every conf change in `entries`, in order.
    voter_changes: Vec<(u64, Vec<u64>)>,
    hard_state: HardState,
    /// The segments' config (kept to reopen the log when a snapshot from the leader replaces it).
    config: LogConfig,
    /// Leader id written to `quorum-state` with the next HardState change.
    leader_hint: u64,
}

/// raft-rs storage over a metadata log directory. Cheap to clone (shared state).
#[derive(Clone)]
pub struct MetadataLog {
    inner: Arc<RwLock<Inner>>,
}

fn checkpoint_name(end_offset: i64, term: u64) -> String {
    format!("{end_offset:020}-{term:010}{CHECKPOINT_SUFFIX}")
}

fn parse_checkpoint_name(name: &str) -> Option<(i64, u64)> {
    let stem = name.strip_suffix(CHECKPOINT_SUFFIX)?;
    let (o, e) = stem.split_once('-')?;
    if o.len() != 20 || e.len() != 10 {
        return None;
    }
    Some((o.parse().ok()?, e.parse().ok()?))
}

fn fsync_dir(dir: &Path) -> MetadataLogResult<()> {
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

/// Write `data` to `path` atomically: temp file, fsync, rename, fsync the directory.
fn write_atomically(path: &Path, tmp_suffix: &str, data: &[u8]) -> MetadataLogResult<()> {
    let tmp = PathBuf::from(format!("{}{tmp_suffix}", path.display()));
    let mut f = fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(data).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))?;
    fsync_dir(path.parent().unwrap_or(Path::new(".")))
}

fn to_epoch(term: u64, path: &Path) -> MetadataLogResult<i32> {
    i32::try_from(term).map_err(|_| MetadataLogError::Invalid {
        path: path.display().to_string(),
        reason: format!("term {term} does not fit a Kafka leader epoch (int32)"),
    })
}

fn ids_i32(ids: &[u64]) -> Vec<i32> {
    ids.iter().map(|&i| i as i32).collect()
}

/// Voters after applying a simple conf change (add/remove voter) to `voters`.
fn apply_change(voters: &[u64], changes: &[ConfChangeSingle]) -> Vec<u64> {
    let mut v = voters.to_vec();
    for c in changes {
        match c.get_change_type() {
            ConfChangeType::AddNode => {
                if !v.contains(&c.node_id) {
                    v.push(c.node_id);
                }
            }
            ConfChangeType::RemoveNode | ConfChangeType::AddLearnerNode => v.retain(|&n| n != c.node_id),
        }
    }
    v.sort_unstable();
    v
}

fn conf_change_singles(carried: &CarriedConfChange) -> Result<Vec<ConfChangeSingle>, protobuf::ProtobufError> {
    if carried.v2 {
        Ok(ConfChangeV2::parse_from_bytes(&carried.data)?.changes.into_vec())
    } else {
        let cc = ConfChange::parse_from_bytes(&carried.data)?;
        let mut s = ConfChangeSingle::default();
        s.set_change_type(cc.get_change_type());
        s.node_id = cc.node_id;
        Ok(vec![s])
    }
}

impl Inner {
    fn first_index(&self) -> u64 {
        self.snapshot.index + 1
    }
    fn last_index(&self) -> u64 {
        self.snapshot.index + self.entries.len() as u64
    }
    fn meta(&self, index: u64) -> Option<&EntryMeta> {
        index.checked_sub(self.first_index()).and_then(|k| self.entries.get(k as usize))
    }
    fn name(&self) -> String {
        self.dir.display().to_string()
    }
    fn invalid(&self, reason: String) -> MetadataLogError {
        MetadataLogError::Invalid { path: self.name(), reason }
    }

    /// Voters in effect after `index` (the last conf change at or before it).
    fn voters_at(&self, index: u64) -> Vec<u64> {
        self.voter_changes
            .iter()
            .rev()
            .find(|(i, _)| *i <= index)
            .map_or_else(|| self.snapshot.voters.clone(), |(_, v)| v.clone())
    }

    /// Bytes of the log from `from` to `to` (offsets), read through the segments.
    fn read_offsets(&self, from: i64, to: i64) -> MetadataLogResult<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let info = self.log.read(at, READ_CHUNK_BYTES, Some(to), true)?;
            let Some(r) = info.range else { break };
            let start = out.len();
            out.resize(start + r.length as usize, 0);
            r.file.read_exact_at(&mut out[start..], r.position).map_err(io_err(&r.path))?;
            let mut last_next = at;
            for item in BatchIter::new(&out[start..]) {
                let (_, h) = item?;
                last_next = h.next_offset();
            }
            if last_next <= at {
                break;
            }
            at = last_next;
        }
        Ok(out)
    }

    /// Entry meta and raft entry of one stored batch.
    fn decode_batch(&self, batch: &[u8], h: &BatchHeader) -> MetadataLogResult<(EntryKind, Entry, Option<Vec<u64>>)> {
        let mut e = Entry::default();
        e.term = h.partition_leader_epoch.max(0) as u64;
        if !h.is_control() {
            e.data = batch.to_vec().into();
            return Ok((EntryKind::Data, e, None));
        }
        let (t, value) = control::control_record(batch)?;
        match t {
            control::CONTROL_LEADER_CHANGE => {
                e.data = batch.to_vec().into();
                Ok((EntryKind::LeaderChange, e, None))
            }
            control::CONTROL_KRAFT_VOTERS => {
                let (voters, carried) = control::parse_voters_value(&value)?;
                let carried = carried.ok_or_else(|| {
                    self.invalid(format!("KRAFT_VOTERS batch at offset {} carries no raft conf change", h.base_offset))
                })?;
                e.set_entry_type(if carried.v2 { EntryType::EntryConfChangeV2 } else { EntryType::EntryConfChange });
                let kind = EntryKind::ConfChange { v2: carried.v2 };
                e.data = carried.data.into();
                Ok((kind, e, Some(voters.iter().map(|&v| v as u64).collect())))
            }
            other => Err(self.invalid(format!("unexpected control record type {other} at offset {}", h.base_offset))),
        }
    }

    /// Encode `e` as the batch stored at `offset`.
    fn encode_entry(&self, e: &Entry, offset: i64, voters_before: &[u64]) -> MetadataLogResult<(Vec<u8>, EntryMeta, Option<Vec<u64>>)> {
        let epoch = to_epoch(e.term, &self.dir)?;
        let (mut batch, kind, voters) = match e.get_entry_type() {
            EntryType::EntryNormal if e.data.is_empty() => {
                let v = control::leader_change_value(-1, &ids_i32(voters_before), &[]);
                (control::control_batch(control::CONTROL_LEADER_CHANGE, &v, 0, epoch, 0)?, EntryKind::LeaderChange, None)
            }
            EntryType::EntryNormal => {
                let h = control::single_batch_header(&e.data)?;
                let kind = if h.is_control() { EntryKind::LeaderChange } else { EntryKind::Data };
                (e.data.to_vec(), kind, None)
            }
            t => {
                let carried = CarriedConfChange { v2: t == EntryType::EntryConfChangeV2, data: e.data.to_vec() };
                let singles = conf_change_singles(&carried)
                    .map_err(|err| self.invalid(format!("conf change entry {} does not parse: {err}", e.index)))?;
                let after = apply_change(voters_before, &singles);
                let v = control::voters_value(&ids_i32(&after), Some(&carried));
                let b = control::control_batch(control::CONTROL_KRAFT_VOTERS, &v, 0, epoch, 0)?;
                (b, EntryKind::ConfChange { v2: carried.v2 }, Some(after))
            }
        };
        set_base_offset(&mut batch, offset);
        set_partition_leader_epoch(&mut batch, epoch);
        let h = BatchHeader::parse(&batch, 0)?;
        let meta = EntryMeta { base_offset: offset, next_offset: h.next_offset(), term: e.term, kind };
        Ok((batch, meta, voters))
    }

    fn write_quorum_state(&self) -> MetadataLogResult<()> {
        let hs = &self.hard_state;
        let voters = self.voters_at(self.last_index());
        let json = serde_json::json!({
            "clusterId": "",
            "leaderId": if self.leader_hint == 0 { -1 } else { self.leader_hint as i64 },
            "leaderEpoch": hs.term,
            "votedId": if hs.vote == 0 { -1 } else { hs.vote as i64 },
            "appliedOffset": 0,
            "currentVoters": voters.iter().map(|v| serde_json::json!({"voterId": v})).collect::<Vec<_>>(),
            "klogCommitIndex": hs.commit,
            "data_version": 0,
        });
        write_atomically(&self.dir.join(QUORUM_STATE_FILE), ".tmp", json.to_string().as_bytes())
    }
}

fn read_quorum_state(path: &Path) -> MetadataLogResult<Option<HardState>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let bad = |reason: String| MetadataLogError::Invalid { path: path.display().to_string(), reason };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let int = |k: &str| v.get(k).and_then(|x| x.as_i64()).ok_or_else(|| bad(format!("field {k} missing or not an integer")));
    let mut hs = HardState::default();
    hs.term = int("leaderEpoch")?.max(0) as u64;
    hs.vote = int("votedId")?.max(0) as u64;
    hs.commit = v.get("klogCommitIndex").and_then(|x| x.as_u64()).unwrap_or(0);
    Ok(Some(hs))
}

/// Read a checkpoint file: (raft index, end offset, voters, application batches).
pub fn read_checkpoint(bytes: &[u8], path: &Path) -> MetadataLogResult<(u64, i64, Vec<u64>, Vec<u8>)> {
    let bad = |reason: String| MetadataLogError::Invalid { path: path.display().to_string(), reason };
    let mut position = None;
    let mut voters = Vec::new();
    let mut data = Vec::new();
    let mut footer = false;
    for item in BatchIter::new(bytes) {
        let (at, h) = item?;
        let batch = &bytes[at..at + h.size()];
        crate::batch::header::validate_batch(batch, at)?;
        if !h.is_control() {
            data.extend_from_slice(batch);
            continue;
        }
        let (t, value) = control::control_record(batch)?;
        match t {
            control::CONTROL_SNAPSHOT_HEADER => position = Some(control::parse_snapshot_header_value(&value)?),
            control::CONTROL_KRAFT_VOTERS => voters = control::parse_voters_value(&value)?.0.iter().map(|&v| v as u64).collect(),
            control::CONTROL_SNAPSHOT_FOOTER => footer = true,
            _ => {}
        }
    }
    let (index, end) = position.ok_or_else(|| bad("no SNAPSHOT_HEADER with klog's position".into()))?;
    if !footer {
        return Err(bad("no SNAPSHOT_FOOTER: incomplete snapshot".into()));
    }
    Ok((index, end, voters, data))
}

/// Build a checkpoint file: header, voters, `data`'s batches (renumbered), footer.
pub fn build_checkpoint(index: u64, term: u64, end_offset: i64, voters: &[u64], data: &[u8], path: &Path) -> MetadataLogResult<Vec<u8>> {
    let epoch = to_epoch(term, path)?;
    let now = crate::storage::partition_log::now_ms();
    let mut out = control::control_batch(
        control::CONTROL_SNAPSHOT_HEADER,
        &control::snapshot_header_value(now, index, end_offset),
        0,
        epoch,
        now,
    )?;
    let mut next = 1i64;
    let v = control::voters_value(&ids_i32(voters), None);
    out.extend(control::control_batch(control::CONTROL_KRAFT_VOTERS, &v, next, epoch, now)?);
    next += 1;
    for item in BatchIter::new(data) {
        let (at, h) = item?;
        let mut b = data[at..at + h.size()].to_vec();
        crate::batch::header::validate_batch(&b, at)?;
        set_base_offset(&mut b, next);
        set_partition_leader_epoch(&mut b, epoch);
        next = h.next_offset() - h.base_offset + next;
        out.extend(b);
    }
    out.extend(control::control_batch(control::CONTROL_SNAPSHOT_FOOTER, &control::snapshot_footer_value(), next, epoch, now)?);
    Ok(out)
}

impl MetadataLog {
    /// Open (or create) the metadata log in `dir` (the `__cluster_metadata-0` directory).
    /// `bootstrap_voters` is the voter set before any conf change in the log or snapshot.
    pub fn open(dir: &Path, bootstrap_voters: &[u64]) -> MetadataLogResult<MetadataLog> {
        Self::open_with(dir, bootstrap_voters, LogConfig::default())
    }

    /// `open` with the segments' config (Kafka's `metadata.log.segment.bytes` / `.ms`).
    pub fn open_with(dir: &Path, bootstrap_voters: &[u64], config: LogConfig) -> MetadataLogResult<MetadataLog> {
        config.validate()?;
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut snapshot = SnapshotId { voters: bootstrap_voters.to_vec(), ..SnapshotId::default() };
        snapshot.voters.sort_unstable();
        let mut latest: Option<(i64, u64, PathBuf)> = None;
        for de in fs::read_dir(dir).map_err(io_err(dir))? {
            let de = de.map_err(io_err(dir))?;
            let name = de.file_name().to_string_lossy().into_owned();
            if name.ends_with(".checkpoint.part") {
                let _ = fs::remove_file(de.path()); // an interrupted snapshot write
            } else if let Some((o, t)) = parse_checkpoint_name(&name) {
                if latest.as_ref().is_none_or(|(lo, lt, _)| (o, t) > (*lo, *lt)) {
                    latest = Some((o, t, de.path()));
                }
            }
        }
        if let Some((end, term, path)) = latest {
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            let (index, end_in_file, voters, _) = read_checkpoint(&bytes, &path)?;
            if end_in_file != end {
                return Err(MetadataLogError::Invalid {
                    path: path.display().to_string(),
                    reason: format!("header says end offset {end_in_file}, the file name {end}"),
                });
            }
            snapshot = SnapshotId { index, term, end_offset: end, path: Some(path), voters };
        }
        let opts = OpenOptions { log_start_offset: Some(snapshot.end_offset), ..OpenOptions::default() };
        let log = PartitionLog::open(dir, METADATA_TOPIC, 0, config.clone(), opts)?;
        let hard_state = read_quorum_state(&dir.join(QUORUM_STATE_FILE))?.unwrap_or_default();
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            log,
            snapshot,
            entries: Vec::new(),
            voter_changes: Vec::new(),
            hard_state,
            config,
            leader_hint: 0,
        };
        // Rebuild index <-> offset from the batches after the snapshot.
        let start = inner.log.log_start_offset().max(inner.snapshot.end_offset);
        if start != inner.snapshot.end_offset {
            return Err(inner.invalid(format!(
                "log starts at offset {start} but the latest snapshot ends at {}",
                inner.snapshot.end_offset
            )));
        }
        let bytes = inner.read_offsets(start, inner.log.log_end_offset())?;
        let mut metas = Vec::new();
        let mut changes = Vec::new();
        for item in BatchIter::new(&bytes) {
            let (at, h) = item?;
            let (kind, e, voters) = inner.decode_batch(&bytes[at..at + h.size()], &h)?;
            let index = inner.snapshot.index + 1 + metas.len() as u64;
            if let Some(v) = voters {
                changes.push((index, v));
            }
            metas.push(EntryMeta { base_offset: h.base_offset, next_offset: h.next_offset(), term: e.term, kind });
        }
        inner.entries = metas;
        inner.voter_changes = changes;
        let commit_floor = inner.snapshot.index;
        let last = inner.last_index();
        inner.hard_state.commit = inner.hard_state.commit.clamp(commit_floor, last);
        Ok(MetadataLog { inner: Arc::new(RwLock::new(inner)) })
    }

    fn rl(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }
    fn wl(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn dir(&self) -> PathBuf {
        self.rl().dir.clone()
    }

    /// Append entries (from a Ready), truncating a conflicting suffix first, then fsync.
    pub fn append(&self, entries: &[Entry]) -> MetadataLogResult<()> {
        let Some(first) = entries.first() else { return Ok(()) };
        let mut inner = self.wl();
        let (lo, hi) = (inner.first_index(), inner.last_index());
        if first.index > hi + 1 {
            return Err(inner.invalid(format!("entry {} leaves a gap after the last index {hi}", first.index)));
        }
        // Entries already covered by the snapshot are skipped.
        let skip = lo.saturating_sub(first.index) as usize;
        let entries = &entries[skip.min(entries.len())..];
        let Some(first) = entries.first() else { return Ok(()) };
        if first.index <= hi {
            let cut = inner.meta(first.index).map(|m| m.base_offset).expect("index within the log");
            inner.log.truncate_to(cut)?;
            let keep = (first.index - lo) as usize;
            inner.entries.truncate(keep);
            inner.voter_changes.retain(|(i, _)| *i < first.index);
        }
        let mut offset = inner.log.log_end_offset();
        let mut buf = Vec::new();
        let mut metas = Vec::with_capacity(entries.len());
        let mut changes = Vec::new();
        for e in entries {
            let before = changes.last().map_or_else(|| inner.voters_at(e.index - 1), |(_, v): &(u64, Vec<u64>)| v.clone());
            let (batch, meta, voters) = inner.encode_entry(e, offset, &before)?;
            offset = meta.next_offset;
            buf.extend_from_slice(&batch);
            metas.push(meta);
            if let Some(v) = voters {
                changes.push((e.index, v));
            }
        }
        inner.log.append_as_follower(&buf)?;
        inner.log.flush()?;
        inner.entries.extend(metas);
        inner.voter_changes.extend(changes);
        Ok(())
    }

    /// Record a new HardState; `quorum-state` is rewritten (atomically, fsynced) when term, vote
    /// or the known leader changed (as Kafka's FileQuorumStateStore on every election state change).
    pub fn set_hard_state(&self, hs: &HardState, leader_hint: u64) -> MetadataLogResult<()> {
        let mut inner = self.wl();
        let durable_change =
            inner.hard_state.term != hs.term || inner.hard_state.vote != hs.vote || inner.leader_hint != leader_hint;
        inner.hard_state = hs.clone();
        inner.leader_hint = leader_hint;
        if durable_change {
            inner.write_quorum_state()?;
        }
        Ok(())
    }

    /// Rewrite `quorum-state` if the known leader changed since it was last written (a follower
    /// learns the leader after the vote that changed its HardState).
    pub fn note_leader(&self, leader: u64) -> MetadataLogResult<()> {
        let mut inner = self.wl();
        if inner.leader_hint == leader {
            return Ok(());
        }
        inner.leader_hint = leader;
        inner.write_quorum_state()
    }

    pub fn set_commit(&self, commit: u64) {
        let mut inner = self.wl();
        inner.hard_state.commit = inner.hard_state.commit.max(commit);
    }

    /// Kafka offsets [base, next) of the batch of entry `index`.
    pub fn offsets_of(&self, index: u64) -> Option<(i64, i64)> {
        self.rl().meta(index).map(|m| (m.base_offset, m.next_offset))
    }

    /// The Kafka end offset of the log through raft `index` (the next offset after that entry): the
    /// snapshot's end offset at its index, None below it (compacted) or past the last entry.
    pub fn end_offset_through(&self, index: u64) -> Option<i64> {
        let inner = self.rl();
        if index == inner.snapshot.index {
            return Some(inner.snapshot.end_offset);
        }
        inner.meta(index).map(|m| m.next_offset)
    }

    pub fn kind_of(&self, index: u64) -> Option<EntryKind> {
        self.rl().meta(index).map(|m| m.kind)
    }

    pub fn log_end_offset(&self) -> i64 {
        self.rl().log.log_end_offset()
    }

    pub fn snapshot_index(&self) -> u64 {
        self.rl().snapshot.index
    }

    /// Voters after the last entry of the log.
    pub fn voters(&self) -> Vec<u64> {
        let inner = self.rl();
        inner.voters_at(inner.last_index())
    }

    /// Write a snapshot of the state after entry `index` (<= commit) holding `data` (v2 batches),
    /// then drop the log before it (the log start moves to the snapshot's end offset).
    pub fn create_snapshot(&self, index: u64, data: &[u8]) -> MetadataLogResult<PathBuf> {
        let mut inner = self.wl();
        if index <= inner.snapshot.index {
            return Err(inner.invalid(format!("snapshot at index {index} is not after the current one at {}", inner.snapshot.index)));
        }
        if index > inner.hard_state.commit {
            return Err(inner.invalid(format!("snapshot at index {index} is past the commit index {}", inner.hard_state.commit)));
        }
        let meta = *inner.meta(index).ok_or_else(|| inner.invalid(format!("no entry {index} to snapshot")))?;
        let path = inner.dir.join(checkpoint_name(meta.next_offset, meta.term));
        let voters = inner.voters_at(index);
        let bytes = build_checkpoint(index, meta.term, meta.next_offset, &voters, data, &path)?;
        write_atomically(&path, ".part", &bytes)?;
        inner.log.set_high_watermark(meta.next_offset);
        inner.log.delete_records_before(meta.next_offset)?;
        let drop = (index - inner.snapshot.index) as usize;
        inner.entries.drain(..drop);
        inner.voter_changes.retain(|(i, _)| *i > index);
        let old = inner.snapshot.path.take();
        inner.snapshot = SnapshotId { index, term: meta.term, end_offset: meta.next_offset, path: Some(path.clone()), voters };
        if let Some(old) = old {
            let _ = fs::remove_file(old);
        }
        Ok(path)
    }

    /// Install a snapshot received from the leader: write its file, discard the whole log, and
    /// restart the log at the snapshot's end offset. Returns the application's batches.
    pub fn apply_snapshot(&self, snap: &Snapshot) -> MetadataLogResult<Vec<u8>> {
        let mut inner = self.wl();
        let md = snap.get_metadata();
        let tmp_name = inner.dir.join("received.checkpoint");
        let (index, end, voters, data) = read_checkpoint(&snap.data, &tmp_name)?;
        if index != md.index {
            return Err(inner.invalid(format!("snapshot data is at index {index}, its metadata at {}", md.index)));
        }
        if index <= inner.snapshot.index {
            return Ok(data);
        }
        let path = inner.dir.join(checkpoint_name(end, md.term));
        write_atomically(&path, ".part", &snap.data)?;
        // Discard the log: cut to its start, then move the start to `end` (reopening when the
        // log end is below it, as the native log cannot start an empty log further on).
        let start = inner.log.log_start_offset();
        inner.log.truncate_to(start)?;
        if end != start {
            inner.log.close()?;
            let opts = OpenOptions { log_start_offset: Some(end), clean_shutdown: true, ..OpenOptions::default() };
            let dir = inner.dir.clone();
            inner.log = PartitionLog::open(&dir, METADATA_TOPIC, 0, inner.config.clone(), opts)?;
        }
        inner.entries.clear();
        inner.voter_changes.clear();
        let old = inner.snapshot.path.take();
        inner.snapshot = SnapshotId { index, term: md.term, end_offset: end, path: Some(path), voters };
        if let Some(old) = old {
            let _ = fs::remove_file(old);
        }
        inner.hard_state.commit = inner.hard_state.commit.max(index);
        Ok(data)
    }

    /// The data of the latest snapshot's file (application batches only).
    pub fn snapshot_data(&self) -> MetadataLogResult<Option<(u64, Vec<u8>)>> {
        let inner = self.rl();
        let Some(path) = inner.snapshot.path.clone() else { return Ok(None) };
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        let (index, _, _, data) = read_checkpoint(&bytes, &path)?;
        Ok(Some((index, data)))
    }

    pub fn close(&self) -> MetadataLogResult<()> {
        Ok(self.rl().log.close()?)
    }
}

fn raft_err(e: MetadataLogError) -> raft::Error {
    raft::Error::Store(RaftStorageError::Other(Box::new(e)))
}

impl raft::Storage for MetadataLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let inner = self.rl();
        let mut cs = ConfState::default();
        // Conf changes take effect when applied: start from the voters as of the commit index.
        cs.voters = inner.voters_at(inner.hard_state.commit.min(inner.last_index()));
        Ok(RaftState { hard_state: inner.hard_state.clone(), conf_state: cs })
    }

    fn entries(&self, low: u64, high: u64, max_size: impl Into<Option<u64>>, _ctx: GetEntriesContext) -> raft::Result<Vec<Entry>> {
        let inner = self.rl();
        if low < inner.first_index() {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        if high > inner.last_index() + 1 {
            return Err(raft::Error::Store(RaftStorageError::Unavailable));
        }
        if low >= high {
            return Ok(Vec::new());
        }
        let max = max_size.into().unwrap_or(u64::MAX);
        let first = inner.meta(low).expect("checked range");
        let end = inner.meta(high - 1).expect("checked range").next_offset;
        let bytes = inner.read_offsets(first.base_offset, end).map_err(raft_err)?;
        let mut out = Vec::with_capacity((high - low) as usize);
        let mut total = 0u64;
        for item in BatchIter::new(&bytes) {
            let (at, h) = item.map_err(|e| raft_err(e.into()))?;
            let index = low + out.len() as u64;
            if index >= high {
                break;
            }
            let (_, mut e, _) = inner.decode_batch(&bytes[at..at + h.size()], &h).map_err(raft_err)?;
            e.index = index;
            total += h.size() as u64;
            if !out.is_empty() && total > max {
                break;
            }
            out.push(e);
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let inner = self.rl();
        if idx == inner.snapshot.index {
            return Ok(inner.snapshot.term);
        }
        if idx < inner.first_index() {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        inner.meta(idx).map(|m| m.term).ok_or(raft::Error::Store(RaftStorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.rl().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.rl().last_index())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let inner = self.rl();
        let Some(path) = inner.snapshot.path.clone() else {
            return Err(raft::Error::Store(RaftStorageError::SnapshotTemporarilyUnavailable));
        };
        if inner.snapshot.index < request_index {
            return Err(raft::Error::Store(RaftStorageError::SnapshotTemporarilyUnavailable));
        }
        let mut s = Snapshot::default();
        s.data = fs::read(&path).map_err(|e| raft_err(io_err(&path)(e)))?.into();
        let md = s.mut_metadata();
        md.index = inner.snapshot.index;
        md.term = inner.snapshot.term;
        md.mut_conf_state().voters = inner.snapshot.voters.clone();
        Ok(s)
    }
}
