//! Storage and node tests: real files in a temp dir, a 3-node quorum stepped in memory.

use std::collections::VecDeque;
use std::fs;

use raft::eraftpb::{ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType, HardState};
use raft::{GetEntriesContext, Storage};

use super::control;
use super::node::{CommittedEntry, NodeConfig, RaftNode};
use super::storage::{EntryKind, MetadataLog, QUORUM_STATE_FILE};
use crate::batch::header::BatchHeader;
use crate::batch::records::{encode_batch, EncodeOptions, RecordIn};
use crate::storage::test_dir::TempDir;
use protobuf::Message as _;

/// A batch of `n` NoOpRecords (api key 20), base offset 0, as the controller proposes.
fn noop_batch(n: usize) -> Vec<u8> {
    let value: &[u8] = &[1, 20, 0, 0];
    let recs: Vec<RecordIn<&[u8]>> =
        (0..n).map(|_| RecordIn { timestamp: 1000, key: None, value: Some(value), headers: Vec::new() }).collect();
    encode_batch(&recs, &EncodeOptions::default()).unwrap()
}

fn entry(index: u64, term: u64, data: Vec<u8>) -> Entry {
    let mut e = Entry::default();
    e.index = index;
    e.term = term;
    e.data = data.into();
    e
}

fn add_voter_entry(index: u64, term: u64, node: u64) -> Entry {
    let mut s = ConfChangeSingle::default();
    s.set_change_type(ConfChangeType::AddNode);
    s.node_id = node;
    let mut cc = ConfChangeV2::default();
    cc.mut_changes().push(s);
    let mut e = entry(index, term, cc.write_to_bytes().unwrap());
    e.set_entry_type(EntryType::EntryConfChangeV2);
    e
}

fn all(log: &MetadataLog) -> Vec<Entry> {
    let (lo, hi) = (log.first_index().unwrap(), log.last_index().unwrap());
    log.entries(lo, hi + 1, None, GetEntriesContext::empty(false)).unwrap()
}

