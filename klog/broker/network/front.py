"""The native front (``klog.network.native.front.enable``, issue 38): the event loop's side of
``klog._native.NativeFront``.

An idle plaintext connection (every request answered, nothing buffered, no SASL, no TLS) is handed to the front's
epoll thread (:meth:`Connection.to_front <klog.broker.network.connection.Connection>`): the event loop stops reading it and the thread reads it, cuts its frames and appends each Produce the native Produce
path serves without a decision of Python's (routed partitions, no producer id, acks=0/1, acks=all on an
unreplicated partition) with no event loop wake-up per request. The first frame it does not serve gives the
connection back: :meth:`FrontLink.on_ready` hands the bytes from that frame on to the connection, which reads the
socket again until it is idle once more (requests are answered in order throughout).

:meth:`FrontLink.on_ready`, one event loop wake-up for all the requests served since the last one, drives what the
Python path drives after its appends (the replica manager's high watermark, the followers' and consumers' wake-ups,
the metrics, a failed append's log dir and an acks=0 failure's close), then releases the answers it held, so a
Produce answered is visible to a Fetch as on Kafka. A request whose partitions all have one replica and are not
compacted is not held: the front moves their high watermarks itself (never past a transaction's first offset) and
answers at once, and wakes the event loop for it within its accounting interval (5 ms), or at once when a long poll
waits here for one of those partitions (``PartitionLog.high_watermark_waited``, :meth:`ReplicaManager.front_appended
<klog.broker.replication.manager.ReplicaManager.front_appended>`). :meth:`BrokerServer.stats` and a metrics snapshot
(both on the event loop) account what the front served first, so a client that read an answer finds it counted. The front serves nothing while a
client quota is set or requests are traced (:meth:`FrontLink.refresh`); a broker with an authorizer never starts
it.

Fetch (``klog.network.native.front.fetch.enable``): the front also serves a consumer's Fetch that the native Fetch
path serves without a decision of Python's (klog/broker/native_fetch.py): answered at once, or, a caught-up long poll,
parked in the native wait table, which answers it at ``max_wait_ms`` or when a high watermark moves, with no event
loop wake-up per request; :meth:`FrontLink.account_fetches` counts them (the front wakes the event loop for that at
most once a second or every 256 requests). A poll the table sends back to Python (a route forgotten, a session taken back) gives its
connection back with it, as does the next frame while it is still parked: the connection takes it back first.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from klog import _native
from klog.broker import errors, native_fetch
from klog.broker.handlers.produce import _rejections
from klog.protocol.framing import SMALL_FRAME_BYTES

if TYPE_CHECKING:
    import asyncio

    from klog.broker.context import BrokerState
    from klog.broker.metrics import BrokerMetrics

log = logging.getLogger("klog.broker.produce")

PRODUCE_KEY = 0
FETCH_KEY = 1
#: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit: a transactional producer's requests to its
#: transaction coordinator, which the front never serves. Handing their connection to the front after each answer
#: cost a front-thread read and an event-loop wake-up per request (about 3% of a transaction of 10 records and
#: 15% of the broker's CPU per transaction with confluent-kafka: docs/performance.md, "Transactions").
TXN_COORDINATOR_KEYS = frozenset({24, 25, 26, 28})


class Connection(Protocol):
    """What the front asks of a connection (klog.broker.network.connection.Connection)."""

    id: int

    def from_front(self, data: bytes, ended: bool, parked: tuple[int, bytes] | None) -> None: ...

    def close(self, reason: str | None = None, *, graceful: bool = False) -> None: ...


class FrontLink:
    """The broker's native front and the connections it holds."""

    def __init__(self, state: BrokerState, loop: asyncio.AbstractEventLoop, broker: Any) -> None:
        self.state = state
        self.loop = loop
        #: the server (its request counters, metrics, trace flag)
        self.broker = broker
        advertised = state.api_versions[PRODUCE_KEY]
        self.max_version = advertised[1]
        config = state.config
        fetch_routes = state.partitions.fetch_routes
        #: the front serves consumers' Fetch requests too (klog.network.native.front.fetch.enable)
        self.fetch = bool(config["klog.network.native.front.fetch.enable"]) and fetch_routes is not None \
            and FETCH_KEY in state.api_versions and config["klog.fetch.native.wait.max.parked"] > 0
        fetch_args: dict[str, Any] = {}
        if self.fetch:
            fetch_args = {"fetch_routes": fetch_routes, "fetch_max_version": state.api_versions[FETCH_KEY][1],
                          "fetch_max_bytes": config["fetch.max.bytes"]}
        # frames up to the small-frame bound are read into each connection's buffer; a Produce up to
        # klog.network.native.front.frame.max.bytes into one of its own (within klog.network.native.front.buffer.max.bytes);
        # other frames, with the bytes after them, go to the event loop (whose read buffer holds what the front gives back)
        limits = broker.limits
        self.native: Any = _native.NativeFront(state.partitions.native_routes, max_version=advertised[1],
                                               buffer_bytes=SMALL_FRAME_BYTES + 4,
                                               max_queued_bytes=limits.max_buffered_bytes,
                                               max_frame_bytes=limits.front_max_frame_bytes,
                                               max_held_bytes=limits.front_max_held_bytes,
                                               account_interval_ms=config["klog.network.native.front.account.interval.ms"],
                                               **fetch_args)
        #: connections the front gave back (at a frame it does not serve, or at their end)
        self.handoffs = 0
        #: panics the front's thread caught (each closed the connection it was serving)
        self.faults = 0
        #: connection id -> the connection, while the front reads it
        self.connections: dict[int, Connection] = {}
        loop.add_reader(self.native.notify_fd, self.on_ready)
        # a client quota set by an image (AlterClientQuotas through any broker or listener) stops the front at
        # once, not at the next Produce it accounts: it serves held consumers' fetches unthrottled otherwise
        state.after_publish.append(self.refresh)

    @staticmethod
    def available(state: BrokerState) -> bool:
        """Whether this build and broker can run a native front (the native Produce path on, no authorizer)."""
        return hasattr(_native, "NativeFront") and state.partitions.native_routes is not None \
            and PRODUCE_KEY in state.api_versions and state.access is None

    def refresh(self) -> bool:
        """Whether the front may serve requests now (no client quota, no request tracing); tells the front."""
        allowed = not self.broker.trace_requests and not self.state.quotas.refresh()
        native = self.native
        if native.enabled != allowed:
            native.enabled = allowed
        if self.fetch:
            native.fetch_max_bytes = self.state.config["fetch.max.bytes"]
        return allowed

    def declines(self, data: bytes) -> bool:
        """Whether ``data`` (the bytes the front gave back) starts with a request that says its connection's next
        request would most likely be given back too: a Produce the front never serves (a transactional
        producer's), or a transactional producer's request to its transaction coordinator
        (TXN_COORDINATOR_KEYS: the front serves none of them, and such a connection, librdkafka's to its
        coordinator, carries one or two of them every transaction)."""
        if len(data) < 6:
            return False
        key = int.from_bytes(data[4:6], "big")
        if key == PRODUCE_KEY:
            return _native.front_declines(data[4:], self.max_version)   # type: ignore[no-any-return]
        return key in TXN_COORDINATOR_KEYS

    def hold(self, conn: Connection, fd: int, queue: Any, *, fetch: bool = False,
             parked: tuple[int, Any] | None = None) -> bool:
        """Let the front read ``conn``; ``fetch``: and park its caught-up long polls (it sends with sendfile);
        ``parked``: (park id, frame) of its long poll parked in the native wait table, the front's from now on.
        False (not held): the table sent that one back already, the connection serves it."""
        if not self.native.register(conn.id, fd, queue, fetch=fetch and self.fetch, parked=parked):
            return False
        self.connections[conn.id] = conn
        return True

    def drop(self, conn: Connection) -> None:
        """``conn`` closed: the front stops reading it."""
        if self.connections.pop(conn.id, None) is not None:
            self.native.unregister(conn.id)

    def idle_seconds(self, conn: Connection) -> float | None:
        return self.native.idle_seconds(conn.id)   # type: ignore[no-any-return]

    def account_fetches(self) -> None:
        """Count the Fetch requests the front answered or parked and what the wait table answered since the last
        call."""
        if not self.fetch:
            return
        broker = self.broker
        parked = self.native.take_fetches()
        if parked:
            broker.requests_handled += parked
            broker.native_fetch_requests += parked
            broker.native_front_fetches += parked
        native_fetch.drain_answered(self.state, broker, broker.metrics)

    def on_ready(self) -> None:
        """Account what the front did, release its answers, then give back the connections it handed back. Whatever
        the accounting raises, the answers leave and the hand-offs are taken (else those connections would stay
        paused, never read again)."""
        native = self.native
        self._close_faulted(native.take_faults())
        requests, latencies_ms, partitions, produced, failures, handoffs = native.take()
        try:
            self.account_fetches()
            if requests:
                self._account(requests, latencies_ms, partitions, produced)
        finally:
            native.release()
            try:
                for failure in failures:   # after the answers: an acks=0 failure's close sends them first
                    self._failed(*failure)
                if requests:
                    self.refresh()
            finally:
                self._take_back(handoffs)

    def _account(self, requests: int, latencies_ms: list[float], partitions: list[tuple[str, int]],
                 produced: list[tuple[str, int, int, int]]) -> None:
        state = self.state
        broker = self.broker
        broker.requests_handled += requests
        broker.native_produce_requests += requests
        broker.native_front_requests += requests
        replicas = state.replicas
        for topic, partition in partitions:
            replicas.front_appended(topic, partition)
        metrics: BrokerMetrics | None = broker.metrics
        if metrics is not None:
            for topic, nbytes, records, batches in produced:
                metrics.produced_many(topic, nbytes, records, batches)
            metrics.requests_done(PRODUCE_KEY, latencies_ms)

    def _take_back(self, handoffs: list[tuple[int, bytes, bool, tuple[int, bytes] | None]]) -> None:
        connections = self.connections
        self.handoffs += len(handoffs)
        for conn_id, data, ended, parked in handoffs:
            conn = connections.pop(conn_id, None)
            if conn is None:
                if parked is not None:   # closed meanwhile: its long poll leaves the wait table
                    self.state.partitions.fetch_routes.take_back(parked[0])
                continue
            try:
                conn.from_front(data, ended, parked)
            except Exception:   # one connection's failure must not lose the others' hand-offs
                log.exception("closing connection %d after an internal error", conn_id)
                conn.close()

    def _close_faulted(self, faults: list[tuple[int | None, str]]) -> None:
        """Panics the front's thread caught: each connection it was serving (dropped by the front, in whatever state
        the panic left it) is closed; the front goes on serving the others."""
        for conn_id, message in faults:
            self.faults += 1
            log.error("native front: internal error serving connection %s: %s", conn_id, message)
            conn = self.connections.pop(conn_id, None) if conn_id is not None else None
            if conn is not None:
                conn.close(f"internal error in the native front: {message}")

    def _failed(self, conn_id: int, acks: int, client_id: str | None, topic: str, partition: int, code: int,
                message: str, errno_: int | None, log_dir: str) -> None:
        """A failed append of the front's, as :func:`klog.broker.native_produce.account` treats one."""
        if code == errors.KAFKA_STORAGE_ERROR:
            exc = OSError(errno_, message) if errno_ is not None else OSError(message)
            self.state.partitions.note_log_write_failure(topic, partition, exc, log_dir=log_dir)
            log.error("append to %s-%d failed: %s", topic, partition, message)
        elif code == errors.CORRUPT_MESSAGE:
            _rejections.log(topic, partition, code, message, client_id)
        if acks == 0:   # as Kafka closes it; the front gave the connection back after this request
            conn = self.connections.get(conn_id)
            reason = f"acks=0 produce failed ({topic}-{partition}: error {code}) (client {client_id!r})"
            if conn is not None:
                conn.close(reason, graceful=True)

    def close(self) -> None:
        self.loop.remove_reader(self.native.notify_fd)
        self.native.close()
        self.connections.clear()
