"""Produce and Fetch requests a client should not send, answered by klog as Apache Kafka 4.x answers them (one
broker of each kind for the module, started from the same properties; klog twice: with its native Produce/Fetch
paths and native front on, their defaults, and with all three off, so both of klog's paths answer each case).
Each case first warms the partition's native routes (a Produce and Fetches the Python path serves and routes), so
the odd request reaches the native path first where it is on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

#: klog with every request on its Python handlers (the native Produce and Fetch paths and the native front off)
PYTHON_PATHS = {"klog.produce.native.enable": "false", "klog.fetch.native.enable": "false",
                "klog.network.native.front.enable": "false"}


@pytest.fixture(scope="module", params=["klog", "klog-python", "kafka"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    kind = "kafka" if request.param == "kafka" else "klog"
    properties = PYTHON_PATHS if request.param == "klog-python" else {}
    with one_broker(kind, tmp_path_factory.mktemp(request.param), properties) as servers:
        yield servers


class Wire(WireClient):
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id="edges-test")

    def create_topic(self, **configs: str) -> str:
        name = f"edge-{uuid.uuid4().hex[:8]}"
        answer = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}],
            "timeout_ms": 30000, "validate_only": False})
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        return name

    def produce(self, topic: str, records: Any, *, version: int = 9, acks: int = 1,
                extra: list[dict[str, Any]] | None = None) -> Any:
        """One Produce of ``records`` to partition 0 (and ``extra`` topic entries): the answer's partitions as
        (topic, index, error code, base offset)."""
        answer = self.request(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
                                                        "topic_data": [{"name": topic, "partition_data": [
                                                            {"index": 0, "records": records}]}] + (extra or [])})
        return [(t.name, p.index, p.error_code, p.base_offset)
                for t in answer.responses for p in t.partition_responses]

    def warm(self, topic: str) -> int:
        """A record produced (until the new topic's leader is ready) and read back twice: the partition is routed
        to klog's native paths; the partition's log end offset."""
        for _ in range(200):
            [(_, _, code, offset)] = self.produce(topic, encode_batch([{"key": b"k", "value": b"v"}]))
            if code == ErrorCode.NONE:
                break
            assert code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ErrorCode.LEADER_NOT_AVAILABLE), code
            time.sleep(0.05)
        else:
            raise AssertionError(f"{topic} has no leader")
        for _ in range(2):
            [partition] = self.fetch(topic, offset)["partitions"]
            assert partition["error_code"] == ErrorCode.NONE, partition
        return offset + 1

    def fetch(self, topic: str, offset: int, *, version: int = 12, **fields: Any) -> dict[str, Any]:
        """One sessionless Fetch of partition 0 (``fields`` override the request's top-level fields): the top-level
        error code and each partition's (error code, high watermark, last stable offset, log start offset,
        record bytes)."""
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": "", **fields}
        answer = self.request(ApiKey.FETCH, version, body)
        return {"error_code": answer.error_code, "partitions": [
            {"error_code": p.error_code, "high_watermark": p.high_watermark,
             "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
             "records": len(p.records or b"")} for t in answer.responses for p in t.partitions]}


def test_a_fetch_with_an_isolation_level_neither_0_nor_1_is_answered_unknown_server_error(bootstrap: str) -> None:
    """Kafka's IsolationLevel.forId throws for any other value: the request's error response, UNKNOWN_SERVER_ERROR
    at the top and on each partition, nothing read (klog served it as read_uncommitted until 2026-12-07)."""
    refused = {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "partitions": [
        {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "high_watermark": -1, "last_stable_offset": -1,
         "log_start_offset": -1, "records": 0}]}
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        end = wire.warm(topic)
        for level in (2, -1):
            assert wire.fetch(topic, 0, isolation_level=level) == refused
        with Wire(bootstrap) as fresh:
            assert fresh.fetch(topic, 0, isolation_level=2) == refused
        assert wire.fetch(topic, 0, isolation_level=1)["partitions"][0]["high_watermark"] == end


def with_bytes(batch: bytes, at: int, value: bytes) -> bytes:
    return batch[:at] + value + batch[at + len(value):]


def test_a_batch_cut_short_or_of_an_unknown_magic_is_refused_as_kafkas_batch_iterator_refuses_it(
        bootstrap: str) -> None:
    """Kafka cuts a partition's records into batches with ByteBufferLogInputStream: fewer bytes than the log
    overhead, than the header up to the magic or than the batch's length field says hold no batch (INVALID_RECORD,
    "must have at least one record batch"), a length field below 14 or a magic other than 0-2 is CORRUPT_MESSAGE.
    klog answered CORRUPT_MESSAGE (which the Java producer retries) to a batch shorter than its length until
    2026-12-07, and INVALID_RECORD to magic 3."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        end = wire.warm(topic)
        good = encode_batch([{"key": b"k", "value": b"v"}])
        length = int.from_bytes(good[8:12], "big")
        cases = {
            "length longer than the bytes": (with_bytes(good, 8, (length + 10).to_bytes(4, "big")),
                                             ErrorCode.INVALID_RECORD),
            "cut inside the header": (good[:40], ErrorCode.INVALID_RECORD),
            "no length field": (good[:11], ErrorCode.INVALID_RECORD),
            "cut before the magic": (good[:16], ErrorCode.INVALID_RECORD),
            "length below 14": (with_bytes(good, 8, (13).to_bytes(4, "big")), ErrorCode.CORRUPT_MESSAGE),
            "magic 3": (with_bytes(good, 16, b"\x03"), ErrorCode.CORRUPT_MESSAGE),
            "magic -1": (with_bytes(good, 16, b"\xff"), ErrorCode.CORRUPT_MESSAGE),
            "length shorter than the bytes": (with_bytes(good, 8, (length - 10).to_bytes(4, "big")),
                                              ErrorCode.CORRUPT_MESSAGE),
        }
        answers = {case: wire.produce(topic, records) for case, (records, _) in cases.items()}
        assert answers == {case: [(topic, 0, code, -1)] for case, (_, code) in cases.items()}
        assert wire.produce(topic, good) == [(topic, 0, ErrorCode.NONE, end)]   # nothing was appended


