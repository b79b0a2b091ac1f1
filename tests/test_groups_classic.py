"""The classic group protocol, driven in-process through klog's wire codec with a fake clock.

Each test states a behaviour Kafka's group coordinator has (the error codes and states are Kafka's)."""

from __future__ import annotations

import asyncio

import pytest

from klog.broker.groups import GroupCoordinator
from klog.protocol.errors import ErrorCode as E

from groups_support import Client, FakeClock, TestContext, consumer_subscription, run_async_tests

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
COMMIT, FETCH, FIND, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 10, 15, 16, 42, 47

SESSION = 6000
REBALANCE = 10000


@pytest.fixture
def env():
    clock = FakeClock()
    ctx = TestContext(topics={"t": 4, "u": 2})
    coord = GroupCoordinator(ctx, clock=clock, persist=False)
    return coord, clock


async def started(env):
    coord, clock = env
    await coord.start(run_timers=False)
    return coord, clock


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def protocols(*topics, name="range"):
    return [dict(name=name, metadata=consumer_subscription(*topics))]


def join_fields(member_id="", group="g", instance=None, protos=None, session=SESSION, rebalance=REBALANCE):
    return dict(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member_id,
                group_instance_id=instance, protocol_type="consumer", protocols=protos or protocols("t"))


async def join_new(client: Client, version=9, **kw):
    """Dynamic member: first join gets MEMBER_ID_REQUIRED (v4+), second join parks."""
    r = await client.call(JOIN, version, **join_fields(**kw))
    if version >= 4 and kw.get("instance") is None:
        assert r.error_code == E.MEMBER_ID_REQUIRED
        assert r.member_id.startswith(client.client_id + "-")
        kw["member_id"] = r.member_id
        return asyncio.ensure_future(client.call(JOIN, version, **join_fields(**kw)))
    return r


async def join_all(coord, n, version=9, **kw):
    """n new dynamic members join one generation; returns (clients, their join responses)."""
    clients = [Client(coord, f"c{i}") for i in range(n)]
    tasks = [await join_new(c, version, **kw) for c in clients]
    await settle()
    coord.timer.poll()  # the initial rebalance delay (0 in tests) elapses
    return clients, [await t for t in tasks]


async def form_group(coord, clock, n, version=9, group="g", topics=("t",)):
    """n members join and sync; returns (clients, join responses by member, leader id)."""
    clients, joins = await join_all(coord, n, version, group=group, protos=protocols(*topics))
    assert all(j.error_code == 0 for j in joins)
    leader = joins[0].leader
    syncs = []
    for c, j in zip(clients, joins):
        assignments = [dict(member_id=m.member_id, assignment=f"a-{m.member_id}".encode()) for m in j.members]
        syncs.append(asyncio.ensure_future(c.call(SYNC, 5, group_id=group, generation_id=j.generation_id,
                                                  member_id=j.member_id, protocol_type="consumer",
                                                  protocol_name="range", assignments=assignments)))
    results = [await s for s in syncs]
    assert all(s.error_code == 0 for s in results)
    return clients, joins, leader


async def test_first_join_without_member_id_gets_member_id_required_then_joins(env):
    coord, clock = await started(env)
    c = Client(coord, "consumer-1")
    task = await join_new(c)
    await settle()
    assert not task.done()  # parked until the initial rebalance delay passes
    coord.timer.poll()
    r = await task
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [r.member_id]
    assert coord.groups["g"].state_name() == "CompletingRebalance"


async def test_join_v3_admits_a_member_without_a_member_id_round_trip(env):
    coord, clock = await started(env)
    task = asyncio.ensure_future(Client(coord, "old").call(JOIN, 3, **join_fields()))
    await settle()
    coord.timer.poll()
    r = await task
    assert r.error_code == 0 and r.member_id.startswith("old-")


async def test_two_members_share_a_generation_and_only_the_leader_gets_the_member_list(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 2)
    assert joins[0].generation_id == joins[1].generation_id == 1
    by_id = {j.member_id: j for j in joins}
    assert len(by_id[leader].members) == 2
    follower = next(j for j in joins if j.member_id != leader)
    assert follower.members == [] and follower.leader == leader
    assert coord.groups["g"].state_name() == "Stable"


async def test_sync_v5_requires_protocol_type_and_name(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 1)
    r = await clients[0].call(SYNC, 5, group_id="g", generation_id=1, member_id=joins[0].member_id,
                              protocol_type=None, protocol_name="range", assignments=[])
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL


