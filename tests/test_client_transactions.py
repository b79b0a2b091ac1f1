"""klog's own client with transactions, on klog and on Apache Kafka 4.x from the same properties: the transactional
producer (init, commit, abort, send_offsets_to_transaction, fencing; blocking and asyncio, Arrow batches) and
read_committed consumers (klog's and confluent-kafka's, both ways)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import klog
import klog.aio
from klog.client.errors import TransactionAbortableError, TransactionFatalError, TransactionStateError
from klog.client.types import TopicPartition
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(180)

CONFIG = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
          "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request, tmp_path_factory) -> Iterator[dict[str, str]]:
    if request.param == "klog":
        with BrokerProcess(tmp_path_factory.mktemp("klog-ctxn"), CONFIG) as proc:
            yield {"name": "klog", "bootstrap": proc.bootstrap_servers}
        return
    from klog.testing.kafka import KafkaStartError, apache_kafka
    from klog.testing.kafka_tools import kafka_libs_dir

    libs = kafka_libs_dir()
    if libs is None:
        pytest.skip("Apache Kafka jars not installed (tools/install-peers.sh)")
    try:
        with apache_kafka(tmp_path_factory.mktemp("kafka-ctxn"), config=CONFIG, libs=libs, heap="512m") as kafka:
            yield {"name": "kafka", "bootstrap": str(kafka)}
    except KafkaStartError as exc:   # pragma: no cover - a machine without Java
        pytest.skip(str(exc))


def new_topic(broker: dict[str, str], partitions: int = 2) -> str:
    name = f"ctxn-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker["bootstrap"]})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name].result(15)
    return name


def txn_producer(broker: dict[str, str], tid: str | None = None) -> klog.Producer:
    return klog.Producer(bootstrap_servers=broker["bootstrap"], transactional_id=tid or f"k-{uuid.uuid4().hex[:8]}",
                         linger_ms=5)


def klog_read(broker: dict[str, str], topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Everything a klog consumer with ``isolation`` reads from the start up to the end offsets it lists (which
    are the last stable offsets for read_committed)."""
    c = klog.Consumer(bootstrap_servers=broker["bootstrap"], isolation_level=isolation, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps, timeout=10)
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"positions {[c.position(tp) for tp in tps]} < ends {ends}"
            out.extend(r.value for r in c.poll(0.2))
        return sorted(out)
    finally:
        c.close()


def ck_read(broker: dict[str, str], topic: str, partitions: int, isolation: str) -> list[bytes]:
    consumer = CKConsumer({"bootstrap.servers": broker["bootstrap"], "group.id": f"r-{uuid.uuid4().hex[:6]}",
                           "isolation.level": isolation, "enable.auto.commit": False,
                           "enable.partition.eof": True})
    consumer.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 20
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == CKError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise AssertionError(m.error())
            eof.discard(m.partition())
            out.append(m.value())
    finally:
        consumer.close()
    assert len(eof) == partitions
    return sorted(out)


def expected(prefix: str, n: int) -> list[bytes]:
    return [b"%s-%02d" % (prefix.encode(), i) for i in range(n)]


def test_commit_visible_abort_never_visible(broker):
    topic = new_topic(broker)
    p = txn_producer(broker)
    try:
        with pytest.raises(TransactionStateError):
            p.begin_transaction()      # before init_transactions
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(20):
            p.send(topic, b"c1-%02d" % i, partition=i % 2)
        p.commit_transaction(30)
        p.begin_transaction()
        futures = [p.send(topic, b"ab-%02d" % i, partition=i % 2) for i in range(20)]
        p.flush(10)
        assert all(f.result().offset >= 0 for f in futures)   # written, then aborted
        p.abort_transaction(30)
        p.begin_transaction()
        for i in range(4):
            p.send(topic, b"c2-%02d" % i, partition=i % 2)
        p.commit_transaction(30)
        # A record outside a transaction fails with a state error.
        with pytest.raises(TransactionStateError):
            p.send(topic, b"outside").result(10)
    finally:
        p.close()
    committed = sorted(expected("c1", 20) + expected("c2", 4))
    assert klog_read(broker, topic, 2, "read_committed") == committed
    assert ck_read(broker, topic, 2, "read_committed") == committed
    assert klog_read(broker, topic, 2, "read_uncommitted") == sorted(committed + expected("ab", 20))


