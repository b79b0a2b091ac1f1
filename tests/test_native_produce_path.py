"""The native Produce path (klog/broker/native_produce.py) answers exactly as the Python path does.

Two real brokers, one with ``klog.produce.native.enable`` on and one with it off, get the same request frames
byte for byte (every Produce version the broker advertises, success and every error case); their answers must be
the same bytes. The broker's counters (``klog.Broker.stats()``) show which requests the native path served: the
common ones on the first broker, never the uncommon ones, never anything on the second. Real clients
(confluent-kafka, kafka-python) then produce and consume through the native path.
"""

from __future__ import annotations

import struct
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import klog
from klog.broker import errors
from klog.protocol import ApiKey, decode_response, encode_request
from klog.protocol.error_codes import ErrorCode
from klog.records import encode_batch
from klog.testing.wire import WireClient
from native_path_support import BrokerPair, produce_with_two_clients, read_with_two_clients, topic_counters

pytestmark = pytest.mark.timeout(180)

PRODUCE_VERSIONS = range(0, 14)
#: Produce versions the native path serves (Kafka 4 refuses v0-2, and so does klog's Python path)
NATIVE_VERSIONS = range(3, 14)
TOPICS: dict[str, dict[str, str]] = {
    "plain": {},
    "gzipped": {"compression.type": "gzip"},
    "small": {"max.message.bytes": "200"},
    "compacted": {"cleanup.policy": "compact"},
}
NOW = int(time.time() * 1000)


def batch(count: int = 1, *, key: bytes | None = b"k", size: int = 20, **options: Any) -> bytes:
    return encode_batch([{"key": key, "value": b"v" * size, "timestamp": NOW + i} for i in range(count)],
                        **options)


def stand_in_id(name: str) -> uuid.UUID:
    """The topic id a v13 frame names ``name`` by: the two brokers give a topic different ids, so each broker's frame
    gets its own in place of this one (:meth:`Pair.frames`), and its answer this one back (:meth:`Pair.normalized`).
    A name no broker has stays an id no topic has."""
    return uuid.UUID(bytes=name.encode().ljust(16, b"#")[:16])


def produce_frame(version: int, cid: int, topic_data: list[tuple[str, list[tuple[int, bytes | None]]]], *,
                  acks: int = 1, timeout_ms: int = 5000, transactional_id: str | None = None) -> bytes:
    """From v13 (KIP-516) each topic is named by :func:`stand_in_id` of its name."""
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": name, "topic_id": stand_in_id(name) if version >= 13 else None,
                            "partition_data": [{"index": i, "records": r} for i, r in parts]}
                           for name, parts in topic_data]}
    return encode_request(ApiKey.PRODUCE, version, cid, "native-test", body)


def topic_ids(wire: WireClient) -> dict[bytes, bytes]:
    """Each topic's :func:`stand_in_id` bytes mapped to the broker's id bytes for it."""
    response = wire.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
    return {stand_in_id(t.name).bytes: t.topic_id.bytes for t in response.topics}


def with_ids(data: bytes, ids: dict[bytes, bytes], *, back: bool = False) -> bytes:
    """``data`` with each stand-in id replaced by the broker's (``back``: the other way)."""
    for stand_in, real in ids.items():
        data = data.replace(real, stand_in) if back else data.replace(stand_in, real)
    return data


def one_replica_routes(log: Any, topic: str, max_bytes: int = 1 << 20) -> Any:
    """Native produce routes with ``topic``-0 learned as a plain one-replica partition of ``log`` (the native call
    driven without a broker); :func:`learn_one_replica` learns it again after a ``clear``."""
    from klog import _native

    routes = _native.ProduceRoutes(check_records=True, max_decompressed_bytes=max_bytes, work_budget=max_bytes,
                                   error_codes=(errors.NONE, errors.CORRUPT_MESSAGE, errors.MESSAGE_TOO_LARGE,
                                                errors.KAFKA_STORAGE_ERROR))
    learn_one_replica(routes, log, topic, max_bytes)
    return routes


def learn_one_replica(routes: Any, log: Any, topic: str, max_bytes: int = 1 << 20) -> None:
    routes.learn(topic, 0, log, leader_epoch=0, replicated=False, max_message_bytes=max_bytes, compacted=False,
                 create_time=True, before_max_ms=2**62, after_max_ms=2**62)


class Pair(BrokerPair):
    """The same Produce frames to a broker with the native path and one without (from v13 each naming the topics
    by the ids its broker gave them)."""

    stat = "native_produce_requests"

    def __init__(self, native: Any, python: Any) -> None:
        super().__init__(native, python)
        self.ids = [topic_ids(wire) for wire in self.wires]

    def frames(self, frame_of: Any, cid: int) -> list[bytes]:
        frame = frame_of(cid)
        return [with_ids(frame, ids) for ids in self.ids]

    def normalized(self, answer: bytes, which: int, **options: Any) -> bytes:
        return with_ids(answer, self.ids[which], back=True)


def error_codes(answer: bytes, version: int) -> list[int]:
    _, response = decode_response(ApiKey.PRODUCE, version, answer)
    return [p.error_code for t in response.responses for p in t.partition_responses]


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    # metrics are kept only with a listener: both count, so that their counters can be compared
    metrics = {"klog.metrics.listener": "127.0.0.1:0"}
    with klog.Broker(config={"klog.produce.native.enable": True, **metrics}) as native, \
            klog.Broker(config={"klog.produce.native.enable": False, **metrics}) as python:
        for broker in (native, python):
            with WireClient(broker.host, broker.port) as wire:
                response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                    {"name": name, "num_partitions": 3, "replication_factor": 1, "assignments": [],
                     "configs": [{"name": k, "value": v} for k, v in configs.items()]}
                    for name, configs in TOPICS.items()], "timeout_ms": 5000, "validate_only": False})
                assert [t.error_code for t in response.topics] == [0] * len(TOPICS)
        both = Pair(native, python)
        # the Python path's first append to a partition routes it: warm every partition up on both brokers
        for name in TOPICS:
            for index in range(3):
                both.same(lambda cid, n=name, i=index: produce_frame(9, cid, [(n, [(i, batch())])]))
        yield both
        both.close()


