"""Bad clients cannot hurt the broker: each gets a Kafka error or its own connection closed (one log line),
everyone else keeps being served, and nothing acknowledged is lost."""

from __future__ import annotations

import random
import resource
import socket
import struct
import time
import uuid

import pytest

from klog.protocol import ApiKey, encode_request
from klog.records import decode_batches, encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

MAX_FRAME = 1 << 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"socket.request.max.bytes": MAX_FRAME, "klog.connection.write.timeout.ms": 2000,
              "klog.connection.max.buffered.bytes": 4 << 20, "klog.connection.max.inflight.requests": 8}
    with BrokerProcess(tmp_path_factory.mktemp("robust"), config) as proc:
        yield proc


def assert_serving(broker):
    with WireClient(broker.host, broker.port) as wire:
        response = wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "probe",
                                                         "client_software_version": "1"})
        assert response.error_code == 0


def log_lines_since(broker, mark, needle, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [line for line in broker.lines[mark:] if needle in line]
        if found:
            return found
        time.sleep(0.05)
    return []


def make_topic(wire, partitions=1):
    name = f"r-{uuid.uuid4().hex[:10]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == 0
    return name


def produce_body(topic, batch, acks=1):
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def fetch_all(wire, topic, allow_compacted=False):
    """Every stored batch of partition 0 in one Fetch (``allow_compacted``: of a cleaned log, empty batches too)."""
    response = wire.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 50 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    part = response.responses[0].partitions[0]
    return decode_batches(bytes(part.records or b""), allow_compacted=allow_compacted)


@pytest.mark.parametrize("payload, needle", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad frame"),                        # size prefix 'GET ' is huge
    (struct.pack(">i", -5) + b"xxxx", "bad frame"),                              # negative size
    (struct.pack(">i", MAX_FRAME + 1), "bad frame"),                             # above socket.request.max.bytes
    (struct.pack(">i", 3) + b"\x00\x12\x00", "malformed request header"),        # truncated header
    (struct.pack(">ihhih", 10, 999, 0, 1, 0), "unsupported api key 999"),        # unknown API key
    (struct.pack(">ihhih", 11, 3, 99, 1, 0) + b"\x00", "unsupported version 99"),  # Metadata v99
    (struct.pack(">ihhih", 14, 3, 9, 1, 0) + b"\x00\x00\xff\xff", "malformed request"),  # body garbage
    (bytes([0x16, 0x03, 0x01, 0x02, 0x00]) + b"\x01" * 64, "TLS"),               # TLS ClientHello
])
def test_bad_frames_close_only_that_connection_with_one_log_line(broker, payload, needle):
    mark = len(broker.lines)
    with WireClient(broker.host, broker.port) as bad:
        bad.send_raw(payload)
        assert bad.is_closed_by_peer()
    lines = log_lines_since(broker, mark, needle)
    assert len(lines) == 1, broker.lines[mark:]
    assert_serving(broker)


def test_garbage_bytes_close_the_connection(broker):
    rng = random.Random(7)
    for _ in range(20):
        with WireClient(broker.host, broker.port) as bad:
            bad.send_raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
            bad.sock.shutdown(socket.SHUT_WR)
            bad.is_closed_by_peer(2)
    assert_serving(broker)


def test_mid_request_disconnect_appends_nothing(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        frame = encode_request(ApiKey.PRODUCE, 9, 1, "half", produce_body(topic, encode_batch([{"value": b"x"}])))
        wire.send_raw(frame[: len(frame) // 2])
    with WireClient(broker.host, broker.port) as wire:
        assert fetch_all(wire, topic) == []
    assert_serving(broker)


def test_pipelined_requests_are_answered_in_order(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        batch = encode_batch([{"value": b"p"}])
        ids = [wire.send(ApiKey.PRODUCE, 9, produce_body(topic, batch)) for _ in range(50)]
        offsets = []
        for cid in ids:
            got, response = wire.receive(ApiKey.PRODUCE, 9)
            assert got == cid
            offsets.append(response.responses[0].partition_responses[0].base_offset)
        assert offsets == list(range(50))


def test_a_thousand_idle_connections_do_not_stop_service(broker):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 4096)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection((broker.host, broker.port), timeout=10))
        assert_serving(broker)
        # the idle ones are live connections too
        for sock in idle[::100]:
            sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 5, "idle", {}))
            assert len(sock.recv(4)) == 4
    finally:
        for sock in idle:
            sock.close()
    assert_serving(broker)


