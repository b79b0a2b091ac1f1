"""The transaction coordinator's state changes are compare-and-set (in process, markers sent to the test): a decision
taken from a state that another request or the timer replaced before it was written changes nothing.

Found by reading the coordinator (2026-12-06): the timer's abort of a timed-out transaction was scheduled as a task
holding the state it saw; a client's EndTxn(commit) handled before that task ran was answered NONE, then the task
wrote PrepareAbort over the PrepareCommit and the markers written were ABORT: a commit the client was told of
ended aborted. And a request that waited for the previous transaction's markers while the coordinator resigned
was answered as if the id were unknown (INVALID_PRODUCER_ID_MAPPING, which the Java client turns into an abort of
its transaction) instead of NOT_COORDINATOR (look the coordinator up again and retry)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from klog.broker.transactions.coordinator import TransactionCoordinator
from klog.broker.transactions.records import TxnState
from klog.metadata.config import BrokerConfig
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode as E

TID = "races"
TIMEOUT_MS = 1000


class OneNode:
    """What the coordinator asks of its broker: node 1 leads partition 0 of topic ``t``."""

    def __init__(self) -> None:
        self.config = BrokerConfig({})
        self.node_id, self.host, self.port, self.listener_name = 1, "127.0.0.1", 9092, "PLAINTEXT"

    def partition_count(self, topic: str) -> int | None:
        return 1 if topic == "t" else None

    def partition_leader_endpoint(self, topic: str, partition: int, listener: str) -> tuple[int, str, int]:
        return (self.node_id, self.host, self.port)


class Setup:
    """A started coordinator on a clock the test moves, its markers recorded (commit?, epoch), its producer id
    allocation held back while ``allocation`` is clear."""

    def __init__(self) -> None:
        self.now = 1_000
        self.markers: list[tuple[bool, int]] = []
        self.allocation = asyncio.Event()
        self.allocation.set()
        ids = iter(range(1000, 2000))

        async def send_markers(node: int, host: str, port: int, partitions: list[tuple[str, int]], pid: int,
                               epoch: int, commit: bool, *rest: Any) -> dict[tuple[str, int], int]:
            self.markers.append((bool(commit), epoch))
            return {tp: 0 for tp in partitions}

        async def allocate() -> int:
            await self.allocation.wait()
            return next(ids)

        self.coordinator = TransactionCoordinator(OneNode(), allocate_producer_id=allocate,
                                                  send_markers=send_markers, persist=False, clock=lambda: self.now)

    async def call(self, api_key: int, version: int, **body: Any) -> Any:
        return await self.coordinator.handle(SimpleNamespace(api_key=api_key, api_version=version), Struct(**body))

    async def begin(self, version: int) -> tuple[int, int]:
        """An id with a transaction open on t-0: (producer id, epoch)."""
        init = await self.call(22, 5, transactional_id=TID, transaction_timeout_ms=TIMEOUT_MS, producer_id=-1,
                               producer_epoch=-1)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        added = await self.call(24, 3 if version < 5 else 4, transactions=[Struct(
            transactional_id=TID, producer_id=pid, producer_epoch=epoch, verify_only=False,
            topics=[Struct(name="t", partitions=[0])])], v3_and_below_transactional_id=TID,
            v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[Struct(name="t", partitions=[0])])
        assert self.coordinator.txns[TID].state == TxnState.ONGOING, added
        return pid, epoch

    async def settle(self) -> None:
        for _ in range(50):
            await asyncio.sleep(0)


@pytest.mark.parametrize("version", [3, 5])
def test_a_commit_answered_before_the_timers_abort_ran_stays_committed(version):
    async def run() -> None:
        setup = Setup()
        coordinator = setup.coordinator
        await coordinator.start(run_timers=False)
        try:
            pid, epoch = await setup.begin(version)
            setup.now += TIMEOUT_MS + 1           # just past its timeout
            assert coordinator.abort_timed_out() == 1   # the abort is scheduled, not run yet
            end = await setup.call(26, version, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                   committed=True)
            assert end.error_code == 0
            await setup.settle()
            meta = coordinator.txns[TID]
            assert meta.state == TxnState.COMPLETE_COMMIT
            assert [commit for commit, _ in setup.markers] == [True]
        finally:
            await coordinator.stop()

    asyncio.run(run())


def test_an_end_deciding_before_a_producer_id_allocation_does_not_overwrite_the_timers_abort_made_meanwhile():
    """Transaction protocol v2 at the last epoch: the end waits for the next producer id; meanwhile the timer aborts
    the transaction (bumping the epoch). The end then writes nothing over that abort, and neither it nor the
    producer's retry is answered as committed (the retry, one epoch below the abort's, is Kafka's retry of an end:
    a commit against a completed abort is INVALID_TXN_STATE)."""
    async def run() -> None:
        setup = Setup()
        coordinator = setup.coordinator
        await coordinator.start(run_timers=False)
        try:
            pid, _ = await setup.begin(5)
            meta = coordinator.txns[TID]
            last = 32766   # Kafka's Short.MaxValue - 1: a v2 end that bumps to it allocates the next producer id
            coordinator.txns[TID] = meta.replace(producer_epoch=last, pending=False)
            setup.allocation.clear()
            end = asyncio.ensure_future(setup.call(26, 5, transactional_id=TID, producer_id=pid, producer_epoch=last,
                                                   committed=True))
            await setup.settle()
            assert not end.done()   # waiting for the producer id
            setup.now += TIMEOUT_MS + 1
            assert coordinator.abort_timed_out() == 1
            await setup.settle()
            assert coordinator.txns[TID].state == TxnState.COMPLETE_ABORT
            setup.allocation.set()
            answer = await end
            await setup.settle()
            assert answer.error_code != 0
            assert coordinator.txns[TID].state == TxnState.COMPLETE_ABORT
            assert [commit for commit, _ in setup.markers] == [False]
            retry = await setup.call(26, 5, transactional_id=TID, producer_id=pid, producer_epoch=last,
                                     committed=True)
            assert retry.error_code == E.INVALID_TXN_STATE
        finally:
            await coordinator.stop()

    asyncio.run(run())


def test_a_request_waiting_for_the_previous_transactions_markers_while_the_coordinator_resigns_is_told_not_coordinator():
    async def run() -> None:
        setup = Setup()
        coordinator = setup.coordinator
        release = asyncio.Event()
        sent = coordinator.send_markers

        async def held_markers(*args: Any) -> dict[tuple[str, int], int]:
            await release.wait()
            return await sent(*args)

        coordinator.send_markers = held_markers
        await coordinator.start(run_timers=False)
        try:
            pid, epoch = await setup.begin(5)
            end = await setup.call(26, 5, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                   committed=True)
            assert end.error_code == 0
            # the producer's next transaction ends while the first one's markers are written
            following = asyncio.ensure_future(setup.call(26, 5, transactional_id=TID, producer_id=pid,
                                                         producer_epoch=end.producer_epoch, committed=False))
            await setup.settle()
            assert not following.done()
            # this broker stops leading the id's __transaction_state partition: what move_leadership does (this
            # coordinator keeps no log, so its runtime is told it owns nothing)
            coordinator.runtime.owns = lambda key: False   # type: ignore[method-assign]
            coordinator._unload({0})
            answer = await following
            assert answer.error_code == E.NOT_COORDINATOR
        finally:
            release.set()
            await coordinator.stop()

    asyncio.run(run())
