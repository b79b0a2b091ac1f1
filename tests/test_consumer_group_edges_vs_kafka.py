"""The consumer group protocol's (KIP-848) and its offsets' edge cases answered as Apache Kafka 4.3 answers them, on a
klog node and on an Apache Kafka node started from the same properties: ConsumerGroupHeartbeat's request checks
(member id, epochs -1/-2/-3, a first heartbeat without subscription or with owned partitions, regexes RE2J refuses
or reads otherwise than Python's re, assignor names), unknown groups and members, stale and future epochs, owned
partitions never assigned, static members (a conflict, another instance id, the epoch -2 leave, the replacement, the
fenced old member), a classic group of another protocol type or empty; ConsumerGroupDescribe (unknown, empty and
classic group ids, authorized operations, the assignment fields); DescribeGroups and ListGroups v5 (type and state
filters in any case, unknown values) of a consumer group; OffsetCommit v9 (stale and future epochs, unknown member,
an admin commit to a group with members), OffsetFetch v9 (member epochs, admin fetch, unknown topics and partitions,
a classic group's offsets, require_stable with a transaction's pending offsets), OffsetDelete (topics subscribed by
name or regex: GROUP_SUBSCRIBED_TO_TOPIC), DeleteGroups of a non-empty group; LeaveGroup naming consumer-protocol
and classic members of a consumer group (an admin's removal: one new epoch, a downgrade when only classic members
remain).

Each step's observation (error codes, and what a client acts on) is compared with the one Apache Kafka 4.3 gave,
recorded below; klog's side runs on every change, Kafka's nightly (tests/conftest.py marks it long) to check the
record. Epoch numbers are compared only relative to each other (Kafka batches target assignments and resolves
regexes after the heartbeat: the scripts heartbeat until an assignment comes)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from klog.testing.cluster import cluster_of

from test_groups_vs_kafka import Conn, assert_kafkas_answers, commit, join, ready, set_group_config

pytestmark = pytest.mark.timeout(300)

PROPERTIES = {"num.partitions": 2, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
              "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
              "group.max.session.timeout.ms": 100000, "auto.create.topics.enable": "true"}
COMMIT, FETCH, METADATA, JOIN, SYNC, DESCRIBE, LIST = 8, 9, 3, 11, 14, 15, 16
DELETE, OFFSET_DELETE, CGH, CGD, LEAVE = 42, 47, 68, 69, 13
NO_ID = uuid.UUID(int=0)


def _node(kind: str, tmp_path_factory: pytest.TempPathFactory, properties: dict[str, Any]) -> Iterator[str]:
    """The bootstrap address of a one-node klog or Apache Kafka (``kind``) cluster with ``properties``."""
    with cluster_of(kind, tmp_path_factory.mktemp(f"cgroup-{kind}"), 1, properties=properties, heap="512m") as node:
        node.wait_for_brokers()
        yield node.bootstrap_servers


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A node with PROPERTIES."""
    yield from _node(request.param, tmp_path_factory, PROPERTIES)


def hb(group: str, member: str, epoch: int, **kw: Any) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat body: a first heartbeat's fields unless ``kw`` says otherwise."""
    body: dict[str, Any] = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
                            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["dt"],
                            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    if epoch != 0:
        body.update(rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=None)
    body.update(kw)
    return body


async def _settled(ask: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], timeout: float = 30.0) -> Any:
    """``ask()``'s answer once ``done`` holds (or the timeout passed): Kafka computes target assignments a moment
    after a heartbeat."""
    deadline = time.monotonic() + timeout
    answer = await ask()
    while not done(answer) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        answer = await ask()
    return answer


def _named(message: str | None, **ids: str) -> str | None:
    """An error message with the member ids in it replaced by their names (brokers or scripts make them)."""
    for name, member_id in ids.items():
        message = None if message is None else message.replace(member_id, name)
    return message


def _parts(tps: Any, names: dict[uuid.UUID, str]) -> list[Any]:
    return sorted((names.get(t.topic_id, "?"), sorted(t.partitions)) for t in tps)


