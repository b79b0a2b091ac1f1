"""The decisions of a quorum member, without sockets or clocks: committed entries -> image, the cluster id
carried by the bootstrap records, when to bootstrap, when to snapshot; Kafka's properties -> quorum settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from klog.broker.config import BrokerConfig
from klog.controller.applier import (
    BOOTSTRAP_METADATA_VERSION,
    ClusterIdMismatch,
    MetadataApplier,
    SnapshotPolicy,
    bootstrap_batch,
    noop_batch,
)
from klog.controller.partition_change import ELR_FEATURE
from klog.metadata.features import release_features
from klog.metadata.image import ConfigResourceType
from klog.controller.quorum import QuorumConfig, QuorumConfigError
from klog.metadata import MetadataLoader, control, decode_batches, record
from klog.metadata.records import encode_batch


def stored(batch: bytes, base_offset: int, epoch: int = 1) -> bytes:
    """A proposed batch as the Raft storage stores it: base offset and epoch rewritten."""
    b = decode_batches(batch)[0]
    return encode_batch(list(b.records), base_offset=base_offset, epoch=epoch)


def leader_change(base_offset: int, epoch: int = 1) -> bytes:
    return encode_batch([control("LeaderChangeMessage", leader_id=1, voters=[], granting_voters=[])],
                        base_offset=base_offset, epoch=epoch)


def test_the_bootstrap_records_establish_the_cluster_id_and_metadata_version() -> None:
    a = MetadataApplier(None, SnapshotPolicy(), now_ms=0)
    assert a.needs_bootstrap(is_leader=True, own_leader_change_applied=True)
    assert not a.needs_bootstrap(is_leader=True, own_leader_change_applied=False), "earlier terms first"
    assert not a.needs_bootstrap(is_leader=False, own_leader_change_applied=True)
    assert a.apply(1, "leader_change", leader_change(0)) is None
    assert a.apply(2, "data", stored(bootstrap_batch("MkU3OEVBNTcwNTJENDM2Qk"), 1)) == "MkU3OEVBNTcwNTJENDM2Qk"
    assert a.image.metadata_version == BOOTSTRAP_METADATA_VERSION
    assert a.image.features[ELR_FEATURE] == 1, "eligible leader replicas on in a new cluster (Kafka 4.1+)"
    # Begin, metadata.version, the release's other features, the cluster-level min.insync.replicas (ELR on), End
    # (after the LeaderChange at offset 0)
    last = 1 + 1 + sum(1 for level in release_features(BOOTSTRAP_METADATA_VERSION).values() if level) + 1
    assert a.image.configs[(ConfigResourceType.BROKER, "")] == {"min.insync.replicas": "1"}
    assert a.image.highest_offset == last and a.applied_index == 2
    assert not a.needs_bootstrap(is_leader=True, own_leader_change_applied=True), "bootstrapped once"
    assert a.apply(3, "data", stored(noop_batch(), last + 1)) is None
    assert a.image.highest_offset == last + 1


def test_a_log_of_another_cluster_is_refused() -> None:
    a = MetadataApplier("QUJDREVGR0hJSktMTU5PUA", SnapshotPolicy(), now_ms=0)
    with pytest.raises(ClusterIdMismatch, match="belongs to cluster MkU3OEVBNTcwNTJENDM2Qk.*QUJDREVGR0hJSktMTU5PUA"):
        a.apply(1, "data", stored(bootstrap_batch("MkU3OEVBNTcwNTJENDM2Qk"), 0))
    same = MetadataApplier("MkU3OEVBNTcwNTJENDM2Qk", SnapshotPolicy(), now_ms=0)
    assert same.apply(1, "data", stored(bootstrap_batch("MkU3OEVBNTcwNTJENDM2Qk"), 0)) is None, "already known"


def test_snapshots_follow_bytes_and_time_but_never_split_a_transaction() -> None:
    a = MetadataApplier(None, SnapshotPolicy(max_bytes_between=10_000, max_interval_ms=1000), now_ms=0)
    assert not a.snapshot_due(5000), "nothing applied"
    a.apply(1, "data", stored(bootstrap_batch("MkU3OEVBNTcwNTJENDM2Qk"), 0))
    assert not a.snapshot_due(999)
    assert a.snapshot_due(1000)
    a.snapshot_taken(1, now_ms=1000)
    assert not a.snapshot_due(5000), "nothing new since"
    offset, index = a.image.highest_offset + 1, 2
    while a.bytes_since_snapshot < 10_000:
        a.apply(index, "data", stored(noop_batch(), offset))
        index, offset = index + 1, offset + 1
    assert a.snapshot_due(1001), "byte bound reached"
    a.snapshot_taken(index - 1, now_ms=1001)
    begin = record("BeginTransactionRecord", name="an operator's transaction")
    a.apply(index, "data", encode_batch([begin], base_offset=offset))
    assert a.loader.in_transaction and not a.snapshot_due(10_000_000)


def test_a_snapshot_of_the_image_replays_to_the_same_image() -> None:
    a = MetadataApplier(None, SnapshotPolicy(), now_ms=0)
    a.apply(1, "data", stored(bootstrap_batch("MkU3OEVBNTcwNTJENDM2Qk"), 0))
    b = MetadataApplier(None, SnapshotPolicy(), now_ms=0)
    b.load_snapshot(1, decode_batches(a.snapshot_content()), end_offset=3, epoch=1,
                    last_contained_log_time_ms=-1, now_ms=0)
    assert b.image.features == a.image.features and b.image.highest_offset == 2 and b.applied_index == 1
    assert MetadataLoader().image.metadata_version is None


def test_a_member_that_catches_up_from_a_snapshot_learns_the_cluster_id_from_it() -> None:
    # The leader compacted the bootstrap entry into its snapshot: a late member gets only the snapshot.
    a = MetadataApplier(None, SnapshotPolicy(), now_ms=0)
    a.apply(1, "data", stored(bootstrap_batch("MkU3OEVBNTcwNTJENDM2Qk"), 0))
    snapshot = decode_batches(a.snapshot_content())
    late = MetadataApplier(None, SnapshotPolicy(), now_ms=0)
    assert late.load_snapshot(1, snapshot, end_offset=3, epoch=1, last_contained_log_time_ms=-1,
                              now_ms=0) == "MkU3OEVBNTcwNTJENDM2Qk"
    assert late.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    known = MetadataApplier("MkU3OEVBNTcwNTJENDM2Qk", SnapshotPolicy(), now_ms=0)
    assert known.load_snapshot(1, snapshot, end_offset=3, epoch=1, last_contained_log_time_ms=-1, now_ms=0) is None
    other = MetadataApplier("QUJDREVGR0hJSktMTU5PUA", SnapshotPolicy(), now_ms=0)
    with pytest.raises(ClusterIdMismatch, match="snapshot at index 1 belongs to cluster MkU3OEVBNTcwNTJENDM2Qk"):
        other.load_snapshot(1, snapshot, end_offset=3, epoch=1, last_contained_log_time_ms=-1, now_ms=0)


def kraft(**extra: str) -> BrokerConfig:
    return BrokerConfig({"process.roles": "controller", "node.id": "2",
                         "controller.quorum.voters": "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103",
                         "controller.listener.names": "CONTROLLER", "listeners": "CONTROLLER://127.0.0.1:9102",
                         **extra})


def test_kafka_kraft_properties_give_the_quorum_settings() -> None:
    cfg = QuorumConfig.from_broker_config(kraft(**{"controller.quorum.election.timeout.ms": "500"}))
    assert cfg.node_id == 2 and sorted(cfg.voters) == [1, 2, 3]
    assert (cfg.bind_host, cfg.bind_port) == ("127.0.0.1", 9102)
    assert cfg.election_timeout_ms == 500 and cfg.tick_ms == 50
    combined = kraft(**{"process.roles": "broker,controller",
                        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9102"})
    assert combined.quorum_mode and combined.serves_clients and [x.name for x in combined.listeners] == ["PLAINTEXT"]
    assert not BrokerConfig({}).quorum_mode, "no arguments: the single node it always was"


@pytest.mark.parametrize(("extra", "message"), [
    ({"node.id": "7"}, "node.id 7 is not among controller.quorum.voters"),
    ({"listeners": "CONTROLLER://127.0.0.1:9999"}, "listeners: controller listener CONTROLLER is on port 9999"),
    ({"process.roles": "broker", "listeners": "PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9102"},
     "process.roles: a node without the controller role is not a quorum member"),
])
def test_misconfigured_quorum_properties_name_the_key(extra: dict[str, str], message: str) -> None:
    with pytest.raises(QuorumConfigError, match=message):
        QuorumConfig.from_broker_config(kraft(**extra))


def test_the_brokers_log_manager_leaves_the_metadata_log_to_the_raft_layer(tmp_path: Path) -> None:
    from klog._native import LogManager
    from klog.metadata.storage import METADATA_TOPIC, metadata_log_config

    first = LogManager([str(tmp_path)], metadata_log_config())
    first.create(METADATA_TOPIC, 0)
    first.create("orders", 0)
    first.close()
    broker = LogManager([str(tmp_path)], metadata_log_config(), excluded_topics=[METADATA_TOPIC])
    try:
        assert sorted(broker.partitions()) == [("orders", 0)]
    finally:
        broker.close()
    everything = LogManager([str(tmp_path)], metadata_log_config())
    try:
        assert sorted(everything.partitions()) == [(METADATA_TOPIC, 0), ("orders", 0)]
    finally:
        everything.close()


def test_new_cluster_and_topic_ids_never_start_with_a_dash_as_kafkas_random_uuid() -> None:
    # One id in 64 would start with "-" by chance, and `kafka-storage format -t -abc...` then fails (seen in CI).
    from klog.controller.applier import new_cluster_id
    from klog.metadata.storage import kafka_uuid, parse_kafka_uuid, random_kafka_uuid
    cluster_ids = [new_cluster_id() for _ in range(5000)]
    assert not [c for c in cluster_ids if c.startswith("-")]
    assert all(len(c) == 22 and parse_kafka_uuid(c).int > 1 for c in cluster_ids)
    assert len(set(cluster_ids)) == len(cluster_ids)
    assert not [u for u in (random_kafka_uuid() for _ in range(5000)) if kafka_uuid(u).startswith("-")]


def test_a_new_log_dirs_directory_id_never_starts_with_a_dash(tmp_path: Path) -> None:
    # `kafka-metadata-quorum remove-controller --controller-directory-id -abc...` failed on one such id (seen in CI)
    from klog.controller.meta_properties import stored_directory_id, write_meta_properties
    from klog.metadata.storage import kafka_uuid
    ids = []
    for i in range(400):
        write_meta_properties(str(tmp_path / f"d{i}"), 1, "MkU3OEVBNTcwNTJENDM2Qg")
        stored = stored_directory_id(str(tmp_path / f"d{i}"))
        assert stored is not None
        ids.append(kafka_uuid(stored))
    assert not [d for d in ids if d.startswith("-")], ids
    assert len(set(ids)) == len(ids)
