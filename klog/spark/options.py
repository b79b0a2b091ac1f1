"""Options of the ``klog`` Spark source and sink, parsed and validated the way Spark's Kafka source does.

Option names are case-insensitive (Spark hands a case-insensitive map). Every error is a
:class:`KlogSparkOptionError` (a ``ValueError``) whose message names the option and the bad value.
This module is pure Python: no pyspark, no sockets, so the driver and the tests can use it freely.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

from klog.spark.errors import KlogSparkOptionError
from klog.spark.offsets import (
    EARLIEST,
    LATEST,
    TopicPartition,
    parse_offsets_json,
    parse_timestamps_json,
)

__all__ = [
    "KlogSparkOptionError",
    "EarliestOffsets",
    "LatestOffsets",
    "SpecificOffsets",
    "GlobalTimestamp",
    "SpecificTimestamps",
    "OffsetSpec",
    "Subscription",
    "SourceOptions",
    "SinkOptions",
    "parse_source_options",
    "parse_sink_options",
]


@dataclass(frozen=True)
class EarliestOffsets:
    """Every partition from its log start offset."""


@dataclass(frozen=True)
class LatestOffsets:
    """Every partition from its end (the high watermark)."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets; ``EARLIEST`` (-2) and ``LATEST`` (-1) stand for the log's ends."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    """For every partition, the earliest offset whose timestamp is >= ``timestamp_ms``."""

    timestamp_ms: int


@dataclass(frozen=True)
class SpecificTimestamps:
    """Per-partition timestamps, resolved like :class:`GlobalTimestamp`."""

    timestamps_ms: Mapping[TopicPartition, int]


OffsetSpec = Union[EarliestOffsets, LatestOffsets, SpecificOffsets, GlobalTimestamp, SpecificTimestamps]


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of ``assign``, ``subscribe``, ``subscribePattern``."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    partitions: tuple[TopicPartition, ...] = ()
    pattern: str | None = None

    def matches(self, topic: str) -> bool:
        """Whether a topic is selected (``assign`` checks topics only; partitions are fixed)."""
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        if self.kind == "subscribe":
            return topic in self.topics
        return any(tp.topic == topic for tp in self.partitions)

    def describe(self) -> str:
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern!r}"
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)!r}"
        return "assign=" + json.dumps(_assign_json(self.partitions))