def test_a_partition_named_twice_in_a_produce_is_appended_once_with_its_last_records(bootstrap: str) -> None:
    """Kafka keys a Produce's partitions by topic and partition (KafkaApis.handleProduceRequest): a partition named
    twice, in its topic's entry or in a second entry of the topic, is appended once, with its last entry's records,
    and answered once (klog appended both and answered twice until 2026-12-07)."""
    from klog.records import decode_batches

    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        end = wire.warm(topic)
        first, last = encode_batch([{"value": b"first"}]), encode_batch([{"value": b"last"}])
        twice_in_one_entry = {"name": topic, "partition_data": [{"index": 0, "records": first},
                                                                 {"index": 0, "records": last}]}
        answer = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                  "topic_data": [twice_in_one_entry]})
        assert [(t.name, p.index, p.error_code, p.base_offset)
                for t in answer.responses for p in t.partition_responses] == [(topic, 0, ErrorCode.NONE, end)]
        second_entry = [{"name": topic, "partition_data": [{"index": 0, "records": last}]}]
        assert wire.produce(topic, first, extra=second_entry) == [(topic, 0, ErrorCode.NONE, end + 1)]
        [partition] = wire.fetch(topic, end)["partitions"]
        assert partition["high_watermark"] == end + 2
        records = wire.request(ApiKey.FETCH, 4, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": end,
                                                        "partition_max_bytes": 1 << 20}]}]}
        ).responses[0].partitions[0].records
        assert [r.value for b in decode_batches(bytes(records)) for r in b.records] == [b"last", b"last"]


def test_transactional_records_without_a_transactional_id_refuse_the_whole_produce(bootstrap: str) -> None:
    """Kafka's KafkaApis.handleProduceRequest refuses a Produce without a transactional id that holds a transactional
    batch (a control batch included) before any other check: every partition of it answered
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing appended (klog refused only the transactional batch's partition,
    appended the others, and answered a control batch INVALID_RECORD until 2026-12-07)."""
    from klog.records import encode_control_batch

    with Wire(bootstrap) as wire:
        topic, other = wire.create_topic(), wire.create_topic()
        end, other_end = wire.warm(topic), wire.warm(other)
        plain = encode_batch([{"value": b"v"}])
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for transactional in (encode_batch([{"value": b"t"}], producer_id=4242, producer_epoch=0, base_sequence=0,
                                           is_transactional=True),
                              encode_control_batch(1, producer_id=4243, producer_epoch=0)):
            answer = wire.produce(topic, transactional, extra=[
                {"name": other, "partition_data": [{"index": 0, "records": plain}]},
                {"name": "no-such-topic", "partition_data": [{"index": 0, "records": plain}]}])
            # Kafka's error response lists the partitions in a hash map's order
            assert sorted(answer) == sorted([(topic, 0, refused, -1), (other, 0, refused, -1),
                                             ("no-such-topic", 0, refused, -1)])
        assert wire.produce(topic, plain) == [(topic, 0, ErrorCode.NONE, end)]
        assert wire.produce(other, plain) == [(other, 0, ErrorCode.NONE, other_end)]


