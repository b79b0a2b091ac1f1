"""Random sequences of group requests and clock jumps: every answer encodes at its version, nothing raises,
and the coordinator's bookkeeping stays consistent (hypothesis, bounded)."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klog.broker.groups import GroupCoordinator
from klog.broker.groups.classic_group import ClassicGroup
from klog.broker.groups.consumer import ConsumerGroup

from groups_support import Client, FakeClock, TestContext, consumer_subscription

GROUPS = ["g1", "g2"]
op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(GROUPS), st.integers(0, 5), st.sampled_from([0, 3, 5, 9]),
              st.sampled_from([None, "i1", "i2"]), st.sampled_from(["range", "roundrobin"])),
    st.tuples(st.just("sync"), st.sampled_from(GROUPS), st.integers(0, 5), st.integers(-1, 4)),
    st.tuples(st.just("heartbeat"), st.sampled_from(GROUPS), st.integers(0, 5), st.integers(-1, 4)),
    st.tuples(st.just("leave"), st.sampled_from(GROUPS), st.integers(0, 5), st.sampled_from([0, 3, 5])),
    st.tuples(st.just("commit"), st.sampled_from(GROUPS), st.integers(0, 5), st.integers(-1, 4)),
    st.tuples(st.just("cgh"), st.sampled_from(GROUPS), st.integers(0, 5), st.integers(-2, 3)),
    st.tuples(st.just("tick"), st.integers(0, 20000)),
    st.tuples(st.just("admin"), st.sampled_from(GROUPS)),
)


def check_invariants(coord: GroupCoordinator) -> None:
    for group in coord.groups.values():
        if isinstance(group, ClassicGroup):
            assert group.num_awaiting_join == sum(1 for m in group.members.values() if m.awaiting_join)
            assert group.leader_id is None or group.leader_id in group.members or not group.members
            for inst, mid in group.static_members.items():
                assert group.members[mid].group_instance_id == inst
            assert all(n >= 0 for n in group.supported_protocols.values())
        elif isinstance(group, ConsumerGroup):
            owners = {}
            for m in group.members.values():
                for parts in (m.assigned, m.pending_revocation):
                    for t, ps in parts.items():
                        for p in ps:
                            assert (t, p) not in owners, "a partition has two owners"
                            owners[(t, p)] = m.member_id
            assert set(owners) == set(group.partition_epochs)


async def run(ops) -> None:
    clock = FakeClock()
    coord = GroupCoordinator(TestContext(topics={"t": 3}, **{"group.consumer.session.timeout.ms": 8000,
                                                             "group.consumer.min.session.timeout.ms": 1000}),
                             clock=clock, persist=False)
    await coord.start(run_timers=False)
    clients = [Client(coord, f"c{i}") for i in range(6)]
    ids: dict[tuple[str, int], str] = {}
    pending: list[asyncio.Future] = []
    for o in ops:
        kind = o[0]
        if kind == "tick":
            clock.now += o[1]
            coord.timer.poll()
        elif kind == "admin":
            c = clients[0]
            await c.call(16, 5, states_filter=[], types_filter=[])
            await c.call(15, 5, groups=[o[1]], include_authorized_operations=False)
            await c.call(69, 0, group_ids=[o[1]], include_authorized_operations=False)
            await c.call(9, 8, groups=[dict(group_id=o[1], topics=None)])
        else:
            group, who = o[1], o[2]
            c = clients[who]
            mid = ids.get((group, who), "")
            if kind == "join":
                fields = dict(group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=7000, member_id=mid,
                              group_instance_id=o[4], protocol_type="consumer",
                              protocols=[dict(name=o[5], metadata=consumer_subscription("t"))])

                async def join(c=c, v=o[3], fields=fields, key=(group, who)):
                    r = await c.call(11, v, **fields)
                    if r.member_id:
                        ids[key] = r.member_id
                pending.append(asyncio.ensure_future(join()))
            elif kind == "sync":
                pending.append(asyncio.ensure_future(c.call(
                    14, 5, group_id=group, generation_id=o[3], member_id=mid, group_instance_id=None,
                    protocol_type=None, protocol_name=None, assignments=[dict(member_id=mid, assignment=b"x")])))
            elif kind == "heartbeat":
                await c.call(12, 4, group_id=group, generation_id=o[3], member_id=mid)
            elif kind == "leave":
                if o[3] >= 3:
                    await c.call(13, o[3], group_id=group, members=[dict(member_id=mid)])
                else:
                    await c.call(13, 0, group_id=group, member_id=mid)
            elif kind == "commit":
                await c.call(8, 8, group_id=group, generation_id_or_member_epoch=o[3], member_id=mid,
                             topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=1,
                                                                     committed_metadata="m")])])
            elif kind == "cgh":
                member = ids.get((group, 100 + who)) or f"k-{who}"
                ids[(group, 100 + who)] = member
                await c.call(68, 1, group_id=group, member_id=member, member_epoch=o[3], instance_id=None,
                             rack_id=None, rebalance_timeout_ms=5000 if o[3] == 0 else -1,
                             subscribed_topic_names=["t"] if o[3] == 0 else None, server_assignor=None,
                             topic_partitions=[] if o[3] == 0 else None)
        for _ in range(3):
            await asyncio.sleep(0)
        check_invariants(coord)
    await coord.stop()
    for f in pending:
        await asyncio.wait_for(f, 5)  # every parked request is answered (stop answers NOT_COORDINATOR)
    check_invariants(coord)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=40))
def test_random_request_sequences_keep_the_coordinator_consistent(ops):
    asyncio.run(run(ops))