def _assign_json(partitions: tuple[TopicPartition, ...]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


#: Largest fetch response klog asks a broker for (Kafka's fetch.max.bytes default is 50 MiB).
DEFAULT_FETCH_MAX_BYTES = 64 * 1024 * 1024
#: Per-partition cap in one fetch (Kafka's max.partition.fetch.bytes default is 1 MiB; klog reads
#: whole ranges, so bigger responses mean fewer round trips).
DEFAULT_FETCH_PARTITION_MAX_BYTES = 16 * 1024 * 1024
#: How long a fetch may wait on the broker for data that is known to exist.
DEFAULT_FETCH_MAX_WAIT_MS = 500
#: Socket timeout of metadata, list-offsets and fetch requests (Spark: kafkaConsumer.pollTimeoutMs).
DEFAULT_REQUEST_TIMEOUT_MS = 120_000
#: Path mode reads segment files in chunks of this size (whole batches are kept together).
DEFAULT_SEGMENT_READ_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of a read (batch or stream)."""

    streaming: bool
    bootstrap_servers: tuple[str, ...]
    path: str | None
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    starting_by_timestamp_strategy: str  # "error" | "latest"
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    request_timeout_ms: int
    fetch_max_bytes: int
    fetch_partition_max_bytes: int
    fetch_max_wait_ms: int
    segment_read_bytes: int
    client_id: str
    kafka_params: Mapping[str, str] = field(default_factory=dict)


#: Transactional ids of the exactly-once sink start with this unless ``transactionalIdPrefix`` is set.
DEFAULT_TRANSACTIONAL_ID_PREFIX = "klog-spark"
#: The Kafka producer's transaction.timeout.ms default: a micro-batch's write plus the driver's commit must fit.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class SinkOptions:
    """The validated options of a write."""

    bootstrap_servers: tuple[str, ...]
    topic: str | None
    acks: int
    compression: str
    batch_max_bytes: int
    request_timeout_ms: int
    client_id: str
    kafka_params: Mapping[str, str] = field(default_factory=dict)
    #: ``exactlyOnce=true``: streaming writes in transactions committed with Spark's epoch (klog.spark.sink).
    exactly_once: bool = False
    #: The transactional ids of an exactly-once query are ``<prefix>-<query id>-<task partition>``.
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS


# Kafka consumer settings Spark's Kafka source refuses, because the source manages them itself.
_UNSUPPORTED_CONSUMER_PARAMS = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always returned as binary; cast them in the DataFrame",
    "value.deserializer": "values are always returned as binary; cast them in the DataFrame",
    "enable.auto.commit": "the source does not commit offsets to Kafka; Spark's checkpoint tracks them",
    "interceptor.classes": "klog does not run Kafka client interceptors",
}

# Spark Kafka source options that klog does not implement: refuse them rather than ignore them.
_UNSUPPORTED_SOURCE_OPTIONS = {
    "minoffsetspertrigger": "minOffsetsPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay",
    "endingoffsetsbytimestamp.strategy": "endingOffsetsByTimestamp.strategy",
}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise KlogSparkOptionError(f"Invalid value {raw!r} for option '{name}': must be 'true' or 'false'")


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise KlogSparkOptionError(f"Invalid value {raw!r} for option '{name}', must be a positive integer")
    return value


def _int(opts: dict[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise KlogSparkOptionError(f"Invalid value {raw!r} for option '{name}': must be an integer") from None
    if value < minimum:
        raise KlogSparkOptionError(f"Invalid value {raw!r} for option '{name}': must be >= {minimum}")
    return value


def _bootstrap(opts: dict[str, str], *, required: bool) -> tuple[str, ...]:
    raw = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if raw is None or not raw.strip():
        if required:
            raise KlogSparkOptionError(
                "Option 'kafka.bootstrap.servers' must be specified for configuring the klog source "
                "(or 'path' to read segment files directly)"
            )
        return ()
    servers = tuple(s.strip() for s in raw.split(",") if s.strip())
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise KlogSparkOptionError(
                f"Invalid address {server!r} in option 'kafka.bootstrap.servers': expected host:port"
            )
    return servers


def _kafka_params(opts: dict[str, str]) -> dict[str, str]:
    from klog.client.security import SECURITY_CONFIG_KEYS

    params = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    protocol = params.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise KlogSparkOptionError(f"Invalid value {protocol!r} for Kafka option 'security.protocol': must be "
                                   "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    for key in params:
        if key.startswith(("sasl.", "ssl.")) and key not in SECURITY_CONFIG_KEYS:
            raise KlogSparkOptionError(f"Kafka option 'kafka.{key}' is not supported by klog's client (it takes "
                                       f"{', '.join(k for k in SECURITY_CONFIG_KEYS if k.startswith(key[:4]))})")
    return params


def security_settings(params: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The client settings among the ``kafka.``-prefixed options that klog's client takes (picklable: they travel
    with tasks): security, and ``isolation.level`` (read_committed: the end offsets are last stable offsets and
    aborted transactions are left out)."""
    from klog.client.security import SECURITY_CONFIG_KEYS

    return tuple(sorted((k, v) for k, v in params.items()
                        if k in SECURITY_CONFIG_KEYS or (k == "isolation.level" and v == "read_committed")))


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribepattern") if name in opts]
    pretty = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}
    if not given:
        raise KlogSparkOptionError(
            "One of the following options must be specified for the klog source: "
            "subscribe, subscribePattern, assign"
        )
    if len(given) > 1:
        raise KlogSparkOptionError(
            "Only one of the following options can be specified for the klog source: "
            f"subscribe, subscribePattern, assign (got {', '.join(pretty[g] for g in given)})"
        )
    kind = given[0]
    raw = opts[kind]
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise KlogSparkOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is {raw!r}"
            )
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not raw.strip():
            raise KlogSparkOptionError(
                f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is {raw!r}"
            )
        try:
            re.compile(raw.strip())
        except re.error as e:
            raise KlogSparkOptionError(f"Invalid regular expression {raw!r} for option 'subscribePattern': {e}") from None
        return Subscription("subscribePattern", pattern=raw.strip())
    return Subscription("assign", partitions=_parse_assign(raw))


