"""What a single voter's controller decides for its own node, pure (klog.controller.single_voter_start, and the
placement rule klog.controller.topics.uncordoned_brokers): its registration and broker epoch at each start, the
elections of its unfencing, and which brokers new replicas may go to while its log dirs are all cordoned; and a new
cluster's ELR safety records read off the image of the bootstrap records (klog.controller.applier.bootstrap_records).
Images are built by replaying records, as every node builds its own."""

from __future__ import annotations

import uuid

from klog.controller.applier import bootstrap_records
from klog.controller.partition_change import ELR_FEATURE
from klog.controller.single_voter_start import (
    SUPPORTED_FEATURES,
    own_registration,
    registration_epoch,
    start_elections,
)
from klog.controller.topics import TopicControlManager, uncordoned_brokers
from klog.metadata.config import BrokerConfig
from klog.metadata.delta import replay
from klog.metadata.features import MV_CORDONED_LOG_DIRS
from klog.metadata.image import NO_LEADER, ConfigResourceType, MetadataImage
from klog.metadata.records import MetadataRecord, record

TOPIC = uuid.UUID(int=0x51)
BROKER = int(ConfigResourceType.BROKER)


def _image(*records: MetadataRecord, metadata_version: int = MV_CORDONED_LOG_DIRS, elr: int = 1) -> MetadataImage:
    head = [record("FeatureLevelRecord", name="metadata.version", feature_level=metadata_version),
            record("FeatureLevelRecord", name=ELR_FEATURE, feature_level=elr)]
    return replay(MetadataImage(), [*head, *records], 0)[0]


def _broker(broker_id: int, **fields: object) -> MetadataRecord:
    return record("RegisterBrokerRecord", **{"broker_id": broker_id, "broker_epoch": 10 + broker_id,
                                             "incarnation_id": uuid.UUID(int=broker_id), "fenced": False,
                                             "in_controlled_shutdown": False, **fields})


def _partition(pid: int, *, leader: int, isr: list[int], elr: list[int] | None = None) -> MetadataRecord:
    return record("PartitionRecord", partition_id=pid, topic_id=TOPIC, replicas=[1, 2], isr=isr, leader=leader,
                  leader_epoch=3, partition_epoch=5, eligible_leader_replicas=elr or [], last_known_elr=[])


def test_the_registration_epoch_is_its_offset_after_the_records_committed_with_it() -> None:
    assert registration_epoch(40, 0, 10_000) == 40
    assert registration_epoch(0, 7, 10_000) == 7   # a new cluster's first records come first
    # more records than a batch holds: a metadata transaction, its BeginTransactionRecord before them
    assert registration_epoch(0, 10_000, 10_000) == 10_001


def test_a_single_voter_registers_its_bound_listeners_unfenced_with_no_log_dirs() -> None:
    config = BrokerConfig({"node.id": 3, "broker.rack": "r1",
                           "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL"})
    incarnation = uuid.UUID(int=9)
    registration = own_registration(config, {"PLAINTEXT": ("127.0.0.1", 9092), "SECURE": ("127.0.0.1", 9093)}, 41,
                                    incarnation)
    data = registration.data
    assert registration.name == "RegisterBrokerRecord"
    assert (data.broker_id, data.broker_epoch, data.incarnation_id, data.rack) == (3, 41, incarnation, "r1")
    assert (data.fenced, data.in_controlled_shutdown, data.log_dirs) == (False, False, [])
    assert [(e.name, e.host, e.port, e.security_protocol) for e in data.end_points] == [
        ("PLAINTEXT", "127.0.0.1", 9092, 0), ("SECURE", "127.0.0.1", 9093, 3)]
    assert [(f.name, f.min_supported_version, f.max_supported_version) for f in data.features] == list(
        SUPPORTED_FEATURES)
    assert own_registration(config, {}, 41).data.incarnation_id != own_registration(config, {}, 41).data.incarnation_id