@pytest.mark.parametrize("version", NATIVE_VERSIONS)
@pytest.mark.parametrize("acks", [1, -1])
def test_every_served_version_answers_a_one_record_produce_with_the_python_paths_bytes(pair, version, acks):
    before = pair.native_served()
    answer = pair.same(lambda cid: produce_frame(version, cid, [("plain", [(0, batch())])], acks=acks))
    assert error_codes(answer, version) == [0]
    assert pair.native_served() == before + 1


def test_v13_topic_ids_no_topic_has_get_the_python_paths_answer_and_known_ids_are_served_natively(pair):
    """Produce v13 names topics by id (KIP-516): the native path knows the ids of the topics it routes; an id no topic
    has (the zero id too) is the Python path's, answered UNKNOWN_TOPIC_ID per partition with the id echoed; one
    partition named twice is the Python path's (answered once), as with names."""
    before = pair.native_served()
    answer = pair.same(lambda cid: produce_frame(13, cid, [("plain", [(0, batch())]), ("small", [(1, batch())])]))
    assert error_codes(answer, 13) == [errors.NONE, errors.NONE]
    assert pair.native_served() == before + 1
    unknown = pair.same(lambda cid: produce_frame(13, cid, [("plain", [(0, batch())]), ("no-such", [(0, batch()),
                                                                                                  (1, batch())])]))
    _, response = decode_response(ApiKey.PRODUCE, 13, unknown)
    assert [(t.topic_id, [(p.index, p.error_code) for p in t.partition_responses]) for t in response.responses] == [
        (stand_in_id("plain"), [(0, errors.NONE)]),
        (stand_in_id("no-such"), [(0, errors.UNKNOWN_TOPIC_ID), (1, errors.UNKNOWN_TOPIC_ID)])]
    zero = pair.same(lambda cid: produce_frame(13, cid, [("plain", [(0, batch())])]).replace(
        stand_in_id("plain").bytes, bytes(16)))
    assert error_codes(zero, 13) == [errors.UNKNOWN_TOPIC_ID]
    assert pair.native_served() == before + 1
    twice = pair.same(lambda cid: produce_frame(13, cid, [("plain", [(0, batch())]), ("plain", [(1, batch())])]))
    assert error_codes(twice, 13) == [errors.NONE, errors.NONE]   # one id in two entries: native, as names are
    assert pair.native_served() == before + 2
    same = pair.same(lambda cid: produce_frame(13, cid, [("plain", [(0, batch())]), ("plain", [(0, batch())])]))
    assert error_codes(same, 13) == [errors.NONE]   # one partition twice: the Python path's, answered once
    assert pair.native_served() == before + 2


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_are_refused_by_the_python_path_on_both(pair, version):
    before = pair.native_served()
    answer = pair.same(lambda cid: produce_frame(version, cid, [("plain", [(0, None)])]))
    assert error_codes(answer, version) == [errors.UNSUPPORTED_VERSION]
    assert pair.native_served() == before


def test_many_topics_and_partitions_and_a_recompressed_topic_in_one_request(pair):
    before = pair.native_served()
    # a topic in two entries (a partition named twice is the Python path's: Kafka appends it once)
    topic_data = [("plain", [(0, batch(3)), (2, batch(1))]), ("gzipped", [(1, batch(5))]),
                  ("plain", [(1, batch(1, compression="lz4"))])]
    for version in NATIVE_VERSIONS:
        answer = pair.same(lambda cid: produce_frame(version, cid, topic_data))
        assert error_codes(answer, version) == [0] * 4
    assert pair.native_served() == before + len(NATIVE_VERSIONS)


def test_acks_0_is_appended_without_an_answer_and_the_next_answer_follows_it(pair):
    before = pair.native_served()
    pair.answers(lambda cid: produce_frame(9, cid, [("plain", [(2, batch())])], acks=0), expect_answer=False)
    answer = pair.same(lambda cid: produce_frame(9, cid, [("plain", [(2, batch())])]))
    assert error_codes(answer, 9) == [0]
    assert pair.native_served() == before + 2


def test_an_idempotent_producers_batches_in_sequence_are_served_natively_and_the_rest_by_python(pair):
    def send(seq: int, count: int = 2, epoch: int = 0, version: int = 9) -> bytes:
        records = batch(count, producer_id=7000, producer_epoch=epoch, base_sequence=seq)
        return pair.same(lambda cid: produce_frame(version, cid, [("plain", [(2, records)])]))

    before = pair.native_served()
    sequence = 0
    for version in NATIVE_VERSIONS:   # in sequence: native
        assert error_codes(send(sequence, version=version), version) == [errors.NONE]
        sequence += 2
    assert pair.native_served() == before + len(NATIVE_VERSIONS)
    duplicate = send(sequence - 2)   # a retry of the last batch: answered with its first offsets, by Python
    assert error_codes(duplicate, 9) == [errors.NONE]
    assert error_codes(send(sequence + 5), 9) == [errors.OUT_OF_ORDER_SEQUENCE_NUMBER]
    assert error_codes(send(0, epoch=1), 9) == [errors.NONE]   # a new epoch restarts at 0: in sequence
    assert pair.native_served() == before + len(NATIVE_VERSIONS) + 1
    assert error_codes(send(2, epoch=1), 9) == [errors.NONE]
    assert pair.native_served() == before + len(NATIVE_VERSIONS) + 2