#[test]
fn append_maps_indexes_to_offsets_by_record_count_and_terms_to_epochs() {
    let d = TempDir::new("raft-append");
    let log = MetadataLog::open(&d.0, &[1, 2, 3]).unwrap();
    assert_eq!((log.first_index().unwrap(), log.last_index().unwrap()), (1, 0));
    log.append(&[entry(1, 1, Vec::new()), entry(2, 1, noop_batch(3)), entry(3, 2, noop_batch(2))]).unwrap();
    assert_eq!(log.last_index().unwrap(), 3);
    assert_eq!(log.offsets_of(1), Some((0, 1)));
    assert_eq!(log.offsets_of(2), Some((1, 4)));
    assert_eq!(log.offsets_of(3), Some((4, 6)));
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!((log.term(1).unwrap(), log.term(3).unwrap()), (1, 2));
    assert!(log.term(4).is_err());
    assert_eq!(log.kind_of(1), Some(EntryKind::LeaderChange));
    let es = all(&log);
    assert_eq!(es.len(), 3);
    let h = BatchHeader::parse(&es[2].data, 0).unwrap();
    assert_eq!((h.base_offset, h.partition_leader_epoch, h.records_count), (4, 2, 2));
    // The epoch cache of the partition holds the same terms.
    let epochs = crate::storage::checkpoint::read_epochs(&d.0.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(epochs, vec![(1, 0), (2, 4)]);
}

#[test]
fn a_conflicting_append_truncates_the_suffix() {
    let d = TempDir::new("raft-truncate");
    let log = MetadataLog::open(&d.0, &[1]).unwrap();
    log.append(&[entry(1, 1, noop_batch(1)), entry(2, 1, noop_batch(5)), entry(3, 1, noop_batch(1))]).unwrap();
    log.append(&[entry(2, 2, noop_batch(2))]).unwrap();
    assert_eq!(log.last_index().unwrap(), 2);
    assert_eq!(log.term(2).unwrap(), 2);
    assert_eq!(log.offsets_of(2), Some((1, 3)));
    assert_eq!(log.log_end_offset(), 3);
    assert!(log.append(&[entry(5, 2, noop_batch(1))]).is_err(), "a gap is refused");
}

#[test]
fn reopening_rebuilds_indexes_terms_voters_and_hard_state() {
    let d = TempDir::new("raft-reopen");
    {
        let log = MetadataLog::open(&d.0, &[1, 2, 3]).unwrap();
        log.append(&[entry(1, 1, Vec::new()), entry(2, 1, noop_batch(4)), add_voter_entry(3, 3, 4), entry(4, 3, noop_batch(1))])
            .unwrap();
        let mut hs = HardState::default();
        hs.term = 3;
        hs.vote = 2;
        hs.commit = 3;
        log.set_hard_state(&hs, 2).unwrap();
        log.close().unwrap();
    }
    let json = fs::read_to_string(d.0.join(QUORUM_STATE_FILE)).unwrap();
    assert!(json.contains("\"leaderEpoch\":3") && json.contains("\"votedId\":2"), "{json}");
    let log = MetadataLog::open(&d.0, &[1, 2, 3]).unwrap();
    assert_eq!(log.last_index().unwrap(), 4);
    assert_eq!(log.offsets_of(4), Some((6, 7)));
    assert_eq!(log.term(3).unwrap(), 3);
    let st = log.initial_state().unwrap();
    assert_eq!((st.hard_state.term, st.hard_state.vote, st.hard_state.commit), (3, 2, 3));
    assert_eq!(st.conf_state.voters, vec![1, 2, 3, 4]);
    let es = all(&log);
    assert_eq!(es[2].get_entry_type(), EntryType::EntryConfChangeV2);
    let cc = ConfChangeV2::parse_from_bytes(&es[2].data).unwrap();
    assert_eq!(cc.changes[0].node_id, 4);
}

#[test]
fn a_snapshot_compacts_the_log_and_installs_on_another_replica() {
    let d = TempDir::new("raft-snap-src");
    let log = MetadataLog::open(&d.0, &[1, 2]).unwrap();
    log.append(&[entry(1, 1, noop_batch(2)), entry(2, 1, noop_batch(3)), entry(3, 2, noop_batch(1))]).unwrap();
    let mut hs = HardState::default();
    hs.term = 2;
    hs.commit = 3;
    log.set_hard_state(&hs, 1).unwrap();
    let state = noop_batch(7);
    let path = log.create_snapshot(2, &state).unwrap();
    assert_eq!(path.file_name().unwrap().to_str().unwrap(), "00000000000000000005-0000000001.checkpoint");
    assert_eq!(log.first_index().unwrap(), 3);
    assert_eq!(log.term(2).unwrap(), 1);
    assert!(log.entries(2, 3, None, GetEntriesContext::empty(false)).is_err(), "compacted");
    let snap = log.snapshot(2, 2).unwrap();
    assert_eq!((snap.get_metadata().index, snap.get_metadata().term), (2, 1));
    assert_eq!(snap.get_metadata().get_conf_state().voters, vec![1, 2]);
    // Restart: the log starts after the snapshot.
    drop(log);
    let log = MetadataLog::open(&d.0, &[1, 2]).unwrap();
    assert_eq!((log.first_index().unwrap(), log.last_index().unwrap()), (3, 3));
    assert_eq!(log.offsets_of(3), Some((5, 6)));
    let (_, data) = log.snapshot_data().unwrap().unwrap();
    let h = BatchHeader::parse(&data, 0).unwrap();
    assert_eq!(h.records_count, 7);

    // Another replica with a diverging log installs it: its log restarts at the end offset.
    let d2 = TempDir::new("raft-snap-dst");
    let other = MetadataLog::open(&d2.0, &[1, 2]).unwrap();
    other.append(&[entry(1, 1, noop_batch(1))]).unwrap();
    let data = other.apply_snapshot(&snap).unwrap();
    assert_eq!(BatchHeader::parse(&data, 0).unwrap().records_count, 7);
    assert_eq!((other.first_index().unwrap(), other.last_index().unwrap()), (3, 2));
    assert_eq!(other.log_end_offset(), 5);
    other.append(&[entry(3, 2, noop_batch(1))]).unwrap();
    assert_eq!(other.offsets_of(3), Some((5, 6)));
    drop(other);
    let other = MetadataLog::open(&d2.0, &[1, 2]).unwrap();
    assert_eq!((other.first_index().unwrap(), other.last_index().unwrap()), (3, 3));
    assert_eq!(other.term(2).unwrap(), 1);
}

#[test]
fn control_batches_of_the_log_carry_kafka_types() {
    let d = TempDir::new("raft-control");
    let log = MetadataLog::open(&d.0, &[1]).unwrap();
    log.append(&[entry(1, 1, Vec::new()), add_voter_entry(2, 1, 2)]).unwrap();
    let seg = fs::read(d.0.join("00000000000000000000.log")).unwrap();
    let mut types = Vec::new();
    for item in crate::batch::header::BatchIter::new(&seg) {
        let (at, h) = item.unwrap();
        types.push(control::control_record(&seg[at..at + h.size()]).unwrap().0);
    }
    assert_eq!(types, vec![control::CONTROL_LEADER_CHANGE, control::CONTROL_KRAFT_VOTERS]);
}

/// Deliver every message until the cluster is quiet; returns committed entries per node.
fn run(nodes: &mut [Option<RaftNode>], committed: &mut [Vec<CommittedEntry>]) {
    let mut queue: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    for _ in 0..200 {
        for (i, n) in nodes.iter_mut().enumerate() {
            if let Some(n) = n {
                let out = n.process_ready().unwrap();
                queue.extend(out.messages);
                committed[i].extend(out.committed);
            }
        }
        if queue.is_empty() {
            return;
        }
        while let Some((to, m)) = queue.pop_front() {
            if let Some(Some(n)) = nodes.get_mut(to as usize - 1) {
                n.step(&m).unwrap();
            }
        }
    }
    panic!("the cluster did not settle");
}

/// Node 1 is gone: tick nodes 2 and 3 until one of them leads (within 100 ticks); its index.
fn elect_without_node_1(nodes: &mut [Option<RaftNode>], committed: &mut [Vec<CommittedEntry>]) -> usize {
    for _ in 0..100 {
        for n in nodes.iter_mut().flatten() {
            n.tick().unwrap();
        }
        run(nodes, committed);
        if let Some(leader) = (1..3).find(|&i| nodes[i].as_ref().unwrap().role() == "leader") {
            return leader;
        }
    }
    panic!("a new leader within 100 ticks");
}

#[test]
fn three_nodes_elect_commit_and_keep_identical_logs() {
    let dirs: Vec<TempDir> = (1..=3).map(|i| TempDir::new(&format!("node{i}"))).collect();
    let cfg = |id| NodeConfig { id, bootstrap_voters: vec![1, 2, 3], ..NodeConfig::default() };
    let mut nodes: Vec<Option<RaftNode>> = (1..=3).map(|i| Some(RaftNode::open(&dirs[i as usize - 1].0, &cfg(i)).unwrap())).collect();
    let mut committed = vec![Vec::new(), Vec::new(), Vec::new()];
    nodes[0].as_mut().unwrap().campaign().unwrap();
    run(&mut nodes, &mut committed);
    assert_eq!(nodes[0].as_ref().unwrap().role(), "leader");
    assert!(nodes[1].as_mut().unwrap().propose(noop_batch(1)).is_err(), "a follower refuses proposals");
    let mut indexes = Vec::new();
    for k in 1..=5 {
        indexes.push(nodes[0].as_mut().unwrap().propose(noop_batch(k)).unwrap());
        run(&mut nodes, &mut committed);
    }
    for c in &committed {
        let data: Vec<_> = c.iter().filter(|e| e.kind == EntryKind::Data).map(|e| e.index).collect();
        assert_eq!(data, indexes);
        assert_eq!(c[0].kind, EntryKind::LeaderChange);
    }
    // The leader-change entry names node 1 on every replica.
    let (t, v) = control::control_record(&committed[2][0].data).unwrap();
    assert_eq!(t, control::CONTROL_LEADER_CHANGE);
    assert_eq!(&v[2..6], &1i32.to_be_bytes());
    let seg = |i: usize| fs::read(dirs[i].0.join("00000000000000000000.log")).unwrap();
    assert_eq!(seg(0), seg(1));
    assert_eq!(seg(0), seg(2));
    // Node 1 goes away; after an election timeout (check_quorum: followers honour the old
    // leader's lease until then) node 2 or 3 takes over and the log keeps growing.
    nodes[0] = None;
    let leader = elect_without_node_1(&mut nodes, &mut committed);
    let i = nodes[leader].as_mut().unwrap().propose(noop_batch(1)).unwrap();
    run(&mut nodes, &mut committed);
    assert!(committed[1].iter().any(|e| e.index == i) && committed[2].iter().any(|e| e.index == i));
    assert_eq!(seg(1), seg(2));
}

#[test]
fn a_leaders_appends_go_out_before_it_persists_them() {
    let dirs: Vec<TempDir> = (1..=2).map(|i| TempDir::new(&format!("early{i}"))).collect();
    let cfg = |id| NodeConfig { id, bootstrap_voters: vec![1, 2], ..NodeConfig::default() };
    let mut nodes: Vec<Option<RaftNode>> = (1..=2).map(|i| Some(RaftNode::open(&dirs[i as usize - 1].0, &cfg(i)).unwrap())).collect();
    let mut committed = vec![Vec::new(), Vec::new()];
    nodes[0].as_mut().unwrap().campaign().unwrap();
    run(&mut nodes, &mut committed);
    assert_eq!(nodes[0].as_ref().unwrap().role(), "leader");
    let index = nodes[0].as_mut().unwrap().propose(noop_batch(2)).unwrap();
    let end = nodes[0].as_ref().unwrap().log().log_end_offset();
    let early = nodes[0].as_mut().unwrap().begin_ready().unwrap();
    assert!(!early.is_empty() && early.iter().all(|(to, _)| *to == 2), "the append to the follower");
    assert!(nodes[0].as_ref().unwrap().has_ready(), "the cycle is still open");
    assert_eq!(nodes[0].as_ref().unwrap().log().log_end_offset(), end, "not persisted yet on the leader");
    for (_, m) in &early {
        nodes[1].as_mut().unwrap().step(m).unwrap();
    }
    let follower = nodes[1].as_mut().unwrap().process_ready().unwrap();
    assert!(nodes[1].as_ref().unwrap().log().log_end_offset() > end, "the follower persisted first");
    let leader = nodes[0].as_mut().unwrap().process_ready().unwrap();
    assert_eq!(nodes[0].as_ref().unwrap().log().log_end_offset(), nodes[1].as_ref().unwrap().log().log_end_offset());
    assert!(leader.messages.iter().all(|(_, m)| !early.iter().any(|(_, e)| e == m)), "nothing sent twice");
    for (_, m) in follower.messages {
        nodes[0].as_mut().unwrap().step(&m).unwrap();
    }
    for (_, m) in leader.messages {
        nodes[1].as_mut().unwrap().step(&m).unwrap();
    }
    run(&mut nodes, &mut committed);
    assert!(committed.iter().all(|c| c.iter().any(|e| e.index == index)), "committed on both");
    let seg = |i: usize| fs::read(dirs[i].0.join("00000000000000000000.log")).unwrap();
    assert_eq!(seg(0), seg(1));
}

#[test]
fn the_leader_reports_each_voters_matched_index_as_a_kafka_end_offset() {
    let dirs: Vec<TempDir> = (1..=3).map(|i| TempDir::new(&format!("progress{i}"))).collect();
    let cfg = |id| NodeConfig { id, bootstrap_voters: vec![1, 2, 3], ..NodeConfig::default() };
    let mut nodes: Vec<Option<RaftNode>> =
        (1..=3).map(|i| Some(RaftNode::open(&dirs[i as usize - 1].0, &cfg(i)).unwrap())).collect();
    let mut committed = vec![Vec::new(), Vec::new(), Vec::new()];
    nodes[0].as_mut().unwrap().campaign().unwrap();
    run(&mut nodes, &mut committed);
    nodes[0].as_mut().unwrap().propose(noop_batch(3)).unwrap();
    run(&mut nodes, &mut committed);
    assert!(nodes[1].as_ref().unwrap().replica_progress().is_empty(), "only the leader tracks progress");
    // Node 3 falls behind: the leader's next batch reaches node 2 only.
    let lagging = nodes[2].take();
    let last = nodes[0].as_mut().unwrap().propose(noop_batch(2)).unwrap();
    run(&mut nodes, &mut committed);
    let leader = nodes[0].as_ref().unwrap();
    let progress = leader.replica_progress();
    assert_eq!(progress.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), vec![(1, true), (2, true), (3, true)]);
    assert_eq!((progress[0].2, progress[1].2), (last, last));
    assert!(progress[2].2 < last);
    let end = leader.log().end_offset_through(last).unwrap();
    assert_eq!(end, leader.log().log_end_offset());
    let behind = leader.log().end_offset_through(progress[2].2).unwrap();
    assert_eq!(end - behind, 2, "node 3 misses the last batch's two records");
    assert_eq!(leader.log().end_offset_through(last + 1), None);
    drop(lagging);
}

