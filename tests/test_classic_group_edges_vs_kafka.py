"""The classic group protocol's edge cases answered as Apache Kafka 4.3 answers them, on a klog node and on an Apache
Kafka node started from the same properties (``group.max.size`` 2, session timeouts within 1000..100000 ms): JoinGroup
with no protocol, another protocol type or no common protocol (INCONSISTENT_GROUP_PROTOCOL), v4+ without a member id
(MEMBER_ID_REQUIRED, then that pending member's other requests), an unknown member id, a session timeout out of
bounds (INVALID_SESSION_TIMEOUT), a full group (GROUP_MAX_SIZE_REACHED), a static member replaced by another member id
(FENCED_INSTANCE_ID for the old one on every API), SyncGroup with another generation, protocol type or name, Heartbeat
and OffsetCommit during a rebalance, a LeaveGroup batch naming unknown members, DeleteGroups of a group with members
or none, an empty group id on every group API, OffsetCommit with generation -1 to a group with members.

Each step's observation (error codes, and what a client acts on) is compared with the one Apache Kafka 4.3 gave,
recorded below; klog's side runs on every change, Kafka's nightly (tests/conftest.py marks it long) to check the
record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from klog.protocol.errors import ErrorCode as E
from klog.testing.cluster import cluster_of

from test_groups_vs_kafka import Conn, assert_kafkas_answers, commit, join, ready

pytestmark = pytest.mark.timeout(300)

PROPERTIES = {"num.partitions": 2, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
              "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
              "group.max.session.timeout.ms": 100000, "group.max.size": 2, "auto.create.topics.enable": "true"}
JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = 11, 12, 13, 14, 15, 16
DELETE, COMMIT, FETCH, OFFSET_DELETE = 42, 8, 9, 47


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bootstrap address of a one-node klog or Apache Kafka cluster with PROPERTIES."""
    with cluster_of(request.param, tmp_path_factory.mktemp(f"classic-{request.param}"), 1, properties=PROPERTIES,
                    heap="512m") as cluster:
        cluster.wait_for_brokers()
        yield cluster.bootstrap_servers


def sync(group: str, generation: int, member: str, *, instance: str | None = None, ptype: str | None = "consumer",
         protocol: str | None = "range", assignments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "protocol_type": ptype, "protocol_name": protocol, "assignments": assignments or []}


def beat(group: str, generation: int, member: str, instance: str | None = None) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance}


def leaving(group: str, *members: tuple[str, str | None]) -> dict[str, Any]:
    return {"group_id": group, "members": [{"member_id": m, "group_instance_id": i, "reason": None}
                                           for m, i in members]}


async def _unanswered(task: asyncio.Future[Any], seconds: float = 2.0) -> bool:
    """Whether a request sent on another connection stays unanswered (parked by the broker) for ``seconds``."""
    deadline = time.monotonic() + seconds
    while not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return not task.done()


async def _settled(ask: Callable[[], Awaitable[Any]], transient: Callable[[Any], bool], timeout: float = 30.0) -> Any:
    """``ask()``'s answer once ``transient`` says it is not passing: Kafka completes a rebalance left with no member
    on its timer thread (a 0 ms timer, run within its timer's 200 ms tick) and shows a group made by a JoinGroup
    only once its record is committed, both a moment after answering; klog at once or on its next timer tick."""
    deadline = time.monotonic() + timeout
    answer = await ask()
    while transient(answer) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        answer = await ask()
    return answer


async def _described(admin: Conn, group: str) -> list[Any]:
    """DescribeGroups v5 of one group: (error, state, protocol type, protocol, its members' fields), settled."""
    async def ask() -> list[Any]:
        r = await admin.call(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})
        return [(x.error_code, x.group_state, x.protocol_type, x.protocol_data,
                 sorted((m.member_id != "", m.group_instance_id, m.client_id, m.client_host, len(m.member_metadata),
                         m.member_assignment) for m in x.members)) for x in r.groups]

    return await _settled(ask, lambda d: d[0][1] == "Dead" or (d[0][1] == "PreparingRebalance" and not d[0][4]))


