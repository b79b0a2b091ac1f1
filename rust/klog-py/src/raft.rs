//! `RaftNode`: one controller-quorum member (raft-rs over the `__cluster_metadata-0` log).
//! Every call is short except `ready`, which persists (fsync) with the GIL released. Raft and
//! storage errors become `RaftError` (or `NotLeaderError`) with the reason; nothing panics
//! across the FFI.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use klog_core::raft::{NodeConfig, NodeError, RaftNode as CoreNode, ReadyOutput};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(_core, RaftError, PyException, "A controller-quorum (Raft) operation failed; the message says why.");
create_exception!(
    _core,
    NotLeaderError,
    RaftError,
    "A proposal reached a node that is not the quorum's leader; `leader_id` names the leader (0 = unknown)."
);

fn raft_err(e: NodeError) -> PyErr {
    match e {
        NodeError::NotLeader { .. } => NotLeaderError::new_err(e.to_string()),
        other => RaftError::new_err(other.to_string()),
    }
}

/// (index, term, kind, data, base offset, next offset)
type CommittedTuple<'py> = (u64, u64, &'static str, Bound<'py, PyBytes>, i64, i64);

#[pyclass(frozen, module = "klog._native", name = "RaftNode")]
pub struct RaftNode {
    node: Mutex<Option<CoreNode>>,
}

impl RaftNode {
    fn lock(&self) -> PyResult<MutexGuard<'_, Option<CoreNode>>> {
        Ok(self.node.lock().unwrap_or_else(|p| p.into_inner()))
    }
    fn with<T>(&self, f: impl FnOnce(&mut CoreNode) -> Result<T, NodeError>) -> PyResult<T> {
        let mut g = self.lock()?;
        let n = g.as_mut().ok_or_else(|| RaftError::new_err("the raft node is closed"))?;
        f(n).map_err(raft_err)
    }
}

