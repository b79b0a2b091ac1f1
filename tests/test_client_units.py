"""Client pieces that need no broker: group protocol blobs and assignors (checked against kafka-python's
implementations as oracles), configuration and per-record futures (the send_batch encoder is tested in
test_batch_encode.py)."""

from __future__ import annotations

import concurrent.futures
import gc
import random
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from klog.client.assignors import MemberSubscription, assign
from klog.client.config import CONSUMER_CONFIG, PRODUCER_CONFIG, parse_bootstrap, resolve_config
from klog.client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from klog.client.errors import ConfigError, KafkaError, NotLeaderOrFollowerError
from klog.client.futures import BatchOutcome, RecordFuture, new_record_future
from klog.client.types import RecordMetadata
from klog._native import _core
from klog.records import decode_batches, encode_batch

kp_subscription = pytest.importorskip("kafka.protocol.consumer.metadata")


# ---------------------------------------------------------------------------------------------- protocol blobs

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_match_kafka_python(version: int) -> None:
    S = kp_subscription.ConsumerProtocolSubscription
    kwargs: dict[str, Any] = dict(version=version, topics=["orders", "users"], user_data=b"ud")
    if version >= 1:
        kwargs["owned_partitions"] = [S.TopicPartition(topic="orders", partitions=[0, 2])]
    if version >= 2:
        kwargs["generation_id"] = 7
    if version >= 3:
        kwargs["rack_id"] = "r1"
    theirs = S(**kwargs).encode()
    ours = encode_subscription(Subscription(["orders", "users"], b"ud",
                                            {"orders": [0, 2]} if version >= 1 else {},
                                            7 if version >= 2 else -1, "r1" if version >= 3 else None, version))
    assert ours == theirs
    back = decode_subscription(theirs)
    assert (back.topics, back.user_data, back.version) == (["orders", "users"], b"ud", version)


@pytest.mark.parametrize("version", [0, 1, 3])
def test_assignment_bytes_match_kafka_python(version: int) -> None:
    A = kp_subscription.ConsumerProtocolAssignment
    theirs = A(version=version, assigned_partitions=[A.TopicPartition(topic="a", partitions=[0, 1]),
                                                      A.TopicPartition(topic="b", partitions=[3])],
               user_data=None).encode()
    ours = encode_assignment(Assignment({"a": [1, 0], "b": [3]}, None, version))
    assert ours == theirs
    assert decode_assignment(theirs).partitions == {"a": [0, 1], "b": [3]}


def test_newer_blob_versions_decode_with_known_fields() -> None:
    blob = encode_subscription(Subscription(["t"], version=3))
    newer = b"\x00\x09" + blob[2:] + b"future-field"
    assert decode_subscription(newer).topics == ["t"]
    assert decode_assignment(b"").partitions == {}


def test_truncated_blob_raises_a_protocol_error() -> None:
    blob = encode_subscription(Subscription(["a-long-topic-name"]))
    with pytest.raises(ValueError, match="ConsumerProtocolSubscription"):
        decode_subscription(blob[:9])


# ---------------------------------------------------------------------------------------------- assignors

def _kafka_python_assign(name: str, members: list[MemberSubscription], counts: dict[str, int]) -> dict[str, Any]:
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    cls = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[name]
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(counts[t])) if t in counts else None)
    kmembers = [SimpleNamespace(member_id=m.member_id, group_instance_id=None,
                                metadata=SimpleNamespace(topics=m.subscription.topics)) for m in members]
    out = cls.assign(cluster, kmembers)
    result: dict[str, Any] = {}
    for mid, a in out.items():
        parts = {}
        for tp in a.assigned_partitions:
            topic, ps = (tp.topic, tp.partitions) if hasattr(tp, "topic") else tp
            if ps:
                parts[topic] = sorted(ps)
        result[mid] = parts
    return result


def _random_group(rng: random.Random, same_topics: bool) -> tuple[list[MemberSubscription], dict[str, int]]:
    topics = {f"t{i}": rng.randint(1, 9) for i in range(rng.randint(1, 4))}
    members = []
    for i in range(rng.randint(1, 6)):
        subs = sorted(topics) if same_topics else rng.sample(sorted(topics), rng.randint(1, len(topics)))
        members.append(MemberSubscription(f"member-{rng.randint(0, 10**6)}-{i}", None, Subscription(subs)))
    return members, topics


