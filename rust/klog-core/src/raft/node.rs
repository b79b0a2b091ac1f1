//! A controller-quorum member: raft-rs's `RawNode` over the metadata log, with the ready cycle
//! (persist, then release messages, then advance) done in one native call so the caller can run
//! it off its event loop. Sans-IO: no threads, sockets or clocks; the caller ticks it.

use std::path::Path;

use protobuf::Message as _;
use raft::eraftpb::{ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, MessageType};
use raft::{RawNode, StateRole};

use super::control;
use super::storage::{EntryKind, MetadataLog, MetadataLogError};
use crate::batch::header::validate_batch;
use crate::storage::partition_log::now_ms;

/// Bounds of one quorum member; every one is a named, configurable limit.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub id: u64,
    /// Voters of a new quorum (before any conf change in the log).
    pub bootstrap_voters: Vec<u64>,
    /// Ticks without a leader before a follower campaigns (randomized up to twice that).
    pub election_tick: usize,
    /// A follower's randomized timeout without a leader is in [min_election_tick,
    /// max_election_tick) ticks; 0 = raft's default (election_tick, 2 * election_tick).
    pub min_election_tick: usize,
    pub max_election_tick: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_tick: usize,
    /// Most bytes of entries in one append message.
    pub max_size_per_msg: u64,
    /// Most append messages in flight to one follower.
    pub max_inflight_msgs: usize,
    /// Most bytes of proposed, uncommitted entries a leader holds; further proposals are refused.
    pub max_uncommitted_size: u64,
    /// Most bytes of one proposed entry (one record batch).
    pub max_entry_bytes: usize,
    /// Most bytes of committed entries handed out by one ready cycle.
    pub max_committed_size_per_ready: u64,
    /// Bytes of one metadata log segment before a new one is rolled (`metadata.log.segment.bytes`).
    pub segment_bytes: i64,
    /// Age of a segment before a new one is rolled (`metadata.log.segment.ms`).
    pub segment_ms: i64,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            id: 1,
            bootstrap_voters: vec![1],
            election_tick: 10,
            min_election_tick: 0,
            max_election_tick: 0,
            heartbeat_tick: 2,
            max_size_per_msg: 1024 * 1024,
            max_inflight_msgs: 256,
            max_uncommitted_size: 64 * 1024 * 1024,
            max_entry_bytes: 8 * 1024 * 1024,
            max_committed_size_per_ready: 16 * 1024 * 1024,
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 3600 * 1000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error(transparent)]
    Log(#[from] MetadataLogError),
    #[error("{0}")]
    Invalid(String),
    #[error("proposal refused: node {node} is not the leader (leader: {leader})")]
    NotLeader { node: u64, leader: u64 },
}

pub type NodeResult<T> = Result<T, NodeError>;

/// A committed entry as the application sees it: data is the batch as stored in the log.
#[derive(Debug, Clone)]
pub struct CommittedEntry {
    pub index: u64,
    pub term: u64,
    pub kind: EntryKind,
    pub data: Vec<u8>,
    /// Kafka offsets [base, next) of the entry's batch in `__cluster_metadata-0`.
    pub base_offset: i64,
    pub next_offset: i64,
}

#[derive(Debug, Clone, Default)]
pub struct ReadyOutput {
    /// (to node, encoded raft message), safe to send: their entries are persisted.
    pub messages: Vec<(u64, Vec<u8>)>,
    pub committed: Vec<CommittedEntry>,
    /// A snapshot installed from the leader: (index, term, application batches).
    pub snapshot: Option<(u64, u64, Vec<u8>)>,
}

pub struct RaftNode {
    raw: RawNode<MetadataLog>,
    log: MetadataLog,
    max_entry_bytes: usize,
    /// The last term whose leader-change entry this node (as leader) filled in.
    stamped_term: u64,
    /// A Ready taken by `begin_ready` whose persistence `process_ready` has yet to do.
    pending: Option<raft::Ready>,
    /// (term, leader, commit index) of the last append this node stepped from the leader of that term.
    leader_commit: Option<(u64, u64, u64)>,
}

fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl RaftNode {
    pub fn open(dir: &Path, cfg: &NodeConfig) -> NodeResult<RaftNode> {
        if cfg.id == 0 {
            return Err(NodeError::Invalid("node id 0 is reserved by raft; use ids >= 1".into()));
        }
        if cfg.bootstrap_voters.is_empty() {
            return Err(NodeError::Invalid("the quorum needs at least one voter".into()));
        }
        let seg = crate::storage::LogConfig {
            segment_bytes: cfg.segment_bytes,
            segment_ms: cfg.segment_ms,
            ..crate::storage::LogConfig::default()
        };
        let log = MetadataLog::open_with(dir, &cfg.bootstrap_voters, seg)?;
        let rc = raft::Config {
            id: cfg.id,
            election_tick: cfg.election_tick,
            min_election_tick: cfg.min_election_tick,
            max_election_tick: cfg.max_election_tick,
            heartbeat_tick: cfg.heartbeat_tick,
            max_size_per_msg: cfg.max_size_per_msg,
            max_inflight_msgs: cfg.max_inflight_msgs,
            max_uncommitted_size: cfg.max_uncommitted_size,
            max_committed_size_per_ready: cfg.max_committed_size_per_ready,
            applied: log.snapshot_index(),
            pre_vote: true,
            check_quorum: true,
            ..raft::Config::default()
        };
        rc.validate()?;
        let raw = RawNode::new(&rc, log.clone(), &discard_logger())?;
        Ok(RaftNode { raw, log, max_entry_bytes: cfg.max_entry_bytes, stamped_term: 0, pending: None, leader_commit: None })
    }

    pub fn id(&self) -> u64 {
        self.raw.raft.id
    }
    pub fn leader_id(&self) -> u64 {
        self.raw.raft.leader_id
    }
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }
    pub fn role(&self) -> &'static str {
        match self.raw.raft.state {
            StateRole::Follower => "follower",
            StateRole::Candidate => "candidate",
            StateRole::PreCandidate => "precandidate",
            StateRole::Leader => "leader",
        }
    }
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }
    pub fn voters(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        v.sort_unstable();
        v
    }
    /// The leader's view of every replica it tracks: (node id, is voter, matched raft index), sorted by
    /// id; empty on a non-leader (only the leader has progress). DescribeQuorum's LogEndOffset per replica.
    pub fn replica_progress(&self) -> Vec<(u64, bool, u64)> {
        if self.raw.raft.state != StateRole::Leader {
            return Vec::new();
        }
        let prs = self.raw.raft.prs();
        let voters = prs.conf().voters();
        let mut out: Vec<(u64, bool, u64)> =
            prs.iter().map(|(id, pr)| (*id, voters.contains(*id), pr.matched)).collect();
        out.sort_unstable_by_key(|r| r.0);
        out
    }
    pub fn log(&self) -> &MetadataLog {
        &self.log
    }

    /// A new leader's empty entry becomes Kafka's LEADER_CHANGE control batch, filled in before
    /// it is persisted or sent so every replica stores the same bytes.
    fn stamp_leader_change(&mut self) -> NodeResult<()> {
        let r = &mut self.raw.raft;
        if r.state != StateRole::Leader || self.stamped_term == r.term {
            return Ok(());
        }
        self.stamped_term = r.term;
        let term = r.term;
        let epoch = i32::try_from(term).map_err(|_| NodeError::Invalid(format!("term {term} exceeds int32")))?;
        let mut voters: Vec<i32> = r.prs().conf().voters().ids().iter().map(|v| v as i32).collect();
        voters.sort_unstable();
        let value = control::leader_change_value(r.id as i32, &voters, &[r.id as i32]);
        let batch = control::control_batch(control::CONTROL_LEADER_CHANGE, &value, 0, epoch, now_ms())
            .map_err(MetadataLogError::from)?;
        let Some(e) = r
            .raft_log
            .unstable
            .entries
            .iter_mut()
            .find(|e| e.term == term && e.get_entry_type() == EntryType::EntryNormal && e.data.is_empty())
        else {
            return Ok(());
        };
        let index = e.index;
        e.data = batch.clone().into();
        r.raft_log.unstable.entries_size += batch.len();
        for m in r.msgs.iter_mut() {
            for e in m.entries.iter_mut() {
                if e.index == index && e.term == term && e.data.is_empty() {
                    e.data = batch.clone().into();
                }
            }
        }
        Ok(())
    }

    pub fn tick(&mut self) -> NodeResult<bool> {
        let r = self.raw.tick();
        self.stamp_leader_change()?;
        Ok(r)
    }

    pub fn campaign(&mut self) -> NodeResult<()> {
        self.raw.campaign()?;
        self.stamp_leader_change()
    }

    /// Step a message received from a peer.
    pub fn step(&mut self, bytes: &[u8]) -> NodeResult<()> {
        let m = Message::parse_from_bytes(bytes).map_err(|e| NodeError::Invalid(format!("raft message does not parse: {e}")))?;
        if raft::raw_node::is_local_msg(m.get_msg_type()) {
            return Err(NodeError::Invalid(format!("local raft message type {:?} received from a peer", m.get_msg_type())));
        }
        if m.from == 0 || m.from == self.id() {
            return Err(NodeError::Invalid(format!("raft message from invalid node {}", m.from)));
        }
        let (kind, from, term, commit) = (m.get_msg_type(), m.from, m.term, m.commit);
        self.raw.step(m)?;
        self.note_leader_commit(kind, from, term, commit);
        self.stamp_leader_change()
    }

    /// After a step: an append from the leader of this node's current term (its view after the step) tells the
    /// leader's commit index, Kafka's high watermark, which a Kafka follower reads in every fetch response. Only an
    /// append carries it: a heartbeat carries `min(what the leader knows this node holds, its commit index)`, short
    /// of it whenever this node lacks entries. A late append of the same leader does not move it back.
    fn note_leader_commit(&mut self, kind: MessageType, from: u64, term: u64, commit: u64) {
        if kind != MessageType::MsgAppend || from != self.leader_id() || term != self.term() {
            return;
        }
        let commit = match self.leader_commit {
            Some((t, l, known)) if (t, l) == (term, from) => commit.max(known),
            _ => commit,
        };
        self.leader_commit = Some((term, from, commit));
    }

    /// The commit index the current leader (of the current term) sent this node in its appends; None before its
    /// first append, on a leader or without a leader. A follower's view of the quorum's high watermark.
    pub fn leader_commit(&self) -> Option<u64> {
        match self.leader_commit {
            Some((t, l, commit)) if t == self.term() && l == self.leader_id() && l != self.id() => Some(commit),
            _ => None,
        }
    }

    fn not_leader(&self) -> NodeError {
        NodeError::NotLeader { node: self.id(), leader: self.leader_id() }
    }

    /// Propose one record batch of metadata records; returns the raft index it will have.
    pub fn propose(&mut self, batch: Vec<u8>) -> NodeResult<u64> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(self.not_leader());
        }
        if batch.len() > self.max_entry_bytes {
            return Err(NodeError::Invalid(format!(
                "proposed batch of {} bytes exceeds max_entry_bytes {}",
                batch.len(),
                self.max_entry_bytes
            )));
        }
        let h = control::single_batch_header(&batch).map_err(MetadataLogError::from)?;
        validate_batch(&batch, 0).map_err(MetadataLogError::from)?;
        if h.is_control() || h.records_count < 1 {
            return Err(NodeError::Invalid("a proposal must be a non-empty data batch (not a control batch)".into()));
        }
        let before = self.last_index();
        match self.raw.propose(Vec::new(), batch) {
            Ok(()) => {}
            Err(raft::Error::ProposalDropped) if self.raw.raft.state != StateRole::Leader => return Err(self.not_leader()),
            Err(raft::Error::ProposalDropped) => {
                return Err(NodeError::Invalid(
                    "proposal dropped: max_uncommitted_size reached or a leader transfer is in progress".into(),
                ))
            }
            Err(e) => return Err(e.into()),
        }
        let index = self.last_index();
        debug_assert_eq!(index, before + 1);
        Ok(index)
    }

    /// Propose adding (or removing) a voter; returns the raft index of the conf change.
    pub fn propose_voter_change(&mut self, node: u64, add: bool) -> NodeResult<u64> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(self.not_leader());
        }
        if node == 0 {
            return Err(NodeError::Invalid("node id 0 is reserved by raft".into()));
        }
        let mut s = ConfChangeSingle::default();
        s.set_change_type(if add { ConfChangeType::AddNode } else { ConfChangeType::RemoveNode });
        s.node_id = node;
        let mut cc = ConfChangeV2::default();
        cc.mut_changes().push(s);
        match self.raw.propose_conf_change(Vec::new(), cc) {
            Ok(()) => {}
            Err(raft::Error::ProposalDropped) => {
                return Err(NodeError::Invalid("conf change dropped: another conf change is still pending".into()))
            }
            Err(e) => return Err(e.into()),
        }
        Ok(self.last_index())
    }

    pub fn transfer_leader(&mut self, to: u64) {
        self.raw.transfer_leader(to);
    }

    pub fn report_unreachable(&mut self, to: u64) {
        self.raw.report_unreachable(to);
    }

    pub fn has_ready(&self) -> bool {
        self.pending.is_some() || self.raw.has_ready()
    }

    fn collect_committed(&mut self, entries: Vec<Entry>, out: &mut Vec<CommittedEntry>) -> NodeResult<()> {
        for e in entries {
            let (base, next) = self.log.offsets_of(e.index).unwrap_or((-1, -1));
            let kind = self.log.kind_of(e.index).unwrap_or(EntryKind::Data);
            let mut data = e.data.to_vec();
            match e.get_entry_type() {
                EntryType::EntryNormal if !data.is_empty() => {
                    // The batch as stored: the log's offsets and the entry's term.
                    crate::batch::header::set_base_offset(&mut data, base);
                    crate::batch::header::set_partition_leader_epoch(&mut data, e.term as i32);
                }
                EntryType::EntryNormal => {}
                EntryType::EntryConfChangeV2 | EntryType::EntryConfChange => {
                    let bad = |err: protobuf::ProtobufError| {
                        NodeError::Invalid(format!("committed conf change {} does not parse: {err}", e.index))
                    };
                    if e.get_entry_type() == EntryType::EntryConfChangeV2 {
                        self.raw.apply_conf_change(&ConfChangeV2::parse_from_bytes(&data).map_err(bad)?)?;
                    } else {
                        self.raw.apply_conf_change(&raft::eraftpb::ConfChange::parse_from_bytes(&data).map_err(bad)?)?;
                    }
                }
            }
            out.push(CommittedEntry { index: e.index, term: e.term, kind, data, base_offset: base, next_offset: next });
        }
        Ok(())
    }

    fn encode_messages(messages: Vec<Message>, out: &mut Vec<(u64, Vec<u8>)>) -> NodeResult<()> {
        for m in messages {
            let bytes = m.write_to_bytes().map_err(|e| NodeError::Invalid(format!("raft message does not encode: {e}")))?;
            out.push((m.to, bytes));
        }
        Ok(())
    }

    /// First half of a ready cycle, cheap (no IO): take the Ready and return the messages that may
    /// go out before this node persists anything (a leader's appends: followers write them while
    /// the leader does). `process_ready` then persists and finishes the cycle; nothing else may be
    /// called on the node in between.
    pub fn begin_ready(&mut self) -> NodeResult<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        if self.pending.is_some() || !self.raw.has_ready() {
            return Ok(out);
        }
        let mut rd = self.raw.ready();
        let early = rd.take_messages();
        self.pending = Some(rd);
        Self::encode_messages(early, &mut out)?;
        Ok(out)
    }

    /// One ready cycle (or the second half of one `begin_ready` started): install a received
    /// snapshot, persist entries (fsync) and HardState, then hand out messages and committed
    /// entries, and advance.
    pub fn process_ready(&mut self) -> NodeResult<ReadyOutput> {
        let mut out = ReadyOutput::default();
        let (mut rd, mut messages) = match self.pending.take() {
            Some(rd) => (rd, Vec::new()),
            None => {
                if !self.raw.has_ready() {
                    return Ok(out);
                }
                let mut rd = self.raw.ready();
                let m = rd.take_messages();
                (rd, m)
            }
        };
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            let data = self.log.apply_snapshot(&snap)?;
            out.snapshot = Some((snap.get_metadata().index, snap.get_metadata().term, data));
        }
        self.log.append(rd.entries())?;
        if let Some(hs) = rd.hs() {
            self.log.set_hard_state(hs, self.raw.raft.leader_id)?;
        }
        messages.extend(rd.take_persisted_messages());
        let committed = rd.take_committed_entries();
        self.collect_committed(committed, &mut out.committed)?;
        let mut light = self.raw.advance(rd);
        if let Some(c) = light.commit_index() {
            self.log.set_commit(c);
        }
        messages.extend(light.take_messages());
        let committed = light.take_committed_entries();
        self.collect_committed(committed, &mut out.committed)?;
        self.raw.advance_apply();
        self.log.note_leader(self.raw.raft.leader_id)?;
        Self::encode_messages(messages, &mut out.messages)?;
        Ok(out)
    }

    /// Snapshot the application's state after `index` (data: v2 batches of metadata records).
    pub fn create_snapshot(&mut self, index: u64, data: &[u8]) -> NodeResult<std::path::PathBuf> {
        if index > self.raw.raft.raft_log.applied {
            return Err(NodeError::Invalid(format!(
                "cannot snapshot at index {index}: only {} is applied",
                self.raw.raft.raft_log.applied
            )));
        }
        Ok(self.log.create_snapshot(index, data)?)
    }

    pub fn message_type_name(bytes: &[u8]) -> String {
        Message::parse_from_bytes(bytes).map_or_else(|_| "invalid".into(), |m| format!("{:?}", m.get_msg_type()))
    }
}
