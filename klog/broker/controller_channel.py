"""Requests from a quorum member's broker to the active controller (Kafka's ``NodeToControllerChannelManager``):
AllocateProducerIds over the controller listeners of ``controller.quorum.voters``, and the creation of
``__consumer_offsets`` through the active controller's broker listener (which decides topic changes on a quorum).

The channel sends to the node the local Raft member names as the leader (else the next address in turn), keeps
one connection to it, and tries again (next node, short backoff) on a connection failure or NOT_CONTROLLER until
the caller's deadline. Every other answer is the caller's to read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from klog.client.connection import BrokerConnection
from klog.client.errors import KafkaError
from klog.protocol import errors as _errors

__all__ = ["ControllerChannel", "ControllerUnreachable"]

log = logging.getLogger("klog.broker.controller_channel")

ErrorCode: Any = _errors.ErrorCode

#: Bound on an answer from the controller (small control-plane responses).
MAX_RESPONSE_BYTES = 1 << 20
CONNECT_TIMEOUT_MS = 5000
#: Bound on one request to a controller (a commit through Raft takes a few ms; a lost leader answers nothing).
REQUEST_TIMEOUT_MS = 5000
#: Pause before trying again after a failure or NOT_CONTROLLER (a new leader is elected meanwhile).
RETRY_BACKOFF_S = 0.1


class ControllerUnreachable(Exception):
    """No controller answered (other than NOT_CONTROLLER) before the deadline."""


class ControllerChannel:
    """``addresses``: node id -> (host, port) to reach each controller node at (read at every attempt: a broker
    listener is known from the metadata image); ``leader``: the active controller's node id as the local Raft
    member knows it (None or an unknown id: not known)."""

    def __init__(self, addresses: Callable[[], Mapping[int, tuple[str, int]]], leader: Callable[[], int | None], *,
                 client_id: str, request_timeout_ms: int = REQUEST_TIMEOUT_MS) -> None:
        self.addresses = addresses
        self.leader = leader
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._rotation = 0
        self._conn: BrokerConnection | None = None
        self._conn_target: tuple[int, tuple[str, int]] | None = None
        self._connecting = asyncio.Lock()
        self._closed = False

    def _target(self) -> tuple[int, tuple[str, int]] | None:
        addresses = self.addresses()
        leader = self.leader()
        if leader is not None and leader in addresses:
            return leader, addresses[leader]
        if not addresses:
            return None
        ids = sorted(addresses)
        target = ids[self._rotation % len(ids)]
        return target, addresses[target]

    async def _connection(self, target: int, address: tuple[str, int]) -> BrokerConnection:
        async with self._connecting:
            if self._conn is not None and (self._conn.closed or self._conn_target != (target, address)):
                self._conn.close()
                self._conn = None
            if self._conn is None:
                host, port = address
                self._conn = await BrokerConnection.open(
                    host, port, -1, client_id=self.client_id, request_timeout_ms=self.request_timeout_ms,
                    max_response_bytes=MAX_RESPONSE_BYTES, connect_timeout_ms=CONNECT_TIMEOUT_MS)
                self._conn_target = (target, address)
            return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._rotation += 1

    async def send(self, api_key: int, body: Any, *, timeout_s: float) -> Any:
        """The active controller's answer to ``body``; ControllerUnreachable past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last = "no attempt"
        while not self._closed:
            found = self._target()
            if found is None:
                last = "no address known"
                if time.monotonic() + RETRY_BACKOFF_S > deadline:
                    break
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            target, address = found
            try:
                conn = await self._connection(target, address)
                response = await conn.request(api_key, body)
            except (KafkaError, OSError, asyncio.TimeoutError) as exc:
                self._drop()
                last = f"controller {target}: {exc}"
            else:
                if not _not_controller(response):
                    return response
                self._drop()
                last = f"controller {target} is not the active controller"
            if time.monotonic() + RETRY_BACKOFF_S > deadline:
                break
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise ControllerUnreachable(f"api {api_key}: no active controller answered within {timeout_s:.1f}s ({last})")

    def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _not_controller(response: Any) -> bool:
    """NOT_CONTROLLER at the top level (AllocateProducerIds) or for a topic (CreateTopics)."""
    fields = vars(response)
    if fields.get("error_code") == ErrorCode.NOT_CONTROLLER:
        return True
    return any(t.error_code == ErrorCode.NOT_CONTROLLER for t in fields.get("topics") or ())
