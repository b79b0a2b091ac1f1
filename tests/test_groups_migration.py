"""Online conversion of a group between the classic and the consumer protocol (Kafka 4.x's
``group.consumer.migration.policy``), driven in-process through klog's wire codec with a fake clock; the restart
test runs on klog's real storage. tests/test_groups_conversion_vs_kafka.py moves a group with real clients on klog
and on Apache Kafka."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.broker.groups import GroupCoordinator
from klog.broker.groups.classic_group import ClassicGroup, ClassicGroupState
from klog.broker.groups.consumer import ConsumerGroup
from klog.controller.topics import CreatableTopic
from klog.protocol.consumer_protocol import Assignment, decode_assignment, encode_assignment
from klog.protocol.errors import ErrorCode as E

from groups_support import Client, FakeClock, TestContext, consumer_subscription, run_async_tests

JOIN, SYNC, HEARTBEAT, LEAVE, LIST, CGH, CGD, COMMIT = 11, 14, 12, 13, 16, 68, 69, 8
SESSION = 6000


def coordinator(policy: str = "bidirectional") -> GroupCoordinator:
    ctx = TestContext(topics={"t": 4}, **{"group.consumer.migration.policy": policy})
    return GroupCoordinator(ctx, clock=FakeClock(), persist=False)


class ClassicMember:
    """A classic consumer of the embedded protocol: JoinGroup, SyncGroup (the leader assigns range-like), Heartbeat."""

    def __init__(self, coord, name: str) -> None:
        self.client = Client(coord, name)
        self.member_id = ""
        self.generation = -1
        self.partitions: list[int] = []

    def join_fields(self) -> dict:
        return dict(group_id="g", session_timeout_ms=SESSION, rebalance_timeout_ms=SESSION,
                    member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
                    protocols=[dict(name="range", metadata=consumer_subscription("t"))])

    async def join(self):
        r = await self.client.call(JOIN, 9, **self.join_fields())
        if r.error_code == E.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            r = await self.client.call(JOIN, 9, **self.join_fields())
        return r

    async def sync(self, assignments=()):
        r = await self.client.call(SYNC, 5, group_id="g", generation_id=self.generation, member_id=self.member_id,
                                   group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                   assignments=list(assignments))
        if r.error_code == 0:
            self.partitions = sorted(decode_assignment(r.assignment).partitions.get("t", []))
        return r

    async def heartbeat(self):
        r = await self.client.call(HEARTBEAT, 4, group_id="g", generation_id=self.generation,
                                   member_id=self.member_id, group_instance_id=None)
        return r.error_code

    async def rejoin_and_sync(self):
        r = await self.join()
        assert r.error_code == 0, r
        self.member_id, self.generation = r.member_id, r.generation_id
        s = await self.sync()
        assert s.error_code == 0, s
        return r


async def classic_group(coord, n: int = 2) -> list[ClassicMember]:
    """A Stable classic group of ``n`` members over t's 4 partitions, split by the leader."""
    members = [ClassicMember(coord, f"c{i}") for i in range(n)]
    for m in members:   # learn the member ids
        r = await m.client.call(JOIN, 9, **m.join_fields())
        m.member_id = r.member_id
    joins = [asyncio.ensure_future(m.client.call(JOIN, 9, **m.join_fields())) for m in members]
    for _ in range(5):
        await asyncio.sleep(0)
    coord.timer.poll()
    answers = [await j for j in joins]
    leader = next(a for a in answers if a.leader == a.member_id)
    ids = sorted(x.member_id for x in leader.members)
    plan = {mid: [p for p in range(4) if p % n == i] for i, mid in enumerate(ids)}
    for m, a in zip(members, answers):
        m.generation = a.generation_id
    syncs = [m.sync([dict(member_id=mid, assignment=encode_assignment(Assignment({"t": ps})))
                     for mid, ps in plan.items()] if m.member_id == leader.member_id else [])
             for m in members]
    assert all(r.error_code == 0 for r in await asyncio.gather(*syncs))
    assert sorted(p for m in members for p in m.partitions) == [0, 1, 2, 3]
    return members