def test_while_the_python_path_holds_a_producer_table_the_partitions_producers_are_its_to_serve(pair):
    """Every append path checks, appends and records a producer's batch as one step: the native paths under the
    partition's producer table's lock, the Python path by holding the table from its check to its record. While the
    table is held (here by a check made in the test), the native path leaves that partition's producers' batches to
    the Python path, whose record ends the hold; the partition's log shares the broker's table."""
    from klog.client.loop_thread import call_in_loop
    server = pair.brokers[0]._require()

    def in_loop(work: Any) -> Any:
        return call_in_loop(server.loop, work, timeout=30)

    def send(seq: int) -> bytes:
        records = batch(2, producer_id=7100, producer_epoch=0, base_sequence=seq)
        return pair.same(lambda cid: produce_frame(9, cid, [("plain", [(0, records)])]))

    pair.same(lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])]))   # the partition routed
    table = in_loop(lambda: server.state.producers.table("plain", 0))
    assert in_loop(lambda: server.state.partitions.get("plain", 0).producers) == table
    before = pair.native_served()
    assert error_codes(send(0), 9) == [errors.NONE]
    assert pair.native_served() == before + 1
    assert in_loop(lambda: server.state.producers.check("plain", 0, 7100, 0, 2, 3, hold=True)) == (errors.NONE, None)
    assert table.held
    assert error_codes(send(2), 9) == [errors.NONE]
    assert pair.native_served() == before + 1, "a held table's producer was served natively"
    assert not table.held
    assert error_codes(send(4), 9) == [errors.NONE]
    assert pair.native_served() == before + 2
    assert [(p[1], p[2]) for p in table.producers() if p[0] == 7100] == [(0, 5)]   # epoch, last sequence


def _corrupt_crc(records: bytes) -> bytes:
    damaged = bytearray(records)
    damaged[-1] ^= 0xFF   # the last record's value: the CRC no longer matches
    return bytes(damaged)


ERROR_CASES: dict[str, Any] = {
    "unknown topic": lambda v, cid: produce_frame(v, cid, [("nosuchtopic", [(0, batch())])]),
    "unknown partition": lambda v, cid: produce_frame(v, cid, [("plain", [(7, batch())])]),
    "truncated batch": lambda v, cid: produce_frame(v, cid, [("plain", [(0, batch()[:30])])]),
    "bad crc": lambda v, cid: produce_frame(v, cid, [("plain", [(0, _corrupt_crc(batch()))])]),
    "two batches": lambda v, cid: produce_frame(v, cid, [("plain", [(0, batch() + batch())])]),
    "null records": lambda v, cid: produce_frame(v, cid, [("plain", [(0, None)])]),
    "record too large": lambda v, cid: produce_frame(v, cid, [("small", [(0, batch(size=400))])]),
    "invalid required acks": lambda v, cid: produce_frame(v, cid, [("plain", [(0, batch())])], acks=2),
    "keyless record on a compacted topic": lambda v, cid: produce_frame(v, cid, [("compacted", [(0, batch(key=None))])]),
    "idempotent batch": lambda v, cid: produce_frame(
        v, cid, [("plain", [(0, batch(producer_id=4242, producer_epoch=0, base_sequence=0))])]),
    "transactional id": lambda v, cid: produce_frame(v, cid, [("plain", [(0, batch())])], transactional_id="tx"),
    "transactional batch without a transactional id": lambda v, cid: produce_frame(
        v, cid, [("plain", [(0, batch(producer_id=4242, producer_epoch=0, base_sequence=0, is_transactional=True))])]),
    "internal topic": lambda v, cid: produce_frame(v, cid, [("__consumer_offsets", [(0, batch())])]),
    "one good and one bad partition": lambda v, cid: produce_frame(
        v, cid, [("plain", [(1, batch()), (0, _corrupt_crc(batch()))])]),
    "zstd before v7 (any version: the Python path decides)": lambda v, cid: produce_frame(
        v, cid, [("plain", [(0, batch(compression="zstd"))])]),
    "acks=all with timeout 0": lambda v, cid: produce_frame(v, cid, [("plain", [(0, batch())])], acks=-1, timeout_ms=0),
}
#: the cases the native path serves itself (a valid request), the others it hands to the Python path
NATIVE_CASES = {"acks=all with timeout 0"}
#: cases the Python path accepts (at least in part): an idempotent producer's first batch, a partial refusal
ACCEPTED_CASES = NATIVE_CASES | {"idempotent batch", "one good and one bad partition", "transactional id"}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_each_error_case_gets_the_python_paths_bytes_on_every_version(pair, case):
    make = ERROR_CASES[case]
    before = pair.native_served()
    for version in NATIVE_VERSIONS:
        if case.startswith("zstd") and version >= 7:
            continue
        answer = pair.same(lambda cid: make(version, cid))
        if case not in ACCEPTED_CASES:
            assert any(error_codes(answer, version)), (case, version)
    served = pair.native_served() - before
    # an idempotent producer's first batch is in sequence (served natively); its resends are duplicates
    expected = len(NATIVE_VERSIONS) if case in NATIVE_CASES else 1 if case == "idempotent batch" else 0
    assert served == expected, case


def _what_comes_back(broker: klog.Broker, data: bytes) -> tuple[bytes, bool]:
    """The bytes a broker sends back after ``data`` until it closes the connection or 2 s of silence."""
    with WireClient(broker.host, broker.port, timeout=2.0) as wire:
        wire.send_raw(data)
        received = b""
        while True:
            try:
                chunk = wire.sock.recv(65536)
            except TimeoutError:
                return received, False
            except OSError:
                return received, True
            if not chunk:
                return received, True
            received += chunk


@pytest.mark.parametrize("damage", ["trailing bytes", "cut inside the records"])
def test_a_malformed_produce_frame_gets_the_python_paths_treatment(pair, damage):
    frame = produce_frame(9, 999, [("plain", [(0, batch())])])
    body = frame[4:] + b"\x00\x01\x02" if damage == "trailing bytes" else frame[4:-12]
    data = struct.pack(">i", len(body)) + body
    before = pair.native_served()
    native, python = (_what_comes_back(broker, data) for broker in pair.brokers)
    assert native == python
    assert pair.native_served() == before


def test_a_config_change_is_applied_to_the_next_native_produce(pair):
    """A route learned under the old max.message.bytes is forgotten with the change: the batch is refused."""
    for broker in pair.brokers:
        with WireClient(broker.host, broker.port) as wire:
            response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
                {"resource_type": 2, "resource_name": "plain",
                 "configs": [{"name": "max.message.bytes", "config_operation": 0, "value": "150"}]}],
                "validate_only": False})
            assert response.responses[0].error_code == 0
    try:
        answer = pair.same(lambda cid: produce_frame(9, cid, [("plain", [(0, batch(size=300))])]))
        assert error_codes(answer, 9) == [errors.MESSAGE_TOO_LARGE]
    finally:
        for broker in pair.brokers:
            with WireClient(broker.host, broker.port) as wire:
                wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
                    {"resource_type": 2, "resource_name": "plain",
                     "configs": [{"name": "max.message.bytes", "config_operation": 1, "value": None}]}],
                    "validate_only": False})


