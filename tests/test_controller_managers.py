"""The controller's topic and config managers, pure: requests and an image in, records and responses out.

No sockets, no files: each operation is decided on an image built by replaying records, and its records are
replayed to check the image they lead to (what the broker would then serve).
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace as NS

import pytest

from klog.broker.config import BrokerConfig
from klog.controller.configs import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, ConfigControlManager
from klog.controller.topics import MAX_PARTITIONS_PER_TOPIC, CreatableTopic, TopicControlManager, place_replicas
from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, MetadataImage
from klog.metadata.records import record
from klog.protocol.errors import ErrorCode

NOW = 1_700_000_000_000
ZERO = uuid.UUID(int=0)


def broker_record(broker_id: int, *, fenced: bool = False, rack: str | None = None):
    return record("RegisterBrokerRecord", broker_id=broker_id, incarnation_id=uuid.uuid4(), broker_epoch=broker_id,
                  end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092 + broker_id,
                               "security_protocol": 0}],
                  features=[], rack=rack, fenced=fenced)


def cluster(*broker_ids: int, fenced: tuple[int, ...] = ()) -> MetadataImage:
    records = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    records += [broker_record(b, fenced=b in fenced) for b in broker_ids]
    return replay(EMPTY_IMAGE, records, 0)[0]


def ids():
    n = 0

    def next_id() -> uuid.UUID:
        nonlocal n
        n += 1
        return uuid.UUID(int=n)
    return next_id


def topics_manager(max_replication_factor: int = 3, **props) -> TopicControlManager:
    # placement over several brokers is decided here already; the broker caps replicas at 1 until replication
    return TopicControlManager(BrokerConfig(props), new_topic_id=ids(), max_replication_factor=max_replication_factor)


def committed(image: MetadataImage, result) -> MetadataImage:
    return replay(image, list(result.records), image.highest_offset + 1)[0]


def test_create_topics_places_each_partition_on_the_registered_broker_with_its_configs():
    image = cluster(1)
    result = topics_manager().create_topics([CreatableTopic("orders", 3, 1, None, {"retention.ms": "1000"})],
                                            image, NOW)
    [created] = result.response
    answer = created.item
    assert (answer["error_code"], answer["num_partitions"], answer["replication_factor"]) == (0, 3, 1)
    assert "configs" not in answer and created.overrides == {"retention.ms": "1000"}
    after = committed(image, result)
    topic = after.topic("orders")
    assert topic is not None and topic.id == answer["topic_id"]
    assert [(p, r.replicas, r.isr, r.leader, r.leader_epoch) for p, r in sorted(topic.partitions.items())] == [
        (0, (1,), (1,), 1, 0), (1, (1,), (1,), 1, 0), (2, (1,), (1,), 1, 0)]
    assert after.topic_config("orders") == {"retention.ms": "1000"}


def test_broker_defaults_fill_in_minus_one_and_validate_only_commits_nothing():
    image = cluster(1)
    manager = topics_manager(**{"num.partitions": 4})
    result = manager.create_topics([CreatableTopic("d")], image, NOW, validate_only=True)
    assert result.records == () and result.response[0].item["num_partitions"] == 4
    assert committed(image, result).topic("d") is None


def test_replication_factor_is_bounded_by_the_live_brokers_and_the_configured_maximum():
    image = cluster(1, 2, 3)
    manager = TopicControlManager(BrokerConfig({}), new_topic_id=ids())
    for item in (CreatableTopic("rf3", 2, 3), CreatableTopic("manual", -1, -1, {0: [1, 2]})):
        assert manager.create_topics([item], image, NOW).response[0].item["error_code"] == 0
    refused = manager.create_topics([CreatableTopic("rf4", 1, 4)], image, NOW)
    assert refused.records == [] and refused.response[0].item["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    capped = TopicControlManager(BrokerConfig({}), new_topic_id=ids(), max_replication_factor=1)
    refused = capped.create_topics([CreatableTopic("rf2", 1, 2)], image, NOW)
    assert refused.response[0].item["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "larger than the maximum of 1" in refused.response[0].item["error_message"]


def test_replicas_are_striped_over_live_brokers_and_fenced_ones_are_left_out():
    assert place_replicas([1, 2, 3], 0, 4, 2) == [[1, 2], [2, 3], [3, 1], [1, 2]]
    image = cluster(1, 2, 3, fenced=(2,))
    result = topics_manager().create_topics([CreatableTopic("s", 2, 2)], image, NOW)
    topic = committed(image, result).topic("s")
    assert [r.replicas for _, r in sorted(topic.partitions.items())] == [(1, 3), (3, 1)]
    refused = topics_manager().create_topics([CreatableTopic("t", 1, 3)], image, NOW)
    assert refused.records == [] and refused.response[0].item["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "only 2 broker(s) are registered" in refused.response[0].item["error_message"]


@pytest.mark.parametrize("item, code", [
    (CreatableTopic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (CreatableTopic("zero", 0), ErrorCode.INVALID_PARTITIONS),
    # past what one request may make (Kafka's MAX_PARTITIONS_PER_BATCH, the same bound): the whole request
    (CreatableTopic("huge", MAX_PARTITIONS_PER_TOPIC + 1), ErrorCode.POLICY_VIOLATION),
    (CreatableTopic("cfg", 1, 1, None, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
    (CreatableTopic("cfg", 1, 1, None, {"no.such.key": "1"}), ErrorCode.INVALID_CONFIG),
    (CreatableTopic("both", 2, -1, {0: [1]}), ErrorCode.INVALID_REQUEST),
    (CreatableTopic("gap", -1, -1, {0: [1], 2: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (CreatableTopic("ghost", -1, -1, {0: [7]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (CreatableTopic("twice", -1, -1, {0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
])
def test_a_refused_topic_gets_kafkas_error_and_no_records(item, code):
    result = topics_manager().create_topics([item], cluster(1), NOW)
    assert result.records == []
    assert result.response[0].item["error_code"] == code and result.response[0].item["error_message"]


def test_one_request_checks_names_against_existing_topics_and_refuses_its_repeats():
    """As Kafka's controller: a '.'/'_' collision only with a topic committed before the request (y.z and y_z of
    one request are both made)."""
    image = cluster(1)
    manager = topics_manager()
    image = committed(image, manager.create_topics([CreatableTopic("a.b", 1)], image, NOW))
    result = manager.create_topics([CreatableTopic("x", 1), CreatableTopic("x", 1), CreatableTopic("a.b", 1),
                                    CreatableTopic("a_b", 1), CreatableTopic("y", 1), CreatableTopic("y.z", 1),
                                    CreatableTopic("y_z", 1)], image, NOW)
    codes = {(r.item["name"], r.item["error_code"]) for r in result.response}
    assert codes == {("x", ErrorCode.INVALID_REQUEST), ("a.b", ErrorCode.TOPIC_ALREADY_EXISTS),
                     ("a_b", ErrorCode.INVALID_TOPIC_EXCEPTION), ("y", 0), ("y.z", 0),
                     ("y_z", 0)}
    assert sorted(committed(image, result).topics_by_name) == ["a.b", "y", "y.z", "y_z"]


def test_manual_assignment_sets_partitions_and_replicas():
    image = cluster(1, 2)
    result = topics_manager().create_topics([CreatableTopic("m", -1, -1, {0: [2, 1], 1: [1, 2]})], image, NOW)
    assert result.response[0].item["num_partitions"] == 2 and result.response[0].item["replication_factor"] == 2
    topic = committed(image, result).topic("m")
    assert [(r.replicas, r.leader) for _, r in sorted(topic.partitions.items())] == [((2, 1), 2), ((1, 2), 1)]


def test_delete_topics_by_name_and_id_removes_topic_and_configs():
    image = cluster(1)
    manager = topics_manager()
    image = committed(image, manager.create_topics([CreatableTopic("a", 2, 1, None, {"retention.ms": "5"}),
                                                    CreatableTopic("b", 1)], image, NOW))
    b_id = image.topic("b").id
    result = manager.delete_topics([("a", ZERO), (None, b_id), ("missing", ZERO), (None, uuid.uuid4()),
                                    ("__consumer_offsets", ZERO)], image, NOW)
    assert [(r["name"], r["error_code"]) for r in result.response] == [
        ("a", 0), ("b", 0), ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (None, ErrorCode.UNKNOWN_TOPIC_ID),
        ("__consumer_offsets", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    after = committed(image, result)
    assert after.topics_by_name == {} and after.topic_config("a") == {}


def test_internal_topics_and_disabled_deletion_are_refused():
    image = cluster(1)
    manager = topics_manager(**{"delete.topic.enable": False})
    image = committed(image, manager.create_internal_topic("__consumer_offsets", 3, 3, {"cleanup.policy": "compact"},
                                                           image))
    offsets = image.topic("__consumer_offsets")
    assert len(offsets.partitions) == 3 and offsets.partitions[0].replicas == (1,)   # RF capped at the brokers
    image = committed(image, manager.create_topics([CreatableTopic("t", 1)], image, NOW))
    result = manager.delete_topics([("__consumer_offsets", ZERO), ("t", ZERO)], image, NOW)
    assert [r["error_code"] for r in result.response] == [ErrorCode.INVALID_REQUEST,
                                                           ErrorCode.TOPIC_DELETION_DISABLED]
    assert result.records == []


def test_create_partitions_adds_partitions_with_the_topics_replication_factor():
    image = cluster(1, 2)
    manager = topics_manager()
    image = committed(image, manager.create_topics([CreatableTopic("p", 1, 2)], image, NOW))
    request = NS(validate_only=False, topics=[NS(name="p", count=3, assignments=None),
                                              NS(name="q", count=3, assignments=None)])
    result = manager.create_partitions(request, image, NOW)
    assert [r["error_code"] for r in result.response] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    after = committed(image, result)
    assert [r.replicas for _, r in sorted(after.topic("p").partitions.items())] == [(1, 2), (2, 1), (1, 2)]
    for count, code in ((3, ErrorCode.INVALID_PARTITIONS), (2, ErrorCode.INVALID_PARTITIONS)):
        again = manager.create_partitions(NS(validate_only=False, topics=[NS(name="p", count=count, assignments=None)]),
                                          after, NOW)
        assert again.response[0]["error_code"] == code and again.records == []
    wrong = manager.create_partitions(NS(validate_only=False, topics=[
        NS(name="p", count=4, assignments=[NS(broker_ids=[1])])]), after, NOW)
    assert wrong.response[0]["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    checked = manager.create_partitions(NS(validate_only=True, topics=[NS(name="p", count=5, assignments=None)]),
                                        after, NOW)
    assert checked.response[0]["error_code"] == 0 and checked.records == ()


def test_partitions_past_the_cluster_limit_are_refused_with_policy_violation_and_no_records():
    image = cluster(1)
    manager = TopicControlManager(BrokerConfig({}), new_topic_id=ids(), max_partitions_per_cluster=10)
    result = manager.create_topics([CreatableTopic("a", 4, 1), CreatableTopic("b", 4, 1), CreatableTopic("c", 4, 1)],
                                   image, NOW)
    # the request's own earlier topics count: a and b fit (8), c would make 12
    assert [r.item["error_code"] for r in result.response] == [0, 0, ErrorCode.POLICY_VIOLATION]
    assert "limit of 10 partitions per cluster" in result.response[2].item["error_message"]
    image = committed(image, result)
    assert image.topic("c") is None and len(image.topic("a").partitions) == 4
    grow = manager.create_partitions(NS(validate_only=False, topics=[NS(name="a", count=6, assignments=None),
                                                                     NS(name="b", count=5, assignments=None)]),
                                     image, NOW)
    assert [r["error_code"] for r in grow.response] == [0, ErrorCode.POLICY_VIOLATION]
    after = committed(image, grow)
    assert (len(after.topic("a").partitions), len(after.topic("b").partitions)) == (6, 4)


def alter(name, *items):
    return NS(resource_type=2, resource_name=name,
              configs=[NS(name=k, value=v, config_operation=op) for k, op, v in items])


def test_incremental_alter_configs_sets_deletes_appends_and_subtracts():
    image = cluster(1)
    image = committed(image, topics_manager().create_topics(
        [CreatableTopic("c", 1, 1, None, {"retention.ms": "100", "segment.bytes": "1048576"})], image, NOW))
    manager = ConfigControlManager(BrokerConfig({}), node_id=1)
    result = manager.alter_configs([alter("c", ("retention.ms", OP_SET, "200"), ("segment.bytes", OP_DELETE, None),
                                          ("cleanup.policy", OP_APPEND, "compact"))], image, NOW,
                                   incremental=True, validate_only=False)
    assert result.response[0]["error_code"] == 0
    image = committed(image, result)
    assert image.topic_config("c") == {"retention.ms": "200", "cleanup.policy": "delete,compact"}
    result = manager.alter_configs([alter("c", ("cleanup.policy", OP_SUBTRACT, "delete"))], image, NOW,
                                   incremental=True, validate_only=False)
    assert committed(image, result).topic_config("c") == {"retention.ms": "200", "cleanup.policy": "compact"}


def test_alter_configs_replaces_all_overrides_and_bad_values_change_nothing():
    image = cluster(1)
    image = committed(image, topics_manager().create_topics(
        [CreatableTopic("c", 1, 1, None, {"retention.ms": "100"})], image, NOW))
    manager = ConfigControlManager(BrokerConfig({}), node_id=1)
    result = manager.alter_configs([alter("c", ("segment.ms", OP_SET, "5000"))], image, NOW, incremental=False,
                                   validate_only=False)
    assert committed(image, result).topic_config("c") == {"segment.ms": "5000"}
    assert manager.alter_configs([alter("c", ("segment.ms", OP_SET, "5000"))], image, NOW, incremental=False,
                                 validate_only=True).records == ()
    bad = manager.alter_configs([alter("c", ("retention.ms", OP_SET, "x")), alter("nope", ("retention.ms", OP_SET, "1")),
                                 alter("c", ("max.message.bytes", OP_APPEND, "1")),
                                 NS(resource_type=4, resource_name="1",
                                    configs=[NS(name="num.partitions", value="3", config_operation=OP_SET)]),
                                 NS(resource_type=4, resource_name="x", configs=[])],
                                image, NOW, incremental=True, validate_only=False)
    # a static broker config is one Kafka cannot update dynamically: INVALID_REQUEST, as Kafka answers it
    assert [r["error_code"] for r in bad.response] == [
        ErrorCode.INVALID_CONFIG, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    assert bad.records == []


def test_replication_throttle_rates_are_dynamic_broker_configs_per_broker_or_cluster_wide():
    image = cluster(1, 2)
    manager = ConfigControlManager(BrokerConfig({}), node_id=1)

    def broker_alter(name, *items):
        return NS(resource_type=4, resource_name=name,
                  configs=[NS(name=k, value=v, config_operation=op) for k, op, v in items])

    result = manager.alter_configs([broker_alter("2", ("follower.replication.throttled.rate", OP_SET, "1024"),
                                                 ("leader.replication.throttled.rate", OP_SET, "2048")),
                                    broker_alter("", ("follower.replication.throttled.rate", OP_SET, "4096"))],
                                   image, NOW, incremental=True, validate_only=False)
    assert [r["error_code"] for r in result.response] == [0, 0]
    image = committed(image, result)
    assert dict(image.configs[(4, "2")]) == {"follower.replication.throttled.rate": "1024",
                                             "leader.replication.throttled.rate": "2048"}
    assert dict(image.configs[(4, "")]) == {"follower.replication.throttled.rate": "4096"}
    # kafka-reassign-partitions --verify clears all three rates, set or not
    cleared = manager.alter_configs([broker_alter("2", *[(k, OP_DELETE, None) for k in (
        "leader.replication.throttled.rate", "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second")])], image, NOW, incremental=True, validate_only=False)
    assert cleared.response[0]["error_code"] == 0
    assert (4, "2") not in committed(image, cleared).configs
    bad = manager.alter_configs([broker_alter("2", ("follower.replication.throttled.rate", OP_SET, "-5")),
                                 broker_alter("2", ("follower.replication.throttled.rate", OP_SET, "fast")),
                                 broker_alter("2", ("follower.replication.throttled.rate", OP_APPEND, "1"))],
                                image, NOW, incremental=True, validate_only=False)
    # a bad value is INVALID_REQUEST as Kafka's DynamicBrokerConfig answers it (KAFKA-13609), an APPEND to a
    # number INVALID_CONFIG
    assert [r["error_code"] for r in bad.response] == [ErrorCode.INVALID_REQUEST] * 2 + [ErrorCode.INVALID_CONFIG]
    assert bad.records == []


def test_producer_id_blocks_never_overlap_and_continue_from_the_image():
    from klog.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, allocate_producer_ids

    image = cluster(1, 2)
    blocks = []
    for broker_id in (1, 2, 1):
        result = allocate_producer_ids(broker_id, broker_id, image)
        blocks.append(result.response)
        image = committed(image, result)
    assert blocks == [(0, PRODUCER_ID_BLOCK_SIZE), (PRODUCER_ID_BLOCK_SIZE, PRODUCER_ID_BLOCK_SIZE),
                      (2 * PRODUCER_ID_BLOCK_SIZE, PRODUCER_ID_BLOCK_SIZE)]
    assert image.next_producer_id == 3 * PRODUCER_ID_BLOCK_SIZE
    with pytest.raises(OverflowError):
        allocate_producer_ids(1, 1, replay(image, [record("ProducerIdsRecord", broker_id=1, broker_epoch=1,
                                                          next_producer_id=2**63 - 10)], 100)[0])


def rack_cluster(racks: dict[int, str | None]) -> MetadataImage:
    records = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    records += [broker_record(b, rack=rack) for b, rack in racks.items()]
    return replay(EMPTY_IMAGE, records, 0)[0]


def test_rack_aware_placement_puts_a_partitions_replicas_on_distinct_racks_and_spreads_leaders():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    placed = place_replicas(sorted(racks), 0, 6, 3, racks)
    for replicas in placed:
        assert sorted(racks[b] for b in replicas) == ["a", "b", "c"], placed
    assert sorted(r[0] for r in placed) == [1, 2, 3, 4, 5, 6]   # every broker leads one partition
    # more replicas than racks: every rack once before any rack twice, never a broker twice
    for replicas in place_replicas(sorted(racks), 0, 6, 4, racks):
        assert len(set(replicas)) == 4 and len({racks[b] for b in replicas[:3]}) == 3
    # an uneven rack: its one broker still gets a replica of each partition when RF = racks
    uneven = {1: "a", 2: "b", 3: "b", 4: "b"}
    for replicas in place_replicas([1, 2, 3, 4], 0, 5, 2, uneven):
        assert {uneven[b] for b in replicas} == {"a", "b"}


def test_the_controller_places_by_the_registered_racks_and_shifts_the_stripe_per_topic():
    image = rack_cluster({1: "r1", 2: "r1", 3: "r2", 4: "r2"})
    manager = topics_manager(max_replication_factor=2)
    result = manager.create_topics([CreatableTopic("t", 4, 2)], image, NOW)
    image = committed(image, result)
    racks = {b.id: b.rack for b in image.brokers.values()}
    partitions = image.topic("t").partitions
    assert all({racks[b] for b in p.replicas} == {"r1", "r2"} for p in partitions.values())
    assert sorted(p.leader for p in partitions.values()) == [1, 2, 3, 4]
    # one-partition topics created one after the other are led by different brokers
    leaders = []
    for name in ("u", "v", "w", "x"):
        image = committed(image, manager.create_topics([CreatableTopic(name, 1, 1)], image, NOW))
        leaders.append(image.topic(name).partitions[0].leader)
    assert sorted(leaders) == [1, 2, 3, 4], leaders


def test_allocate_producer_ids_answers_a_registered_broker_of_its_epoch_and_refuses_a_stale_one():
    from klog.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, answer_allocate_producer_ids

    image = cluster(1, 2)   # broker_record: each broker's epoch is its id
    first = answer_allocate_producer_ids(NS(broker_id=2, broker_epoch=2), image)
    assert first.response == {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 0,
                              "producer_id_len": PRODUCER_ID_BLOCK_SIZE}
    image = committed(image, first)
    second = answer_allocate_producer_ids(NS(broker_id=1, broker_epoch=1), image)
    assert second.response["producer_id_start"] == PRODUCER_ID_BLOCK_SIZE
    for stale in (NS(broker_id=1, broker_epoch=7), NS(broker_id=9, broker_epoch=9)):
        refused = answer_allocate_producer_ids(stale, image)
        assert refused.records == () and refused.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH


def test_delete_topics_refuses_a_repeated_name_or_id_and_deletes_none_of_it():
    """Kafka's ControllerApis.deleteTopics: a repeated name or id gets INVALID_REQUEST at each repeat and no result
    at its first mention, and is not deleted; an item with neither a name nor an id is INVALID_REQUEST."""
    image = cluster(1)
    manager = topics_manager()
    image = committed(image, manager.create_topics([CreatableTopic("a", 1), CreatableTopic("b", 1),
                                                    CreatableTopic("c", 1)], image, NOW))
    b_id = image.topic("b").id
    result = manager.delete_topics([("a", ZERO), (None, b_id), ("a", ZERO), (None, ZERO), (None, b_id),
                                    ("c", ZERO), (None, ZERO), ("a", ZERO)], image, NOW)
    assert [(r["name"], r["error_code"], r["error_message"]) for r in result.response] == [
        ("a", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        (None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (None, ErrorCode.INVALID_REQUEST, "Duplicate topic id."), ("c", 0, None),
        (None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("a", ErrorCode.INVALID_REQUEST, "Duplicate topic name.")]
    assert sorted(committed(image, result).topics_by_name) == ["a", "b"]


def test_create_topics_refuses_a_null_config_value_and_a_partition_assigned_twice():
    """Kafka's ReplicationControlManager: INVALID_CONFIG for a null config value, INVALID_REPLICA_ASSIGNMENT for a
    partition index the assignments name twice (a dict of them would keep the last)."""
    image = cluster(1)
    manager = topics_manager()
    twice = CreatableTopic.from_request(NS(name="twice", num_partitions=-1, replication_factor=-1, configs=[],
                                           assignments=[NS(partition_index=0, broker_ids=[1]),
                                                        NS(partition_index=0, broker_ids=[1])]))
    result = manager.create_topics([CreatableTopic("null", 1, 1, None, {"retention.ms": None}), twice], image, NOW)
    assert [(r.item["error_code"], r.item["error_message"]) for r in result.response] == [
        (ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms"),
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for partition 0")]
    assert result.records == []