@pytest.mark.parametrize("name", ["range", "roundrobin"])
@pytest.mark.parametrize("seed", range(40))
def test_range_and_roundrobin_match_kafka_python(name: str, seed: int) -> None:
    # kafka-python's roundrobin mishandles members with different subscriptions (it rebinds member_id to a
    # tuple while skipping): compare those only on groups where every member subscribes to the same topics.
    members, counts = _random_group(random.Random(seed), same_topics=name == "roundrobin")
    ours = {mid: parts for mid, parts in assign(name, members, counts).items() if parts}
    assert ours == {mid: parts for mid, parts in _kafka_python_assign(name, members, counts).items() if parts}


def _check_complete_and_balanced(result: dict[str, dict[str, list[int]]], members: list[MemberSubscription],
                                 counts: dict[str, int]) -> None:
    owners: dict[tuple[str, int], str] = {}
    for mid, parts in result.items():
        for t, ps in parts.items():
            for p in ps:
                assert (t, p) not in owners, "a partition assigned twice"
                owners[(t, p)] = mid
    subscribed = {t for m in members for t in m.subscription.topics}
    assert set(owners) == {(t, p) for t in subscribed for p in range(counts[t])}
    for m in members:
        assert all(t in m.subscription.topics for t in result[m.member_id])
    if all(set(m.subscription.topics) == subscribed for m in members):
        sizes = [sum(len(ps) for ps in result[m.member_id].values()) for m in members]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("seed", range(40))
def test_sticky_is_complete_balanced_and_keeps_owned_partitions(seed: int) -> None:
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(1, 8) for i in range(rng.randint(1, 3))}
    members = [MemberSubscription(f"m{i}", None, Subscription(sorted(topics))) for i in range(rng.randint(1, 5))]
    first = assign("sticky", members, topics)
    _check_complete_and_balanced(first, members, topics)
    # One more member joins: everyone keeps what they had except what moves to the newcomer.
    for m in members:
        m.subscription.owned_partitions = first[m.member_id]
        m.subscription.generation_id = 1
    members.append(MemberSubscription("zz-new", None, Subscription(sorted(topics))))
    second = assign("sticky", members, topics)
    _check_complete_and_balanced(second, members, topics)
    for m in members[:-1]:
        kept = {(t, p) for t, ps in second[m.member_id].items() for p in ps}
        had = {(t, p) for t, ps in first[m.member_id].items() for p in ps}
        assert kept <= had  # nobody gains partitions from another existing member


def test_cooperative_sticky_withholds_partitions_that_change_owner() -> None:
    topics = {"t": 4}
    a = MemberSubscription("a", None, Subscription(["t"], owned_partitions={"t": [0, 1, 2, 3]}, generation_id=1))
    b = MemberSubscription("b", None, Subscription(["t"]))
    first = assign("cooperative-sticky", [a, b], topics)
    # a keeps two partitions and releases two; b gets nothing yet (those two are still a's).
    assert len(first["a"]["t"]) == 2 and first["b"] == {}
    a.subscription.owned_partitions = first["a"]
    a.subscription.generation_id = 2
    second = assign("cooperative-sticky", [a, b], topics)
    assert second["a"] == first["a"]
    assert sorted(second["b"]["t"]) == sorted(set(range(4)) - set(first["a"]["t"]))


def test_unknown_assignor_is_rejected() -> None:
    with pytest.raises(ValueError, match="assignor"):
        assign("nope", [], {})


# ---------------------------------------------------------------------------------------------- configuration

def test_config_names_with_dots_or_underscores_and_string_values() -> None:
    cfg = resolve_config(PRODUCER_CONFIG, {"bootstrap_servers": "h:1,h2:2", "linger.ms": "7", "acks": "all",
                                           "enable_idempotence": "false"}, kind="producer")
    assert cfg["bootstrap.servers"] == ["h:1", "h2:2"]
    assert (cfg["linger.ms"], cfg["acks"], cfg["enable.idempotence"]) == (7, -1, False)
    assert parse_bootstrap(["h:1", "[::1]:9093", "PLAINTEXT://x:5", "nohost"]) == [
        ("h", 1), ("::1", 9093), ("x", 5), ("nohost", 9092)]