def test_the_native_path_counts_bytes_and_records_in_as_the_python_path_does(pair):
    native, python = pair.brokers
    counters = topic_counters
    request = [("plain", [(1, batch(4))]), ("gzipped", [(2, batch(3))])]
    pair.same(lambda cid: produce_frame(9, cid, request))   # routes both (were they forgotten by a config change)
    before = pair.native_served()
    pair.same(lambda cid: produce_frame(9, cid, request))
    assert pair.native_served() == before + 1
    assert counters(native) == counters(python), (counters(native), counters(python))


def test_real_clients_produce_and_consume_through_the_native_path(tmp_path):
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kafka")
    with klog.Broker(config={"klog.produce.native.enable": True, "klog.metrics.listener": "127.0.0.1:0"}) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        topic, expected = produce_with_two_clients(bootstrap, "clients", 200,
                                                   {"acks": -1, "enable.idempotence": True})
        assert broker.stats()["native_produce_requests"] > 0
        seen, got = read_with_two_clients(bootstrap, topic, 400)
        assert seen == expected
        assert got == seen
        assert topic_counters(broker)[topic][1] == 400   # messages in
        # the Prometheus endpoint says how many Produce requests the native path served, of all answered
        listener = broker._require().metrics_listener
        assert listener is not None
        host, port = listener.address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
            scraped = {line.split(" ")[0]: float(line.split(" ")[1]) for line in response.read().decode().splitlines()
                       if line and not line.startswith("#")}
        native = scraped["klog_produce_native_requests_total"]
        assert native == broker.stats()["native_produce_requests"] > 0
        assert scraped['kafka_network_requestmetrics_requests_total{request="Produce"}'] >= native


def _until(wire: WireClient, frame_of_cid: Any, version: int, want: int, cid: list[int]) -> None:
    """Send the request until its one partition answers ``want`` (a metadata change being applied), bounded."""
    deadline = time.monotonic() + 30
    while True:
        cid[0] += 1
        wire.send_raw(frame_of_cid(cid[0]))
        if error_codes(wire.read_frame(), version) == [want] or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def test_a_deleted_and_recreated_topic_is_not_written_through_an_old_route(pair):
    """The route to the deleted topic's log is forgotten with the deletion: the recreated topic starts at offset 0
    and the old log never gets the batch."""
    name = "ephemeral"
    create = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": []}], "timeout_ms": 5000, "validate_only": False}
    produce = lambda cid: produce_frame(9, cid, [(name, [(0, batch())])])  # noqa: E731
    cid = [10_000]
    for broker in pair.brokers:
        with WireClient(broker.host, broker.port) as wire:
            assert wire.request(ApiKey.CREATE_TOPICS, 7, create).topics[0].error_code == 0
            _until(wire, produce, 9, errors.NONE, cid)
            _until(wire, produce, 9, errors.NONE, cid)   # the native path's, on the first broker
            response = wire.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [name], "timeout_ms": 5000})
            assert response.responses[0].error_code == 0
            _until(wire, produce, 9, errors.UNKNOWN_TOPIC_OR_PARTITION, cid)
            assert wire.request(ApiKey.CREATE_TOPICS, 7, create).topics[0].error_code == 0
            _until(wire, produce, 9, errors.NONE, cid)
    answer = pair.same(produce)
    _, response = decode_response(ApiKey.PRODUCE, 9, answer)
    assert response.responses[0].partition_responses[0].base_offset == 1


def test_with_an_authorizer_the_native_path_asks_the_hook_and_a_denied_topic_gets_the_python_paths_answer():
    """The native call asks AccessControl (Write on each topic) before appending: an allowed topic is served
    natively, a denied one by the Python path (TOPIC_AUTHORIZATION_FAILED, the same bytes, the denial counted
    once)."""
    from klog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType

    props = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "allow.everyone.if.no.acl.found": "true"}
    with klog.Broker(config={"klog.produce.native.enable": True, **props}) as native, \
            klog.Broker(config={"klog.produce.native.enable": False, **props}) as python:
        for broker in (native, python):
            with WireClient(broker.host, broker.port) as wire:
                response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                    {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                    for name in ("open", "closed")], "timeout_ms": 5000, "validate_only": False})
                assert [t.error_code for t in response.topics] == [errors.NONE] * 2
                answer = wire.request(ApiKey.CREATE_ACLS, 2, {"creations": [{
                    "resource_type": ResourceType.TOPIC, "resource_name": "closed",
                    "resource_pattern_type": PatternType.LITERAL, "principal": "User:ANONYMOUS", "host": "*",
                    "operation": AclOperation.WRITE, "permission_type": AclPermissionType.DENY}]})
                assert [r.error_code for r in answer.results] == [errors.NONE]
        both = Pair(native, python)
        try:
            for _ in range(3):   # the first routes the partition, the next two are native
                assert error_codes(both.same(lambda cid: produce_frame(9, cid, [("open", [(0, batch())])])), 9) \
                    == [errors.NONE]
            assert both.native_served() == 2
            for topic_data in ([("closed", [(0, batch())])], [("open", [(0, batch())]), ("closed", [(0, batch())])]):
                answer = both.same(lambda cid, td=topic_data: produce_frame(9, cid, td))
                assert errors.TOPIC_AUTHORIZATION_FAILED in error_codes(answer, 9)
            assert both.native_served() == 2
            denied = [b._require().state.access.denied for b in both.brokers]
            assert denied[0] == denied[1] and sum(denied[0].values()) == 2
        finally:
            both.close()


