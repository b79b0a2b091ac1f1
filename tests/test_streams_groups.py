"""Streams groups (KIP-1071) in klog's group coordinator, in process with a fake clock: standby tasks, fencing by the
session and rebalance timeouts, ShutdownApplication, and the group rebuilt from its StreamsGroup* records in
``__consumer_offsets`` after a restart. Kafka's behaviour on the wire is checked side by side in
test_streams_groups_vs_kafka.py."""

from __future__ import annotations

import asyncio

from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.broker.groups import GroupCoordinator
from klog.controller.topics import CreatableTopic
from klog.protocol.errors import ErrorCode as E

from groups_support import Client, FakeClock, TestContext, run_async_tests

SGH, SGD = 88, 89
APP = "wc"
REPARTITION, CHANGELOG = f"{APP}-words-repartition", f"{APP}-counts-changelog"
TOPICS = {"in": 4, "out": 4, REPARTITION: 4, CHANGELOG: 4}
FAST = {"group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignment.interval.ms": 0,
        "group.streams.session.timeout.ms": 6000,
        "group.streams.min.session.timeout.ms": 1000}
ALL = {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}


def topology() -> dict:
    def info(name: str) -> dict:
        return {"name": name, "partitions": 0, "replication_factor": 0, "topic_configs": []}

    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [REPARTITION], "repartition_source_topics": [], "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [info(CHANGELOG)], "repartition_sink_topics": [],
         "repartition_source_topics": [info(REPARTITION)], "copartition_groups": []}]}


def join(member: str, process: str, rebalance_timeout_ms: int = 30000) -> dict:
    return dict(group_id=APP, member_id=member, member_epoch=0, endpoint_information_epoch=-1, instance_id=None,
                rack_id=None, rebalance_timeout_ms=rebalance_timeout_ms, topology=topology(), active_tasks=[],
                standby_tasks=[], warmup_tasks=[], process_id=process, user_endpoint=None, client_tags=[],
                task_offsets=None, task_end_offsets=None, shutdown_application=False)


def beat(member: str, epoch: int, active: dict | None = None, standby: dict | None = None,
         shutdown: bool = False) -> dict:
    def ids(tasks: dict | None) -> list | None:
        return None if tasks is None else [{"subtopology_id": s, "partitions": p} for s, p in sorted(tasks.items())]

    owned = active is not None or standby is not None
    return dict(group_id=APP, member_id=member, member_epoch=epoch, endpoint_information_epoch=-1, instance_id=None,
                rack_id=None, rebalance_timeout_ms=-1, topology=None, active_tasks=ids(active or {}) if owned else None,
                standby_tasks=ids(standby or {}) if owned else None, warmup_tasks=[] if owned else None,
                process_id=None, user_endpoint=None, client_tags=None, task_offsets=None, task_end_offsets=None,
                shutdown_application=shutdown)


def tasks(items) -> dict[str, list[int]]:
    return {t.subtopology_id: sorted(t.partitions) for t in items or [] if t.partitions}


class Member:
    """A streams client's heartbeat loop, reporting the tasks it was given (it revokes at once)."""

    def __init__(self, coord, member_id: str, process: str, rebalance_timeout_ms: int = 30000) -> None:
        self.client = Client(coord, f"{member_id}-client")
        self.member_id, self.process, self.timeout = member_id, process, rebalance_timeout_ms
        self.epoch = 0
        self.active: dict[str, list[int]] = {}
        self.standby: dict[str, list[int]] = {}
        self.last = None

    async def heartbeat(self, **extra):
        if self.epoch == 0:
            response = await self.client.call(SGH, 0, **join(self.member_id, self.process, self.timeout))
        else:
            response = await self.client.call(SGH, 0, **{**beat(self.member_id, self.epoch, self.active,
                                                                 self.standby), **extra})
        assert response.error_code == E.NONE, (response.error_code, response.error_message)
        self.epoch = response.member_epoch
        if response.active_tasks is not None:
            self.active, self.standby = tasks(response.active_tasks), tasks(response.standby_tasks)
        self.last = response
        return response


async def settle(coord, *members: Member, rounds: int = 8) -> None:
    for _ in range(rounds):
        for m in members:
            await m.heartbeat()
    described = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    assert described.group_state == "Stable", described


async def coordinator(**config) -> tuple[GroupCoordinator, FakeClock]:
    clock = FakeClock()
    coord = GroupCoordinator(TestContext(TOPICS, **{**FAST, **config}), clock=clock, persist=False)
    await coord.start(run_timers=False)
    return coord, clock


