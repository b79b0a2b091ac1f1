"""A follower's idempotent-producer snapshot never claims batches whose producers it has not replayed yet: the
leader's batches are appended on a worker thread and replayed into the producer state after, so a snapshot taken
in between (the periodic save runs on the event loop meanwhile) must cover the log only up to where that append
started. Otherwise a restart replays from past those batches, and the producer's next sequence looks out of order
(OUT_OF_ORDER_SEQUENCE after failover; found by the fault suite)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.broker.replication.fetcher import ReplicaFetcher
from klog.broker.replication.follower import FollowerPartition
from klog.broker.replication.manager import FollowedPartition, NativeLogView
from klog.controller.topics import CreatableTopic
from klog.records import encode_batch

KEY = ("t", 0)


def _idempotent_batch(sequence: int, base_offset: int = 0) -> bytes:
    return bytes(encode_batch([{"value": b"v%d" % sequence}], producer_id=7, producer_epoch=0,
                              base_sequence=sequence, base_offset=base_offset))


async def _state_with_producer_7_at_sequence_0(tmp_path: Path) -> BrokerState:
    """A broker (on the running loop) with topic t, whose partition 0 holds producer 7's batch of sequence 0. Its
    fetchers append on a worker thread whatever the size (where a held log can wait)."""
    state = BrokerState(BrokerConfig({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0",
                                      "klog.replica.append.inline.bytes": 0}),
                        asyncio.get_running_loop())
    await state.controller_apis.create([CreatableTopic("t", 1)])
    first = _idempotent_batch(0)
    state.append("t", 0, first)
    state.producers.replay("t", 0, first, 0)
    return state


class _HeldLog:
    """The partition's real log whose follower append waits for ``release`` (on the worker thread), before it
    appends or, ``appended_first``, after it appended (before the fetcher replays the batch's producers)."""

    def __init__(self, real: Any, release: threading.Event, *, appended_first: bool = False) -> None:
        self.real, self.release, self.appended_first = real, release, appended_first

    def append_as_follower(self, records: Any) -> Any:
        if self.appended_first:
            done = self.real.append_as_follower(records)
            assert self.release.wait(30)
            return done
        assert self.release.wait(30)
        return self.real.append_as_follower(records)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_snapshot_taken_during_a_follower_append_covers_the_log_only_up_to_where_it_started(tmp_path: Path) -> None:
    async def scenario() -> None:
        state = await _state_with_producer_7_at_sequence_0(tmp_path)
        release = threading.Event()
        native = state.partitions.get("t", 0)
        before = native.log_end_offset
        held = _HeldLog(native, release, appended_first=True)
        followed = FollowedPartition(KEY, uuid.uuid4(), NativeLogView(held), FollowerPartition(2, 0))
        fetchers = state.replicas.fetchers
        second = _idempotent_batch(1, base_offset=before)
        appending = asyncio.create_task(ReplicaFetcher(fetchers, 2, 0)._append(followed, second, 0, 0))
        while native.log_end_offset == before:
            await asyncio.sleep(0.01)
        # the periodic save, with the batch in the log and its producers not replayed yet
        state.save_producer_state()
        assert state.producers.load()[KEY] == before
        release.set()
        await appending
        assert native.log_end_offset == before + 1
        state.save_producer_state()   # appended and replayed: the snapshot covers the batch
        assert state.producers.load()[KEY] == before + 1

    asyncio.run(scenario())


def test_a_partition_mid_follower_append_takes_no_produce_and_replays_its_producers_though_the_fetcher_stopped(
        tmp_path: Path) -> None:
    """The fault suite's duplicate: a follower became leader while its fetcher was appending the old leader's
    batches; a producer's retry of one of them reached it before their producers were replayed and was appended
    again. Until the append and its replay are done the partition answers NOT_LEADER_OR_FOLLOWER (the client
    retries), and a fetcher cancelled meanwhile still replays what its thread appended."""
    async def scenario() -> None:
        state = await _state_with_producer_7_at_sequence_0(tmp_path)
        release = threading.Event()
        native = state.partitions.get("t", 0)
        followed = FollowedPartition(KEY, uuid.uuid4(), NativeLogView(_HeldLog(native, release)),
                                     FollowerPartition(2, 0))
        fetchers = state.replicas.fetchers
        fetcher = ReplicaFetcher(fetchers, 2, 0)
        second = _idempotent_batch(1, base_offset=native.log_end_offset)
        appending = asyncio.create_task(fetcher._append(followed, second, 0, 0))
        while KEY not in fetchers.appending:
            await asyncio.sleep(0.01)
        assert state.replicas.leader_error("t", 0) == 6   # NOT_LEADER_OR_FOLLOWER while the batch is in flight
        appending.cancel()   # the fetcher stops (the partition became leader): its thread appends anyway
        release.set()
        for _ in range(500):
            if KEY not in fetchers.appending:
                break
            await asyncio.sleep(0.01)
        assert KEY not in fetchers.appending
        assert appending.cancelled()
        assert state.replicas.leader_error("t", 0) == 0
        assert native.log_end_offset == 2
        # a retry of the batch the follower appended is recognised: answered with its offset, not appended again
        code, duplicate = state.producers.check("t", 0, 7, 0, 1, 1)
        assert (code, duplicate is not None and duplicate.base_offset) == (0, 1)

    asyncio.run(scenario())
