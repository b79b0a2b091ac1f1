"""The transaction coordinator while a committed transaction's markers are being written (in process, the markers
held back by the test): under transaction protocol v2 the producer already has the bumped epoch, and the next
transaction's EndTxn with it is told CONCURRENT_TRANSACTIONS (Kafka's pending transition to CompleteCommit, checked
before the epoch), not PRODUCER_FENCED (which the Java client's fault run met: an abort right after a commit fenced
the producer on a 3-node cluster); and with ``klog.transaction.completion.wait.ms`` such a request waits for the
markers and is answered for the completed transaction."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from klog.broker.transactions.coordinator import TransactionCoordinator
from klog.metadata.config import BrokerConfig
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode as E

TID = "completion"


class OneNode:
    """What the coordinator asks of its broker: node 1 leads partition 0 of topic ``t``."""

    def __init__(self, wait_ms: int) -> None:
        self.config = BrokerConfig({"klog.transaction.completion.wait.ms": wait_ms})
        self.node_id, self.host, self.port, self.listener_name = 1, "127.0.0.1", 9092, "PLAINTEXT"

    def partition_count(self, topic: str) -> int | None:
        return 1 if topic == "t" else None

    def partition_leader_endpoint(self, topic: str, partition: int, listener: str) -> tuple[int, str, int]:
        return (self.node_id, self.host, self.port)


async def _coordinator(wait_ms: int) -> tuple[TransactionCoordinator, asyncio.Event, list[bool]]:
    """A started coordinator whose markers are written (``written`` gets commit/abort) once ``release`` is set."""
    release, written = asyncio.Event(), []

    async def send_markers(node: int, host: str, port: int, partitions: list[tuple[str, int]], *args: Any
                           ) -> dict[tuple[str, int], int]:
        await release.wait()
        written.append(bool(args[2]))
        return {tp: 0 for tp in partitions}

    ids = iter(range(1000, 2000))

    async def allocate() -> int:
        return next(ids)

    coordinator = TransactionCoordinator(OneNode(wait_ms), allocate_producer_id=allocate, send_markers=send_markers,
                                         persist=False)
    await coordinator.start(run_timers=False)
    return coordinator, release, written


async def _call(coordinator: TransactionCoordinator, api_key: int, version: int, **body: Any) -> Any:
    return await coordinator.handle(SimpleNamespace(api_key=api_key, api_version=version), Struct(**body))


async def _commit_one(coordinator: TransactionCoordinator) -> tuple[int, int]:
    """InitProducerId, a partition added by its leader (v2), EndTxn v5 commit: (producer id, the bumped epoch)."""
    init = await _call(coordinator, 22, 5, transactional_id=TID, transaction_timeout_ms=60000, producer_id=-1,
                       producer_epoch=-1)
    assert init.error_code == E.NONE, init
    added = await _call(coordinator, 24, 5, transactions=[Struct(
        transactional_id=TID, producer_id=init.producer_id, producer_epoch=init.producer_epoch, verify_only=False,
        topics=[Struct(name="t", partitions=[0])])])
    assert added.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 0
    ended = await _call(coordinator, 26, 5, transactional_id=TID, producer_id=init.producer_id,
                        producer_epoch=init.producer_epoch, committed=True)
    assert (ended.error_code, ended.producer_epoch) == (E.NONE, init.producer_epoch + 1), ended
    return init.producer_id, ended.producer_epoch


def test_the_next_transactions_end_txn_while_markers_are_written_is_concurrent_transactions_not_fenced() -> None:
    async def scenario() -> None:
        coordinator, release, written = await _coordinator(0)
        try:
            pid, epoch = await _commit_one(coordinator)
            # the producer's next transaction ends (an abort; nothing of it reached the coordinator) with the epoch
            # it was given, while the commit's markers are still held back
            early = await _call(coordinator, 26, 5, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                committed=False)
            assert early.error_code == E.CONCURRENT_TRANSACTIONS, early
            # a retry of the commit (the epoch below) is told the same while the markers are written
            retry = await _call(coordinator, 26, 5, transactional_id=TID, producer_id=pid, producer_epoch=epoch - 1,
                                committed=True)
            assert retry.error_code == E.CONCURRENT_TRANSACTIONS, retry
            release.set()
            while coordinator._completing:
                await asyncio.sleep(0.001)
            assert written == [True]
            again = await _call(coordinator, 26, 5, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                committed=False)
            assert (again.error_code, again.producer_epoch) == (E.NONE, epoch + 1), again
        finally:
            release.set()
            await coordinator.stop()

    asyncio.run(scenario())


def test_with_the_completion_wait_the_next_transactions_end_txn_is_answered_once_the_markers_are_written() -> None:
    async def scenario() -> None:
        coordinator, release, written = await _coordinator(5000)
        try:
            pid, epoch = await _commit_one(coordinator)
            early = asyncio.ensure_future(_call(coordinator, 26, 5, transactional_id=TID, producer_id=pid,
                                                producer_epoch=epoch, committed=False))
            await asyncio.sleep(0.05)
            assert not early.done() and written == []   # held while the markers are
            release.set()
            answer = await asyncio.wait_for(early, 5)
            assert written[0] is True   # the commit's markers first, then this abort (of an empty transaction)
            assert (answer.error_code, answer.producer_epoch) == (E.NONE, epoch + 1), answer
        finally:
            release.set()
            await coordinator.stop()

    asyncio.run(scenario())


def test_markers_that_wait_for_nothing_follow_the_end_txn_answer_and_end_the_completion_in_their_turn() -> None:
    """Markers written at once (a partition this broker leads, not replicated): written on the loop's turn after the
    EndTxn answer's send (not before it leaves), the complete state with them, and in that same turn the id is
    complete: the next transaction's EndTxn (no completion wait) is answered for it, not CONCURRENT_TRANSACTIONS
    (as it was while a task per transaction ended a turn later)."""
    async def scenario() -> None:
        coordinator, release, written = await _coordinator(0)
        release.set()   # send_markers answers without waiting
        try:
            pid, epoch = await _commit_one(coordinator)
            assert written == []   # the EndTxn answer is sent on the next turn, the markers after it
            await asyncio.sleep(0)
            assert written == []
            await asyncio.sleep(0)
            assert written == [True]
            assert coordinator.txns[TID].state.kafka_name == "CompleteCommit"
            again = await _call(coordinator, 26, 5, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                committed=False)
            assert (again.error_code, again.producer_epoch) == (E.NONE, epoch + 1), again
        finally:
            await coordinator.stop()

    asyncio.run(scenario())


def test_a_completion_cancelled_before_its_turn_writes_nothing() -> None:
    """The coordinator stops (or unloads the id) between EndTxn and the markers' turn: nothing is written, and the
    stop does not wait for it."""
    async def scenario() -> None:
        coordinator, release, written = await _coordinator(0)
        release.set()
        await _commit_one(coordinator)
        await coordinator.stop()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert written == [] and not coordinator._completing
        assert coordinator.txns[TID].state.kafka_name == "PrepareCommit"

    asyncio.run(scenario())