/// Steps `m` into node `to` (1-based) of `nodes`, if that node is up.
fn deliver(nodes: &mut [Option<RaftNode>], to: u64, m: &[u8]) {
    if let Some(Some(n)) = nodes.get_mut(to as usize - 1) {
        n.step(m).unwrap();
    }
}

#[test]
fn a_follower_learns_the_leaders_commit_index_from_its_appends_only() {
    use raft::eraftpb::{Message, MessageType};
    let dirs: Vec<TempDir> = (1..=3).map(|i| TempDir::new(&format!("lcommit{i}"))).collect();
    let cfg = |id| NodeConfig { id, bootstrap_voters: vec![1, 2, 3], ..NodeConfig::default() };
    let mut nodes: Vec<Option<RaftNode>> =
        (1..=3).map(|i| Some(RaftNode::open(&dirs[i as usize - 1].0, &cfg(i)).unwrap())).collect();
    let mut committed = vec![Vec::new(), Vec::new(), Vec::new()];
    // node 3 hears nothing while node 1 is elected by node 2 and commits a batch
    let third = nodes[2].take();
    nodes[0].as_mut().unwrap().campaign().unwrap();
    run(&mut nodes, &mut committed);
    nodes[0].as_mut().unwrap().propose(noop_batch(2)).unwrap();
    run(&mut nodes, &mut committed);
    let (term, commit) = (nodes[0].as_ref().unwrap().term(), nodes[0].as_ref().unwrap().commit_index());
    assert_eq!(nodes[0].as_ref().unwrap().leader_commit(), None, "a leader learns nothing from itself");
    assert_eq!(nodes[1].as_ref().unwrap().leader_commit(), Some(commit));
    assert_eq!(nodes[1].as_ref().unwrap().commit_index(), commit);

    // node 3 back, but only the leader's heartbeats reach it: it follows node 1 and still does not know the commit
    // index (a heartbeat carries min(what the leader knows it holds, the commit index))
    nodes[2] = third;
    assert_eq!(nodes[2].as_ref().unwrap().leader_commit(), None);
    let mut heartbeats = 0;
    for _ in 0..4 {   // fewer ticks than an election timeout: the leader, hearing no answer, keeps leading
        nodes[0].as_mut().unwrap().tick().unwrap();
        let out = nodes[0].as_mut().unwrap().process_ready().unwrap();
        for (to, m) in out.messages {
            let kind = Message::parse_from_bytes(&m).unwrap().get_msg_type();
            if to == 3 && kind == MessageType::MsgHeartbeat {
                deliver(&mut nodes, 3, &m);
                heartbeats += 1;
            } else if to == 2 {
                deliver(&mut nodes, 2, &m);
            }
        }
        for i in 1..3 {
            nodes[i].as_mut().unwrap().process_ready().unwrap();   // replies dropped
        }
    }
    assert!(heartbeats > 0);
    assert_eq!(nodes[0].as_ref().unwrap().role(), "leader");
    assert_eq!((nodes[2].as_ref().unwrap().leader_id(), nodes[2].as_ref().unwrap().term()), (1, term));
    assert_eq!(nodes[2].as_ref().unwrap().leader_commit(), None);
    // everything delivered: at the next heartbeat's answer the leader's appends bring node 3 up, and with them
    // its commit index
    for _ in 0..10 {
        nodes[0].as_mut().unwrap().tick().unwrap();
        run(&mut nodes, &mut committed);
    }
    assert_eq!(nodes[2].as_ref().unwrap().leader_commit(), Some(commit));

    // a late append of the same leader carrying an older commit index does not move it back
    let follower = nodes[1].as_mut().unwrap();
    let mut late = Message::default();
    late.set_msg_type(MessageType::MsgAppend);
    late.from = 1;
    late.to = 2;
    late.term = term;
    late.index = follower.last_index();
    late.log_term = term;
    late.commit = 1;
    follower.step(&late.write_to_bytes().unwrap()).unwrap();
    assert_eq!(follower.leader_commit(), Some(commit));
    // an append of an older term is not the current leader's
    late.term = term - 1;
    late.commit = commit + 5;
    follower.step(&late.write_to_bytes().unwrap()).unwrap();
    assert_eq!(follower.leader_commit(), Some(commit));

    // node 1 goes away: once node 2 or 3 leads a new term, the other learns nothing from the old leader's appends
    nodes[0] = None;
    let leader = elect_without_node_1(&mut nodes, &mut committed);
    let other = 3 - leader;
    let new_term = nodes[leader].as_ref().unwrap().term();
    assert!(new_term > term);
    assert_eq!(nodes[other].as_ref().unwrap().leader_commit(), Some(nodes[leader].as_ref().unwrap().commit_index()),
               "the new leader's own LeaderChange append");
}
