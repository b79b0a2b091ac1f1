"""klog.client.direct: partition-level Metadata, ListOffsets, Fetch at an explicit offset and Produce of encoded
batches (what klog's Spark source and sink use), against Apache Kafka 4.x and klog's broker."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

import klog
from klog.client.direct import AsyncDirectClient, DirectClient, scan_batches
from klog.client.errors import ConfigError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from klog.client.types import TopicPartition
from klog.records import decode_batches, encode_batch

BASE_TS = 1_700_000_000_000


def new_topic(bootstrap: str, partitions: int) -> str:
    name = f"direct-{uuid.uuid4().hex[:12]}"
    with klog.AdminClient(bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(name, partitions, 1)])
    return name


@pytest.fixture()
def topic(bootstrap: str) -> str:
    return new_topic(bootstrap, 2)


@pytest.fixture()
def client(bootstrap: str) -> Iterator[DirectClient]:
    with DirectClient(bootstrap, client_id="direct-test", retries=2, retry_backoff_ms=10) as c:
        yield c


def batch(first: int, count: int, base_offset: int = 0) -> bytes:
    """``count`` records valued ``v<first>``... with timestamps BASE_TS + their number (produced batches start at
    offset 0: the leader assigns the offsets)."""
    return encode_batch([{"key": None, "value": b"v%d" % i, "timestamp": BASE_TS + i}
                         for i in range(first, first + count)], base_offset=base_offset)


def values(records: memoryview) -> list[bytes]:
    return [r.value for b in decode_batches(records) for r in b.records]


def test_produced_batches_are_fetched_raw_from_an_explicit_offset(client: DirectClient, topic: str) -> None:
    tp = TopicPartition(topic, 1)
    for first in (0, 3, 6):  # three batches of three records: offsets 0-2, 3-5, 6-8
        client.produce({tp: batch(first, 3)})

    fetched = client.fetch(tp, 3, max_wait_ms=100)

    assert fetched.error_code == 0 and fetched.error is None
    assert (fetched.fetch_offset, fetched.high_watermark, fetched.log_start_offset) == (3, 9, 0)
    assert values(fetched.records) == [b"v%d" % i for i in range(3, 9)]
    assert fetched.next_offset == 9 and not fetched.truncated
    assert client.fetch(TopicPartition(topic, 0), 0, max_wait_ms=10).records.nbytes == 0


def test_a_fetch_can_be_on_the_wire_while_the_caller_works(client: DirectClient, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    client.produce({tp: batch(0, 5)}, acks=1)
    pending = client.start_fetch(tp, 0, max_wait_ms=100)
    produced = client.start_produce({tp: batch(5, 5)})
    produced.result(timeout=30)
    assert values(pending.result(timeout=30).records)[:5] == [b"v%d" % i for i in range(5)]
    assert values(client.fetch(tp, 5, max_wait_ms=100).records) == [b"v%d" % i for i in range(5, 10)]


def wait_until_led(client: DirectClient, tp: TopicPartition, timeout_s: float = 30.0) -> None:
    """Until the partition's leader serves it: Apache Kafka names a new topic's leader in Metadata before its
    replica manager takes the partition, and an acks=0 batch sent then is refused without an answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.list_offsets({tp: -1})
            return
        except klog.client.errors.KafkaError:
            assert time.monotonic() < deadline, f"{tp} got no serving leader"
            time.sleep(0.05)


def test_acks_0_batches_are_written_without_an_answer(client: DirectClient, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    wait_until_led(client, tp)
    client.produce({tp: batch(0, 2)}, acks=0)
    client.produce({tp: batch(2, 2)})  # acks=all after it on the same connection: the first one is in
    assert values(client.fetch(tp, 0, max_wait_ms=100).records) == [b"v0", b"v1", b"v2", b"v3"]


def test_a_fetch_beyond_the_log_end_answers_offset_out_of_range(client: DirectClient, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    client.produce({tp: batch(0, 2)})
    fetched = client.fetch(tp, 1000, max_wait_ms=10)
    assert isinstance(fetched.error, OffsetOutOfRangeError)
    assert fetched.records.nbytes == 0 and fetched.next_offset == 1000


def test_list_offsets_finds_the_ends_and_the_first_offset_at_a_timestamp(client: DirectClient, topic: str) -> None:
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    client.produce({tp0: batch(0, 4), tp1: batch(0, 1)})

    assert {tp: o.offset for tp, o in client.list_offsets({tp0: -2, tp1: -1}).items()} == {tp0: 0, tp1: 1}
    at = client.list_offsets({tp0: BASE_TS + 2, tp1: BASE_TS + 5})
    assert (at[tp0].offset, at[tp0].timestamp) == (2, BASE_TS + 2)
    assert at[tp1].offset == -1  # no record that late


def test_results_are_keyed_by_the_callers_own_partition_objects(client: DirectClient, topic: str) -> None:
    class Printed(TopicPartition):
        __slots__ = ()

        def __str__(self) -> str:
            return f"{self.topic}-{self.partition}"

    mine = Printed(topic, 0)
    (key,) = client.list_offsets({mine: -1})
    assert key is mine


def test_an_unknown_partition_raises_unknown_topic_or_partition_once_retries_are_spent(
        client: DirectClient, topic: str) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match=f"after 3 attempts.*{topic}-7"):
        client.list_offsets({TopicPartition(topic, 7): -2})
    with pytest.raises(UnknownTopicOrPartitionError):
        client.fetch(TopicPartition(f"absent-{uuid.uuid4().hex[:8]}", 0), 0)


def test_metadata_names_exactly_the_topics_asked_for(client: DirectClient, topic: str, bootstrap: str) -> None:
    other = new_topic(bootstrap, 1)
    absent = f"absent-{uuid.uuid4().hex[:8]}"

    md = client.metadata([topic, absent])

    assert set(md.topics) == {topic}
    assert sorted(md.topics[topic].partitions) == [0, 1]
    assert all(p.leader in md.brokers for p in md.topics[topic].partitions.values())
    assert md.topic_errors == {absent: UnknownTopicOrPartitionError.code}
    assert {topic, other} <= set(client.metadata().topics)  # None: every topic


def test_the_asyncio_client_answers_the_same(bootstrap: str, topic: str) -> None:
    async def main() -> list[bytes]:
        async with AsyncDirectClient(bootstrap) as c:
            tp = TopicPartition(topic, 1)
            await c.produce({tp: batch(0, 2)})
            return values((await c.fetch(tp, 0, max_wait_ms=100)).records)

    assert asyncio.run(main()) == [b"v0", b"v1"]


def test_only_the_shared_client_configs_and_retries_are_accepted(bootstrap: str) -> None:
    with pytest.raises(ConfigError, match="acks"):
        DirectClient(bootstrap, acks=1)


def test_scan_batches_counts_only_whole_batches() -> None:
    data = batch(0, 2) + batch(2, 3, base_offset=2)
    assert scan_batches(memoryview(data)) == (len(data), 5)
    cut = memoryview(data)[:-1]
    assert scan_batches(cut) == (len(batch(0, 2)), 2)
    assert scan_batches(memoryview(data)[:30]) == (0, -1)