#[pymethods]
impl RaftNode {
    #[new]
    #[pyo3(signature = (directory, node_id, voters, *, election_tick=10, min_election_tick=0, max_election_tick=0, heartbeat_tick=2,
        max_size_per_msg=1048576, max_inflight_msgs=256, max_uncommitted_size=67108864,
        max_entry_bytes=8388608, max_committed_size_per_ready=16777216, segment_bytes=1073741824,
        segment_ms=604800000))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        directory: PathBuf,
        node_id: u64,
        voters: Vec<u64>,
        election_tick: usize,
        min_election_tick: usize,
        max_election_tick: usize,
        heartbeat_tick: usize,
        max_size_per_msg: u64,
        max_inflight_msgs: usize,
        max_uncommitted_size: u64,
        max_entry_bytes: usize,
        max_committed_size_per_ready: u64,
        segment_bytes: i64,
        segment_ms: i64,
    ) -> PyResult<Self> {
        let cfg = NodeConfig {
            id: node_id,
            bootstrap_voters: voters,
            election_tick,
            min_election_tick,
            max_election_tick,
            heartbeat_tick,
            max_size_per_msg,
            max_inflight_msgs,
            max_uncommitted_size,
            max_entry_bytes,
            max_committed_size_per_ready,
            segment_bytes,
            segment_ms,
        };
        let node = py.detach(|| CoreNode::open(&directory, &cfg)).map_err(raft_err)?;
        Ok(RaftNode { node: Mutex::new(Some(node)) })
    }

    /// Advance the logical clock by one tick; True if the node did something.
    fn tick(&self) -> PyResult<bool> {
        self.with(|n| n.tick())
    }

    /// Step a raft message received from a peer (bytes as sent by `ready`).
    fn step(&self, message: &[u8]) -> PyResult<()> {
        self.with(|n| n.step(message))
    }

    /// Propose one record batch (base offset 0); returns the raft index it will commit at.
    fn propose(&self, batch: Vec<u8>) -> PyResult<u64> {
        self.with(|n| n.propose(batch))
    }

    /// Propose adding (`add=True`) or removing a voter; returns the conf change's index.
    fn propose_voter_change(&self, node_id: u64, add: bool) -> PyResult<u64> {
        self.with(|n| n.propose_voter_change(node_id, add))
    }

    fn campaign(&self) -> PyResult<()> {
        self.with(|n| n.campaign())
    }

    fn transfer_leader(&self, to: u64) -> PyResult<()> {
        self.with(|n| {
            n.transfer_leader(to);
            Ok(())
        })
    }

    fn report_unreachable(&self, to: u64) -> PyResult<()> {
        self.with(|n| {
            n.report_unreachable(to);
            Ok(())
        })
    }

    fn has_ready(&self) -> PyResult<bool> {
        self.with(|n| Ok(n.has_ready()))
    }

    /// The first half of a ready cycle (no IO): messages that may be sent before this node
    /// persists (a leader's appends). Call `ready` next, before anything else.
    fn begin_ready<'py>(&self, py: Python<'py>) -> PyResult<Vec<(u64, Bound<'py, PyBytes>)>> {
        let msgs = self.with(|n| n.begin_ready())?;
        Ok(msgs.iter().map(|(to, b)| (*to, PyBytes::new(py, b))).collect())
    }

    /// One ready cycle, persisted (fsync) with the GIL released:
    /// (messages [(to, bytes)], committed [(index, term, kind, data, base_offset, next_offset)],
    /// snapshot (index, term, data) or None). Send the messages only after this returns.
    #[allow(clippy::type_complexity)]
    fn ready<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Vec<(u64, Bound<'py, PyBytes>)>, Vec<CommittedTuple<'py>>, Option<(u64, u64, Bound<'py, PyBytes>)>)> {
        let out: ReadyOutput = py.detach(|| self.with(|n| n.process_ready()))?;
        let msgs = out.messages.iter().map(|(to, b)| (*to, PyBytes::new(py, b))).collect();
        let committed = out
            .committed
            .iter()
            .map(|c| (c.index, c.term, c.kind.name(), PyBytes::new(py, &c.data), c.base_offset, c.next_offset))
            .collect();
        let snap = out.snapshot.as_ref().map(|(i, t, d)| (*i, *t, PyBytes::new(py, d)));
        Ok((msgs, committed, snap))
    }

    /// Write a snapshot of the applied state after `index` (data: v2 record batches).
    fn create_snapshot(&self, py: Python<'_>, index: u64, data: Vec<u8>) -> PyResult<String> {
        py.detach(|| self.with(|n| Ok(n.create_snapshot(index, &data)?.display().to_string())))
    }

    /// (index, data) of the latest snapshot on disk, or None.
    fn latest_snapshot<'py>(&self, py: Python<'py>) -> PyResult<Option<(u64, Bound<'py, PyBytes>)>> {
        let s = self.with(|n| Ok(n.log().snapshot_data()?))?;
        Ok(s.map(|(i, d)| (i, PyBytes::new(py, &d))))
    }

    #[getter]
    fn node_id(&self) -> PyResult<u64> {
        self.with(|n| Ok(n.id()))
    }
    /// The leader's id, 0 when unknown.
    #[getter]
    fn leader_id(&self) -> PyResult<u64> {
        self.with(|n| Ok(n.leader_id()))
    }
    #[getter]
    fn term(&self) -> PyResult<u64> {
        self.with(|n| Ok(n.term()))
    }
    /// "follower", "precandidate", "candidate" or "leader".
    #[getter]
    fn role(&self) -> PyResult<&'static str> {
        self.with(|n| Ok(n.role()))
    }
    #[getter]
    fn commit_index(&self) -> PyResult<u64> {
        self.with(|n| Ok(n.commit_index()))
    }
    /// The commit index the current leader of the current term sent this follower in its appends (its view of
    /// the quorum's high watermark); None before that leader's first append, or when this node leads.
    #[getter]
    fn leader_commit(&self) -> PyResult<Option<u64>> {
        self.with(|n| Ok(n.leader_commit()))
    }
    #[getter]
    fn last_index(&self) -> PyResult<u64> {
        self.with(|n| Ok(n.last_index()))
    }
    #[getter]
    fn voters(&self) -> PyResult<Vec<u64>> {
        self.with(|n| Ok(n.voters()))
    }
    /// The voters after the last entry of the log, uncommitted conf changes included (KIP-853: a member
    /// restarted before learning that its own addition committed is a voter by its log, as on Kafka).
    #[getter]
    fn log_voters(&self) -> PyResult<Vec<u64>> {
        self.with(|n| Ok(n.log().voters()))
    }
    /// The metadata log's end offset (Kafka offsets).
    #[getter]
    fn log_end_offset(&self) -> PyResult<i64> {
        self.with(|n| Ok(n.log().log_end_offset()))
    }

    /// The Kafka end offset of the log through raft ``index`` (None: compacted away or not in the log).
    fn end_offset_through(&self, index: u64) -> PyResult<Option<i64>> {
        self.with(|n| Ok(n.log().end_offset_through(index)))
    }
    /// On the leader: (node id, is voter, matched raft index) of every replica (itself included); empty
    /// on other members.
    fn replica_progress(&self) -> PyResult<Vec<(u64, bool, u64)>> {
        self.with(|n| Ok(n.replica_progress()))
    }

    /// Close the log (flushes); later calls raise RaftError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let node = self.lock()?.take();
        if let Some(n) = node {
            py.detach(|| n.log().close()).map_err(|e| RaftError::new_err(e.to_string()))?;
        }
        Ok(())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RaftNode>()?;
    m.add("RaftError", m.py().get_type::<RaftError>())?;
    m.add("NotLeaderError", m.py().get_type::<NotLeaderError>())?;
    Ok(())
}