async def scenario(bootstrap: str, tag: str) -> list[Any]:
    """The script; returns the comparable observations."""
    g, full, st, simple = f"edge-{tag}", f"full-{tag}", f"static-{tag}", f"simple-{tag}"
    await ready(bootstrap, [g, full, st, simple], {"dt": 2})
    out: list[Any] = []
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as c, Conn(bootstrap) as admin:
        # -- an empty group id on every group API
        out.append(("empty-id-join", (await a.call(JOIN, 5, join("", ""))).error_code))
        out.append(("empty-id-sync", (await a.call(SYNC, 5, sync("", 1, "m"))).error_code))
        out.append(("empty-id-heartbeat", (await a.call(HEARTBEAT, 4, beat("", 1, "m"))).error_code))
        out.append(("empty-id-leave-v0", (await a.call(LEAVE, 0, {"group_id": "", "member_id": "m"})).error_code))
        r = await a.call(LEAVE, 5, leaving("", ("m", None)))
        out.append(("empty-id-leave-v5", r.error_code, [m.error_code for m in r.members]))
        r = await a.call(COMMIT, 8, commit("", -1, ""))
        out.append(("empty-id-commit", [p.error_code for t in r.topics for p in t.partitions]))
        r = await a.call(FETCH, 7, {"group_id": "", "topics": [{"name": "dt", "partition_indexes": [0]}],
                                    "require_stable": False})
        out.append(("empty-id-fetch-v7", r.error_code, [p.error_code for t in r.topics for p in t.partitions]))
        r = await a.call(FETCH, 8, {"groups": [{"group_id": "", "topics": None}], "require_stable": False})
        out.append(("empty-id-fetch-v8", [x.error_code for x in r.groups]))
        r = await admin.call(DESCRIBE, 5, {"groups": [""], "include_authorized_operations": False})
        out.append(("empty-id-describe", [(x.error_code, x.group_state) for x in r.groups]))
        r = await admin.call(DELETE, 2, {"groups_names": [""]})
        out.append(("empty-id-delete", [x.error_code for x in r.results]))
        r = await admin.call(OFFSET_DELETE, 0, {"group_id": "", "topics": []})
        out.append(("empty-id-offset-delete", r.error_code))

        # -- JoinGroup's checks before the group
        for label, session in (("session-below-min", 999), ("session-above-max", 100001)):
            out.append((label, (await a.call(JOIN, 5, join(g, "", session=session))).error_code))
        no_protocol = {**join(g + "-none", ""), "protocols": []}
        out.append(("new-group-no-protocol", (await a.call(JOIN, 5, no_protocol)).error_code))
        out.append(("new-group-no-protocol-described", await _described(admin, g + "-none")))

        # -- a Stable group of one member, m1
        r = await a.call(JOIN, 5, join(g, ""))
        m1 = r.member_id
        r = await a.call(JOIN, 5, join(g, m1))
        gen = r.generation_id
        r = await a.call(SYNC, 5, sync(g, gen, m1, assignments=[{"member_id": m1, "assignment": b"A"}]))
        out.append(("stable", r.error_code, r.assignment))
        for label, body in (("join-other-type", join(g, "", ptype="other")),
                            ("join-no-common-protocol", join(g, "", protocol="roundrobin")),
                            ("join-no-protocol", {**join(g, ""), "protocols": []}),
                            ("join-known-other-type", join(g, m1, ptype="other")),
                            ("join-unknown-member", join(g, "nobody"))):
            r = await b.call(JOIN, 5, body)
            out.append((label, r.error_code, r.member_id == ""))
        for label, body in (("sync-other-generation", sync(g, gen + 1, m1)),
                            ("sync-other-type", sync(g, gen, m1, ptype="other")),
                            ("sync-other-protocol", sync(g, gen, m1, protocol="other")),
                            ("sync-stable", sync(g, gen, m1))):
            r = await a.call(SYNC, 5, body)
            out.append((label, r.error_code, r.assignment))
        out.append(("sync-v4-other-type-ignored", (await a.call(SYNC, 4, {
            "group_id": g, "generation_id": gen, "member_id": m1, "group_instance_id": None,
            "assignments": []})).error_code))
        out.append(("heartbeat-generation-minus-one", (await a.call(HEARTBEAT, 4, beat(g, -1, m1))).error_code))
        for label, generation, member in (("commit-minus-one-no-member", -1, ""),
                                          ("commit-minus-one-member", -1, m1),
                                          ("commit-generation-no-member", gen, "")):
            r = await a.call(COMMIT, 8, commit(g, generation, member))
            out.append((label, [p.error_code for t in r.topics for p in t.partitions]))

        # -- a v4+ member without a member id: pending until it joins with the one it was given
        r = await b.call(JOIN, 4, join(g, ""))
        pending = r.member_id
        out.append(("v4-member-id-required", r.error_code, pending != ""))
        out.append(("pending-heartbeat", (await b.call(HEARTBEAT, 4, beat(g, gen, pending))).error_code))
        out.append(("pending-sync", (await b.call(SYNC, 5, sync(g, gen, pending))).error_code))
        r = await b.call(COMMIT, 8, commit(g, gen, pending))
        out.append(("pending-commit", [p.error_code for t in r.topics for p in t.partitions]))
        r = await b.call(LEAVE, 5, leaving(g, (pending, None)))
        out.append(("pending-leave", r.error_code, [m.error_code for m in r.members]))
        out.append(("pending-left-rejoin", (await b.call(JOIN, 5, join(g, pending))).error_code))
        r = await c.call(JOIN, 3, join(f"v3-{tag}", ""))
        out.append(("v3-joins-without-member-id", r.error_code, r.generation_id, r.leader == r.member_id != ""))
        r = await c.call(LEAVE, 0, {"group_id": f"v3-{tag}", "member_id": r.member_id})
        out.append(("v3-leaves", r.error_code))

        # -- a rebalance: m2 joins; m1 learns of it from its heartbeat
        r = await b.call(JOIN, 5, join(g, ""))
        m2 = r.member_id
        parked = asyncio.ensure_future(b.call(JOIN, 5, join(g, m2)))
        await _settled(lambda: admin.call(DESCRIBE, 5, {"groups": [g], "include_authorized_operations": False}),
                       lambda d: d.groups[0].group_state != "PreparingRebalance")   # m2's JoinGroup arrived
        out.append(("heartbeat-preparing", (await a.call(HEARTBEAT, 4, beat(g, gen, m1))).error_code))
        r = await a.call(COMMIT, 8, commit(g, gen, m1))
        out.append(("commit-preparing", [p.error_code for t in r.topics for p in t.partitions]))
        out.append(("sync-preparing", (await a.call(SYNC, 5, sync(g, gen, m1))).error_code))
        r = await admin.call(DELETE, 2, {"groups_names": [g]})
        out.append(("delete-preparing", [x.error_code for x in r.results]))
        r = await admin.call(DESCRIBE, 5, {"groups": [g], "include_authorized_operations": False})
        out.append(("describe-preparing", [(x.error_code, x.group_state, x.protocol_data, len(x.members))
                                           for x in r.groups]))
        # a third member while two are in: the group is full
        r = await c.call(JOIN, 5, join(g, ""))
        out.append(("not-full-preparing", r.error_code, r.member_id == ""))
        if r.member_id:   # a pending member holds the rebalance back: it goes
            r = await c.call(LEAVE, 5, leaving(g, (r.member_id, None)))
            out.append(("pending-leaves-preparing", r.error_code, [m.error_code for m in r.members]))
        r1 = await a.call(JOIN, 5, join(g, m1))
        r2 = await parked
        gen2 = r1.generation_id
        out.append(("rebalanced", r1.error_code, r2.error_code, gen2 == r2.generation_id == gen + 1))
        out.append(("heartbeat-completing", (await b.call(HEARTBEAT, 4, beat(g, gen2, m2))).error_code))
        r = await c.call(JOIN, 5, join(g, ""))
        out.append(("full-completing", r.error_code, r.member_id == ""))
        # the follower's SyncGroup waits for the leader's assignment
        leader, follower, follower_id = (a, b, m2) if r1.leader == m1 else (b, a, m1)
        follower_sync = asyncio.ensure_future(follower.call(SYNC, 5, sync(g, gen2, follower_id)))
        out.append(("follower-sync-parked", await _unanswered(follower_sync)))
        r = await leader.call(SYNC, 5, sync(g, gen2, r1.leader, assignments=[
            {"member_id": m1, "assignment": b"1"}, {"member_id": m2, "assignment": b"2"}]))
        answered = await follower_sync
        out.append(("leader-sync", r.error_code, answered.error_code,
                    sorted([r.assignment, answered.assignment])))
        r = await c.call(JOIN, 5, join(g, ""))
        out.append(("full-stable", r.error_code, r.member_id == ""))
        r = await c.call(JOIN, 5, join(g, "", instance="late"))
        out.append(("full-static", r.error_code, r.member_id == ""))
        r = await admin.call(COMMIT, 8, commit(simple, -1, ""))
        out.append(("simple-commit", [p.error_code for t in r.topics for p in t.partitions]))
        r = await admin.call(DELETE, 2, {"groups_names": [g, g, f"unknown-{tag}", simple]})
        # (Kafka answers the groups of one coordinator in another order; clients read them by group id)
        out.append(("delete", sorted((x.group_id == g, x.group_id == simple, x.error_code) for x in r.results)))
        # -- a LeaveGroup batch naming unknown members
        r = await a.call(LEAVE, 5, leaving(g, (m2, None), ("nobody", None), ("", "nope"), (m1, "not-static")))
        out.append(("leave-batch", r.error_code, [m.error_code for m in r.members]))
        r = await a.call(LEAVE, 3, {"group_id": g, "members": []})
        out.append(("leave-no-member", r.error_code, len(r.members)))

        # -- a static member replaced by a new member id: the old one is fenced
        r = await a.call(JOIN, 5, join(st, "", instance="i1"))
        old, sgen = r.member_id, r.generation_id
        out.append(("static-join", r.error_code, sgen))
        out.append(("static-sync", (await a.call(SYNC, 5, sync(st, sgen, old, instance="i1", assignments=[
            {"member_id": old, "assignment": b"S"}]))).error_code))
        r = await b.call(JOIN, 5, join(st, "", instance="i1"))
        new = r.member_id
        out.append(("static-rejoin", r.error_code, r.generation_id == sgen, new != old))
        out.append(("fenced-heartbeat", (await a.call(HEARTBEAT, 4, beat(st, sgen, old, "i1"))).error_code))
        out.append(("fenced-sync", (await a.call(SYNC, 5, sync(st, sgen, old, instance="i1"))).error_code))
        r = await a.call(COMMIT, 8, commit(st, sgen, old, instance="i1"))
        out.append(("fenced-commit", [p.error_code for t in r.topics for p in t.partitions]))
        out.append(("fenced-join", (await a.call(JOIN, 5, join(st, old, instance="i1"))).error_code))
        r = await a.call(LEAVE, 5, leaving(st, (old, "i1")))
        out.append(("fenced-leave", r.error_code, [m.error_code for m in r.members]))
        out.append(("old-id-without-instance", (await a.call(HEARTBEAT, 4, beat(st, sgen, old))).error_code))
        out.append(("new-id-other-instance", (await b.call(HEARTBEAT, 4, beat(st, sgen, new, "i2"))).error_code))
        out.append(("new-id-heartbeat", (await b.call(HEARTBEAT, 4, beat(st, sgen, new, "i1"))).error_code))
        r = await b.call(SYNC, 5, sync(st, sgen, new, instance="i1"))
        out.append(("new-id-sync", r.error_code, r.assignment))
        out.append(("v4-ignores-instance", (await c.call(JOIN, 4, join(st, "", instance="i1"))).error_code))
        r = await b.call(LEAVE, 5, leaving(st, ("", "i1")))
        out.append(("leave-by-instance", r.error_code, [m.error_code for m in r.members]))
        out.append(("static-left", await _described(admin, st)))
        r = await a.call(COMMIT, 8, commit(st, -1, ""))
        out.append(("commit-minus-one-empty", [p.error_code for t in r.topics for p in t.partitions]))
        r = await admin.call(DELETE, 2, {"groups_names": [st]})
        out.append(("delete-empty", [x.error_code for x in r.results]))
        r = await admin.call(LIST, 5, {"states_filter": [], "types_filter": ["classic"]})
        out.append(("listed", sorted((x.group_id, x.group_state) for x in r.groups if x.group_id.endswith(tag))))
    return out


