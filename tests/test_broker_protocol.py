"""klog-broker speaks Kafka's protocol: every handler checked at the wire level against a real broker process.

Requests are built with klog.protocol and record batches with klog.records; answers are compared with what
Apache Kafka returns for the same request.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid

import pytest

from klog.protocol import ApiKey, decode_response, encode_request
from klog.protocol.error_codes import ErrorCode
from klog.records import decode_batches, encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.timeout(120)

NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 2, 3
MESSAGE_TOO_LARGE, INVALID_TOPIC, NOT_ENOUGH_REPLICAS, INVALID_REQUIRED_ACKS = 10, 17, 19, 21
INVALID_TIMESTAMP, UNSUPPORTED_VERSION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS = 32, 35, 36, 37
INVALID_REPLICATION_FACTOR, INVALID_CONFIG, INVALID_REQUEST = 38, 40, 42
OUT_OF_ORDER_SEQUENCE, INVALID_PRODUCER_EPOCH, UNSUPPORTED_COMPRESSION, INVALID_RECORD = 45, 47, 76, 87


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"num.partitions": 2, "message.max.bytes": 200_000}
    with BrokerProcess(tmp_path_factory.mktemp("protocol"), config) as proc:
        yield proc


@pytest.fixture()
def wire(broker):
    with WireClient(broker.host, broker.port) as client:
        yield client


def new_topic(wire, partitions=1, configs=None):
    name = f"t-{uuid.uuid4().hex[:10]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == NONE, response
    return name


def produce(wire, topic, batch, *, partition=0, version=9, acks=-1):
    response = wire.request(ApiKey.PRODUCE, version, {
        "transactional_id": None, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return response.responses[0].partition_responses[0]


def fetch(wire, topic, offset, *, partition=0, version=12, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
          partition_max_bytes=1 << 20):
    response = wire.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "last_fetched_epoch": -1,
                                                    "log_start_offset": -1,
                                                    "partition_max_bytes": partition_max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return response.responses[0].partitions[0]


def records_bytes(partition_response):
    records = partition_response.records
    return b"" if records is None else bytes(records)


def batch_of(n, *, start=0, **kwargs):
    return encode_batch([{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(start, start + n)], **kwargs)


def list_offset(wire, topic, timestamp, *, version=7, partition=0):
    response = wire.request(ApiKey.LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                   "timestamp": timestamp}]}]})
    return response.topics[0].partitions[0]


# ---- ApiVersions -----------------------------------------------------------------------------------------

def test_api_versions_lists_the_advertised_table_at_every_version(wire):
    for version in range(0, 5):
        body = {"client_software_name": "klog-test", "client_software_version": "1.0"}
        response = wire.request(ApiKey.API_VERSIONS, version, body)
        assert response.error_code == NONE
        table = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
        # the old-librdkafka single-version probes must fall inside the ranges
        for key, needed in ((18, 0), (0, 0), (0, 3), (0, 7), (1, 4), (1, 10), (2, 1), (22, 0)):
            assert table[key][0] <= needed <= table[key][1], (key, needed, table[key])


def test_api_versions_too_new_gets_v0_unsupported_version_with_the_api_versions_versions(wire):
    # KIP-511: the broker answers a version it does not know in v0 format, without parsing the body, with the
    # versions of ApiVersions only, as Kafka (tests/test_sasl_handshake_vs_kafka.py runs it on both)
    cid = 77
    frame = bytearray(encode_request(ApiKey.API_VERSIONS, 4, cid, "future-client",
                                     {"client_software_name": "x", "client_software_version": "1"}))
    struct.pack_into(">h", frame, 6, 99)   # api_version := 99
    wire.send_raw(bytes(frame))
    got_cid, response = decode_response(ApiKey.API_VERSIONS, 0, wire.read_frame())
    assert got_cid == cid
    assert response.error_code == UNSUPPORTED_VERSION
    assert [(a.api_key, a.min_version, a.max_version) for a in response.api_keys] == [(18, 0, 4)]


def test_api_versions_rejects_invalid_client_software_name(wire):
    response = wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "bad name!",
                                                     "client_software_version": "1"})
    assert response.error_code == INVALID_REQUEST


# ---- Metadata --------------------------------------------------------------------------------------------

def test_metadata_auto_creates_topics_with_num_partitions_and_names_this_broker_controller(broker, wire):
    name = f"auto-{uuid.uuid4().hex[:8]}"
    body = {"topics": [{"topic_id": uuid.UUID(int=0), "name": name}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False}
    # the first answer does not wait for the creation it starts (Kafka's: UNKNOWN_TOPIC_OR_PARTITION)
    assert wire.request(ApiKey.METADATA, 12, body).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    response = until(lambda: (answer := wire.request(ApiKey.METADATA, 12, body)).topics[0].error_code == NONE
                     and answer, f"{name} created")
    assert response.controller_id == 1
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", broker.port)]
    topic = response.topics[0]
    assert (topic.error_code, topic.name, len(topic.partitions)) == (NONE, name, 2)
    assert all(p.leader_id == 1 and list(p.isr_nodes) == [1] for p in topic.partitions)
    assert topic.topic_id != uuid.UUID(int=0)


def test_metadata_without_auto_create_reports_unknown_topic(wire):
    response = wire.request(ApiKey.METADATA, 9, {"topics": [{"name": "never-created"}],
                                                 "allow_auto_topic_creation": False})
    assert response.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_v0_empty_list_and_v1_null_mean_all_topics(wire):
    name = new_topic(wire)
    for version, topics in ((0, []), (1, None), (12, None)):
        response = wire.request(ApiKey.METADATA, version, {"topics": topics})
        assert name in {t.name for t in response.topics}


def test_metadata_rejects_invalid_topic_names(wire):
    response = wire.request(ApiKey.METADATA, 9, {"topics": [{"name": "bad/name"}],
                                                 "allow_auto_topic_creation": True})
    assert response.topics[0].error_code == INVALID_TOPIC


# ---- Produce ---------------------------------------------------------------------------------------------

def test_produce_assigns_offsets_and_fetch_returns_the_same_records(wire):
    topic = new_topic(wire)
    first = produce(wire, topic, batch_of(3))
    second = produce(wire, topic, batch_of(2, start=3))
    assert (first.error_code, first.base_offset, second.base_offset) == (NONE, 0, 3)
    data = records_bytes(fetch(wire, topic, 0))
    batches = decode_batches(data)
    assert [b.base_offset for b in batches] == [0, 3]
    assert [r.value for b in batches for r in b.records] == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 11])
def test_produce_versions_3_to_11_append(wire, version):
    topic = new_topic(wire)
    response = produce(wire, topic, batch_of(1), version=version)
    assert (response.error_code, response.base_offset) == (NONE, 0)


def test_produce_v0_to_v2_answer_unsupported_version_as_kafka_4_does(wire):
    topic = new_topic(wire)
    for version in (0, 1, 2):
        response = wire.request(ApiKey.PRODUCE, version, {
            "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch_of(1)}]}]})
        assert response.responses[0].partition_responses[0].error_code == UNSUPPORTED_VERSION


def test_produce_rejects_two_batches_in_one_partition(wire):
    topic = new_topic(wire)
    assert produce(wire, topic, batch_of(1) + batch_of(1)).error_code == INVALID_RECORD


def test_produce_rejects_magic_other_than_2(wire):
    topic = new_topic(wire)
    batch = bytearray(batch_of(1))
    batch[16] = 1
    assert produce(wire, topic, bytes(batch)).error_code == INVALID_RECORD


def test_produce_rejects_a_bad_crc_as_corrupt_message(wire):
    topic = new_topic(wire)
    batch = bytearray(batch_of(3))
    batch[-1] ^= 0xFF
    assert produce(wire, topic, bytes(batch)).error_code == CORRUPT_MESSAGE
    assert records_bytes(fetch(wire, topic, 0)) == b""


def test_produce_zstd_needs_version_7(wire):
    topic = new_topic(wire)
    batch = batch_of(5, compression="zstd")
    assert produce(wire, topic, batch, version=6).error_code == UNSUPPORTED_COMPRESSION
    assert produce(wire, topic, batch, version=7).error_code == NONE


def test_produce_above_max_message_bytes_is_message_too_large(wire):
    topic = new_topic(wire, configs={"max.message.bytes": "10000"})
    big = encode_batch([{"key": None, "value": b"x" * 20_000}])
    assert produce(wire, topic, big).error_code == MESSAGE_TOO_LARGE
    assert produce(wire, topic, encode_batch([{"key": None, "value": b"x" * 9_000}])).error_code == NONE


def test_produce_broker_message_max_bytes_applies_to_topics_without_override(wire):
    topic = new_topic(wire)  # broker started with message.max.bytes=200000
    assert produce(wire, topic, encode_batch([{"value": b"x" * 210_000}])).error_code == MESSAGE_TOO_LARGE
    assert produce(wire, topic, encode_batch([{"value": b"x" * 190_000}])).error_code == NONE


def test_produce_timestamp_far_in_the_future_is_invalid_timestamp(wire):
    topic = new_topic(wire)
    future = int(time.time() * 1000) + 2 * 3_600_000
    batch = encode_batch([{"value": b"v", "timestamp": future}])
    assert produce(wire, topic, batch).error_code == INVALID_TIMESTAMP
    old_topic = new_topic(wire, configs={"message.timestamp.before.max.ms": "60000"})
    batch = encode_batch([{"value": b"v", "timestamp": 1_000_000_000_000}])
    assert produce(wire, old_topic, batch).error_code == INVALID_TIMESTAMP


def test_produce_keyless_record_on_compacted_topic_is_invalid_record(wire):
    topic = new_topic(wire, configs={"cleanup.policy": "compact"})
    assert produce(wire, topic, encode_batch([{"key": None, "value": b"v"}])).error_code == INVALID_RECORD
    assert produce(wire, topic, encode_batch([{"key": b"k", "value": None}])).error_code == NONE


def test_produce_unknown_topic_and_partition(wire):
    topic = new_topic(wire)
    assert produce(wire, "no-such-topic", batch_of(1)).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert produce(wire, topic, batch_of(1), partition=5).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_produce_to_an_internal_topic_is_refused(wire):
    # __consumer_offsets exists from the first group lookup on (as in Kafka), not from the broker's start
    wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": "some-group", "key_type": 0})
    assert produce(wire, "__consumer_offsets", batch_of(1)).error_code == INVALID_TOPIC


def test_produce_invalid_acks_and_min_insync_replicas(wire):
    topic = new_topic(wire)
    assert produce(wire, topic, batch_of(1), acks=2).error_code == INVALID_REQUIRED_ACKS
    # min.insync.replicas counts at most the replication factor (Kafka 4.x's effectiveMinIsr; the same against
    # Apache Kafka in tests/test_cluster_elr.py): one replica is enough for acks=all here
    strict = new_topic(wire, configs={"min.insync.replicas": "2"})
    assert produce(wire, strict, batch_of(1), acks=-1).error_code == NONE
    assert produce(wire, strict, batch_of(1), acks=1).error_code == NONE


def test_produce_acks_0_sends_no_response_but_appends(wire):
    topic = new_topic(wire)
    wire.send(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch_of(4)}]}]})
    # The next response on this connection answers the next request, not the acks=0 produce.
    assert list_offset(wire, topic, -1).offset == 4


def test_failed_acks_0_produce_closes_the_connection_as_kafka_does(broker):
    with WireClient(broker.host, broker.port) as wire:
        wire.send(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
            {"name": "no-such-topic-acks0", "partition_data": [{"index": 0, "records": batch_of(1)}]}]})
        assert wire.is_closed_by_peer()


# ---- idempotent producers --------------------------------------------------------------------------------

def init_producer_id(wire):
    response = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                                         "producer_id": -1, "producer_epoch": -1})
    assert response.error_code == NONE
    return response.producer_id, response.producer_epoch


def test_init_producer_id_gives_distinct_ids(wire):
    assert init_producer_id(wire)[0] != init_producer_id(wire)[0]


def test_init_producer_id_with_transactional_id_bumps_the_epoch_of_the_same_producer_id(wire):
    first = wire.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
    assert (first.error_code, first.producer_epoch) == (NONE, 0)
    again = wire.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, first.producer_id, 1)
    empty = wire.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "", "transaction_timeout_ms": 1000})
    assert empty.error_code == ErrorCode.INVALID_REQUEST


def test_retried_batch_is_a_duplicate_answered_with_its_original_offset(wire):
    topic = new_topic(wire)
    pid, epoch = init_producer_id(wire)
    first = batch_of(3, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    second = batch_of(2, start=3, producer_id=pid, producer_epoch=epoch, base_sequence=3)
    assert produce(wire, topic, first).base_offset == 0
    assert produce(wire, topic, second).base_offset == 3
    retry = produce(wire, topic, first)
    assert (retry.error_code, retry.base_offset) == (NONE, 0)
    assert list_offset(wire, topic, -1).offset == 5   # nothing appended twice


def test_sequence_gap_is_out_of_order_sequence_number(wire):
    topic = new_topic(wire)
    pid, epoch = init_producer_id(wire)
    assert produce(wire, topic, batch_of(2, producer_id=pid, producer_epoch=epoch, base_sequence=0)).error_code == NONE
    gap = batch_of(1, producer_id=pid, producer_epoch=epoch, base_sequence=5)
    assert produce(wire, topic, gap).error_code == OUT_OF_ORDER_SEQUENCE
    assert produce(wire, topic, batch_of(1, producer_id=pid, producer_epoch=epoch,
                                         base_sequence=2)).error_code == NONE


def test_older_producer_epoch_is_fenced(wire):
    topic = new_topic(wire)
    pid, _ = init_producer_id(wire)
    assert produce(wire, topic, batch_of(1, producer_id=pid, producer_epoch=3, base_sequence=0)).error_code == NONE
    stale = batch_of(1, producer_id=pid, producer_epoch=2, base_sequence=1)
    assert produce(wire, topic, stale).error_code == INVALID_PRODUCER_EPOCH


def test_non_idempotent_batches_with_sequence_0_are_accepted(wire):
    # aiokafka writes base_sequence 0 with producer id -1
    topic = new_topic(wire)
    assert produce(wire, topic, batch_of(1, base_sequence=0)).error_code == NONE
    assert produce(wire, topic, batch_of(1, base_sequence=0)).error_code == NONE


# ---- Fetch -----------------------------------------------------------------------------------------------

def test_fetch_long_poll_is_woken_by_an_append(broker, wire):
    topic = new_topic(wire)

    def produce_later():
        time.sleep(0.5)
        with WireClient(broker.host, broker.port) as other:
            produce(other, topic, batch_of(1))

    thread = threading.Thread(target=produce_later)
    started = time.monotonic()
    thread.start()
    response = fetch(wire, topic, 0, max_wait_ms=10_000)
    elapsed = time.monotonic() - started
    thread.join()
    assert len(decode_batches(records_bytes(response))) == 1
    assert 0.4 < elapsed < 5


def test_fetch_waits_max_wait_ms_when_min_bytes_is_not_reached(wire):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(1))
    started = time.monotonic()
    response = fetch(wire, topic, 0, max_wait_ms=600, min_bytes=1_000_000)
    elapsed = time.monotonic() - started
    assert 0.5 < elapsed < 3
    assert len(decode_batches(records_bytes(response))) == 1   # what there is, at the deadline


def test_fetch_returns_whole_batches_from_an_offset_inside_a_batch(wire):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(5))
    batches = decode_batches(records_bytes(fetch(wire, topic, 3)))
    assert batches[0].base_offset == 0 and len(batches[0].records) == 5


def test_fetch_partition_max_bytes_limits_but_returns_at_least_one_batch(wire):
    topic = new_topic(wire)
    for i in range(5):
        produce(wire, topic, encode_batch([{"value": b"x" * 1000}]))
    one = fetch(wire, topic, 0, partition_max_bytes=10)
    assert len(decode_batches(records_bytes(one))) == 1      # KIP-74: first batch even if too big
    some = fetch(wire, topic, 0, partition_max_bytes=2500)
    assert len(decode_batches(records_bytes(some))) == 2
    capped = fetch(wire, topic, 0, max_bytes=2500, partition_max_bytes=1 << 20)
    assert len(decode_batches(records_bytes(capped))) == 2


def test_fetch_reports_watermarks_and_offset_out_of_range(wire):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(3))
    response = fetch(wire, topic, 3)
    assert (response.error_code, response.high_watermark, response.log_start_offset) == (NONE, 3, 0)
    assert response.last_stable_offset == 3
    assert fetch(wire, topic, 10).error_code == OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize("version", [4, 7, 10, 11, 12])
def test_fetch_versions_4_to_12(wire, version):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(2))
    assert len(decode_batches(records_bytes(fetch(wire, topic, 0, version=version)))[0].records) == 2


def test_fetch_unknown_topic(wire):
    assert fetch(wire, "no-such-topic-here", 0).error_code == UNKNOWN_TOPIC_OR_PARTITION


# ---- ListOffsets / DeleteRecords / OffsetForLeaderEpoch --------------------------------------------------

def test_list_offsets_earliest_latest_max_timestamp_and_by_timestamp(wire):
    topic = new_topic(wire)
    base = int(time.time() * 1000) - 100_000
    produce(wire, topic, encode_batch([{"value": b"a", "timestamp": base}, {"value": b"b", "timestamp": base + 10}]))
    produce(wire, topic, encode_batch([{"value": b"c", "timestamp": base + 50}]))
    produce(wire, topic, encode_batch([{"value": b"d", "timestamp": base + 20}]))
    assert list_offset(wire, topic, -2).offset == 0
    assert list_offset(wire, topic, -1).offset == 4
    top = list_offset(wire, topic, -3)
    assert (top.offset, top.timestamp) == (2, base + 50)
    by_time = list_offset(wire, topic, base + 5)
    assert (by_time.offset, by_time.timestamp) == (1, base + 10)
    assert list_offset(wire, topic, base + 1_000).offset == -1
    assert list_offset(wire, topic, -2, version=1).offset == 0


def test_delete_records_moves_the_log_start_offset(wire):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(5))
    response = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 3}]}], "timeout_ms": 5000})
    part = response.topics[0].partitions[0]
    assert (part.error_code, part.low_watermark) == (NONE, 3)
    assert list_offset(wire, topic, -2).offset == 3
    assert fetch(wire, topic, 1).error_code == OFFSET_OUT_OF_RANGE
    beyond = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 99}]}], "timeout_ms": 5000})
    assert beyond.topics[0].partitions[0].error_code == OFFSET_OUT_OF_RANGE


def test_list_offsets_by_timestamp_never_answers_a_deleted_offset(wire):
    topic = new_topic(wire)
    base = int(time.time() * 1000) - 100_000
    produce(wire, topic, encode_batch([{"value": b"%d" % i, "timestamp": base + i} for i in range(5)]))
    wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 3}]}], "timeout_ms": 5000})
    assert list_offset(wire, topic, base).offset == 3


def test_offset_for_leader_epoch_returns_the_log_end_for_the_current_epoch(wire):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(4))
    response = wire.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    part = response.topics[0].partitions[0]
    assert (part.error_code, part.leader_epoch, part.end_offset) == (NONE, 0, 4)


# ---- topic administration --------------------------------------------------------------------------------

def create_topics(wire, topics, *, version=7, validate_only=False):
    return wire.request(ApiKey.CREATE_TOPICS, version, {"topics": topics, "timeout_ms": 5000,
                                                        "validate_only": validate_only}).topics


def topic_spec(name, partitions=-1, rf=-1, configs=None):
    return {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def test_create_topics_defaults_validate_only_and_errors(wire):
    name = f"c-{uuid.uuid4().hex[:8]}"
    checked = create_topics(wire, [topic_spec(name, 3)], validate_only=True)[0]
    assert checked.error_code == NONE
    assert list_offset(wire, name, -1).error_code == UNKNOWN_TOPIC_OR_PARTITION   # nothing created
    created = create_topics(wire, [topic_spec(name)])[0]
    assert (created.error_code, created.num_partitions, created.replication_factor) == (NONE, 2, 1)
    configs = {c.name: c.value for c in created.configs}
    assert configs["max.message.bytes"] == "200000" and configs["cleanup.policy"] == "delete"
    assert create_topics(wire, [topic_spec(name)])[0].error_code == TOPIC_ALREADY_EXISTS
    assert create_topics(wire, [topic_spec("x", 1, rf=3)])[0].error_code == INVALID_REPLICATION_FACTOR
    assert create_topics(wire, [topic_spec("y", 0)])[0].error_code == INVALID_PARTITIONS
    assert create_topics(wire, [topic_spec("a" * 250, 1)])[0].error_code == INVALID_TOPIC
    assert create_topics(wire, [topic_spec("z", 1, configs={"retention.ms": "soon"})])[0].error_code == INVALID_CONFIG
    # a name given twice is answered once, as Kafka's ControllerApis does (tests/test_topic_admin_and_produce_validation_vs_kafka.py)
    dup = create_topics(wire, [topic_spec("dup", 1), topic_spec("dup", 1)])
    assert [(t.name, t.error_code) for t in dup] == [("dup", INVALID_REQUEST)]


def test_create_topics_v2_with_explicit_counts(wire):
    name = f"c2-{uuid.uuid4().hex[:8]}"
    assert create_topics(wire, [topic_spec(name, 4, 1)], version=2)[0].error_code == NONE
    response = wire.request(ApiKey.METADATA, 5, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    assert len(response.topics[0].partitions) == 4


def test_delete_topics_removes_the_topic(wire):
    topic = new_topic(wire)
    produce(wire, topic, batch_of(1))
    response = wire.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [topic, "missing-topic"], "timeout_ms": 5000})
    assert [r.error_code for r in response.responses] == [NONE, UNKNOWN_TOPIC_OR_PARTITION]
    meta = wire.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    assert meta.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics_v6_by_name(wire):
    topic = new_topic(wire)
    response = wire.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                                      "timeout_ms": 5000})
    assert response.responses[0].error_code == NONE


def test_create_partitions_grows_a_topic(wire):
    topic = new_topic(wire, partitions=1)
    response = wire.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": topic, "count": 3, "assignments": None}],
                                                          "timeout_ms": 5000, "validate_only": False})
    assert response.results[0].error_code == NONE
    assert produce(wire, topic, batch_of(1), partition=2).error_code == NONE
    shrink = wire.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": topic, "count": 2, "assignments": None}],
                                                        "timeout_ms": 5000, "validate_only": False})
    assert shrink.results[0].error_code == INVALID_PARTITIONS


# ---- configs ---------------------------------------------------------------------------------------------

def describe_topic_configs(wire, topic, version=4, keys=None):
    response = wire.request(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True})
    result = response.results[0]
    assert result.error_code == NONE, result
    return {c.name: c for c in result.configs}


def test_describe_configs_reports_values_and_sources(wire):
    topic = new_topic(wire, configs={"retention.ms": "12345"})
    configs = describe_topic_configs(wire, topic)
    assert configs["retention.ms"].value == "12345" and configs["retention.ms"].config_source == 1
    assert configs["max.message.bytes"].value == "200000" and configs["max.message.bytes"].config_source == 4
    assert configs["segment.bytes"].value == "1073741824" and configs["segment.bytes"].config_source == 5
    assert [s.name for s in configs["max.message.bytes"].synonyms][:1] == ["message.max.bytes"]
    only = describe_topic_configs(wire, topic, version=1, keys=["cleanup.policy"])
    assert list(only) == ["cleanup.policy"]


def test_describe_configs_for_the_broker(wire):
    response = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    configs = {c.name: c for c in response.results[0].configs}
    assert configs["num.partitions"].value == "2" and configs["num.partitions"].config_source == 4
    assert configs["log.segment.bytes"].config_source == 5


def test_alter_configs_replaces_and_incremental_alter_configs_edits(wire):
    topic = new_topic(wire, configs={"retention.ms": "1000"})
    response = wire.request(ApiKey.ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configs": [{"name": "segment.bytes", "value": "1048576"}]}],
        "validate_only": False})
    assert response.responses[0].error_code == NONE
    configs = describe_topic_configs(wire, topic)
    assert configs["segment.bytes"].value == "1048576" and configs["retention.ms"].config_source != 1
    response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "5000"},
            {"name": "segment.bytes", "config_operation": 1, "value": None},
            {"name": "cleanup.policy", "config_operation": 2, "value": "compact"}]}], "validate_only": False})
    assert response.responses[0].error_code == NONE
    configs = describe_topic_configs(wire, topic)
    assert configs["retention.ms"].value == "5000"
    assert configs["segment.bytes"].config_source == 5
    assert configs["cleanup.policy"].value == "delete,compact"
    bad = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "never"}]}], "validate_only": False})
    assert bad.responses[0].error_code == INVALID_CONFIG


def test_a_topic_config_change_applies_to_the_next_produce(wire):
    topic = new_topic(wire)
    batch = batch_of(20)
    assert produce(wire, topic, batch).error_code == NONE              # checks read once per config...
    response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "max.message.bytes", "config_operation": 0, "value": str(len(batch) - 1)}]}],
        "validate_only": False})
    assert response.responses[0].error_code == NONE
    assert produce(wire, topic, batch).error_code == MESSAGE_TOO_LARGE   # ...and again after it changes
    assert produce(wire, topic, batch_of(1)).error_code == NONE


def test_describe_cluster(broker, wire):
    response = wire.request(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                         "endpoint_type": 1})
    assert response.error_code == NONE and response.controller_id == 1
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, broker.port)]


@pytest.mark.parametrize("version", [1, 4, 5])
def test_describe_log_dirs_reports_each_partitions_size_in_its_log_dir(broker, wire, version):
    topic = new_topic(wire, partitions=2)
    batch = batch_of(10)
    assert produce(wire, topic, batch, partition=1).error_code == NONE
    response = wire.request(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
    assert len(response.results) == 1
    result = response.results[0]
    assert result.error_code == NONE and result.log_dir == os.path.realpath(broker.config["log.dirs"])
    sizes = {p.partition_index: p.partition_size for t in result.topics if t.name == topic for p in t.partitions}
    assert sizes == {0: 0, 1: len(batch)}
    if version >= 4:
        assert response.error_code == NONE
        assert 0 < result.usable_bytes <= result.total_bytes
    if version >= 5:
        assert result.is_cordoned is False
    # asking for one partition (and one that does not exist) answers with just that one
    response = wire.request(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": [
        {"topic": topic, "partitions": [1]}, {"topic": "no-such-topic", "partitions": [0]}]})
    topics = response.results[0].topics
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in topics] == [(topic, [1])]