@pytest.mark.parametrize("bad, message", [
    ({"linger_mss": 1}, "did you mean 'linger.ms'"),
    ({"linger.ms": -1}, "linger.ms must be >= 0"),
    ({"acks": 3}, "acks"),
    ({"compression_type": "brotli"}, "compression.type"),
    ({"enable.idempotence": "maybe"}, "enable.idempotence"),
    ({"linger.ms": 1, "linger_ms": 2}, "given twice"),
])
def test_bad_config_names_the_key(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config(PRODUCER_CONFIG, {"bootstrap.servers": "h:1", **bad}, kind="producer")


def test_missing_bootstrap_and_consumer_choices() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        resolve_config(CONSUMER_CONFIG, {}, kind="consumer")
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        resolve_config(CONSUMER_CONFIG, {"bootstrap.servers": "h:1", "auto.offset.reset": "middle"}, kind="consumer")


def test_errors_mirror_kafka_error_codes() -> None:
    err = NotLeaderOrFollowerError()
    assert isinstance(err, KafkaError) and err.code == 6 and err.retriable
    assert ConfigError("x").code == 40


# ---------------------------------------------------------------------------------------------- futures

def test_record_futures_are_real_futures_completed_together() -> None:
    outcome = BatchOutcome("t", 3)
    futures = [new_record_future(outcome, i) for i in range(4)]
    assert all(isinstance(f, concurrent.futures.Future) and isinstance(f, RecordFuture) for f in futures)
    assert futures[0] != futures[1] and len(set(futures)) == 4
    seen: list[Any] = []
    futures[2].add_done_callback(lambda f: seen.append(f.result()))
    assert not futures[0].done() and not futures[0].cancel()
    with pytest.raises(concurrent.futures.TimeoutError):
        futures[0].result(timeout=0.01)
    threading.Timer(0.05, outcome.succeed, args=(100, -1, [1, 2, 3, 4])).start()
    done, pending = concurrent.futures.wait(futures, timeout=5)
    assert len(done) == 4 and not pending
    assert [f.result() for f in futures] == [RecordMetadata("t", 3, 100 + i, i + 1) for i in range(4)]
    assert seen == [RecordMetadata("t", 3, 102, 3)]
    late: list[Any] = []
    futures[0].add_done_callback(lambda f: late.append(f.result().offset))
    assert late == [100]
    with pytest.raises(RuntimeError):
        futures[0].set_result(None)


def test_failed_batch_fails_every_record_future() -> None:
    outcome = BatchOutcome("t", 0)
    futures = [new_record_future(outcome, i) for i in range(3)]
    outcome.fail(NotLeaderOrFollowerError("moved"))
    for f in concurrent.futures.as_completed(futures, timeout=1):
        assert isinstance(f.exception(), NotLeaderOrFollowerError)
        with pytest.raises(NotLeaderOrFollowerError):
            f.result()


def test_each_record_future_is_watched_once_with_both_waiters_and_callbacks() -> None:
    outcome = BatchOutcome("t", 0)
    futures = [new_record_future(outcome, i) for i in range(1000)]
    called: list[int] = []
    for f in futures:
        f.add_done_callback(lambda fut: called.append(fut.result().offset))
    waiting = futures[:10]
    done_later = concurrent.futures.ThreadPoolExecutor(1).submit(concurrent.futures.wait, waiting, timeout=5)
    time.sleep(0.05)
    assert outcome.watched is not None and len(outcome.watched) == 1000  # one entry per future, no duplicates
    outcome.succeed(100, -1, list(range(1000)))
    assert sorted(called) == list(range(100, 1100))
    assert len(done_later.result(timeout=5).done) == 10


def test_log_append_time_replaces_record_timestamps() -> None:
    outcome = BatchOutcome("t", 0)
    f = new_record_future(outcome, 1)
    outcome.succeed(10, 999, None)
    assert f.result() == RecordMetadata("t", 0, 11, 999)


def test_appender_futures_are_record_futures_of_their_batch() -> None:
    outcome = BatchOutcome("t", 2)
    appender = _core.RecordAppender(1 << 20, "none", None, RecordFuture, outcome)
    before = int(time.time() * 1000)
    futures = [appender.append_future(b"k%d" % i if i % 2 else None, b"v%d" % i) for i in range(5)]
    assert all(type(f) is RecordFuture and isinstance(f, concurrent.futures.Future) for f in futures)
    assert [f._index for f in futures] == list(range(5)) and all(f._outcome is outcome for f in futures)
    assert len(appender) == 5 and before <= appender[4] <= int(time.time() * 1000) + 1
    called: list[Any] = []
    futures[3].add_done_callback(lambda f: called.append(f.result().offset))
    waiter = threading.Thread(target=lambda: called.append(futures[1].result(timeout=5).offset))
    waiter.start()
    time.sleep(0.02)
    batch = appender.finish(7, 1, 0)
    outcome.succeed(40, -1, appender)
    waiter.join(5)
    assert sorted(called) == [41, 43]
    assert futures[4].result() == RecordMetadata("t", 2, 44, appender[4])
    [header] = decode_batches(batch)
    records = header.records
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert [(r.key, r.value) for r in records] == [(b"k%d" % i if i % 2 else None, b"v%d" % i) for i in range(5)]
    assert appender.append_future(None, b"late") is None  # finished batches take no more records


def test_appender_refuses_when_full_or_sealed_but_takes_one_oversized_record() -> None:
    appender = _core.RecordAppender(100)
    assert appender.append(None, b"x" * 500, 5) == 0
    assert appender.append(None, b"y", 6) == -1
    other = _core.RecordAppender(1000)
    assert other.append(b"k", b"v", 1, [("h", b"1"), ("n", None)]) == 0
    other.seal()
    assert other.append(None, b"v") == -1 and other.sealed
    [batch] = decode_batches(other.finish(-1, -1, -1))
    [record] = batch.records
    assert record.headers == [("h", b"1"), ("n", None)] and record.timestamp == 1
    with pytest.raises(ValueError, match="already finished"):
        other.finish(-1, -1, -1)
    with pytest.raises(ValueError, match="tuple"):
        _core.RecordAppender(10, "none", None, dict, BatchOutcome("t", 0))


def test_decode_records_builds_consumer_records_natively() -> None:
    from klog.client.types import ConsumerRecord

    first = encode_batch([{"key": b"k0", "value": b"v0", "timestamp": 10, "headers": [("h", b"x"), ("n", None)]},
                          {"key": None, "value": None, "timestamp": 11}], base_offset=5, partition_leader_epoch=3)
    marker = encode_batch([{"key": b"\x00\x00\x00\x01", "value": b"\x00\x00\x00\x00\x00\x00",
                            "timestamp": 12}], base_offset=7, is_control=True, is_transactional=True)
    stamped = encode_batch([{"value": b"v8", "timestamp": 13}], base_offset=8, timestamp_type="log_append",
                           max_timestamp=99)
    data = memoryview(bytearray(first + marker + stamped + stamped[:20]))  # partial trailing batch ignored
    gc_was_on = gc.isenabled()
    records = _core.decode_records(data, ConsumerRecord, "t", 4)
    assert gc.isenabled() == gc_was_on
    assert all(type(r) is ConsumerRecord for r in records)
    assert records == [
        ConsumerRecord("t", 4, 5, 10, b"k0", b"v0", [("h", b"x"), ("n", None)], 0, 3),
        ConsumerRecord("t", 4, 6, 11, None, None, [], 0, 3),
        ConsumerRecord("t", 4, 8, 99, None, b"v8", [], 1, -1),
    ]
    assert records[0].headers is not records[1].headers
    assert [r.offset for r in _core.decode_records(data, ConsumerRecord, "t", 4, min_offset=6)] == [6, 8]
    bad = bytearray(first)
    bad[-1] ^= 0xFF
    with pytest.raises(_core.CorruptRecordError, match="crc|CRC"):
        _core.decode_records(bad, ConsumerRecord, "t", 4)
    with pytest.raises(ValueError, match="tuple"):
        _core.decode_records(first, dict, "t", 4)


def test_request_chunks_pass_large_records_through_and_join_to_the_frame() -> None:
    from klog.protocol import ApiKey, Struct, encode_request, encode_request_chunks

    records = encode_batch([{"value": b"z" * 100_000, "timestamp": 1}])
    body = Struct(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        Struct(name="t", partition_data=[Struct(index=0, records=records)])])
    chunks = encode_request_chunks(ApiKey.PRODUCE, 9, 5, "c", body)
    assert any(c is records for c in chunks)
    joined = b"".join(chunks)
    assert joined == encode_request(ApiKey.PRODUCE, 9, 5, "c", body)
    assert int.from_bytes(joined[:4], "big") == len(joined) - 4
    small = encode_request_chunks(ApiKey.METADATA, 1, 6, "c", Struct(topics=None))
    assert len(small) == 1 and int.from_bytes(bytes(small[0][:4]), "big") == len(small[0]) - 4


