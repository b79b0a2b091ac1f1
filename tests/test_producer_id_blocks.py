"""A quorum member's producer id blocks (Kafka's RPCProducerIdManager), pure: ids are handed out in order from
the current block, the next block is asked for once 90% of the current one is used, and it takes over when the
current one runs out."""

from __future__ import annotations

import asyncio

import pytest

from klog.broker.producer_id_blocks import LocalProducerIdManager, ProducerIdBlocks


def test_no_id_until_a_block_arrives_and_the_first_block_is_asked_for_at_once():
    blocks = ProducerIdBlocks()
    assert blocks.take() is None and blocks.wants_block()
    blocks.requesting = True
    assert not blocks.wants_block()   # one request at a time
    blocks.requesting = False
    blocks.on_block(1000, 10)
    assert [blocks.take() for _ in range(3)] == [1000, 1001, 1002]


def test_the_next_block_is_prefetched_at_90_percent_and_takes_over_when_the_current_one_is_used_up():
    blocks = ProducerIdBlocks()
    blocks.on_block(0, 10)
    got = []
    for _ in range(9):
        assert not blocks.wants_block()
        got.append(blocks.take())
    assert blocks.wants_block()   # 9 of 10 handed out
    blocks.on_block(50, 10)
    assert not blocks.wants_block()   # prefetched, not used yet
    got += [blocks.take() for _ in range(3)]
    assert got == [*range(10), 50, 51]
    assert not blocks.wants_block()


def test_an_exhausted_block_without_a_successor_hands_out_nothing():
    blocks = ProducerIdBlocks()
    blocks.on_block(7, 1)
    assert blocks.take() == 7
    assert blocks.take() is None and blocks.wants_block()


def test_a_block_overlapping_the_current_one_is_a_bug():
    blocks = ProducerIdBlocks()
    blocks.on_block(100, 10)
    with pytest.raises(AssertionError):
        blocks.on_block(105, 10)


def test_a_single_voter_commits_a_block_only_when_the_last_one_is_used_up_and_hands_its_ids_out_in_order():
    blocks = iter([(1000, 2), (5000, 2)])
    asked: list[tuple[int, int]] = []

    async def allocate_block() -> tuple[int, int]:
        asked.append(next(blocks))
        return asked[-1]

    async def scenario() -> None:
        ids = LocalProducerIdManager(allocate_block)
        assert asked == []
        assert [await ids.generate(), await ids.generate()] == [1000, 1001] and asked == [(1000, 2)]
        assert await ids.generate() == 5000 and asked == [(1000, 2), (5000, 2)]

    asyncio.run(scenario())


def test_a_single_voter_whose_block_cannot_be_committed_raises_and_asks_again_next_time():
    failures = [OSError(28, "No space left on device")]

    async def allocate_block() -> tuple[int, int]:
        if failures:
            raise failures.pop()
        return (7, 1)

    async def scenario() -> None:
        ids = LocalProducerIdManager(allocate_block)
        with pytest.raises(OSError):
            await ids.generate()
        assert await ids.generate() == 7

    asyncio.run(scenario())


def test_callers_waiting_on_one_block_commit_share_it_instead_of_each_committing_one():
    asked: list[int] = []

    async def allocate_block() -> tuple[int, int]:
        asked.append(len(asked))
        await asyncio.sleep(0.01)   # the commit: other InitProducerId requests arrive meanwhile
        return (100 * len(asked), 3)

    async def scenario() -> list[int]:
        ids = LocalProducerIdManager(allocate_block)
        return list(await asyncio.gather(*(ids.generate() for _ in range(3))))

    assert sorted(asyncio.run(scenario())) == [100, 101, 102] and asked == [0]
