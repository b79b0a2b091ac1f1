"""Client telemetry (KIP-714): the broker side of GetTelemetrySubscriptions (71) and PushTelemetry (72), as Kafka's
``ClientMetricsManager`` decides them, with klog's receiver: the pushed OTLP metrics kept per client instance and
exposed on the Prometheus endpoint.

- A client asks which metrics to push: it gets an instance id (when it had none), the subscription id, push
  interval and metric prefixes of the CLIENT_METRICS subscriptions its metadata matches
  (:mod:`klog.metadata.client_metrics`), the accepted compression types, ``telemetry.max.bytes`` and delta
  temporality. Asking again before the push interval is THROTTLING_QUOTA_EXCEEDED.
- A client pushes: refused with THROTTLING_QUOTA_EXCEEDED before its interval (but for the first push after a
  GetTelemetrySubscriptions, and a terminating push), UNKNOWN_SUBSCRIPTION_ID when the subscriptions changed,
  UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE above ``telemetry.max.bytes``, INVALID_REQUEST after a
  terminating push; a payload that does not decompress or decode as OTLP ``MetricsData`` is INVALID_RECORD.
- Decoded points are kept per instance (gauges as pushed, sums accumulated from deltas or replaced by cumulative
  values); at most ``klog.telemetry.max.clients`` instances (least recently seen dropped), each forgotten after
  ``klog.telemetry.expiry.intervals`` push intervals without a request.

Sans-IO: handlers pass the time in; :meth:`ClientTelemetry.series` is what the metrics snapshot copies.
"""

from __future__ import annotations

import gzip
import importlib
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from klog.metadata import client_metrics
from klog.metadata.client_metrics import Subscription
from klog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        GetTelemetrySubscriptionsResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
    )

__all__ = ["ACCEPTED_COMPRESSION_TYPES", "ClientTelemetry", "ClientMetadata", "Series", "decode_metrics"]

#: Kafka's ClientMetricsManager order (the client takes the first it supports): zstd, lz4, gzip, snappy
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
_NONE, _GZIP, _SNAPPY, _LZ4, _ZSTD = 0, 1, 2, 3, 4
_ZERO_UUID = uuid.UUID(int=0)
#: OTLP AggregationTemporality
_DELTA, _CUMULATIVE = 1, 2
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


class InvalidPayload(ValueError):
    """A pushed payload that does not decompress or decode (INVALID_RECORD)."""


def _snappy(data: bytes) -> bytes:
    """Kafka's snappy streams are snappy-java's (xerial) framing: a 16-byte header, then length-prefixed raw
    snappy blocks; a bare raw block is accepted too."""
    import cramjam

    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out, pos = bytearray(), 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise InvalidPayload("truncated snappy block length")
        size = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        if pos + size > len(data):
            raise InvalidPayload("truncated snappy block")
        out += bytes(cramjam.snappy.decompress_raw(data[pos:pos + size]))
        pos += size
    return bytes(out)


def _lz4(data: bytes) -> bytes:
    import lz4.frame

    return bytes(lz4.frame.decompress(data))


def _zstd(data: bytes) -> bytes:
    import zstandard

    # a frame without its content size in the header (streamed) still decompresses through a reader
    with zstandard.ZstdDecompressor().stream_reader(data) as reader:
        return bytes(reader.read())


_DECOMPRESS: dict[int, Callable[[bytes], bytes]] = {
    _NONE: bytes, _GZIP: gzip.decompress, _SNAPPY: _snappy, _LZ4: _lz4, _ZSTD: _zstd,
}


#: (metric name, kind "gauge" or "counter", point attributes) -> value
Points = dict[tuple[str, str, tuple[tuple[str, str], ...]], float]


def _attribute_value(value: Any) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


def _attributes(attrs: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((a.key, _attribute_value(a.value)) for a in attrs))


def decode_metrics(payload: bytes, compression_type: int) -> Iterator[tuple[str, str, bool, tuple[tuple[str, str], ...], float]]:
    """The points of a pushed payload: (metric name, "gauge" or "counter", is a delta, attributes, value). Raises
    :class:`InvalidPayload` when the payload does not decompress or is not OTLP MetricsData."""
    # opentelemetry-proto's generated module, untyped here (its stubs disagree with protobuf's own)
    metrics_pb2: Any = importlib.import_module("opentelemetry.proto.metrics.v1.metrics_pb2")
    try:
        raw = _DECOMPRESS[compression_type](payload)
    except InvalidPayload:
        raise
    except Exception as exc:   # each library raises its own error types on a corrupt stream
        raise InvalidPayload(f"payload does not decompress: {exc}") from None
    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(raw)
    except Exception as exc:   # google.protobuf.message.DecodeError, or the C parser's own
        raise InvalidPayload(f"payload is not OTLP MetricsData: {exc}") from None
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points, counter, delta = metric.gauge.data_points, False, False
                elif kind == "sum":
                    points = metric.sum.data_points
                    counter = metric.sum.is_monotonic
                    delta = metric.sum.aggregation_temporality == _DELTA
                else:   # histograms and summaries: Kafka's Java and librdkafka clients push gauges and sums only
                    continue
                for point in points:
                    value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
                    yield (metric.name, "counter" if counter else "gauge", delta and counter,
                           _attributes(point.attributes), value)


