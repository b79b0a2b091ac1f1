"""Produce (0): Kafka's request validation, idempotent-producer sequence checks, native appends.

Per request and per partition the Python work is constant: read the one batch header (61 bytes), check it,
and hand the bytes to the native log, which validates every batch (CRC, record counts), assigns offsets and
writes. Nothing here looks at individual records.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any

from klog._native import RecordTooLargeError
from klog.broker import errors
from klog.broker.handlers import CloseConnection, RequestContext, handler
from klog.broker.producer_state import BatchMetadata

log = logging.getLogger("klog.broker.produce")

BATCH_HEADER_SIZE = 61
# Offsets (0-based) of record batch v2 header fields; see Kafka's DefaultRecordBatch.
_HEADER = struct.Struct(">qiibIhiqqqhii")
# base_offset, length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count
COMPRESSION_MASK = 0x07
ZSTD = 4
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
NO_TIMESTAMP = -1
#: the client id Kafka's own tools use when they may write internal topics (AdminUtils.ADMIN_CLIENT_ID)
ADMIN_CLIENT_ID = "__admin_client"


class _ProducePolicy:
    """A topic's configs that every Produce checks, read once per config change instead of per partition."""

    __slots__ = ("min_insync_replicas", "max_message_bytes", "create_time", "before_max_ms", "after_max_ms",
                 "compacted")

    def __init__(self, config: dict[str, Any]) -> None:
        self.min_insync_replicas: int = config["min.insync.replicas"]
        self.max_message_bytes: int = config["max.message.bytes"]
        self.create_time: bool = config["message.timestamp.type"] == "CreateTime"
        self.before_max_ms: int = config["message.timestamp.before.max.ms"]
        self.after_max_ms: int = config["message.timestamp.after.max.ms"]
        self.compacted: bool = "compact" in config["cleanup.policy"]


def _policy(topic: Any) -> _ProducePolicy:
    policy = topic.derived.get("produce")
    if policy is None:
        policy = topic.derived["produce"] = _ProducePolicy(topic.effective)
    return policy