async def scenario_more(bootstrap: str, tag: str) -> list[Any]:
    """Rejoins in each state, static members joining and fenced in JoinGroup, what DescribeGroups and ListGroups
    show of the members, LeaveGroup batches naming a member twice, old request versions."""
    g, st, old = f"more-{tag}", f"smore-{tag}", f"old-{tag}"
    await ready(bootstrap, [g, st, old], {"dt": 2})
    out: list[Any] = []
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as c, Conn(bootstrap) as admin:
        # the session timeout at its bounds is taken (the pending members then leave: they would hold rebalances)
        for label, session in (("session-at-min", 1000), ("session-at-max", 100000)):
            r = await a.call(JOIN, 5, join(g, "", session=session))
            out.append((label, r.error_code))
            r = await a.call(LEAVE, 5, leaving(g, (r.member_id, None)))
            out.append((label + "-pending-leaves", r.error_code, [m.error_code for m in r.members]))
        m1 = (await a.call(JOIN, 5, join(g, ""))).member_id
        r = await a.call(JOIN, 5, join(g, m1))
        gen = r.generation_id
        out.append(("completing-described", await _described(admin, g)))
        r = await a.call(JOIN, 5, join(g, m1))   # the same protocols while completing: the same generation
        out.append(("rejoin-completing", r.error_code, r.generation_id == gen, len(r.members)))
        r = await a.call(SYNC, 5, sync(g, gen, m1, assignments=[{"member_id": m1, "assignment": b"A"},
                                                                 {"member_id": "nobody", "assignment": b"N"}]))
        out.append(("sync-naming-unknown-member", r.error_code, r.assignment))
        out.append(("stable-described", await _described(admin, g)))
        # a leader rejoining in Stable starts a rebalance (it completes at once: the only member)
        r = await a.call(JOIN, 5, join(g, m1))
        out.append(("leader-rejoin-stable", r.error_code, r.generation_id - gen, len(r.members)))
        gen = r.generation_id
        r = await a.call(SYNC, 5, sync(g, gen, m1, assignments=[{"member_id": m1, "assignment": b"B"}]))
        out.append(("resynced", r.error_code, r.assignment))
        # static members: an unknown one joining with a member id, a known one with another member id
        out.append(("static-unknown-with-member-id", (await b.call(JOIN, 5, join(st, "nobody", instance="s1")))
                    .error_code))
        r = await b.call(JOIN, 5, join(st, "", instance="s1"))
        s1, sgen = r.member_id, r.generation_id
        out.append(("static-first", r.error_code, sgen, r.leader == s1))
        out.append(("static-other-member-id", (await b.call(JOIN, 5, join(st, "other", instance="s1"))).error_code))
        out.append(("static-instance-of-dynamic", (await a.call(HEARTBEAT, 4, beat(g, gen, m1, "s1"))).error_code))
        # the static member rejoins during CompletingRebalance with a new member id: a new rebalance
        r = await c.call(JOIN, 5, join(st, "", instance="s1"))
        out.append(("static-replaced-completing", r.error_code, r.generation_id - sgen, r.member_id != s1))
        s1b, sgen2 = r.member_id, r.generation_id
        r = await c.call(SYNC, 5, sync(st, sgen2, s1b, instance="s1", assignments=[{"member_id": s1b,
                                                                                   "assignment": b"S"}]))
        out.append(("static-synced", r.error_code, r.assignment))
        out.append(("static-described", await _described(admin, st)))
        # a static member's leader rejoining in Stable with v9 skips the assignment (KIP-814)
        r = await c.call(JOIN, 9, {**join(st, "", instance="s1"), "reason": None})
        out.append(("static-leader-v9", r.error_code, r.generation_id == sgen2, r.skip_assignment,
                    r.leader == r.member_id, len(r.members)))
        # LeaveGroup naming one member twice, then a static member by its member id and instance id
        r = await a.call(LEAVE, 5, leaving(g, (m1, None), (m1, None)))
        out.append(("leave-twice", r.error_code, [m.error_code for m in r.members]))
        out.append(("left-described", await _described(admin, g)))
        r = await c.call(LEAVE, 5, leaving(st, ("", "s1"), ("", "s1")))
        out.append(("leave-instance-twice", r.error_code, [m.error_code for m in r.members]))
        # an Empty group: Heartbeat, SyncGroup, a rejoin with a member id
        out.append(("empty-heartbeat", (await a.call(HEARTBEAT, 4, beat(g, gen, m1))).error_code))
        out.append(("empty-sync", (await a.call(SYNC, 5, sync(g, gen, m1))).error_code))
        out.append(("empty-rejoin-with-id", (await a.call(JOIN, 5, join(g, m1))).error_code))
        # old versions: JoinGroup v0 (no rebalance timeout) and v1, OffsetCommit v2 with no generation
        r = await a.call(JOIN, 0, {"group_id": old, "session_timeout_ms": 30000, "member_id": "",
                                   "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        v0 = r.member_id
        out.append(("join-v0", r.error_code, r.generation_id, r.leader == v0))
        for version in (2, 8):
            r = await a.call(COMMIT, version, commit(old, -1, ""))
            out.append((f"commit-v{version}-no-generation", [p.error_code for t in r.topics for p in t.partitions]))
        r = await a.call(COMMIT, 2, commit(old, 1, v0))
        out.append(("commit-v2-member", [p.error_code for t in r.topics for p in t.partitions]))
        out.append(("heartbeat-v0", (await a.call(HEARTBEAT, 0, {"group_id": old, "generation_id": 1,
                                                                 "member_id": v0})).error_code))
        out.append(("sync-v0-leader", (await a.call(SYNC, 0, {
            "group_id": old, "generation_id": 1, "member_id": v0,
            "assignments": [{"member_id": v0, "assignment": b"Z"}]})).assignment))
        r = await admin.call(LIST, 4, {"states_filter": ["STABLE", "nonsense"]})
        out.append(("list-states", sorted(x.group_id for x in r.groups if x.group_id.endswith(tag))))
        r = await admin.call(LIST, 5, {"states_filter": [], "types_filter": ["Classic"]})
        out.append(("list-type-case", sorted(x.group_id for x in r.groups if x.group_id.endswith(tag))))
        r = await admin.call(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]})
        out.append(("list-type-consumer", sorted(x.group_id for x in r.groups if x.group_id.endswith(tag))))
        r = await admin.call(DESCRIBE, 5, {"groups": [old], "include_authorized_operations": True})
        out.append(("described-operations", [x.authorized_operations for x in r.groups]))
    return out



