"""Requests from a broker to the active controller (Kafka's ``NodeToControllerChannelManager``).

:class:`ControllerConnection` is the one connection to a controller listener every such sender uses: the broker
lifecycle (registration, heartbeats), AlterPartition and AllocateProducerIds. It goes to the active controller the
node's Raft member or observer knows, else rotates through the controller addresses (``controller.quorum.voters``,
``controller.quorum.bootstrap.servers`` or the voters learnt since). Who sends decides when to try again:
:class:`ControllerChannel` wraps it for the request/answer callers (AllocateProducerIds) that retry within a
deadline; the lifecycle and AlterPartition loops retry on their own schedules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from klog.client.connection import BrokerConnection
from klog.client.security import ClientSecurity
from klog.client.errors import KafkaError
from klog.protocol.errors import ErrorCode

__all__ = ["ControllerChannel", "ControllerConnection", "ControllerUnreachable", "controller_security"]

#: Bound on an answer from the controller (small control-plane responses).
MAX_RESPONSE_BYTES = 1 << 20
CONNECT_TIMEOUT_MS = 5000
#: Bound on one request of a :class:`ControllerChannel` (a commit through Raft takes a few ms; a lost leader
#: answers nothing).
REQUEST_TIMEOUT_MS = 5000
#: Pause before a :class:`ControllerChannel` tries again after a failure or NOT_CONTROLLER (a new leader is
#: elected meanwhile).
RETRY_BACKOFF_S = 0.1


def controller_security(controller: Any) -> ClientSecurity | None:
    """The TLS and SASL login every connection to ``controller``'s (a ControllerNode's or MetadataObserver's)
    controller listeners uses (its quorum config's ``client_security``, from the controller listener's ``ssl.*``
    and ``sasl.*`` settings and ``sasl.mechanism.controller.protocol``); None: PLAINTEXT."""
    return getattr(getattr(getattr(controller, "driver", None), "cfg", None), "client_security", None)


class ControllerUnreachable(Exception):
    """No controller answered (other than NOT_CONTROLLER) before the deadline."""


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
                 request_timeout_ms: int, security: ClientSecurity | None = None) -> None:
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
        #: TLS and SASL login to the controller listener (:func:`controller_security`; None: PLAINTEXT)
        self.security = security
        #: one connection at a time, however many requests want one
        self._opening = asyncio.Lock()

    def next_address(self) -> tuple[str, int]:
        """The address the next connection goes to."""
        leader = self._leader() if self._leader is not None else None
        addresses = self.controllers
        chosen = leader if leader is not None and leader != self._failed else addresses[self._target % len(addresses)]
        self._address = chosen
        return chosen

    async def get(self) -> BrokerConnection:
        async with self._opening:
            if self._conn is not None and not self._conn.closed and self._conn.session_ending():
                # the controller listener ends its SASL session soon (connections.max.reauth.ms): a new connection
                # (logged in again) for the requests from now on, the old one closed once its answers are in
                old, self._conn = self._conn, None
                asyncio.get_running_loop().call_later(self.request_timeout_ms / 1000, old.close)
            if self._conn is None or self._conn.closed:
                host, port = self.next_address()
                self._conn = await BrokerConnection.open(
                    host, port, -1, client_id=self.client_id, request_timeout_ms=self.request_timeout_ms,
                    max_response_bytes=MAX_RESPONSE_BYTES, connect_timeout_ms=CONNECT_TIMEOUT_MS,
                    security=self.security)
            return self._conn

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the current (or last) connection went."""
        return self._address

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



class ControllerChannel:
    """Sends a request to the active controller over a :class:`ControllerConnection` and tries again (the next
    controller, after a short backoff) on a connection failure or NOT_CONTROLLER until the caller's deadline. Every
    other answer is the caller's to read."""

    def __init__(self, connection: ControllerConnection) -> None:
        self.connection = connection
        self._closed = False

    async def send(self, api_key: int, body: Any, *, timeout_s: float) -> Any:
        """The active controller's answer to ``body``; ControllerUnreachable past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last = "no attempt"
        while not self._closed:
            try:
                conn = await self.connection.get()
                response = await conn.request(api_key, body)
            except (KafkaError, OSError, asyncio.TimeoutError) as exc:
                self.connection.drop(rotate=True)
                last = f"controller at {self.connection.address}: {exc}"
            else:
                if not _not_controller(response):
                    return response
                self.connection.drop(rotate=True)
                last = f"controller at {self.connection.address} is not the active controller"
            if time.monotonic() + RETRY_BACKOFF_S > deadline:
                break
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise ControllerUnreachable(f"api {api_key}: no active controller answered within {timeout_s:.1f}s ({last})")

    def close(self) -> None:
        self._closed = True
        self.connection.drop(rotate=False)


def _not_controller(response: Any) -> bool:
    """NOT_CONTROLLER at the top level (AllocateProducerIds) or for a topic (CreateTopics)."""
    fields = vars(response)
    if fields.get("error_code") == ErrorCode.NOT_CONTROLLER:
        return True
    return any(t.error_code == ErrorCode.NOT_CONTROLLER for t in fields.get("topics") or ())
