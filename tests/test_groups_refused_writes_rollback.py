"""A group change whose ``__consumer_offsets`` records are refused (a partition below min.insync.replicas, a lost
leadership: the append raises before appending) leaves the group as it was, as Kafka's CoordinatorRuntime reverts
its state to the last written offset: a ConsumerGroupHeartbeat (and a streams group's) that changed the group in
memory before its write restores it, timers included; a fencing (session or rebalance timeout, leave) writes before
it changes anything, and a timer's fencing whose write was refused tries again (Kafka's timer retry). A heartbeat that
converts a classic group (an empty one, or one with members: the online upgrade) and is refused leaves the classic
group in place, its members' sessions and parked requests as they were."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from klog.broker.groups import GroupCoordinator
from klog.broker.groups.classic_group import ClassicGroupState
from klog.broker.groups.consumer import ConsumerGroup
from klog.broker.groups.modern import FENCE_RETRY_BACKOFF_MS
from klog.protocol.errors import ErrorCode as E

import test_streams_groups as S
from groups_support import Client, FakeClock, run_async_tests
from test_groups_consumer import Member
from test_groups_migration import JOIN, ClassicMember, classic_group, consumer_heartbeat
from test_groups_migration import SESSION as CLASSIC_SESSION
from test_groups_replicated_writes import ReplicatedContext, _commit, _committed, _until_waiting

SESSION = 10000
SYNC, HEARTBEAT = 14, 12
SHARE_HEARTBEAT = 76
LIST_GROUPS, DESCRIBE_GROUPS, COMMIT, CONSUMER_DESCRIBE = 16, 15, 8, 69


async def _coordinator(topics: dict[str, int] | None = None, **config: Any
                       ) -> tuple[GroupCoordinator, ReplicatedContext, FakeClock]:
    clock = FakeClock()
    ctx = ReplicatedContext(topics=topics or {"t": 4}, **{
        "group.consumer.assignment.interval.ms": 0, "group.consumer.session.timeout.ms": SESSION,
        "group.consumer.min.session.timeout.ms": 1000, **config})
    coord = GroupCoordinator(ctx, clock=clock, persist=True)
    await coord.start(run_timers=False)
    ctx.auto = 0   # the ISR has every write at once
    return coord, ctx, clock


def _state(group: Any) -> tuple[Any, ...]:
    """What a heartbeat may change of a consumer group, comparable."""
    return (dict(group.members), {k: dict(v) for k, v in group.target.items()}, dict(group.partition_epochs),
            dict(group.static_members), dict(group.subscription_metadata), group.group_epoch, group.assignment_epoch,
            group.last_assignment_ms, sorted(group.session_keys))


async def _group_of_one() -> tuple[Any, Any, Any, Member, Any]:
    """A coordinator whose group g has one member, a, joined with its partitions (two heartbeats): (coordinator,
    context, clock, a, the group)."""
    coord, ctx, clock = await _coordinator()
    a = Member(coord, "a")
    for _ in range(2):
        assert (await a.heartbeat()).error_code == E.NONE
    return coord, ctx, clock, a, coord.groups["g"]


async def test_a_consumer_heartbeat_whose_records_are_refused_leaves_the_group_as_it_was() -> None:
    coord, ctx, clock, a, group = await _group_of_one()
    before, written = _state(group), coord.records_written
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    b = Member(coord, "b")
    r = await b.heartbeat()
    assert r.error_code != E.NONE
    # nothing of b's join stays: no member, no new epoch, no target, no partition taken from a
    assert _state(group) == before and coord.records_written == written
    ctx.refuse = None
    # a keeps every partition (before: the ghost b, with no session timer, held half of them for ever)
    for _ in range(3):
        clock.now += SESSION // 2
        coord.timer.poll()
        assert (await a.heartbeat()).error_code == E.NONE
    assert a.partitions(ctx) == {0, 1, 2, 3} and list(group.members) == [a.member_id]
    # b's retry writes its join (before: it found nothing to change and wrote nothing)
    assert (await b.heartbeat()).error_code == E.NONE
    assert coord.records_written > written and b.member_id in group.members
    await coord.stop()


async def test_a_static_member_replaced_by_a_refused_rejoin_keeps_its_session_timer() -> None:
    coord, ctx, clock = await _coordinator()
    s = Member(coord, "s", instance="i1")
    for _ in range(2):
        assert (await s.heartbeat()).error_code == E.NONE
    assert (await s.heartbeat(member_epoch=-2)).error_code == E.NONE   # leaves for now, keeps its instance id
    group = coord.groups["g"]
    before = _state(group)
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    again = Member(coord, "s2", instance="i1")
    assert (await again.heartbeat()).error_code != E.NONE
    assert _state(group) == before and s.member_id in group.session_keys
    ctx.refuse = None
    # the departed static member's session still ends (before: the refused rejoin held the instance id for ever)
    clock.now += SESSION + 1
    coord.timer.poll()
    assert not group.members
    await coord.stop()


async def test_a_classic_member_join_whose_records_are_refused_leaves_the_consumer_group_as_it_was() -> None:
    coord, ctx, clock, a, group = await _group_of_one()
    before, written = _state(group), coord.records_written
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    c = ClassicMember(coord, "c")
    assert (await c.join()).error_code != E.NONE
    assert _state(group) == before and coord.records_written == written
    ctx.refuse = None
    for _ in range(3):   # before: the classic ghost (no session timer) kept half the partitions from a
        clock.now += SESSION // 2
        coord.timer.poll()
        assert (await a.heartbeat()).error_code == E.NONE
    assert a.partitions(ctx) == {0, 1, 2, 3} and list(group.members) == [a.member_id]
    await coord.stop()


async def test_a_consumer_session_timeout_fencing_whose_write_is_refused_keeps_the_member_and_tries_again() -> None:
    coord, ctx, clock = await _coordinator()
    a, b = Member(coord, "a"), Member(coord, "b")
    for _ in range(4):
        await a.heartbeat()
        await b.heartbeat()
    group = coord.groups["g"]
    before = _state(group)
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    clock.now += SESSION + 1
    coord.timer.poll()   # both sessions end: neither fencing is written
    # both stay as they were, their timers armed again (before: removed from memory, never written, no timer)
    assert _state(group) == before
    assert all(coord.timer.deadline(k) == clock.now + FENCE_RETRY_BACKOFF_MS for k in group.session_keys.values())
    ctx.refuse = None
    written = coord.records_written
    clock.now += FENCE_RETRY_BACKOFF_MS
    coord.timer.poll()
    assert not group.members and group.group_epoch == before[5] + 2 and coord.records_written > written
    await coord.stop()


async def test_a_rebalance_timeout_fencing_whose_write_is_refused_keeps_the_member_and_tries_again() -> None:
    coord, ctx, clock = await _coordinator(**{"group.consumer.session.timeout.ms": 60000})
    a = Member(coord, "a")
    for _ in range(2):
        await a.heartbeat()
    b = Member(coord, "b")
    await b.heartbeat()
    told = await a.heartbeat()              # a must revoke half; it keeps reporting them
    assert told.error_code == E.NONE
    group = coord.groups["g"]
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    clock.now += 30000 + 1                   # the Member's rebalance timeout
    coord.timer.poll()
    assert a.member_id in group.members
    ctx.refuse = None
    clock.now += FENCE_RETRY_BACKOFF_MS
    coord.timer.poll()
    assert a.member_id not in group.members and b.member_id in group.members
    await coord.stop()


async def test_a_consumer_leave_whose_write_is_refused_leaves_the_member_in() -> None:
    coord, ctx, _ = await _coordinator()
    a = Member(coord, "a")
    for _ in range(2):
        await a.heartbeat()
    group = coord.groups["g"]
    before = _state(group)
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    assert (await a.heartbeat(member_epoch=-1)).error_code != E.NONE
    assert _state(group) == before
    await coord.stop()


async def test_a_share_session_timeout_fencing_whose_write_is_refused_keeps_the_member_and_tries_again() -> None:
    coord, ctx, clock = await _coordinator(**{"group.coordinator.rebalance.protocols": "classic,consumer,share",
                                              "group.share.session.timeout.ms": 45000})
    c = Client(coord)
    r = await c.call(SHARE_HEARTBEAT, 1, group_id="sg", member_id="m1", member_epoch=0, rack_id=None,
                     subscribed_topic_names=["t"])
    assert r.error_code == E.NONE
    group = coord.groups["sg"]
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    clock.now += 45001
    coord.timer.poll()
    # before: the member stayed with no session timer, holding its partitions for ever
    assert "m1" in group.members and coord.timer.deadline(group.session_keys["m1"]) == clock.now + 500
    ctx.refuse = None
    clock.now += FENCE_RETRY_BACKOFF_MS
    coord.timer.poll()
    assert not group.members
    await coord.stop()


async def _listed(coord: GroupCoordinator) -> list[tuple[str, str, str, str]]:
    """ListGroups: (group id, type, state, protocol type) of every group."""
    listed = await Client(coord).call(LIST_GROUPS, 5, states_filter=[], types_filter=[])
    return [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups]


async def test_an_empty_classic_group_converted_by_a_refused_heartbeat_stays_classic_and_a_retry_converts_it() -> None:
    coord, ctx, _ = await _coordinator()
    client = Client(coord)
    assert (await _commit(client, 42)).topics[0].partitions[0].error_code == E.NONE   # a group of offsets only
    classic = coord.groups["g"]
    listed = await _listed(coord)
    assert listed == [("g", "classic", "Empty", "")]
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    a = Member(coord, "a")
    assert (await a.heartbeat()).error_code != E.NONE
    # the classic group as it was, not dead (before: an empty consumer group in its place)
    assert coord.groups["g"] is classic and classic.is_in(ClassicGroupState.EMPTY)
    assert await _listed(coord) == listed
    described = await client.call(DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=False)
    assert (described.groups[0].error_code, described.groups[0].group_state) == (E.NONE, "Empty")
    assert await _committed(client) == 42
    ctx.refuse = None
    assert (await a.heartbeat()).error_code == E.NONE
    assert await _listed(coord) == [("g", "consumer", "Stable", "consumer")]
    assert await _committed(client) == 42
    await coord.stop()


async def test_a_classic_group_whose_online_upgrade_is_refused_stays_classic_and_its_members_keep_heartbeating() -> None:
    coord, ctx, clock = await _coordinator()
    members = await classic_group(coord)
    classic = coord.groups["g"]
    generation = classic.generation_id
    listed = await _listed(coord)
    assert listed == [("g", "classic", "Stable", "consumer")]
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    new = str(uuid.uuid4())
    assert (await consumer_heartbeat(coord, new, 0)).error_code != E.NONE
    # before: a consumer group with the classic members in its place, the classic members' timers released
    assert coord.groups["g"] is classic and await _listed(coord) == listed and classic.generation_id == generation
    ctx.refuse = None
    # the classic members' sessions go on: heartbeats over twice their session timeout are answered as before
    for _ in range(4):
        clock.now += CLASSIC_SESSION // 2
        coord.timer.poll()
        assert [await m.heartbeat() for m in members] == [E.NONE, E.NONE]
    assert set(classic.members) == {m.member_id for m in members}
    # the new member's retry upgrades the group
    assert (await consumer_heartbeat(coord, new, 0)).error_code == E.NONE
    group = coord.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {new, *(m.member_id for m in members)}
    await coord.stop()


async def test_a_refused_online_upgrade_leaves_a_classic_rebalance_in_progress_with_its_parked_joins() -> None:
    coord, ctx, clock = await _coordinator()
    first, second = await classic_group(coord)
    classic = coord.groups["g"]
    rejoin = asyncio.ensure_future(first.client.call(JOIN, 9, **first.join_fields()))   # parked: a rebalance starts
    for _ in range(5):
        await asyncio.sleep(0)
    assert classic.is_in(ClassicGroupState.PREPARING_REBALANCE) and not rejoin.done()
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    assert (await consumer_heartbeat(coord, str(uuid.uuid4()), 0)).error_code != E.NONE
    for _ in range(5):
        await asyncio.sleep(0)
    # the parked JoinGroup still waits for the rebalance (before: answered REBALANCE_IN_PROGRESS by the conversion)
    assert not rejoin.done() and coord.groups["g"] is classic
    ctx.refuse = None
    assert await second.heartbeat() == E.REBALANCE_IN_PROGRESS
    answers = await asyncio.gather(rejoin, second.client.call(JOIN, 9, **second.join_fields()))
    assert [a.error_code for a in answers] == [E.NONE, E.NONE]
    assert {a.generation_id for a in answers} == {classic.generation_id} and classic.generation_id == \
        first.generation + 1
    await coord.stop()


async def test_a_classic_group_at_the_consumer_max_size_stays_classic_when_a_new_member_is_refused() -> None:
    coord, _, _ = await _coordinator(**{"group.consumer.max.size": 2})
    members = await classic_group(coord)
    classic, written = coord.groups["g"], coord.records_written
    r = await consumer_heartbeat(coord, str(uuid.uuid4()), 0)
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED and coord.records_written == written
    # before: the converted group stayed in memory, never written, the classic one dead
    assert coord.groups["g"] is classic and classic.is_in(ClassicGroupState.STABLE)
    assert [await m.heartbeat() for m in members] == [E.NONE, E.NONE]
    await coord.stop()


async def test_a_written_online_upgrade_answers_the_classic_members_parked_joins() -> None:
    coord, _, _ = await _coordinator()
    first, _second = await classic_group(coord)
    rejoin = asyncio.ensure_future(first.client.call(JOIN, 9, **first.join_fields()))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not rejoin.done()
    assert (await consumer_heartbeat(coord, str(uuid.uuid4()), 0)).error_code == E.NONE
    # the parked request rejoins the consumer group the classic group became (Kafka's convertToConsumerGroup)
    assert (await rejoin).error_code == E.REBALANCE_IN_PROGRESS and isinstance(coord.groups["g"], ConsumerGroup)
    await coord.stop()


async def _streams() -> tuple[GroupCoordinator, ReplicatedContext, FakeClock]:
    return await _coordinator(S.TOPICS, **S.FAST)


async def test_an_empty_classic_group_converted_by_a_refused_streams_heartbeat_stays_classic() -> None:
    coord, ctx, _ = await _streams()
    client = Client(coord)
    committed = await client.call(COMMIT, 8, group_id=S.APP, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=[dict(name="in", partitions=[dict(
                                      partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                                      committed_metadata="")])])
    assert committed.topics[0].partitions[0].error_code == E.NONE
    classic = coord.groups[S.APP]
    listed = await _listed(coord)
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    assert (await Client(coord, "b").call(S.SGH, 0, **S.join("b", "p2"))).error_code != E.NONE
    # before: an empty streams group in its place
    assert coord.groups[S.APP] is classic and await _listed(coord) == listed == [(S.APP, "classic", "Empty", "")]
    ctx.refuse = None
    assert (await Client(coord, "b").call(S.SGH, 0, **S.join("b", "p2"))).error_code == E.NONE
    assert [g[:2] for g in await _listed(coord)] == [(S.APP, "streams")]
    await coord.stop()


def _streams_state(group: Any) -> tuple[Any, ...]:
    return (dict(group.members), dict(group.target), dict(group.active_owner), group.group_epoch,
            group.assignment_epoch, group.endpoint_information_epoch, group.metadata_hash, sorted(group.session_keys))


async def test_a_streams_heartbeat_whose_records_are_refused_leaves_the_group_as_it_was() -> None:
    coord, ctx, clock = await _streams()
    a = S.Member(coord, "a", "p1")
    for _ in range(3):
        await a.heartbeat()
    assert a.active == S.ALL
    group = coord.groups[S.APP]
    before, written = _streams_state(group), coord.records_written
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    r = await Client(coord, "b").call(S.SGH, 0, **S.join("b", "p2"))
    assert r.error_code != E.NONE
    assert _streams_state(group) == before and coord.records_written == written
    ctx.refuse = None
    for _ in range(3):   # before: the ghost b (no session timer) kept half the tasks from a for ever
        clock.now += 5000
        coord.timer.poll()
        await a.heartbeat()
    assert a.active == S.ALL and list(group.members) == ["a"]
    await coord.stop()


async def test_a_streams_session_timeout_fencing_whose_write_is_refused_keeps_the_member_and_tries_again() -> None:
    coord, ctx, clock = await _streams()
    a = S.Member(coord, "a", "p1")
    for _ in range(3):
        await a.heartbeat()
    group = coord.groups[S.APP]
    before = _streams_state(group)
    ctx.refuse = E.NOT_ENOUGH_REPLICAS
    clock.now += 6001
    coord.timer.poll()
    assert _streams_state(group) == before
    ctx.refuse = None
    clock.now += FENCE_RETRY_BACKOFF_MS
    coord.timer.poll()
    assert not group.members
    await coord.stop()



REFUSALS = ((E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE), (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR))


async def _refused_classic_joins(coord: GroupCoordinator, ctx: ReplicatedContext, group_id: str,
                                 described: Callable[[], Awaitable[Any]]) -> None:
    """A classic member's JoinGroup to the empty modern group ``group_id`` is refused (each refusal answered as
    Kafka maps it) and leaves the group as it was (ListGroups, ``described``); once writes pass, a join converts it."""
    group, listed, before = coord.groups[group_id], await _listed(coord), await described()
    joiner = ClassicMember(coord, "c")
    fields = {**joiner.join_fields(), "group_id": group_id}
    for refusal, answered in REFUSALS:
        ctx.refuse = refusal
        r = await joiner.client.call(JOIN, 9, **fields)   # before: AppendRefused escaped the JoinGroup handler
        assert (r.error_code, r.member_id) == (answered, ""), refusal
        assert coord.groups[group_id] is group and await _listed(coord) == listed and await described() == before
    ctx.refuse = None
    assert (await joiner.client.call(JOIN, 9, **fields)).error_code == E.MEMBER_ID_REQUIRED
    assert [g[:2] for g in await _listed(coord)] == [(group_id, "classic")]


async def test_a_classic_join_converting_an_empty_consumer_group_whose_write_is_refused_leaves_it_as_it_was() -> None:
    coord, ctx, _ = await _coordinator()
    a = Member(coord, "a")
    for _ in range(2):
        assert (await a.heartbeat()).error_code == E.NONE
    assert (await a.heartbeat(member_epoch=-1)).error_code == E.NONE   # a leaves: an empty consumer group
    assert await _listed(coord) == [("g", "consumer", "Empty", "consumer")]

    async def described() -> Any:
        d = (await Client(coord).call(CONSUMER_DESCRIBE, 0, group_ids=["g"],
                                      include_authorized_operations=False)).groups[0]
        return d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.members

    await _refused_classic_joins(coord, ctx, "g", described)
    await coord.stop()


async def test_a_classic_join_converting_an_empty_streams_group_whose_write_is_refused_leaves_it_as_it_was() -> None:
    coord, ctx, _ = await _streams()
    b = S.Member(coord, "b", "p2")
    await b.heartbeat()
    assert (await b.client.call(S.SGH, 0, **S.beat("b", -1))).error_code == E.NONE   # b leaves: an empty group
    assert await _listed(coord) == [(S.APP, "streams", "Empty", "streams")]

    async def described() -> Any:
        d = (await Client(coord).call(S.SGD, 0, group_ids=[S.APP], include_authorized_operations=False)).groups[0]
        return d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.members

    await _refused_classic_joins(coord, ctx, S.APP, described)
    await coord.stop()


def _new_group_join(member_id: str = "", instance_id: str | None = None) -> dict[str, Any]:
    return dict(group_id="new", session_timeout_ms=CLASSIC_SESSION, rebalance_timeout_ms=CLASSIC_SESSION,
                member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
                protocols=[dict(name="range", metadata=b"")])


async def test_a_classic_join_creating_a_group_whose_write_is_refused_leaves_no_group() -> None:
    coord, ctx, clock = await _coordinator()
    client = Client(coord, "c")
    timers = len(coord.timer)
    for refusal, answered in REFUSALS:
        ctx.refuse = refusal
        # a member parked in the group's first rebalance (v3: no member id asked for; v5: a static member) is
        # answered as Kafka maps the refusal (before: the answer was right, the unwritten group stayed with it)
        for version, instance in ((3, None), (5, "i1")):
            r = await client.call(JOIN, version, **_new_group_join(instance_id=instance))
            assert (r.error_code, r.member_id) == (answered, ""), (refusal, version)
            assert "new" not in coord.groups and await _listed(coord) == [] and len(coord.timer) == timers
        # v4+ is told its member id before the write, as Kafka's; the group goes with the write all the same, so
        # the member id names no group: its rejoin is UNKNOWN_MEMBER_ID (before: it joined the unwritten group)
        r = await client.call(JOIN, 9, **_new_group_join())
        assert r.error_code == E.MEMBER_ID_REQUIRED and "new" not in coord.groups and len(coord.timer) == timers
        ctx.refuse = None
        rejoin = await client.call(JOIN, 9, **_new_group_join(r.member_id))
        assert rejoin.error_code == E.UNKNOWN_MEMBER_ID and await _listed(coord) == []
        described = await client.call(DESCRIBE_GROUPS, 5, groups=["new"], include_authorized_operations=False)
        assert (described.groups[0].error_code, described.groups[0].group_state) == (E.NONE, "Dead")
    clock.now += CLASSIC_SESSION * 100   # no timer of the unwritten groups brings anything back
    coord.timer.poll()
    assert await _listed(coord) == []
    # once writes pass, the group is made and written
    written = coord.records_written
    r = await client.call(JOIN, 9, **_new_group_join())
    assert r.error_code == E.MEMBER_ID_REQUIRED and coord.records_written > written
    assert await _listed(coord) == [("new", "classic", "Empty", "")]
    await coord.stop()


async def test_a_static_member_rejoining_a_stable_group_whose_write_is_refused_keeps_its_old_member_id() -> None:
    coord, ctx, clock = await _coordinator()
    client = Client(coord, "c")
    old, generation = await _stable_static_member(coord, clock, client)
    for refusal, answered in REFUSALS:
        ctx.refuse = refusal
        r = await client.call(JOIN, 9, **_new_group_join(instance_id="i1"))
        # Kafka's revert of the replacement: the old member id stays the static member's
        assert (r.error_code, r.member_id, r.generation_id) == (answered, "", generation), refusal
        ctx.refuse = None
        beats = [(await client.call(HEARTBEAT, 4, group_id="new", generation_id=generation,
                                    member_id=old, group_instance_id="i1")).error_code]
        assert beats == [E.NONE] and list(coord.groups["new"].members) == [old]
    await coord.stop()


async def test_a_static_member_rejoin_whose_write_does_not_reach_the_isr_keeps_its_old_member_id() -> None:
    coord, ctx, clock = await _coordinator()
    client = Client(coord, "c")
    old, generation = await _stable_static_member(coord, clock, client)
    ctx.auto = None   # each write waits for the test's ISR outcome
    for isr_outcome, answered in ((E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
                                  (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)):
        rejoin = asyncio.ensure_future(client.call(JOIN, 9, **_new_group_join(instance_id="i1")))
        await _until_waiting(ctx)
        assert not rejoin.done()   # answered once the ISR has the replacement, as Kafka's append callback
        ctx.settle(isr_outcome)
        r = await rejoin
        # Kafka reverts the replacement in the write's callback (before: the error code, with the new member id,
        # and the old member id fenced)
        assert (r.error_code, r.member_id, r.generation_id) == (answered, "", generation), isr_outcome
        beat = asyncio.ensure_future(client.call(HEARTBEAT, 4, group_id="new", generation_id=generation,
                                                 member_id=old, group_instance_id="i1"))
        assert (await beat).error_code == E.NONE and list(coord.groups["new"].members) == [old]
    # an ISR that has the write: the new member id replaces the old one
    rejoin = asyncio.ensure_future(client.call(JOIN, 9, **_new_group_join(instance_id="i1")))
    await _until_waiting(ctx)
    ctx.settle(E.NONE)
    r = await rejoin
    assert r.error_code == E.NONE and r.member_id not in ("", old) and r.generation_id == generation
    assert list(coord.groups["new"].members) == [r.member_id]
    await coord.stop()


async def _stable_static_member(coord: GroupCoordinator, clock: FakeClock, client: Client) -> tuple[str, int]:
    """Group "new" Stable with one static member (instance i1), synced: (its member id, the generation)."""
    join = asyncio.ensure_future(client.call(JOIN, 9, **_new_group_join(instance_id="i1")))
    for _ in range(5):
        await asyncio.sleep(0)
    clock.now += 3000   # group.initial.rebalance.delay.ms
    coord.timer.poll()
    joined = await join
    synced = await client.call(SYNC, 5, group_id="new", generation_id=joined.generation_id, member_id=joined.member_id,
                               group_instance_id="i1", protocol_type="consumer", protocol_name="range",
                               assignments=[dict(member_id=joined.member_id, assignment=b"a")])
    assert (synced.error_code, synced.assignment) == (E.NONE, b"a")
    return joined.member_id, joined.generation_id


run_async_tests(globals())
