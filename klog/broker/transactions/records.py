"""Records of the ``__transaction_state`` topic, byte-compatible with Apache Kafka's transaction coordinator.

The key is an int16 key version (0) followed by ``TransactionLogKey`` (the transactional id); the value an int16
version followed by ``TransactionLogValue`` (v1, flexible, once transaction.version 1+ is finalized, else v0), and a
null value is a tombstone (an expired transactional id). The structs are Kafka's, declared in
:mod:`klog.protocol.coordinator_record_schemas` and compiled by the protocol codegen, so
``kafka-dump-log --transaction-log-decoder`` reads what klog writes.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any

from klog.protocol import ProtocolError
from klog.protocol.codegen import uvarint
from klog.protocol.data import TRANSACTION_LOG_KEY_SCHEMA, TRANSACTION_LOG_VALUE_SCHEMA, decode_data, encode_data

_INT16 = struct.Struct(">h")
KEY_VERSION = 0


class TxnState(IntEnum):
    """Kafka's ``TransactionState`` ids, as ``TransactionStatus`` stores them."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (Kafka's ``TransactionState.stateName``)."""
        return _KAFKA_NAMES[self]


_KAFKA_NAMES = {state: "".join(part.capitalize() for part in state.name.split("_")) for state in TxnState}


class TxnRecordError(ValueError):
    """Bytes of a ``__transaction_state`` record that do not match Kafka's layout."""