async def test_sync_hands_each_member_the_leaders_assignment(env):
    coord, clock = await started(env)
    clients, joins = await join_all(coord, 2)
    leader = next(j for j in joins if j.member_id == j.leader)
    follower = next(j for j in joins if j.member_id != j.leader)
    fsync = asyncio.ensure_future(clients[joins.index(follower)].call(
        SYNC, 3, group_id="g", generation_id=1, member_id=follower.member_id, assignments=[]))
    await settle()
    assert not fsync.done()  # followers wait for the leader
    lsync = await clients[joins.index(leader)].call(
        SYNC, 3, group_id="g", generation_id=1, member_id=leader.member_id,
        assignments=[dict(member_id=leader.member_id, assignment=b"L"),
                     dict(member_id=follower.member_id, assignment=b"F")])
    assert (lsync.error_code, lsync.assignment) == (0, b"L")
    f = await fsync
    assert (f.error_code, f.assignment) == (0, b"F")


async def test_protocol_is_chosen_by_vote_among_protocols_every_member_supports(env):
    coord, clock = await started(env)
    a, b = Client(coord, "a"), Client(coord, "b")
    sub = consumer_subscription("t")
    ta = await join_new(a, protos=[dict(name="roundrobin", metadata=sub), dict(name="range", metadata=sub)])
    tb = await join_new(b, protos=[dict(name="sticky", metadata=sub), dict(name="range", metadata=sub),
                                   dict(name="roundrobin", metadata=sub)])
    await settle()
    coord.timer.poll()
    ra, rb = await ta, await tb
    # Candidates: roundrobin, range. a votes roundrobin, b votes range -> tie; Kafka's max keeps one of them.
    assert ra.protocol_name == rb.protocol_name and ra.protocol_name in ("roundrobin", "range")


async def test_join_with_another_protocol_type_or_no_common_protocol_is_inconsistent(env):
    coord, clock = await started(env)
    await form_group(coord, clock, 1)
    r = await Client(coord, "x").call(JOIN, 9, **{**join_fields(), "protocol_type": "connect"})
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = await Client(coord, "x").call(JOIN, 9, **join_fields(protos=protocols("t", name="other")))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL


async def test_session_timeout_outside_the_broker_bounds_is_rejected(env):
    coord, clock = await started(env)
    r = await Client(coord).call(JOIN, 9, **join_fields(session=10))
    assert r.error_code == E.INVALID_SESSION_TIMEOUT
    r = await Client(coord).call(JOIN, 9, **join_fields(session=1_800_001))
    assert r.error_code == E.INVALID_SESSION_TIMEOUT
    r = await Client(coord).call(JOIN, 9, **join_fields(group=""))
    assert r.error_code == E.INVALID_GROUP_ID


async def test_heartbeat_errors_follow_kafka(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 2)
    mid, gen = joins[0].member_id, joins[0].generation_id
    hb = clients[0].call
    assert (await hb(HEARTBEAT, 4, group_id="g", generation_id=gen, member_id=mid)).error_code == 0
    assert (await hb(HEARTBEAT, 4, group_id="g", generation_id=gen + 1, member_id=mid)).error_code \
        == E.ILLEGAL_GENERATION
    assert (await hb(HEARTBEAT, 4, group_id="g", generation_id=gen, member_id="nobody")).error_code \
        == E.UNKNOWN_MEMBER_ID
    assert (await hb(HEARTBEAT, 4, group_id="nogroup", generation_id=gen, member_id=mid)).error_code \
        == E.UNKNOWN_MEMBER_ID
    assert (await hb(HEARTBEAT, 4, group_id="", generation_id=gen, member_id=mid)).error_code == E.INVALID_GROUP_ID
    # A new member triggers a rebalance: existing members learn it from their heartbeat.
    newcomer = await join_new(Client(coord, "new"))
    await settle()
    assert (await hb(HEARTBEAT, 0, group_id="g", generation_id=gen, member_id=mid)).error_code \
        == E.REBALANCE_IN_PROGRESS
    newcomer.cancel()


async def test_an_expired_session_removes_the_member_and_the_survivor_rebalances(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 2)
    alive, dead = joins[0], joins[1]
    for _ in range(4):  # only the first member keeps heartbeating
        clock.now += SESSION // 2
        r = await clients[0].call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=alive.member_id)
        coord.timer.poll()
    assert r.error_code == E.REBALANCE_IN_PROGRESS
    assert dead.member_id not in coord.groups["g"].members
    task = asyncio.ensure_future(clients[0].call(JOIN, 9, **join_fields(member_id=alive.member_id)))
    await settle()
    r = await task  # the only member rejoined: the join completes at once (not an initial rebalance)
    assert r.error_code == 0 and r.generation_id == 2 and r.leader == alive.member_id
    assert [m.member_id for m in r.members] == [alive.member_id]


