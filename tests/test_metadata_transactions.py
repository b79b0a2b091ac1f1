"""KIP-868 metadata transactions as a state machine (no sockets, no processes): how the controller frames an
operation larger than ``klog.controller.max.records.per.batch``, how a loader applies Begin ... End at End only,
drops Begin ... Abort, and what a controller that takes over a log ending inside a transaction writes first
(Kafka's ``ActivationRecordsGenerator``: an AbortTransactionRecord, reason "Controller failover"). Replaying the
same log from the start, from a snapshot, or batch by batch gives the same image, and snapshots are never taken
inside a transaction. The real 3-node failover is tests/test_metadata_transactions_cluster.py."""

from __future__ import annotations

import uuid

import pytest

from confluent_kafka.admin import NewTopic

from klog.controller.applier import MetadataApplier, SnapshotPolicy
from klog.controller.single_voter import ABORT_REASON, SingleVoterQuorum, atomic_batches, transaction_abort
from klog.metadata import MetadataLoader
from klog.metadata.records import MetadataBatch, MetadataRecord, decode_batches, encode_batch, record
from klog.metadata.storage import MetadataLog


def topic(name: str, partitions: int) -> list[MetadataRecord]:
    tid = uuid.uuid5(uuid.NAMESPACE_URL, name)
    return [record("TopicRecord", name=name, topic_id=tid)] + [
        record("PartitionRecord", partition_id=p, topic_id=tid, replicas=[1], isr=[1], leader=1, leader_epoch=0,
               partition_epoch=0, directories=[]) for p in range(partitions)]


class Log:
    """Batches as a Raft log would number them (offsets advance by record count)."""

    def __init__(self) -> None:
        self.batches: list[MetadataBatch] = []
        self.end = 0

    def append(self, records: list[MetadataRecord], epoch: int = 1) -> MetadataBatch:
        (b,) = decode_batches(encode_batch(records, base_offset=self.end, epoch=epoch, timestamp=1000 + self.end))
        self.batches.append(b)
        self.end = b.next_offset
        return b


FEATURES = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]


def test_an_operation_over_the_bound_is_one_transaction_in_batches_within_the_bound() -> None:
    records = topic("wide", 99)   # 100 records
    assert atomic_batches(records, 100) == [records]   # within the bound: one batch, no framing
    batches = atomic_batches(records, 30)
    assert all(len(b) <= 30 for b in batches) and len(batches) == 4   # 102 records framed
    flat = [r for b in batches for r in b]
    assert flat[0].name == "BeginTransactionRecord" and flat[-1].name == "EndTransactionRecord"
    assert flat[1:-1] == records
    with pytest.raises(ValueError, match="room for 3 records"):
        atomic_batches(records, 2)


def test_records_between_begin_and_end_are_applied_at_end_only_and_aborted_ones_never() -> None:
    log, loader = Log(), MetadataLoader()
    loader.apply([log.append(FEATURES)])
    batches = atomic_batches(topic("t", 9), 4)   # 12 framed records in 3 batches
    for i, recs in enumerate(batches[:-1]):
        loader.apply([log.append(list(recs))])
        assert loader.in_transaction and loader.transaction_start == 1
        assert loader.image.topic("t") is None, f"after batch {i}: a half-created topic is visible"
        assert loader.image.highest_offset == 0, "the image stays before the open transaction"
    loader.apply([log.append(list(batches[-1]))])
    assert not loader.in_transaction and len(loader.image.topic("t").partitions) == 9
    assert loader.image.highest_offset == log.end - 1

    begin = log.append([record("BeginTransactionRecord", name="x"), *topic("gone", 3)])
    loader.apply([begin])
    assert loader.transaction_start == begin.base_offset
    loader.apply([log.append([record("AbortTransactionRecord", reason="test")])])
    assert loader.image.topic("gone") is None and not loader.in_transaction
    assert loader.image.highest_offset == log.end - 1


