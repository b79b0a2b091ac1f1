"""The transaction coordinator's hot paths give what the general ones give:

- ``records.encode_value`` packs ``TransactionLogValue`` v0/v1 itself: byte for byte what the schema's compiled
  encoder writes (so ``kafka-dump-log --transaction-log-decoder`` and klog's own replay read it alike), over states,
  producer ids, tagged fields at and off their defaults, and partition sets of any shape;
- ``handlers.answer_now`` runs an asynchronous handler in the caller's turn: its answer when it waits for nothing,
  else a coroutine that finishes it, with the handler's context variables its own from its first step to its last
  (the coordinator runtime's per-request write list), and a cancellation reaching the handler.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import types

import pytest

from klog.broker.handlers import answer_now
from klog.broker.transactions import records as R

TOPICS = ("t", "txn-bench", "__consumer_offsets", "tópico-ü", "x" * 200)


def _random_metadata(rnd: random.Random) -> R.TxnMetadata:
    partitions = {(rnd.choice(TOPICS), rnd.randrange(0, 300)) for _ in range(rnd.choice((0, 0, 1, 2, 7, 60)))}
    return R.TxnMetadata(
        "tid", rnd.choice((-1, 0, 5, 2**40, 2**63 - 1)), rnd.choice((-1, 0, 3, 32766, 32767)),
        rnd.choice((1, 60000, 2**31 - 1)), rnd.choice(list(R.TxnState)), partitions,
        rnd.choice((-1, 0, 1796670591549)), rnd.choice((-1, 1796670591549)),
        previous_producer_id=rnd.choice((-1, 4)), next_producer_id=rnd.choice((-1, 0, 7, 2**50)),
        client_transaction_version=rnd.choice((0, 1, 2)))


@pytest.mark.parametrize("version", [0, 1])
def test_encode_value_is_the_schema_encoders_bytes(version: int) -> None:
    rnd = random.Random(version)
    for _ in range(2000):
        meta = _random_metadata(rnd)
        previous = rnd.choice((-1, 0, 9, meta.producer_id))
        packed = R.encode_value(meta, version, previous)
        assert packed == R.encode_value_generic(meta, version, previous), (meta, previous)
        tid, back = R.decode(R.encode_key("tid"), packed)
        assert tid == "tid" and back is not None
        assert (back.producer_id, back.producer_epoch, back.state, back.partitions, back.start_ms,
                back.last_update_ms) == (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions,
                                         meta.start_ms, meta.last_update_ms)
        if version >= 1:
            assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (
                previous, meta.next_producer_id, meta.client_transaction_version)


def test_encode_value_of_a_partition_set_changed_in_place() -> None:
    """The partitions' bytes are cached by their contents, never by the set object (which a state may share)."""
    meta = R.TxnMetadata("tid", 1, 0, 60000, R.TxnState.ONGOING, {("t", 0)})
    first = R.encode_value(meta, 1, 1)
    meta.partitions.add(("t", 1))
    second = R.encode_value(meta, 1, 1)
    assert first != second and second == R.encode_value_generic(meta, 1, 1)


CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="caller")


async def _handler(wait: asyncio.Future[str] | None, seen: list[str]) -> str:
    CURRENT.set("handler")
    if wait is not None:
        try:
            got = await wait
        finally:
            seen.append(CURRENT.get())
        return f"{got} after waiting, {CURRENT.get()}"
    return f"at once, {CURRENT.get()}"


def test_answer_now_answers_at_once_in_a_context_of_its_own() -> None:
    answer = answer_now(_handler(None, []))
    assert answer == "at once, handler"
    assert CURRENT.get() == "caller"   # the handler's variable stayed its own


def test_answer_now_finishes_a_handler_that_waits_in_its_own_context() -> None:
    async def run() -> None:
        wait: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        seen: list[str] = []
        rest = answer_now(_handler(wait, seen))
        assert type(rest) is types.CoroutineType   # what the connection awaits for a synchronous handler's slow path
        task = asyncio.get_running_loop().create_task(rest)
        await asyncio.sleep(0)
        assert not task.done()
        wait.set_result("answer")
        assert await task == "answer after waiting, handler"
        assert seen == ["handler"] and CURRENT.get() == "caller"

    asyncio.run(run())


def test_answer_now_passes_a_cancellation_to_the_handler() -> None:
    async def run() -> None:
        wait: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        seen: list[str] = []
        rest = answer_now(_handler(wait, seen))
        assert type(rest) is types.CoroutineType
        task = asyncio.get_running_loop().create_task(rest)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["handler"]   # its finally ran, in its own context
        assert wait.cancelled()

    asyncio.run(run())
