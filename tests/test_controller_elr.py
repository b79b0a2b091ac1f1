"""Eligible leader replicas (KIP-966) on the controller, pure (klog.controller.partition_change through the paths
that use it: fencing, AlterPartition, unfencing, unclean-shutdown registration): images built by replaying records,
PartitionChangeRecords out, replayed again to check what every broker would then serve."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from klog.controller.brokers import ClusterControlManager, leader_and_isr_changes
from klog.controller.partition_change import ELR_FEATURE, Election, effective_min_isr, elr_enabled, partition_change
from klog.controller.partitions_isr import alter_partition
from klog.metadata.delta import replay
from klog.metadata.image import NO_LEADER, LeaderRecoveryState, MetadataImage
from klog.metadata.records import record
from klog.protocol import ApiKey, decode_body, encode_body

TOPIC = uuid.UUID(int=0x966)
EPOCHS = {1: 101, 2: 102, 3: 103}


def cluster(*, isr: list[int], leader: int, elr_level: int = 1, min_isr: str | None = "2", fenced: tuple[int, ...] = (),
            elr: list[int] | None = None, last_known_elr: list[int] | None = None) -> MetadataImage:
    recs = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    if elr_level:
        recs.append(record("FeatureLevelRecord", name=ELR_FEATURE, feature_level=elr_level))
    for b, e in EPOCHS.items():
        recs.append(record("RegisterBrokerRecord", broker_id=b, broker_epoch=e, incarnation_id=uuid.UUID(int=b),
                           fenced=b in fenced, in_controlled_shutdown=False))
    recs.append(record("TopicRecord", name="t", topic_id=TOPIC))
    if min_isr is not None:
        recs.append(record("ConfigRecord", resource_type=2, resource_name="t", name="min.insync.replicas",
                           value=min_isr))
    recs.append(record("PartitionRecord", partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3], isr=isr, leader=leader,
                       leader_epoch=7, partition_epoch=20, eligible_leader_replicas=elr or [],
                       last_known_elr=last_known_elr or []))
    return replay(MetadataImage(), recs, 0)[0]


def part(image: MetadataImage):
    return image.topics_by_id[TOPIC].partitions[0]


def apply(image: MetadataImage, records: list[Any]) -> MetadataImage:
    return replay(image, list(records), image.highest_offset + 1)[0]


def live(image: MetadataImage):
    return lambda b: b in image.brokers and not image.brokers[b].fenced


def fence(image: MetadataImage, broker: int) -> MetadataImage:
    """The partition changes of fencing ``broker`` (Kafka's handleBrokerFenced), then the fence itself."""
    changes = leader_and_isr_changes(image, live(image), lambda _t: False, iter([(image.topic("t"), 0, part(image))]),
                                     remove=broker)
    fenced = record("BrokerRegistrationChangeRecord", broker_id=broker, broker_epoch=EPOCHS[broker], fenced=1)
    return apply(image, [*changes, fenced])


def shrink(image: MetadataImage, isr: list[int]) -> MetadataImage:
    p = part(image)
    body = {"broker_id": p.leader, "broker_epoch": EPOCHS[p.leader], "topics": [{"topic_id": TOPIC, "partitions": [{
        "partition_index": 0, "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
        "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": EPOCHS[b]} for b in isr],
        "leader_recovery_state": 0}]}]}
    request = decode_body(ApiKey.ALTER_PARTITION, 3, encode_body(ApiKey.ALTER_PARTITION, 3, body, response=False),
                          response=False)[0]
    result = alter_partition(request, 3, image)
    assert result.response["topics"][0]["partitions"][0]["error_code"] == 0
    return apply(image, result.records)


def test_a_new_cluster_finalizes_eligible_leader_replicas_and_min_isr_is_capped_at_the_replication_factor():
    assert elr_enabled(cluster(isr=[1, 2, 3], leader=1))
    assert not elr_enabled(cluster(isr=[1, 2, 3], leader=1, elr_level=0))
    assert effective_min_isr(cluster(isr=[1], leader=1, min_isr="5"), cluster(isr=[1], leader=1).topic("t")) == 3
    assert effective_min_isr(cluster(isr=[1], leader=1, min_isr=None), cluster(isr=[1], leader=1).topic("t"), 2) == 2


def test_replicas_leaving_an_isr_below_min_isr_become_eligible_leaders_and_an_expansion_clears_them():
    image = shrink(cluster(isr=[1, 2, 3], leader=1), [1, 2])
    assert (part(image).isr, part(image).elr) == ((1, 2), ())   # still at min.insync.replicas: no ELR
    image = shrink(image, [1])
    assert (part(image).isr, part(image).elr, part(image).leader_epoch) == ((1,), (2,), 7)
    image = shrink(image, [1, 3])
    assert (part(image).isr, part(image).elr, part(image).last_known_elr) == ((1, 3), (), ())


