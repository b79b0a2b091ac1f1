"""The consumer group protocol (KIP-848), driven in-process through klog's wire codec with a fake clock."""

from __future__ import annotations

import uuid

import pytest

from klog.broker.groups import GroupCoordinator
from klog.protocol.errors import ErrorCode as E

from groups_support import Client, FakeClock, TestContext, run_async_tests

CGH, CGD, COMMIT, FETCH, LIST, DESCRIBE, JOIN, DELETE = 68, 69, 8, 9, 16, 15, 11, 42
REBALANCE = 30000


@pytest.fixture
def env():
    clock = FakeClock()
    ctx = TestContext(topics={"t": 4, "u": 3}, **{"group.consumer.session.timeout.ms": 10000,
                                                   "group.consumer.min.session.timeout.ms": 1000,
                                                   "group.consumer.heartbeat.interval.ms": 1000,
                                                   "group.consumer.min.heartbeat.interval.ms": 100,
                                                   # these tests step through reconciliation one heartbeat at a
                                                   # time; the interval has its own test below
                                                   "group.consumer.assignment.interval.ms": 0})
    coord = GroupCoordinator(ctx, clock=clock, persist=False)
    return coord, clock, ctx


async def started(env):
    coord, clock, ctx = env
    await coord.start(run_timers=False)
    return coord, clock, ctx


class Member:
    """A KIP-848 consumer: owns what the coordinator assigned and acks revocations on its next heartbeat."""

    def __init__(self, coord, name="m", group="g", topics=("t",), instance=None, assignor=None):
        self.client = Client(coord, name)
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.group = group
        self.topics = list(topics)
        self.instance = instance
        self.assignor = assignor
        self.owned: dict[uuid.UUID, list[int]] = {}
        self.last = None

    async def heartbeat(self, version=1, **over):
        fields = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                      instance_id=self.instance, rack_id=None, rebalance_timeout_ms=-1,
                      subscribed_topic_names=None, server_assignor=None,
                      topic_partitions=[dict(topic_id=t, partitions=ps) for t, ps in self.owned.items()])
        if self.epoch == 0:
            fields.update(rebalance_timeout_ms=REBALANCE, subscribed_topic_names=self.topics,
                          server_assignor=self.assignor, topic_partitions=[])
        fields.update(over)
        r = await self.client.call(CGH, version, **fields)
        self.last = r
        if r.error_code == 0:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {tp.topic_id: sorted(tp.partitions) for tp in r.assignment.topic_partitions}
        return r

    def partitions(self, ctx, topic="t"):
        return set(self.owned.get(ctx.topic_id(topic), []))


async def converge(members, rounds=6):
    for _ in range(rounds):
        for m in members:
            r = await m.heartbeat()
            assert r.error_code == 0, r


async def test_first_member_gets_every_partition_at_epoch_two(env):
    # Kafka 4.3.1: a new group is at epoch 1; the first member's subscription bumps it to 2
    coord, clock, ctx = await started(env)
    m = Member(coord)
    r = await m.heartbeat()
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, m.member_id, 2, 1000)
    assert m.partitions(ctx) == {0, 1, 2, 3}
    assert coord.groups["g"].state_name() == "Stable"


async def test_a_second_member_receives_partitions_only_after_the_first_revokes_them(env):
    coord, clock, ctx = await started(env)
    a, b = Member(coord, "a"), Member(coord, "b")
    await a.heartbeat()
    rb = await b.heartbeat()
    assert rb.member_epoch == 3 and b.partitions(ctx) == set()  # still owned by a: unreleased
    assert coord.groups["g"].state_name() == "Reconciling"
    ra = await a.heartbeat()
    assert ra.member_epoch == 2 and len(a.partitions(ctx)) == 2  # a must revoke two first, same epoch
    ra = await a.heartbeat()  # reports it owns only its two now
    assert ra.member_epoch == 3
    rb = await b.heartbeat()
    assert len(b.partitions(ctx)) == 2 and not (a.partitions(ctx) & b.partitions(ctx))
    assert coord.groups["g"].state_name() == "Stable"