def _partition_error(index: int, code: int, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": message}


def _check_batch(records: Any, version: int, policy: _ProducePolicy, now_ms: int) -> tuple[int, str | None, tuple | None]:
    """Kafka's ProduceRequest.validateRecords + the broker's size/timestamp checks, on the batch header.

    Returns (error code, message, parsed header)."""
    size = len(records)
    if size < BATCH_HEADER_SIZE:
        if size >= 17 and records[16] != 2:
            return (errors.INVALID_RECORD, f"Produce requests with version {version} are only allowed to "
                    "contain record batches with magic version 2", None)
        if size == 0:
            return (errors.INVALID_RECORD, f"Produce requests with version {version} must have at least one "
                    "record batch per partition", None)
        return errors.CORRUPT_MESSAGE, f"record batch of {size} bytes is shorter than its header", None
    header = _HEADER.unpack_from(records, 0)
    batch_size = header[1] + 12
    magic = header[3]
    if magic != 2:
        return (errors.INVALID_RECORD, f"Produce requests with version {version} are only allowed to contain "
                "record batches with magic version 2", None)
    attributes = header[5]
    if version < 7 and attributes & COMPRESSION_MASK == ZSTD:
        return (errors.UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with version lower than 7 may not use "
                "ZStandard compression", None)
    if batch_size < BATCH_HEADER_SIZE or batch_size > size:
        return errors.CORRUPT_MESSAGE, f"record batch length {batch_size} does not fit {size} bytes", None
    if batch_size != size:
        return (errors.INVALID_RECORD, f"Produce requests with version {version} are only allowed to contain "
                "exactly one record batch per partition", None)
    max_message_bytes = policy.max_message_bytes
    if batch_size > max_message_bytes:
        return (errors.MESSAGE_TOO_LARGE, f"The record batch is {batch_size} bytes, larger than the topic's "
                f"max.message.bytes {max_message_bytes}", None)
    if attributes & CONTROL_FLAG:
        return errors.INVALID_RECORD, "Clients are not allowed to write control records", None
    if header[12] != header[6] + 1 or header[12] <= 0:
        return (errors.CORRUPT_MESSAGE, f"record count {header[12]} does not match last offset delta "
                f"{header[6]}", None)
    if policy.create_time:
        before = policy.before_max_ms
        after = policy.after_max_ms
        for ts in (header[7], header[8]):
            if ts != NO_TIMESTAMP and (ts < now_ms - before or ts > now_ms + after):
                return (errors.INVALID_TIMESTAMP, f"Timestamp {ts} of the record batch is out of range: it must "
                        f"be within [{now_ms} - {before}, {now_ms} + {after}] (message.timestamp.before/after."
                        "max.ms)", None)
    return errors.NONE, None, header


def _keyless_records(records: Any) -> bool:
    """Whether a batch holds a record without a key (refused on compacted topics). Only compacted topics pay
    for this record-level look (decoded natively; keys compared here)."""
    from klog.records import decode_batches

    return any(record.key is None for batch in decode_batches(records) for record in batch.records)


@handler(0, 0, 11)
def handle_produce(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any] | None:
    version = ctx.api_version
    acks = request.acks
    manager = broker.partitions
    producers = broker.producers
    metrics = broker.metrics
    now_ms = int(time.time() * 1000)
    responses = []
    for topic_data in request.topic_data:
        name = topic_data.name
        topic = manager.topics.get(name)
        partition_responses: list[dict[str, Any]] = []
        responses.append({"name": name, "partition_responses": partition_responses})
        for pdata in topic_data.partition_data:
            index = pdata.index
            if version < 3:
                # Kafka 4 (KIP-896) removed message formats v0/v1 and Produce v0-2; versions stay advertised
                # because old librdkafka probes Produce 0 to enable compression at all.
                partition_responses.append(_partition_error(index, errors.UNSUPPORTED_VERSION,
                                                            "Produce v0-2 are not supported; use v3+"))
                continue
            if topic is None or not 0 <= index < topic.partitions:
                partition_responses.append(_partition_error(index, errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if topic.internal and ctx.header.client_id != ADMIN_CLIENT_ID:
                # Kafka: only its own admin tooling may write internal topics (__consumer_offsets)
                partition_responses.append(_partition_error(index, errors.INVALID_TOPIC_EXCEPTION,
                                                            f"Cannot append to internal topic {name}"))
                continue
            if acks not in (-1, 0, 1):
                partition_responses.append(_partition_error(index, errors.INVALID_REQUIRED_ACKS))
                continue
            policy = _policy(topic)
            if acks == -1 and policy.min_insync_replicas > 1:
                partition_responses.append(_partition_error(
                    index, errors.NOT_ENOUGH_REPLICAS,
                    f"min.insync.replicas={policy.min_insync_replicas} but this single node is the only "
                    "in-sync replica"))
                continue
            records = pdata.records
            if records is None:
                records = b""
            code, message, header = _check_batch(records, version, policy, now_ms)
            if code:
                partition_responses.append(_partition_error(index, code, message))
                continue
            assert header is not None
            if header[5] & TRANSACTIONAL_FLAG or request.transactional_id is not None:
                partition_responses.append(_partition_error(index, errors.INVALID_TXN_STATE,
                                                            "klog does not support transactions"))
                continue
            if policy.compacted and _keyless_records(records):
                partition_responses.append(_partition_error(
                    index, errors.INVALID_RECORD, "Compacted topic cannot accept message without key in topic "
                    f"partition {name}-{index}."))
                continue
            producer_id = header[9]
            if producer_id >= 0:
                epoch, first_seq = header[10], header[11]
                last_seq = (first_seq + header[6]) % 2**31 if first_seq >= 0 else first_seq
                code, duplicate = producers.check(name, index, producer_id, epoch, first_seq, last_seq)
                if code:
                    partition_responses.append(_partition_error(index, code))
                    continue
                if duplicate is not None:
                    log.debug("duplicate batch from producer %d seq %d-%d on %s-%d: answering with offset %d",
                              producer_id, first_seq, last_seq, name, index, duplicate.base_offset)
                    log_ = manager.get(name, index)
                    partition_responses.append({
                        "index": index, "error_code": errors.NONE, "base_offset": duplicate.base_offset,
                        "log_append_time_ms": duplicate.log_append_time,
                        "log_start_offset": log_.log_start_offset, "record_errors": [], "error_message": None})
                    continue
            try:
                result = manager.append(name, index, records, now_ms=now_ms)
            except RecordTooLargeError as exc:
                partition_responses.append(_partition_error(index, errors.MESSAGE_TOO_LARGE, str(exc)))
                continue
            except ValueError as exc:  # CorruptRecordError: CRC, record counts, lengths
                partition_responses.append(_partition_error(index, errors.CORRUPT_MESSAGE, str(exc)))
                continue
            except OSError as exc:
                log.error("append to %s-%d failed: %s", name, index, exc)
                partition_responses.append(_partition_error(index, errors.KAFKA_STORAGE_ERROR, str(exc)))
                continue
            except KeyError:  # deleted meanwhile
                partition_responses.append(_partition_error(index, errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if producer_id >= 0:
                producers.update(name, index, producer_id, header[10],
                                 BatchMetadata(header[11], last_seq, result.base_offset, result.last_offset,
                                               result.max_timestamp, result.log_append_time), now_ms)
            if metrics is not None:
                metrics.produced(name, len(records), header[12])
            partition_responses.append({
                "index": index, "error_code": errors.NONE, "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time, "log_start_offset": result.log_start_offset,
                "record_errors": [], "error_message": None})
    if acks == 0:
        failed = [f"{t['name']}-{p['index']}: error {p['error_code']}" for t in responses
                  for p in t["partition_responses"] if p["error_code"]]
        if failed:
            raise CloseConnection(f"acks=0 produce failed ({', '.join(failed[:3])})")
        return None
    return {"responses": responses, "throttle_time_ms": 0}
