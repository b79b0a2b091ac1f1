"""klog's Python client (klog.Producer / klog.Consumer / klog.AdminClient) against real brokers.

Every test runs twice: against Apache Kafka 4.x (started once per session from the Maven jars) and against
klog's own broker. Topics are created per test, so tests are independent within one broker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import queue
import socket
import struct
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import klog
from klog.client import ConsumerRecord, RecordMetadata, TopicPartition
from klog.client.errors import (
    CommitFailedError,
    ConfigError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from klog.partitioner import partition_for_key
from klog.records import decode_batches
from klog.testing.process import BrokerProcess
from klog.testing.wire import read_frame

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[klog.AdminClient]:
    a = klog.AdminClient(bootstrap)
    yield a
    a.close()


@pytest.fixture()
def topic(admin: klog.AdminClient) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    admin.create_topics([name], num_partitions=1, replication_factor=1)
    return name


def make_topic(admin: klog.AdminClient, partitions: int, **config: str) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    admin.create_topics([klog.client.NewTopic(name, partitions, 1, config)])
    return name


def consume(bootstrap: str, tps: list[tuple[str, int]], count: int, **config: Any) -> list[ConsumerRecord]:
    """Read ``count`` records from the beginning of ``tps`` (bounded by DEADLINE_S)."""
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **config) as c:
        c.assign(tps)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            out += c.poll(timeout=1.0)
        return out


# ---------------------------------------------------------------------------------------------------- producer

def test_send_resolves_futures_with_consecutive_offsets(bootstrap: str, topic: str) -> None:
    with klog.Producer(bootstrap) as p:
        futures = [p.send(topic, b"value-%d" % i) for i in range(500)]
        assert all(isinstance(f, concurrent.futures.Future) for f in futures)
        p.flush(timeout=DEADLINE_S)
        assert all(f.done() for f in futures)
        metas = [f.result() for f in futures]
    assert all(isinstance(m, RecordMetadata) for m in metas)
    assert [m.offset for m in metas] == list(range(500))
    assert {(m.topic, m.partition) for m in metas} == {(topic, 0)}
    now_ms = time.time() * 1000
    assert all(now_ms - 60_000 < m.timestamp <= now_ms + 1000 for m in metas)


def test_records_round_trip_with_keys_headers_nulls_and_timestamps(bootstrap: str, topic: str) -> None:
    sent = [
        dict(value=b"plain"),
        dict(value=b"keyed", key=b"k"),
        dict(value=None, key=b"tombstone"),
        dict(value=b"", key=b""),
        dict(value=b"with-headers", headers=[("a", b"1"), ("b", None), ("a", b"2")]),
        dict(value="text é", key="clé", headers={"h": "v"}),
        dict(value=b"ts", timestamp=1_600_000_000_123),
    ]
    with klog.Producer(bootstrap) as p:
        for kw in sent:
            p.send(topic, **kw)
        p.flush()
    got = consume(bootstrap, [(topic, 0)], len(sent))
    assert [(r.key, r.value, r.headers) for r in got] == [
        (None, b"plain", []),
        (b"k", b"keyed", []),
        (b"tombstone", None, []),
        (b"", b"", []),
        (None, b"with-headers", [("a", b"1"), ("b", None), ("a", b"2")]),
        ("clé".encode(), "text é".encode(), [("h", b"v")]),
        (None, b"ts", []),
    ]
    assert got[-1].timestamp == 1_600_000_000_123
    assert [r.offset for r in got] == list(range(len(sent)))


def test_log_append_time_topics_report_broker_timestamps(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 1, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000) - 1000
    with klog.Producer(bootstrap) as p:
        md = p.send(topic, b"v", timestamp=1_000).result(DEADLINE_S)
    assert md.timestamp >= before  # the broker's append time, not the record's 1000
    (r,) = consume(bootstrap, [(topic, 0)], 1)
    assert (r.timestamp, r.timestamp_type) == (md.timestamp, 1)


def test_keyed_records_go_to_java_murmur2_partitions(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 6)
    keys = [b"key-%d" % i for i in range(300)]
    with klog.Producer(bootstrap) as p:
        metas = [f.result(DEADLINE_S) for f in [p.send(topic, b"v", key=k) for k in keys]]
    assert [m.partition for m in metas] == [partition_for_key(k, 6) for k in keys]
    assert len({m.partition for m in metas}) == 6


def test_keyless_records_stick_to_a_partition_then_move_on(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 4)
    with klog.Producer(bootstrap, batch_size=2000, linger_ms=50) as p:
        metas = [f.result(DEADLINE_S) for f in [p.send(topic, b"x" * 100) for _ in range(400)]]
    parts = [m.partition for m in metas]
    # Sticky: long runs on one partition (KIP-794 switches after batch.size bytes), not round-robin per record.
    runs = [len(list(g)) for _, g in itertools.groupby(parts)]
    assert max(runs) >= 10
    assert len(set(parts)) > 1


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec_round_trips(bootstrap: str, topic: str, codec: str) -> None:
    values = [(b"%05d-" % i) * (i % 50 + 1) for i in range(300)]
    with klog.Producer(bootstrap, compression_type=codec) as p:
        for v in values:
            p.send(topic, v, key=v[:5])
        p.flush()
    got = consume(bootstrap, [(topic, 0)], len(values))
    assert [r.value for r in got] == values


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_settings_deliver_records(bootstrap: str, topic: str, acks: Any) -> None:
    with klog.Producer(bootstrap, acks=acks) as p:
        metas = [f.result(DEADLINE_S) for f in [p.send(topic, b"r%d" % i) for i in range(50)]]
    if acks == 0:
        assert all(m.offset == -1 for m in metas)  # no acknowledgement, no offset
    else:
        assert [m.offset for m in metas] == list(range(50))
    assert [r.value for r in consume(bootstrap, [(topic, 0)], 50)] == [b"r%d" % i for i in range(50)]


def test_delivery_callbacks_get_metadata_or_error(bootstrap: str, topic: str) -> None:
    reports: list[tuple[Any, Any]] = []
    with klog.Producer(bootstrap) as p:
        for i in range(20):
            p.send(topic, b"v%d" % i, on_delivery=lambda err, md: reports.append((err, md)))
        p.flush()
    assert len(reports) == 20
    assert all(err is None for err, _ in reports)
    assert sorted(md.offset for _, md in reports) == list(range(20))


def test_idempotent_producer_writes_producer_id_and_sequences(bootstrap: str, topic: str) -> None:
    with klog.Producer(bootstrap, linger_ms=0, batch_size=200) as p:
        for i in range(30):
            p.send(topic, b"x" * 50)
        p.flush()
    batches = read_raw_batches(bootstrap, topic, 0)
    assert all(b.producer_id >= 0 for b in batches)
    assert len({b.producer_id for b in batches}) == 1
    expected = 0
    for b in batches:
        assert b.base_sequence == expected
        expected += b.records_count
    assert expected == 30


def test_send_batch_batches_carry_producer_id_and_contiguous_sequences(bootstrap: str, topic: str) -> None:
    with klog.Producer(bootstrap, batch_size=20_000) as p:
        p.send_batch(topic, np.zeros((3000, 30), dtype=np.uint8))
        p.send_batch(topic, [b"v%d" % i for i in range(500)])
        p.flush()
    batches = read_raw_batches(bootstrap, topic, 0)
    assert len(batches) > 2
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    expected = 0
    for b in batches:
        assert b.base_sequence == expected
        expected += b.records_count
    assert expected == 3500


def test_non_idempotent_producer_writes_no_producer_id(bootstrap: str, topic: str) -> None:
    with klog.Producer(bootstrap, enable_idempotence=False, acks=1) as p:
        p.send(topic, b"x").result(DEADLINE_S)
    (b,) = read_raw_batches(bootstrap, topic, 0)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)


def cut_connection_after_every(p: klog.Producer, nth: int) -> None:
    """Every ``nth`` produce request: close the connection right after writing it. The broker may or may not have
    appended it; either way the producer sees a lost connection and resends the same sequence numbers."""
    core = p._core
    send_produce = core._send_produce
    sent = 0

    def send_then_cut(node: int, batches: list[Any]) -> None:
        nonlocal sent
        send_produce(node, batches)
        sent += 1
        if sent % nth == 0:
            conn = core.cluster._conns.get(node)
            if conn is not None:
                conn.close()

    core._send_produce = send_then_cut  # type: ignore[method-assign]


@pytest.mark.long
def test_retries_after_dropped_connections_never_duplicate(bootstrap: str, topic: str) -> None:
    # Connections are cut while produce requests are in flight; the idempotent producer resends the same
    # sequence numbers and the broker drops what it already has: every record lands exactly once, in order.
    n = 20_000
    with klog.Producer(bootstrap, linger_ms=1, batch_size=4096, retry_backoff_ms=10) as p:
        core = p._core
        cut_connection_after_every(p, 15)
        futures = [p.send(topic, b"%08d" % i) for i in range(n)]
        p.flush(timeout=60)
        assert all(f.exception() is None for f in futures)
        assert core.retried_batches > 0  # the cuts did hit requests in flight
        assert len(core.batch_buffers) > 0  # batches were finished into buffers of earlier ones
    got = consume(bootstrap, [(topic, 0)], n + 1000, fetch_max_wait_ms=100)
    assert [r.value for r in got] == [b"%08d" % i for i in range(n)]


def _proxied_frame(sock: socket.socket) -> bytes | None:
    """The next whole frame from ``sock``, size prefix included (what a proxy forwards); None once it closed."""
    try:
        body = read_frame(sock)
    except ConnectionError:
        return None
    return struct.pack(">i", len(body)) + body


class ProduceAnswerDropper:
    """A TCP proxy in front of one broker. While ``drop_answers_to`` is set, it forwards each Produce request whose
    bytes hold it, waits for the broker's answer (so the batch is appended for sure), drops that answer and closes
    the connection: the producer sees a lost connection and never learns that its records were written."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.drop_answers_to: bytes | None = None
        self.dropped = threading.Event()
        self.sockets: list[socket.socket] = []
        self.threads: list[threading.Thread] = []

    def start(self, broker_port: int) -> None:
        self._spawn(self._accept, broker_port)

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self, broker_port: int) -> None:
        while True:
            try:
                client, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", broker_port))
            except OSError:
                return
            self.sockets += [client, upstream]
            produce_answer: dict[str, int] = {}  # the correlation id of the answer to drop on this connection
            self._spawn(self._pump, client, upstream, produce_answer, True)
            self._spawn(self._pump, upstream, client, produce_answer, False)

    def _pump(self, src: socket.socket, dst: socket.socket, produce_answer: dict[str, int], requests: bool) -> None:
        try:
            while (frame := _proxied_frame(src)) is not None:
                marker = self.drop_answers_to
                if requests and marker is not None and struct.unpack(">h", frame[4:6])[0] == 0 and marker in frame:
                    produce_answer["correlation_id"] = struct.unpack(">i", frame[8:12])[0]
                if not requests and struct.unpack(">i", frame[4:8])[0] == produce_answer.get("correlation_id"):
                    self.dropped.set()
                    return
                dst.sendall(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)  # a close alone leaves the other pump's recv (and the peer) waiting
                s.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self.threads:
            t.join(5)


