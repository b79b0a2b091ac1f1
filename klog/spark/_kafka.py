"""A small blocking Kafka-protocol client for the Spark source and sink: Metadata, ListOffsets,
Fetch and Produce over :mod:`klog.protocol`, nothing else.

Spark tasks are synchronous, short-lived and read or write one offset range each, so this is a
plain socket per broker, one request in flight per connection, with versions negotiated through
ApiVersions. Record batches are never parsed here: fetched ``records`` stay memoryviews of the
response frame and go to the native decoder; produced batches come from the native encoder.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from klog.protocol import ApiKey, decode_response, encode_request, versions
from klog.protocol.errors import error_info
from klog.spark.errors import BrokerError
from klog.spark.offsets import TopicPartition

__all__ = ["KafkaConnection", "KafkaCluster", "ClusterMetadata", "PartitionMetadata", "ReceiveBuffer"]

#: Highest versions used: the last ones that address topics by name (later ones need topic ids).
_MAX_VERSION: dict[int, int] = {
    ApiKey.PRODUCE: 12,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 10,
    ApiKey.METADATA: 12,
}
#: Largest response frame accepted: fetch.max.bytes may be exceeded by one batch (KIP-74), and
#: a batch is bounded by an int32; a bigger frame means a broken peer.
MAX_RESPONSE_FRAME_BYTES = 1 << 30
#: Retriable errors (leader moved, election in progress, ...) are retried this many times with
#: metadata refreshed in between (Spark's fetchOffset.numRetries is 3; leader elections take longer).
MAX_RETRIES = 8
#: First back-off between retries; doubles each time up to RETRY_BACKOFF_MAX_S.
RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
#: A :class:`ReceiveBuffer` grows in steps of this size (a fetch response rarely has the exact
#: size of the previous one; rounding up avoids reallocating for a few bytes more).
RECEIVE_BUFFER_STEP_BYTES = 1 << 20

_SIZE = struct.Struct(">i")

# Error codes this module reacts to (klog.protocol.errors has the whole table).
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
REPLICA_NOT_AVAILABLE = 9
NETWORK_EXCEPTION = 13
KAFKA_STORAGE_ERROR = 56
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
OFFSET_NOT_AVAILABLE = 78
#: Errors that mean "ask the cluster who leads this partition now, then retry".
REFRESH_AND_RETRY = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT,
        REPLICA_NOT_AVAILABLE,
        NETWORK_EXCEPTION,
        KAFKA_STORAGE_ERROR,
        FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH,
        OFFSET_NOT_AVAILABLE,
    }
)


def error_name(code: int) -> str:
    try:
        return error_info(code).name
    except Exception:
        return f"error code {code}"


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


class ReceiveBuffer:
    """One buffer that response frames are read into, reused from response to response, so a
    reader fetching hundreds of MB does not allocate (and page in) a new buffer per response.

    A response decoded from it holds views of it (a fetch's ``records``): they are valid until
    the next :meth:`KafkaConnection.receive` into the same buffer. Growing replaces the buffer
    (never resizes it in place), so views of the old one stay valid until they are dropped."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def frame(self, size: int) -> memoryview:
        if size > len(self._buf):
            step = RECEIVE_BUFFER_STEP_BYTES
            self._buf = bytearray(min(-(-size // step) * step, MAX_RESPONSE_FRAME_BYTES))
        return memoryview(self._buf)[:size]


class KafkaConnection:
    """One TCP connection to one broker; requests are sent and answered one at a time."""

    def __init__(self, host: str, port: int, *, client_id: str, timeout_s: float) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise BrokerError(f"cannot connect to broker {host}:{port}: {e}") from e
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_id = 0
        self._versions: dict[int, tuple[int, int]] = {}
        try:
            _, body = self._roundtrip(ApiKey.API_VERSIONS, 0, {})
        except BaseException:
            self.close()
            raise
        if body.error_code != NONE:
            self.close()
            raise BrokerError(f"ApiVersions to {self}: {error_name(body.error_code)}", body.error_code)
        self._versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def __repr__(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides speak (capped where topic ids start)."""
        ours_min, ours_max = versions(api_key)
        ours_max = min(ours_max, _MAX_VERSION.get(api_key, ours_max))
        theirs = self._versions.get(api_key)
        if theirs is None:
            raise BrokerError(f"broker {self} does not support API {ApiKey(api_key).name}")
        best = min(ours_max, theirs[1])
        if best < max(ours_min, theirs[0]):
            raise BrokerError(
                f"broker {self} supports {ApiKey(api_key).name} versions {theirs[0]}-{theirs[1]}, "
                f"klog needs {ours_min}-{ours_max}"
            )
        return best

    def request(self, api_key: int, body: Any, version: int | None = None) -> tuple[int, Any]:
        """Send one request and return ``(version, decoded response body)``."""
        if version is None:
            version = self.version(api_key)
        return self._roundtrip(api_key, version, body)

    def send_only(self, api_key: int, body: Any) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        version = self.version(api_key)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, version, self._correlation_id, self.client_id, body)
        try:
            self._sock.sendall(frame)
        except OSError as e:
            self.close()
            raise BrokerError(f"{ApiKey(api_key).name} to broker {self} failed: {e}", NETWORK_EXCEPTION) from e

    def _roundtrip(self, api_key: int, version: int, body: Any) -> tuple[int, Any]:
        cid = self.send(api_key, version, body)
        return version, self.receive(api_key, version, cid)

    def send(self, api_key: int, version: int, body: Any) -> int:
        """Send a request without waiting for its answer (pipelining); returns its correlation id.
        Answers come back in order: pass each id to :meth:`receive` in the order sent."""
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        frame = encode_request(api_key, version, cid, self.client_id, body)
        try:
            self._sock.sendall(frame)
        except OSError as e:
            self.close()
            raise BrokerError(f"{ApiKey(api_key).name} to broker {self} failed: {e}", NETWORK_EXCEPTION) from e
        return cid

    def receive(self, api_key: int, version: int, cid: int, *, into: ReceiveBuffer | None = None) -> Any:
        """The decoded answer to the request sent with correlation id ``cid``; read into ``into``
        when given (then its byte fields are views of that buffer, see :class:`ReceiveBuffer`)."""
        try:
            data = self._read_frame(into)
        except OSError as e:
            self.close()
            raise BrokerError(f"{ApiKey(api_key).name} to broker {self} failed: {e}", NETWORK_EXCEPTION) from e
        got, decoded = decode_response(api_key, version, data)
        if got != cid:
            self.close()
            raise BrokerError(f"broker {self} answered correlation id {got}, expected {cid}")
        return decoded

    def _read_exact(self, view: memoryview) -> None:
        n = len(view)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError(f"broker closed the connection after {got} of {n} bytes")
            got += k

    def _read_frame(self, into: ReceiveBuffer | None = None) -> bytearray | memoryview:
        prefix = bytearray(4)
        self._read_exact(memoryview(prefix))
        (size,) = _SIZE.unpack(prefix)
        if size < 0 or size > MAX_RESPONSE_FRAME_BYTES:
            raise ConnectionError(f"response frame of {size} bytes (limit {MAX_RESPONSE_FRAME_BYTES})")
        if into is None:
            frame = bytearray(size)
            self._read_exact(memoryview(frame))
            return frame
        view = into.frame(size)
        self._read_exact(view)
        return view


@dataclass(frozen=True)
class PartitionMetadata:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: topic -> partition -> metadata; topics that failed (e.g. unknown) are in ``topic_errors``
    topics: dict[str, dict[int, PartitionMetadata]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)
    internal_topics: set[str] = field(default_factory=set)


def _backoff(attempt: int) -> None:
    time.sleep(min(RETRY_BACKOFF_S * (2**attempt), RETRY_BACKOFF_MAX_S))


class KafkaCluster:
    """Bootstrap servers, metadata and one cached connection per broker."""

    def __init__(self, bootstrap_servers: Iterable[str], *, client_id: str, timeout_s: float) -> None:
        self.bootstrap = [parse_address(a) for a in bootstrap_servers]
        if not self.bootstrap:
            raise BrokerError("no bootstrap servers given")
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], KafkaConnection] = {}
        self.meta = ClusterMetadata()

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    def connection(self, address: tuple[str, int]) -> KafkaConnection:
        conn = self._conns.get(address)
        if conn is None:
            conn = KafkaConnection(*address, client_id=self.client_id, timeout_s=self.timeout_s)
            self._conns[address] = conn
        return conn

    def drop(self, conn: KafkaConnection) -> None:
        conn.close()
        self._conns.pop((conn.host, conn.port), None)

    def _any_connection(self) -> KafkaConnection:
        errors = []
        for address in [*self._conns, *self.bootstrap]:
            try:
                return self.connection(address)
            except BrokerError as e:
                errors.append(str(e))
        raise BrokerError("no broker reachable: " + "; ".join(errors))

    def refresh(self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False) -> ClusterMetadata:
        """Metadata for ``topics`` (all topics when None). ``allow_auto_create``: ask the broker to create
        missing topics if its auto.create.topics.enable allows (what a Kafka producer, so Spark's sink, does)."""
        wanted = None if topics is None else sorted(set(topics))
        last: Exception | None = None
        for attempt in range(MAX_RETRIES):
            conn = self._any_connection()
            body = {
                "topics": None if wanted is None else [{"name": t} for t in wanted],
                "allow_auto_topic_creation": allow_auto_create,
            }
            try:
                _, resp = conn.request(ApiKey.METADATA, body)
            except BrokerError as e:
                self.drop(conn)
                last = e
                _backoff(attempt)
                continue
            meta = ClusterMetadata()
            meta.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
            retry = False
            for t in resp.topics:
                if t.error_code != NONE:
                    meta.topic_errors[t.name] = t.error_code
                    retry = retry or t.error_code == LEADER_NOT_AVAILABLE
                    continue
                if t.is_internal:
                    meta.internal_topics.add(t.name)
                meta.topics[t.name] = {
                    p.partition_index: PartitionMetadata(p.error_code, p.leader_id, p.leader_epoch)
                    for p in t.partitions
                }
                retry = retry or any(p.leader_id < 0 for p in t.partitions)
            self.meta = meta
            if not retry or attempt == MAX_RETRIES - 1:
                return meta
            _backoff(attempt)
        raise BrokerError(f"Metadata failed after {MAX_RETRIES} attempts: {last}")

    def leader_connection(self, tp: TopicPartition) -> KafkaConnection:
        pm = self.meta.topics.get(tp.topic, {}).get(tp.partition)
        if pm is None or pm.leader_id < 0 or pm.leader_id not in self.meta.brokers:
            self.refresh([tp.topic])
            pm = self.meta.topics.get(tp.topic, {}).get(tp.partition)
        if pm is None:
            code = self.meta.topic_errors.get(tp.topic, UNKNOWN_TOPIC_OR_PARTITION)
            raise BrokerError(f"partition {tp}: {error_name(code)}", code)
        if pm.leader_id < 0 or pm.leader_id not in self.meta.brokers:
            raise BrokerError(f"partition {tp} has no leader", LEADER_NOT_AVAILABLE)
        return self.connection(self.meta.brokers[pm.leader_id])

    def list_offsets(self, queries: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets for each partition (timestamp, or -2 earliest / -1 latest), sent to each
        partition's leader: ``{tp: (offset, timestamp)}``; offset -1 means no record at/after the
        timestamp. Unknown partitions raise :class:`BrokerError` with UNKNOWN_TOPIC_OR_PARTITION."""
        pending = dict(queries)
        out: dict[TopicPartition, tuple[int, int]] = {}
        last_error = ""
        for attempt in range(MAX_RETRIES):
            if not pending:
                break
            if attempt:
                _backoff(attempt)
                self.refresh({tp.topic for tp in pending})
            by_leader: dict[tuple[str, int], list[TopicPartition]] = {}
            for tp in pending:
                try:
                    conn = self.leader_connection(tp)
                except BrokerError as e:
                    if e.code in REFRESH_AND_RETRY and attempt < MAX_RETRIES - 1:
                        last_error = str(e)
                        continue
                    raise
                by_leader.setdefault((conn.host, conn.port), []).append(tp)
            for address, tps in by_leader.items():
                conn = self.connection(address)
                topics: dict[str, list[dict[str, int]]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": pending[tp]}
                    )
                body = {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                    "timeout_ms": int(self.timeout_s * 1000),
                }
                try:
                    _, resp = conn.request(ApiKey.LIST_OFFSETS, body)
                except BrokerError as e:
                    self.drop(conn)
                    last_error = str(e)
                    continue
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in pending:
                            continue
                        if p.error_code == NONE:
                            out[tp] = (p.offset, p.timestamp)
                            del pending[tp]
                        elif p.error_code in REFRESH_AND_RETRY and attempt < MAX_RETRIES - 1:
                            last_error = f"{tp}: {error_name(p.error_code)}"
                        else:
                            raise BrokerError(f"ListOffsets for {tp}: {error_name(p.error_code)}", p.error_code)
        if pending:
            raise BrokerError(
                f"ListOffsets for {', '.join(map(str, sorted(pending)))} failed after {MAX_RETRIES} attempts: {last_error}"
            )
        return out