async def scenario(bootstrap: str, tag: str, out: list[Any] | None = None) -> list[Any]:
    """The script; returns the comparable observations (appended to ``out`` when given)."""
    g, st, cl, cn, rx = f"cg-{tag}", f"cst-{tag}", f"ccl-{tag}", f"ccn-{tag}", f"crx-{tag}"
    await ready(bootstrap, [g, st, cl, cn, rx], {"dt": 2, "du": 1})
    out = [] if out is None else out
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as admin:
        r = await admin.call(METADATA, 12, {"topics": [{"topic_id": NO_ID, "name": "dt"},
                                                       {"topic_id": NO_ID, "name": "du"}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        ids = {t.name: t.topic_id for t in r.topics}
        names = {v: k for k, v in ids.items()}

        # -- ConsumerGroupHeartbeat's request checks
        m1 = str(uuid.uuid4())
        for label, version, body in (
                ("v1-empty-member-join", 1, hb(g, "", 0)),
                ("empty-member-epoch-1", 1, hb(g, "", 1)),
                ("empty-member-leave", 1, hb(g, "", -1)),
                ("static-leave-no-instance", 1, hb(g, m1, -2)),
                ("epoch-minus-3", 1, hb(g, m1, -3)),
                ("names-null-first", 1, hb(g, m1, 0, subscribed_topic_names=None)),
                ("owned-null-first", 1, hb(g, m1, 0, topic_partitions=None)),
                ("owned-not-empty-first", 1, hb(g, m1, 0, topic_partitions=[
                    {"topic_id": ids["dt"], "partitions": [0]}])),
                ("rebalance-timeout-zero", 1, hb(g + "-z", m1, 0, rebalance_timeout_ms=0)),
                ("invalid-regex", 1, hb(g + "-r", m1, 0, subscribed_topic_names=None, subscribed_topic_regex="[")),
                ("re2j-lookahead", 1, hb(g + "-r", m1, 0, subscribed_topic_names=None,
                                         subscribed_topic_regex="d(?=t)t")),
                ("re2j-backreference", 1, hb(g + "-r", m1, 0, subscribed_topic_names=None,
                                             subscribed_topic_regex="(d)\\1")),
                ("assignor-case", 1, hb(g + "-a", m1, 0, server_assignor="Uniform")),
                ("unknown-group-epoch-1", 1, hb(g + "-none", m1, 1)),
                ("unknown-group-static-leave", 1, hb(g + "-none", m1, -2, instance_id="i")),
        ):
            r = await a.call(CGH, version, body)
            # Python's re and RE2J word their syntax errors differently
            message = r.error_message if label != "invalid-regex" else r.error_message.split(":")[0]
            out.append((label, r.error_code, r.member_id == body["member_id"] if r.error_code == 0 else r.member_id,
                        r.member_epoch, r.assignment is None, message))
        r = await a.call(CGH, 0, hb(g + "-v0", "", 0))
        out.append(("v0-empty-member-join", r.error_code, bool(r.member_id), r.member_epoch > 0))
        await a.call(CGH, 0, hb(g + "-v0", r.member_id, -1))
        r = await admin.call(CGD, 0, {"group_ids": [g + "-z", g + "-r", g + "-a"], "include_authorized_operations":
                                      False})
        out.append(("groups-made-by-refusals", [(x.group_id[len(g):], x.error_code, len(x.members))
                                                for x in r.groups]))
        for extra in ("-z", "-a"):
            await a.call(CGH, 1, hb(g + extra, m1, -1))

        # -- one member, m1, subscribed to dt
        r = await a.call(CGH, 1, hb(g, m1, 0, rack_id="r1", server_assignor="range"))
        e1 = r.member_epoch
        out.append(("join", r.error_code, r.member_id == m1, r.heartbeat_interval_ms))

        async def assigned() -> Any:
            return await a.call(CGH, 1, hb(g, m1, e1))

        while r.assignment is None or not r.assignment.topic_partitions:   # Kafka assigns a moment later
            await asyncio.sleep(0.2)
            r = await assigned()
            e1 = r.member_epoch
        out.append(("assigned", r.error_code, r.assignment and _parts(r.assignment.topic_partitions, names)))
        r = await a.call(CGH, 1, hb(g, m1, e1))
        out.append(("steady-heartbeat", r.error_code, r.member_epoch == e1, r.assignment))
        for label, body in (
                ("unknown-member-epoch-1", hb(g, str(uuid.uuid4()), 1)),
                ("unknown-member-leave", hb(g, str(uuid.uuid4()), -1)),
                ("unknown-member-static-leave", hb(g, str(uuid.uuid4()), -2, instance_id="nobody")),
                ("future-epoch", hb(g, m1, e1 + 1)),
                ("stale-epoch-owned-null", hb(g, m1, e1 - 1)),
                ("stale-epoch-owned-never-assigned", hb(g, m1, e1 - 1, topic_partitions=[
                    {"topic_id": ids["du"], "partitions": [0]}])),
                ("owned-never-assigned", hb(g, m1, e1, topic_partitions=[
                    {"topic_id": ids["du"], "partitions": [0]}, {"topic_id": uuid.uuid4(), "partitions": [7]}])),
                ("rejoin-epoch-0-same-member", hb(g, m1, 0)),
        ):
            r = await b.call(CGH, 1, body)
            out.append((label, r.error_code, r.member_epoch if r.member_epoch < 1 else r.member_epoch == e1,
                        r.assignment and _parts(r.assignment.topic_partitions, names)))
        r = await a.call(CGH, 1, hb(g, m1, e1))
        out.append(("after-probes", r.error_code, r.member_epoch == e1))
        e1 = r.member_epoch if r.error_code == 0 else e1

        # -- ConsumerGroupDescribe
        r = await admin.call(CGD, 1, {"group_ids": [g, g + "-none", "", cl], "include_authorized_operations": True})
        out.append(("describe", sorted([(x.group_id == g or x.group_id, x.error_code, x.error_message, x.group_state,
                                  x.assignor_name, x.authorized_operations,
                                  sorted((m.member_id == m1, m.instance_id, m.rack_id, m.member_epoch == e1,
                                          m.client_id, m.client_host, m.subscribed_topic_names,
                                          m.subscribed_topic_regex,
                                          [(t.topic_id == ids.get(t.topic_name), t.topic_name, sorted(t.partitions))
                                           for t in m.assignment.topic_partitions],
                                          [(t.topic_name, sorted(t.partitions))
                                           for t in m.target_assignment.topic_partitions],
                                          m.member_type) for m in x.members))
                                 for x in r.groups], key=repr)))   # Kafka answers the empty group id first
        r = await admin.call(CGD, 0, {"group_ids": [g], "include_authorized_operations": False})
        out.append(("describe-no-operations", [x.authorized_operations for x in r.groups]))

        # -- DescribeGroups and ListGroups of a consumer-protocol group
        for version in (5, 6):
            r = await admin.call(DESCRIBE, version, {"groups": [g], "include_authorized_operations": True})
            out.append((f"describe-groups-v{version}", [(x.error_code, x.error_message if version >= 6 else None,
                                                         x.group_state, x.protocol_type, x.protocol_data,
                                                         len(x.members), x.authorized_operations)
                                                        for x in r.groups]))
        for label, states, types in (("list-consumer-mixed-case", [], ["CONSUMER"]),
                                     ("list-unknown-type", [], ["nonsense"]),
                                     ("list-type-and-unknown", [], ["Consumer", "nonsense"]),
                                     ("list-state-mixed-case", ["sTaBlE"], []),
                                     ("list-state-reconciling", ["Reconciling", "assigning"], []),
                                     ("list-unknown-state", ["nonsense"], []),
                                     ("list-state-and-type", ["stable"], ["classic"])):
            r = await admin.call(LIST, 5, {"states_filter": states, "types_filter": types})
            out.append((label, r.error_code, sorted((x.group_id, x.group_state, x.group_type, x.protocol_type)
                                                    for x in r.groups if x.group_id == g)))

        # -- OffsetCommit v9 against the consumer group
        for label, version, body in (
                ("commit-stale-epoch", 9, commit(g, e1 - 1, m1)),
                ("commit-future-epoch", 9, commit(g, e1 + 1, m1)),
                ("commit-unknown-member", 9, commit(g, e1, "nobody")),
                ("commit-admin-non-empty", 9, commit(g, -1, "")),
                ("commit-minus-one-member", 9, commit(g, -1, m1)),
                ("commit-zero-member", 9, commit(g, 0, m1)),
                ("commit-v8-minus-one-empty", 8, commit(g, -1, "")),
                ("commit-ok", 9, commit(g, e1, m1)),
                ("commit-ok-du", 9, commit(g, e1, m1, topic="du")),
                ("commit-unknown-topic", 9, commit(g, e1, m1, topic=f"nope-{tag}")),
                ("commit-instance-mismatch", 9, commit(g, e1, m1, instance="someone")),
        ):
            r = await a.call(COMMIT, version, body)
            out.append((label, [p.error_code for t in r.topics for p in t.partitions]))

        # -- OffsetFetch v9 (klog serves no v10, which names topics by id)
        def fetch9(member: str | None, epoch: int, topics: Any, group: str = g) -> dict[str, Any]:
            return {"groups": [{"group_id": group, "member_id": member, "member_epoch": epoch, "topics": topics}],
                    "require_stable": True}

        def fetched(r: Any) -> list[Any]:
            return [(x.error_code, sorted(((getattr(t, "name", None), names.get(getattr(t, "topic_id", NO_ID)),
                                            [(p.partition_index, p.committed_offset, p.error_code)
                                             for p in t.partitions]) for t in x.topics), key=repr))
                    for x in r.groups]

        for label, version, body in (
                ("fetch-v9-member", 9, fetch9(m1, e1, [{"name": "dt", "partition_indexes": [0, 1]}])),
                ("fetch-v9-stale", 9, fetch9(m1, e1 - 1, None)),
                ("fetch-v9-unknown-member", 9, fetch9("nobody", e1, None)),
                ("fetch-v9-member-no-epoch", 9, fetch9(m1, -1, None)),
                ("fetch-v9-admin", 9, fetch9(None, -1, None)),
                ("fetch-v9-unknown-topic", 9, fetch9(None, -1, [{"name": f"nope-{tag}", "partition_indexes": [0]}])),
                ("fetch-v9-unknown-partition", 9, fetch9(None, -1, [{"name": "dt", "partition_indexes": [9]}])),
                ("fetch-v9-unknown-group-member", 9, fetch9(m1, 3, None, group=g + "-none")),
        ):
            out.append((label, fetched(await a.call(FETCH, version, body))))

        # -- OffsetDelete
        for label, group, topics in (
                ("offset-delete-subscribed", g, [("dt", [0]), ("du", [0])]),
                ("offset-delete-unknown-partition", g, [("du", [7])]),
                ("offset-delete-unknown-topic", g, [(f"nope-{tag}", [0])]),
                ("offset-delete-unknown-group", g + "-none", [("dt", [0])])):
            r = await admin.call(OFFSET_DELETE, 0, {"group_id": group, "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics]})
            out.append((label, r.error_code, sorted((t.name, p.partition_index, p.error_code)
                                                    for t in r.topics for p in t.partitions)))

        # -- a regex member: offsets of a topic it matches are in use
        mr = str(uuid.uuid4())
        r = await a.call(CGH, 1, hb(rx, mr, 0, subscribed_topic_names=None, subscribed_topic_regex="d[u]"))
        out.append(("regex-join", r.error_code))
        c = await a.call(COMMIT, 9, commit(rx, -1, "", topic="du"))
        out.append(("regex-admin-commit", [p.error_code for t in c.topics for p in t.partitions]))

        while r.error_code == 0 and not (r.assignment and r.assignment.topic_partitions):   # Kafka resolves
            await asyncio.sleep(0.2)                                                          # regexes later
            r = await a.call(CGH, 1, hb(rx, mr, r.member_epoch))
        out.append(("regex-assigned", r.error_code, r.assignment and _parts(r.assignment.topic_partitions, names)))
        r = await admin.call(CGD, 0, {"group_ids": [rx], "include_authorized_operations": False})
        out.append(("regex-described", [(m.subscribed_topic_names, m.subscribed_topic_regex,
                                          [(t.topic_name, sorted(t.partitions))
                                           for t in m.target_assignment.topic_partitions])
                                         for x in r.groups for m in x.members]))
        r = await admin.call(OFFSET_DELETE, 0, {"group_id": rx, "topics": [
            {"name": "du", "partitions": [{"partition_index": 0}]}]})
        out.append(("offset-delete-regex-subscribed", r.error_code,
                    [p.error_code for t in r.topics for p in t.partitions]))

        # -- static members: a conflict, a static leave, the same instance back
        s1, s2 = str(uuid.uuid4()), str(uuid.uuid4())
        r = await a.call(CGH, 1, hb(st, s1, 0, instance_id="i1"))
        es = r.member_epoch
        out.append(("static-join", r.error_code))
        r = await b.call(CGH, 1, hb(st, s2, 0, instance_id="i1"))
        out.append(("static-conflict", r.error_code, r.member_epoch, _named(r.error_message, s1=s1, s2=s2)))
        r = await a.call(CGH, 1, hb(st, s1, es, instance_id="i2"))
        out.append(("static-other-instance", r.error_code))
        r = await a.call(CGH, 1, hb(st, s1, -2, instance_id="i2"))
        out.append(("static-leave-other-instance", r.error_code, r.member_epoch))
        r = await a.call(CGH, 1, hb(st, s1, -2, instance_id="i1"))
        out.append(("static-leave", r.error_code, r.member_id == s1, r.member_epoch))
        r = await admin.call(CGD, 0, {"group_ids": [st], "include_authorized_operations": False})
        out.append(("static-left-described", [(x.group_state, [(m.member_id == s1, m.instance_id, m.member_epoch)
                                                               for m in x.members]) for x in r.groups]))
        r = await admin.call(DELETE, 2, {"groups_names": [st]})
        out.append(("static-left-delete", [x.error_code for x in r.results]))
        r = await a.call(CGH, 1, hb(st, s1, es, instance_id="i1"))
        out.append(("static-left-heartbeat", r.error_code))
        r = await b.call(CGH, 1, hb(st, s2, 0, instance_id="i1"))
        out.append(("static-back", r.error_code, r.member_epoch == es))
        r = await admin.call(CGD, 0, {"group_ids": [st], "include_authorized_operations": False})
        out.append(("static-back-described", [(x.group_state, [(m.member_id == s2, m.instance_id)
                                                               for m in x.members]) for x in r.groups]))
        r = await a.call(CGH, 1, hb(st, s1, es, instance_id="i1"))
        out.append(("replaced-static-heartbeat", r.error_code, _named(r.error_message, s1=s1, s2=s2)))
        r = await a.call(CGH, 1, hb(st, s1, -1, instance_id="i1"))
        out.append(("replaced-static-leave", r.error_code))

        # -- a classic group with members of another protocol type; an empty classic group
        r = await b.call(JOIN, 5, join(cl, "", instance="c1", ptype="connect"))
        out.append(("classic-connect-join", r.error_code))
        r = await a.call(CGH, 1, hb(cl, str(uuid.uuid4()), 0))
        out.append(("cgh-classic-other-type", r.error_code, r.error_message))
        r = await admin.call(CGD, 0, {"group_ids": [cl, cn], "include_authorized_operations": False})
        out.append(("cgd-classic", [(x.error_code, x.error_message) for x in r.groups]))
        r = await a.call(COMMIT, 9, commit(cn, -1, ""))
        out.append(("simple-commit", [p.error_code for t in r.topics for p in t.partitions]))
        r = await a.call(CGH, 1, hb(cn, str(uuid.uuid4()), 0))
        out.append(("cgh-empty-classic", r.error_code, r.member_epoch > 0))
        r = await admin.call(LIST, 5, {"states_filter": [], "types_filter": []})
        out.append(("listed", sorted((x.group_id, x.group_type) for x in r.groups if x.group_id in (cl, cn))))

        # -- DeleteGroups of a non-empty consumer group, then once it is empty
        r = await admin.call(DELETE, 2, {"groups_names": [g]})
        out.append(("delete-non-empty", [x.error_code for x in r.results]))
        r = await a.call(CGH, 1, hb(g, m1, -1))
        out.append(("leave", r.error_code, r.member_id == m1, r.member_epoch, r.assignment))
        r = await a.call(CGH, 1, hb(g, m1, -1))
        out.append(("leave-again", r.error_code))
        r = await a.call(COMMIT, 9, commit(g, -1, ""))
        out.append(("commit-admin-empty", [p.error_code for t in r.topics for p in t.partitions]))
        r = await admin.call(OFFSET_DELETE, 0, {"group_id": g, "topics": [
            {"name": "dt", "partitions": [{"partition_index": 0}]}]})
        out.append(("offset-delete-empty", r.error_code, [p.error_code for t in r.topics for p in t.partitions]))
        r = await admin.call(DELETE, 2, {"groups_names": [g, g]})
        out.append(("delete-empty", [x.error_code for x in r.results]))
    return out


async def scenario_more(bootstrap: str, tag: str, out: list[Any] | None = None) -> list[Any]:
    """Subscriptions changed by later heartbeats, static members' instance ids, offsets of a classic group fetched
    with a member epoch, and offsets a transaction commits fetched with require_stable."""
    g, st, cl, tx = f"mg-{tag}", f"mst-{tag}", f"mcl-{tag}", f"mtx-{tag}"
    await ready(bootstrap, [g, st, cl, tx], {"dt": 2, "du": 1})
    out = [] if out is None else out
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as admin:
        r = await admin.call(METADATA, 12, {"topics": [{"topic_id": NO_ID, "name": "du"}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        ids = {t.name: t.topic_id for t in r.topics}
        m1 = str(uuid.uuid4())
        for label, body in (
                ("empty-regex-names-null", hb(g + "-x", m1, 0, subscribed_topic_names=None,
                                              subscribed_topic_regex="")),
                ("names-and-regex", hb(g + "-y", m1, 0, subscribed_topic_regex="d[u]"))):
            r = await a.call(CGH, 1, body)
            out.append((label, r.error_code, r.error_message))
            if r.error_code == 0:
                await a.call(CGH, 1, hb(body["group_id"], m1, -1))
        # regexes RE2J and Python's re judge differently (which RE2J refuses: klog refuses them as well)
        for n, regex in enumerate(("(?>d)t", "dt++", "d{1}+t", "dt\\Z", "(?#c)dt", "d\\164", "(?P<n>d)t", "(?i)DT",
                                   "[\\1]t", "[]d]t", "d[^]]", "\\8t", "\\Qdt\\E", "[[:alpha:]]+", "d\\z")):
            r = await a.call(CGH, 1, hb(f"{g}-rx{n}", m1, 0, subscribed_topic_names=None, subscribed_topic_regex=regex))
            out.append(("regex", regex, r.error_code))
            if r.error_code == 0:
                await a.call(CGH, 1, hb(f"{g}-rx{n}", m1, -1))
        # RE2J's quoting matches the quoted name
        r = await a.call(CGH, 1, hb(g + "-q", m1, 0, subscribed_topic_names=None, subscribed_topic_regex="\\Qd\\Eu"))
        while r.error_code == 0 and not (r.assignment and r.assignment.topic_partitions):   # Kafka resolves
            await asyncio.sleep(0.2)                                                          # regexes later
            r = await a.call(CGH, 1, hb(g + "-q", m1, r.member_epoch))
        out.append(("quoted-regex-assigned", r.error_code, r.assignment and [
            (t.topic_id == ids["du"], sorted(t.partitions)) for t in r.assignment.topic_partitions]))
        await a.call(CGH, 1, hb(g + "-q", m1, -1))
        r = await a.call(CGH, 1, hb(g, m1, 0))
        e1 = r.member_epoch
        out.append(("join", r.error_code))
        for label, kw in (("invalid-regex-later", {"subscribed_topic_regex": "(?=x)"}),
                          ("unknown-assignor-later", {"server_assignor": "sticky"}),
                          ("empty-names-later", {"subscribed_topic_names": []}),
                          ("rebalance-timeout-later", {"rebalance_timeout_ms": 12345})):
            r = await a.call(CGH, 1, hb(g, m1, e1, **kw))
            out.append((label, r.error_code, r.error_message if r.error_code != 128 else None))
            e1 = r.member_epoch if r.error_code == 0 else e1
        r = await admin.call(CGD, 0, {"group_ids": [g], "include_authorized_operations": False})
        out.append(("described", [(x.group_state, [(m.subscribed_topic_names, m.subscribed_topic_regex)
                                                   for m in x.members]) for x in r.groups]))
        r = await admin.call(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]})
        out.append(("listed", sorted((x.group_id, x.group_state) for x in r.groups if x.group_id.startswith(g))))

        # -- static members and instance ids
        s1, s2 = str(uuid.uuid4()), str(uuid.uuid4())
        r = await a.call(CGH, 1, hb(st, s1, 0, instance_id="i1"))
        es = r.member_epoch
        out.append(("static-join", r.error_code))
        r = await a.call(CGH, 1, hb(st, s1, es))
        out.append(("static-heartbeat-no-instance", r.error_code, r.member_epoch == es))
        r = await a.call(CGH, 1, hb(st, s1, 0, instance_id="i1"))
        out.append(("static-rejoin-same-member", r.error_code, r.member_epoch > 0, _named(r.error_message, s1=s1)))
        es = r.member_epoch if r.error_code == 0 else es
        r = await b.call(CGH, 1, hb(st, s2, 0))
        out.append(("dynamic-join", r.error_code))
        e2 = r.member_epoch
        r = await b.call(CGH, 1, hb(st, s2, e2, instance_id="i2"))
        out.append(("dynamic-gets-instance", r.error_code))
        r = await b.call(CGH, 1, hb(st, s2, -2, instance_id="i2"))
        out.append(("dynamic-static-leave", r.error_code, r.member_epoch))
        r = await a.call(CGH, 1, hb(st, s1, -1, instance_id="i1"))
        out.append(("static-dynamic-leave", r.error_code, r.member_epoch))
        r = await admin.call(CGD, 0, {"group_ids": [st], "include_authorized_operations": False})
        out.append(("static-left", [(x.group_state, sorted((m.member_id == s2, m.instance_id, m.member_epoch)
                                                           for m in x.members)) for x in r.groups]))

        # -- a classic group's offsets fetched (v9) with a member epoch
        r = await a.call(COMMIT, 9, commit(cl, -1, ""))
        out.append(("classic-simple-commit", [p.error_code for t in r.topics for p in t.partitions]))
        for label, member, epoch in (("classic-fetch-member-epoch", "someone", 3),
                                     ("classic-fetch-empty-member-epoch", "", 3),
                                     ("classic-fetch-member-no-epoch", "someone", -1)):
            r = await a.call(FETCH, 9, {"groups": [{"group_id": cl, "member_id": member, "member_epoch": epoch,
                                                    "topics": None}], "require_stable": False})
            out.append((label, [(x.error_code, [(t.name, [(p.partition_index, p.committed_offset)
                                                          for p in t.partitions]) for t in x.topics])
                                for x in r.groups]))
        r = await a.call(COMMIT, 9, commit(cl, 3, "someone"))
        out.append(("classic-commit-epoch", [p.error_code for t in r.topics for p in t.partitions]))

        # -- offsets a transaction commits, fetched with require_stable before and after its commit
        tid = f"txn-{tag}"
        for _ in range(100):
            c = await admin.call(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
            if c.coordinators[0].error_code == 0:
                r = await admin.call(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                             "producer_id": -1, "producer_epoch": -1})
                if r.error_code == 0:
                    break
            await asyncio.sleep(0.2)
        out.append(("init-producer-id", r.error_code))
        pid, pep = r.producer_id, r.producer_epoch
        r = await admin.call(25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": pep,
                                     "group_id": tx})
        out.append(("add-offsets", r.error_code))
        r = await admin.call(28, 3, {"transactional_id": tid, "group_id": tx, "producer_id": pid,
                                     "producer_epoch": pep, "generation_id": -1, "member_id": "",
                                     "group_instance_id": None, "topics": [
                                         {"name": "dt", "partitions": [{"partition_index": 0,
                                                                        "committed_offset": 7,
                                                                        "committed_leader_epoch": -1,
                                                                        "committed_metadata": ""}]}]})
        out.append(("txn-offset-commit", [p.error_code for t in r.topics for p in t.partitions]))
        for stable in (True, False):
            for version in (7, 9):
                if version == 7:
                    r = await a.call(FETCH, 7, {"group_id": tx, "topics": [{"name": "dt", "partition_indexes": [0]}],
                                                "require_stable": stable})
                    got: Any = (r.error_code, [(p.partition_index, p.committed_offset, p.error_code)
                                               for t in r.topics for p in t.partitions])
                else:
                    r = await a.call(FETCH, 9, {"groups": [{"group_id": tx, "member_id": None, "member_epoch": -1,
                                                            "topics": [{"name": "dt", "partition_indexes": [0]}]}],
                                                "require_stable": stable})
                    got = [(x.error_code, [(p.partition_index, p.committed_offset, p.error_code)
                                           for t in x.topics for p in t.partitions]) for x in r.groups]
                out.append((f"pending-fetch-v{version}-stable-{stable}", got))
        r = await a.call(FETCH, 9, {"groups": [{"group_id": tx, "member_id": None, "member_epoch": -1,
                                                "topics": None}], "require_stable": True})
        out.append(("pending-fetch-all-stable", [(x.error_code, [(t.name, [(p.partition_index, p.committed_offset,
                                                                            p.error_code) for p in t.partitions])
                                                                 for t in x.topics]) for x in r.groups]))
        r = await admin.call(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": pep,
                                     "committed": True})
        out.append(("end-txn", r.error_code))

        async def stable_fetch() -> Any:
            return await a.call(FETCH, 9, {"groups": [{"group_id": tx, "member_id": None, "member_epoch": -1,
                                                       "topics": [{"name": "dt", "partition_indexes": [0]}]}],
                                           "require_stable": True})

        r = await _settled(stable_fetch, lambda x: x.groups[0].error_code == 0 and
                           x.groups[0].topics[0].partitions[0].error_code == 0)
        out.append(("committed-fetch", [(x.error_code, [(p.partition_index, p.committed_offset, p.error_code)
                                                        for t in x.topics for p in t.partitions]) for x in r.groups]))
    return out


@pytest.fixture(scope="module", params=["klog", "kafka"])
def small(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A node with PROPERTIES whose consumer groups hold one member."""
    yield from _node(request.param, tmp_path_factory, {**PROPERTIES, "group.consumer.max.size": 1})


async def scenario_full(bootstrap: str, tag: str, out: list[Any] | None = None) -> list[Any]:
    """group.consumer.max.size 1: a second member, a static member's replacement, a classic group of two members
    asked to become a consumer group."""
    g, st, cl = f"full-{tag}", f"sfull-{tag}", f"cfull-{tag}"
    await ready(bootstrap, [g, st, cl], {"dt": 2})
    out = [] if out is None else out
    async with Conn(bootstrap) as a, Conn(bootstrap) as b:
        m1, m2 = str(uuid.uuid4()), str(uuid.uuid4())
        r = await a.call(CGH, 1, hb(g, m1, 0))
        e1 = r.member_epoch
        out.append(("first", r.error_code))
        r = await b.call(CGH, 1, hb(g, m2, 0))
        out.append(("second", r.error_code, r.error_message))
        r = await a.call(CGH, 1, hb(g, m1, e1))
        out.append(("first-heartbeat", r.error_code))
        r = await a.call(CGH, 1, hb(g, m1, 0))
        out.append(("first-rejoins", r.error_code))
        r = await a.call(CGH, 1, hb(st, m1, 0, instance_id="i1"))
        out.append(("static", r.error_code))
        r = await a.call(CGH, 1, hb(st, m1, -2, instance_id="i1"))
        out.append(("static-leaves", r.error_code, r.member_epoch))
        r = await b.call(CGH, 1, hb(st, m2, 0, instance_id="i1"))
        out.append(("static-replacement", r.error_code, r.error_message))
        r = await a.call(CGH, 1, hb(st, m1, 0, instance_id="i1"))
        out.append(("static-back-own-id", r.error_code))
        # a classic group of two members
        r = await a.call(JOIN, 3, join(cl, ""))
        c1 = r.member_id
        parked = asyncio.ensure_future(b.call(JOIN, 3, join(cl, "")))
        while (await a.call(12, 3, {"group_id": cl, "generation_id": r.generation_id, "member_id": c1,
                                    "group_instance_id": None})).error_code == 0:
            await asyncio.sleep(0.1)   # until the second JoinGroup started a rebalance
        r1 = await a.call(JOIN, 3, join(cl, c1))
        r2 = await parked
        out.append(("classic-two", r1.error_code, r2.error_code, len(r1.members) + len(r2.members)))
        r = await a.call(CGH, 1, hb(cl, str(uuid.uuid4()), 0))
        out.append(("classic-too-big", r.error_code, r.error_message))
    return out


async def scenario_admin_leave(bootstrap: str, tag: str, out: list[Any] | None = None) -> list[Any]:
    """LeaveGroup (an admin's removeMembersFromConsumerGroup) naming members of a consumer group: Kafka 4.3 removes
    consumer-protocol members as well as classic ones, all named at once with one new group epoch, answers each
    member as the request named it, and downgrades the group when only classic members remain."""
    g, mixed, old = f"lv-{tag}", f"lvm-{tag}", f"lvo-{tag}"
    await ready(bootstrap, [g, mixed, old], {"dt": 2})
    out = [] if out is None else out
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as admin:
        k1, k2, k3 = (str(uuid.uuid4()) for _ in range(3))
        names = {k1: "k1", k2: "k2", k3: "k3"}

        def left(r: Any) -> Any:
            return r.error_code, [(names.get(m.member_id, m.member_id), m.group_instance_id, m.error_code)
                                  for m in r.members]

        async def described(group: str) -> Any:
            r = await admin.call(LIST, 5, {"states_filter": [], "types_filter": []})
            d = await admin.call(CGD, 1, {"group_ids": [group], "include_authorized_operations": False})
            return ([(x.group_type, x.group_state) for x in r.groups if x.group_id == group],
                    [(x.error_code, x.group_epoch, sorted((names.get(m.member_id, "?"), m.member_type)
                                                          for m in x.members)) for x in d.groups])

        await a.call(CGH, 1, hb(g, k1, 0))
        await b.call(CGH, 1, hb(g, k2, 0, instance_id="i2"))
        await b.call(CGH, 1, hb(g, k3, 0))
        epoch = (await described(g))[1][0][1]
        r = await admin.call(LEAVE, 5, {"group_id": g, "members": [
            {"member_id": m, "group_instance_id": i, "reason": None}
            for m, i in ((k1, None), (k1, None), ("", "i2"), ("nobody", None), ("", "nope"), (k3, "i2"))]})
        out.append(("leave-batch", left(r)))
        state, groups = await described(g)
        out.append(("after-batch", state, [(code, e - epoch, members) for code, e, members in groups]))
        r = await a.call(CGH, 1, hb(g, k1, 2))
        out.append(("removed-heartbeat", r.error_code, _named(r.error_message, k1=k1)))
        r = await admin.call(LEAVE, 3, {"group_id": g, "members": [{"member_id": k3, "group_instance_id": None}]})
        out.append(("leave-last", left(r)))
        state, groups = await described(g)
        out.append(("after-last", state, [(code, e - epoch, members) for code, e, members in groups]))
        out.append(("leave-v0-gone", (await admin.call(LEAVE, 0, {"group_id": g, "member_id": k3})).error_code))
        k4 = str(uuid.uuid4())
        await a.call(CGH, 1, hb(old, k4, 0))
        out.append(("leave-v0", (await admin.call(LEAVE, 0, {"group_id": old, "member_id": k4})).error_code,
                    (await described(old))[0]))

        # a classic member and a consumer-protocol member: removing the latter downgrades the group
        r = await a.call(JOIN, 9, {**join(mixed, ""), "reason": None})
        c1 = r.member_id
        r = await a.call(JOIN, 9, {**join(mixed, c1), "reason": None})
        generation = r.generation_id
        r = await a.call(SYNC, 5, {"group_id": mixed, "generation_id": generation, "member_id": c1,
                                   "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": [{"member_id": c1, "assignment": b""}]})
        out.append(("classic-stable", r.error_code))
        k = str(uuid.uuid4())
        names[k], names[c1] = "k", "c1"
        r = await b.call(CGH, 1, hb(mixed, k, 0))
        out.append(("upgrade", r.error_code, [t for t, _ in (await described(mixed))[0]]))
        r = await admin.call(LEAVE, 5, {"group_id": mixed, "members": [
            {"member_id": k, "group_instance_id": None, "reason": "admin"}]})
        out.append(("leave-consumer-member", left(r)))
        out.append(("downgraded", await described(mixed)))
        r = await admin.call(DESCRIBE, 5, {"groups": [mixed], "include_authorized_operations": False})
        out.append(("downgraded-described", [(x.error_code, x.group_state, x.protocol_type, x.protocol_data,
                                              sorted(names.get(m.member_id, "?") for m in x.members))
                                             for x in r.groups]))
        r = await a.call(12, 4, {"group_id": mixed, "generation_id": generation, "member_id": c1,
                                 "group_instance_id": None})
        out.append(("classic-heartbeat", r.error_code))
    return out



async def scenario_classic_members(bootstrap: str, tag: str, out: list[Any] | None = None) -> list[Any]:
    """Classic members (JoinGroup, SyncGroup, Heartbeat) of a consumer group whose consumer-protocol member k holds
    the partitions: a static member naming a member id its instance id never had, a dynamic JoinGroup with k's
    member id (Kafka keeps k's instance id), the refusals' member id (none: Kafka answers an exception so); then a
    classic member joining while the group's new epoch waits for the assignment interval (the group stays
    Assigning): SyncGroup and Heartbeat answer NONE, Kafka 4.3 asking a rejoin only for a newer target assignment
    than the member's epoch."""
    groups = [f"cm{n}-{tag}" for n in range(4)]
    await ready(bootstrap, groups, {"dt": 2})
    out = [] if out is None else out
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as admin:
        async def members(group: str, k: str) -> Any:
            d = await admin.call(CGD, 1, {"group_ids": [group], "include_authorized_operations": False})
            return [(x.error_code, x.group_state, sorted((m.member_id == k, m.member_type, m.instance_id)
                                                         for m in x.members)) for x in d.groups]

        for group, label, body in (
                (groups[0], "static-unknown-with-member-id", join(groups[0], "nobody", instance="s9")),
                (groups[1], "static-other-member-id", join(groups[1], "other", instance="ki")),
                (groups[2], "dynamic-with-consumer-member-id", None)):
            k = str(uuid.uuid4())
            await b.call(CGH, 1, hb(group, k, 0, instance_id="ki"))
            r = await a.call(JOIN, 5, body or join(group, k))
            out.append((label, r.error_code, r.member_id if r.error_code else r.member_id == k,
                        await members(group, k)))

        g = groups[3]
        out.append(("interval", await set_group_config(admin, g, "consumer.assignment.interval.ms", "15000")))
        k = str(uuid.uuid4())
        r = await b.call(CGH, 1, hb(g, k, 0))
        out.append(("consumer-member", r.error_code, r.assignment and [sorted(t.partitions)
                                                                       for t in r.assignment.topic_partitions]))
        r = await a.call(JOIN, 5, join(g, ""))
        m = r.member_id
        r = await a.call(JOIN, 5, join(g, m))
        generation = r.generation_id
        out.append(("classic-joins", r.error_code, r.leader, r.members, await members(g, k)))
        r = await a.call(SYNC, 5, {"group_id": g, "generation_id": generation, "member_id": m,
                                   "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": []})
        out.append(("sync-assigning", r.error_code, r.protocol_type, r.protocol_name, r.assignment))
        r = await a.call(12, 4, {"group_id": g, "generation_id": generation, "member_id": m, "group_instance_id": None})
        out.append(("heartbeat-assigning", r.error_code))
    return out


def test_consumer_group_edge_cases_answer_as_apache_kafkas(broker: str) -> None:
    assert_kafkas_answers(broker, scenario, "e", KAFKA_ANSWERS)


def test_consumer_group_subscriptions_static_members_and_stable_offsets_answer_as_apache_kafkas(broker: str) -> None:
    assert_kafkas_answers(broker, scenario_more, "m", KAFKA_MORE)


def test_leave_group_removes_consumer_group_members_as_apache_kafka_does(broker: str) -> None:
    assert_kafkas_answers(broker, scenario_admin_leave, "l", KAFKA_ADMIN_LEAVE)


def test_classic_members_of_a_consumer_group_answer_as_apache_kafkas(broker: str) -> None:
    assert_kafkas_answers(broker, scenario_classic_members, "c", KAFKA_CLASSIC_MEMBERS)


def test_a_full_consumer_group_answers_as_apache_kafkas(small: str) -> None:
    assert_kafkas_answers(small, scenario_full, "f", KAFKA_FULL)


# -- Apache Kafka 4.3's answers, step by step (recorded from its side of this test) -------------------------------
KAFKA_ANSWERS: list[Any] = [
    ('v1-empty-member-join', 42, None, 0, True, "MemberId can't be empty."),
    ('empty-member-epoch-1', 42, None, 0, True, "MemberId can't be empty."),
    ('empty-member-leave', 42, None, 0, True, "MemberId can't be empty."),
    ('static-leave-no-instance', 42, None, 0, True, "InstanceId can't be null."),
    ('epoch-minus-3', 42, None, 0, True, 'MemberEpoch is invalid.'),
    ('names-null-first', 42, None, 0, True,
     'Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.'),
    ('owned-null-first', 42, None, 0, True, 'TopicPartitions must be empty when (re-)joining.'),
    ('owned-not-empty-first', 42, None, 0, True, 'TopicPartitions must be empty when (re-)joining.'),
    ('rebalance-timeout-zero', 0, True, 2, False, None),
    ('invalid-regex', 128, None, 0, True, 'SubscribedTopicRegex `[` is not a valid regular expression'),
    ('re2j-lookahead', 128, None, 0, True,
     'SubscribedTopicRegex `d(?=t)t` is not a valid regular expression: invalid or unsupported Perl syntax.'),
    ('re2j-backreference', 128, None, 0, True,
     'SubscribedTopicRegex `(d)\\1` is not a valid regular expression: invalid escape sequence.'),
    ('assignor-case', 112, None, 0, True,
     'ServerAssignor Uniform is not supported. Supported assignors: uniform, range.'),
    ('unknown-group-epoch-1', 69, None, 0, True, 'Consumer group cg-e-none not found.'),
    ('unknown-group-static-leave', 69, None, 0, True, 'Group cg-e-none not found.'),
    ('v0-empty-member-join', 0, True, True),
    ('groups-made-by-refusals', [('-z', 0, 1), ('-r', 69, 0), ('-a', 69, 0)]),
    ('join', 0, True, 5000),
    ('assigned', 0, [('dt', [0, 1])]),
    ('steady-heartbeat', 0, True, None),
    ('unknown-member-epoch-1', 25, 0, None),
    ('unknown-member-leave', 25, 0, None),
    ('unknown-member-static-leave', 25, 0, None),
    ('future-epoch', 110, 0, None),
    ('stale-epoch-owned-null', 110, 0, None),
    ('stale-epoch-owned-never-assigned', 110, 0, None),
    ('owned-never-assigned', 0, True, None),
    ('rejoin-epoch-0-same-member', 0, True, [('dt', [0, 1])]),
    ('after-probes', 0, True),
    ('describe',
     [('', 24, None, '', '', -2147483648, []), ('ccl-e', 69, 'Group ccl-e not found.', '', '', -2147483648, []),
      ('cg-e-none', 69, 'Group cg-e-none not found.', '', '', -2147483648, []),
      (True, 0, None, 'Stable', 'range', 3400,
       [(True, None, 'r1', True, 'difftest', '/127.0.0.1', ['dt'], '', [(True, 'dt', [0, 1])], [('dt', [0, 1])],
         1)])]),
    ('describe-no-operations', [-2147483648]),
    ('describe-groups-v5', [(0, None, 'Dead', '', '', 0, 3400)]),
    ('describe-groups-v6', [(69, 'Group cg-e is not a classic group.', 'Dead', '', '', 0, -2147483648)]),
    ('list-consumer-mixed-case', 0, [('cg-e', 'Stable', 'consumer', 'consumer')]),
    ('list-unknown-type', 0, []),
    ('list-type-and-unknown', 0, [('cg-e', 'Stable', 'consumer', 'consumer')]),
    ('list-state-mixed-case', 0, [('cg-e', 'Stable', 'consumer', 'consumer')]),
    ('list-state-reconciling', 0, []),
    ('list-unknown-state', 0, []),
    ('list-state-and-type', 0, []),
    ('commit-stale-epoch', [113]),
    ('commit-future-epoch', [113]),
    ('commit-unknown-member', [25]),
    ('commit-admin-non-empty', [25]),
    ('commit-minus-one-member', [113]),
    ('commit-zero-member', [113]),
    ('commit-v8-minus-one-empty', [25]),
    ('commit-ok', [0]),
    ('commit-ok-du', [0]),
    ('commit-unknown-topic', [3]),
    ('commit-instance-mismatch', [0]),
    ('fetch-v9-member', [(0, [('dt', None, [(0, 5, 0), (1, -1, 0)])])]),
    ('fetch-v9-stale', [(113, [])]),
    ('fetch-v9-unknown-member', [(25, [])]),
    ('fetch-v9-member-no-epoch', [(113, [])]),
    ('fetch-v9-admin', [(0, [('dt', None, [(0, 5, 0)]), ('du', None, [(0, 5, 0)])])]),
    ('fetch-v9-unknown-topic', [(0, [('nope-e', None, [(0, -1, 0)])])]),
    ('fetch-v9-unknown-partition', [(0, [('dt', None, [(9, -1, 0)])])]),
    ('fetch-v9-unknown-group-member', [(0, [])]),
    ('offset-delete-subscribed', 0, [('dt', 0, 86), ('du', 0, 0)]),
    ('offset-delete-unknown-partition', 0, [('du', 7, 3)]),
    ('offset-delete-unknown-topic', 0, [('nope-e', 0, 3)]),
    ('offset-delete-unknown-group', 69, []),
    ('regex-join', 0),
    ('regex-admin-commit', [25]),
    ('regex-assigned', 0, [('du', [0])]),
    ('regex-described', [([], 'd[u]', [('du', [0])])]),
    ('offset-delete-regex-subscribed', 0, [86]),
    ('static-join', 0),
    ('static-conflict', 111, 0,
     'Static member s2 with instance id i1 cannot join the group because the instance id is owned by s1 member.'),
    ('static-other-instance', 25),
    ('static-leave-other-instance', 25, 0),
    ('static-leave', 0, True, -2),
    ('static-left-described', [('Reconciling', [(True, 'i1', -2)])]),
    ('static-left-delete', [68]),
    ('static-left-heartbeat', 110),
    ('static-back', 0, True),
    ('static-back-described', [('Stable', [(True, 'i1')])]),
    ('replaced-static-heartbeat', 82, 'Static member s1 with instance id i1 was fenced by member s2.'),
    ('replaced-static-leave', 82),
    ('classic-connect-join', 0),
    ('cgh-classic-other-type', 69,
     'Cannot upgrade classic group ccl-e to consumer group because the group does not use the consumer embedded '
     'protocol.'),
    ('cgd-classic', [(69, 'Group ccl-e is not a consumer group.'), (69, 'Group ccn-e not found.')]),
    ('simple-commit', [0]),
    ('cgh-empty-classic', 0, True),
    ('listed', [('ccl-e', 'classic'), ('ccn-e', 'consumer')]),
    ('delete-non-empty', [68]),
    ('leave', 0, True, -1, None),
    ('leave-again', 25),
    ('commit-admin-empty', [0]),
    ('offset-delete-empty', 0, [0]),
    ('delete-empty', [0]),
]

KAFKA_MORE: list[Any] = [
    ('empty-regex-names-null', 0, None),
    ('names-and-regex', 0, None),
    ('regex', '(?>d)t', 128),
    ('regex', 'dt++', 128),
    ('regex', 'd{1}+t', 128),
    ('regex', 'dt\\Z', 128),
    ('regex', '(?#c)dt', 128),
    ('regex', 'd\\164', 0),
    ('regex', '(?P<n>d)t', 0),
    ('regex', '(?i)DT', 0),
    ('regex', '[\\1]t', 128),
    ('regex', '[]d]t', 0),
    ('regex', 'd[^]]', 0),
    ('regex', '\\8t', 128),
    ('regex', '\\Qdt\\E', 0),
    ('regex', '[[:alpha:]]+', 0),
    ('regex', 'd\\z', 0),
    ('quoted-regex-assigned', 0, [(True, [0])]),
    ('join', 0),
    ('invalid-regex-later', 128, None),
    ('unknown-assignor-later', 112, 'ServerAssignor sticky is not supported. Supported assignors: uniform, range.'),
    ('empty-names-later', 0, None),
    ('rebalance-timeout-later', 0, None),
    ('described', [('Assigning', [([], '')])]),
    ('listed',
     [('mg-m', 'Assigning'), ('mg-m-q', 'Empty'), ('mg-m-rx10', 'Empty'), ('mg-m-rx12', 'Empty'),
      ('mg-m-rx13', 'Empty'), ('mg-m-rx14', 'Empty'), ('mg-m-rx5', 'Empty'), ('mg-m-rx6', 'Empty'),
      ('mg-m-rx7', 'Empty'), ('mg-m-rx9', 'Empty'), ('mg-m-x', 'Empty'), ('mg-m-y', 'Empty')]),
    ('static-join', 0),
    ('static-heartbeat-no-instance', 0, True),
    ('static-rejoin-same-member', 111, False,
     'Static member s1 with instance id i1 cannot join the group because the instance id is owned by s1 member.'),
    ('dynamic-join', 0),
    ('dynamic-gets-instance', 25),
    ('dynamic-static-leave', 25, 0),
    ('static-dynamic-leave', 0, -1),
    ('static-left', [('Assigning', [(True, None, 2)])]),
    ('classic-simple-commit', [0]),
    ('classic-fetch-member-epoch', [(0, [('dt', [(0, 5)])])]),
    ('classic-fetch-empty-member-epoch', [(0, [('dt', [(0, 5)])])]),
    ('classic-fetch-member-no-epoch', [(0, [('dt', [(0, 5)])])]),
    ('classic-commit-epoch', [25]),
    ('init-producer-id', 0),
    ('add-offsets', 0),
    ('txn-offset-commit', [0]),
    ('pending-fetch-v7-stable-True', (0, [(0, -1, 88)])),
    ('pending-fetch-v9-stable-True', [(0, [(0, -1, 88)])]),
    ('pending-fetch-v7-stable-False', (0, [(0, -1, 0)])),
    ('pending-fetch-v9-stable-False', [(0, [(0, -1, 0)])]),
    ('pending-fetch-all-stable', [(0, [])]),
    ('end-txn', 0),
    ('committed-fetch', [(0, [(0, 7, 0)])]),
]

KAFKA_FULL: list[Any] = [
    ('first', 0),
    ('second', 81, 'The consumer group has reached its maximum capacity of 1 members.'),
    ('first-heartbeat', 0),
    ('first-rejoins', 0),
    ('static', 0),
    ('static-leaves', 0, -2),
    ('static-replacement', 81, 'The consumer group has reached its maximum capacity of 1 members.'),
    ('static-back-own-id', 0),
    ('classic-two', 0, 0, 2),
    ('classic-too-big', 69,
     'Cannot upgrade classic group cfull-f to consumer group because the group size exceeds the consumer group '
     'maximum size.'),
]

KAFKA_ADMIN_LEAVE: list[Any] = [
    ('leave-batch', (0, [('k1', None, 0), ('k1', None, 0), ('', 'i2', 0), ('nobody', None, 25), ('', 'nope', 25),
                         ('k3', 'i2', 82)])),
    ('after-batch', [('consumer', 'Assigning')], [(0, 1, [('k3', 1)])]),
    ('removed-heartbeat', 25, 'Member k1 is not a member of group lv-l.'),
    ('leave-last', (0, [('k3', None, 0)])),
    ('after-last', [('consumer', 'Empty')], [(0, 2, [])]),
    ('leave-v0-gone', 25),
    ('leave-v0', 0, [('consumer', 'Empty')]),
    ('classic-stable', 0),
    ('upgrade', 0, ['consumer']),
    ('leave-consumer-member', (0, [('k', None, 0)])),
    ('downgraded', ([('classic', 'PreparingRebalance')], [(69, 0, [])])),
    ('downgraded-described', [(0, 'PreparingRebalance', 'consumer', '', ['c1'])]),
    ('classic-heartbeat', 22),
]

KAFKA_CLASSIC_MEMBERS: list[Any] = [
    ('static-unknown-with-member-id', 25, '', [(0, 'Stable', [(True, 1, 'ki')])]),
    ('static-other-member-id', 82, '', [(0, 'Stable', [(True, 1, 'ki')])]),
    ('dynamic-with-consumer-member-id', 0, True, [(0, 'Stable', [(True, 0, 'ki')])]),
    ('interval', [0]),
    ('consumer-member', 0, [[0, 1]]),
    ('classic-joins', 0, '', [], [(0, 'Assigning', [(False, 0, None), (True, 1, None)])]),
    ('sync-assigning', 0, 'consumer', 'range', b'\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff'),
    ('heartbeat-assigning', 0),
]