def test_the_native_call_never_raises_on_damaged_frames_and_appends_only_what_it_answers(tmp_path):
    """Random damage to a valid frame (a byte changed, the frame cut): the native call answers or declines (None),
    never raises; every batch it reports appended is in the log."""
    import random

    from klog import _native

    manager = _native.LogManager([str(tmp_path)], _native.LogConfig())
    try:
        log = manager.create("plain", 0)
        routes = one_replica_routes(log, "plain")
        rng = random.Random(38)
        appended = 0
        for round_ in range(3000):
            version = rng.choice(list(NATIVE_VERSIONS))
            frame = bytearray(produce_frame(version, round_, [("plain", [(0, batch(rng.randint(1, 3)))])])[4:])
            if round_ % 3:
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            if round_ % 5 == 0:
                del frame[rng.randrange(len(frame)):]
            outcome = _native.native_produce(bytes(frame), routes, now_ms=NOW, max_version=11)
            if outcome is not None:
                assert not outcome.failures
                appended += sum(records for _, _, _, records, *_ in outcome.appended)
        assert appended > 0 and log.log_end_offset == appended
    finally:
        manager.close()


# ---- acks=all on replicated partitions: two 3-node clusters, one with the native path, one without ----------------

#: topic -> (configs, partitions' replica lists: node 1 leads each, in both clusters)
REPLICATED: dict[str, tuple[dict[str, str], list[list[int]]]] = {
    "rep": ({"min.insync.replicas": "2"}, [[1, 2, 3], [1, 3, 2]]),
    "strict": ({"min.insync.replicas": "3"}, [[1, 2, 3]]),
}


class ClusterPair:
    """The same frames to the same node of two 3-node RF=3 clusters, the first with the native path on all its
    nodes, the second with it off; their answers side by side."""

    def __init__(self, native: Any, python: Any, metrics_ports: list[dict[int, int]]) -> None:
        self.clusters = (native, python)
        self.metrics_ports = metrics_ports
        self.cid = 0
        self.ids = []
        for cluster in self.clusters:
            with cluster.wire(1) as wire:
                self.ids.append(topic_ids(wire))

    def answers(self, node: int, frame_of_cid: Any) -> tuple[bytes, bytes]:
        self.cid += 1
        frame = frame_of_cid(self.cid)
        wires = [cluster.wire(node) for cluster in self.clusters]
        try:
            for wire, ids in zip(wires, self.ids):
                wire.send_raw(with_ids(frame, ids))
            native, python = (with_ids(wire.read_frame(), ids, back=True) for wire, ids in zip(wires, self.ids))
        finally:
            for wire in wires:
                wire.close()
        return native, python

    def same(self, node: int, frame_of_cid: Any) -> bytes:
        native, python = self.answers(node, frame_of_cid)
        assert native == python
        return native

    def settle(self) -> None:
        """Until every partition of :data:`REPLICATED` is routed on node 1 of the native cluster again (a metadata
        image applied since, such as an ISR change, makes the next request of each take the Python path)."""
        deadline = time.monotonic() + 30
        keys = [(name, i) for name, (_, replicas) in REPLICATED.items() for i in range(len(replicas))]
        while time.monotonic() < deadline:
            before = self.native_served()
            self.same(1, lambda cid: produce_frame(9, cid, [(n, [(i, batch())]) for n, i in keys]))
            if self.native_served() == before + 1:
                return
            time.sleep(0.2)
        raise AssertionError("the native cluster's routes were never learned again")

    def native_served(self, node: int = 1) -> int:
        served = []
        for ports in self.metrics_ports:
            with urllib.request.urlopen(f"http://127.0.0.1:{ports[node]}/metrics", timeout=10) as response:
                lines = response.read().decode().splitlines()
            served.append(next(int(float(line.split(" ")[1])) for line in lines
                               if line.startswith("klog_produce_native_requests_total ")))
        assert served[1] == 0, "the cluster without the native path served a request natively"
        return served[0]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory) -> Iterator[ClusterPair]:
    from klog.testing.cluster import KlogCluster
    from klog.testing.kafka import free_port

    root = tmp_path_factory.mktemp("native-clusters")
    ports = [{node: free_port() for node in (1, 2, 3)} for _ in range(2)]
    made = [KlogCluster(root / name, 3, properties={"klog.produce.native.enable": native},
                        node_properties={n: {"klog.metrics.listener": f"127.0.0.1:{p}"} for n, p in port.items()})
            for name, native, port in (("native", True, ports[0]), ("python", False, ports[1]))]
    try:
        for cluster in made:
            cluster.start()
        for cluster in made:
            cluster.wait_for_brokers()
            with cluster.wire(1, timeout=45) as wire:
                response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                    {"name": name, "num_partitions": -1, "replication_factor": -1,
                     "assignments": [{"partition_index": i, "broker_ids": r} for i, r in enumerate(replicas)],
                     "configs": [{"name": k, "value": v} for k, v in configs.items()]}
                    for name, (configs, replicas) in REPLICATED.items()], "timeout_ms": 30000, "validate_only": False})
                assert [t.error_code for t in response.topics] == [0] * len(REPLICATED)
        for cluster in made:
            for name, (_, replicas) in REPLICATED.items():
                assert cluster.wait_for_topic(name, len(replicas)) == {i: 1 for i in range(len(replicas))}
                for i in range(len(replicas)):
                    cluster.wait_for_isr(name, i, [1, 2, 3])
        pair = ClusterPair(made[0], made[1], ports)
        # the Python path's first append to a partition routes it (acks=1: nothing to wait for)
        for name, (_, replicas) in REPLICATED.items():
            for i in range(len(replicas)):
                pair.same(1, lambda cid, n=name, i=i: produce_frame(9, cid, [(n, [(i, batch())])]))
        yield pair
    finally:
        for cluster in made:
            cluster.close()


def test_acks_all_on_replicated_partitions_is_served_natively_with_the_python_paths_bytes(clusters):
    clusters.settle()
    before = clusters.native_served()
    for version in NATIVE_VERSIONS:
        answer = clusters.same(1, lambda cid: produce_frame(
            version, cid, [("rep", [(0, batch(3)), (1, batch(1))]), ("strict", [(0, batch(2))])], acks=-1))
        assert error_codes(answer, version) == [errors.NONE] * 3
    assert clusters.native_served() == before + len(NATIVE_VERSIONS)


