"""The IO edge of the broker lifecycle: runs a :class:`klog.broker.lifecycle.BrokerLifecycleManager` against the
active controller over one klog client connection (asyncio).

The driver only moves bytes and time: it asks the manager what to send, sends it to the active controller the
node's Raft member knows (rotating through the configured controller addresses while none is known, or the known
one is unreachable or answers NOT_CONTROLLER), hands the answer
or the failure back, and sleeps until the manager's next wake-up or a :meth:`LifecycleDriver.poke` (after the
broker changed an input: its metadata offset, ready-to-unfence, a controlled shutdown). Every decision is the
manager's. :meth:`LifecycleDriver.run` returns once the manager reached SHUTTING_DOWN.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from klog.client.connection import BrokerConnection
from klog.client.errors import KafkaError
from klog.protocol import errors as _errors

from .lifecycle import BrokerLifecycleManager, BrokerState

__all__ = ["ControllerConnection", "LifecycleDriver"]

log = logging.getLogger("klog.broker.lifecycle")

ErrorCode: Any = _errors.ErrorCode

#: Bound on a response from the controller (the connection's own request timeout fires first).
MAX_RESPONSE_BYTES = 1 << 20
CONNECT_TIMEOUT_MS = 5000


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ControllerConnection:
    """One klog client connection to a controller listener, moving on to the next configured address when the
    caller drops it with ``rotate`` (unreachable, or NOT_CONTROLLER).

    ``leader``: the active controller's address as the local Raft member knows it (None: not known). A new
    connection goes there unless that address is the one that just failed, as Kafka's channel follows the Raft
    leader; only without a known leader does it go on in the rotation. (Rotating through the dead, the
    not-yet-elected and the new controller under a growing backoff, a broker can heartbeat the new controller
    too late after a failover and be fenced for a moment.)"""

    def __init__(self, controllers: Sequence[tuple[str, int]] | Callable[[], Sequence[tuple[str, int]]], *,
                 leader: Callable[[], tuple[str, int] | None] | None = None, client_id: str,
                 request_timeout_ms: int) -> None:
        # a callable: the addresses change (KIP-853 voter changes), read at each connection
        fixed = None if callable(controllers) else list(controllers)
        self._addresses: Callable[[], Sequence[tuple[str, int]]] = controllers if fixed is None else (  # type: ignore[assignment]
            lambda: fixed)
        assert self.controllers, "at least one controller address"
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._leader = leader
        self._target = 0
        self._address: tuple[str, int] | None = None
        #: the address of the last connection dropped as unreachable or not the controller
        self._failed: tuple[str, int] | None = None
        self._conn: BrokerConnection | None = None

    def next_address(self) -> tuple[str, int]:
        """The address the next connection goes to."""
        leader = self._leader() if self._leader is not None else None
        addresses = self.controllers
        chosen = leader if leader is not None and leader != self._failed else addresses[self._target % len(addresses)]
        self._address = chosen
        return chosen

    async def get(self) -> BrokerConnection:
        if self._conn is None or self._conn.closed:
            host, port = self.next_address()
            self._conn = await BrokerConnection.open(
                host, port, -1, client_id=self.client_id, request_timeout_ms=self.request_timeout_ms,
                max_response_bytes=MAX_RESPONSE_BYTES, connect_timeout_ms=CONNECT_TIMEOUT_MS)
        return self._conn

    @property
    def controllers(self) -> Sequence[tuple[str, int]]:
        return self._addresses()

    def drop(self, *, rotate: bool) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if rotate:
            self._failed = self._address
            self._target = (self._target + 1) % len(self.controllers)


class LifecycleDriver:
    """``controllers``: (host, port) of the controller listeners (``controller.quorum.bootstrap.servers`` or the
    voters of ``controller.quorum.voters``)."""

    def __init__(self, manager: BrokerLifecycleManager,
                 controllers: Sequence[tuple[str, int]] | Callable[[], Sequence[tuple[str, int]]], *,
                 leader: Callable[[], tuple[str, int] | None] | None = None,
                 client_id: str = "klog-broker-lifecycle", clock: Callable[[], int] = monotonic_ms) -> None:
        self.manager = manager
        self.client_id = client_id
        self.clock = clock
        self._controller = ControllerConnection(controllers, leader=leader, client_id=client_id,
                                                request_timeout_ms=manager.request_timeout_ms)
        self._poke = asyncio.Event()
        #: set on every answer or failure, so the broker can wait for a state (:meth:`wait_for`)
        self._changed = asyncio.Event()

    def poke(self) -> None:
        """Call after changing one of the manager's inputs: the loop looks at it again at once."""
        self._poke.set()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self._changed.clear()
            await self._changed.wait()

    async def run(self) -> None:
        m = self.manager
        try:
            while m.state is not BrokerState.SHUTTING_DOWN:
                request = m.next_request(self.clock())
                if request is None:
                    wake = m.next_wakeup_ms()
                    self._poke.clear()
                    timeout = None if wake is None else max(0, wake - self.clock()) / 1000
                    try:
                        await asyncio.wait_for(self._poke.wait(), timeout)
                    except asyncio.TimeoutError:
                        pass
                    continue
                try:
                    conn = await self._controller.get()
                    response = await conn.request(request.api_key, request.body)
                except (KafkaError, OSError) as exc:
                    self._controller.drop(rotate=True)
                    m.on_failure(request.request_id, self.clock(), str(exc))
                else:
                    if response.error_code == ErrorCode.NOT_CONTROLLER:
                        self._controller.drop(rotate=True)
                    m.on_response(request.request_id, response, self.clock())
                self._changed.set()
        finally:
            self._controller.drop(rotate=False)
            self._changed.set()