@dataclass(frozen=True)
class ClientMetadata:
    """What a subscription's ``match`` tests (Kafka's ClientMetricsInstanceMetadata)."""

    client_instance_id: str
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass
class _Instance:
    """One client instance: its subscription (Kafka's ClientMetricsInstance) and its last pushed metrics."""

    metadata: ClientMetadata
    subscription_id: int
    subscriptions_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    points: Points = field(default_factory=dict)

    def may_get(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        # the first push after a GetTelemetrySubscriptions may come early: clients jitter their interval
        accept = self.last_get_ms > self.last_push_ms or \
            now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms
        if accept:
            self.last_push_ms = now_ms
        return accept


def _crc32c(data: bytes) -> int:
    from klog import _native

    return int(_native.crc32c(data))


def _java_uuid_hash(value: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the xor of its two longs, folded to 32 bits."""
    bits = value.int
    h = (bits >> 64) ^ (bits & 0xFFFFFFFFFFFFFFFF)
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def subscription_id(metrics: tuple[str, ...], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """A subscription id that changes with the metrics and interval (Kafka's computeSubscriptionId: a CRC-32C of
    them, xored with the instance id's hash), as a signed int32."""
    text = ("[" + ", ".join(metrics) + "]" + str(push_interval_ms)).encode()
    value = (_crc32c(text) ^ _java_uuid_hash(instance_id)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(frozen=True)
class Series:
    """A client's point as the metrics endpoint exposes it."""

    name: str
    kind: str
    labels: tuple[tuple[str, str], ...]
    value: float


class ClientTelemetry:
    """The client instances of one broker (Kafka's ClientMetricsManager with an in-process receiver)."""

    def __init__(self, configs: Callable[[], Mapping[tuple[Any, str], Mapping[str, str]]], *, max_bytes: int,
                 max_clients: int, expiry_intervals: int) -> None:
        #: the image's configs; CLIENT_METRICS resources are the subscriptions
        self._configs = configs
        self.max_bytes = max_bytes
        self.max_clients = max_clients
        self.expiry_intervals = expiry_intervals
        self._instances: OrderedDict[uuid.UUID, _Instance] = OrderedDict()
        self._seen_configs: object = None
        self._subscriptions: list[Subscription] = []
        #: bumped whenever the subscriptions change: instances of an older version get a new subscription id
        self._version = 0
        #: pushes by outcome ("accepted" or an error name)
        self.pushes: dict[str, int] = {}

    # -- subscriptions -------------------------------------------------------------------------------------

    def subscriptions(self) -> list[Subscription]:
        configs = self._configs()
        if configs is not self._seen_configs:
            from klog.metadata.image import ConfigResourceType

            current = client_metrics.subscriptions(
                {name: values for (rtype, name), values in configs.items()
                 if rtype == ConfigResourceType.CLIENT_METRICS})
            if current != self._subscriptions:
                self._subscriptions = current
                self._version += 1
            self._seen_configs = configs
        return self._subscriptions

    def _new_instance(self, instance_id: uuid.UUID, metadata: ClientMetadata, now_ms: int,
                      old: _Instance | None) -> _Instance:
        interval = client_metrics.INTERVAL_MS_DEFAULT
        metrics: set[str] = set()
        every = False
        for sub in self.subscriptions():
            if sub.matches(metadata.as_dict()):
                every = every or client_metrics.ALL_METRICS in sub.metrics
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        chosen = (client_metrics.ALL_METRICS,) if every else tuple(sorted(metrics))
        instance = _Instance(metadata, subscription_id(chosen, interval, instance_id), self._version, chosen,
                             interval, last_seen_ms=now_ms)
        if old is not None:
            instance.points = old.points   # what it pushed stays exposed until it pushes again
        return instance

    def _instance(self, instance_id: uuid.UUID, metadata: ClientMetadata, now_ms: int) -> _Instance:
        self._expire(now_ms)
        self.subscriptions()
        instance = self._instances.get(instance_id)
        if instance is None or instance.subscriptions_version != self._version:
            instance = self._new_instance(instance_id, metadata, now_ms, instance)
            self._instances[instance_id] = instance
            while len(self._instances) > self.max_clients:
                self._instances.popitem(last=False)
        self._instances.move_to_end(instance_id)
        instance.last_seen_ms = now_ms
        return instance

    def _expire(self, now_ms: int) -> None:
        for instance_id, instance in list(self._instances.items()):
            if now_ms - instance.last_seen_ms > instance.push_interval_ms * self.expiry_intervals:
                del self._instances[instance_id]

    # -- the two APIs --------------------------------------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID, metadata: Callable[[uuid.UUID], ClientMetadata],
                          now_ms: int) -> GetTelemetrySubscriptionsResponse:
        """GetTelemetrySubscriptions: ``instance_id`` zero asks for a new one."""
        if instance_id == _ZERO_UUID:
            instance_id = uuid.uuid4()
            while instance_id in self._instances:
                instance_id = uuid.uuid4()
        instance = self._instance(instance_id, metadata(instance_id), now_ms)
        answer: GetTelemetrySubscriptionsResponse = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                                                     "client_instance_id": instance_id}
        if not instance.may_get(now_ms) and instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                                        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            answer["error_code"] = ErrorCode.THROTTLING_QUOTA_EXCEEDED
            return answer
        instance.last_get_ms = now_ms
        answer.update({"subscription_id": instance.subscription_id,
                       "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
                       "push_interval_ms": instance.push_interval_ms, "telemetry_max_bytes": self.max_bytes,
                       "delta_temporality": True, "requested_metrics": list(instance.metrics)})
        return answer

    def push(self, request: PushTelemetryRequest, metadata: Callable[[uuid.UUID], ClientMetadata], now_ms: int
             ) -> PushTelemetryResponse:
        """PushTelemetry, in Kafka's order of checks; accepted points replace or add to the instance's."""
        instance_id = request.client_instance_id
        if instance_id == _ZERO_UUID:
            return self._answer(ErrorCode.INVALID_REQUEST)
        instance = self._instance(instance_id, metadata(instance_id), now_ms)
        code = self._check_push(request, instance, now_ms)
        instance.terminating = instance.terminating or bool(request.terminating)
        if code == ErrorCode.NONE and request.metrics:
            try:
                points = list(decode_metrics(bytes(request.metrics), int(request.compression_type)))
            except InvalidPayload:
                code = ErrorCode.INVALID_RECORD
            else:
                self._record(instance, points)
        instance.last_error = code
        return self._answer(code)

    def _check_push(self, request: PushTelemetryRequest, instance: _Instance, now_ms: int) -> int:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        if not instance.may_push(now_ms) and not request.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if request.subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type != _NONE and request.compression_type not in ACCEPTED_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if request.metrics is not None and len(request.metrics) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _answer(self, code: int) -> PushTelemetryResponse:
        outcome = "accepted" if code == ErrorCode.NONE else ErrorCode(code).name
        self.pushes[outcome] = self.pushes.get(outcome, 0) + 1
        return {"throttle_time_ms": 0, "error_code": code}

    @staticmethod
    def _record(instance: _Instance, points: list[tuple[str, str, bool, tuple[tuple[str, str], ...], float]]
                ) -> None:
        for name, kind, delta, attributes, value in points:
            key = (name, kind, attributes)
            instance.points[key] = instance.points.get(key, 0.0) + value if delta else value

    # -- what the metrics endpoint shows ------------------------------------------------------------------

    def series(self, now_ms: int) -> list[Series]:
        """Every kept instance's points with its labels (client_instance_id, client_id, software, address)."""
        self._expire(now_ms)
        out = []
        for instance_id, instance in self._instances.items():
            meta = instance.metadata
            client = (("client_instance_id", str(instance_id)), ("client_id", meta.client_id),
                      ("client_software_name", meta.client_software_name),
                      ("client_software_version", meta.client_software_version),
                      ("client_source_address", meta.client_source_address))
            for (name, kind, attributes), value in instance.points.items():
                # a point attribute named like a client label (client_id) is the client's: the label says it
                extra = tuple((label, v) for k, v in attributes if (label := _label(k)) not in _CLIENT_LABELS)
                out.append(Series(name, kind, client + extra, value))
        return out

    def __len__(self) -> int:
        return len(self._instances)


_LABEL_RE = re.compile(r"[^a-zA-Z0-9_]")
_CLIENT_LABELS = frozenset(("client_instance_id", "client_id", "client_software_name", "client_software_version",
                            "client_source_address"))


def _label(name: str) -> str:
    label = _LABEL_RE.sub("_", name)
    return label if not label[:1].isdigit() else "_" + label


def prometheus_name(metric: str) -> str:
    """An OTLP metric name as Prometheus spells it (OpenTelemetry's Prometheus exporter: every character
    outside ``[a-zA-Z0-9_:]`` becomes ``_``): ``org.apache.kafka.producer.record.queue.time.avg`` ->
    ``org_apache_kafka_producer_record_queue_time_avg``."""
    name = re.sub(r"[^a-zA-Z0-9_:]", "_", metric)
    return name if not name[:1].isdigit() else "_" + name