def test_epoch_bump_for_another_partition_keeps_a_retry_its_sequence(tmp_path: Any) -> None:
    # Batch A (partition 0) is appended but every answer to it is lost, so it is retried until the test lets one
    # through; meanwhile a batch on partition 1 fails for good (MESSAGE_TOO_LARGE): partition 1's sequence chain has
    # a gap, and the epoch is bumped. A must go on with its first producer id, epoch and sequence, which the broker
    # knows as a duplicate: renumbered from 0 under the new epoch, it was appended a second time.
    proxy = ProduceAnswerDropper()
    broker = BrokerProcess(tmp_path, {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    try:
        broker.start()
        proxy.start(broker.port)
        bootstrap = f"127.0.0.1:{proxy.port}"
        with klog.AdminClient(bootstrap) as admin:
            topic = make_topic(admin, 2, **{"max.message.bytes": "2000"})
        with klog.Producer(bootstrap, linger_ms=0) as p:
            p.send(topic, b"warm-up", partition=0).result(DEADLINE_S)  # a producer id, a connection
            proxy.drop_answers_to = b"value-A"
            a = p.send(topic, b"value-A", partition=0)
            assert proxy.dropped.wait(DEADLINE_S)
            too_large = p.send(topic, b"x" * 5000, partition=1)
            with pytest.raises(KafkaError, match="max.message.bytes"):
                too_large.result(DEADLINE_S)
            b = p.send(topic, b"B", partition=1)
            b.result(DEADLINE_S)
            assert not a.done()  # the bump came while A waited for an answer
            proxy.drop_answers_to = None
            assert a.result(DEADLINE_S).offset in (1, -1)
        values = {part: [r.value for batch in read_raw_batches(bootstrap, topic, part) for r in batch.records]
                  for part in (0, 1)}
        assert values == {0: [b"warm-up", b"value-A"], 1: [b"B"]}
    finally:
        proxy.close()
        broker.stop()


def wait_for_free_buffers(p: klog.Producer) -> int:
    """Wait (bounded) until at least one buffer kept for reuse is free of exports; returns how many are.

    A buffer may still be exported for a moment after flush() (the connection drops its view of a written request
    on the event loop thread): the encoder passes such a buffer over and never rewrites it."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        free = 0
        for buf in list(p._core.batch_buffers._free):
            try:
                buf.append(0)  # a resize: refused while a view of the buffer exists
                buf.pop()
                free += 1
            except BufferError:
                pass
        if free or time.monotonic() > deadline:
            return free
        time.sleep(0.01)


@pytest.mark.parametrize("api", ["send_batch", "send"])
def test_batches_are_written_only_over_finished_batch_buffers_and_records_arrive_in_order(bootstrap: str, topic: str,
                                                                                         api: str) -> None:
    n, rounds = 3000, 4
    sent: list[bytes] = []
    # A long linger: batches close full (or at flush), so each round's batches are about as large as the last
    # round's buffers. (The marker below survives only a rewrite that needs no more than the grown allocation.)
    with klog.Producer(bootstrap, batch_size=20_000, linger_ms=10_000) as p:
        pool = p._core.batch_buffers
        reused_before = 0
        for r in range(rounds):
            values = [b"r%d-%05d" % (r, i) for i in range(n)]
            if api == "send_batch":
                p.send_batch(topic, values)
            else:
                for v in values:
                    p.send(topic, v)
            sent += values
            p.flush()
            assert len(pool) > 0, "finished batches give their buffers back"
            # Counted by the pool (an encoding call took the buffer out of the lent list): the allocation size of
            # a rewritten bytearray is no sign of reuse, as CPython shrinks it to fit when a smaller batch lands.
            if r > 0:
                assert pool.reused > reused_before, "later batches are written over earlier buffers"
            elif api == "send_batch":
                assert pool.reused == 0  # one call encodes all its batches before any is done
            reused_before = pool.reused
            assert wait_for_free_buffers(p) > 0
            if r == 0:
                # A buffer something still reads (here a memoryview, as a request being written would hold) is
                # never rewritten by later batches.
                held = memoryview(pool._free[0])
                snapshot = bytes(held)
        assert bytes(held) == snapshot
    got = consume(bootstrap, [(topic, 0)], len(sent))
    assert [r.value for r in got] == sent


def test_send_batch_retried_over_dropped_connections_arrives_once_in_order_with_reused_buffers(
        bootstrap: str, topic: str) -> None:
    # Batches rewrite buffers of earlier ones while connections are cut under requests in flight: a retried
    # batch keeps its bytes until it is done, so every record lands exactly once, in order.
    n, rounds = 5000, 6
    sent: list[bytes] = []
    with klog.Producer(bootstrap, linger_ms=1, batch_size=4096, retry_backoff_ms=10) as p:
        cut_connection_after_every(p, 7)
        for r in range(rounds):
            values = [b"r%d-%06d" % (r, i) for i in range(n)]
            p.send_batch(topic, values).result(DEADLINE_S)
            sent += values
            p.flush(timeout=60)
        assert p._core.retried_batches > 0  # the cuts did hit requests in flight
        assert p._core.batch_buffers.reused > 0
    got = consume(bootstrap, [(topic, 0)], len(sent), fetch_max_wait_ms=100)
    assert [r.value for r in got] == sent
    with klog.Consumer(bootstrap_servers=bootstrap) as c:
        assert c.end_offsets([(topic, 0)], timeout=DEADLINE_S) == {TopicPartition(topic, 0): len(sent)}  # no dups


def test_concurrent_senders_lose_nothing_while_batches_are_drained(bootstrap: str, admin: klog.AdminClient) -> None:
    # Several threads append (the lock-free fast path) while the sender seals and drains small batches; keyed
    # records go to their murmur2 partitions. Every future resolves to a distinct offset and every record is
    # read back exactly once, each thread's records in order per partition.
    topic = make_topic(admin, 3)
    threads, per_thread = 4, 5000

    def run(t: int) -> list[concurrent.futures.Future[RecordMetadata]]:
        return [p.send(topic, b"%d-%05d" % (t, i), key=(b"k%d" % (i % 7)) if t % 2 else None)
                for i in range(per_thread)]

    with klog.Producer(bootstrap, linger_ms=1, batch_size=2048) as p:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(run, range(threads)))
        p.flush(timeout=DEADLINE_S)
    metadata = [f.result(timeout=DEADLINE_S) for futures in results for f in futures]
    assert len({(m.partition, m.offset) for m in metadata}) == threads * per_thread
    for t, futures in enumerate(results):
        for i in range(per_thread):
            if t % 2:
                assert futures[i].result().partition == partition_for_key(b"k%d" % (i % 7), 3)
    got = consume(bootstrap, [(topic, q) for q in range(3)], threads * per_thread, fetch_max_wait_ms=100)
    assert sorted(r.value for r in got) == sorted(b"%d-%05d" % (t, i) for t in range(threads)
                                                  for i in range(per_thread))
    by_offset = {(m.partition, m.offset): f"{t}-{i:05d}".encode()
                 for t, futures in enumerate(results) for i, f in enumerate(futures) for m in [f.result()]}
    assert all(by_offset[(r.partition, r.offset)] == r.value for r in got)


def test_flush_waits_for_everything_and_close_is_idempotent(bootstrap: str, topic: str) -> None:
    p = klog.Producer(bootstrap, linger_ms=10_000)
    futures = [p.send(topic, b"v") for _ in range(100)]
    assert not any(f.done() for f in futures)  # lingering
    p.flush(timeout=DEADLINE_S)
    assert all(f.done() for f in futures)
    p.close()
    p.close()


def test_full_buffer_blocks_send_until_max_block_ms(bootstrap: str, topic: str) -> None:
    # linger.ms keeps batches in memory; a 20 KB buffer fills up and send() blocks, then times out.
    with klog.Producer(bootstrap, buffer_memory=20_000, linger_ms=60_000, batch_size=1_000_000,
                       max_block_ms=300) as p:
        for _ in range(150):
            p.send(topic, b"x" * 100)
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            for _ in range(100):
                p.send(topic, b"x" * 100)
        assert 0.2 < time.monotonic() - start < 5
        p.flush()


def test_small_buffer_applies_back_pressure_without_losing_records(bootstrap: str, topic: str) -> None:
    n = 5000
    with klog.Producer(bootstrap, buffer_memory=64 * 1024, batch_size=16 * 1024) as p:
        futures = [p.send(topic, b"%06d" % i + b"x" * 500) for i in range(n)]
        p.flush()
    assert [f.result().offset for f in futures] == list(range(n))


def test_send_errors_are_kafka_errors(bootstrap: str, topic: str) -> None:
    with klog.Producer(bootstrap, max_request_size=10_000, max_block_ms=2000, allow_auto_create_topics=False) as p:
        with pytest.raises(RecordTooLargeError):
            p.send(topic, b"x" * 20_000)
        with pytest.raises(UnknownTopicOrPartitionError):
            p.send(topic, b"x", partition=7)
        with pytest.raises(KafkaTimeoutError):
            p.send(f"missing-{uuid.uuid4().hex[:8]}", b"x")
        with pytest.raises(TypeError):
            p.send(topic, 12345)


def test_config_accepts_kafka_and_python_names_and_rejects_unknown(bootstrap: str) -> None:
    with klog.Producer(bootstrap, **{"linger.ms": "7", "compression.type": "lz4"}, batch_size=5000) as p:
        assert (p.config["linger.ms"], p.config["compression.type"], p.config["batch.size"]) == (7, "lz4", 5000)
    with pytest.raises(ConfigError, match="linger"):
        klog.Producer(bootstrap, linger_mss=1)
    with pytest.raises(ConfigError, match="acks"):
        klog.Producer(bootstrap, acks=2)
    with pytest.raises(ConfigError, match="idempotence"):
        klog.Producer(bootstrap, enable_idempotence=True, acks=1)


# ---------------------------------------------------------------------------------------------------- send_batch

def test_send_batch_from_list_numpy_and_arrow(bootstrap: str, topic: str) -> None:
    values = [b"%07d" % i for i in range(3000)]
    with klog.Producer(bootstrap) as p:
        f1 = p.send_batch(topic, values)
        f2 = p.send_batch(topic, np.array(values, dtype="S7"))
        f3 = p.send_batch(topic, pa.array(values, pa.binary()))
        f4 = p.send_batch(topic, pa.array([v.decode() for v in values]))
        p.flush()
        results = [f.result(DEADLINE_S) for f in (f1, f2, f3, f4)]
    assert [sum(b.record_count for b in r) for r in results] == [3000] * 4
    starts = sorted(b.base_offset for r in results for b in r)
    assert starts[0] == 0
    got = consume(bootstrap, [(topic, 0)], 12000)
    assert [r.value for r in got] == values * 4
    assert [r.offset for r in got] == list(range(12000))


def test_send_batch_with_keys_partitions_like_send(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 5)
    keys = [b"k%d" % i for i in range(1000)]
    values = [b"v%d" % i for i in range(1000)]
    with klog.Producer(bootstrap, compression_type="zstd") as p:
        p.send_batch(topic, values, keys=keys, headers=[("src", b"batch")]).result(DEADLINE_S)
    got = consume(bootstrap, [(topic, i) for i in range(5)], 1000)
    assert sorted((r.key, r.value) for r in got) == sorted(zip(keys, values))
    assert all(r.partition == partition_for_key(r.key, 5) for r in got)
    assert all(r.headers == [("src", b"batch")] for r in got)
    # per-partition order is the input order
    by_part: dict[int, list[bytes]] = defaultdict(list)
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        by_part[r.partition].append(r.value)
    for part, vals in by_part.items():
        assert vals == [v for k, v in zip(keys, values) if partition_for_key(k, 5) == part]


def test_send_batch_variable_lengths_and_nulls(bootstrap: str, topic: str) -> None:
    values = [None if i % 7 == 0 else b"y" * (i % 300) for i in range(2000)]
    with klog.Producer(bootstrap) as p:
        p.send_batch(topic, values).result(DEADLINE_S)
    assert [r.value for r in consume(bootstrap, [(topic, 0)], 2000)] == values


# ---------------------------------------------------------------------------------------------------- consumer

def produce(bootstrap: str, topic: str, n: int, partition: int | None = None, **kw: Any) -> None:
    with klog.Producer(bootstrap, **kw) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, key=b"k%d" % i, partition=partition)
        p.flush()


def test_assign_and_poll_returns_records_in_offset_order(bootstrap: str, topic: str) -> None:
    produce(bootstrap, topic, 2000)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=300) as c:
        c.assign([TopicPartition(topic, 0)])
        got: list[ConsumerRecord] = []
        sizes = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 2000 and time.monotonic() < deadline:
            batch = c.poll(timeout=1.0)
            sizes.append(len(batch))
            got += batch
        assert max(sizes) <= 300
        assert [r.offset for r in got] == list(range(2000))
        assert [r.value for r in got] == [b"%d" % i for i in range(2000)]
        assert c.position((topic, 0)) == 2000
        assert c.poll(timeout=0.2) == []


def test_poll_batch_returns_arrow_decoded_natively(bootstrap: str, topic: str) -> None:
    produce(bootstrap, topic, 1000)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        batches = []
        rows = 0
        deadline = time.monotonic() + DEADLINE_S
        while rows < 1000 and time.monotonic() < deadline:
            b = c.poll_batch(timeout=1.0, max_records=400)
            assert isinstance(b, pa.RecordBatch)
            assert b.num_rows <= 400
            batches.append(b)
            rows += b.num_rows
        table = pa.Table.from_batches([b for b in batches if b.num_rows])
    assert table.schema.names == ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    assert table.column("offset").to_pylist() == list(range(1000))
    assert table.column("value").to_pylist() == [b"%d" % i for i in range(1000)]
    assert table.column("key").to_pylist() == [b"k%d" % i for i in range(1000)]
    assert set(table.column("topic").to_pylist()) == {topic}
    assert set(table.column("partition").to_pylist()) == {0}
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")


def test_poll_batch_times_out_with_an_empty_batch(bootstrap: str, topic: str) -> None:
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        start = time.monotonic()
        b = c.poll_batch(timeout=0.5)
        assert b.num_rows == 0
        assert 0.4 < time.monotonic() - start < 5


def test_iteration_yields_records(bootstrap: str, topic: str) -> None:
    produce(bootstrap, topic, 50)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        got = list(itertools.islice(c, 50))
    assert [r.value for r in got] == [b"%d" % i for i in range(50)]


def test_seek_and_seek_to_beginning_and_end(bootstrap: str, topic: str) -> None:
    produce(bootstrap, topic, 100)
    tp = TopicPartition(topic, 0)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 90)
        assert [r.offset for r in wait_records(c, 10)] == list(range(90, 100))
        c.seek_to_beginning([tp])
        assert c.position(tp) == 0
        assert wait_records(c, 1)[0].offset == 0
        c.seek_to_end()
        assert c.position(tp) == 100
        assert c.poll(timeout=0.3) == []
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 100}


def test_offsets_for_times_finds_first_offset_at_or_after_timestamp(bootstrap: str, topic: str) -> None:
    with klog.Producer(bootstrap) as p:
        for i in range(10):
            p.send(topic, b"v", timestamp=1_700_000_000_000 + i * 1000)
        p.flush()
    tp = TopicPartition(topic, 0)
    with klog.Consumer(bootstrap_servers=bootstrap) as c:
        r = c.offsets_for_times({tp: 1_700_000_003_500})
        assert r[tp] is not None
        assert (r[tp].offset, r[tp].timestamp) == (4, 1_700_000_004_000)
        assert c.offsets_for_times({tp: 1_800_000_000_000})[tp] is None


def test_pause_stops_delivery_until_resume(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 2)
    produce(bootstrap, topic, 20, partition=0)
    produce(bootstrap, topic, 20, partition=1)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([t0, t1])
        c.pause([t0])
        assert c.paused() == {t0}
        got = wait_records(c, 20)
        time.sleep(0.3)
        got += c.poll(timeout=0.3)
        assert {r.partition for r in got} == {1}
        c.resume([t0])
        got = wait_records(c, 20)
        assert {r.partition for r in got} == {0}


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_out_of_range_position_follows_auto_offset_reset(bootstrap: str, topic: str, policy: str) -> None:
    produce(bootstrap, topic, 10)
    tp = TopicPartition(topic, 0)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset=policy) as c:
        c.assign([tp])
        c.seek(tp, 1000)
        if policy == "none":
            with pytest.raises(KafkaError) as info:
                wait_records(c, 1, timeout=5)
            assert info.value.code == 1  # OFFSET_OUT_OF_RANGE
        elif policy == "earliest":
            assert wait_records(c, 10)[0].offset == 0
        else:
            deadline = time.monotonic() + DEADLINE_S
            while c.position(tp) != 10 and time.monotonic() < deadline:
                c.poll(timeout=0.2)
            assert c.position(tp) == 10


def test_auto_offset_reset_without_commit(bootstrap: str, topic: str) -> None:
    produce(bootstrap, topic, 5)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="latest") as c:
        c.assign([(topic, 0)])
        assert c.position((topic, 0)) == 5
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        assert c.position((topic, 0)) == 0


def test_fetch_prefetches_while_the_user_processes(bootstrap: str, topic: str) -> None:
    produce(bootstrap, topic, 6000)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=20_000,
                       max_poll_records=100_000) as c:
        c.assign([(topic, 0)])
        first = wait_records(c, 1)
        time.sleep(0.5)  # "processing": the fetcher keeps the next responses ready meanwhile
        core = c._core
        assert len(core.ready) >= 1
        assert core.assignment[TopicPartition(topic, 0)].fetch_offset > first[-1].offset + 1


#: A retry back-off far longer than any poll below waits: a first poll that sat it out would show.
LONG_BACKOFF_MS = 30_000


@pytest.mark.parametrize("start", ["auto_offset_reset", "seek"])
def test_first_poll_after_assign_does_not_sit_out_the_retry_back_off(bootstrap: str, topic: str,
                                                                     start: str) -> None:
    # The back-off paces retries after failures. A newly assigned topic is simply not in the metadata yet:
    # looking it up (and its ListOffsets) must not wait retry.backoff.ms first.
    produce(bootstrap, topic, 10)
    began = time.monotonic()
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", retry_backoff_ms=LONG_BACKOFF_MS,
                       retry_backoff_max_ms=LONG_BACKOFF_MS) as c:
        c.assign([(topic, 0)])
        if start == "seek":
            c.seek((topic, 0), 3)
        got = wait_records(c, 10 if start == "auto_offset_reset" else 7, timeout=LONG_BACKOFF_MS / 2000)
    assert [r.value for r in got][:1] == ([b"0"] if start == "auto_offset_reset" else [b"3"])
    assert time.monotonic() - began < LONG_BACKOFF_MS / 2000


@pytest.mark.parametrize("api", ["poll", "poll_batch"])
def test_fetcher_takes_in_responses_while_the_user_thread_decodes(bootstrap: str, topic: str, api: str) -> None:
    # Decoding a large fetch takes milliseconds; the event loop thread must not be stuck behind it (it would
    # neither read the socket nor send the next fetch). Small batches, so that a fetch holds only some of them.
    produce(bootstrap, topic, 3000, batch_size=1024)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=4_000,
                       max_poll_records=100_000) as c:
        c.assign([(topic, 0)])
        core = c._core
        seen: list[int] = []
        decode = core._arrow if api == "poll_batch" else core._decode_records

        def slow_decode(cf: Any, position: int) -> Any:
            if not seen:  # the first decode waits for another response to be queued behind it
                deadline = time.monotonic() + 10
                while len(core.ready) < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
                seen.append(len(core.ready))
            return decode(cf, position)

        if api == "poll_batch":
            core._arrow = slow_decode
            rows = 0
            deadline = time.monotonic() + DEADLINE_S
            while rows < 3000 and time.monotonic() < deadline:
                rows += c.poll_batch(timeout=1.0).num_rows
        else:
            core._decode_records = slow_decode
            rows = len(wait_records(c, 3000))
    assert seen and seen[0] >= 2
    assert rows == 3000


@pytest.mark.parametrize("api", ["poll", "poll_batch"])
def test_records_of_a_partition_unassigned_during_decoding_are_not_delivered(bootstrap: str, topic: str,
                                                                             api: str) -> None:
    produce(bootstrap, topic, 100)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        core = c._core
        decode = core._arrow if api == "poll_batch" else core._decode_records

        def decode_then_lose_partition(cf: Any, position: int) -> Any:
            out = decode(cf, position)
            core.set_assignment([])  # as a rebalance on the event loop thread would, while this thread decodes
            return out

        if api == "poll_batch":
            core._arrow = decode_then_lose_partition
            delivered = c.poll_batch(timeout=5.0).num_rows
        else:
            core._decode_records = decode_then_lose_partition
            delivered = len(c.poll(timeout=5.0))
        assert delivered == 0
        assert c.assignment() == set()


def wait_records(c: klog.Consumer, n: int, timeout: float = DEADLINE_S) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += c.poll(timeout=0.5, max_records=n - len(out))
    return out


def read_raw_batches(bootstrap: str, topic: str, partition: int) -> list[Any]:
    """The partition's record batches as the broker stores them (Fetch through klog's connection layer)."""
    import asyncio

    from klog.client.cluster import ClusterClient
    from klog.client.config import CONSUMER_CONFIG, resolve_config
    from klog.protocol import ApiKey, Struct

    async def fetch() -> bytes:
        cluster = ClusterClient(resolve_config(CONSUMER_CONFIG, {"bootstrap.servers": bootstrap}, kind="consumer"))
        await cluster.start()
        try:
            await cluster.wait_for_topic(topic, 10)
            leader = cluster.metadata.leader_for(topic, partition)
            body = Struct(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=10_000_000, isolation_level=0,
                          topics=[Struct(topic=topic, partitions=[Struct(partition=partition, fetch_offset=0,
                                                                         partition_max_bytes=10_000_000)])])
            r = await cluster.request(leader, ApiKey.FETCH, body)
            return bytes(r.responses[0].partitions[0].records or b"")
        finally:
            await cluster.close()

    return decode_batches(asyncio.run(fetch()))


# ---------------------------------------------------------------------------------------------------- groups

def test_group_commit_then_new_member_resumes_from_committed(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 100)
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                       enable_auto_commit=False) as c:
        got = wait_records(c, 60)
        assert len(got) == 60
        c.commit({TopicPartition(topic, 0): 60})
        assert c.committed([(topic, 0)])[TopicPartition(topic, 0)].offset == 60
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest") as c:
        got = wait_records(c, 40)
        assert [r.offset for r in got] == list(range(60, 100))


def test_auto_commit_commits_consumed_positions(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 30)
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                       auto_commit_interval_ms=100) as c:
        assert len(wait_records(c, 30)) == 30
        time.sleep(0.2)
        c.poll(timeout=0.3)  # auto-commit is due at this poll
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            committed = c.committed([(topic, 0)])[TopicPartition(topic, 0)]
            if committed is not None and committed.offset == 30:
                break
            c.poll(timeout=0.2)
        assert committed is not None and committed.offset == 30


def test_commit_async_reports_through_callback(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 10)
    results: list[Any] = []
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                       enable_auto_commit=False) as c:
        wait_records(c, 10)
        fut = c.commit_async(callback=lambda err, offsets: results.append((err, offsets)))
        fut.result(DEADLINE_S)
        assert results and results[0][0] is None
        assert c.committed([(topic, 0)])[TopicPartition(topic, 0)].offset == 10


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_two_members_split_partitions_and_callbacks_fire(bootstrap: str, admin: klog.AdminClient,
                                                         strategy: str) -> None:
    topic = make_topic(admin, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, str, list[TopicPartition]]] = []

    def cb(name: str, kind: str) -> Any:
        return lambda consumer, parts: events.append((name, kind, parts))

    common = dict(bootstrap_servers=bootstrap, group_id=group, partition_assignment_strategy=strategy,
                  auto_offset_reset="earliest")
    c1 = klog.Consumer(topic, on_assign=cb("c1", "assign"), on_revoke=cb("c1", "revoke"), **common)
    c2 = None
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(c1.assignment()) < 4 and time.monotonic() < deadline:
            c1.poll(timeout=0.2)
        assert len(c1.assignment()) == 4
        c2 = klog.Consumer(topic, on_assign=cb("c2", "assign"), on_revoke=cb("c2", "revoke"), **common)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not (len(c1.assignment()) == 2 and len(c2.assignment()) == 2):
            c1.poll(timeout=0.1)
            c2.poll(timeout=0.1)
        a1, a2 = c1.assignment(), c2.assignment()
        assert len(a1) == 2 and len(a2) == 2 and not (a1 & a2)
        assert ("c2", "assign") in [(n, k) for n, k, _ in events]
        revoked_c1 = [p for n, k, parts in events if (n, k) == ("c1", "revoke") for p in parts]
        if strategy == "cooperative-sticky":
            # Cooperative: c1 only gives up what moves to c2 and keeps the rest throughout.
            assert set(revoked_c1) == a2
        else:
            assert set(revoked_c1) == {TopicPartition(topic, i) for i in range(4)}
    finally:
        c1.close()
        if c2 is not None:
            c2.close()


def test_leaving_member_hands_partitions_to_the_remaining_one(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 40)
    common = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest")
    with klog.Consumer(topic, **common) as c1:
        c2 = klog.Consumer(topic, **common)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not (c1.assignment() and c2.assignment()):
            c1.poll(timeout=0.1)
            c2.poll(timeout=0.1)
        assert c1.assignment() and c2.assignment()
        c2.close()
        deadline = time.monotonic() + DEADLINE_S
        while len(c1.assignment()) < 2 and time.monotonic() < deadline:
            c1.poll(timeout=0.2)
        assert len(c1.assignment()) == 2


def test_pattern_subscription_picks_up_matching_topics(bootstrap: str, admin: klog.AdminClient) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    admin.create_topics([f"{prefix}-a", f"{prefix}-b", f"other-{prefix}"], num_partitions=1, replication_factor=1)
    for t in (f"{prefix}-a", f"{prefix}-b", f"other-{prefix}"):
        produce(bootstrap, t, 3)
    import re

    with klog.Consumer(re.compile(f"^{prefix}-.*"), bootstrap_servers=bootstrap, group_id=f"g-{prefix}",
                       auto_offset_reset="earliest") as c:
        got = wait_records(c, 6)
        assert Counter(r.topic for r in got) == {f"{prefix}-a": 3, f"{prefix}-b": 3}
        assert c.subscription() == {f"{prefix}-a", f"{prefix}-b"}


# ---------------------------------------------------------------------------------------------------- admin

def test_admin_topics_lifecycle(bootstrap: str, admin: klog.AdminClient) -> None:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    admin.create_topics([klog.client.NewTopic(name, 3, 1, {"retention.ms": "3600000"})])
    assert name in admin.list_topics()
    d = admin.describe_topics([name])[name]
    assert [p.partition for p in d.partitions] == [0, 1, 2]
    with pytest.raises(KafkaError) as info:
        admin.create_topics([name], num_partitions=1, replication_factor=1)
    assert info.value.code == 36  # TOPIC_ALREADY_EXISTS
    admin.create_partitions({name: 5})
    assert len(admin.describe_topics([name])[name].partitions) == 5
    admin.delete_topics([name])
    assert name not in admin.list_topics()


def test_admin_describe_and_alter_topic_configs(bootstrap: str, admin: klog.AdminClient) -> None:
    name = make_topic(admin, 1)
    res = klog.client.ConfigResource("topic", name)
    before = admin.describe_configs([res])[res]
    assert "retention.ms" in before and "cleanup.policy" in before
    admin.alter_configs({res: {"retention.ms": "123456"}})
    # KRaft brokers apply config changes from the metadata log a moment after the controller accepted them.
    after = eventually(lambda: admin.describe_configs([res])[res], lambda c: c["retention.ms"].value == "123456")
    assert not after["retention.ms"].is_default
    admin.alter_configs({res: {"retention.ms": None}})
    reverted = eventually(lambda: admin.describe_configs([res])[res],
                          lambda c: c["retention.ms"].value == before["retention.ms"].value)
    assert reverted["retention.ms"].is_default


def eventually(get: Any, ok: Any, timeout: float = 10.0) -> Any:
    """Poll ``get()`` until ``ok(value)`` (bounded); returns the last value."""
    deadline = time.monotonic() + timeout
    value = get()
    while not ok(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = get()
    assert ok(value), value
    return value


def test_admin_groups_offsets_and_delete_records(bootstrap: str, admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 20)
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                       enable_auto_commit=False) as c:
        wait_records(c, 20)
        c.commit()
        assert group in [g.group_id for g in admin.list_groups()]
        desc = admin.describe_groups([group])[group]
        assert desc.protocol_type == "consumer" and len(desc.members) == 1
        assert desc.members[0].assignment == (TopicPartition(topic, 0),)
    tp = TopicPartition(topic, 0)
    assert admin.list_group_offsets(group)[tp].offset == 20
    admin.alter_group_offsets(group, {tp: 5})
    assert admin.list_group_offsets(group)[tp].offset == 5
    assert admin.delete_records({tp: 7}) == {tp: 7}
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        assert c.beginning_offsets([tp]) == {tp: 7}
        assert wait_records(c, 1)[0].offset == 7
    admin.delete_groups([group])
    assert group not in [g.group_id for g in admin.list_groups()]


# ---------------------------------------------------------------------------------------------------- KIP-848

def test_consumer_group_protocol_assigns_and_rebalances_between_members(bootstrap: str,
                                                                        admin: klog.AdminClient) -> None:
    topic = make_topic(admin, 4)
    group = f"g848-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 40)
    assigned: list[list[TopicPartition]] = []
    common = dict(bootstrap_servers=bootstrap, group_id=group, group_protocol="consumer",
                  auto_offset_reset="earliest", heartbeat_interval_ms=500)
    with klog.Consumer(topic, on_assign=lambda c, parts: assigned.append(parts), **common) as c1:
        got = wait_records(c1, 40)
        assert sorted(r.value for r in got) == sorted(b"%d" % i for i in range(40))
        assert len(c1.assignment()) == 4
        assert assigned and set(assigned[0]) == {TopicPartition(topic, i) for i in range(4)}
        with klog.Consumer(topic, **common) as c2:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline and not (len(c1.assignment()) == 2 and len(c2.assignment()) == 2):
                c1.poll(timeout=0.1)
                c2.poll(timeout=0.1)
            assert len(c1.assignment()) == 2 and len(c2.assignment()) == 2
            assert not (c1.assignment() & c2.assignment())
        deadline = time.monotonic() + DEADLINE_S
        while len(c1.assignment()) < 4 and time.monotonic() < deadline:
            c1.poll(timeout=0.2)
        assert len(c1.assignment()) == 4  # c2 left: everything comes back
        c1.commit()
        committed = c1.committed([(topic, p) for p in range(4)])
        assert sum(o.offset for o in committed.values() if o is not None) == 40


def _kip848_group_over_twenty_records(bootstrap: str, admin: klog.AdminClient) -> tuple[str, dict[str, Any]]:
    """A 2-partition topic holding 10 records in each partition, and the consumer settings of a new KIP-848 group
    (manual commits, from the earliest offset)."""
    topic = make_topic(admin, 2)
    with klog.Producer(bootstrap) as p:
        for i in range(20):
            p.send(topic, b"%d" % i, partition=i % 2)
        p.flush()
    return topic, dict(bootstrap_servers=bootstrap, group_id=f"g848-{uuid.uuid4().hex[:8]}",
                       group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)


def test_consumer_group_protocol_hands_a_revoked_partition_over_only_after_on_revoke_committed(
        bootstrap: str, admin: klog.AdminClient) -> None:
    # The member tells the coordinator it gave a partition up only once its revocation commit and on_revoke ran
    # (as Java's member): else the new owner starts from the commit before it and reads those records again.
    topic, common = _kip848_group_over_twenty_records(bootstrap, admin)
    events: list[str] = []
    committed: dict[TopicPartition, int] = {}
    c2_assigned = threading.Event()

    def c1_on_revoke(c: klog.Consumer, parts: list[TopicPartition]) -> None:
        if committed or not parts:
            return  # only the handover to c2 is held (not c1's close)
        # A slow handler: the coordinator, if told too early, gives the partition to c2 within two heartbeat
        # intervals (5 s each by default on both brokers).
        c2_assigned.wait(15)
        committed.update({tp: c.position(tp) for tp in parts})
        c.commit(dict(committed))
        events.append("c1 on_revoke returned")

    def c2_on_assign(c: klog.Consumer, parts: list[TopicPartition]) -> None:
        if parts:
            events.append("c2 on_assign")
            c2_assigned.set()

    stop = threading.Event()
    got2: list[ConsumerRecord] = []
    errors: list[BaseException] = []

    def run_c2() -> None:
        try:
            with klog.Consumer(topic, on_assign=c2_on_assign, **common) as c2:
                while not stop.is_set():
                    got2.extend(c2.poll(timeout=0.2))
        except BaseException as e:  # reported by the test's thread
            errors.append(e)

    with klog.Consumer(topic, on_revoke=c1_on_revoke, **common) as c1:
        got1 = wait_records(c1, 20)
        assert len(got1) == 20 and len(c1.assignment()) == 2
        t = threading.Thread(target=run_c2)
        t.start()
        try:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline and not (committed and len(c1.assignment()) == 1
                                                          and c2_assigned.is_set()):
                c1.poll(timeout=0.2)
            assert committed and c2_assigned.is_set(), (events, committed)
            [moved] = committed
            assert committed[moved] == 10 and moved not in c1.assignment()
            with klog.Producer(bootstrap) as p:
                p.send(topic, b"after", partition=moved.partition).result(timeout=DEADLINE_S)
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline and not any(r.value == b"after" for r in got2) and not errors:
                c1.poll(timeout=0.2)
        finally:
            stop.set()
            t.join(timeout=DEADLINE_S)
    assert not errors, errors
    assert events == ["c1 on_revoke returned", "c2 on_assign"]
    # c2 starts the moved partition at c1's commit: none of c1's records of it again.
    assert [(r.partition, r.offset, r.value) for r in got2] == [(moved.partition, 10, b"after")]


class InterceptingProxy:
    """A TCP proxy in front of a broker (advertised as the proxy, so every connection goes through it) that shows
    each request to :meth:`intercept` first: an answer it returns goes back instead of the broker's, ``CUT`` closes
    the connection, None forwards the request; answers go back in request order, as Kafka's do."""

    CUT = b"cut"

    def __init__(self, port: int, broker_port: int) -> None:
        self.broker_port = broker_port
        self._listener = socket.create_server(("127.0.0.1", port))
        self._sockets: list[socket.socket] = [self._listener]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def intercept(self, header: Any, frame: bytes) -> bytes | None:
        return None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        for s in list(self._sockets):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept or recv, which close does not
            s.close()
        for t in self._threads:
            t.join(timeout=10)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.broker_port))
            answers: queue.Queue[bytes | None] = queue.Queue()  # None: the broker's next answer
            self._sockets += [client, broker]
            for target in (self._requests, self._answers):
                t = threading.Thread(target=target, args=(client, broker, answers), daemon=True)
                self._threads.append(t)
                t.start()

    def _requests(self, client: socket.socket, broker: socket.socket, answers: queue.Queue[bytes | None]) -> None:
        from klog import protocol as P

        try:
            while (frame := _proxied_frame(client)) is not None:
                header, _offset = P.decode_request_header(frame[4:])
                answer = self.intercept(header, frame)
                if answer == self.CUT:
                    break
                if answer is not None:
                    answers.put(answer)
                else:
                    answers.put(None)
                    broker.sendall(frame)
        except OSError:
            pass
        answers.put(b"")  # the client left (or is cut off): stop answering

    def _answers(self, client: socket.socket, broker: socket.socket, answers: queue.Queue[bytes | None]) -> None:
        try:
            while (answer := answers.get()) != b"":
                answer = answer if answer is not None else _proxied_frame(broker)
                if answer is None:
                    break
                client.sendall(answer)
        except OSError:
            pass
        for s in (client, broker):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class CommitHoldingProxy(InterceptingProxy):
    """While ``holding`` is set, answers every OffsetCommit itself with COORDINATOR_LOAD_IN_PROGRESS (the client
    retries, as when the coordinator's answer does not come) and forwards everything else."""

    def __init__(self, port: int, broker_port: int) -> None:
        self.holding = threading.Event()
        self.answered = 0  # OffsetCommits the proxy answered
        super().__init__(port, broker_port)

    def intercept(self, header: Any, frame: bytes) -> bytes | None:
        from klog import protocol as P

        if header.api_key != P.ApiKey.OFFSET_COMMIT or not self.holding.is_set():
            return None
        _header, offset = P.decode_request_header(frame[4:])
        request = P.decode_request(header, frame[4:], offset)
        body = P.Struct(throttle_time_ms=0, topics=[P.Struct(
            name=t.name, partitions=[P.Struct(partition_index=p.partition_index,
                                              error_code=P.errors.ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                                     for p in t.partitions]) for t in request.topics])
        self.answered += 1
        return b"".join(bytes(c) for c in P.encode_response(header.api_key, header.api_version,
                                                             header.correlation_id, body))


class MetadataCuttingProxy(InterceptingProxy):
    """While ``cutting`` is set, closes every connection a Metadata request arrives on (the refresh fails with a
    lost connection); ``cut_at``: when each was cut."""

    def __init__(self, port: int, broker_port: int) -> None:
        self.cutting = threading.Event()
        self.cut_at: list[float] = []
        super().__init__(port, broker_port)

    def intercept(self, header: Any, frame: bytes) -> bytes | None:
        from klog import protocol as P

        if header.api_key != P.ApiKey.METADATA or not self.cutting.is_set():
            return None
        self.cut_at.append(time.monotonic())
        return self.CUT


def test_fetcher_waiting_for_a_leader_is_woken_soon_after_a_failed_metadata_refresh(tmp_path: Any) -> None:
    # A fetcher holding a partition whose leader is unknown waits for a metadata refresh to wake it. A refresh
    # that fails (every Metadata request cut off for longer than request.timeout.ms) is retried after
    # retry.backoff.ms, as Kafka's clients do, not left to the periodic refresh metadata.max.age.ms (5 minutes) later.
    from klog.testing.ports import free_port

    broker_port, proxy_port = free_port(), free_port()
    request_timeout_s = 2.0
    config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}
    with MetadataCuttingProxy(proxy_port, broker_port) as proxy, \
            klog.Broker(data_dir=str(tmp_path), port=broker_port, config=config):
        bootstrap = f"127.0.0.1:{proxy_port}"
        tp = TopicPartition(f"t-{uuid.uuid4().hex[:12]}", 0)
        with klog.Consumer(bootstrap_servers=bootstrap, request_timeout_ms=int(request_timeout_s * 1000)) as c:
            c.assign([tp])
            c.seek(tp, 0)   # a position, and no leader yet: the topic does not exist
            proxy.cutting.set()
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline and not (
                    proxy.cut_at and proxy.cut_at[-1] > proxy.cut_at[0] + request_timeout_s):
                c.poll(timeout=0.2)
            # a Metadata request cut after the deadline of the refresh that met the first cut: that refresh failed
            assert proxy.cut_at and proxy.cut_at[-1] > proxy.cut_at[0] + request_timeout_s
            proxy.cutting.clear()
            with klog.AdminClient(bootstrap) as admin:
                admin.create_topics([tp.topic], num_partitions=1, replication_factor=1)
            with klog.Producer(bootstrap) as p:
                p.send(tp.topic, b"after", partition=0)
                p.flush()
            assert [r.value for r in wait_records(c, 1)] == [b"after"]