async def scenario_offsets(bootstrap: str, tag: str) -> list[Any]:
    """OffsetCommit's values at their bounds: metadata as long as offset.metadata.max.bytes counted in UTF-16 code
    units as Java's String.length() (a character outside the BMP counts two), negative offsets, null metadata, a
    partition committed twice in one request; what OffsetFetch answers for them. Unknown topics and partitions
    mixed with known ones, in groups that refuse the commit or take it: Kafka's KafkaApis refuses them before the
    coordinator sees the rest and answers them first, one entry per topic; OffsetDelete too."""
    g = f"offsets-{tag}"
    await ready(bootstrap, [g], {"dt": 2, "du": 1})
    out: list[Any] = []
    async with Conn(bootstrap) as a:
        async def committed(label: str, body: dict[str, Any]) -> None:
            r = await a.call(COMMIT, 8, body)
            f = await a.call(FETCH, 8, {"groups": [{"group_id": g, "topics": [{"name": "dt",
                                                                                "partition_indexes": [0]}]}],
                                        "require_stable": False})
            out.append((label, [p.error_code for t in r.topics for p in t.partitions],
                        [(p.committed_offset, p.metadata and len(p.metadata)) for x in f.groups for t in x.topics
                         for p in t.partitions]))

        for label, metadata in (("ascii-at-limit", "x" * 4096), ("ascii-over-limit", "x" * 4097),
                                ("two-byte-chars-at-limit", "\u00e9" * 4096),
                                ("astral-at-limit", "\U0001F600" * 2048),
                                ("astral-over-limit", "\U0001F600" * 2049), ("null", None)):
            await committed(f"metadata-{label}", commit(g, -1, "", metadata=metadata))
        for offset in (-1, -7):
            body = commit(g, -1, "")
            body["topics"][0]["partitions"][0]["committed_offset"] = offset
            await committed(f"offset{offset}", body)
        body = commit(g, -1, "")
        body["topics"][0]["partitions"] = [dict(body["topics"][0]["partitions"][0], committed_offset=o) for o in (8, 9)]
        await committed("partition-twice", body)

        # unknown topics and partitions are refused before the group is looked at, and answered first; the
        # answer has one entry per topic then (Kafka's OffsetCommitResponse.Builder)
        def part(index: int) -> dict[str, Any]:
            return {"partition_index": index, "committed_offset": 5, "committed_leader_epoch": -1,
                    "committed_metadata": ""}

        def answered(r: Any) -> list[Any]:
            return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics]

        for label, version, group, generation, topics in (
                ("unknown-group-v8", 8, f"none-{tag}", 3, [("dt", [0, 9]), (f"zz-{tag}", [0])]),
                ("unknown-group-v9", 9, f"none-{tag}", 3, [("dt", [0, 9]), (f"zz-{tag}", [0])]),
                ("only-refused", 9, f"none-{tag}", 3, [(f"zz-{tag}", [0]), ("dt", [7]), ("dt", [])]),
                ("twice-no-refusal", 9, g, -1, [("dt", [0]), ("dt", [1]), ("dt", [])])):
            body = commit(group, generation, "m" if generation >= 0 else "")
            body["topics"] = [{"name": t, "partitions": [part(i) for i in ps]} for t, ps in topics]
            out.append((label, answered(await a.call(COMMIT, version, body))))
        for version in (2, 8, 9):
            body = commit(g, -1, "")
            body["topics"] = [{"name": t, "partitions": [part(i) for i in ps]} for t, ps in (
                ("dt", [0, 9, 1, -1]), (f"zz-{tag}", [0]), ("dt", [1]), ("du", []), ("du", [0]))]
            out.append((f"merged-v{version}", answered(await a.call(COMMIT, version, body))))
        # OffsetDelete likewise; its coordinator is asked even when nothing is left (a group error answers alone)
        for label, group, topics in (
                ("delete-mixed", g, [(f"zz-{tag}", [0]), ("dt", [1, 7, 0]), ("du", [0])]),
                ("delete-twice", g, [("dt", [0, 0, -1]), ("dt", [1]), ("du", [])]),
                ("delete-refused-unknown-group", f"none-{tag}", [(f"zz-{tag}", [0])]),
                ("delete-refused-known-group", g, [(f"zz-{tag}", [0]), ("dt", [5])])):
            r = await a.call(OFFSET_DELETE, 0, {"group_id": group, "topics": [
                {"name": t, "partitions": [{"partition_index": i} for i in ps]} for t, ps in topics]})
            out.append((label, r.error_code, answered(r)))
    return out