def test_slow_reader_is_cut_off_and_others_are_served(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        payload = encode_batch([{"value": b"s" * 500_000}])
        for _ in range(4):
            wire.request(ApiKey.PRODUCE, 9, produce_body(topic, payload))
    mark = len(broker.lines)
    slow = socket.create_connection((broker.host, broker.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 50 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    slow.settimeout(2)
    try:
        for cid in range(40):    # ~80 MB of responses requested, never read
            slow.sendall(encode_request(ApiKey.FETCH, 11, cid, "slow", body))
    except (socket.timeout, OSError):
        pass   # the broker stopped reading us: backpressure
    assert_serving(broker)      # others are served meanwhile
    lines = log_lines_since(broker, mark, "read nothing", timeout=15)
    assert len(lines) == 1, broker.lines[mark:]
    slow.close()
    assert_serving(broker)


def test_max_connections_refuses_extra_connections(tmp_path):
    with BrokerProcess(tmp_path, {"max.connections": 3}) as broker:
        held = [WireClient(broker.host, broker.port) for _ in range(3)]
        try:
            for wire in held:
                wire.request(ApiKey.API_VERSIONS, 0, {})
            extra = WireClient(broker.host, broker.port)
            assert extra.is_closed_by_peer()
            extra.close()
            assert len(log_lines_since(broker, 0, "max.connections=3")) == 1
        finally:
            for wire in held:
                wire.close()
        time.sleep(0.2)
        assert_serving(broker)


def test_max_connections_per_ip_refuses_extra_connections_from_one_address(tmp_path):
    with BrokerProcess(tmp_path, {"max.connections.per.ip": 2}) as broker:
        held = [WireClient(broker.host, broker.port) for _ in range(2)]
        try:
            for wire in held:
                wire.request(ApiKey.API_VERSIONS, 0, {})
            extra = WireClient(broker.host, broker.port)
            assert extra.is_closed_by_peer()
            extra.close()
            assert len(log_lines_since(broker, 0, "max.connections.per.ip=2")) == 1
        finally:
            for wire in held:
                wire.close()


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path):
    with BrokerProcess(tmp_path, {"connections.max.idle.ms": 1000}) as broker:
        with WireClient(broker.host, broker.port) as wire:
            wire.request(ApiKey.API_VERSIONS, 0, {})
            assert wire.is_closed_by_peer(timeout=6)


def _mutations(rng, frame):
    data = bytearray(frame)
    kind = rng.randrange(4)
    if kind == 0:     # flip bytes after the size prefix
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(4, len(data))
            data[pos] = rng.getrandbits(8)
    elif kind == 1:   # truncate the body but keep the frame consistent
        cut = rng.randrange(12, len(data))
        data = data[:cut]
        struct.pack_into(">i", data, 0, len(data) - 4)
    elif kind == 2:   # extend with junk
        data += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
        struct.pack_into(">i", data, 0, len(data) - 4)
    else:             # set an int16/int32 length field somewhere to an extreme
        pos = rng.randrange(14, max(15, len(data) - 4))
        struct.pack_into(">h", data, pos, rng.choice([-1, -2, 0x7FFF, 0]))
    return bytes(data)


def test_fuzzed_requests_never_break_the_broker_or_lose_acknowledged_data(broker):
    rng = random.Random(1234)
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        acked = []
        for i in range(5):
            value = b"acked-%d" % i
            response = wire.request(ApiKey.PRODUCE, 9, produce_body(topic, encode_batch([{"key": b"k", "value": value}])))
            assert response.responses[0].partition_responses[0].error_code == 0
            acked.append(value)
    templates = [
        encode_request(ApiKey.PRODUCE, 9, 1, "fuzz", produce_body(topic, encode_batch([{"value": b"z" * 40}]))),
        encode_request(ApiKey.PRODUCE, 3, 1, "fuzz", produce_body(topic, encode_batch([{"value": b"y"}]))),
        encode_request(ApiKey.METADATA, 9, 1, "fuzz", {"topics": [{"name": topic}], "allow_auto_topic_creation": False}),
        encode_request(ApiKey.METADATA, 1, 1, "fuzz", {"topics": None}),
        encode_request(ApiKey.FETCH, 11, 1, "fuzz", {
            "replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}),
        encode_request(ApiKey.LIST_OFFSETS, 5, 1, "fuzz", {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
        encode_request(ApiKey.API_VERSIONS, 3, 1, "fuzz", {"client_software_name": "f", "client_software_version": "1"}),
        encode_request(ApiKey.DESCRIBE_CONFIGS, 4, 1, "fuzz", {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": None}], "include_synonyms": True,
            "include_documentation": False}),
        encode_request(ApiKey.CREATE_TOPICS, 5, 1, "fuzz", {"topics": [
            {"name": "fz", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 100, "validate_only": True}),
    ]
    deadline = time.monotonic() + 60
    sent = 0
    for i in range(400):
        if time.monotonic() > deadline:
            break
        frame = _mutations(rng, rng.choice(templates))
        sock = socket.create_connection((broker.host, broker.port), timeout=5)
        try:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(3)
            while sock.recv(65536):
                pass
        except (socket.timeout, OSError):
            pass
        finally:
            sock.close()
        sent += 1
        if i % 50 == 0:
            assert_serving(broker)
    assert sent >= 100
    assert_serving(broker)
    with WireClient(broker.host, broker.port) as wire:
        values = [r.value for b in fetch_all(wire, topic) for r in b.records]
    assert values[:5] == acked
    assert not any("Traceback" in line for line in broker.lines), "\n".join(broker.lines)


def test_acknowledged_records_survive_a_kill(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    try:
        with WireClient(broker.host, broker.port) as wire:
            topic = make_topic(wire)
            for i in range(20):
                body = produce_body(topic, encode_batch([{"value": b"%d" % i}]), acks=-1)
                assert wire.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0].error_code == 0
        broker.kill()
        broker.config["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port}"
        broker.start()
        with WireClient(broker.host, broker.port) as wire:
            values = [r.value for b in fetch_all(wire, topic) for r in b.records]
        assert values == [b"%d" % i for i in range(20)]
    finally:
        broker.stop()


@pytest.mark.parametrize("how", [pytest.param("sigterm", marks=pytest.mark.long), "sigkill"])
def test_idempotent_producer_across_a_broker_restart_loses_and_duplicates_nothing(tmp_path, how):
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = BrokerProcess(tmp_path).start()
    acked: list[bytes] = []
    failed: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())
        else:
            failed.append(str(err))

    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 60000, "reconnect.backoff.ms": 50})
        sent = 0
        deadline = time.monotonic() + 30
        restarted = False
        while sent < 6000 and time.monotonic() < deadline:
            producer.produce("restart", value=b"%06d" % sent, partition=0, on_delivery=on_delivery)
            sent += 1
            producer.poll(0)
            if sent % 200 == 0:
                time.sleep(0.01)
            if sent == 3000 and not restarted:
                if how == "sigterm":
                    broker.restart()       # clean shutdown, start again on the same port
                else:
                    broker.kill()          # no shutdown at all: producer state comes back from the log
                    broker.config["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port}"
                    broker.start()
                restarted = True
        assert producer.flush(60) == 0
        assert restarted and sent == 6000 and not failed, failed[:3]
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
        consumer.assign([TopicPartition("restart", 0, 0)])
        stored: list[bytes] = []
        end = time.monotonic() + 30
        while len(stored) < sent and time.monotonic() < end:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                stored.append(message.value())
        consumer.close()
        assert sorted(acked) == [b"%06d" % i for i in range(sent)]
        assert stored == [b"%06d" % i for i in range(sent)]   # in order, none lost, none twice
    finally:
        broker.stop()


@pytest.mark.parametrize("how", [pytest.param("sigterm", marks=pytest.mark.long), "sigkill"])
def test_a_retry_after_a_broker_restart_is_still_recognised_as_a_duplicate(tmp_path, how):
    broker = BrokerProcess(tmp_path).start()
    try:
        with WireClient(broker.host, broker.port) as wire:
            topic = make_topic(wire)
            init = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                                             "producer_id": -1, "producer_epoch": -1})
            pid, epoch = init.producer_id, init.producer_epoch
            batches = [encode_batch([{"value": b"%d-%d" % (n, i)} for i in range(5)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=5 * n) for n in range(3)]
            offsets = [wire.request(ApiKey.PRODUCE, 9, produce_body(topic, b)).responses[0]
                       .partition_responses[0].base_offset for b in batches]
            assert offsets == [0, 5, 10]
        if how == "sigterm":
            broker.stop()
        else:
            broker.kill()      # no snapshot written: the state must come back from the log itself
        broker.config["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port}"
        broker.start()
        with WireClient(broker.host, broker.port) as wire:
            retry = wire.request(ApiKey.PRODUCE, 9, produce_body(topic, batches[1])).responses[0].partition_responses[0]
            assert (retry.error_code, retry.base_offset) == (0, 5)     # the original offset, not appended again
            gap = encode_batch([{"value": b"gap"}], producer_id=pid, producer_epoch=epoch, base_sequence=99)
            assert wire.request(ApiKey.PRODUCE, 9, produce_body(topic, gap)).responses[0] \
                .partition_responses[0].error_code == 45               # OUT_OF_ORDER_SEQUENCE_NUMBER
            after = encode_batch([{"value": b"next"}], producer_id=pid, producer_epoch=epoch, base_sequence=15)
            assert wire.request(ApiKey.PRODUCE, 9, produce_body(topic, after)).responses[0] \
                .partition_responses[0].base_offset == 15
    finally:
        broker.stop()