async def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 2)
    newcomer = await join_new(Client(coord, "n"))
    await settle()
    # Member 0 rejoins, member 1 keeps heartbeating but never rejoins.
    t0 = asyncio.ensure_future(clients[0].call(JOIN, 9, **join_fields(member_id=joins[0].member_id)))
    await settle()
    for _ in range(3):
        clock.now += REBALANCE // 3 + 1
        await clients[1].call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=joins[1].member_id)
        coord.timer.poll()
    r0, rn = await t0, await newcomer
    assert r0.generation_id == rn.generation_id == 2
    assert joins[1].member_id not in coord.groups["g"].members
    r = await clients[1].call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=joins[1].member_id)
    assert r.error_code == E.UNKNOWN_MEMBER_ID


async def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(env):
    coord, clock = await started(env)
    clients, joins = await join_all(coord, 2)
    leader = next(j for j in joins if j.member_id == j.leader)
    await clients[joins.index(leader)].call(SYNC, 3, group_id="g", generation_id=1, member_id=leader.member_id,
                                            assignments=[])
    for _ in range(3):  # the leader keeps its session alive; the follower never syncs
        clock.now += REBALANCE // 3 + 1
        await clients[joins.index(leader)].call(HEARTBEAT, 4, group_id="g", generation_id=1,
                                                member_id=leader.member_id)
        coord.timer.poll()
    group = coord.groups["g"]
    assert set(group.members) == {leader.member_id}
    assert group.state_name() == "PreparingRebalance"


async def test_leave_group_v3_removes_a_batch_and_reports_unknown_members(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 3)
    r = await clients[0].call(LEAVE, 5, group_id="g", members=[
        dict(member_id=joins[1].member_id, reason="bye"), dict(member_id=joins[2].member_id),
        dict(member_id="ghost")])
    assert r.error_code == 0
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (joins[1].member_id, 0), (joins[2].member_id, 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert coord.groups["g"].state_name() == "PreparingRebalance"
    assert set(coord.groups["g"].members) == {joins[0].member_id}


async def test_leave_group_v0_answers_at_top_level(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 1)
    r = await clients[0].call(LEAVE, 0, group_id="g", member_id="ghost")
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    r = await clients[0].call(LEAVE, 0, group_id="g", member_id=joins[0].member_id)
    assert r.error_code == 0
    # The only member left: the group completes an empty generation.
    assert coord.groups["g"].state_name() == "Empty"


async def test_static_member_restart_in_stable_keeps_assignment_without_rebalance(env):
    coord, clock = await started(env)
    a, b = Client(coord, "a"), Client(coord, "b")
    ta = asyncio.ensure_future(a.call(JOIN, 9, **join_fields(instance="inst-a")))
    tb = asyncio.ensure_future(b.call(JOIN, 9, **join_fields(instance="inst-b")))
    await settle()
    coord.timer.poll()
    ja, jb = await ta, await tb
    assert ja.member_id.startswith("inst-a-")
    leader = ja if ja.member_id == ja.leader else jb
    await asyncio.gather(
        a.call(SYNC, 5, group_id="g", generation_id=1, member_id=ja.member_id, group_instance_id="inst-a",
               protocol_type="consumer", protocol_name="range",
               assignments=[dict(member_id=ja.member_id, assignment=b"A"), dict(member_id=jb.member_id,
                                                                                assignment=b"B")]
               if leader is ja else []),
        b.call(SYNC, 5, group_id="g", generation_id=1, member_id=jb.member_id, group_instance_id="inst-b",
               protocol_type="consumer", protocol_name="range",
               assignments=[dict(member_id=ja.member_id, assignment=b"A"), dict(member_id=jb.member_id,
                                                                                assignment=b"B")]
               if leader is jb else []))
    assert coord.groups["g"].state_name() == "Stable"
    rebalances = coord.classic.rebalances_completed
    # "b" restarts: it rejoins with no member id and the same instance id.
    b2 = Client(coord, "b")
    r = await b2.call(JOIN, 9, **join_fields(instance="inst-b"))
    assert r.error_code == 0 and r.generation_id == 1 and r.member_id != jb.member_id
    s = await b2.call(SYNC, 5, group_id="g", generation_id=1, member_id=r.member_id, group_instance_id="inst-b",
                      protocol_type="consumer", protocol_name="range", assignments=[])
    assert (s.error_code, s.assignment) == (0, b"B")
    assert coord.groups["g"].state_name() == "Stable" and coord.classic.rebalances_completed == rebalances
    # The old incarnation is fenced.
    old = await b.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=jb.member_id,
                       group_instance_id="inst-b")
    assert old.error_code == E.FENCED_INSTANCE_ID