def test_the_classic_group_protocols_edge_cases_answer_as_apache_kafkas(broker: str) -> None:
    assert_kafkas_answers(broker, scenario, "e", KAFKA_ANSWERS)


def test_classic_rejoins_static_members_and_described_members_answer_as_apache_kafkas(broker: str) -> None:
    assert_kafkas_answers(broker, scenario_more, "m", KAFKA_MORE)


def test_offset_commit_bounds_answer_as_apache_kafkas(broker: str) -> None:
    assert_kafkas_answers(broker, scenario_offsets, "o", KAFKA_OFFSETS)


# -- Apache Kafka 4.3's answers, step by step (recorded from its side of this test) -------------------------------
KAFKA_ANSWERS: list[Any] = [
    ('empty-id-join', 24),
    ('empty-id-sync', 24),
    ('empty-id-heartbeat', 24),
    ('empty-id-leave-v0', 24),
    ('empty-id-leave-v5', 24, []),
    ('empty-id-commit', [0]),
    ('empty-id-fetch-v7', 0, [0]),
    ('empty-id-fetch-v8', [0]),
    ('empty-id-describe', [(0, 'Empty')]),
    ('empty-id-delete', [0]),
    ('empty-id-offset-delete', 24),
    ('session-below-min', 26),
    ('session-above-max', 26),
    ('new-group-no-protocol', 23),
    ('new-group-no-protocol-described', [(0, 'Empty', '', '', [])]),
    ('stable', 0, b'A'),
    ('join-other-type', 23, True),
    ('join-no-common-protocol', 23, True),
    ('join-no-protocol', 23, True),
    ('join-known-other-type', 23, False),
    ('join-unknown-member', 25, False),
    ('sync-other-generation', 22, b''),
    ('sync-other-type', 23, b''),
    ('sync-other-protocol', 23, b''),
    ('sync-stable', 0, b'A'),
    ('sync-v4-other-type-ignored', 0),
    ('heartbeat-generation-minus-one', 22),
    ('commit-minus-one-no-member', [25]),
    ('commit-minus-one-member', [22]),
    ('commit-generation-no-member', [25]),
    ('v4-member-id-required', 79, True),
    ('pending-heartbeat', 25),
    ('pending-sync', 25),
    ('pending-commit', [25]),
    ('pending-leave', 0, [0]),
    ('pending-left-rejoin', 25),
    ('v3-joins-without-member-id', 0, 1, True),
    ('v3-leaves', 0),
    ('heartbeat-preparing', 27),
    ('commit-preparing', [0]),
    ('sync-preparing', 27),
    ('delete-preparing', [68]),
    ('describe-preparing', [(0, 'PreparingRebalance', '', 2)]),
    ('not-full-preparing', 79, False),
    ('pending-leaves-preparing', 0, [0]),
    ('rebalanced', 0, 0, True),
    ('heartbeat-completing', 0),
    ('full-completing', 81, True),
    ('follower-sync-parked', True),
    ('leader-sync', 0, 0, [b'1', b'2']),
    ('full-stable', 81, True),
    ('full-static', 81, True),
    ('simple-commit', [0]),
    ('delete', [(False, False, 69), (False, True, 0), (True, False, 68)]),
    ('leave-batch', 0, [0, 25, 25, 25]),
    ('leave-no-member', 0, 0),
    ('static-join', 0, 1),
    ('static-sync', 0),
    ('static-rejoin', 0, True, True),
    ('fenced-heartbeat', 82),
    ('fenced-sync', 82),
    ('fenced-commit', [82]),
    ('fenced-join', 82),
    ('fenced-leave', 0, [82]),
    ('old-id-without-instance', 25),
    ('new-id-other-instance', 25),
    ('new-id-heartbeat', 0),
    ('new-id-sync', 0, b'S'),
    ('v4-ignores-instance', 79),
    ('leave-by-instance', 0, [0]),
    ('static-left', [(0, 'Empty', 'consumer', '', [])]),
    ('commit-minus-one-empty', [0]),
    ('delete-empty', [0]),
    ('listed', [('edge-e', 'PreparingRebalance'), ('edge-e-none', 'Empty'), ('v3-e', 'Empty')]),
]