def test_fencing_the_last_isr_member_empties_the_isr_and_an_eligible_replica_leads_with_nothing_acknowledged_lost():
    image = cluster(isr=[1, 2, 3], leader=1)
    image = fence(image, 3)                      # ISR 1,2: at min ISR, no ELR
    image = fence(image, 2)                      # ISR 1: 2 is eligible (it has everything below the frozen HW)
    assert (part(image).leader, part(image).isr, part(image).elr) == (1, (1,), (2,))
    image = fence(image, 1)                      # the leader dies: ISR empty, no live eligible replica
    p = part(image)
    assert (p.leader, p.isr, sorted(p.elr), p.last_known_elr) == (NO_LEADER, (), [1, 2], (1,))
    # broker 3 comes back: it is neither in the ISR nor eligible (it missed acknowledged records), so it does not lead
    unfence3 = record("BrokerRegistrationChangeRecord", broker_id=3, broker_epoch=EPOCHS[3], fenced=-1)
    image = apply(image, [unfence3, *leader_and_isr_changes(image, live(apply(image, [unfence3])), lambda _t: False,
                                                          iter([(image.topic("t"), 0, part(image))]), add=3)])
    assert part(image).leader == NO_LEADER
    # broker 2 comes back: an eligible leader replica, it leads alone in the ISR and leaves the ELR
    unfence2 = record("BrokerRegistrationChangeRecord", broker_id=2, broker_epoch=EPOCHS[2], fenced=-1)
    image = apply(image, [unfence2, *leader_and_isr_changes(image, live(apply(image, [unfence2])), lambda _t: False,
                                                          iter([(image.topic("t"), 0, part(image))]), add=2)])
    p = part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == \
        (2, (2,), (1,), (), LeaderRecoveryState.RECOVERED)


def test_without_the_feature_the_last_isr_member_stays_in_the_isr_and_no_elr_is_kept():
    image = cluster(isr=[1, 2, 3], leader=1, elr_level=0)
    for b in (3, 2, 1):
        image = fence(image, b)
    p = part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, (1,), (), ())


def test_with_isr_and_elr_empty_the_last_known_leader_leads_as_an_unclean_recovering_election():
    image = cluster(isr=[], leader=NO_LEADER, elr=[], last_known_elr=[2])
    change = partition_change(image.topic("t"), 0, part(image), target_isr=[], acceptable=lambda b: b in (2, 3),
                              elr=True, min_isr=2)
    p = apply(image, [change]).topics_by_id[TOPIC].partitions[0]
    assert (p.leader, p.isr, p.leader_recovery_state, p.last_known_elr) == (2, (2,), LeaderRecoveryState.RECOVERING, ())
    # a dead last known leader is no leader: the partition stays offline (unclean election off)
    assert partition_change(image.topic("t"), 0, part(image), target_isr=[], acceptable=lambda b: b == 3, elr=True,
                            min_isr=2) is None


def test_an_unclean_election_clears_the_elr():
    image = cluster(isr=[], leader=NO_LEADER, elr=[1], last_known_elr=[1])
    change = partition_change(image.topic("t"), 0, part(image), target_isr=[], acceptable=lambda b: b == 3,
                              elr=True, min_isr=2, election=Election.UNCLEAN)
    p = apply(image, [change]).topics_by_id[TOPIC].partitions[0]
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state) == (3, (3,), (), LeaderRecoveryState.RECOVERING)


def test_a_restarted_broker_that_did_not_shut_down_cleanly_leaves_every_isr_and_elr():
    image = cluster(isr=[1], leader=1, elr=[2])
    c = ClusterControlManager("cid")
    c.activate(image, 0)
    request = SimpleNamespace(broker_id=2, cluster_id="cid", incarnation_id=uuid.UUID(int=99), previous_broker_epoch=-1,
                              listeners=[SimpleNamespace(name="PLAINTEXT", host="127.0.0.1", port=1,
                                                         security_protocol=0)],
                              features=[SimpleNamespace(name="metadata.version", min_supported_version=1,
                                                        max_supported_version=25),
                                        SimpleNamespace(name=ELR_FEATURE, min_supported_version=0,
                                                        max_supported_version=1)],
                              rack=None, log_dirs=[])
    result = c.register_broker(request, image, 60_000, record_offset=500)
    assert result.response["error_code"] == 0
    assert part(apply(image, result.records)).elr == ()
    # one that names its previous epoch shut down cleanly and stays eligible
    clean = c.register_broker(SimpleNamespace(**{**vars(request), "previous_broker_epoch": EPOCHS[2]}), image, 60_000,
                              record_offset=501)
    assert part(apply(image, clean.records)).elr == (2,)