@dataclass
class TxnMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``)."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    #: the epoch before the last bump (a retried InitProducerId or EndTxn is recognised by it)
    last_producer_epoch: int = -1
    previous_producer_id: int = -1
    #: transaction protocol v2: the producer id the transaction's end moves to when its epoch bump exhausts the
    #: current one (-1: none)
    next_producer_id: int = -1
    #: the transaction protocol the last transition was asked with (2: EndTxn v5, AddPartitionsToTxn v4+)
    client_transaction_version: int = 0
    #: a write of this id's state is on its way to the ISR: other requests get CONCURRENT_TRANSACTIONS
    pending: bool = False

    def replace(self, **changes: Any) -> TxnMetadata:
        """A copy with ``changes`` (``dataclasses.replace``'s result, without its per-call introspection: every
        transition of a transaction makes one). The partition set is shared unless changed, as there."""
        unknown = changes.keys() - _TXN_METADATA_FIELDS
        if unknown:
            raise TypeError(f"TxnMetadata has no field(s) {sorted(unknown)}")
        copy = object.__new__(TxnMetadata)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    def value(self) -> dict[str, Any]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return {"producer_id": self.producer_id, "previous_producer_id": self.previous_producer_id,
                "next_producer_id": self.next_producer_id, "producer_epoch": self.producer_epoch,
                "transaction_timeout_ms": self.timeout_ms, "transaction_status": int(self.state),
                "transaction_partitions": [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
                "transaction_last_update_timestamp_ms": self.last_update_ms,
                "transaction_start_timestamp_ms": self.start_ms,
                "client_transaction_version": self.client_transaction_version}


_TXN_METADATA_FIELDS = frozenset(f.name for f in fields(TxnMetadata))


@functools.lru_cache(maxsize=4096)   # every transition of an id writes its key again
def encode_key(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + encode_data(TRANSACTION_LOG_KEY_SCHEMA, 0, {"transactional_id": transactional_id})


def encode_value(metadata: TxnMetadata, version: int, previous_producer_id: int) -> bytes:
    """Kafka 4.3 writes value v1 (flexible, tagged fields) once ``transaction.version`` 1 or later is finalized
    (``TransactionVersion.transactionLogValueVersion``), else v0; ``previous_producer_id`` is what Kafka's transit
    metadata carries: the producer id before the transition.

    Packed here field by field, not through the schema's generic encoder: every transition of every transaction
    writes one (three a transaction), and the generic path (a dict per partition, the compiled encoder) was about
    a fifth of the coordinator's write. The bytes are the schema encoder's (:func:`encode_value_generic`; the
    tests compare the two)."""
    if version not in (0, 1):
        return encode_value_generic(metadata, version, previous_producer_id)
    head = _VALUE_HEAD.pack(version, metadata.producer_id, metadata.producer_epoch, metadata.timeout_ms,
                            int(metadata.state))
    flexible = version >= 1
    partitions = _encoded_partitions(frozenset(metadata.partitions), flexible)
    times = _INT64_PAIR.pack(metadata.last_update_ms, metadata.start_ms)
    if not flexible:
        return head + partitions + times
    # the tagged fields, in tag order, each only when it is not its default (as Kafka's generated writer)
    tags = []
    if previous_producer_id != -1:
        tags.append(_TAG_INT64.pack(0, 8, previous_producer_id))
    if metadata.next_producer_id != -1:
        tags.append(_TAG_INT64.pack(1, 8, metadata.next_producer_id))
    if metadata.client_transaction_version != 0:
        tags.append(_TAG_INT16.pack(2, 2, metadata.client_transaction_version))
    return b"".join((head, partitions, times, bytes((len(tags),)), *tags))


def encode_value_generic(metadata: TxnMetadata, version: int, previous_producer_id: int) -> bytes:
    """:func:`encode_value` through the schema's compiled encoder (any version the schema has)."""
    value = metadata.value()
    value["previous_producer_id"] = previous_producer_id
    return _INT16.pack(version) + encode_data(TRANSACTION_LOG_VALUE_SCHEMA, version, value)


#: value v0/v1 up to the partitions: version, producer id, producer epoch, transaction timeout, status
_VALUE_HEAD = struct.Struct(">hqhib")
_INT64_PAIR = struct.Struct(">qq")
_INT32 = struct.Struct(">i")
#: a tagged field: tag, size (both one-byte varints here), value
_TAG_INT64 = struct.Struct(">BBq")
_TAG_INT16 = struct.Struct(">BBh")


@functools.lru_cache(maxsize=1024)   # a producer's transactions add the same partitions again and again
def _encoded_partitions(partitions: frozenset[tuple[str, int]], flexible: bool) -> bytes:
    """``transaction_partitions``: by topic in sorted order, each topic's partition ids ascending (``value()``'s
    order); compact (v1) or classic (v0) arrays and strings."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = [uvarint(len(by_topic) + 1) if flexible else _INT32.pack(len(by_topic))]
    for topic, ids in by_topic.items():
        name = topic.encode()
        out.append(uvarint(len(name) + 1) if flexible else _INT16.pack(len(name)))
        out.append(name)
        out.append(uvarint(len(ids) + 1) if flexible else _INT32.pack(len(ids)))
        out.append(struct.pack(f">{len(ids)}i", *ids))
        if flexible:
            out.append(b"\x00")   # the topic entry's tagged fields: none
    return b"".join(out)


def record(metadata: TxnMetadata, version: int = 1, previous_producer_id: int | None = None) -> tuple[bytes, bytes]:
    previous = metadata.producer_id if previous_producer_id is None else previous_producer_id
    return encode_key(metadata.transactional_id), encode_value(metadata, version, previous)


def tombstone(transactional_id: str) -> tuple[bytes, None]:
    return encode_key(transactional_id), None


def decode(key: bytes | None, value: bytes | None) -> tuple[str, TxnMetadata | None]:
    """(transactional id, its state or None for a tombstone). Raises TxnRecordError."""
    if key is None or len(key) < 2:
        raise TxnRecordError("key shorter than its 2-byte version")
    try:
        key_obj, _ = decode_data(TRANSACTION_LOG_KEY_SCHEMA, 0, memoryview(key)[2:])
        tid = key_obj.transactional_id
        if value is None:
            return tid, None
        if len(value) < 2:
            raise TxnRecordError("value shorter than its 2-byte version")
        (version,) = _INT16.unpack(bytes(value[:2]))
        v, _ = decode_data(TRANSACTION_LOG_VALUE_SCHEMA, version, memoryview(value)[2:])
    except ProtocolError as exc:
        raise TxnRecordError(str(exc)) from None
    partitions = {(p.topic, i) for p in (v.transaction_partitions or []) for i in p.partition_ids}
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise TxnRecordError(f"unknown transaction status {v.transaction_status}") from None
    return tid, TxnMetadata(tid, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state, partitions,
                            v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                            previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
                            client_transaction_version=v.client_transaction_version)