def test_an_idempotent_producers_acks_all_batches_on_a_replicated_partition_are_served_natively(clusters):
    clusters.settle()
    before = clusters.native_served()
    for seq in (0, 2, 4):
        records = batch(2, producer_id=9100, producer_epoch=0, base_sequence=seq)
        answer = clusters.same(1, lambda cid: produce_frame(11, cid, [("rep", [(1, records)])], acks=-1))
        assert error_codes(answer, 11) == [errors.NONE]
    # the first batch of a producer the broker does not know is in sequence too
    assert clusters.native_served() == before + 3
    retry = batch(2, producer_id=9100, producer_epoch=0, base_sequence=4)   # a duplicate: the Python path's
    assert error_codes(clusters.same(1, lambda cid: produce_frame(11, cid, [("rep", [(1, retry)])], acks=-1)),
                       11) == [errors.NONE]
    assert clusters.native_served() == before + 3


@pytest.mark.parametrize("version", NATIVE_VERSIONS)
def test_a_follower_answers_not_leader_or_follower_with_the_python_paths_bytes(clusters, version):
    """Sent to node 2 (a follower of every partition): the native path hands it to the Python path on both. From
    v10 the answer names the leader's endpoint (KIP-951): its port is each cluster's own, the rest the same bytes."""
    before = clusters.native_served(2)
    native, python = clusters.answers(2, lambda cid: produce_frame(version, cid, [("rep", [(0, batch())])], acks=-1))
    assert error_codes(native, version) == [errors.NOT_LEADER_OR_FOLLOWER]
    if version >= 10:
        for answer, cluster in zip((native, python), clusters.clusters):
            assert struct.pack(">i", cluster.client_ports[1]) in answer
        native = native.replace(struct.pack(">i", clusters.clusters[0].client_ports[1]), b"PORT")
        python = python.replace(struct.pack(">i", clusters.clusters[1].client_ports[1]), b"PORT")
    assert native == python
    assert clusters.native_served(2) == before


def test_acks_all_times_out_with_the_python_paths_bytes_when_the_followers_do_not_fetch(clusters):
    """Both followers paused (SIGSTOP) in both clusters: the batch is appended on the leader, the ISR never has it, and
    the native path's wait answers REQUEST_TIMED_OUT at timeout_ms with the Python path's bytes."""
    clusters.settle()
    before = clusters.native_served()
    for cluster in clusters.clusters:
        for node in (2, 3):
            cluster.pause(node)
    try:
        answer = clusters.same(1, lambda cid: produce_frame(
            9, cid, [("rep", [(0, batch()), (1, batch())])], acks=-1, timeout_ms=400))
    finally:
        for cluster in clusters.clusters:
            for node in (2, 3):
                cluster.resume(node)
    assert error_codes(answer, 9) == [errors.REQUEST_TIMED_OUT] * 2
    assert clusters.native_served() == before + 1
    for cluster in clusters.clusters:   # the followers catch up: acks=all succeeds again
        for i in (0, 1):
            cluster.wait_for_isr("rep", i, [1, 2, 3])
    answer = clusters.same(1, lambda cid: produce_frame(9, cid, [("rep", [(0, batch())])], acks=-1))
    assert error_codes(answer, 9) == [errors.NONE]


def test_min_insync_replicas_refuses_with_the_python_paths_bytes_and_the_rest_stays_native(clusters):
    """Node 3 stopped in both clusters: the ISR is [1, 2]. acks=all to a topic with min.insync.replicas=3 is
    refused NOT_ENOUGH_REPLICAS (by the Python path: the native call's one check refuses it) with the same bytes;
    min.insync.replicas=2 still takes acks=all natively; acks=1 to the refused topic too."""
    for cluster in clusters.clusters:
        cluster.stop_node(3)
    for cluster in clusters.clusters:
        cluster.wait_for_isr("strict", 0, [1, 2])
        cluster.wait_for_isr("rep", 0, [1, 2])
    # the first request after a metadata change takes the Python path (the routes were forgotten)
    clusters.settle()
    before = clusters.native_served()
    for version in NATIVE_VERSIONS:
        refused = clusters.same(1, lambda cid: produce_frame(
            version, cid, [("rep", [(0, batch())]), ("strict", [(0, batch())])], acks=-1))
        assert error_codes(refused, version) == [errors.NONE, errors.NOT_ENOUGH_REPLICAS]
    assert clusters.native_served() == before
    for version in NATIVE_VERSIONS:
        answer = clusters.same(1, lambda cid: produce_frame(version, cid, [("rep", [(0, batch())])], acks=-1))
        assert error_codes(answer, version) == [errors.NONE]
        answer = clusters.same(1, lambda cid: produce_frame(version, cid, [("strict", [(0, batch())])], acks=1))
        assert error_codes(answer, version) == [errors.NONE]
    assert clusters.native_served() == before + 2 * len(NATIVE_VERSIONS)


def test_pipelined_acks_all_requests_are_appended_natively_and_answered_in_order_with_the_python_paths_bytes(
        clusters):
    """Ten acks=all requests sent back to back on one connection, an acks=1 one among them: each is appended while the
    earlier answers wait for the ISR, and the answers come in request order, byte for byte the Python path's."""
    clusters.settle()
    before = clusters.native_served()
    frames = []
    for k in range(10):
        clusters.cid += 1
        frames.append(produce_frame(9, clusters.cid, [("rep", [(k % 2, batch())])], acks=1 if k == 4 else -1))
    wires = [cluster.wire(1) for cluster in clusters.clusters]
    try:
        for wire in wires:
            wire.send_raw(b"".join(frames))
        answers = [[wire.read_frame() for _ in frames] for wire in wires]
    finally:
        for wire in wires:
            wire.close()
    assert answers[0] == answers[1]
    assert [struct.unpack_from(">i", a, 0)[0] for a in answers[0]] == [clusters.cid - 9 + k for k in range(10)]
    assert all(error_codes(a, 9) == [errors.NONE] for a in answers[0])
    assert clusters.native_served() == before + 10


# -- transactional producers (KIP-890 verification stays the coordinator's) ---------------------------------------

def _each(pair: Pair, frame_of: Any) -> bytes:
    """``frame_of(which, cid)`` to each broker (0: native, 1: Python), on the pair's connections: the same answer."""
    pair.cid += 1
    for which, wire in enumerate(pair.wires):
        wire.send_raw(frame_of(which, pair.cid))
    native, python = (wire.read_frame() for wire in pair.wires)
    assert native == python
    return native