KAFKA_MORE: list[Any] = [
    ('session-at-min', 79),
    ('session-at-min-pending-leaves', 0, [0]),
    ('session-at-max', 79),
    ('session-at-max-pending-leaves', 0, [0]),
    ('completing-described',
     [(0, 'CompletingRebalance', 'consumer', '', [(True, None, 'difftest', '/127.0.0.1', 0, b'')])]),
    ('rejoin-completing', 0, True, 1),
    ('sync-naming-unknown-member', 0, b'A'),
    ('stable-described', [(0, 'Stable', 'consumer', 'range', [(True, None, 'difftest', '/127.0.0.1', 14, b'A')])]),
    ('leader-rejoin-stable', 0, 1, 1),
    ('resynced', 0, b'B'),
    ('static-unknown-with-member-id', 25),
    ('static-first', 0, 1, True),
    ('static-other-member-id', 82),
    ('static-instance-of-dynamic', 25),
    ('static-replaced-completing', 0, 1, True),
    ('static-synced', 0, b'S'),
    ('static-described', [(0, 'Stable', 'consumer', 'range', [(True, 's1', 'difftest', '/127.0.0.1', 14, b'S')])]),
    ('static-leader-v9', 0, True, True, True, 1),
    ('leave-twice', 0, [0, 25]),
    ('left-described', [(0, 'Empty', 'consumer', '', [])]),
    ('leave-instance-twice', 0, [0, 25]),
    ('empty-heartbeat', 25),
    ('empty-sync', 25),
    ('empty-rejoin-with-id', 25),
    ('join-v0', 0, 1, True),
    ('commit-v2-no-generation', [25]),
    ('commit-v8-no-generation', [25]),
    ('commit-v2-member', [27]),
    ('heartbeat-v0', 0),
    ('sync-v0-leader', b'Z'),
    ('list-states', ['old-m']),
    ('list-type-case', ['more-m', 'old-m', 'smore-m']),
    ('list-type-consumer', []),
    ('described-operations', [3400]),
]