async def test_static_member_missing_its_session_stays_until_session_timeout_then_leaves(env):
    coord, clock = await started(env)
    c = Client(coord, "s")
    t = asyncio.ensure_future(c.call(JOIN, 9, **join_fields(instance="inst")))
    await settle()
    coord.timer.poll()
    j = await t
    await c.call(SYNC, 5, group_id="g", generation_id=1, member_id=j.member_id, group_instance_id="inst",
                 protocol_type="consumer", protocol_name="range",
                 assignments=[dict(member_id=j.member_id, assignment=b"x")])
    clock.now += SESSION - 1
    coord.timer.poll()
    assert j.member_id in coord.groups["g"].members
    clock.now += 2
    coord.timer.poll()
    assert coord.groups["g"].state_name() == "Empty"


async def test_offset_commit_and_fetch_round_trip_metadata_and_leader_epoch(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 1)
    c, mid = clients[0], joins[0].member_id
    r = await c.call(COMMIT, 9, group_id="g", generation_id_or_member_epoch=1, member_id=mid, topics=[
        dict(name="t", partitions=[dict(partition_index=0, committed_offset=42, committed_leader_epoch=3,
                                        committed_metadata="meta ✓"),
                                   dict(partition_index=1, committed_offset=7, committed_metadata=None)]),
        dict(name="missing", partitions=[dict(partition_index=0, committed_offset=1, committed_metadata="")]),
        dict(name="u", partitions=[dict(partition_index=9, committed_offset=1, committed_metadata="")])])
    codes = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert codes == {("t", 0): 0, ("t", 1): 0, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                     ("u", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    f = await c.call(FETCH, 7, group_id="g", topics=[dict(name="t", partition_indexes=[0, 1, 2])])
    got = {p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
           for p in f.topics[0].partitions}
    assert got == {0: (42, 3, "meta ✓", 0), 1: (7, -1, "", 0), 2: (-1, -1, "", 0)}
    # v1 (oldest) and "all topics" (null topics, v2+).
    f = await c.call(FETCH, 1, group_id="g", topics=[dict(name="t", partition_indexes=[0])])
    assert f.topics[0].partitions[0].committed_offset == 42
    f = await c.call(FETCH, 5, group_id="g", topics=None)
    assert {(t.name, p.partition_index) for t in f.topics for p in t.partitions} == {("t", 0), ("t", 1)}


async def test_offset_fetch_v8_answers_several_groups(env):
    coord, clock = await started(env)
    c = Client(coord)
    for g, off in (("g1", 10), ("g2", 20)):
        r = await c.call(COMMIT, 8, group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
            dict(name="t", partitions=[dict(partition_index=0, committed_offset=off, committed_metadata="")])])
        assert r.topics[0].partitions[0].error_code == 0
    f = await c.call(FETCH, 8, groups=[dict(group_id="g1", topics=[dict(name="t", partition_indexes=[0])]),
                                       dict(group_id="g2", topics=None),
                                       dict(group_id="none", topics=None)], require_stable=True)
    assert [(g.group_id, g.error_code) for g in f.groups] == [("g1", 0), ("g2", 0), ("none", 0)]
    assert f.groups[0].topics[0].partitions[0].committed_offset == 10
    assert f.groups[1].topics[0].partitions[0].committed_offset == 20
    assert f.groups[2].topics == []


async def test_offset_commit_generation_checks(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 1)
    c, mid = clients[0], joins[0].member_id
    commit = [dict(name="t", partitions=[dict(partition_index=0, committed_offset=1, committed_metadata="")])]

    async def code(version, **kw):
        r = await c.call(COMMIT, version, group_id=kw.pop("group", "g"), topics=commit, **kw)
        return r.topics[0].partitions[0].error_code

    assert await code(7, generation_id_or_member_epoch=2, member_id=mid) == E.ILLEGAL_GENERATION
    assert await code(7, generation_id_or_member_epoch=1, member_id="ghost") == E.UNKNOWN_MEMBER_ID
    assert await code(7, generation_id_or_member_epoch=-1, member_id="") == E.UNKNOWN_MEMBER_ID  # not empty
    assert await code(7, group="new", generation_id_or_member_epoch=3, member_id="m") == E.ILLEGAL_GENERATION
    assert await code(9, group="new", generation_id_or_member_epoch=3, member_id="m") == E.GROUP_ID_NOT_FOUND
    assert await code(2, group="simple", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1) == 0
    # During CompletingRebalance a valid member is told to finish the rebalance first.
    newcomer = await join_new(Client(coord, "n"))
    t = asyncio.ensure_future(c.call(JOIN, 9, **join_fields(member_id=mid)))
    await settle()
    rj = await t
    assert coord.groups["g"].state_name() == "CompletingRebalance"
    assert await code(7, generation_id_or_member_epoch=rj.generation_id, member_id=mid) == E.REBALANCE_IN_PROGRESS
    await newcomer


async def test_metadata_over_the_limit_is_offset_metadata_too_large(env):
    coord, clock = await started(env)
    r = await Client(coord).call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        dict(name="t", partitions=[dict(partition_index=0, committed_offset=1, committed_metadata="x" * 4097)])])
    assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE


async def test_list_describe_and_delete_groups(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 2, group="busy")
    c = Client(coord)
    await c.call(COMMIT, 8, group_id="idle", generation_id_or_member_epoch=-1, member_id="", topics=[
        dict(name="t", partitions=[dict(partition_index=0, committed_offset=5, committed_metadata="")])])
    r = await c.call(LIST, 5, states_filter=[], types_filter=[])
    assert {(g.group_id, g.group_state, g.protocol_type, g.group_type) for g in r.groups} == {
        ("busy", "Stable", "consumer", "classic"), ("idle", "Empty", "", "classic")}
    r = await c.call(LIST, 4, states_filter=["STABLE"])
    assert [g.group_id for g in r.groups] == ["busy"]
    r = await c.call(LIST, 0)
    assert {g.group_id for g in r.groups} == {"busy", "idle"}

    d = await c.call(DESCRIBE, 5, groups=["busy", "nope"], include_authorized_operations=False)
    busy, nope = d.groups
    assert (busy.error_code, busy.group_state, busy.protocol_type, busy.protocol_data) == \
        (0, "Stable", "consumer", "range")
    assert {m.member_id for m in busy.members} == {j.member_id for j in joins}
    assert all(m.member_assignment == f"a-{m.member_id}".encode() for m in busy.members)
    assert all(m.member_metadata == consumer_subscription("t") for m in busy.members)
    assert all(m.client_host == "/127.0.0.1" and m.client_id in ("c0", "c1") for m in busy.members)
    assert (nope.error_code, nope.group_state) == (0, "Dead")
    d = await c.call(DESCRIBE, 6, groups=["nope"], include_authorized_operations=False)
    assert d.groups[0].error_code == E.GROUP_ID_NOT_FOUND

    r = await c.call(DELETE, 2, groups_names=["busy", "idle", "nope"])
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("busy", E.NON_EMPTY_GROUP), ("idle", 0), ("nope", E.GROUP_ID_NOT_FOUND)]
    f = await c.call(FETCH, 5, group_id="idle", topics=None)
    assert f.topics == []


async def test_offset_delete_refuses_topics_the_group_consumes(env):
    coord, clock = await started(env)
    clients, joins, leader = await form_group(coord, clock, 1, topics=("t",))
    c, mid = clients[0], joins[0].member_id
    await c.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=1, member_id=mid, topics=[
        dict(name="t", partitions=[dict(partition_index=0, committed_offset=5, committed_metadata="")]),
        dict(name="u", partitions=[dict(partition_index=0, committed_offset=6, committed_metadata="")])])
    r = await c.call(OFFSET_DELETE, 0, group_id="g", topics=[
        dict(name="t", partitions=[dict(partition_index=0)]), dict(name="u", partitions=[dict(partition_index=0)])])
    assert r.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {"t": E.GROUP_SUBSCRIBED_TO_TOPIC, "u": 0}
    f = await c.call(FETCH, 5, group_id="g", topics=None)
    assert {t.name for t in f.topics} == {"t"}
    r = await c.call(OFFSET_DELETE, 0, group_id="zzz", topics=[])
    assert r.error_code == E.GROUP_ID_NOT_FOUND