def _parse_assign(raw: str) -> tuple[TopicPartition, ...]:
    example = 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}'
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        raise KlogSparkOptionError(f"Invalid value for option 'assign': {example}, got {raw}") from None
    if not isinstance(obj, dict) or not obj:
        raise KlogSparkOptionError(f"Invalid value for option 'assign': {example}, got {raw}")
    parts: list[TopicPartition] = []
    for topic, plist in obj.items():
        if not isinstance(plist, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in plist):
            raise KlogSparkOptionError(f"Invalid value for option 'assign': {example}, got {raw}")
        parts.extend(TopicPartition(topic, p) for p in plist)
    if not parts:
        raise KlogSparkOptionError(f"Invalid value for option 'assign': no partitions in {raw}")
    return tuple(dict.fromkeys(parts))


def _timestamp(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise KlogSparkOptionError(
            f"Invalid value {raw!r} for option '{name}': expected milliseconds since the epoch"
        ) from None


def _offset_spec(opts: dict[str, str], prefix: str, default: OffsetSpec) -> OffsetSpec:
    """Resolve ``<prefix>OffsetsByTimestamp`` > ``<prefix>Timestamp`` > ``<prefix>Offsets`` like Spark."""
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return SpecificTimestamps(parse_timestamps_json(by_ts, option=f"{prefix}OffsetsByTimestamp"))
    ts = _timestamp(opts, f"{prefix}Timestamp")
    if ts is not None:
        return GlobalTimestamp(ts)
    raw = opts.get(f"{prefix}offsets")
    if raw is None:
        return default
    value = raw.strip()
    if value.lower() == "earliest":
        return EarliestOffsets()
    if value.lower() == "latest":
        return LatestOffsets()
    return SpecificOffsets(parse_offsets_json(value, option=f"{prefix}Offsets"))


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate a read's options exactly as Spark's Kafka source does (plus klog's ``path``)."""
    opts = _lower(options)
    for key, name in _UNSUPPORTED_SOURCE_OPTIONS.items():
        if key in opts:
            raise KlogSparkOptionError(f"Option '{name}' is not supported by the klog source")
    params = _kafka_params(opts)
    for key, why in _UNSUPPORTED_CONSUMER_PARAMS.items():
        if key in params:
            raise KlogSparkOptionError(f"Kafka option '{key}' is not supported: {why}")
    isolation = params.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise KlogSparkOptionError(
            f"Invalid value {isolation!r} for Kafka option 'isolation.level': must be read_uncommitted (the Kafka "
            "consumer's default) or read_committed"
        )
    params["isolation.level"] = isolation

    path = opts.get("path")
    path = path.strip() if path is not None and path.strip() else None
    if path is not None and isolation == "read_committed":
        raise KlogSparkOptionError("Kafka option 'isolation.level'='read_committed' needs the brokers: the 'path' "
                                   "mode reads segment files, which do not know which transactions are open")
    bootstrap = _bootstrap(opts, required=path is None)
    subscription = _subscription(opts)

    starting = _offset_spec(opts, "starting", LatestOffsets() if streaming else EarliestOffsets())
    has_ending = any(k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"))
    if streaming and has_ending:
        raise KlogSparkOptionError("Ending offsets are not valid in streaming queries: remove 'endingOffsets', "
                                   "'endingTimestamp' and 'endingOffsetsByTimestamp'")
    ending = _offset_spec(opts, "ending", LatestOffsets())

    if not streaming:
        if isinstance(starting, LatestOffsets):
            raise KlogSparkOptionError("Starting offset can't be latest for batch queries: use 'earliest' or JSON")
        if isinstance(starting, SpecificOffsets):
            for tp, off in starting.offsets.items():
                if off == LATEST:
                    raise KlogSparkOptionError(
                        f"startingOffsets for {tp.topic}-{tp.partition} can't be latest (-1) for batch queries"
                    )
        if isinstance(ending, EarliestOffsets):
            raise KlogSparkOptionError("Ending offset can't be earliest for batch queries: use 'latest' or JSON")
        if isinstance(ending, SpecificOffsets):
            for tp, off in ending.offsets.items():
                if off == EARLIEST:
                    raise KlogSparkOptionError(
                        f"endingOffsets for {tp.topic}-{tp.partition} can't be earliest (-2) for batch queries"
                    )

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KlogSparkOptionError(
            f"Invalid value {strategy!r} for option 'startingOffsetsByTimestampStrategy': must be 'error' or 'latest'"
        )

    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    if max_per_trigger is not None and not streaming:
        max_per_trigger = None  # Spark ignores it for batch reads

    return SourceOptions(
        streaming=streaming,
        bootstrap_servers=bootstrap,
        path=path,
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy=strategy,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        max_offsets_per_trigger=max_per_trigger,
        request_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", DEFAULT_REQUEST_TIMEOUT_MS, minimum=1),
        fetch_max_bytes=_int(opts, "kafka.fetch.max.bytes", DEFAULT_FETCH_MAX_BYTES, minimum=1024),
        fetch_partition_max_bytes=_int(
            opts, "kafka.max.partition.fetch.bytes", DEFAULT_FETCH_PARTITION_MAX_BYTES, minimum=1024
        ),
        fetch_max_wait_ms=_int(opts, "kafka.fetch.max.wait.ms", DEFAULT_FETCH_MAX_WAIT_MS, minimum=0),
        segment_read_bytes=_int(opts, "segmentReadBytes", DEFAULT_SEGMENT_READ_BYTES, minimum=64 * 1024),
        client_id=params.get("client.id", "klog-spark"),
        kafka_params=params,
    )


#: Compression codecs a Kafka producer accepts for ``compression.type``.
_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
#: Default size of one produced record batch (Kafka's batch.size default is 16 KiB; the sink
#: writes whole DataFrame partitions, so it builds bigger batches).
DEFAULT_SINK_BATCH_BYTES = 1024 * 1024


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate a write's options like Spark's Kafka sink (``kafka.bootstrap.servers``, ``topic``)."""
    opts = _lower(options)
    params = _kafka_params(opts)
    for key in ("key.serializer", "value.serializer"):
        if key in params:
            raise KlogSparkOptionError(
                f"Kafka option '{key}' is not supported: cast the key and value columns to string or binary"
            )
    acks_raw = params.get("acks", "all").strip().lower()
    acks_map = {"all": -1, "-1": -1, "1": 1, "0": 0}
    if acks_raw not in acks_map:
        raise KlogSparkOptionError(f"Invalid value {acks_raw!r} for option 'kafka.acks': must be all, -1, 0 or 1")
    compression = params.get("compression.type", "none").strip().lower()
    if compression not in _COMPRESSION:
        raise KlogSparkOptionError(
            f"Invalid value {compression!r} for option 'kafka.compression.type': must be one of {', '.join(_COMPRESSION)}"
        )
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise KlogSparkOptionError("Option 'topic' is empty")
    if "transactional.id" in params:
        raise KlogSparkOptionError("Kafka option 'transactional.id' is not supported: set exactlyOnce=true (and "
                                   "optionally transactionalIdPrefix); the sink derives one id per query and task "
                                   "partition")
    exactly_once = _bool(opts, "exactlyOnce", False)
    if exactly_once and acks_map[acks_raw] != -1:
        raise KlogSparkOptionError(f"Invalid value {acks_raw!r} for option 'kafka.acks' with exactlyOnce=true: "
                                   "transactions need acks=all")
    prefix = opts.get("transactionalidprefix", DEFAULT_TRANSACTIONAL_ID_PREFIX).strip()
    if not prefix:
        raise KlogSparkOptionError("Option 'transactionalIdPrefix' is empty")
    return SinkOptions(
        bootstrap_servers=_bootstrap(opts, required=True),
        topic=topic.strip() if topic is not None else None,
        acks=acks_map[acks_raw],
        compression=compression,
        batch_max_bytes=_int(opts, "kafka.batch.size", DEFAULT_SINK_BATCH_BYTES, minimum=1024),
        request_timeout_ms=_int(opts, "kafka.request.timeout.ms", 30_000, minimum=1),
        client_id=params.get("client.id", "klog-spark-sink"),
        kafka_params=params,
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
        transaction_timeout_ms=_int(opts, "kafka.transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS, minimum=1),
    )