async def test_epoch_and_member_errors_follow_kafka(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "a")
    await a.heartbeat()
    r = await a.heartbeat(member_epoch=5)
    assert r.error_code == E.FENCED_MEMBER_EPOCH
    r = await a.heartbeat(member_id="nobody", member_epoch=1)
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    r = await a.heartbeat(group_id="none", member_epoch=1)
    assert r.error_code == E.GROUP_ID_NOT_FOUND  # as Kafka 4.3 (test_consumer_group_edges_vs_kafka)
    r = await Member(coord, "x").heartbeat(server_assignor="nope")
    assert r.error_code == E.UNSUPPORTED_ASSIGNOR
    r = await Member(coord, "x").heartbeat(subscribed_topic_names=None)
    assert r.error_code == E.INVALID_REQUEST  # an empty list is a valid first subscription, null is not
    r = await Member(coord, "x").heartbeat(member_id="")
    assert r.error_code == E.INVALID_REQUEST and "MemberId" in r.error_message
    r = await Member(coord, "x").heartbeat(version=0, member_id="")
    assert r.error_code == 0 and r.member_id  # v0: the coordinator picks the id
    r = await Member(coord, "x").heartbeat(subscribed_topic_regex="(", subscribed_topic_names=None)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION


async def test_a_regex_subscription_matches_internal_topics_too_as_kafkas_does():
    # Kafka resolves a member's regex against every topic of the metadata image, __consumer_offsets included
    # (GroupMetadataManager.refreshRegularExpressions; franz-go's Test848RegexBrokerResolves checks it on Kafka)
    ctx = TestContext(topics={"t": 2, "__consumer_offsets": 3})
    coord = GroupCoordinator(ctx, clock=FakeClock(), persist=False)
    await coord.start(run_timers=False)
    m = Member(coord, "m", topics=())
    r = await m.heartbeat(subscribed_topic_names=None, subscribed_topic_regex="__consumer_offsets")
    assert r.error_code == 0
    assert m.partitions(ctx, "__consumer_offsets") == {0, 1, 2} and m.partitions(ctx, "t") == set()


