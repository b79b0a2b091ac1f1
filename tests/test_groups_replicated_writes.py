"""The group coordinator's writes to ``__consumer_offsets`` are acks=all writes (Kafka's coordinator appends with
requiredAcks=-1), in process with a broker context whose ISR the test controls: an OffsetCommit (and any group
request that wrote) is answered only once the ISR has the write, a committed offset is visible only then, and a
write that does not reach the ISR or is refused before its append is answered with Kafka's mapping
(COORDINATOR_NOT_AVAILABLE: the client retries; NOT_COORDINATOR: it looks the coordinator up again)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from klog.broker.groups import GroupCoordinator
from klog.broker.groups.api import AppendRefused
from klog.protocol.errors import ErrorCode as E

from groups_support import Client, FakeClock, TestContext, run_async_tests

COMMIT, FETCH, JOIN, SYNC, TXN_COMMIT = 8, 9, 11, 14, 28


class ReplicatedContext(TestContext):
    """A broker context whose ``__consumer_offsets`` appends are kept in memory and whose ISR answers each write
    when the test says so (``settle``), or refuses appends (``refuse``)."""

    __test__ = False

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.next_offset = 0
        self.waiting: list[tuple[int, asyncio.Future[int]]] = []
        self.refuse: int | None = None
        #: the ISR's outcome for every write at once (None: each waits for ``settle``)
        self.auto: int | None = None

    def ensure_internal_topic(self, topic: str, num_partitions: int, configs: dict[str, str]) -> None:
        if topic not in self.topics:   # the broker context's contract: created only by the async call
            raise OSError(f"the internal topic {topic} is not created yet")

    async def ensure_internal_topic_async(self, topic: str, num_partitions: int, configs: dict[str, str], *,
                                          replication_factor: int | None = None) -> None:
        self.topics.setdefault(topic, num_partitions)

    def partition_log(self, topic: str, partition: int) -> None:
        return None   # nothing to load at start

    def append(self, topic: str, partition: int, records: bytes, *, producer: tuple[int, int] | None = None,
               verification: object | None = None) -> Any:
        if self.refuse is not None:
            raise AppendRefused(self.refuse, "refused by the test")
        base = self.next_offset
        self.next_offset += 1
        return SimpleNamespace(base_offset=base, last_offset=base)

    def wait_replicated(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.auto is not None:
            future.set_result(self.auto)
        else:
            self.waiting.append((last_offset, future))
        return future

    def settle(self, code: int = 0) -> None:
        """The ISR's outcome for every write waiting now."""
        for _, future in self.waiting:
            future.set_result(code)
        self.waiting.clear()


async def _coordinator() -> tuple[GroupCoordinator, ReplicatedContext, Client]:
    ctx = ReplicatedContext(topics={"t": 2})
    coord = GroupCoordinator(ctx, clock=FakeClock(), persist=True)
    await coord.start(run_timers=False)
    return coord, ctx, Client(coord)


def _commit(client: Client, offset: int) -> Any:
    return client.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                       topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=offset,
                                                               committed_leader_epoch=-1, committed_metadata="")])])


async def _committed(client: Client) -> int:
    answer = await client.call(FETCH, 7, group_id="g", require_stable=False,
                               topics=[dict(name="t", partition_indexes=[0])])
    return answer.topics[0].partitions[0].committed_offset


async def _until_waiting(ctx: ReplicatedContext, count: int = 1) -> None:
    for _ in range(100):
        if len(ctx.waiting) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{count} write(s) never waited for the ISR: {ctx.waiting}")


async def test_an_offset_commit_is_answered_and_visible_only_once_the_isr_has_it() -> None:
    coord, ctx, client = await _coordinator()
    commit = asyncio.ensure_future(_commit(client, 42))
    await _until_waiting(ctx)
    assert not commit.done()                    # no answer while the ISR does not have it
    assert await _committed(client) == -1       # nor is it visible to OffsetFetch
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == 0
    assert await _committed(client) == 42
    await coord.stop()


