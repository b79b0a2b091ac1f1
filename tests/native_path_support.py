"""What the native-path tests share: the same request frames sent to a broker with a native path and to one
without, their answers side by side (tests/test_native_produce_path.py, tests/test_native_fetch_path.py), and the
real clients' round trip (tests/test_native_front.py too)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import klog
from klog.broker.metrics import take_snapshot
from klog.client.loop_thread import call_in_loop
from klog.testing.wire import WireClient


def topic_counters(broker: klog.Broker) -> dict[str, tuple[int, ...]]:
    """The broker's per-topic counters (bytes and records in and out, ...) as a metrics scrape reads them: taken on
    its event loop, after what its native front served and has not handed over yet is accounted."""
    server = broker._require()
    return call_in_loop(server.loop, take_snapshot, server, timeout=30).topics


class BrokerPair:
    """Two brokers, the first with the native path on; ``stat`` is the broker stat counting what it served
    natively. Subclasses may send each broker its own frame (:meth:`frames`) and mask what differs between two
    brokers in an answer (:meth:`normalized`)."""

    stat = ""

    def __init__(self, native: klog.Broker, python: klog.Broker) -> None:
        self.brokers = (native, python)
        self.wires = [WireClient(b.host, b.port) for b in self.brokers]
        self.cid = 0

    def frames(self, frame_of: Any, cid: int) -> list[bytes]:
        frame = frame_of(cid)
        return [frame, frame]

    def normalized(self, answer: bytes, which: int, **options: Any) -> bytes:
        return answer

    def answers(self, frame_of: Any, *, expect_answer: bool = True, **options: Any) -> tuple[bytes, bytes]:
        self.cid += 1
        for wire, frame in zip(self.wires, self.frames(frame_of, self.cid)):
            wire.send_raw(frame)
        if not expect_answer:
            return b"", b""
        native, python = (self.normalized(wire.read_frame(), i, **options) for i, wire in enumerate(self.wires))
        return native, python

    def same(self, frame_of: Any, **options: Any) -> bytes:
        native, python = self.answers(frame_of, **options)
        assert native == python
        return native

    def native_served(self) -> int:
        served = [b.stats()[self.stat] for b in self.brokers]
        assert served[1] == 0, "the broker without the native path served a request natively"
        return served[0]

    def close(self) -> None:
        for wire in self.wires:
            wire.close()


def produce_with_two_clients(bootstrap: str, prefix: str, count: int, confluent: dict[str, Any]) -> tuple[str, list[bytes]]:
    """A new two-partition topic gets ``count`` records from confluent-kafka (its ``confluent`` settings) and
    ``count`` from kafka-python (acks=1), alternating partitions; the topic and every value written, sorted."""
    import confluent_kafka
    import kafka
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept alive until the topic is created
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **confluent})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % (i % 2), value=b"confluent-%d" % i, partition=i % 2)
        producer.poll(0)
    assert producer.flush(30) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    for i in range(count):
        kp.send(topic, value=b"kafka-python-%d" % i, partition=i % 2)
    kp.flush(30)
    kp.close(10)
    return topic, sorted([b"confluent-%d" % i for i in range(count)] + [b"kafka-python-%d" % i for i in range(count)])


def read_with_two_clients(bootstrap: str, topic: str, count: int) -> tuple[list[bytes], list[bytes]]:
    """Every value of ``topic`` read from the start by kafka-python and then by a confluent-kafka group member
    (until ``count`` values or 30 s), each sorted."""
    import confluent_kafka
    import kafka
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                   consumer_timeout_ms=10_000, enable_auto_commit=False)
    seen = [m.value for m in consumer]
    consumer.close()
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    c.close()
    return sorted(seen), sorted(got)