async def consumer_heartbeat(coord, member_id: str, epoch: int, owned=None, **over):
    fields = dict(group_id="g", member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=-1, subscribed_topic_names=None, server_assignor=None,
                  topic_partitions=owned if owned is not None else [])
    if epoch == 0:
        fields.update(rebalance_timeout_ms=SESSION, subscribed_topic_names=["t"], topic_partitions=[])
    fields.update(over)
    return await Client(coord, "kip848").call(CGH, 1, **fields)


async def test_a_consumer_member_upgrades_a_classic_group_whose_members_keep_their_partitions():
    coord = coordinator()
    await coord.start(run_timers=False)
    classic = await classic_group(coord)
    generation = classic[0].generation
    new = str(uuid.uuid4())
    r = await consumer_heartbeat(coord, new, 0)
    assert r.error_code == 0
    group = coord.groups["g"]
    assert isinstance(group, ConsumerGroup) and group.group_epoch == generation + 1
    # nothing the classic members own is handed out before they give it up
    assert r.assignment.topic_partitions == []
    d = (await Client(coord).call(CGD, 1, group_ids=["g"], include_authorized_operations=False)).groups[0]
    kinds = {m.member_id: m.member_type for m in d.members}
    assert kinds == {classic[0].member_id: 0, classic[1].member_id: 0, new: 1}
    # classic members commit with their generation (the member epoch) and are asked to rejoin
    commit = await classic[0].client.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation,
                                          member_id=classic[0].member_id, topics=[dict(name="t", partitions=[
                                              dict(partition_index=classic[0].partitions[0], committed_offset=7,
                                                   committed_metadata=None)])])
    assert commit.topics[0].partitions[0].error_code == 0
    assert [await m.heartbeat() for m in classic] == [E.REBALANCE_IN_PROGRESS] * 2
    for m in classic:   # eager members revoke everything and rejoin: the coordinator assigns, no leader
        joined = await m.rejoin_and_sync()
        assert joined.leader == "" and joined.members == [] and joined.protocol_name == "range"
    epoch, mine, topic_id = r.member_epoch, [], coord.context.topic_id("t")
    for _ in range(3):   # the consumer-protocol member collects the partitions the classic members released
        r = await consumer_heartbeat(coord, new, epoch, [dict(topic_id=topic_id, partitions=mine)] if mine else [])
        epoch = r.member_epoch
        if r.assignment is not None:
            mine = sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions)
    assert mine and sorted([*mine, *(p for m in classic for p in m.partitions)]) == [0, 1, 2, 3]
    assert [await m.heartbeat() for m in classic] == [E.NONE, E.NONE]
    stale = await classic[0].client.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation,
                                         member_id=classic[0].member_id, topics=[dict(name="t", partitions=[
                                             dict(partition_index=0, committed_offset=7, committed_metadata=None)])])
    assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION


async def test_a_cooperative_classic_member_revokes_incrementally_before_the_consumer_member_gets_partitions():
    coord = coordinator()
    await coord.start(run_timers=False)
    classic = await classic_group(coord, n=1)   # one classic member owns all four partitions
    member = classic[0]
    new = str(uuid.uuid4())
    r = await consumer_heartbeat(coord, new, 0)
    assert r.error_code == 0 and r.assignment.topic_partitions == []
    assert await member.heartbeat() == E.REBALANCE_IN_PROGRESS

    async def cooperative_join():   # a cooperative member rejoins with the partitions it still owns
        fields = member.join_fields()
        fields["protocols"] = [dict(name="cooperative-sticky",
                                    metadata=consumer_subscription("t", owned=[("t", member.partitions)]))]
        fields["protocol_type"] = "consumer"
        return await member.client.call(JOIN, 9, **fields)

    # the group's classic protocols must be shared: a cooperative-only member may not join a range-only group
    assert (await cooperative_join()).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    fields = member.join_fields()
    fields["protocols"] = [dict(name="range", metadata=consumer_subscription("t", owned=[("t", member.partitions)]))]
    joined = await member.client.call(JOIN, 9, **fields)
    assert joined.error_code == 0 and joined.generation_id == member.generation   # revoking: the epoch waits
    synced = await member.sync()
    assert synced.error_code == 0 and len(member.partitions) == 2   # it keeps half, gives up the rest
    # still revoking: asked to rejoin; once it stops owning the rest, it reaches the new epoch
    assert await member.heartbeat() == E.REBALANCE_IN_PROGRESS
    fields["protocols"] = [dict(name="range", metadata=consumer_subscription("t", owned=[("t", member.partitions)]))]
    joined = await member.client.call(JOIN, 9, **fields)
    assert joined.error_code == 0 and joined.generation_id == coord.groups["g"].group_epoch
    member.generation = joined.generation_id
    assert (await member.sync()).error_code == 0 and len(member.partitions) == 2
    assert await member.heartbeat() == E.NONE
    r = await consumer_heartbeat(coord, new, r.member_epoch)
    assert sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions) == \
        sorted(set(range(4)) - set(member.partitions))


async def test_the_last_consumer_member_leaving_downgrades_the_group_to_a_rebalancing_classic_group():
    coord = coordinator()
    await coord.start(run_timers=False)
    classic = await classic_group(coord)
    new = str(uuid.uuid4())
    r = await consumer_heartbeat(coord, new, 0)
    for m in classic:
        await m.rejoin_and_sync()
    r = await consumer_heartbeat(coord, new, -1)
    assert r.error_code == 0
    group = coord.groups["g"]
    assert isinstance(group, ClassicGroup) and group.is_in(ClassicGroupState.PREPARING_REBALANCE)
    assert set(group.members) == {m.member_id for m in classic}
    listed = await Client(coord).call(LIST, 5, states_filter=[], types_filter=[])
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("g", "classic")]
    # the members rejoin the classic group and a leader assigns again
    assert await classic[0].heartbeat() == E.REBALANCE_IN_PROGRESS
    joins = [asyncio.ensure_future(m.client.call(JOIN, 9, **m.join_fields())) for m in classic]
    answers = [await j for j in joins]
    assert all(a.error_code == 0 for a in answers)
    assert sum(1 for a in answers if a.leader == a.member_id) == 1


async def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_without_a_rebalance():
    coord = coordinator()
    await coord.start(run_timers=False)
    classic = await classic_group(coord, n=1)
    static = str(uuid.uuid4())
    r = await consumer_heartbeat(coord, static, 0, instance_id="inst")
    await classic[0].rejoin_and_sync()
    epoch, mine, topic_id = r.member_epoch, [], coord.context.topic_id("t")
    for _ in range(3):   # it collects the partitions the classic member released
        r = await consumer_heartbeat(coord, static, epoch, [dict(topic_id=topic_id, partitions=mine)] if mine else [],
                                     instance_id="inst")
        epoch = r.member_epoch
        if r.assignment is not None:
            mine = sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions)
    group = coord.groups["g"]
    static_parts = sorted(group.members[static].assigned.get(topic_id, ()))
    assert static_parts and static_parts == mine
    # the static member restarts as a classic consumer with the same group.instance.id
    restarted = ClassicMember(coord, "restarted")
    fields = restarted.join_fields()
    fields["group_instance_id"] = "inst"
    joined = await restarted.client.call(JOIN, 9, **fields)
    assert joined.error_code == 0 and joined.leader == ""
    downgraded = coord.groups["g"]
    assert isinstance(downgraded, ClassicGroup) and downgraded.is_in(ClassicGroupState.STABLE)
    assert joined.generation_id == downgraded.generation_id
    assert set(downgraded.members) == {classic[0].member_id, joined.member_id} and static not in downgraded.members
    restarted.member_id, restarted.generation = joined.member_id, joined.generation_id
    synced = await restarted.client.call(SYNC, 5, group_id="g", generation_id=joined.generation_id,
                                         member_id=joined.member_id, group_instance_id="inst",
                                         protocol_type="consumer", protocol_name="range", assignments=[])
    assert synced.error_code == 0
    assert sorted(decode_assignment(synced.assignment).partitions["t"]) == static_parts