async def test_a_commit_that_does_not_reach_the_isr_is_answered_as_kafka_maps_it_and_stays_invisible() -> None:
    coord, ctx, client = await _coordinator()
    for isr_outcome, answered in ((E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
                                  (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
                                  (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)):
        commit = asyncio.ensure_future(_commit(client, 7))
        await _until_waiting(ctx)
        ctx.settle(isr_outcome)
        assert (await commit).topics[0].partitions[0].error_code == answered, isr_outcome
        assert await _committed(client) == -1
    await coord.stop()


async def test_a_commit_refused_before_its_append_is_answered_at_once_and_stays_invisible() -> None:
    coord, ctx, client = await _coordinator()
    for refusal, answered in ((E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                              (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)):
        ctx.refuse = refusal
        answer = await asyncio.wait_for(_commit(client, 9), 5)
        assert answer.topics[0].partitions[0].error_code == answered, refusal
        assert not ctx.waiting
    ctx.refuse = None
    assert await _committed(client) == -1
    await coord.stop()


async def test_a_classic_group_gets_its_assignment_only_once_the_isr_has_the_group_metadata() -> None:
    coord, ctx, client = await _coordinator()
    from test_groups_classic import join_new, settle

    ctx.auto = 0   # the new group's first record reaches the ISR at once
    parked = await join_new(client)
    await settle()
    coord.timer.poll()   # the initial rebalance delay (0) passes
    joined = await parked
    assert joined.error_code == 0 and joined.leader == joined.member_id
    ctx.auto = None
    sync = asyncio.ensure_future(client.call(
        SYNC, 5, group_id="g", generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name=joined.protocol_name,
        assignments=[dict(member_id=joined.member_id, assignment=b"assigned")]))
    await _until_waiting(ctx)
    assert not sync.done()
    ctx.settle(E.REQUEST_TIMED_OUT)
    answer = await sync
    assert (answer.error_code, bytes(answer.assignment)) == (E.COORDINATOR_NOT_AVAILABLE, b"")
    await coord.stop()


def _txn_commit(client: Client, offset: int) -> Any:
    return client.call(TXN_COMMIT, 3, transactional_id="tx", group_id="g", producer_id=5, producer_epoch=0,
                       generation_id=-1, member_id="", group_instance_id=None,
                       topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=offset,
                                                               committed_leader_epoch=-1, committed_metadata="")])])


async def _stable(client: Client) -> tuple[int, int]:
    """OffsetFetch with RequireStable (KIP-447): (error code, committed offset) of the group's t-0."""
    answer = await client.call(FETCH, 7, group_id="g", require_stable=True,
                               topics=[dict(name="t", partition_indexes=[0])])
    partition = answer.topics[0].partitions[0]
    return partition.error_code, partition.committed_offset


async def test_transactional_offsets_are_pending_while_their_write_waits_for_the_isr_and_not_once_it_failed() -> None:
    """Kafka's prepareTxnOffsetCommit: a TxnOffsetCommit's offsets are pending from before its write, so an
    OffsetFetch with RequireStable made while the write waits for the ISR is answered UNSTABLE_OFFSET_COMMIT, not
    with the committed offset the transaction replaces (a consumer newly given the partition would read those records
    again: franz-go's TestTxnEtl saw them twice); a write that failed is not pending, one that succeeded is until
    its transaction's marker."""
    coord, ctx, client = await _coordinator()
    ctx.auto = 0
    await _commit(client, 3)
    ctx.auto = None
    assert await _stable(client) == (E.NONE, 3)
    commit = asyncio.ensure_future(_txn_commit(client, 10))
    await _until_waiting(ctx)
    assert await _stable(client) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    ctx.settle(E.REQUEST_TIMED_OUT)
    assert (await commit).topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert await _stable(client) == (E.NONE, 3)
    commit = asyncio.ensure_future(_txn_commit(client, 11))
    await _until_waiting(ctx)
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == E.NONE
    assert await _stable(client) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    coord.complete_transaction(coord.topic.partition_for("g"), 5, True)
    assert await _stable(client) == (E.NONE, 11)
    await coord.stop()


def _commit_to(client: Client, partition: int, offset: int) -> Any:
    return client.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                       topics=[dict(name="t", partitions=[dict(partition_index=partition, committed_offset=offset,
                                                               committed_leader_epoch=-1, committed_metadata="")])])