async def test_leaving_member_partitions_go_to_the_survivor(env):
    coord, clock, ctx = await started(env)
    a, b = Member(coord, "a"), Member(coord, "b")
    await converge([a, b])
    r = await b.heartbeat(member_epoch=-1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    await converge([a], rounds=2)
    assert a.partitions(ctx) == {0, 1, 2, 3}


async def test_session_expiry_fences_a_silent_member(env):
    coord, clock, ctx = await started(env)
    a, b = Member(coord, "a"), Member(coord, "b")
    await converge([a, b])
    for _ in range(4):
        clock.now += 4000
        await a.heartbeat()
        coord.timer.poll()
    assert b.member_id not in coord.groups["g"].members
    await converge([a], rounds=2)
    assert a.partitions(ctx) == {0, 1, 2, 3}
    r = await b.heartbeat()
    assert r.error_code == E.UNKNOWN_MEMBER_ID


async def test_member_that_never_revokes_is_fenced_after_its_rebalance_timeout(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "a")
    await a.heartbeat()
    b = Member(coord, "b")
    await b.heartbeat()
    # a learns it must revoke but keeps reporting the partitions (a stuck consumer), heartbeating all along.
    stuck = dict(a.owned)
    for _ in range(8):
        clock.now += 5000
        a.owned = stuck
        r = await a.heartbeat(topic_partitions=[dict(topic_id=t, partitions=ps) for t, ps in stuck.items()])
        coord.timer.poll()
        if r.error_code:
            break
    assert a.member_id not in coord.groups["g"].members


async def test_static_member_rejoins_with_its_assignment_and_no_new_epoch(env):
    coord, clock, ctx = await started(env)
    a, s = Member(coord, "a"), Member(coord, "s", instance="inst-1")
    await converge([a, s])
    before = s.partitions(ctx)
    epoch = coord.groups["g"].group_epoch
    r = await s.heartbeat(member_epoch=-2)
    assert (r.error_code, r.member_epoch) == (0, -2)
    s2 = Member(coord, "s", instance="inst-1")  # the restarted process: new member id
    r = await s2.heartbeat()
    assert r.error_code == 0 and s2.partitions(ctx) == before
    assert coord.groups["g"].group_epoch == epoch
    # The old incarnation is fenced; a duplicate instance is refused while the new one is active.
    r = await s.heartbeat(member_epoch=r.member_epoch)
    assert r.error_code == E.FENCED_INSTANCE_ID
    r = await Member(coord, "dup", instance="inst-1").heartbeat()
    assert r.error_code == E.UNRELEASED_INSTANCE_ID


async def test_range_assignor_gives_co_partitioned_ranges(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "a", topics=("t", "u"), assignor="range")
    b = Member(coord, "b", topics=("t", "u"), assignor="range")
    await converge([a, b])
    pa, pb = a.partitions(ctx, "t"), b.partitions(ctx, "t")
    assert sorted([sorted(pa), sorted(pb)]) == [[0, 1], [2, 3]]
    first = a if 0 in pa else b
    assert first.partitions(ctx, "u") == {0, 1}
    d = await Client(coord).call(CGD, 0, group_ids=["g"], include_authorized_operations=False)
    assert d.groups[0].assignor_name == "range"


async def test_uniform_assignor_balances_and_keeps_partitions_in_place(env):
    coord, clock, ctx = await started(env)
    ms = [Member(coord, f"m{i}", topics=("t", "u")) for i in range(3)]
    await converge(ms[:2])
    kept = {m.member_id: m.partitions(ctx, "t") | {10 + p for p in m.partitions(ctx, "u")} for m in ms[:2]}
    await converge(ms)
    sizes = sorted(len(m.partitions(ctx, "t")) + len(m.partitions(ctx, "u")) for m in ms)
    assert sizes == [2, 2, 3]
    for m in ms[:2]:
        now = m.partitions(ctx, "t") | {10 + p for p in m.partitions(ctx, "u")}
        assert now <= kept[m.member_id], "existing members only gave partitions away"
    every = [(t, p) for m in ms for t in ("t", "u") for p in m.partitions(ctx, t)]
    assert len(every) == len(set(every)) == 7


async def test_new_topic_partitions_bump_the_group_epoch(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "a", topics=("t", "later"))
    await a.heartbeat()
    assert a.partitions(ctx, "later") == set()
    ctx.topics["later"] = 2
    await converge([a], rounds=2)
    assert a.partitions(ctx, "later") == {0, 1}


async def test_consumer_group_describe_and_list(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "cli-a")
    await a.heartbeat()
    c = Client(coord)
    d = await c.call(CGD, 0, group_ids=["g", "none", ""], include_authorized_operations=False)
    g, none, empty = d.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
        (0, "Stable", 2, 2, "uniform")
    m = g.members[0]
    assert (m.member_id, m.client_id, m.member_epoch, m.subscribed_topic_names) == (a.member_id, "cli-a", 2, ["t"])
    assert m.assignment.topic_partitions[0].topic_name == "t"
    assert sorted(m.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
    assert none.error_code == E.GROUP_ID_NOT_FOUND and empty.error_code == E.INVALID_GROUP_ID
    r = await c.call(LIST, 5, states_filter=[], types_filter=["consumer"])
    assert [(x.group_id, x.group_state, x.group_type, x.protocol_type) for x in r.groups] == [
        ("g", "Stable", "consumer", "consumer")]
    d = await c.call(DESCRIBE, 6, groups=["g"], include_authorized_operations=False)
    assert d.groups[0].error_code == E.GROUP_ID_NOT_FOUND  # not a classic group


async def test_consumer_group_describe_v1_tells_each_members_protocol_type(env):
    coord, clock, ctx = await started(env)
    a, b = Member(coord, "cli-a"), Member(coord, "cli-b")
    await converge([a, b], rounds=2)
    c = Client(coord)
    v1 = await c.call(CGD, 1, group_ids=["g"], include_authorized_operations=False)
    assert sorted((m.client_id, m.member_type) for m in v1.groups[0].members) == [("cli-a", 1), ("cli-b", 1)]
    # v0 has no MemberType on the wire: the decoder fills in the schema default (-1, unknown).
    v0 = await c.call(CGD, 0, group_ids=["g"], include_authorized_operations=False)
    assert [m.member_type for m in v0.groups[0].members] == [-1, -1]
    assert coord.SUPPORTED_APIS[CGD] == (0, 1)


async def test_offset_commit_checks_the_member_epoch(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "a")
    await a.heartbeat()
    c = Client(coord)
    topics = [dict(name="t", partitions=[dict(partition_index=0, committed_offset=9, committed_metadata="m")])]

    async def commit(version, epoch, member=a.member_id):
        r = await c.call(COMMIT, version, group_id="g", generation_id_or_member_epoch=epoch, member_id=member,
                         topics=topics)
        return r.topics[0].partitions[0].error_code

    assert await commit(9, 2) == 0
    assert await commit(9, 1) == E.STALE_MEMBER_EPOCH
    assert await commit(9, 2, "ghost") == E.UNKNOWN_MEMBER_ID
    assert await commit(8, 2) == E.UNSUPPORTED_VERSION
    f = await c.call(FETCH, 9, groups=[dict(group_id="g", member_id=a.member_id, member_epoch=2, topics=None)])
    assert f.groups[0].error_code == 0 and f.groups[0].topics[0].partitions[0].committed_offset == 9
    f = await c.call(FETCH, 9, groups=[dict(group_id="g", member_id=a.member_id, member_epoch=7, topics=None)])
    assert f.groups[0].error_code == E.STALE_MEMBER_EPOCH


async def test_txn_offset_commit_checks_the_member_epoch_and_stays_pending_until_the_commit_marker(env):
    """KIP-447 with a consumer-protocol member (franz-go's TestTxnEtl/*/848): TxnOffsetCommit at any version
    carries the member epoch (a stale one reads ILLEGAL_GENERATION); the offsets become visible at the COMMIT
    marker, and until then OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT."""
    coord, clock, ctx = await started(env)
    a = Member(coord, "a")
    await a.heartbeat()
    c = Client(coord)

    async def txn_commit(epoch, member=a.member_id, offset=5):
        r = await c.call(28, 3, transactional_id="tx", group_id="g", producer_id=77, producer_epoch=0,
                         generation_id=epoch, member_id=member, group_instance_id=None, topics=[
                             dict(name="t", partitions=[dict(partition_index=0, committed_offset=offset,
                                                             committed_leader_epoch=-1, committed_metadata="")])])
        return r.topics[0].partitions[0].error_code

    assert await txn_commit(1) == E.ILLEGAL_GENERATION
    assert await txn_commit(2, "ghost") == E.UNKNOWN_MEMBER_ID
    assert await txn_commit(2) == 0

    async def fetched(require_stable):
        f = await c.call(FETCH, 9, groups=[dict(group_id="g", member_id=a.member_id, member_epoch=2, topics=[
            dict(name="t", partition_indexes=[0])])], require_stable=require_stable)
        p = f.groups[0].topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert await fetched(False) == (0, -1)
    assert await fetched(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    coord.complete_transaction(0, 77, False)      # ABORT: dropped
    assert await fetched(True) == (0, -1)
    assert await txn_commit(2, offset=6) == 0
    coord.complete_transaction(0, 77, True)       # COMMIT: visible
    assert await fetched(True) == (0, 6)


async def test_empty_consumer_group_can_be_deleted_and_reused_by_classic_members(env):
    coord, clock, ctx = await started(env)
    a = Member(coord, "a")
    await a.heartbeat()
    c = Client(coord)
    r = await c.call(DELETE, 2, groups_names=["g"])
    assert r.results[0].error_code == E.NON_EMPTY_GROUP
    await a.heartbeat(member_epoch=-1)
    assert coord.groups["g"].state_name() == "Empty"
    r = await c.call(JOIN, 5, group_id="g", session_timeout_ms=6000, rebalance_timeout_ms=6000, member_id="",
                     group_instance_id=None, protocol_type="consumer", protocols=[dict(name="range", metadata=b"")])
    # v5 first join: MEMBER_ID_REQUIRED from the converted (now classic) group.
    assert r.error_code == E.MEMBER_ID_REQUIRED
    assert coord.groups["g"].group_type == "classic"




async def test_a_new_target_waits_for_the_assignment_interval_since_the_last_one(env):
    """consumer.assignment.interval.ms (KIP-1263): a member joining within the interval of the group's last
    target assignment gets nothing (the group stays Assigning at the old target) until a heartbeat after the
    interval computes the new target; the interval comes from the group config over the broker's."""
    coord, clock, ctx = await started(env)
    coord.consumer.group_configs = lambda group_id: {"consumer.assignment.interval.ms": "1000"}
    a, b = Member(coord, "a"), Member(coord, "b")
    await a.heartbeat()
    assert a.partitions(ctx) == {0, 1, 2, 3}
    clock.now += 999
    rb = await b.heartbeat()
    assert (rb.member_epoch, b.partitions(ctx)) == (2, set())
    assert coord.groups["g"].state_name() == "Assigning"
    await a.heartbeat()
    assert (a.epoch, len(a.partitions(ctx))) == (2, 4)
    clock.now += 1
    await converge([a, b])
    assert (a.epoch, b.epoch) == (3, 3)
    assert a.partitions(ctx) | b.partitions(ctx) == {0, 1, 2, 3} and len(b.partitions(ctx)) == 2


run_async_tests(globals())