async def test_a_classic_member_leaving_a_consumer_group_does_not_downgrade_it():
    coord = coordinator()
    await coord.start(run_timers=False)
    classic = await classic_group(coord)
    new = str(uuid.uuid4())
    await consumer_heartbeat(coord, new, 0)
    r = await classic[0].client.call(LEAVE, 5, group_id="g", members=[
        dict(member_id=classic[0].member_id, group_instance_id=None, reason=None)])
    assert r.error_code == 0 and r.members[0].error_code == 0
    assert isinstance(coord.groups["g"], ConsumerGroup) and classic[0].member_id not in coord.groups["g"].members
    # a consumer-protocol member is not a classic member: classic requests about it are refused
    r = await classic[1].client.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=new,
                                     group_instance_id=None)
    assert r.error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
async def test_without_the_upgrade_policy_a_consumer_member_cannot_join_a_classic_group(policy):
    coord = coordinator(policy)
    await coord.start(run_timers=False)
    await classic_group(coord)
    r = await consumer_heartbeat(coord, str(uuid.uuid4()), 0)
    assert r.error_code == E.GROUP_ID_NOT_FOUND and isinstance(coord.groups["g"], ClassicGroup)


async def test_without_the_downgrade_policy_the_group_stays_a_consumer_group():
    coord = coordinator("upgrade")
    await coord.start(run_timers=False)
    classic = await classic_group(coord)
    new = str(uuid.uuid4())
    await consumer_heartbeat(coord, new, 0)
    for m in classic:
        await m.rejoin_and_sync()
    await consumer_heartbeat(coord, new, -1)
    group = coord.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {m.member_id for m in classic}


async def test_a_converted_group_and_its_classic_members_survive_a_coordinator_restart(tmp_path):
    clock = FakeClock()
    props = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
             "offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
             "group.min.session.timeout.ms": "1000"}

    async def open_coordinator():
        state = BrokerState(BrokerConfig(props), asyncio.get_running_loop())
        if state.partition_count("t") is None:
            await state.controller_apis.create([CreatableTopic("t", 4)])
        coord = GroupCoordinator(state, clock=clock)
        await coord.start(run_timers=False)
        return state, coord

    state, coord = await open_coordinator()
    try:
        classic = await classic_group(coord)
        new = str(uuid.uuid4())
        await consumer_heartbeat(coord, new, 0)
        for m in classic:
            await m.rejoin_and_sync()
        before = coord.groups["g"]
        assert isinstance(before, ConsumerGroup)
        members = {mid: (m.member_epoch, m.assigned, m.classic) for mid, m in before.members.items()}
    finally:
        await coord.stop()
        state.close()

    state, coord = await open_coordinator()
    try:
        after = coord.groups["g"]
        assert isinstance(after, ConsumerGroup) and after.group_epoch == before.group_epoch
        assert {mid: (m.member_epoch, m.assigned, m.classic) for mid, m in after.members.items()} == members
        for m in classic:   # the classic members carry on with the reloaded group
            m.client.coordinator = coord
            assert await m.heartbeat() == E.NONE
        await consumer_heartbeat(coord, new, -1)   # and it is downgraded from the reloaded state
        assert isinstance(coord.groups["g"], ClassicGroup)
    finally:
        await coord.stop()
        state.close()

    state, coord = await open_coordinator()
    try:
        reloaded = coord.groups["g"]
        assert isinstance(reloaded, ClassicGroup) and set(reloaded.members) == {m.member_id for m in classic}
    finally:
        await coord.stop()
        state.close()


run_async_tests(globals())