def _recording(ctx: ReplicatedContext) -> list[bytes]:
    """The record batches ``ctx`` appends from now on, in log order."""
    batches: list[bytes] = []
    append = ctx.append

    def recorded(topic: str, partition: int, records: bytes, **kw: Any) -> Any:
        batches.append(bytes(records))
        return append(topic, partition, records, **kw)

    ctx.append = recorded   # type: ignore[method-assign]
    return batches


def _written_after(batches: list[bytes], first: int, partition: int) -> bool:
    """A record keyed by group g's offset of t-``partition`` (a commit or its tombstone) in a batch past
    ``first``."""
    from klog.broker.groups import records as R

    key = R.offset_commit_tombstone("g", "t", partition)[0]
    return any(key in batch for batch in batches[first + 1:])


async def _commit_waiting_for_the_isr(ctx: Any, client: Any) -> asyncio.Future[Any]:
    """An OffsetCommit of offset 42 to t-0 whose write waits for the ISR (``ctx.settle(0)`` lets it through); the
    writes after it reach the ISR at once."""
    ctx.auto = None
    commit = asyncio.ensure_future(_commit(client, 42))
    await _until_waiting(ctx)
    ctx.auto = 0
    return commit


async def test_a_group_deleted_while_a_commit_waits_for_the_isr_does_not_come_back_with_the_offset() -> None:
    """DeleteGroups runs while an OffsetCommit waits for the ISR: its tombstones come after the commit in the log,
    so the commit's offset is not applied when its write ends (it was, into the deleted group's offsets: the
    group came back with it and a consumer's position moved past the deletion on this coordinator only)."""
    coord, ctx, client = await _coordinator()
    ctx.auto = 0
    assert (await _commit(client, 5)).topics[0].partitions[0].error_code == 0
    commit = await _commit_waiting_for_the_isr(ctx, client)
    assert (await client.call(42, 2, groups_names=["g"])).results[0].error_code == 0
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == 0   # durable, then deleted
    assert "g" not in coord.groups and coord.offsets.group_offsets("g") == {}
    assert await _committed(client) == -1
    assert (await _commit_to(client, 1, 7)).topics[0].partitions[0].error_code == 0   # a new "simple" group
    assert await _committed(client) == -1
    await coord.stop()


async def test_deleting_a_group_tombstones_the_partition_a_commit_in_flight_wrote() -> None:
    """The group has an offset of t-1 and a commit of t-0 waits for the ISR when DeleteGroups runs: a tombstone of
    t-0 follows the commit in the log (there was none: a failover loaded the deleted group again with the offset)
    and the offset is not applied (it was, into the forgotten group's offsets, without a group)."""
    coord, ctx, client = await _coordinator()
    ctx.auto = 0
    assert (await _commit_to(client, 1, 5)).topics[0].partitions[0].error_code == 0
    batches = _recording(ctx)
    commit = await _commit_waiting_for_the_isr(ctx, client)
    assert (await client.call(42, 2, groups_names=["g"])).results[0].error_code == 0
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == 0
    assert _written_after(batches, 0, 0)
    assert "g" not in coord.groups and coord.offsets.group_offsets("g") == {}
    await coord.stop()


async def test_an_offset_delete_while_a_commit_waits_for_the_isr_leaves_no_offset() -> None:
    """OffsetDelete of t-0 while a commit of t-0 waits for the ISR: its tombstone is later in the log, so the
    commit's offset is not applied when its write ends (it was: OffsetFetch answered the deleted offset here and
    none after a failover)."""
    coord, ctx, client = await _coordinator()
    ctx.auto = 0
    assert (await _commit(client, 5)).topics[0].partitions[0].error_code == 0
    commit = await _commit_waiting_for_the_isr(ctx, client)
    deleted = await client.call(47, 0, group_id="g", topics=[dict(name="t", partitions=[dict(partition_index=0)])])
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == 0
    assert await _committed(client) == -1
    await coord.stop()