def test_roundrobin_with_different_subscriptions_follows_javas_documented_example() -> None:
    # RoundRobinAssignor's javadoc: C0 {t0}, C1 {t0, t1}, C2 {t0, t1, t2}; t0 has 1, t1 2, t2 3 partitions.
    members = [MemberSubscription("C0", None, Subscription(["t0"])),
               MemberSubscription("C1", None, Subscription(["t0", "t1"])),
               MemberSubscription("C2", None, Subscription(["t0", "t1", "t2"]))]
    assert assign("roundrobin", members, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": {"t0": [0]}, "C1": {"t1": [0]}, "C2": {"t1": [1], "t2": [0, 1, 2]}}


def _accumulator(batch_size: int, buffer_memory: int) -> Any:
    from klog.client.accumulator import RecordAccumulator

    return RecordAccumulator(batch_size=batch_size, buffer_memory=buffer_memory, max_request_size=1 << 20,
                             linger_ms=5, asyncio_futures=False, wake=lambda: None)


def test_keyless_records_fill_whole_batches_of_batch_size() -> None:
    # Kafka's default batch.size with 1 KiB records: 15 fit a 16 KiB batch. The sticky partition must switch
    # (here to the same single partition) when the next record would overflow batch.size, so that the next
    # batch gets a full batch.size again instead of a one-record batch of what was left.
    acc = _accumulator(16384, 1 << 26)
    value = b"x" * 1024
    for _ in range(15 * 20):
        acc.append("t", None, None, value, 1, None, 1024 + 16, ([0], [0]), None)
    counts = [len(b.appender) for b in acc.queues[("t", 0)]]
    assert counts == [15] * 20


def test_full_buffer_waits_for_a_whole_batch_instead_of_opening_a_small_one() -> None:
    from klog.client.accumulator import BufferFull

    acc = _accumulator(16384, 16384 + 4096)
    value = b"x" * 1024
    for _ in range(15):
        acc.append("t", 0, None, value, 1, None, 1024 + 16, ([0], [0]), None)
    with pytest.raises(BufferFull) as full:
        acc.append("t", 0, None, value, 1, None, 1024 + 16, ([0], [0]), None)
    assert full.value.wanted == 16384
    assert len(acc.queues[("t", 0)]) == 1


def test_batch_buffer_pool_keeps_bytearrays_within_its_count_and_byte_bounds() -> None:
    from klog.client.batch_encode import BatchBufferPool

    pool = BatchBufferPool(max_buffers=3, max_bytes=2500)
    pool.give(b"bytes are never rewritten")
    pool.give(memoryview(bytearray(10)))
    assert len(pool) == 0
    for _ in range(4):
        pool.give(bytearray(1000))
    assert (len(pool), pool.held_bytes) == (2, 2000)  # a third would pass 2500 bytes
    pool.give(bytearray(500))
    pool.give(bytearray(1))
    assert (len(pool), pool.held_bytes) == (3, 2500)  # the count bound
    taken = pool.take_all()
    assert (len(taken), len(pool), pool.held_bytes) == (3, 0, 0)
    pool.put_back(taken[:1])
    assert (len(pool), pool.held_bytes) == (1, 1000)