def test_a_single_voter_leads_again_the_partitions_left_without_a_leader_that_it_may_lead() -> None:
    image = _image(_broker(1), _broker(2, fenced=True), record("TopicRecord", name="t", topic_id=TOPIC),
                   _partition(0, leader=NO_LEADER, isr=[], elr=[1]),   # Kafka's controlled shutdown left it so
                   _partition(1, leader=1, isr=[1]),                    # led already
                   _partition(2, leader=NO_LEADER, isr=[2]))            # only another broker may lead it
    elections = start_elections(image, BrokerConfig({"node.id": 1}))
    assert [(r.name, r.data.partition_id, r.data.leader) for r in elections] == [("PartitionChangeRecord", 0, 1)]
    after = replay(image, elections, image.highest_offset + 1)[0]
    assert after.topics_by_id[TOPIC].partitions[0].leader == 1
    assert start_elections(after, BrokerConfig({"node.id": 1})) == []
    # an unclean election where the topic allows one: the other broker's partition too
    unclean = start_elections(image, BrokerConfig({"node.id": 1, "unclean.leader.election.enable": "true"}))
    assert [(r.data.partition_id, r.data.leader) for r in unclean] == [(0, 1), (2, 1)]


def test_a_broker_that_reported_all_its_log_dirs_cordoned_gets_no_new_replica_from_4_3_iv0() -> None:
    image = _image(_broker(1), _broker(2))
    assert uncordoned_brokers(image, [1, 2]) == [1, 2]
    assert uncordoned_brokers(image, [1, 2], {1}) == [2]
    # before metadata.version 4.3-IV0 brokers report no cordoned dirs: what one says is not counted
    assert uncordoned_brokers(_image(_broker(1), _broker(2), metadata_version=MV_CORDONED_LOG_DIRS - 1),
                              [1, 2], {1}) == [1, 2]
    # what a registration says counts as before: every registered dir cordoned
    dirs = [uuid.UUID(int=0xd1), uuid.UUID(int=0xd2)]
    cordoned = _image(_broker(1, log_dirs=dirs, cordoned_log_dirs=dirs), _broker(2, log_dirs=dirs,
                                                                               cordoned_log_dirs=dirs[:1]))
    assert uncordoned_brokers(cordoned, [1, 2]) == [2]

    manager = TopicControlManager(BrokerConfig({}))
    manager.report_all_dirs_cordoned(1, True)
    manager.report_all_dirs_cordoned(2, False)
    assert manager.reported_all_dirs_cordoned == {1}
    manager.report_all_dirs_cordoned(1, False)
    assert manager.reported_all_dirs_cordoned == frozenset()


def _min_isr(resource: str, value: str | None) -> MetadataRecord:
    return record("ConfigRecord", resource_type=BROKER, resource_name=resource, name="min.insync.replicas",
                  value=value)


def test_a_new_clusters_elr_safety_records_follow_the_image_of_its_other_bootstrap_records() -> None:
    def safety(*extra: MetadataRecord) -> list[tuple[str, str | None]]:
        return [(r.data.resource_name, r.data.value) for r in bootstrap_records(extra, static_min_insync_replicas=2)
                if r.name == "ConfigRecord" and r not in extra]

    assert safety() == [("", "2")]
    assert safety(_min_isr("", "3")) == []                       # a cluster-level value written by format stays
    assert safety(_min_isr("", "3"), _min_isr("1", "2")) == [("1", None)]   # a broker-level one is removed
    # set and removed again: none, as the image of the records holds none
    assert safety(_min_isr("", "3"), _min_isr("", None)) == [("", "2")]
    # ELR off: nothing added
    off = [record("FeatureLevelRecord", name="metadata.version", feature_level=MV_CORDONED_LOG_DIRS),
           record("FeatureLevelRecord", name=ELR_FEATURE, feature_level=0)]
    assert [r.name for r in bootstrap_records(off)] == ["FeatureLevelRecord"]