async def test_a_topic_deleted_while_a_commit_of_it_waits_for_the_isr_leaves_no_offset() -> None:
    """The topic of a commit waiting for the ISR is deleted: its partition's offset is tombstoned after the commit
    (there was no tombstone: the commit was not in memory yet) and not applied when the write ends (it was: the
    topic created again started at the old topic's offset)."""
    coord, ctx, client = await _coordinator()
    batches = _recording(ctx)
    commit = await _commit_waiting_for_the_isr(ctx, client)
    coord.on_topics_deleted({"t"})
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == 0
    assert _written_after(batches, 0, 0)
    assert coord.offsets.group_offsets("g") == {}
    await coord.stop()


class LedContext(ReplicatedContext):
    """A quorum member's context: the ``__consumer_offsets`` partitions this broker leads are ``led`` (what its
    metadata image says; the test moves them, as a leader change would)."""

    __test__ = False

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.led: set[int] = set()

    def led_partitions(self, topic: str) -> set[int] | None:
        return set(self.led)


async def test_a_coordinator_that_resigned_while_a_commit_waits_for_the_isr_keeps_nothing_of_the_group() -> None:
    """The group's __consumer_offsets partition moves to another broker while an OffsetCommit waits for the ISR:
    the old coordinator unloaded the group, and the commit's end applies nothing here (the new leader loads the
    offset from the log). Without the re-check after the wait, the commit created the group again on the old
    coordinator with its offset, served to nobody and never unloaded."""
    ctx = LedContext(topics={"t": 2})
    coord = GroupCoordinator(ctx, clock=FakeClock(), persist=True)
    ctx.led = set(range(coord.runtime.log.num_partitions))
    await coord.topic.ensure_topic_async()
    await coord.start(run_timers=False)
    assert coord.owned_partitions == ctx.led
    client = Client(coord)
    ctx.auto = 0
    assert (await _commit(client, 5)).topics[0].partitions[0].error_code == 0
    commit = await _commit_waiting_for_the_isr(ctx, client)
    ctx.led.discard(coord.runtime.log.partition_for("g"))   # another broker leads the group's partition now
    coord.on_metadata_published()
    assert "g" not in coord.groups and coord.offsets.group_offsets("g") == {}
    ctx.settle(0)
    assert (await commit).topics[0].partitions[0].error_code == 0   # in the log the new coordinator loads
    assert "g" not in coord.groups and coord.offsets.group_offsets("g") == {}
    fetched = await client.call(FETCH, 8, groups=[dict(group_id="g", topics=None)])
    assert fetched.groups[0].error_code == E.NOT_COORDINATOR
    await coord.stop()


async def _two_commits_waiting(ctx: Any, client: Any, first: int, second: int
                               ) -> list[tuple[asyncio.Future[Any], asyncio.Future[Any]]]:
    """OffsetCommits of offsets ``first`` then ``second`` to t-0, both written and waiting for the ISR: (the
    commit's answer, its write's wait, which the test ends) for each, in order."""
    commits = []
    for count, offset in enumerate((first, second), 1):
        commits.append(asyncio.ensure_future(_commit(client, offset)))
        await _until_waiting(ctx, count)
    writes = [write for _, write in ctx.waiting]
    ctx.waiting.clear()
    return list(zip(commits, writes, strict=True))


async def test_a_commit_whose_write_reached_the_isr_stays_when_a_later_commit_of_the_partition_fails() -> None:
    """Two commits of t-0 wait for the ISR: the first reaches it, the second does not; OffsetFetch answers the
    first's offset (the log has it; only a tombstone after it may hide it), and a later commit applied first is
    not replaced by an earlier one."""
    coord, ctx, client = await _coordinator()
    (first, first_write), (second, second_write) = await _two_commits_waiting(ctx, client, 10, 20)
    first_write.set_result(0)
    second_write.set_result(E.REQUEST_TIMED_OUT)
    assert (await first).topics[0].partitions[0].error_code == 0
    assert (await second).topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert await _committed(client) == 10
    (third, third_write), (fourth, fourth_write) = await _two_commits_waiting(ctx, client, 30, 40)
    fourth_write.set_result(0)
    assert (await fourth).topics[0].partitions[0].error_code == 0
    third_write.set_result(0)
    assert (await third).topics[0].partitions[0].error_code == 0
    assert await _committed(client) == 40
    await coord.stop()


run_async_tests(globals())
