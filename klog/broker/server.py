"""The broker process's server: its state, its listeners and connections (klog.broker.network), maintenance.

``BrokerServer`` wires the pieces: the broker state (partitions, replicas, coordinators, metadata: made and wired
by :class:`klog.broker.context.BrokerState` itself, each part given its dependencies at construction), the request
handlers and the versions it advertises, the network front (:mod:`klog.broker.network`: listeners and connection
limits, framing, request memory, the in-order response pipeline, zero-copy sends), the metrics listener, and the
maintenance pass (retention, checkpoints, idle connections).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from klog._native import release_free_heap
from klog.broker import native_produce
from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.broker.groups import GroupCoordinator
from klog.broker.groups.api import GROUP_API_KEYS
from klog.broker.handlers.share import SHARE_DATA_API_KEYS, close_share_sessions_of
from klog.broker.handlers import Handler, RequestContext
from klog.broker.handlers.catalog import load_all
from klog.broker.metrics import BrokerMetrics, MetricsListener, parse_listener
from klog.broker.network.connection import Connection
from klog.broker.network.front import FrontLink
from klog.broker.network.limits import Limits
from klog.broker.network.listener import Acceptor
from klog.broker.network.request_memory import RequestAdmission
from klog.broker.network.writer import SendPaths

if TYPE_CHECKING:
    from klog.controller.describe_quorum import ControllerListener

log = logging.getLogger("klog.broker.server")

#: how often the maintenance thread hands the C heap's free pages back to the kernel (glibc keeps what start-up
#: and a burst of traffic freed resident otherwise); a pass takes about 0.1 ms on a broker's heap
HEAP_RELEASE_EVERY_S = 10.0


def advertised_versions(handlers: Mapping[int, Handler], coordinator_apis: Mapping[int, tuple[int, int]]
                        ) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) to advertise: each handler's range within the codec's, the group APIs within what the
    group coordinator supports (ShareFetch, ShareAcknowledge and WriteShareGroupState with the share group APIs
    only)."""
    from klog.protocol import versions

    table: dict[int, tuple[int, int]] = {}
    for api_key, entry in handlers.items():
        lo, hi = entry.min_version, entry.max_version
        if api_key in SHARE_DATA_API_KEYS and 76 not in coordinator_apis:
            continue   # ShareFetch/ShareAcknowledge and the share-state RPCs: with the share group APIs only
        if api_key in GROUP_API_KEYS:
            if api_key not in coordinator_apis:
                continue
            lo, hi = max(lo, coordinator_apis[api_key][0]), min(hi, coordinator_apis[api_key][1])
        try:
            codec_lo, codec_hi = versions(api_key)
        except Exception:
            continue
        lo, hi = max(lo, codec_lo), min(hi, codec_hi)
        if lo <= hi:
            table[api_key] = (lo, hi)
    return dict(sorted(table.items()))


#: GetTelemetrySubscriptions, PushTelemetry: advertised only with the Prometheus endpoint, their receiver
TELEMETRY_API_KEYS = (71, 72)


