"""Producer ids of a quorum member's broker, from blocks the active controller allocates (Kafka's
``RPCProducerIdManager``, KIP-730).

:class:`ProducerIdBlocks` is the pure part: the block ids are handed out from, and at most one prefetched block.
The next block is asked for once :data:`PREFETCH_FRACTION` of the current one is used (or when there is none), so
a busy broker rarely waits for the controller. :class:`RpcProducerIdManager` is the IO edge: it sends
AllocateProducerIds (67) through a :class:`klog.broker.controller_channel.ControllerChannel`, one request at a
time. Every block is a ProducerIdsRecord the controller committed through Raft before answering, so no two brokers
(and no two starts of one broker) ever hand out the same id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode

from .controller_channel import ControllerChannel, ControllerUnreachable

__all__ = ["PREFETCH_FRACTION", "LocalProducerIdManager", "ProducerIdBlocks", "ProducerIdsUnavailable",
           "RpcProducerIdManager"]

log = logging.getLogger("klog.broker.producers")

#: The next block is requested once this fraction of the current one is handed out (Kafka's 90%).
PREFETCH_FRACTION = 0.9
#: How long one AllocateProducerIds exchange may take (retries included) before it is tried again.
ALLOCATE_TIMEOUT_S = 10.0
#: Pause after a refused allocation (e.g. STALE_BROKER_EPOCH before this broker's registration is committed).
ALLOCATE_RETRY_BACKOFF_S = 0.2


class ProducerIdsUnavailable(Exception):
    """No producer id block arrived in time (the client retries: Kafka's COORDINATOR_LOAD_IN_PROGRESS)."""


class ProducerIdBlocks:
    """The current block ``[next, end)`` and at most one prefetched block."""

    def __init__(self, prefetch_fraction: float = PREFETCH_FRACTION) -> None:
        assert 0 < prefetch_fraction <= 1, prefetch_fraction
        self.prefetch_fraction = prefetch_fraction
        self.next_id = 0
        self.end = 0
        self._prefetch_at = 0
        self.prefetched: tuple[int, int] | None = None
        self.requesting = False

    def take(self) -> int | None:
        """The next id, or None when no block holds one (one must be fetched first)."""
        if self.next_id >= self.end and self.prefetched is not None:
            start, size = self.prefetched
            self.prefetched = None
            self._set_current(start, size)
        if self.next_id >= self.end:
            return None
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

    def wants_block(self) -> bool:
        """True when a block should be requested now: none prefetched or in flight, and the current one is used
        past the prefetch point (or used up)."""
        return not self.requesting and self.prefetched is None and self.next_id >= self._prefetch_at

    def on_block(self, start: int, size: int) -> None:
        assert size > 0 and start >= 0, (start, size)
        assert start >= self.end, f"block [{start}, {start + size}) overlaps the current one ending at {self.end}"
        if self.next_id >= self.end:
            self._set_current(start, size)
        else:
            self.prefetched = (start, size)

    def _set_current(self, start: int, size: int) -> None:
        self.next_id, self.end = start, start + size
        self._prefetch_at = start + max(1, int(size * self.prefetch_fraction))


class LocalProducerIdManager:
    """Producer ids of a single voter, which commits each block itself: ``allocate_block`` (the controller's
    :meth:`klog.controller.apis.ControllerApis.allocate_producer_ids` for this broker) returns the next block as
    (first id, size) once its ProducerIdsRecord is committed, or raises OSError when it cannot be (the handler
    answers KAFKA_STORAGE_ERROR). One block is asked for at a time."""

    def __init__(self, allocate_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate_block = allocate_block
        self._next_id = 0
        self._block_end = 0
        self._allocating = asyncio.Lock()

    async def generate(self) -> int:
        if self._next_id >= self._block_end:
            async with self._allocating:
                if self._next_id >= self._block_end:   # not refilled by the caller it waited for
                    start, size = await self._allocate_block()
                    self._next_id, self._block_end = start, start + size
        producer_id = self._next_id
        self._next_id += 1
        return producer_id


class RpcProducerIdManager:
    """``broker_epoch``: this broker's current registration epoch (-1 until registered)."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], channel: ControllerChannel) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.channel = channel
        self.blocks = ProducerIdBlocks()
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def generate(self, timeout_s: float) -> int:
        """A producer id never handed out before; ProducerIdsUnavailable when no block arrived in ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            producer_id = self.blocks.take()
            self._maybe_request()
            if producer_id is not None:
                return producer_id
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ProducerIdsUnavailable("no producer id block from the active controller yet")
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def _maybe_request(self) -> None:
        if self.blocks.wants_block():
            self.blocks.requesting = True
            self._task = asyncio.get_running_loop().create_task(self._request_block(),
                                                                 name=f"broker-{self.broker_id}-producer-ids")

    async def _request_block(self) -> None:
        try:
            while True:
                epoch = self.broker_epoch()
                try:
                    response = await self.channel.send(
                        ApiKey.ALLOCATE_PRODUCER_IDS, {"broker_id": self.broker_id, "broker_epoch": epoch},
                        timeout_s=ALLOCATE_TIMEOUT_S)
                except ControllerUnreachable as exc:
                    log.warning("broker %d: no producer id block: %s", self.broker_id, exc)
                    continue
                if response.error_code == ErrorCode.NONE and response.producer_id_len > 0:
                    self.blocks.on_block(response.producer_id_start, response.producer_id_len)
                    log.info("broker %d: producer id block [%d, %d) from the active controller", self.broker_id,
                             response.producer_id_start, response.producer_id_start + response.producer_id_len)
                    return
                log.info("broker %d (epoch %d): AllocateProducerIds answered error %d; trying again", self.broker_id,
                         epoch, response.error_code)
                await asyncio.sleep(ALLOCATE_RETRY_BACKOFF_S)
        finally:
            self.blocks.requesting = False
            self._arrived.set()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.channel.close()
