"""The metadata image: Kafka's replay semantics, change sets, and the snapshot round trip.

The property test draws random valid record sequences (brokers registering, fencing, topics created, changed
and deleted, configs, quotas, ACLs, SCRAM, tokens, producer ids, features, metadata transactions committed and
aborted), replays them in randomly cut batches, writes the image as a snapshot file's bytes, reads it back and
checks the reloaded image has the same content.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klog.metadata.delta import MetadataDelta, MetadataReplayError, replay
from klog.metadata.image import (
    EMPTY_IMAGE,
    MIGRATING_DIRECTORY,
    ConfigResourceType,
    LeaderRecoveryState,
    MetadataImage,
)
from klog.metadata.loader import MetadataLoader
from klog.metadata.records import MetadataBatch, decode_batches, encode_batch, record
from klog.metadata.storage import SnapshotId, snapshot_bytes
from klog.metadata.writer import image_records

T1 = uuid.UUID(int=0x1111)
T2 = uuid.UUID(int=0x2222)
INC = uuid.UUID(int=0xABC)


def broker(bid: int, epoch: int = 10, fenced: bool = True, rack: str | None = None):
    return record("RegisterBrokerRecord", broker_id=bid, broker_epoch=epoch, incarnation_id=INC, rack=rack,
                  fenced=fenced, end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000 + bid,
                                              "security_protocol": 0}])


def topic(name: str, tid: uuid.UUID, partitions: int = 1, replicas=(1, 2, 3)):
    out = [record("TopicRecord", name=name, topic_id=tid)]
    for p in range(partitions):
        out.append(record("PartitionRecord", partition_id=p, topic_id=tid, replicas=list(replicas),
                          isr=list(replicas), leader=replicas[0], leader_epoch=0, partition_epoch=0))
    return out


def change(tid: uuid.UUID, partition: int = 0, **fields):
    return record("PartitionChangeRecord", partition_id=partition, topic_id=tid, **fields)


def image_of(records) -> MetadataImage:
    return replay(EMPTY_IMAGE, records, 0)[0]


# ---- Kafka's replay semantics -------------------------------------------------------------------------------


def test_partition_change_sentinels_mean_no_change_and_any_change_bumps_the_partition_epoch():
    img = image_of(topic("t", T1))
    p0 = img.partition("t", 0)
    assert (p0.leader, p0.leader_epoch, p0.partition_epoch, p0.isr) == (1, 0, 0, (1, 2, 3))
    assert p0.directories == (MIGRATING_DIRECTORY,) * 3
    img2, changes = replay(img, [change(T1, isr=[1, 2])])  # leader -2: unchanged, epoch kept
    p = img2.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr, p.replicas) == (1, 0, 1, (1, 2), (1, 2, 3))
    assert [c.partition for c in changes.isr_changes] == [0] and changes.leader_changes == []
    img3, changes = replay(img2, [change(T1, leader=-1)])  # no leader: still a leader change
    p = img3.partition("t", 0)
    assert (p.leader, p.has_leader, p.leader_epoch, p.partition_epoch, p.isr) == (-1, False, 1, 2, (1, 2))
    assert [c.partition for c in changes.leader_changes] == [0]
    img4, _ = replay(img3, [change(T1, leader=3, isr=[3], leader_recovery_state=1, eligible_leader_replicas=[1],
                                   last_known_elr=[2])])
    p = img4.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (3, 2, 3)
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERING and (p.elr, p.last_known_elr) == ((1,), (2,))
    img5, _ = replay(img4, [change(T1, leader_recovery_state=-1, replicas=[3, 4], adding_replicas=[4],
                                   removing_replicas=[])])
    p = img5.partition("t", 0)
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERING  # -1: unchanged
    assert (p.replicas, p.adding_replicas, p.directories) == ((3, 4), (4,), (MIGRATING_DIRECTORY,) * 2)


def test_remove_topic_removes_its_partitions_and_configs():
    recs = topic("a", T1, 3) + topic("b", T2) + [
        record("ConfigRecord", resource_type=2, resource_name="a", name="retention.ms", value="1"),
        record("ConfigRecord", resource_type=2, resource_name="b", name="retention.ms", value="2"),
    ]
    img = image_of(recs)
    img2, changes = replay(img, [record("RemoveTopicRecord", topic_id=T1)])
    assert img2.topic("a") is None and T1 not in img2.topics_by_id
    assert (ConfigResourceType.TOPIC, "a") not in img2.configs
    assert img2.topic_config("b") == {"retention.ms": "2"}
    assert changes.deleted_topics == {T1: "a"} and not changes.changed_partitions
    with pytest.raises(MetadataReplayError, match="offset 5 RemoveTopicRecord v0: unable to delete topic"):
        replay(img2, [record("RemoveTopicRecord", topic_id=T1)], 5)


def test_a_topic_created_and_deleted_in_one_delta_leaves_no_trace_and_names_can_be_reused():
    img = image_of(topic("a", T1))
    img2, changes = replay(img, [record("RemoveTopicRecord", topic_id=T1), *topic("a", T2, 2)])
    assert img2.topic("a").id == T2 and len(img2.topic("a").partitions) == 2
    assert changes.deleted_topics == {T1: "a"} and changes.created_topics == {T2: "a"}
    img3, changes = replay(img2, [*topic("z", T1), record("RemoveTopicRecord", topic_id=T1)])
    assert img3.topic("z") is None and changes.created_topics == {} and changes.deleted_topics == {}
    # an id removed and reused by another topic that is removed again: the image's name goes too
    img4, changes = replay(img2, [record("RemoveTopicRecord", topic_id=T2), *topic("y", T2),
                                  record("RemoveTopicRecord", topic_id=T2)])
    assert dict(img4.topics_by_name) == {} and dict(img4.topics_by_id) == {}
    assert changes.deleted_topics == {T2: "a"}


def test_inconsistent_topic_records_are_errors():
    img = image_of(topic("a", T1))
    with pytest.raises(MetadataReplayError, match="a topic named 'a' already exists"):
        replay(img, topic("a", T2))
    with pytest.raises(MetadataReplayError, match="has no partition 7"):
        replay(img, [change(T1, 7, leader=1)])
    with pytest.raises(MetadataReplayError, match="no topic with id"):
        replay(img, [change(T2, 0, leader=1)])
    placed = image_of(topic("b", T2) + [change(T2, replicas=[1, 2, 3], directories=[uuid.UUID(int=9)] * 3)])
    with pytest.raises(MetadataReplayError, match=r"replicas \[4\] changed but the 3 log directories did not"):
        replay(placed, [change(T2, replicas=[4])])


def test_broker_fencing_follows_the_broker_epoch():
    img = image_of([broker(1, epoch=5), broker(2, epoch=6, fenced=False)])
    assert [b.id for b in img.live_brokers()] == [2]
    img2, changes = replay(img, [record("UnfenceBrokerRecord", id=1, epoch=5),
                                 record("FenceBrokerRecord", id=2, epoch=6)])
    assert [b.id for b in img2.live_brokers()] == [1]
    assert set(changes.changed_brokers) == {1, 2}
    assert changes.changed_brokers[1][0].fenced and not changes.changed_brokers[1][1].fenced
    with pytest.raises(MetadataReplayError, match="did not match the current broker epoch, 5"):
        replay(img2, [record("FenceBrokerRecord", id=1, epoch=4)])
    with pytest.raises(MetadataReplayError, match="broker 9, but that broker was not registered"):
        replay(img2, [record("UnfenceBrokerRecord", id=9, epoch=1)])


def test_broker_registration_change_record_values():
    img = image_of([broker(1, epoch=5)])
    img, _ = replay(img, [record("BrokerRegistrationChangeRecord", broker_id=1, broker_epoch=5, fenced=-1)])
    assert not img.brokers[1].fenced and not img.brokers[1].in_controlled_shutdown
    img, _ = replay(img, [record("BrokerRegistrationChangeRecord", broker_id=1, broker_epoch=5,
                                 in_controlled_shutdown=1)])
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].fenced
    img, changes = replay(img, [record("BrokerRegistrationChangeRecord", broker_id=1, broker_epoch=5)])
    assert changes.changed_brokers == {}  # all "no change"
    img, _ = replay(img, [record("BrokerRegistrationChangeRecord", broker_id=1, broker_epoch=5, fenced=1)])
    assert img.brokers[1].fenced
    with pytest.raises(MetadataReplayError, match="unknown value for the fenced field: 3"):
        replay(img, [record("BrokerRegistrationChangeRecord", broker_id=1, broker_epoch=5, fenced=3)])
    img, changes = replay(img, [broker(1, epoch=20, fenced=True)])  # re-registration: a new broker epoch
    assert img.brokers[1].epoch == 20 and changes.changed_brokers[1][0].epoch == 5
    img, changes = replay(img, [record("UnregisterBrokerRecord", broker_id=1, broker_epoch=20)])
    assert img.brokers == {} and changes.changed_brokers[1][1] is None


def test_features_configs_quotas_and_producer_ids():
    img = image_of([
        record("FeatureLevelRecord", name="metadata.version", feature_level=30),
        record("FeatureLevelRecord", name="group.version", feature_level=1),
        record("ConfigRecord", resource_type=4, resource_name="", name="min.insync.replicas", value="2"),
        record("ClientQuotaRecord", entity=[{"entity_type": "user", "entity_name": "alice"}],
               key="producer_byte_rate", value=1024.0),
        record("ProducerIdsRecord", broker_id=1, broker_epoch=3, next_producer_id=1000),
    ])
    assert img.metadata_version == 30 and img.features["group.version"] == 1
    assert img.configs[(ConfigResourceType.BROKER, "")] == {"min.insync.replicas": "2"}
    assert img.next_producer_id == 1000
    img2, changes = replay(img, [
        record("FeatureLevelRecord", name="group.version", feature_level=0),
        record("ConfigRecord", resource_type=4, resource_name="", name="min.insync.replicas", value=None),
        record("ClientQuotaRecord", entity=[{"entity_type": "user", "entity_name": "alice"}],
               key="producer_byte_rate", remove=True),
        record("ProducerIdsRecord", broker_id=2, broker_epoch=4, next_producer_id=2000),
    ])
    assert dict(img2.features) == {"metadata.version": 30}
    assert img2.configs == {} and img2.client_quotas == {} and img2.next_producer_id == 2000
    assert changes.features_changed and changes.producer_ids_changed
    assert changes.changed_configs == {(ConfigResourceType.BROKER, "")}


def test_clear_elr_record_clears_eligible_leader_replicas():
    img = image_of(topic("a", T1, 2) + [change(T1, 0, eligible_leader_replicas=[2], last_known_elr=[3])])
    img2, changes = replay(img, [record("ClearElrRecord", topic_name="a")])
    p = img2.partition("a", 0)
    assert (p.elr, p.last_known_elr, p.partition_epoch) == ((), (), 2)
    assert img2.partition("a", 1) == img.partition("a", 1)
    assert [c.partition for c in changes.changed_partitions] == [0]
    img3, _ = replay(img, [record("ClearElrRecord", topic_name="")])
    assert img3.partition("a", 0).elr == ()


def test_images_are_immutable():
    img = image_of(topic("a", T1))
    with pytest.raises(TypeError):
        img.topics_by_name["b"] = img.topic("a")  # type: ignore[index]
    with pytest.raises(AttributeError):
        img.highest_offset = 3  # type: ignore[misc]
    before = img.partition("a", 0)
    replay(img, [change(T1, leader=2)])
    assert img.partition("a", 0) is before


def test_loader_applies_metadata_transactions_atomically():
    loader = MetadataLoader()
    begin = record("BeginTransactionRecord", name="create")
    b1 = MetadataBatch(0, 1, 100, False, (begin, *topic("a", T1)), 0)
    changes = loader.apply([b1])
    assert loader.in_transaction and loader.image.topic("a") is None and loader.image.highest_offset == -1
    assert changes.empty
    b2 = MetadataBatch(3, 1, 200, False, (record("EndTransactionRecord"),), 0)
    changes = loader.apply([b2])
    assert loader.image.topic("a") is not None and loader.image.highest_offset == 3
    assert changes.created_topics == {T1: "a"} and loader.image.last_contained_log_time_ms == 200
    b3 = MetadataBatch(4, 2, 300, False, (begin, *topic("b", T2), record("AbortTransactionRecord")), 0)
    loader.apply([b3])
    assert loader.image.topic("b") is None and not loader.in_transaction and loader.image.highest_offset == 7
    with pytest.raises(MetadataReplayError, match="offset 8: EndTransactionRecord without a BeginTransactionRecord"):
        loader.apply([MetadataBatch(8, 2, 300, False, (record("EndTransactionRecord"),), 0)])
    with pytest.raises(MetadataReplayError, match="not after the image's highest offset 7"):
        MetadataLoader(loader.image).apply([b3])


# ---- property: records -> image -> snapshot -> image --------------------------------------------------------

NAMES = ["a", "b", "c", "orders", "__consumer_offsets"]


class Shadow:
    """Which entities exist, so generated records are valid (Kafka's controller never emits invalid ones)."""

    def __init__(self) -> None:
        self.brokers: dict[int, int] = {}  # id -> epoch
        self.topics: dict[uuid.UUID, tuple[str, int]] = {}  # id -> (name, partitions)
        self.acls: set[uuid.UUID] = set()
        self.next_epoch = 1


def draw_op(data: st.DataObject, s: Shadow) -> list:
    ints = st.integers
    kind = data.draw(st.sampled_from(["broker", "broker", "fence", "brc", "unregister", "controller", "topic",
                                      "topic", "topic", "partition", "change", "change", "change", "remove",
                                      "config", "config", "feature", "pid", "quota", "acl", "noacl", "scram",
                                      "token", "elr", "noop"]))
    if kind == "broker":
        bid = data.draw(ints(0, 4))
        s.next_epoch += 1
        s.brokers[bid] = s.next_epoch
        return [broker(bid, s.next_epoch, data.draw(st.booleans()), data.draw(st.sampled_from([None, "r1", "r2"])))]
    if kind in ("fence", "brc", "unregister") and s.brokers:
        bid = data.draw(st.sampled_from(sorted(s.brokers)))
        epoch = s.brokers[bid]
        if kind == "unregister":
            del s.brokers[bid]
            return [record("UnregisterBrokerRecord", broker_id=bid, broker_epoch=epoch)]
        if kind == "fence":
            name = data.draw(st.sampled_from(["FenceBrokerRecord", "UnfenceBrokerRecord"]))
            return [record(name, id=bid, epoch=epoch)]
        return [record("BrokerRegistrationChangeRecord", broker_id=bid, broker_epoch=epoch,
                       fenced=data.draw(st.sampled_from([-1, 0, 1])), in_controlled_shutdown=data.draw(ints(0, 1)),
                       log_dirs=data.draw(st.sampled_from([[], [uuid.UUID(int=7)]])))]
    if kind == "controller":
        return [record("RegisterControllerRecord", controller_id=data.draw(ints(0, 2)), incarnation_id=INC,
                       end_points=[{"name": "CONTROLLER", "host": "h", "port": 1, "security_protocol": 0}],
                       features=[{"name": "kraft.version", "min_supported_version": 0, "max_supported_version": 1}])]
    if kind == "topic":
        free = [n for n in NAMES if n not in {v[0] for v in s.topics.values()}]
        if not free:
            return []
        tid = uuid.UUID(int=data.draw(ints(1, 2**64)))
        if tid in s.topics:
            return []
        n = data.draw(ints(1, 3))
        s.topics[tid] = (data.draw(st.sampled_from(free)), n)
        replicas = data.draw(st.lists(ints(0, 4), min_size=1, max_size=3, unique=True))
        return topic(s.topics[tid][0], tid, n, tuple(replicas))
    if kind in ("partition", "change", "remove", "elr") and s.topics:
        tid = data.draw(st.sampled_from(sorted(s.topics)))
        name, n = s.topics[tid]
        if kind == "remove":
            del s.topics[tid]
            return [record("RemoveTopicRecord", topic_id=tid)]
        if kind == "elr":
            return [record("ClearElrRecord", topic_name=data.draw(st.sampled_from(["", name])))]
        if kind == "partition":
            s.topics[tid] = (name, n + 1)
            return [record("PartitionRecord", partition_id=n, topic_id=tid, replicas=[1], isr=[1], leader=1,
                           leader_epoch=0, partition_epoch=0, directories=[uuid.UUID(int=5)],
                           eligible_leader_replicas=data.draw(st.sampled_from([None, [2]])))]
        maybe_list = st.one_of(st.none(), st.lists(ints(0, 4), max_size=3))
        replicas = data.draw(maybe_list)
        return [change(tid, data.draw(ints(0, n - 1)), isr=data.draw(maybe_list), leader=data.draw(ints(-2, 4)),
                       replicas=replicas, adding_replicas=data.draw(maybe_list),
                       removing_replicas=data.draw(maybe_list), leader_recovery_state=data.draw(ints(-1, 1)),
                       eligible_leader_replicas=data.draw(maybe_list), last_known_elr=data.draw(maybe_list),
                       directories=None if replicas is None else [data.draw(  # sent with replicas, as Kafka does
                           st.sampled_from([MIGRATING_DIRECTORY, uuid.UUID(int=9)]))] * len(replicas))]
    if kind == "config":
        return [record("ConfigRecord", resource_type=data.draw(st.sampled_from([2, 4, 8, 16, 32])),
                       resource_name=data.draw(st.sampled_from(["", "a", "1"])),
                       name=data.draw(st.sampled_from(["retention.ms", "cleanup.policy"])),
                       value=data.draw(st.sampled_from([None, "1", "compact"])))]
    if kind == "feature":
        return [record("FeatureLevelRecord", name=data.draw(st.sampled_from(["metadata.version", "group.version"])),
                       feature_level=data.draw(ints(0, 30)))]
    if kind == "pid":
        return [record("ProducerIdsRecord", broker_id=1, broker_epoch=2, next_producer_id=data.draw(ints(0, 10**6)))]
    if kind == "quota":
        return [record("ClientQuotaRecord", entity=[{"entity_type": "user", "entity_name": data.draw(
            st.sampled_from([None, "alice"]))}], key="producer_byte_rate", value=float(data.draw(ints(0, 9))),
            remove=data.draw(st.booleans()))]
    if kind == "acl":
        aid = uuid.UUID(int=data.draw(ints(1, 5)))
        s.acls.add(aid)
        return [record("AccessControlEntryRecord", id=aid, resource_type=2, resource_name="t", pattern_type=3,
                       principal="User:alice", host="*", operation=3, permission_type=3)]
    if kind == "noacl" and s.acls:
        aid = data.draw(st.sampled_from(sorted(s.acls)))
        s.acls.discard(aid)
        return [record("RemoveAccessControlEntryRecord", id=aid)]
    if kind == "scram":
        if data.draw(st.booleans()):
            return [record("RemoveUserScramCredentialRecord", name="alice", mechanism=1)]
        return [record("UserScramCredentialRecord", name="alice", mechanism=1, salt=b"s", stored_key=b"k",
                       server_key=b"v", iterations=4096)]
    if kind == "token":
        if data.draw(st.booleans()):
            return [record("RemoveDelegationTokenRecord", token_id="tok")]
        return [record("DelegationTokenRecord", owner="User:a", requester="User:a", renewers=["User:b"],
                       issue_timestamp=1, max_timestamp=2, expiration_timestamp=3, token_id="tok")]
    return [record("NoOpRecord")]


def draw_log(data: st.DataObject) -> list:
    shadow = Shadow()
    out: list = []
    for _ in range(data.draw(st.integers(0, 40))):
        if data.draw(st.integers(0, 9)) == 0:  # a metadata transaction, committed or aborted
            inner = copy.deepcopy(shadow)
            recs = [r for _ in range(data.draw(st.integers(0, 4))) for r in draw_op(data, inner)]
            commit = data.draw(st.booleans())
            if commit:
                shadow = inner
            end = record("EndTransactionRecord") if commit else record("AbortTransactionRecord", reason="test")
            out += [record("BeginTransactionRecord", name="txn"), *recs, end]
        else:
            out += draw_op(data, shadow)
    return out


def batches_of(records: list, cuts: list[int], epoch: int = 3) -> list[MetadataBatch]:
    """Encode records into batches cut at ``cuts`` and decode them back, as the log would hold them."""
    out, start, offset = [], 0, 0
    for cut in sorted(set(cuts)) + [len(records)]:
        chunk = records[start:cut]
        if chunk:
            out += decode_batches(encode_batch(chunk, base_offset=offset, epoch=epoch, timestamp=1000 + offset))
            offset += len(chunk)
        start = max(start, cut)
    return out


def _replayed_snapshotted_and_reloaded_give_the_same_image(data):
    records = draw_log(data)
    cuts = data.draw(st.lists(st.integers(0, max(len(records), 1)), max_size=6))
    loader = MetadataLoader()
    batches = batches_of(records, cuts)
    # one delta per batch, or all batches in one delta: the same image
    for b in batches:
        loader.apply([b])
    whole = MetadataLoader()
    whole.apply(batches)
    assert loader.image == whole.image
    image = loader.image
    assert image.highest_offset == len(records) - 1 or records[-1].name == "BeginTransactionRecord" or \
        loader.in_transaction or not records

    sid = SnapshotId(image.highest_offset + 1, 3)
    snap = decode_batches(snapshot_bytes(image_records(image), sid,
                                         last_contained_log_time_ms=image.last_contained_log_time_ms))
    reloaded = MetadataLoader()
    reloaded.load_snapshot([b for b in snap if not b.is_control], end_offset=sid.end_offset, epoch=sid.epoch,
                           last_contained_log_time_ms=image.last_contained_log_time_ms)
    assert reloaded.image.same_content(image)
    assert reloaded.image.highest_offset == image.highest_offset
    # and the snapshot of the reloaded image is the same list of records
    assert image_records(reloaded.image) == image_records(image)


@pytest.mark.parametrize("examples", [250, pytest.param(1000, marks=pytest.mark.long)])  # CI, nightly
def test_random_records_replayed_then_snapshotted_then_reloaded_give_the_same_image(examples):
    settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
        given(st.data())(_replayed_snapshotted_and_reloaded_give_the_same_image))()


def test_delta_changes_list_new_partitions_of_an_existing_topic():
    img = image_of(topic("a", T1, 1))
    delta = MetadataDelta(img)
    delta.replay(record("PartitionRecord", partition_id=1, topic_id=T1, replicas=[2], isr=[2], leader=2,
                        leader_epoch=0, partition_epoch=0))
    new, changes = delta.apply()
    assert [(c.partition, c.before) for c in changes.changed_partitions] == [(1, None)]
    assert changes.created_topics == {} and sorted(new.topic("a").partitions) == [0, 1]