def _kip848_broker_behind(proxy_port: int, broker_port: int, tmp_path: Any) -> klog.Broker:
    """A klog broker advertising the proxy's port (every connection goes through it), heartbeats every second."""
    config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
              "group.consumer.heartbeat.interval.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 1000}
    return klog.Broker(data_dir=str(tmp_path), port=broker_port, config=config)


@contextlib.contextmanager
def _second_member(topic: str, common: dict[str, Any]) -> Iterator[threading.Event]:
    """A second member of the group, polling in its own thread until the block ends; the event: it was given
    partitions."""
    assigned = threading.Event()
    stop = threading.Event()

    def run() -> None:
        with klog.Consumer(topic, on_assign=lambda c, parts: parts and assigned.set(), **common) as c2:
            while not stop.is_set():
                c2.poll(timeout=0.2)

    t = threading.Thread(target=run)
    t.start()
    try:
        yield assigned
    finally:
        stop.set()
        t.join(timeout=DEADLINE_S)


def _poll_until_one_partition_handed_over(c1: klog.Consumer, c2_assigned: threading.Event) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and not (c2_assigned.is_set() and len(c1.assignment()) == 1):
        c1.poll(timeout=0.2)


class HeartbeatAckRefusingProxy(InterceptingProxy):
    """Answers the first ``errors`` ConsumerGroupHeartbeats that acknowledge exactly one owned partition (a member
    that gave one of its two up) with ``error_code`` itself; ``answered_at``: when it did."""

    def __init__(self, port: int, broker_port: int, error_code: int, errors: int) -> None:
        self.error_code = error_code
        self.errors = errors
        self.answered_at: list[float] = []
        super().__init__(port, broker_port)

    def intercept(self, header: Any, frame: bytes) -> bytes | None:
        from klog import protocol as P

        if header.api_key != P.ApiKey.CONSUMER_GROUP_HEARTBEAT or len(self.answered_at) >= self.errors:
            return None
        _header, offset = P.decode_request_header(frame[4:])
        request = P.decode_request(header, frame[4:], offset)
        if request.member_epoch <= 0 or request.topic_partitions is None or \
                sum(len(t.partitions) for t in request.topic_partitions) != 1:
            return None
        self.answered_at.append(time.monotonic())
        body = P.Struct(throttle_time_ms=0, error_code=self.error_code, error_message=None, member_id=None,
                        member_epoch=0, heartbeat_interval_ms=0, assignment=None)
        return b"".join(bytes(c) for c in P.encode_response(header.api_key, header.api_version,
                                                             header.correlation_id, body))


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"])
def test_consumer_group_protocol_revocation_acknowledgement_refused_with_a_retriable_error_is_sent_again_after_backoff(
        tmp_path: Any, error: str) -> None:
    # c1 gives a partition up for c2; the coordinator answers its acknowledgement with a retriable error 5 times
    # (moved, loading). c1 sends it again each time, after retry.backoff.ms growing to retry.backoff.max.ms (as
    # Java's heartbeat manager): c2 gets the partition. An answered error is no acknowledgement, and no reason to
    # hammer the coordinator either.
    from klog.protocol.errors import ErrorCode
    from klog.testing.ports import free_port

    broker_port, proxy_port = free_port(), free_port()
    with HeartbeatAckRefusingProxy(proxy_port, broker_port, ErrorCode[error], 5) as proxy, \
            _kip848_broker_behind(proxy_port, broker_port, tmp_path):
        bootstrap = f"127.0.0.1:{proxy_port}"
        with klog.AdminClient(bootstrap) as admin:
            topic, common = _kip848_group_over_twenty_records(bootstrap, admin)
        # short fetch waits: an answer to a heartbeat, sent behind a fetch on one connection, waits for the fetch's
        common["fetch_max_wait_ms"] = 20
        with klog.Consumer(topic, **common) as c1:
            assert len(wait_records(c1, 20)) == 20
            with _second_member(topic, common) as c2_assigned:
                _poll_until_one_partition_handed_over(c1, c2_assigned)
                assert len(proxy.answered_at) == 5 and c2_assigned.is_set() and len(c1.assignment()) == 1
        # the 4 backoffs between the refusals: at least 0.8 * (100 + 200 + 400 + 800) ms (the jitter's low end)
        assert proxy.answered_at[-1] - proxy.answered_at[0] >= 1.2