def test_a_consumers_fetch_refused_for_its_offset_or_leader_epoch_carries_no_offsets(bootstrap: str) -> None:
    """Kafka answers a consumer's partition error (a LogReadResult made from the exception) with high watermark, last
    stable offset and log start offset -1: OFFSET_OUT_OF_RANGE past the log end, below the log start or negative,
    UNKNOWN_LEADER_EPOCH for a newer epoch (klog sent the partition's offsets until 2026-12-07)."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        end = wire.warm(topic)
        wire.warm(topic)
        deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 1}]}], "timeout_ms": 30000})
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE

        def refused(code: int) -> dict[str, Any]:
            return {"error_code": ErrorCode.NONE, "partitions": [
                {"error_code": code, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                 "records": 0}]}

        for offset in (end + 10, 0, -1):
            assert wire.fetch(topic, offset) == refused(ErrorCode.OFFSET_OUT_OF_RANGE), offset
        newer_epoch = [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": 100, "fetch_offset": 1, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]
        assert wire.fetch(topic, 1, topics=newer_epoch) == refused(ErrorCode.UNKNOWN_LEADER_EPOCH)
        assert wire.fetch(topic, 1)["partitions"][0]["log_start_offset"] == 1


def test_a_consumers_last_fetched_epoch_is_checked_before_its_records_are_read(bootstrap: str) -> None:
    """Kafka's Partition.readRecords checks a consumer's last fetched epoch (the Java consumer sends the epoch of the
    records it read last, KIP-320) before reading: the epoch's end below the fetch offset is answered as
    ``diverging_epoch`` with the partition's offsets and no records (the consumer then validates its position), an
    epoch the partition cannot end is OFFSET_OUT_OF_RANGE with no offsets; a negative epoch, leader epoch included,
    is none (``FetchRequest.optionalEpoch``). klog read on whatever the epoch until 2026-12-07, and fenced a
    negative leader epoch (FENCED_LEADER_EPOCH)."""
    def fetch(wire: Wire, topic: str, offset: int, last_fetched_epoch: int, current_leader_epoch: int = -1
              ) -> tuple[int, int, int, int, tuple[int, int], int]:
        """(error, high watermark, last stable offset, log start offset, diverging epoch, record bytes)."""
        answer = wire.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
                 "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        assert answer.error_code == ErrorCode.NONE
        [p] = answer.responses[0].partitions
        return (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                (p.diverging_epoch.epoch, p.diverging_epoch.end_offset), len(p.records or b""))

    no_divergence = (-1, -1)
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        wire.warm(topic)
        end = wire.warm(topic)   # records of epoch 0, read back: klog's native paths serve the partition
        # the epoch of the records read: read on, natively where klog serves the partition so
        for offset in (0, end - 1, end):
            answer = fetch(wire, topic, offset, 0)
            assert answer[:5] == (ErrorCode.NONE, end, end, 0, no_divergence), offset
            assert (answer[5] > 0) == (offset < end), offset
        # the epoch ends at the log end, before the offset asked: diverging, no records
        assert fetch(wire, topic, end + 5, 0) == (ErrorCode.NONE, end, end, 0, (0, end), 0)
        # an epoch newer than every known one cannot be ended
        for offset in (0, end):
            assert fetch(wire, topic, offset, 3) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1, no_divergence, 0)
        # negative epochs are none
        for epochs in ((-3, -1), (-1, -5), (-2, -2)):
            answer = fetch(wire, topic, 0, *epochs)
            assert answer[:5] == (ErrorCode.NONE, end, end, 0, no_divergence) and answer[5] > 0, epochs
