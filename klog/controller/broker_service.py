"""The active controller's side of the broker lifecycle, IO: BrokerRegistration (62) and BrokerHeartbeat (63)
served on the controller listener of a quorum member, decided by :class:`klog.controller.brokers.ClusterControlManager`
against the committed image and committed through Raft before they are answered (as Kafka's QuorumController).

- The controller listener is shared with the Raft peers: :class:`klog.controller.raft.RaftDriver` hands every
  connection that does not start with the Raft preamble to :meth:`BrokerLifecycleService.serve` (Kafka requests,
  one at a time per connection, as a broker's lifecycle manager sends them).
- Active means: this member leads the quorum and has applied its own LeaderChange (so the image holds every
  entry of earlier terms). Then :meth:`ClusterControlManager.activate` runs once per term; a member that is not
  active answers NOT_CONTROLLER, which makes the broker try the next controller.
- Decisions are serialized (one at a time, each committed before the next is decided), so each sees the image
  with the previous one's records; a periodic tick fences the brokers whose session expired
  (``broker.session.timeout.ms``).
- A broker epoch is the offset the registration record is expected at: one past the committed image's highest
  offset, never below one past the last offset handed out by this controller (records proposed by others may
  land first, so the record's actual offset can be higher; an epoch is unique and increasing all the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from klog.controller.brokers import BROKER_SESSION_TIMEOUT_MS, ClusterControlManager
from klog.controller.node import ControllerNode
from klog.controller.raft import RaftError
from klog.protocol import (
    ApiKey,
    FrameReader,
    decode_request,
    decode_request_header,
    encode_response,
    versions,
)
from klog.protocol import errors as _errors

__all__ = ["BrokerLifecycleService", "MAX_CONTROLLER_REQUEST_BYTES", "SESSION_CHECK_INTERVAL_MS"]

log = logging.getLogger("klog.controller.brokers")

ErrorCode: Any = _errors.ErrorCode

#: Largest request frame accepted on the controller listener (a registration is a few hundred bytes).
MAX_CONTROLLER_REQUEST_BYTES = 1 << 20
#: How often the active controller looks for expired broker sessions.
SESSION_CHECK_INTERVAL_MS = 100
#: Requests served on the controller listener besides Raft.
SERVED_APIS = (ApiKey.API_VERSIONS, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class BrokerLifecycleService:
    """Attach to a :class:`ControllerNode` before ``start()``; ``start()`` / ``stop()`` with the node."""

    def __init__(self, node: ControllerNode, *, session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS,
                 unclean_leader_election: bool = False, clock: Callable[[], int] = _monotonic_ms) -> None:
        self.node = node
        self.clock = clock
        self.manager = ClusterControlManager(node.cluster_id or "", session_timeout_ms=session_timeout_ms,
                                             unclean_leader_election=unclean_leader_election)
        #: the Raft term this controller activated in (None: not active)
        self.active_term: int | None = None
        self._next_offset = 0
        self._decisions = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self._handlers: dict[int, Callable[[Any], Awaitable[Any]]] = {
            ApiKey.BROKER_REGISTRATION: self._register, ApiKey.BROKER_HEARTBEAT: self._heartbeat}
        node.driver.add_committed_listener(self._on_committed)
        node.driver.request_handler = self.serve

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._expire_sessions(),
                                                            name=f"controller-{self.node.quorum.node_id}-sessions")

    async def stop(self) -> None:
        # no decision after this, and connections that arrive until the listener closes are closed at once (the
        # listener's wait_closed waits for every connection)
        self._stopped = True
        self.active_term = None
        tasks = [t for t in (self._task, *self._connections) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    # ---- activation -------------------------------------------------------------------------------------

    def _on_committed(self, index: int, term: int, kind: str, data: bytes, base: int, nxt: int) -> None:
        raft = self.node.driver.node
        if kind == "leader_change" and raft is not None and raft.role == "leader" and term == raft.term:
            self.active_term = term
            self.manager.activate(self.node.image, self.clock())
            log.info("controller %d: active in term %d; %d registered broker(s), each heard from now",
                     self.node.quorum.node_id, term, len(self.node.image.brokers))

    @property
    def active(self) -> bool:
        raft = self.node.driver.node
        return (self.active_term is not None and raft is not None and raft.role == "leader"
                and raft.term == self.active_term and self.node.applier.bootstrapped)

    def _resign(self, why: str) -> None:
        log.warning("controller %d: broker sessions dropped (%s); rebuilt when it is next active",
                    self.node.quorum.node_id, why)
        self.active_term = None

    def _record_offset(self) -> int:
        return max(self.node.image.highest_offset + 1, self._next_offset)

    async def _decide(self, operation: Callable[[int], Any]) -> Any:
        """Run ``operation(record_offset)`` (a ControllerResult) on the current image, commit its records, and
        return its response; None when this member is not (or stopped being) the active controller."""
        async with self._decisions:
            if not self.active:
                return None
            self.manager.cluster_id = self.node.cluster_id or ""
            offset = self._record_offset()
            result = operation(offset)
            if result.records:
                self._next_offset = offset + len(result.records)
                try:
                    # bounded: past a session timeout the broker has retried elsewhere
                    await asyncio.wait_for(self.node.commit(list(result.records)),
                                           self.manager.session_timeout_ms / 1000)
                except (RaftError, asyncio.TimeoutError, asyncio.CancelledError) as exc:
                    # the decision changed the sessions but its records are not committed: start over when next active
                    self._resign(f"records not committed: {exc!r}")
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    return None
            return result.response

    # ---- requests ---------------------------------------------------------------------------------------

    async def _register(self, request: Any) -> Any:
        response = await self._decide(lambda offset: self.manager.register_broker(
            request, self.node.image, self.clock(), record_offset=offset))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "broker_epoch": -1}
        if response["error_code"]:
            log.warning("controller %d: registration of broker %d refused: %s", self.node.quorum.node_id,
                        request.broker_id, response.get("error_message"))
        return response

    async def _heartbeat(self, request: Any) -> Any:
        response = await self._decide(lambda offset: self.manager.process_heartbeat(
            request, self.node.image, self.clock(), record_offset=offset))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "is_caught_up": False,
                    "is_fenced": True, "should_shut_down": False}
        return response

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL_MS / 1000)
            if not self.active:
                continue
            # one expired session per decision, as Kafka's controller, until none is left
            while await self._decide(lambda offset: self.manager.fence_stale_broker(self.node.image,
                                                                                     self.clock())) is not None:
                pass

    async def serve(self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A Kafka client connection on the controller listener (``first``: the bytes already read)."""
        if self._stopped:
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        peer = writer.get_extra_info("peername")
        frames = FrameReader(MAX_CONTROLLER_REQUEST_BYTES)
        try:
            data = first
            while data:
                frames.feed(data)
                for frame in frames:
                    header, at = decode_request_header(frame)
                    if header.api_key == ApiKey.API_VERSIONS:
                        body: Any = {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                            {"api_key": k, "min_version": versions(k)[0], "max_version": versions(k)[1]}
                            for k in SERVED_APIS]}
                    elif header.api_key in self._handlers:
                        body = await self._handlers[header.api_key](decode_request(header, frame, at))
                    else:
                        log.warning("controller listener: api key %d from %s is not served here; closing",
                                    header.api_key, peer)
                        return
                    writer.writelines(encode_response(header.api_key, header.api_version, header.correlation_id,
                                                      body))
                    await writer.drain()
                data = await reader.read(65536)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass   # stopping: a leaf task
        except Exception as exc:   # a malformed request: Kafka closes the connection
            log.warning("controller listener: closing the connection from %s: %s", peer, exc)
        finally:
            writer.close()
            if task is not None:
                self._connections.discard(task)