def _transactional_producer(pair: Pair, tid: str) -> list[tuple[int, int]]:
    """InitProducerId for ``tid`` on each broker (after FindCoordinator answers): each one's (producer id, epoch)."""
    ids = []
    for broker in pair.brokers:
        with WireClient(broker.host, broker.port) as wire:
            deadline = time.monotonic() + 30
            while True:
                found = wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]})
                init = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid,
                                                                 "transaction_timeout_ms": 60000})
                if found.coordinators[0].error_code == 0 and init.error_code == 0:
                    break
                assert time.monotonic() < deadline, (found, init)
                time.sleep(0.1)
            ids.append((init.producer_id, init.producer_epoch))
    return ids


def _coordinator_request(pair: Pair, key: ApiKey, version: int, body_of: Any) -> list[Any]:
    answers = []
    for which, broker in enumerate(pair.brokers):
        with WireClient(broker.host, broker.port) as wire:
            answers.append(wire.request(key, version, body_of(which)))
    return answers


def _read_committed_ends(pair: Pair, topic: str, index: int) -> tuple[int, int]:
    """ListOffsets latest with isolation_level read_committed: the last stable offset of each broker (native,
    Python)."""
    ends = []
    for answer in pair.answers(lambda cid: encode_request(ApiKey.LIST_OFFSETS, 5, cid, "native-test", {
            "replica_id": -1, "isolation_level": 1, "topics": [{"name": topic, "partitions": [
                {"partition_index": index, "current_leader_epoch": -1, "timestamp": -1}]}]})):
        _, response = decode_response(ApiKey.LIST_OFFSETS, 5, answer)
        found = response.topics[0].partitions[0]
        assert found.error_code == 0, found
        ends.append(int(found.offset))
    return ends[0], ends[1]


def _read_committed_end(pair: Pair, topic: str, index: int) -> int:
    """The last stable offset, from each broker alike."""
    native, python = _read_committed_ends(pair, topic, index)
    assert native == python
    return native


def test_a_transactional_producers_batches_are_served_natively_once_the_coordinator_has_the_partition(pair):
    """Transaction protocol v1 (Produce v3-11) with transaction.partition.verification.enable (on by default): a
    batch for a partition the producer added with AddPartitionsToTxn is appended natively, the coordinator's state
    read in the same call (KIP-890 part 1), and opens the partition's transaction (the last stable offset stays at
    its first offset until the COMMIT marker); a batch for a partition not in the transaction, and a late batch
    after the transaction ended, are refused by the Python path with Kafka's INVALID_TXN_STATE. The same answers,
    byte for byte, from the broker without the native path."""
    tid = f"native-txn-{uuid.uuid4().hex[:6]}"
    ids = _transactional_producer(pair, tid)
    # __transaction_state was made: a new metadata image, the routes are forgotten; a Python-path append routes again
    for index in (1, 2):
        pair.same(lambda cid, i=index: produce_frame(9, cid, [("plain", [(i, batch())])]))

    def txn_batch(which: int, seq: int, count: int = 2) -> bytes:
        pid, epoch = ids[which]
        return batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)

    def produce(index: int, seq: int, version: int = 9) -> bytes:
        return _each(pair, lambda which, cid: produce_frame(version, cid, [("plain", [(index, txn_batch(which, seq))])],
                                                            acks=-1, transactional_id=tid))

    stable_before = _read_committed_end(pair, "plain", 1)
    assert stable_before > 0
    added = _coordinator_request(pair, ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda which: {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": ids[which][0],
        "v3_and_below_producer_epoch": ids[which][1], "v3_and_below_topics": [{"name": "plain", "partitions": [1]}]})
    assert [[p.partition_error_code for t in a.results_by_topic_v3_and_below for p in t.results_by_partition]
            for a in added] == [[0], [0]]
    before = pair.native_served()
    assert error_codes(produce(1, 0), 9) == [errors.NONE]        # verified with the coordinator: native
    assert error_codes(produce(1, 2, version=11), 11) == [errors.NONE]   # in the partition's open transaction
    assert pair.native_served() == before + 2
    # the transaction is open on the partition: read_committed ends before its first batch
    assert _read_committed_end(pair, "plain", 1) == stable_before
    assert error_codes(produce(2, 0), 9) == [errors.INVALID_TXN_STATE]   # not added: refused, by Python
    assert pair.native_served() == before + 2
    ended = _coordinator_request(pair, ApiKey.END_TXN, 3, lambda which: {
        "transactional_id": tid, "producer_id": ids[which][0], "producer_epoch": ids[which][1], "committed": True})
    assert [e.error_code for e in ended] == [0, 0]
    deadline = time.monotonic() + 10   # the markers and CompleteCommit follow the answer, on each in its own time
    while stable_before in _read_committed_ends(pair, "plain", 1):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _read_committed_end(pair, "plain", 1) > stable_before
    late = produce(1, 4)
    while error_codes(late, 9) == [errors.NOT_ENOUGH_REPLICAS] and time.monotonic() < deadline:
        time.sleep(0.05)   # until CompleteCommit is written the coordinator answers the retriable error
        late = produce(1, 4)
    assert error_codes(late, 9) == [errors.INVALID_TXN_STATE]     # the transaction ended: refused, by Python
    assert pair.native_served() == before + 2


def _describe_transaction(pair: Pair, tid: str) -> list[tuple[str, list[tuple[str, list[int]]]]]:
    """DescribeTransactions of ``tid`` on each broker: (state, [(topic, partitions)])."""
    return [(t.transaction_state, sorted((topic.topic, sorted(topic.partitions)) for topic in t.topics))
            for a in _coordinator_request(pair, ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                          lambda which: {"transactional_ids": [tid]})
            for t in a.transaction_states]