async def test_offsets_of_an_empty_group_expire_after_retention(env):
    coord, clock = env
    coord.offsets_retention_ms = 60_000
    await coord.start(run_timers=False)
    c = Client(coord)
    await c.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        dict(name="t", partitions=[dict(partition_index=0, committed_offset=5, committed_metadata="")])])
    clock.now += 59_999
    assert coord.expire_offsets() == 0
    clock.now += 1
    assert coord.expire_offsets() == 1
    assert "g" not in coord.groups  # empty and offset-less: deleted too
    f = await c.call(FETCH, 5, group_id="g", topics=None)
    assert f.topics == []


async def test_offsets_of_an_active_group_do_not_expire(env):
    coord, clock = env
    coord.offsets_retention_ms = 60_000
    await coord.start(run_timers=False)
    clients, joins, leader = await form_group(coord, clock, 1)
    await clients[0].call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=1, member_id=joins[0].member_id,
                          topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=5,
                                                                  committed_metadata="")])])
    clock.now += 120_000
    assert coord.expire_offsets() == 0


async def test_offsets_of_deleted_topics_are_removed_at_the_retention_check(env):
    coord, clock = await started(env)
    c = Client(coord)
    await c.call(COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        dict(name="t", partitions=[dict(partition_index=0, committed_offset=5, committed_metadata="")]),
        dict(name="u", partitions=[dict(partition_index=1, committed_offset=6, committed_metadata="")])])
    del coord.context.topics["u"]
    coord.expire_offsets()
    f = await c.call(FETCH, 5, group_id="g", topics=None)
    assert {t.name for t in f.topics} == {"t"}


async def test_consumer_protocol_apis_are_advertised_only_when_enabled():
    on = GroupCoordinator(TestContext(), persist=False)
    off = GroupCoordinator(TestContext(**{"group.coordinator.rebalance.protocols": "classic"}), persist=False)
    assert {68, 69} <= set(on.SUPPORTED_APIS) and not {68, 69} & set(off.SUPPORTED_APIS)
    assert {8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47} <= set(off.SUPPORTED_APIS)


async def test_find_coordinator_answers_this_broker_for_single_and_batched_keys(env):
    coord, clock = await started(env)
    c = Client(coord)
    r = await c.call(FIND, 0, key="g")
    assert (r.error_code, r.node_id, r.host, r.port) == (0, 1, "127.0.0.1", 9092)
    r = await c.call(FIND, 3, key="g", key_type=0)
    assert (r.error_code, r.node_id, r.error_message) == (0, 1, None)
    r = await c.call(FIND, 6, key_type=0, coordinator_keys=["a", "b"])
    assert [(x.key, x.node_id, x.port, x.error_code) for x in r.coordinators] == [("a", 1, 9092, 0),
                                                                                   ("b", 1, 9092, 0)]
    r = await c.call(FIND, 6, key_type=9, coordinator_keys=["a"])
    assert r.coordinators[0].error_code == E.INVALID_REQUEST


async def test_join_parked_during_stop_is_answered_not_coordinator(env):
    coord, clock = await started(env)
    task = await join_new(Client(coord))
    await settle()
    await coord.stop()
    r = await task
    assert r.error_code == E.NOT_COORDINATOR


def test_subscribed_topics_are_read_with_the_clients_consumer_protocol_codec():
    # Every subscription version counts; one malformed subscription leaves the group's topics unknown (so the
    # offsets of every topic are kept), as Kafka's ClassicGroup.computeSubscribedTopics does.
    from klog.broker.groups.classic_group import ClassicGroup, ClassicGroupState, ClassicMember
    from klog.protocol.consumer_protocol import Subscription, encode_subscription

    def member(member_id: str, subscription: bytes) -> ClassicMember:
        return ClassicMember(member_id, None, "c", "h", REBALANCE, SESSION, "consumer", [("range", subscription)])

    group = ClassicGroup("g", ClassicGroupState.EMPTY, 0, protocol_type="consumer", protocol_name="range")
    group.add(member("a", encode_subscription(Subscription(["t"], owned_partitions={"t": [0]}, rack_id="r"))))
    group.add(member("b", consumer_subscription("u")))
    assert group.compute_subscribed_topics() == {"t", "u"}
    group.add(member("c", b"\x00\x00\x00\x00\x00\x05"))  # five topics announced, none there
    assert group.compute_subscribed_topics() is None


run_async_tests(globals())
