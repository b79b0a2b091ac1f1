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

from klog.client.errors import KafkaError
from klog.client.security import ClientSecurity
from klog.protocol.errors import ErrorCode

from .controller_channel import ControllerConnection
from .lifecycle import BrokerLifecycleManager, LifecycleState

__all__ = ["LifecycleDriver"]

log = logging.getLogger("klog.broker.lifecycle")

def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class LifecycleDriver:
    """``controllers``: (host, port) of the controller listeners (``controller.quorum.bootstrap.servers`` or the
    voters of ``controller.quorum.voters``)."""

    def __init__(self, manager: BrokerLifecycleManager,
                 controllers: Sequence[tuple[str, int]] | Callable[[], Sequence[tuple[str, int]]], *,
                 leader: Callable[[], tuple[str, int] | None] | None = None,
                 client_id: str = "klog-broker-lifecycle", clock: Callable[[], int] = monotonic_ms,
                 security: ClientSecurity | None = None) -> None:
        self.manager = manager
        self.client_id = client_id
        self.clock = clock
        self._controller = ControllerConnection(controllers, leader=leader, client_id=client_id,
                                                request_timeout_ms=manager.request_timeout_ms, security=security)
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
            while m.state is not LifecycleState.SHUTTING_DOWN:
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