def test_a_controller_taking_over_a_log_ending_in_a_transaction_aborts_it_first() -> None:
    log = Log()
    log.append(FEATURES)
    first_half = atomic_batches(topic("half", 20), 10)[0]   # the previous controller died after this batch
    log.append(list(first_half))
    log.append([record("NoOpRecord")])   # e.g. a no-op the new leader proposed before its LeaderChange applied
    loader = MetadataLoader()
    loader.apply(log.batches)
    assert loader.in_transaction and loader.image.topic("half") is None

    abort = transaction_abort(loader.transaction_start)
    assert [(r.name, r.data.reason) for r in abort] == [("AbortTransactionRecord", ABORT_REASON)]
    assert transaction_abort(None) == []   # a log that ends between transactions: nothing to write
    loader.apply([log.append(abort)])
    assert not loader.in_transaction and loader.image.topic("half") is None
    # later operations apply at once again; the same operation retried succeeds
    loader.apply([log.append(b, epoch=2) for b in map(list, atomic_batches(topic("half", 20), 10))])
    assert len(loader.image.topic("half").partitions) == 20

    # replay: the whole log from the start, and batch by batch, give the same image
    replayed = MetadataLoader()
    replayed.apply(log.batches)
    stepwise = MetadataLoader()
    for b in log.batches:
        stepwise.apply([b])
    assert replayed.image == stepwise.image == loader.image


def test_snapshots_are_never_taken_inside_a_transaction_and_hold_only_whole_ones() -> None:
    log = Log()
    applier = MetadataApplier("c", SnapshotPolicy(max_bytes_between=1, max_interval_ms=0), 0.0)
    applier.replay([log.append(FEATURES)], 100)
    applier.applied_index = 1
    applier.replay([log.append([record("BeginTransactionRecord", name="x"), *topic("open", 2)])], 100)
    applier.applied_index = 2
    assert not applier.snapshot_due(1.0), "a snapshot inside a metadata transaction"
    applier.replay([log.append(transaction_abort(applier.loader.transaction_start))], 100)
    applier.applied_index = 3
    assert applier.snapshot_due(1.0)
    content = applier.snapshot_content()
    names = [r.name for b in decode_batches(content) for r in b.records]
    assert "TopicRecord" not in names and "BeginTransactionRecord" not in names
    restored = MetadataLoader()
    restored.load_snapshot(decode_batches(content), end_offset=log.end, epoch=1)
    assert restored.image.topic("open") is None and not restored.in_transaction


def test_a_single_voter_that_died_between_the_batches_of_a_transaction_aborts_it_on_start(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient

    from klog.testing.process import BrokerProcess

    data = tmp_path / "data"
    broker = BrokerProcess(data, {"klog.controller.max.records.per.batch": 10})
    broker.start()
    broker.stop()
    with MetadataLog(str(data)) as mlog:   # what a SIGKILL between two batches of a transaction leaves on disk
        end = mlog.log_end_offset
        mlog.append(list(atomic_batches(topic("torn", 30), 10)[0]), 1)
        mlog.flush()
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert "torn" not in admin.list_topics(timeout=10).topics
        admin.create_topics([NewTopic("after", 2)])["after"].result(30)
        assert len(admin.list_topics(timeout=10).topics["after"].partitions) == 2
    finally:
        broker.stop()
    assert any("ends inside the transaction begun at offset" in line for line in broker.lines)
    with MetadataLog(str(data)) as mlog:
        names = [r.name for b in mlog.read(end) for r in b.records]
    assert names[0] == "BeginTransactionRecord" and "AbortTransactionRecord" in names
    assert names.index("AbortTransactionRecord") < names.index("RegisterBrokerRecord")


def test_a_single_voter_commits_an_operation_over_its_bound_as_a_transaction(tmp_path) -> None:
    with MetadataLog(str(tmp_path)) as mlog:
        quorum = SingleVoterQuorum(mlog, node_id=1, max_records_per_batch=8)
        quorum.propose(topic("t", 20))
        batches = list(mlog.read())
        assert len(batches) == 3 and all(len(b.records) <= 8 for b in batches)
        assert mlog.load(end_offset=batches[1].next_offset).image.topic("t") is None
        assert len(mlog.load().image.topic("t").partitions) == 20


def test_bootstrap_records_over_the_bound_are_one_transaction_the_cluster_id_on_its_begin() -> None:
    from klog.controller.applier import bootstrap_batches, bootstrap_cluster_id

    cid = "MkU3OEVBNTcwNTJENDM2Qk"
    raw = bootstrap_batches(cid, extra=topic("migrated", 24), max_records=10)
    batches = [decode_batches(b)[0] for b in raw]
    assert len(batches) > 2 and all(len(b.records) <= 10 for b in batches)
    assert bootstrap_cluster_id(batches[:1]) == cid
    log, loader = Log(), MetadataLoader()
    for b in batches[:-1]:
        loader.apply([log.append(list(b.records))])
        assert loader.image.metadata_version is None and loader.image.topic("migrated") is None
    loader.apply([log.append(list(batches[-1].records))])
    assert loader.image.metadata_version is not None and len(loader.image.topic("migrated").partitions) == 24