def test_under_transaction_protocol_v2_the_leader_adds_the_partition_natively_when_no_wait_is_needed(pair):
    """Produce v12 (transaction protocol v2, KIP-890 part 2): the producer's first batch on a partition makes its
    leader add the partition to the transaction, a write to __transaction_state. On one node that write is in the
    ISR once appended, so the native path adds the partition (the coordinator's checks and Ongoing write, in the
    same event-loop turn as the append) and appends the batch; the transaction's state is then what the Python
    path makes it (DescribeTransactions), and its next batches are native too. A batch the coordinator refuses (an
    unknown producer id, a fenced epoch) is the Python path's to answer. The same answers from the broker without
    the native path, byte for byte."""
    tid = f"native-tv2-{uuid.uuid4().hex[:6]}"
    ids = _transactional_producer(pair, tid)
    pair.same(lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])]))   # routed again (see above)

    def produce(seq: int, *, index: int = 0, pid_delta: int = 0, epoch_delta: int = 0) -> bytes:
        def frame(which: int, cid: int) -> bytes:
            pid, epoch = ids[which]
            records = batch(2, producer_id=pid + pid_delta, producer_epoch=epoch + epoch_delta, base_sequence=seq,
                            is_transactional=True)
            return produce_frame(12, cid, [("plain", [(index, records)])], acks=-1, transactional_id=tid)
        return _each(pair, frame)

    before = pair.native_served()
    assert _describe_transaction(pair, tid) == [("Empty", [])] * 2
    assert error_codes(produce(0, pid_delta=1000), 12) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING]   # by Python
    assert error_codes(produce(0, epoch_delta=1), 12) == [errors.INVALID_PRODUCER_EPOCH]   # fenced: by Python
    assert pair.native_served() == before
    assert _describe_transaction(pair, tid) == [("Empty", [])] * 2
    stable_before = _read_committed_end(pair, "plain", 0)
    assert error_codes(produce(0), 12) == [errors.NONE]   # added by the leader, natively
    assert pair.native_served() == before + 1
    assert _describe_transaction(pair, tid) == [("Ongoing", [("plain", [0])])] * 2
    assert _read_committed_end(pair, "plain", 0) == stable_before   # the transaction is open on the partition
    assert error_codes(produce(2), 12) == [errors.NONE]
    assert error_codes(produce(4), 12) == [errors.NONE]
    assert pair.native_served() == before + 3
    assert error_codes(produce(2), 12) == [errors.NONE]   # a retry of an appended batch: a duplicate, by Python
    assert pair.native_served() == before + 3
    assert error_codes(produce(0, index=1), 12) == [errors.NONE]   # a second partition joins it, natively
    assert pair.native_served() == before + 4
    assert _describe_transaction(pair, tid) == [("Ongoing", [("plain", [0, 1])])] * 2
    ended = _coordinator_request(pair, ApiKey.END_TXN, 5, lambda which: {
        "transactional_id": tid, "producer_id": ids[which][0], "producer_epoch": ids[which][1], "committed": True})
    assert [e.error_code for e in ended] == [0, 0]
    assert [e.producer_epoch for e in ended] == [ids[0][1] + 1, ids[1][1] + 1]   # v2: every end bumps the epoch
    deadline = time.monotonic() + 10   # the markers and CompleteCommit follow the answer
    while _describe_transaction(pair, tid) != [("CompleteCommit", [])] * 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _read_committed_end(pair, "plain", 0) > stable_before
    late = produce(6)   # transaction N's epoch once N+1 may run: refused by the partition, by Python
    assert error_codes(late, 12) == [errors.INVALID_PRODUCER_EPOCH]
    ids = [(pid, epoch + 1) for pid, epoch in ids]
    assert error_codes(produce(0), 12) == [errors.NONE]   # the next transaction, at the bumped epoch: native
    assert pair.native_served() == before + 5
    assert _describe_transaction(pair, tid) == [("Ongoing", [("plain", [0])])] * 2


#: a Python process: the main thread appends large frames through the native call (their appends run without the
#: GIL) while a second thread forgets and relearns the routes, as the broker's flush does from its worker thread
#: when a log dir goes offline
_FORGET_WHILE_APPENDING = r"""
import sys, threading, time
from klog import _native
from klog.records import encode_batch
sys.path.insert(0, sys.argv[2])
from test_native_produce_path import NOW, learn_one_replica, one_replica_routes, produce_frame

manager = _native.LogManager([sys.argv[1]], _native.LogConfig())
log = manager.create("big", 0)
routes = one_replica_routes(log, "big", 4 << 20)
records = encode_batch([{"key": b"k", "value": b"v" * 1000, "timestamp": NOW + i} for i in range(300)])
frame = produce_frame(9, 1, [("big", [(0, records)])])[4:]
assert len(frame) > 256 * 1024
done = threading.Event()
forgets = 0
def forget():
    global forgets
    while not done.is_set():
        routes.clear()
        learn_one_replica(routes, log, "big", 4 << 20)
        forgets += 1
        time.sleep(0.0005)   # some frames get through to their append between two forgets
forgetter = threading.Thread(target=forget)
forgetter.start()
served = 0
deadline = time.monotonic() + 30
while served < 20 and time.monotonic() < deadline:   # until some frames reached their append between forgets
    if _native.native_produce(frame, routes, now_ms=NOW, max_version=11) is not None:
        served += 1
    else:
        time.sleep(0)   # declined (the routes forgotten): let the other thread learn them again
done.set()
forgetter.join()
manager.close()
print(f"served {served} forgets {forgets}")
"""


def test_forgetting_the_routes_while_a_large_frame_appends_without_the_gil_does_not_deadlock(tmp_path):
    """A large frame's append holds the routes' gate with the GIL released; forgetting the routes from another
    thread (the broker's flush, when a log dir goes offline) waited for that gate holding the GIL, while the append
    waited for the GIL to let go of it: the whole broker hung. Run in a child process so that a hang is a failure."""
    import subprocess
    import sys
    from pathlib import Path

    try:
        child = subprocess.run([sys.executable, "-c", _FORGET_WHILE_APPENDING, str(tmp_path),
                                str(Path(__file__).parent)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("appending large frames while the routes were forgotten hung (a GIL/gate deadlock)")
    assert child.returncode == 0, child.stderr[-3000:]
    served, forgets = (int(x) for x in child.stdout.split()[1::2])
    assert served == 20 and forgets > 0, child.stdout