def test_consumer_group_protocol_commit_retried_across_a_rebalance_is_refused_not_written_with_the_new_epoch(
        tmp_path: Any) -> None:
    # A commit keeps the member epoch it was made with: retried after the member moved to a new epoch (here it gave
    # a partition to c2 meanwhile), the coordinator refuses it as stale instead of taking it as the new epoch's.
    from klog.testing.ports import free_port

    broker_port, proxy_port = free_port(), free_port()
    with CommitHoldingProxy(proxy_port, broker_port) as proxy, _kip848_broker_behind(proxy_port, broker_port, tmp_path):
        bootstrap = f"127.0.0.1:{proxy_port}"
        with klog.AdminClient(bootstrap) as admin:
            topic, common = _kip848_group_over_twenty_records(bootstrap, admin)
            with klog.Consumer(topic, **common) as c1:
                assert len(wait_records(c1, 20)) == 20
                proxy.holding.set()
                stale = c1.commit_async({TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5})
                deadline = time.monotonic() + DEADLINE_S
                while time.monotonic() < deadline and not proxy.answered:
                    c1.poll(timeout=0.2)
                assert proxy.answered and not stale.done()
                with _second_member(topic, common) as c2_assigned:
                    _poll_until_one_partition_handed_over(c1, c2_assigned)
                    assert c2_assigned.is_set() and len(c1.assignment()) == 1
                    proxy.holding.clear()
                    with pytest.raises(CommitFailedError):
                        stale.result(timeout=DEADLINE_S)
            assert admin.list_group_offsets(common["group_id"]) == {}
