"""Cluster view and broker connections shared by the producer, consumer and admin client.

:class:`ClusterClient` owns one :class:`BrokerConnection` per broker, bootstraps from ``bootstrap.servers``,
and keeps :class:`ClusterMetadata` (brokers, controller, topics, partition leaders) fresh: periodically
(``metadata.max.age.ms``) and on demand when a request reports a stale leader. Refreshes are single-flight:
concurrent callers share one Metadata request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from klog.protocol import ApiKey, Struct

from .config import parse_bootstrap
from .connection import BrokerConnection
from .security import client_security
from .errors import (
    ClientClosedError,
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    for_code,
)

__all__ = ["BrokerInfo", "PartitionInfo", "TopicInfo", "ClusterMetadata", "ClusterClient", "Backoff"]

log = logging.getLogger("klog.client")

#: Kafka's error codes that mean "the metadata you used is stale".
STALE_METADATA_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_ID})


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: Any
    is_internal: bool
    partitions: dict[int, PartitionInfo]
    error_code: int = ErrorCode.NONE


@dataclass
class ClusterMetadata:
    """One snapshot of the cluster as the last Metadata response described it."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    #: Topics the last response reported an error for (name -> error code).
    topic_errors: dict[str, int] = field(default_factory=dict)
    updated_at: float = 0.0

    def partitions_for(self, topic: str) -> list[int] | None:
        t = self.topics.get(topic)
        return sorted(t.partitions) if t is not None else None

    def leader_for(self, topic: str, partition: int) -> int | None:
        t = self.topics.get(topic)
        if t is None:
            return None
        p = t.partitions.get(partition)
        if p is None or p.leader < 0:
            return None
        return p.leader


class Backoff:
    """Exponential backoff with jitter (Kafka's retry.backoff.ms / retry.backoff.max.ms scheme)."""

    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial = initial_ms / 1000.0
        self.maximum = max(max_ms, initial_ms) / 1000.0

    def delay(self, attempt: int) -> float:
        if self.initial <= 0:
            return 0.0
        d = min(self.maximum, self.initial * (2 ** min(attempt, 30)))
        return d * random.uniform(0.8, 1.2)


