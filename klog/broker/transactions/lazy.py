"""The broker's transaction coordinator made on first use (:class:`LazyTransactionCoordinator`): its modules
(``coordinator.py``, ``records.py``) are not imported by a broker whose clients use no transactions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .coordinator import TransactionCoordinator

#: the transaction coordinator's log (klog.broker.transactions.coordinator.TOPIC)
TRANSACTION_STATE_TOPIC = "__transaction_state"


class LazyTransactionCoordinator:
    """The broker's transaction coordinator, made (and its modules imported, about 0.2 MiB) when first needed: a
    transactional request, a transactional producer's batch, FindCoordinator for a transactional id, or a metadata
    image holding ``__transaction_state`` (whose partitions this broker may lead: loaded as the coordinator itself
    would, at start or when the image comes). A broker whose clients never use transactions never loads it.

    ``make()``: the coordinator (klog.broker.handlers.transactions.create_transaction_coordinator).
    ``topic_exists()``: whether the broker's metadata image holds ``__transaction_state``."""

    def __init__(self, make: Callable[[], TransactionCoordinator], topic_exists: Callable[[], bool]) -> None:
        self._make = make
        self._topic_exists = topic_exists
        self._made: TransactionCoordinator | None = None
        #: run_timers of start() while started (the coordinator made then is started at once), else None
        self._running: bool | None = None
        #: FindCoordinator's side (klog.broker.groups.coordinator's key types)
        self.runtime = _LazyRuntime(self)

    @property
    def loaded(self) -> bool:
        return self._made is not None

    def get(self) -> TransactionCoordinator:
        made = self._made
        if made is None:
            made = self._made = self._make()
            if self._running is not None:
                made.start_now(run_timers=self._running)
        return made

    async def start(self, *, run_timers: bool = True) -> None:
        self._running = run_timers
        if self._made is not None:
            await self._made.start(run_timers=run_timers)
        elif self._topic_exists():
            self.get()   # made and started: it loads the partitions it coordinates

    async def stop(self) -> None:
        self._running = None
        if self._made is not None:
            await self._made.stop()

    def on_metadata_published(self) -> None:
        if self._made is None and (self._running is None or not self._topic_exists()):
            # nothing to load: not started (a coordinator loads from start() on), or no topic yet (created on the
            # coordinator's first use)
            return
        self.get().on_metadata_published()

    @property
    def offsets_partitions(self) -> int:
        return self.get().offsets_partitions

    async def handle(self, header: Any, request: Any) -> Any:
        return await self.get().handle(header, request)

    async def add_or_verify(self, tid: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]],
                            operation: int) -> dict[tuple[str, int], int]:
        return await self.get().add_or_verify(tid, producer_id, epoch, partitions, operation)

    def verified_now(self, tid: str, producer_id: int, epoch: int, topic: str, partition: int) -> bool:
        return self.get().verified_now(tid, producer_id, epoch, topic, partition)

    def added_now(self, tid: str, producer_id: int, epoch: int, topic: str, partition: int) -> bool:
        return self.get().added_now(tid, producer_id, epoch, topic, partition)

    def describe(self, tid: str) -> dict[str, Any]:
        return self.get().describe(tid)

    def list_transactions(self, states: list[str], producer_ids: list[int], duration_ms: int,
                          pattern: str | None) -> tuple[list[str], list[dict[str, Any]]]:
        return self.get().list_transactions(states, producer_ids, duration_ms, pattern)


class _LazyRuntime:
    """The transaction coordinator's runtime as FindCoordinator sees it: the coordinator is made on the first
    FindCoordinator for a transactional id (which creates ``__transaction_state`` on a single node)."""

    def __init__(self, lazy: LazyTransactionCoordinator) -> None:
        self._lazy = lazy

    async def coordinator_for(self, key: str, listener: str | None) -> tuple[int, str | None, tuple[int, str, int]]:
        return await self._lazy.get().runtime.coordinator_for(key, listener)