def test_aborted_records_still_queued_fail_and_are_never_written(broker):
    topic = new_topic(broker, 1)
    p = klog.Producer(bootstrap_servers=broker["bootstrap"], transactional_id=f"k-{uuid.uuid4().hex[:8]}",
                      linger_ms=60000, batch_size=1 << 20)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        f = p.send(topic, b"never")
        p.abort_transaction(30)
        with pytest.raises(TransactionAbortableError):
            f.result(10)
        p.begin_transaction()
        p.send(topic, b"kept")
        p.commit_transaction(30)
    finally:
        p.close()
    assert klog_read(broker, topic, 1, "read_uncommitted") == [b"kept"]


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(broker):
    source, sink = new_topic(broker, 1), new_topic(broker, 1)
    seed = CKProducer({"bootstrap.servers": broker["bootstrap"]})
    for i in range(10):
        seed.produce(source, value=b"in-%02d" % i)
    seed.flush(10)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    consumer = klog.Consumer(source, bootstrap_servers=broker["bootstrap"], group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed")
    p = txn_producer(broker)
    tp = TopicPartition(source, 0)
    try:
        p.init_transactions(30)
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 10:
            assert time.monotonic() < deadline
            got.extend(consumer.poll(0.5))
        first, second = got[:6], got[6:]
        # Transaction 1 (committed): outputs of the first six inputs and offset 6.
        p.begin_transaction()
        for r in first:
            p.send(sink, r.value.replace(b"in", b"out"))
        gm = consumer.consumer_group_metadata()
        assert gm.group_id == group and gm.member_id
        p.send_offsets_to_transaction({tp: first[-1].offset + 1}, gm, 30)
        p.commit_transaction(30)
        assert consumer.committed([tp], timeout=10)[tp].offset == 6
        # Transaction 2 (aborted): neither its outputs nor its offsets count.
        p.begin_transaction()
        for r in second:
            p.send(sink, r.value.replace(b"in", b"out"))
        p.send_offsets_to_transaction({tp: second[-1].offset + 1}, consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert consumer.committed([tp], timeout=10)[tp].offset == 6
    finally:
        p.close()
        consumer.close(autocommit=False)
    assert klog_read(broker, sink, 1, "read_committed") == [b"out-%02d" % i for i in range(6)]
    assert ck_read(broker, sink, 1, "read_committed") == [b"out-%02d" % i for i in range(6)]


def test_a_zombie_is_fenced_by_a_new_producer_with_the_same_transactional_id(broker):
    topic = new_topic(broker, 1)
    tid = f"zombie-{uuid.uuid4().hex[:6]}"
    zombie = txn_producer(broker, tid)
    successor = txn_producer(broker, tid)
    try:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie").result(10)
        successor.init_transactions(30)      # aborts the zombie's transaction, bumps the epoch
        with pytest.raises(TransactionFatalError) as info:
            zombie.commit_transaction(30)
        assert info.value.fatal and not info.value.txn_requires_abort
        assert "fenced" in str(info.value)
        with pytest.raises(TransactionFatalError):
            zombie.begin_transaction()       # fatal: the producer stays unusable
        successor.begin_transaction()
        successor.send(topic, b"successor")
        successor.commit_transaction(30)
    finally:
        zombie.close()
        successor.close()
    assert klog_read(broker, topic, 1, "read_committed") == [b"successor"]


def test_confluent_transactions_read_by_a_klog_read_committed_consumer(broker):
    topic = new_topic(broker)
    p = CKProducer({"bootstrap.servers": broker["bootstrap"], "transactional.id": f"ck-{uuid.uuid4().hex[:6]}",
                    "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(8):
        p.produce(topic, value=b"c-%02d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(8):
        p.produce(topic, value=b"a-%02d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"z-00", partition=0)
    p.commit_transaction(30)
    assert klog_read(broker, topic, 2, "read_committed") == sorted(expected("c", 8) + [b"z-00"])
    # Arrow reads skip the aborted records and the control records too.
    c = klog.Consumer(bootstrap_servers=broker["bootstrap"], isolation_level="read_committed",
                      auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, part) for part in range(2)]
        c.assign(tps)
        ends = c.end_offsets(tps, timeout=10)
        rows: list[bytes] = []
        deadline = time.monotonic() + 20
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            batch = c.poll_batch(0.2)
            if batch is not None:
                rows.extend(batch.column("value").to_pylist())
        assert sorted(rows) == sorted(expected("c", 8) + [b"z-00"])
    finally:
        c.close()


def test_asyncio_transactions_with_arrow_batches(broker):
    pa = pytest.importorskip("pyarrow")
    topic = new_topic(broker, 1)

    async def run() -> None:
        async with klog.aio.Producer(bootstrap_servers=broker["bootstrap"],
                                     transactional_id=f"aio-{uuid.uuid4().hex[:6]}") as p:
            await p.init_transactions(30)
            p.begin_transaction()
            fut = await p.send_batch(topic, pa.array([b"arrow-%02d" % i for i in range(50)], pa.binary()))
            await p.send(topic, b"single")
            await p.commit_transaction(30)
            assert sum(m.record_count for m in await fut) == 50
            p.begin_transaction()
            await p.send_batch(topic, pa.array([b"gone-%02d" % i for i in range(50)], pa.binary()))
            await p.flush(10)
            await p.abort_transaction(30)

    asyncio.run(run())
    want = sorted([b"arrow-%02d" % i for i in range(50)] + [b"single"])
    assert klog_read(broker, topic, 1, "read_committed") == want
    assert ck_read(broker, topic, 1, "read_committed") == want


def test_direct_client_read_committed_fetch_and_end_offsets(broker):
    """The DirectClient (klog's Spark source reads through it): ListOffsets answers the last stable offset and a
    read_committed Fetch leaves the aborted batches out while its next offset moves past them."""
    from klog._native import _core
    from klog.client.direct import DirectClient

    topic = new_topic(broker, 1)
    tp = TopicPartition(topic, 0)
    p = txn_producer(broker)
    blocker = txn_producer(broker)
    try:
        p.init_transactions(30)
        for kind in ("c", "a", "z"):
            p.begin_transaction()
            for i in range(3):
                p.send(topic, b"%s-%d" % (kind.encode(), i)).result(10)
            if kind == "a":
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
        blocker.init_transactions(30)
        blocker.begin_transaction()
        blocker.send(topic, b"open").result(10)
        with DirectClient(broker["bootstrap"], isolation_level="read_committed") as committed, \
                DirectClient(broker["bootstrap"]) as uncommitted:
            lso = committed.list_offsets({tp: -1})[tp].offset
            hw = uncommitted.list_offsets({tp: -1})[tp].offset
            assert (lso, hw) == (12, 13)   # 3 x (3 records + a marker), then the open transaction's record
            values: list[bytes] = []
            offset = 0
            while offset < lso:
                part = committed.fetch(tp, offset, max_wait_ms=100)
                assert part.error is None and part.next_offset > offset
                values += [r.value for b in _core.decode_batches(part.records) if not b.is_control
                           for r in b.records]
                offset = part.next_offset
            assert offset == lso
            assert values == [b"c-0", b"c-1", b"c-2", b"z-0", b"z-1", b"z-2"]
        blocker.abort_transaction(30)
    finally:
        p.close()
        blocker.close()


def test_offsets_from_a_stale_member_make_the_transaction_abortable_then_it_recovers(broker):
    source = new_topic(broker, 1)
    group = f"stale-{uuid.uuid4().hex[:6]}"
    consumer = klog.Consumer(source, bootstrap_servers=broker["bootstrap"], group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    p = txn_producer(broker)
    tp = TopicPartition(source, 0)
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline
            consumer.poll(0.2)
        gm = consumer.consumer_group_metadata()
        p.init_transactions(30)
        p.begin_transaction()
        p.send(source, b"x")
        stale = gm._replace(member_id="not-a-member", generation_id=gm.generation_id + 7)
        with pytest.raises(TransactionAbortableError) as info:
            p.send_offsets_to_transaction({tp: 1}, stale, 30)
        assert info.value.txn_requires_abort and not info.value.fatal
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction(30)          # only abort is possible now
        p.abort_transaction(30)
        p.begin_transaction()
        p.send(source, b"y")
        p.send_offsets_to_transaction({tp: 1}, consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert consumer.committed([tp], timeout=10)[tp].offset == 1
    finally:
        p.close()
        consumer.close(autocommit=False)
    assert klog_read(broker, source, 1, "read_committed") == [b"y"]


def test_a_prepared_transaction_is_committed_by_another_producer_and_a_stale_one_is_refused(broker):
    """Two-phase use (klog's Spark exactly-once sink): one producer sends records with per-record Arrow headers and
    offsets, then prepare_transaction() hands out (transactional id, producer id, epoch) and closes without ending
    it; a second, non-transactional producer commits it by those ids (again: still success). A prepared
    transaction a newer instance aborted in init_transactions cannot be committed any more."""
    pa = pytest.importorskip("pyarrow")
    topic = new_topic(broker, 1)
    tid = f"prep-{uuid.uuid4().hex[:6]}"
    headers = pa.array([[{"key": "n", "value": b"%d" % i}] if i % 2 else None for i in range(20)],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    with txn_producer(broker, tid) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send_batch(topic, pa.array([b"prep-%02d" % i for i in range(20)], pa.binary()), partition=0,
                     record_headers=headers)
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 7}, tid, 30)
        prepared = p.prepare_transaction(30)
        assert prepared.transactional_id == tid and prepared.producer_id >= 0
        assert isinstance(p.send(topic, b"late").exception(10), TransactionStateError)   # never written
    assert klog_read(broker, topic, 1, "read_committed") == []   # open: the LSO stays before it
    with klog.Producer(bootstrap_servers=broker["bootstrap"]) as committer:
        committer.commit_prepared_transaction(prepared, 30)
        committer.commit_prepared_transaction(prepared, 30)   # a retried commit is still a success
    assert klog_read(broker, topic, 1, "read_committed") == expected("prep", 20)
    c = klog.Consumer(bootstrap_servers=broker["bootstrap"], auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(topic, 0)])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(c.poll(0.2))
        assert [dict(r.headers or []) for r in got][:3] == [{}, {"n": b"1"}, {}]
    finally:
        c.close()
    with klog.AdminClient(bootstrap_servers=broker["bootstrap"]) as admin:
        assert admin.list_group_offsets(tid)[TopicPartition(topic, 0)].offset == 7

    with txn_producer(broker, tid) as p:   # a second round, aborted by the next instance's init_transactions
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"stale", partition=0)
        stale = p.prepare_transaction(30)
    with txn_producer(broker, tid) as newer:
        newer.init_transactions(30)
    with klog.Producer(bootstrap_servers=broker["bootstrap"]) as committer:
        with pytest.raises(TransactionFatalError):
            committer.commit_prepared_transaction(stale, 30)
    assert klog_read(broker, topic, 1, "read_committed") == expected("prep", 20)
