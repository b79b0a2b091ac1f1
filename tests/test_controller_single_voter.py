"""The single-voter quorum: a proposal is committed once durable in ``__cluster_metadata-0``, atomically.

Files only (a MetadataLog in a temporary directory), no sockets, no broker.
"""

from __future__ import annotations

import uuid

from klog.controller.single_voter import MAX_RECORDS_PER_BATCH, SINGLE_VOTER_EPOCH, SingleVoterQuorum
from klog.metadata.records import record
from klog.metadata.storage import MetadataLog


def topic_with_partitions(name: str, partitions: int) -> list:
    tid = uuid.uuid5(uuid.NAMESPACE_URL, name)
    return [record("TopicRecord", name=name, topic_id=tid)] + [
        record("PartitionRecord", partition_id=p, topic_id=tid, replicas=[1], isr=[1], leader=1, leader_epoch=0,
               partition_epoch=0, directories=[]) for p in range(partitions)]


def test_a_proposal_is_committed_at_the_log_end_under_the_voters_epoch_and_survives_reopening(tmp_path):
    with MetadataLog(str(tmp_path)) as log:
        quorum = SingleVoterQuorum(log, node_id=3)
        assert quorum.committed_end == 0 and quorum.propose([]) == 0
        end = quorum.propose([record("FeatureLevelRecord", name="metadata.version", feature_level=25),
                              *topic_with_partitions("a", 2)])
        assert end == quorum.committed_end == log.log_end_offset == 4
        assert {b.epoch for b in log.read()} == {SINGLE_VOTER_EPOCH}
        state = log.read_quorum_state()
        assert (state.leader_id, state.leader_epoch, state.voted_id) == (3, SINGLE_VOTER_EPOCH, 3)
    with MetadataLog(str(tmp_path)) as log:
        quorum = SingleVoterQuorum(log, node_id=3)
        assert quorum.committed_end == 4
        image = log.load(end_offset=quorum.committed_end).image
        assert len(image.topic("a").partitions) == 2 and image.highest_offset == 3


def test_a_proposal_beyond_one_batch_is_one_metadata_transaction(tmp_path):
    records = topic_with_partitions("wide", MAX_RECORDS_PER_BATCH + 5)
    with MetadataLog(str(tmp_path)) as log:
        quorum = SingleVoterQuorum(log, node_id=1)
        end = quorum.propose(records)
        batches = list(log.read())
        assert len(batches) == 2 and end == len(records) + 2
        names = [r.name for b in batches for r in b.records]
        assert names[0] == "BeginTransactionRecord" and names[-1] == "EndTransactionRecord"
        # a loader that stops inside the transaction shows none of it; at its end, all of it
        assert log.load(end_offset=batches[0].next_offset).image.topic("wide") is None
        assert len(log.load(end_offset=end).image.topic("wide").partitions) == MAX_RECORDS_PER_BATCH + 5
