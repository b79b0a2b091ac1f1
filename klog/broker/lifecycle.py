"""The broker's side of its lifecycle with the active controller: Kafka's ``BrokerLifecycleManager``, sans-IO.

A pure state machine (no sockets, no clock, no asyncio): the driver asks :meth:`BrokerLifecycleManager.next_request`
what to send now, sends it to the active controller, and feeds back :meth:`on_response` (the decoded
BrokerRegistrationResponse / BrokerHeartbeatResponse) or :meth:`on_failure` (no connection, NOT_CONTROLLER, a
timeout); it sleeps until :meth:`next_wakeup_ms`. States (:class:`LifecycleState`) are Kafka's ``BrokerState``
(same numbers, as its BrokerState metric shows them):

    NOT_RUNNING -start-> STARTING (registering, then heartbeating with WantFence until the controller says the
    broker caught up to its registration) -> RECOVERY (logs recovered? the driver calls set_ready_to_unfence;
    heartbeats then ask to be unfenced) -> RUNNING (unfenced; a heartbeat every broker.heartbeat.interval.ms)
    -SIGTERM-> PENDING_CONTROLLED_SHUTDOWN (heartbeats carry WantShutDown while the controller moves leaders away)
    -ShouldShutDown-> SHUTTING_DOWN (the broker may close its listeners and exit).

A controlled shutdown asked for before RUNNING goes straight to SHUTTING_DOWN (nothing to move), as in Kafka.
Failed requests are retried with Kafka's exponential backoff (100 ms doubling up to half the session timeout,
2 % jitter). A heartbeat answered STALE_BROKER_EPOCH (the controller holds another registration for this node,
or none) makes the broker register again with the same incarnation id and take the new epoch: Kafka's broker
resends its registration when its image shows it is no longer registered under its epoch.

Where it runs: :class:`klog.broker.lifecycle_driver.LifecycleDriver` is the IO edge (one klog client connection
to the controller listener of the leader the node's Raft member knows, rotating through the controllers while
none is known or on failure or NOT_CONTROLLER;
tests/test_broker_lifecycle_wire.py runs one scenario through it against Apache Kafka's controller and against
ClusterControlManager behind a test listener). On a combined node of a quorum,
:meth:`klog.broker.cluster_metadata.ClusterMetadata.start_lifecycle` starts the driver once the server bound its
listeners, with the controller listeners of ``controller.quorum.voters``; every applied batch feeds
``set_metadata_offset``; logs are recovered before the server starts, so it is ready to unfence at once. SIGTERM
(``BrokerServer.stop``) runs :meth:`~klog.broker.cluster_metadata.ClusterMetadata.controlled_shutdown` before the
listeners close. The controller's side is :mod:`klog.controller.broker_service`;
tests/test_controller_quorum_lifecycle.py runs both as real processes.
"""

from __future__ import annotations

import enum
import logging
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.protocol.struct import field_of

__all__ = [
    "BROKER_HEARTBEAT_INTERVAL_MS",
    "BROKER_SESSION_TIMEOUT_MS",
    "CONTROLLED_SHUTDOWN_TIMEOUT_MS",
    "CONTROLLER_REQUEST_TIMEOUT_MS",
    "BrokerLifecycleManager",
    "LifecycleRequest",
    "LifecycleState",
    "Listener",
]

log = logging.getLogger("klog.broker.lifecycle")

#: ``broker.heartbeat.interval.ms`` and ``broker.session.timeout.ms`` defaults (Kafka's).
BROKER_HEARTBEAT_INTERVAL_MS = 2000
BROKER_SESSION_TIMEOUT_MS = 9000
#: A request to the controller unanswered this long counts as failed (``controller.quorum.request.timeout.ms``).
CONTROLLER_REQUEST_TIMEOUT_MS = 2000
#: How long a controlled shutdown may wait for the controller before the broker exits anyway (Kafka's broker
#: waits 5 minutes for the controlled-shutdown future).
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 300_000
#: Kafka's resend backoff: ExponentialBackoff(100 ms, x2, session timeout / 2, jitter 0.02).
RETRY_BACKOFF_INITIAL_MS = 100
RETRY_BACKOFF_JITTER = 0.02
#: After the caught-up heartbeat Kafka heartbeats again after 10 ms (a broker with no recovery to do starts
#: sooner); after the first answer to a controlled shutdown, after 50 ms.
CAUGHT_UP_NEXT_HEARTBEAT_MS = 10
CONTROLLED_SHUTDOWN_FIRST_RETRY_MS = 50