class BrokerServer:
    """Owns the broker state, the listeners and all connections. ``await start()``, ``await stop()``."""

    def __init__(self, config: BrokerConfig, controller: Any = None, *,
                 controller_listener: ControllerListener | None = None,
                 failed_log_dirs: Mapping[str, str] | None = None) -> None:
        """``controller``: the node's ControllerNode (or MetadataObserver) on a multi-node quorum (see BrokerState);
        ``controller_listener``: a combined node's controller listener (its broker answers DescribeQuorum);
        ``failed_log_dirs``: the log dirs whose meta.properties could not be read at startup (see BrokerState)."""
        self.config = config
        self.controller = controller
        self.controller_listener = controller_listener
        self.failed_log_dirs = failed_log_dirs
        self.limits = Limits(config)
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.state: BrokerState = None  # type: ignore[assignment]
        self._started = False
        self._tasks: list[asyncio.Task[None]] = []
        #: the maintenance pass's flush/checkpoint running on a worker thread, if any
        self._maintenance_io: asyncio.Future[float | None] | None = None
        self.handlers = load_all()
        #: api key -> (min, max) this broker advertises in ApiVersions (and accepts)
        self.api_versions = advertised_versions(self.handlers, GroupCoordinator.supported_apis(config))
        if not config["klog.metrics.listener"]:
            # KIP-714: as Kafka without a ClientTelemetryReceiver, no telemetry APIs when nothing receives them
            for api_key in TELEMETRY_API_KEYS:
                self.api_versions.pop(api_key, None)
        self.requests_handled = 0
        #: Produce requests the native path served (klog/broker/native_produce.py), counted in requests_handled too
        self.native_produce_requests = 0
        self._produce_checks: native_produce.ProduceChecks | None = None
        #: Fetch requests the native path served (klog/broker/native_fetch.py), counted in requests_handled too
        self.native_fetch_requests = 0
        #: of those, incremental fetches of a fetch session (KIP-227)
        self.native_fetch_session_requests = 0
        #: of the native Produce path's requests, those the native front served without the event loop
        self.native_front_requests = 0
        #: of the native Fetch path's requests, those the native front answered or parked without the event loop
        self.native_front_fetches = 0
        #: Prometheus counters, kept only when klog.metrics.listener is set (None: no per-request cost)
        self.metrics: BrokerMetrics | None = BrokerMetrics() if config["klog.metrics.listener"] else None
        self.metrics_listener: MetricsListener | None = None
        #: the listeners and every connection they accepted (max.connections, ...)
        self.acceptor = Acceptor(config, self.limits, self.metrics)
        #: bytes of requests held across all connections (queued.max.request.bytes)
        self.request_admission = RequestAdmission(self.limits.max_queued_request_bytes,
                                                  on_exhausted=self.acceptor.release_idle_buffers)
        #: how responses leave: the native writer thread, sendfile, copies (and their counters)
        self.sends = SendPaths(config)
        #: the native front reading idle plaintext connections (klog.network.native.front.enable; None: off)
        self.front: FrontLink | None = None

    @property
    def trace_requests(self) -> bool:
        """Log every request at DEBUG: klog.broker.server's level, read per request (IncrementalAlterConfigs of
        the BROKER_LOGGER resource changes it at runtime, klog/metadata/loggers.py)."""
        return log.isEnabledFor(logging.DEBUG)

    def _front_stats(self) -> dict[str, int]:
        """The native front's hand-backs, large frames (frames over its 64 KiB read buffer), held bytes and the
        panics its thread caught (each closed the connection it was serving)."""
        front = self.front
        if front is None:
            return {"native_front_handoffs": 0, "native_front_large_frames": 0, "native_front_held_bytes": 0,
                    "native_front_held_bytes_peak": 0, "native_front_faults": 0}
        held, peak = front.native.held_bytes
        return {"native_front_handoffs": front.handoffs, "native_front_large_frames": front.native.large_frames,
                "native_front_held_bytes": held, "native_front_held_bytes_peak": peak,
                "native_front_faults": front.faults}

    def produce_checks(self) -> native_produce.ProduceChecks:
        """The native Produce path's checks (closures over the broker state), made by the first connection that
        takes the native path and shared by all."""
        if self._produce_checks is None:
            self._produce_checks = native_produce.produce_checks(self.state)
        return self._produce_checks

    def _new_connection(self, listener_name: str) -> Connection:
        return Connection(listener_name, self, self.acceptor, self.request_admission, self.sends)

    def stats(self) -> dict[str, int]:
        """Counters of this broker's network front (for tests, benchmarks and operators)."""
        # what the front served and the event loop has not accounted yet (its answers may have left: it is
        # accounted within klog.network.native.front.account.interval.ms), accounted now, so a client that read an
        # answer finds its request counted. Runs on the event loop (klog.Broker.stats takes it there).
        if self.front is not None:
            self.front.on_ready()
        memory = self.request_admission.memory
        sends = self.sends
        return {"connections": len(self.acceptor.connections), "requests_handled": self.requests_handled,
                "native_produce_requests": self.native_produce_requests,
                "native_fetch_requests": self.native_fetch_requests,
                "native_fetch_session_requests": self.native_fetch_session_requests,
                "native_front_requests": self.native_front_requests,
                "native_front_fetches": self.native_front_fetches,
                "native_front_connections": 0 if self.front is None else len(self.front.connections),
                **self._front_stats(),
                "metadata_kept_answers": 0 if self.state is None or self.state.metadata_answers is None
                else self.state.metadata_answers.hits,
                "heartbeat_fast_answers": 0 if self.state is None or self.state.heartbeat_answers is None
                else self.state.heartbeat_answers.hits,
                **self._fetch_wait_stats(),
                "request_bytes_held": memory.held, "request_bytes_peak": memory.peak,
                "refused_connections": self.acceptor.refused_connections, "sendfile_bytes": sends.sendfile_bytes,
                "sendfile_responses": sends.sendfile_responses, "fetch_copied_bytes": sends.fetch_copied_bytes,
                "fetch_copied_responses": sends.fetch_copied_responses}

    def _fetch_wait_stats(self) -> dict[str, int]:
        """The native Fetch path's wait table (klog/broker/native_fetch.py): long polls parked now, answered after
        a wake-up or at their deadline, sent back to the Python path, refused (the table full)."""
        routes = None if self.state is None else self.state.partitions.fetch_routes
        if routes is None:
            return {}
        parked, woken, expired, returned, refused = routes.wait_stats()
        return {"native_fetch_parked": parked, "native_fetch_wait_woken": woken, "native_fetch_wait_expired": expired,
                "native_fetch_wait_returned": returned, "native_fetch_wait_refused": refused}

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        started = time.monotonic()
        self.acceptor.raise_fd_limit()
        # Bind first, serve last: a port in use fails the start before any data directory is created.
        await self.acceptor.bind(self.loop, self._new_connection)
        # the state is made after the bind: an advertised port 0 is the port bound (an endpoint is never port 0)
        bound_ports = {listener.name: port for listener, (_, port) in zip(self.config.listeners, self.acceptor.bound)}
        try:
            self.state = BrokerState(self.config, self.loop, self.controller, metrics=self.metrics,
                                     api_versions=self.api_versions, controller_listener=self.controller_listener,
                                     bound_ports=bound_ports, failed_log_dirs=self.failed_log_dirs)
        except OSError as exc:
            where = exc.filename or ",".join(self.config.log_dirs)
            raise RuntimeError(f"log.dirs: cannot use the data directory {where}: "
                               f"{exc.strerror or exc}") from None
        assert all(port > 0 for _, port in self.state.endpoints.values()), self.state.endpoints
        state = self.state
        self.acceptor.follow_dynamic_ssl(self.config.node_id, lambda: state.metadata.image.configs)
        self.acceptor.connection_quotas.quotas_of = lambda: state.metadata.image.client_quotas
        self.acceptor.connection_quotas.configs_of = lambda: state.metadata.image.configs
        self.acceptor.on_closed.append(lambda connection_id: close_share_sessions_of(state, connection_id))
        if self.state.forwarder is not None:   # a quorum member's broker forwards controller requests to the leader
            from klog.broker.forwarding import forwarding_handlers

            self.handlers = forwarding_handlers(self.handlers, self.state.forwarder)
        self.sends.start(self.loop)
        if self.config["klog.network.native.front.enable"] and self.sends.socket_writer is not None \
                and FrontLink.available(self.state):
            self.front = FrontLink(self.state, self.loop, self)
        await self.state.coordinator.start()
        await self.state.transactions.start()
        if self.controller is not None:
            # A quorum member registers with the active controller (its bound ports known) and, as a Kafka
            # broker, serves clients only once unfenced: before that its Metadata would list no broker.
            self.state.metadata.start_lifecycle()
            await self.state.metadata.wait_until_unfenced()
        await self.acceptor.start_serving()
        self.state.replicas.start()
        self.state.partitions.moves.resume()   # moves between log dirs the last stop interrupted
        self._tasks.append(self.loop.create_task(self._maintenance()))
        # share.coordinator.state.topic.prune.interval.ms: __share_group_state's superseded records deleted
        self._tasks.append(self.loop.create_task(self.state.share_partitions.store.prune_forever()))
        # share.coordinator.cold.partition.snapshot.interval.ms: idle share-partitions snapshotted again
        self._tasks.append(self.loop.create_task(self.state.share_partitions.store.snapshot_cold_forever()))
        # delegation.token.expiry.check.interval.ms: the active controller removes expired tokens
        self._tasks.append(self.loop.create_task(self.state.controller_apis.expire_tokens_forever()))
        if self.metrics is not None:
            address = self.config["klog.metrics.listener"]
            host, port = parse_listener(address)
            try:
                self.metrics_listener = MetricsListener(self, host, port)
            except OSError as exc:
                raise OSError(exc.errno, f"klog.metrics.listener={address}: {exc.strerror}") from exc
            log.info("metrics on http://%s:%d/metrics (klog.metrics.listener)", *self.metrics_listener.address)
        slice_us = self.config["klog.event.loop.slice.us"]
        if slice_us:
            from klog.broker.sched import request_slice

            problem = request_slice(slice_us)
            if problem:
                log.warning("klog.event.loop.slice.us=%d not applied: %s", slice_us, problem)
            else:
                log.info("event-loop thread asks for a %d us scheduler slice", slice_us)
        # What start-up made (modules, codecs, the metadata image) lives as long as the broker: frozen out of the
        # cyclic GC's generations, a full collection no longer scans it and stalls the event loop for it (13-17 ms
        # with ~36,000 objects during an e2e run, 0.3-0.5 ms frozen)
        gc.collect()
        gc.freeze()
        log.info("cyclic GC: %d start-up objects frozen", gc.get_freeze_count())
        self._started = True
        log.info("klog-broker started in %.0f ms: node %d, cluster %s, listening on %s, advertised as %s:%d, "
                 "data in %s", (time.monotonic() - started) * 1000, self.state.node_id, self.state.cluster_id,
                 ", ".join(f"{lst.name}://{h}:{p}" for lst, (h, p) in zip(self.config.listeners, self.acceptor.bound)),
                 self.state.host, self.state.port, ",".join(self.config.log_dirs))
        if log.isEnabledFor(logging.DEBUG):
            from klog.broker.config import BROKER_KEYS

            log.debug("effective config: %s", ", ".join(
                f"{key}={BROKER_KEYS[key].format(value)}" for key, value in sorted(self.config.items())
                if not BROKER_KEYS[key].sensitive))
        ignored = self.config.ignored_keys()
        if ignored:
            log.info("config keys accepted for Kafka compatibility but without effect in klog: %s",
                     ", ".join(ignored))

    async def _maintenance(self) -> None:
        """Retention, checkpoints, producer-id expiry and idle-connection sweeps."""
        config = self.config
        retention_every = config["log.retention.check.interval.ms"] / 1000
        checkpoint_every = config["log.flush.offset.checkpoint.interval.ms"] / 1000
        next_retention = time.monotonic() + min(retention_every, config["log.initial.task.delay.ms"] / 1000)
        next_checkpoint = time.monotonic() + checkpoint_every
        next_heap_release = time.monotonic()   # the first pass gives back what start-up left
        tick = 1.0
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            try:
                if now >= next_retention:
                    next_retention = now + retention_every
                    removed = self.state.partitions.apply_retention()
                    if removed:
                        log.info("retention removed %d segment(s)", removed)
                    self.state.producers.expire(int(time.time() * 1000))
                    self.state.prune_aborted_transactions()
                self.state.metadata.maybe_snapshot()   # metadata.log.max.snapshot.interval.ms
                checkpoint_due = now >= next_checkpoint
                if checkpoint_due:
                    next_checkpoint = now + checkpoint_every
                heap_release_due = now >= next_heap_release
                if heap_release_due:
                    next_heap_release = now + HEAP_RELEASE_EVERY_S
                # fsyncs (due flushes, checkpoint files) run on a worker thread (the native calls release the
                # GIL): on a busy disk one takes tens of ms, and every connection would wait on the loop.
                self._maintenance_io = asyncio.ensure_future(
                    asyncio.to_thread(self._flush_and_checkpoint, checkpoint_due, heap_release_due))
                flush_s = await asyncio.shield(self._maintenance_io)
                self._maintenance_io = None
                if flush_s is not None and self.metrics is not None:
                    self.metrics.flush_time_ms.observe(flush_s * 1000)
                if checkpoint_due:
                    self.state.save_producer_state()
            except Exception:
                log.exception("maintenance pass failed")
            self.acceptor.sweep(now)

    def _flush_and_checkpoint(self, checkpoint: bool, release_heap: bool) -> float | None:
        """Returns how long the flush took when it fsynced at least one log (the flush-time metric)."""
        partitions = self.state.partitions
        started = time.perf_counter()
        flushed = partitions.flush_due()
        flush_s = time.perf_counter() - started if flushed else None
        if checkpoint:
            partitions.checkpoint()
        if release_heap:
            release_free_heap()
        return flush_s

    async def stop(self) -> None:
        if self._started and self.controller is not None:   # still serving while the controller moves leaders
            await self.state.metadata.controlled_shutdown()
        if self.metrics_listener is not None:
            # its thread waits on this loop for snapshots: stop it while the loop still runs
            await asyncio.to_thread(self.metrics_listener.close)
            self.metrics_listener = None
        self.acceptor.stop_accepting()
        for task in self._tasks:
            task.cancel()
        if self._maintenance_io is not None:
            # a checkpoint being written on a worker thread must finish before close() writes the final one
            try:
                await self._maintenance_io
            except Exception:
                log.exception("maintenance pass failed")
            self._maintenance_io = None
        self.acceptor.close_connections()
        await self.acceptor.wait_closed()
        if self.front is not None:
            self.front.close()
            self.front = None
        self.sends.stop()
        if self.state is not None and self.state.partitions.parked_fetches is not None:
            self.state.partitions.parked_fetches.stop()
        if self.state is not None:
            self.state.metadata.stop_publishing()   # no partition is opened or moved while they close
            await self.state.metadata.wait_files_made()
            try:
                await self.state.replicas.stop()
            except Exception:
                log.exception("replica manager failed to stop cleanly")
            if self.state.transactions is not None:
                try:
                    await self.state.transactions.stop()
                except Exception:
                    log.exception("transaction coordinator failed to stop cleanly")
            if self.state.coordinator is not None:
                try:
                    await self.state.coordinator.stop()
                except Exception:
                    log.exception("group coordinator failed to stop cleanly")
            self.state.close()
        if self._started:  # nothing to report after a start that failed
            log.info("klog-broker stopped")