class ClusterClient:
    """Connections to every broker plus the cluster metadata. Lives on one event loop."""

    def __init__(self, config: dict[str, Any], *, allow_auto_create_topics: bool = False) -> None:
        self.config = config
        self.bootstrap = parse_bootstrap(config["bootstrap.servers"])
        self.client_id: str = config["client.id"]
        #: TLS and SASL settings (None: PLAINTEXT); a ConfigError names a setting that cannot be used
        self.security = client_security(config)
        self.allow_auto_create_topics = allow_auto_create_topics
        self.metadata = ClusterMetadata()
        #: Topics whose metadata is kept fresh (added by producers/consumers as they use topics).
        self.tracked_topics: set[str] = set()
        #: When True, refreshes ask for all topics (pattern subscriptions).
        self.track_all_topics = False
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self._conn_failures: dict[int, tuple[int, float]] = {}  # node -> (consecutive failures, retry-at)
        self._refresh: asyncio.Future[ClusterMetadata] | None = None
        self._refresh_requested = False
        self._update_scheduled = False
        #: Consecutive failed refreshes, and when the next one may start (Kafka's exponential refresh backoff).
        self._refresh_failures = 0
        self._refresh_retry_at = 0.0
        self._closed = False
        self._retry = Backoff(config["retry.backoff.ms"], config["retry.backoff.max.ms"])
        self._reconnect = Backoff(config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"])
        self._metadata_listeners: list[Any] = []
        self._periodic: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self, timeout: float | None = None) -> None:
        """Connect to a bootstrap server and load the first metadata."""
        await self.refresh_metadata(timeout=timeout)
        self._periodic = asyncio.get_running_loop().create_task(self._refresh_periodically())

    async def close(self) -> None:
        self._closed = True
        if self._periodic is not None:
            self._periodic.cancel()
        for fut in self._connecting.values():
            fut.cancel()
        for conn in list(self._conns.values()):
            conn.close(ClientClosedError("client closed"))
        self._conns.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def add_metadata_listener(self, fn: Any) -> None:
        """``fn(metadata)`` is called after every successful refresh (on the loop)."""
        self._metadata_listeners.append(fn)

    async def _refresh_periodically(self) -> None:
        max_age = self.config["metadata.max.age.ms"] / 1000.0
        while not self._closed:
            wait = max(0.05, self.metadata.updated_at + max_age - time.monotonic())
            await asyncio.sleep(wait)
            try:
                await self.refresh_metadata()
            except KafkaError as e:
                log.debug("periodic metadata refresh failed: %s", e)
                await asyncio.sleep(self._retry.delay(1))

    # ------------------------------------------------------------------ connections
    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self.bootstrap[(-node_id - 1) % len(self.bootstrap)]
        b = self.metadata.brokers.get(node_id)
        if b is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return b.host, b.port

    def connected(self, node_id: int) -> bool:
        c = self._conns.get(node_id)
        return c is not None and not c.closed

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id`` (connecting first if needed; concurrent callers share it)."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise ClientClosedError("client closed")
        pending = self._connecting.get(node_id)
        if pending is None:
            pending = asyncio.get_running_loop().create_task(self._connect(node_id))
            self._connecting[node_id] = pending
            pending.add_done_callback(self._connect_done(node_id))
        return await asyncio.shield(pending)

    def _connect_done(self, node_id: int) -> Any:
        def done(_f: Any) -> None:
            self._connecting.pop(node_id, None)

        return done

    async def _connect(self, node_id: int) -> BrokerConnection:
        failures, retry_at = self._conn_failures.get(node_id, (0, 0.0))
        delay = retry_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        host, port = self._address(node_id)
        try:
            conn = await BrokerConnection.open(
                host, port, node_id,
                client_id=self.client_id,
                request_timeout_ms=self.config["request.timeout.ms"],
                max_response_bytes=self.config["max.response.bytes"],
                connect_timeout_ms=self.config["socket.connection.setup.timeout.ms"],
                security=self.security,
            )
        except (KafkaError, OSError) as e:
            self._conn_failures[node_id] = (failures + 1, time.monotonic() + self._reconnect.delay(failures))
            if isinstance(e, KafkaError):
                raise
            raise KafkaConnectionError(str(e)) from e
        self._conn_failures.pop(node_id, None)
        if self._closed:
            conn.close(ClientClosedError("client closed"))
            raise ClientClosedError("client closed")
        self._conns[node_id] = conn
        return conn

    def disconnect(self, node_id: int, error: Exception | None = None) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close(error)

    def known_nodes(self) -> list[int]:
        return sorted(self.metadata.brokers) or [-(i + 1) for i in range(len(self.bootstrap))]

    def least_loaded_node(self) -> int:
        """A broker to send cluster-wide requests to: a connected one with the fewest requests in flight."""
        nodes = self.known_nodes()
        best, best_load = None, None
        for n in nodes:
            c = self._conns.get(n)
            if c is not None and not c.closed:
                if best_load is None or c.in_flight < best_load:
                    best, best_load = n, c.in_flight
        if best is not None:
            return best
        now = time.monotonic()
        ready = [n for n in nodes if self._conn_failures.get(n, (0, 0.0))[1] <= now]
        return random.choice(ready or nodes)

    async def any_connection(self, timeout: float | None = None) -> BrokerConnection:
        """A connection to some broker, trying each known broker (then the bootstrap list) in turn."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Exception | None = None
        attempt = 0
        while True:
            first = self.least_loaded_node()
            order = [first] + [n for n in self.known_nodes() if n != first]
            if self.metadata.brokers:
                order += [-(i + 1) for i in range(len(self.bootstrap))]
            for n in order:
                try:
                    return await self.connection(n)
                except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                    last = e
                if self._closed:
                    raise ClientClosedError("client closed")
            if deadline is not None and time.monotonic() >= deadline:
                raise NoBrokersAvailable(f"no broker reachable (last error: {last})")
            await asyncio.sleep(self._reconnect.delay(attempt))
            attempt += 1

    async def request(self, node_id: int, api_key: int, body: Any, *, version: int | None = None,
                      timeout: float | None = None) -> Any:
        """Send ``body`` to ``node_id`` and await the response (connection errors propagate)."""
        conn = await self.connection(node_id)
        return await conn.request(api_key, body, version=version, timeout=timeout)

    async def request_any(self, api_key: int, body: Any, *, timeout: float | None = None) -> Any:
        conn = await self.any_connection(timeout)
        return await conn.request(api_key, body)

    # ------------------------------------------------------------------ metadata
    def request_update(self) -> None:
        """Mark the metadata stale: the next :meth:`refresh_metadata` caller (or the periodic task) refreshes."""
        self._refresh_requested = True
        if self._closed or (self._refresh is not None and not self._refresh.done()) or self._update_scheduled:
            return
        loop = asyncio.get_running_loop()
        # At most one refresh per retry.backoff.ms however often callers ask (missing topics, stale leaders),
        # and after failed refreshes not before their exponential backoff ends.
        wait = max(self.metadata.updated_at + self._retry.initial, self._refresh_retry_at) - time.monotonic()
        if wait > 0:
            self._update_scheduled = True
            loop.call_later(wait, self._scheduled_update)
        else:
            loop.create_task(self._quiet_refresh())

    def _scheduled_update(self) -> None:
        self._update_scheduled = False
        self.request_update()

    def track_topics(self, topics: Iterable[str]) -> None:
        """Follow these topics' metadata from now on. Topics the metadata does not hold yet are looked up at
        once: :meth:`request_update`'s pacing is for repeated failures, and would hold a consumer's first fetch
        of a newly assigned topic back by retry.backoff.ms."""
        new = set(topics) - self.tracked_topics
        self.tracked_topics.update(new)
        unknown = sorted(t for t in new if t not in self.metadata.topics)
        if unknown and not self._closed:
            asyncio.get_running_loop().create_task(self._quiet_refresh(unknown))
        else:
            self.request_update()

    async def _quiet_refresh(self, topics: Iterable[str] | None = None) -> None:
        """A refresh someone asked for in the background: one that fails is asked for again (after the failure
        backoff), as Kafka's clients keep an update requested until one succeeds. Without that, whoever waits for a
        refresh's listeners (a fetcher for a partition whose leader is unknown) would wait for the periodic refresh,
        metadata.max.age.ms later."""
        try:
            await self.refresh_metadata(topics)
        except asyncio.CancelledError as e:
            log.debug("metadata refresh failed: %s", e)
        except KafkaError as e:
            log.debug("metadata refresh failed, retried after a backoff: %s", e)
            self.request_update()

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               timeout: float | None = None) -> ClusterMetadata:
        """Fetch metadata for the tracked topics (plus ``topics``, which become tracked)."""
        if topics is not None:
            self.tracked_topics.update(topics)
        if self._refresh is not None and not self._refresh.done() and topics is None:
            return await asyncio.shield(self._refresh)
        if self._refresh is not None and not self._refresh.done():
            await asyncio.shield(self._refresh)
        fut: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_task(self._do_refresh(timeout))
        self._refresh = fut
        return await asyncio.shield(fut)

    async def _do_refresh(self, timeout: float | None) -> ClusterMetadata:
        self._refresh_requested = False
        try:
            return await self._refresh_once(timeout)
        except KafkaError:
            self._refresh_retry_at = time.monotonic() + self._retry.delay(self._refresh_failures)
            self._refresh_failures += 1
            raise

    async def _refresh_once(self, timeout: float | None) -> ClusterMetadata:
        deadline = time.monotonic() + (timeout if timeout is not None
                                       else self.config["request.timeout.ms"] / 1000.0)
        attempt = 0
        while True:
            try:
                conn = await self.any_connection(max(0.0, deadline - time.monotonic()))
                response = await self._metadata_request(conn)
                break
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                if self._closed:
                    raise ClientClosedError("client closed") from None
                if time.monotonic() >= deadline:
                    if isinstance(e, NoBrokersAvailable):
                        raise
                    raise KafkaTimeoutError(f"metadata refresh failed: {e}") from None
                await asyncio.sleep(self._retry.delay(attempt))
                attempt += 1
        self._refresh_failures = 0
        self._refresh_retry_at = 0.0
        self._apply_metadata(response)
        for fn in self._metadata_listeners:
            try:
                fn(self.metadata)
            except Exception:  # pragma: no cover - listener bugs must not break refreshes
                log.exception("metadata listener failed")
        return self.metadata

    async def _metadata_request(self, conn: BrokerConnection, topics: Iterable[str] | None = None,
                                all_topics: bool | None = None, allow_auto_create: bool | None = None,
                                authorized_operations: bool = False) -> Any:
        v = conn.version(ApiKey.METADATA)
        if all_topics is None:
            all_topics = self.track_all_topics
        if allow_auto_create is None:
            allow_auto_create = self.allow_auto_create_topics
        names = sorted(self.tracked_topics if topics is None else topics)
        body = Struct(
            topics=None if all_topics else [Struct(name=t) for t in names],
            allow_auto_topic_creation=allow_auto_create,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=authorized_operations,
        )
        if all_topics and v == 0:
            body = Struct(topics=[], allow_auto_topic_creation=allow_auto_create,
                          include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        return await conn.request(ApiKey.METADATA, body, version=v)

    async def fetch_metadata(self, topics: Iterable[str] | None, *, timeout: float | None = None,
                             authorized_operations: bool = False) -> Any:
        """A raw Metadata response for exactly ``topics`` (None = all topics), without changing tracking;
        ``authorized_operations``: with each topic's ``topic_authorized_operations`` (Metadata v8+)."""
        conn = await self.any_connection(timeout)
        return await self._metadata_request(conn, topics=topics or [], all_topics=topics is None,
                                            authorized_operations=authorized_operations)

    async def refresh_topics(self, topics: Iterable[str] | None, *, allow_auto_create: bool = False,
                             timeout: float | None = None) -> ClusterMetadata:
        """One Metadata request for exactly ``topics`` (None: every topic), without tracking them. The answer
        updates :attr:`metadata` (so requests to these topics' leaders follow it) and is returned as the broker
        gave it, without topics learnt earlier. ``allow_auto_create`` lets the broker create missing topics (what a
        producer's metadata lookup does)."""
        conn = await self.any_connection(timeout)
        response = await self._metadata_request(conn, topics=topics or [], all_topics=topics is None,
                                                allow_auto_create=allow_auto_create)
        return self._apply_metadata(response)

    def _apply_metadata(self, r: Any) -> ClusterMetadata:
        """Make the Metadata response ``r`` the current :attr:`metadata`; returns what ``r`` alone says."""
        md = ClusterMetadata()
        for b in r.brokers:
            md.brokers[b.node_id] = BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
        md.controller_id = getattr(r, "controller_id", -1)
        md.cluster_id = getattr(r, "cluster_id", None)
        for t in r.topics:
            if t.error_code and t.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                md.topic_errors[t.name] = t.error_code
                continue
            parts: dict[int, PartitionInfo] = {}
            for p in t.partitions:
                parts[p.partition_index] = PartitionInfo(
                    t.name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(getattr(p, "offline_replicas", ()) or ()),
                    p.error_code)
            if t.error_code == ErrorCode.LEADER_NOT_AVAILABLE and not parts:
                md.topic_errors[t.name] = t.error_code
                continue
            md.topics[t.name] = TopicInfo(t.name, getattr(t, "topic_id", None), bool(getattr(t, "is_internal", False)),
                                          parts, t.error_code)
        answered = dataclasses.replace(md, topics=dict(md.topics))
        if not self.track_all_topics:
            # Keep topics a partial refresh did not ask for.
            for name, info in self.metadata.topics.items():
                if name not in md.topics and name not in md.topic_errors and name not in self.tracked_topics:
                    md.topics[name] = info
        md.updated_at = time.monotonic()
        # Connections to brokers that left the cluster are closed.
        for node in list(self._conns):
            if node >= 0 and node not in md.brokers:
                self.disconnect(node)
        self.metadata = md
        answered.updated_at = md.updated_at
        return answered

    async def wait_for_topic(self, topic: str, timeout: float) -> TopicInfo:
        """Metadata of ``topic`` (refreshing until it has partitions with leaders, or ``timeout`` passes)."""
        deadline = time.monotonic() + timeout
        attempt = 0
        self.tracked_topics.add(topic)
        while True:
            info = self.metadata.topics.get(topic)
            if info is not None and info.partitions:
                return info
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                code = self.metadata.topic_errors.get(topic)
                if code is not None and code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     ErrorCode.LEADER_NOT_AVAILABLE):
                    raise for_code(code, f"topic {topic!r}")
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after {timeout * 1000:.0f} ms")
            if info is None or attempt:
                code = self.metadata.topic_errors.get(topic)
                if code is not None and code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     ErrorCode.LEADER_NOT_AVAILABLE):
                    raise for_code(code, f"topic {topic!r}")
            try:
                await self.refresh_metadata([topic], timeout=remaining)
            except KafkaTimeoutError:
                continue
            if topic in self.metadata.topics and self.metadata.topics[topic].partitions:
                continue
            await asyncio.sleep(min(max(0.0, deadline - time.monotonic()), self._retry.delay(attempt)))
            attempt += 1