class LifecycleState(enum.IntEnum):
    """Kafka's ``org.apache.kafka.metadata.BrokerState``: the broker's lifecycle state (not to be confused with
    ``klog.broker.context.BrokerState``, the state handlers reach)."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


@dataclass(frozen=True)
class LifecycleRequest:
    """One request for the active controller: ``body`` holds every field of the newest version."""

    request_id: int
    api_key: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Listener:
    """One listener the broker registers (RegisterBrokerRecord.EndPoints)."""

    name: str
    host: str
    port: int
    security_protocol: int = 0


class BrokerLifecycleManager:
    """One broker process's registration and heartbeats. ``listeners`` / ``features``: what it registers with
    (``features`` as (name, min, max) levels); ``incarnation_id`` is new for every process start."""

    def __init__(self, node_id: int, cluster_id: str, incarnation_id: uuid.UUID, listeners: Sequence[Listener],
                 features: Sequence[tuple[str, int, int]], *, rack: str | None = None,
                 log_dirs: Sequence[uuid.UUID] = (), heartbeat_interval_ms: int = BROKER_HEARTBEAT_INTERVAL_MS,
                 session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS,
                 request_timeout_ms: int = CONTROLLER_REQUEST_TIMEOUT_MS,
                 controlled_shutdown_timeout_ms: int = CONTROLLED_SHUTDOWN_TIMEOUT_MS,
                 previous_broker_epoch: int = -1, rng: random.Random | None = None) -> None:
        """``previous_broker_epoch``: the epoch the last process left in its clean-shutdown files
        (klog.broker.clean_shutdown), -1 after a crash: the controller keeps a cleanly restarted broker's ELR
        memberships (KIP-966)."""
        assert heartbeat_interval_ms > 0 and session_timeout_ms > 0, (heartbeat_interval_ms, session_timeout_ms)
        assert request_timeout_ms > 0 and controlled_shutdown_timeout_ms > 0
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.incarnation_id = incarnation_id
        self.listeners = tuple(listeners)
        self.features = tuple(features)
        self.rack = rack
        self.log_dirs = tuple(log_dirs)
        #: the directory ids of this broker's log dirs that failed (KIP-858), sent in every heartbeat
        self.offline_log_dirs: tuple[uuid.UUID, ...] = ()
        #: the directory ids of its cordoned log dirs (KIP-1066), sent in every heartbeat from metadata.version
        #: 4.3-IV0 (None before: the field is left out, as Kafka's broker leaves it out)
        self.cordoned_log_dirs: tuple[uuid.UUID, ...] | None = None
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.controlled_shutdown_timeout_ms = controlled_shutdown_timeout_ms
        self.max_backoff_ms = max(RETRY_BACKOFF_INITIAL_MS, session_timeout_ms // 2)
        self.rng = rng if rng is not None else random.Random()
        self.previous_broker_epoch = previous_broker_epoch

        self.state = LifecycleState.NOT_RUNNING
        self.registered = False
        #: the epoch of this broker's registration (-1: not registered yet)
        self.broker_epoch = -1
        #: the highest metadata offset this broker has applied (the driver keeps it current)
        self.metadata_offset = -1
        self.ready_to_unfence = False
        #: what the controller said in its last heartbeat answer
        self.fenced_by_controller = True
        #: the last error the controller answered, (code, name), for the driver to log; None after a success
        self.last_error: tuple[int, str] | None = None
        #: why the broker reached SHUTTING_DOWN
        self.shutdown_reason: str | None = None
        self.failed_attempts = 0
        self._next_send_ms: int | None = None
        self._in_flight: LifecycleRequest | None = None
        self._in_flight_deadline_ms = 0
        self._next_request_id = 0
        self._shutdown_deadline_ms: int | None = None
        self._got_controlled_shutdown_answer = False

    # ---- inputs from the broker -----------------------------------------------------------------------------

    def start(self, now_ms: int) -> None:
        assert self.state is LifecycleState.NOT_RUNNING, self.state
        self.state = LifecycleState.STARTING
        self._next_send_ms = now_ms

    def set_metadata_offset(self, offset: int) -> None:
        self.metadata_offset = max(self.metadata_offset, offset)

    def set_ready_to_unfence(self, now_ms: int) -> None:
        """Logs are recovered and the image caught up: heartbeats now ask to be unfenced, the next one at once."""
        if not self.ready_to_unfence:
            self.ready_to_unfence = True
            self._schedule(now_ms)

    def set_offline_log_dirs(self, dirs: Sequence[uuid.UUID], now_ms: int) -> None:
        """Log dirs failed (Kafka's ``propagateDirectoryFailure``): the next heartbeat, sent at once, names them so
        that the controller moves the leaderships of their replicas."""
        new = tuple(sorted(set(self.offline_log_dirs) | set(dirs)))
        if new != self.offline_log_dirs:
            self.offline_log_dirs = new
            log.warning("broker %d: reporting offline log dir(s) %s to the controller", self.node_id,
                        ", ".join(str(d) for d in new))
            self._schedule(now_ms)

    def set_cordoned_log_dirs(self, dirs: Sequence[uuid.UUID], now_ms: int) -> bool:
        """The cordoned log dirs changed (Kafka's ``propagateDirectoryCordoned``): the next heartbeat, sent at once,
        names them. Returns whether they changed."""
        new = tuple(sorted(set(dirs)))
        if new == self.cordoned_log_dirs:
            return False
        self.cordoned_log_dirs = new
        self._schedule(now_ms)
        return True

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        """SIGTERM: ask the controller to move this broker's leaders away before it exits."""
        if self.state is LifecycleState.RUNNING:
            log.info("beginning controlled shutdown")
            self.state = LifecycleState.PENDING_CONTROLLED_SHUTDOWN
            self._shutdown_deadline_ms = now_ms + self.controlled_shutdown_timeout_ms
            self._schedule(now_ms)
        elif self.state is not LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
            self._shut_down(f"skipping controlled shutdown because the broker is {self.state.name}")

    # ---- what to send ---------------------------------------------------------------------------------------

    def next_request(self, now_ms: int) -> LifecycleRequest | None:
        """The request to send now, if one is due (at most one is in flight)."""
        if self.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN and self._shutdown_deadline_ms is not None \
                and now_ms >= self._shutdown_deadline_ms:
            self._shut_down(f"the controller did not allow the controlled shutdown within "
                            f"{self.controlled_shutdown_timeout_ms} ms")
        if self.state in (LifecycleState.NOT_RUNNING, LifecycleState.SHUTTING_DOWN):
            return None
        if self._in_flight is not None:
            if now_ms < self._in_flight_deadline_ms:
                return None
            log.warning("%s to the controller timed out after %d ms", self._name(self._in_flight),
                        self.request_timeout_ms)
            self._in_flight = None
            self._after_failure(now_ms)
        if self._next_send_ms is None or now_ms < self._next_send_ms:
            return None
        self._next_request_id += 1
        if self.registered:
            body: dict[str, Any] = {
                "broker_id": self.node_id, "broker_epoch": self.broker_epoch,
                "current_metadata_offset": self.metadata_offset, "want_fence": not self.ready_to_unfence,
                "want_shut_down": self.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN,
                "offline_log_dirs": list(self.offline_log_dirs),
                "cordoned_log_dirs": None if self.cordoned_log_dirs is None else list(self.cordoned_log_dirs)}
            request = LifecycleRequest(self._next_request_id, ApiKey.BROKER_HEARTBEAT, body)
        else:
            body = {
                "broker_id": self.node_id, "cluster_id": self.cluster_id, "incarnation_id": self.incarnation_id,
                "listeners": [{"name": lst.name, "host": lst.host, "port": lst.port,
                               "security_protocol": lst.security_protocol} for lst in self.listeners],
                "features": [{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                             for n, lo, hi in self.features],
                "rack": self.rack, "is_migrating_zk_broker": False, "log_dirs": list(self.log_dirs),
                "previous_broker_epoch": self.previous_broker_epoch}
            request = LifecycleRequest(self._next_request_id, ApiKey.BROKER_REGISTRATION, body)
        self._in_flight = request
        self._in_flight_deadline_ms = now_ms + self.request_timeout_ms
        self._next_send_ms = None
        return request

    def next_wakeup_ms(self) -> int | None:
        """When :meth:`next_request` may have something to do (None: nothing until an input arrives)."""
        if self.state in (LifecycleState.NOT_RUNNING, LifecycleState.SHUTTING_DOWN):
            return None
        times = [self._in_flight_deadline_ms] if self._in_flight is not None else \
            [t for t in (self._next_send_ms,) if t is not None]
        if self.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN and self._shutdown_deadline_ms is not None:
            times.append(self._shutdown_deadline_ms)
        return min(times) if times else None

    # ---- answers --------------------------------------------------------------------------------------------

    def on_failure(self, request_id: int, now_ms: int, reason: str) -> None:
        """The request got no answer: no connection, a timeout, or the controller moved."""
        if not self._take(request_id):
            return
        log.info("broker %d: request to the controller failed: %s", self.node_id, reason)
        self._after_failure(now_ms)

    def on_response(self, request_id: int, response: Any, now_ms: int) -> None:
        """A decoded response to the request ``request_id`` (a late answer to an abandoned request is ignored)."""
        request = self._in_flight
        if request is None or not self._take(request_id):
            return
        code = field_of(response, "error_code")
        if code != ErrorCode.NONE:
            name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
            self.last_error = (code, name)
            log.warning("broker %d: %s answered %s", self.node_id, self._name(request), name)
            if request.api_key == ApiKey.BROKER_HEARTBEAT and code == ErrorCode.STALE_BROKER_EPOCH:
                self.registered = False   # the controller no longer has this epoch: register again
            self._after_failure(now_ms)
            return
        self.last_error = None
        self.failed_attempts = 0
        if request.api_key == ApiKey.BROKER_REGISTRATION:
            self.registered = True
            self.broker_epoch = field_of(response, "broker_epoch")
            log.info("broker %d registered with epoch %d", self.node_id, self.broker_epoch)
            self._schedule(now_ms)
            return
        self._on_heartbeat(response, now_ms)

    def _on_heartbeat(self, response: Any, now_ms: int) -> None:
        self.fenced_by_controller = bool(field_of(response, "is_fenced"))
        if self.state is LifecycleState.STARTING:
            if field_of(response, "is_caught_up"):
                log.info("broker %d caught up with the cluster metadata: STARTING -> RECOVERY", self.node_id)
                self.state = LifecycleState.RECOVERY
            self._schedule(now_ms + CAUGHT_UP_NEXT_HEARTBEAT_MS)
        elif self.state is LifecycleState.RECOVERY:
            if not self.fenced_by_controller:
                log.info("broker %d was unfenced: RECOVERY -> RUNNING", self.node_id)
                self.state = LifecycleState.RUNNING
            self._schedule(now_ms + self.heartbeat_interval_ms)
        elif self.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
            if field_of(response, "should_shut_down"):
                self._shut_down("the controller allowed the controlled shutdown")
            else:
                self._schedule(now_ms + (self.heartbeat_interval_ms if self._got_controlled_shutdown_answer
                                         else CONTROLLED_SHUTDOWN_FIRST_RETRY_MS))
                self._got_controlled_shutdown_answer = True
        else:
            self._schedule(now_ms + self.heartbeat_interval_ms)

    # ---- internals ------------------------------------------------------------------------------------------

    def _take(self, request_id: int) -> bool:
        if self._in_flight is None or self._in_flight.request_id != request_id:
            return False
        self._in_flight = None
        return True

    def _schedule(self, at_ms: int) -> None:
        if self.state is LifecycleState.SHUTTING_DOWN:
            return
        self._next_send_ms = at_ms if self._next_send_ms is None else min(self._next_send_ms, at_ms)

    def _after_failure(self, now_ms: int) -> None:
        backoff = min(self.max_backoff_ms, RETRY_BACKOFF_INITIAL_MS * 2 ** min(self.failed_attempts, 32))
        backoff = int(backoff * self.rng.uniform(1 - RETRY_BACKOFF_JITTER, 1 + RETRY_BACKOFF_JITTER))
        self.failed_attempts += 1
        self._next_send_ms = None
        self._schedule(now_ms + backoff)

    def _shut_down(self, reason: str) -> None:
        log.info("broker %d: %s -> SHUTTING_DOWN: %s", self.node_id, self.state.name, reason)
        self.state = LifecycleState.SHUTTING_DOWN
        self.shutdown_reason = reason
        self._next_send_ms = None
        self._in_flight = None

    @staticmethod
    def _name(request: LifecycleRequest) -> str:
        return "BrokerHeartbeat" if request.api_key == ApiKey.BROKER_HEARTBEAT else "BrokerRegistration"