async def test_standby_tasks_go_to_a_member_of_another_process():
    coord, _ = await coordinator(**{"group.streams.num.standby.replicas": 1})
    a, b = Member(coord, "a", "p1"), Member(coord, "b", "p2")
    await settle(coord, a, b)
    for s in ("0", "1"):
        assert sorted(a.active.get(s, []) + b.active.get(s, [])) == [0, 1, 2, 3]
    # every task of the stateful subtopology (1: it has a changelog) has a standby copy, on the process that does not
    # run it; the stateless subtopology's tasks have none, as in Kafka
    assert a.standby == {"1": b.active["1"]} and b.standby == {"1": a.active["1"]}
    # two members of one process: no standby (a copy on the same process would not survive its loss)
    coord2, _ = await coordinator(**{"group.streams.num.standby.replicas": 1})
    c, d = Member(coord2, "c", "p1"), Member(coord2, "d", "p1")
    await settle(coord2, c, d)
    assert c.standby == {} and d.standby == {}
    await coord.stop()
    await coord2.stop()


async def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout():
    coord, clock = await coordinator()
    a = Member(coord, "a", "p1", rebalance_timeout_ms=5000)
    await settle(coord, a)
    assert a.active == ALL
    b = Member(coord, "b", "p2")
    await b.heartbeat()
    told = await a.client.call(SGH, 0, **beat("a", a.epoch, ALL))   # still reports every task: not revoked
    assert told.active_tasks is not None and tasks(told.active_tasks) != ALL
    await b.heartbeat()
    assert b.active == {}, "a task still owned elsewhere was handed out"
    clock.now += 5001
    coord.timer.poll()
    gone = await a.client.call(SGH, 0, **beat("a", a.epoch, ALL))
    assert gone.error_code == E.UNKNOWN_MEMBER_ID
    for _ in range(3):
        await b.heartbeat()
    assert b.active == ALL
    await coord.stop()


async def test_a_silent_member_is_fenced_after_the_session_timeout():
    coord, clock = await coordinator()
    a, b = Member(coord, "a", "p1"), Member(coord, "b", "p2")
    await settle(coord, a, b)
    epoch = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    clock.now += 4000
    await b.heartbeat()            # b keeps its session, a says nothing
    clock.now += 2001
    coord.timer.poll()
    described = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    assert [m.member_id for m in described.members] == ["b"]
    assert described.group_epoch > epoch.group_epoch
    for _ in range(3):
        await b.heartbeat()
    assert b.active == ALL
    await coord.stop()


async def test_assignments_come_at_most_once_per_assignment_interval():
    coord, clock = await coordinator(**{"group.streams.assignment.interval.ms": 1000})
    a = Member(coord, "a", "p1")
    await a.heartbeat()
    assert a.active == ALL
    b = Member(coord, "b", "p2")
    joined = await b.heartbeat()   # a new epoch within the interval: its assignment waits
    assert [(s.status_code, s.status_detail) for s in joined.status] == [
        (5, "Assignment delayed due to the configured assignment interval.")]
    described = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    assert described.group_state == "Assigning" and described.group_epoch > described.assignment_epoch
    await a.heartbeat()
    assert a.active == ALL
    clock.now += 1000
    coord.timer.poll()
    described = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    assert described.group_epoch == described.assignment_epoch
    for _ in range(3):
        await a.heartbeat()
        await b.heartbeat()
    assert sorted(a.active["0"] + b.active["0"]) == [0, 1, 2, 3] and a.active != ALL
    await coord.stop()


async def test_shutdown_application_reaches_every_member():
    coord, _ = await coordinator()
    a, b = Member(coord, "a", "p1"), Member(coord, "b", "p2")
    await settle(coord, a, b)
    asked = await a.heartbeat(shutdown_application=True)
    other = await b.heartbeat()
    for response in (asked, other):
        assert [s.status_code for s in response.status] == [4], response.status
        assert "requested by member a" in response.status[0].status_detail
    await coord.stop()


async def test_the_group_is_rebuilt_from_its_records_after_a_restart(tmp_path):
    clock = FakeClock()
    props = {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.num.partitions": "3",
             **{k: str(v) for k, v in FAST.items()}}

    async def open_coordinator() -> tuple[BrokerState, GroupCoordinator]:
        state = BrokerState(BrokerConfig(props), asyncio.get_running_loop())
        if state.partition_count("in") is None:
            await state.controller_apis.create([CreatableTopic("in", 4), CreatableTopic("out", 4)])
        coord = GroupCoordinator(state, clock=clock)
        await coord.start(run_timers=False)
        return state, coord

    state, coord = await open_coordinator()
    a, b = Member(coord, "a", "p1"), Member(coord, "b", "p2")
    await settle(coord, a, b)
    # the coordinator created the internal topics with the partitions the topology implies
    assert state.partition_count(REPARTITION) == 4 and state.partition_count(CHANGELOG) == 4
    before = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    await coord.stop()
    state.close()

    state, coord = await open_coordinator()
    after = (await Client(coord).call(SGD, 0, group_ids=[APP], include_authorized_operations=False)).groups[0]
    assert after == before
    # the members carry on at their epochs with the new coordinator
    for m in (a, b):
        m.client = Client(coord, f"{m.member_id}-client")
        await m.heartbeat()
    assert sorted(a.active.get("0", []) + b.active.get("0", [])) == [0, 1, 2, 3]
    await coord.stop()
    state.close()


run_async_tests(globals())