KAFKA_OFFSETS: list[Any] = [
    ('metadata-ascii-at-limit', [0], [(5, 4096)]),
    ('metadata-ascii-over-limit', [12], [(5, 4096)]),
    ('metadata-two-byte-chars-at-limit', [0], [(5, 4096)]),
    ('metadata-astral-at-limit', [0], [(5, 2048)]),
    ('metadata-astral-over-limit', [12], [(5, 2048)]),
    ('metadata-null', [0], [(5, '')]),
    ('offset-1', [0], [(-1, 1)]),
    ('offset-7', [0], [(-7, 1)]),
    ('partition-twice', [0, 0], [(9, 1)]),
    ('unknown-group-v8', [('dt', [(9, 3), (0, 22)]), ('zz-o', [(0, 3)])]),
    ('unknown-group-v9', [('dt', [(9, 3), (0, 69)]), ('zz-o', [(0, 3)])]),
    ('only-refused', [('zz-o', [(0, 3)]), ('dt', [(7, 3)])]),
    ('twice-no-refusal', [('dt', [(0, 0)]), ('dt', [(1, 0)])]),
    ('merged-v2', [('dt', [(9, 3), (-1, 3), (0, 0), (1, 0), (1, 0)]), ('zz-o', [(0, 3)]), ('du', [(0, 0)])]),
    ('merged-v8', [('dt', [(9, 3), (-1, 3), (0, 0), (1, 0), (1, 0)]), ('zz-o', [(0, 3)]), ('du', [(0, 0)])]),
    ('merged-v9', [('dt', [(9, 3), (-1, 3), (0, 0), (1, 0), (1, 0)]), ('zz-o', [(0, 3)]), ('du', [(0, 0)])]),
    ('delete-mixed', 0, [('zz-o', [(0, 3)]), ('dt', [(7, 3), (1, 0), (0, 0)]), ('du', [(0, 0)])]),
    ('delete-twice', 0, [('dt', [(-1, 3), (0, 0), (0, 0), (1, 0)])]),
    ('delete-refused-unknown-group', 69, []),
    ('delete-refused-known-group', 0, [('zz-o', [(0, 3)]), ('dt', [(5, 3)])]),
]
