"""Heartbeats answered on the connection (klog/broker/heartbeat_answers.py): a classic group's member in a Stable
group, at its generation, gets the handler's own bytes and its session moved on; every other Heartbeat is the
handler's, byte for byte.

Real broker processes: one with the fast path (the default), one with ``klog.heartbeat.fast.enable=false`` (every
Heartbeat through the handler), the same requests sent to both and their answers compared byte for byte;
``klog_heartbeat_fast_answers_total`` (the metrics listener) tells the fast answers from the handler's. Raw frames
(klog.protocol) for every version and error, confluent-kafka consumers for a real group's rebalances. Kafka's own
error codes for these requests are checked against Apache Kafka in tests/test_groups_vs_kafka.py.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType

from klog.protocol import ApiKey, decode_response, encode_request
from klog.protocol.error_codes import ErrorCode as E
from klog.testing.cluster import KlogCluster
from klog.testing.ports import free_port
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

JOIN, SYNC, HEARTBEAT, DESCRIBE = int(ApiKey.JOIN_GROUP), int(ApiKey.SYNC_GROUP), int(ApiKey.HEARTBEAT), 15
CONFIG = {"num.partitions": 1, "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
#: a session long enough that no member in the byte-for-byte tests expires on a loaded machine
SESSION_MS = 30000


def fast_answers_at(metrics_port: int) -> int:
    """``klog_heartbeat_fast_answers_total`` of the broker whose metrics listener is on ``metrics_port``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    name = "klog_heartbeat_fast_answers_total "
    return next((int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith(name)), 0)


class Node:
    def __init__(self, proc: BrokerProcess, metrics_port: int) -> None:
        self.proc, self.metrics_port = proc, metrics_port

    def fast_answers(self) -> int:
        return fast_answers_at(self.metrics_port)

    def wire(self, client_id: str = "hb-test") -> WireClient:
        return WireClient(self.proc.host, self.proc.port, client_id=client_id)


def _node(base: Any, fast: bool) -> Iterator[Node]:
    port = free_port()
    with BrokerProcess(base, {**CONFIG, "klog.metrics.listener": f"127.0.0.1:{port}",
                              "klog.heartbeat.fast.enable": fast}) as proc:
        yield Node(proc, port)


@pytest.fixture(scope="module")
def fast(tmp_path_factory) -> Iterator[Node]:
    yield from _node(tmp_path_factory.mktemp("fast"), True)


@pytest.fixture(scope="module")
def handler(tmp_path_factory) -> Iterator[Node]:
    yield from _node(tmp_path_factory.mktemp("handler"), False)


def join_body(group: str, member: str, instance: str | None = None, session: int = SESSION_MS) -> dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 60000, "member_id": member,
            "group_instance_id": instance, "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"}]}


def sync_body(group: str, generation: int, member: str, assignments: list[dict[str, Any]],
              instance: str | None = None) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": assignments}


def form(wire: WireClient, group: str, instance: str | None = None, session: int = SESSION_MS) -> tuple[str, int]:
    """One member joins ``group`` alone and syncs (the group Stable): its member id and the generation. A first
    JoinGroup answered NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS is sent again, as a client does: on a
    cluster, FindCoordinator can name a node that has not yet taken over the group's partition."""
    deadline = time.monotonic() + 30
    while (r := wire.request(JOIN, 9, join_body(group, "", instance, session))).error_code in (
            E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
        assert time.monotonic() < deadline, r
        time.sleep(0.1)
    if instance is None:
        assert r.error_code == E.MEMBER_ID_REQUIRED
        r = wire.request(JOIN, 9, join_body(group, r.member_id, instance, session))
    assert r.error_code == E.NONE, r
    s = wire.request(SYNC, 5, sync_body(group, r.generation_id, r.member_id,
                                        [{"member_id": r.member_id, "assignment": b""}], instance))
    assert s.error_code == E.NONE
    return r.member_id, r.generation_id


def heartbeat_frame(version: int, cid: int, group: str, generation: int, member: str,
                    instance: str | None = None, client_id: str | None = "hb-test") -> bytes:
    return encode_request(HEARTBEAT, version, cid, client_id, {
        "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance})


def exchange(wire: WireClient, frame: bytes) -> bytes:
    wire.send_raw(frame)
    return wire.read_frame()


def error_of(version: int, answer: bytes) -> int:
    return int(decode_response(HEARTBEAT, version, answer)[1].error_code)


class Pair:
    """The same group formed on both brokers (their member ids differ: each request names each broker's own)."""

    def __init__(self, fast: Node, handler: Node, group: str, instance: str | None = None) -> None:
        self.nodes = (fast, handler)
        self.wires = (fast.wire(), handler.wire())
        self.group = group
        formed = [form(w, group, instance) for w in self.wires]
        self.members = [m for m, _ in formed]
        self.generations = [g for _, g in formed]
        assert self.generations[0] == self.generations[1]

    def both(self, version: int, cid: int, *, member: str | None = None, generation_delta: int = 0,
             group: str | None = None, instance: str | None = None, client_id: str | None = "hb-test") -> bytes:
        """A Heartbeat with the same fields (the member each broker's own unless ``member``) to both brokers:
        asserts the two answers are the same bytes, returns them."""
        answers = [exchange(w, heartbeat_frame(version, cid, self.group if group is None else group,
                                               self.generations[i] + generation_delta,
                                               self.members[i] if member is None else member, instance, client_id))
                   for i, w in enumerate(self.wires)]
        assert answers[0] == answers[1], (version, answers)
        return answers[0]

    def close(self) -> None:
        for w in self.wires:
            w.close()


def test_every_version_is_answered_with_the_handlers_bytes(fast, handler):
    """Heartbeat v0-4 of a Stable group's member, with a client id and with a null one: the fast answer is the
    handler's answer byte for byte (the other broker's), counted as fast on one broker and never on the other."""
    pair = Pair(fast, handler, "hb-bytes")
    try:
        before = fast.fast_answers()
        cid = 1000
        for version in range(5):
            for client_id in ("hb-test", None, "kl\u00e9 client"):
                cid += 1
                answer = pair.both(version, cid, client_id=client_id)
                assert error_of(version, answer) == E.NONE
                assert int.from_bytes(answer[:4], "big") == cid
        assert fast.fast_answers() == before + 15
        assert handler.fast_answers() == 0
    finally:
        pair.close()


def test_static_members_are_answered_fast_only_with_their_own_instance_id(fast, handler):
    """A static member (group.instance.id) heartbeating with its instance id (v3, v4) is answered fast; an unknown
    instance id (UNKNOWN_MEMBER_ID) and another member's (FENCED_INSTANCE_ID) are the handler's, the same bytes."""
    pair = Pair(fast, handler, "hb-static", instance="i-1")
    try:
        before = fast.fast_answers()
        for version in (3, 4):
            assert error_of(version, pair.both(version, 10 + version, instance="i-1")) == E.NONE
        assert fast.fast_answers() == before + 2
        for version in (3, 4):
            assert error_of(version, pair.both(version, 20 + version, instance="i-2")) == E.UNKNOWN_MEMBER_ID
            assert error_of(version, pair.both(version, 30 + version, member="another", instance="i-1")) \
                == E.FENCED_INSTANCE_ID
            # the static member without its instance id (a v0-2 client, or v3+ with null): a known member id
            assert error_of(version, pair.both(version, 40 + version)) == E.NONE
        assert fast.fast_answers() == before + 4
        assert handler.fast_answers() == 0
    finally:
        pair.close()


def test_errors_are_the_handlers_answers(fast, handler):
    """A wrong generation, an unknown member, an unknown group, an empty group id: every version answers the
    handler's bytes on both brokers, and none is counted as fast."""
    pair = Pair(fast, handler, "hb-errors")
    try:
        before = fast.fast_answers()
        for version in range(5):
            cid = 100 * version
            assert error_of(version, pair.both(version, cid + 1, generation_delta=1)) == E.ILLEGAL_GENERATION
            assert error_of(version, pair.both(version, cid + 2, generation_delta=-1)) == E.ILLEGAL_GENERATION
            assert error_of(version, pair.both(version, cid + 3, member="nobody")) == E.UNKNOWN_MEMBER_ID
            assert error_of(version, pair.both(version, cid + 4, group="hb-no-such-group")) == E.UNKNOWN_MEMBER_ID
            assert error_of(version, pair.both(version, cid + 5, group="")) == E.INVALID_GROUP_ID
        assert fast.fast_answers() == before
    finally:
        pair.close()


def test_a_rebalance_in_progress_is_answered_by_the_handler_then_the_new_generation_fast(fast, handler):
    """A second member joins a Stable group: the first member's Heartbeat answers REBALANCE_IN_PROGRESS (the
    handler's bytes on both brokers, not fast); once both rejoined and synced, both are answered fast at the new
    generation, and the old generation is ILLEGAL_GENERATION."""
    group = "hb-rebalance"
    pair = Pair(fast, handler, group)
    joiners = (fast.wire(), handler.wire())
    try:
        before = fast.fast_answers()
        second = []
        for w in joiners:
            r = w.request(JOIN, 9, join_body(group, ""))
            assert r.error_code == E.MEMBER_ID_REQUIRED
            second.append(r.member_id)
            w.send(JOIN, 9, join_body(group, r.member_id))   # parks: the group prepares a rebalance
        for i, node in enumerate((fast, handler)):   # each broker reads its parked join a moment later
            deadline = time.monotonic() + 30
            while error_of(4, exchange(pair.wires[i], heartbeat_frame(4, 6, group, pair.generations[i],
                                                                     pair.members[i]))) != E.REBALANCE_IN_PROGRESS:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        fast_before_rejoin = fast.fast_answers()
        assert error_of(3, pair.both(3, 8)) == E.REBALANCE_IN_PROGRESS
        assert fast.fast_answers() == fast_before_rejoin
        generations = []
        for i, (w, j) in enumerate(zip(pair.wires, joiners)):
            first = w.request(JOIN, 9, join_body(group, pair.members[i]))
            _, other = j.receive(JOIN, 9)
            assert first.error_code == other.error_code == E.NONE
            assert first.generation_id == pair.generations[i] + 1
            leader_is_first = first.leader == pair.members[i]
            leader, follower = (w, j) if leader_is_first else (j, w)
            leader_id, follower_id = (pair.members[i], second[i]) if leader_is_first else (second[i], pair.members[i])
            assignments = [{"member_id": m, "assignment": b""} for m in (pair.members[i], second[i])]
            assert leader.request(SYNC, 5, sync_body(group, first.generation_id, leader_id, assignments)) \
                .error_code == E.NONE
            assert follower.request(SYNC, 5, sync_body(group, first.generation_id, follower_id, [])) \
                .error_code == E.NONE
            generations.append(first.generation_id)
        old = pair.generations
        assert error_of(4, pair.both(4, 9)) == E.ILLEGAL_GENERATION   # still the first generation's
        pair.generations = generations
        stable = fast.fast_answers()
        assert error_of(4, pair.both(4, 10)) == E.NONE
        for i, j in enumerate(joiners):
            assert error_of(2, exchange(j, heartbeat_frame(2, 11, group, generations[i], second[i]))) == E.NONE
        assert fast.fast_answers() == stable + 2
        assert old[0] + 1 == generations[0]
    finally:
        pair.close()
        for j in joiners:
            j.close()


def describe_members(wire: WireClient, group: str) -> int:
    r = wire.request(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})
    return len(r.groups[0].members)


def test_fast_heartbeats_keep_a_session_and_stopping_them_expires_it(fast):
    """A member with a 1.5 s session heartbeating every 0.3 s for three sessions stays (every answer fast); once
    its heartbeats stop, its session expires: the next Heartbeat answers UNKNOWN_MEMBER_ID and the group has no
    member."""
    group = "hb-session"
    with fast.wire() as wire:
        member, generation = form(wire, group, session=1500)
        before = fast.fast_answers()
        sent = 0
        stop = time.monotonic() + 4.5
        while time.monotonic() < stop:
            sent += 1
            assert error_of(4, exchange(wire, heartbeat_frame(4, sent, group, generation, member))) == E.NONE
            time.sleep(0.3)
        assert fast.fast_answers() == before + sent
        assert describe_members(wire, group) == 1
        time.sleep(3.0)   # two sessions without a heartbeat (the timer polls at least every second)
        assert error_of(4, exchange(wire, heartbeat_frame(4, 999, group, generation, member))) \
            == E.UNKNOWN_MEMBER_ID
        assert describe_members(wire, group) == 0


def assignment_of(consumer: Consumer, seconds: float) -> set[int]:
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        consumer.poll(0.1)
    return {p.partition for p in consumer.assignment()}


def test_confluent_kafka_consumers_rebalance_and_keep_their_sessions(fast):
    """Two confluent-kafka consumers of a classic group with 1.5 s sessions and 0.3 s heartbeats split four
    partitions, keep them over several sessions (their heartbeats answered fast, no rebalance), and the one left
    after the other closes gets all four."""
    topic, group = "hb-consumed", "hb-consumers"
    admin = AdminClient({"bootstrap.servers": fast.proc.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        future.result(30)
    config = {"bootstrap.servers": fast.proc.bootstrap_servers, "group.id": group, "session.timeout.ms": 1500,
              "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumers = [Consumer(config), Consumer(config)]
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while True:
            owned = [assignment_of(c, 0.2) for c in consumers]
            if all(len(o) == 2 for o in owned) and owned[0] | owned[1] == {0, 1, 2, 3}:
                break
            assert time.monotonic() < deadline, owned
        before = fast.fast_answers()
        with fast.wire() as wire:
            generation = wire.request(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})
        stop = time.monotonic() + 4.5
        while time.monotonic() < stop:   # three sessions: both keep polling, so heartbeating
            for c in consumers:
                c.poll(0.05)
        assert [assignment_of(c, 0.1) for c in consumers] == owned
        assert fast.fast_answers() >= before + 10
        with fast.wire() as wire:
            after = wire.request(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})
        assert after.groups[0].group_state == generation.groups[0].group_state == "Stable"
        assert len(after.groups[0].members) == 2
        consumers.pop().close()
        deadline = time.monotonic() + 60
        while assignment_of(consumers[0], 0.2) != {0, 1, 2, 3}:
            assert time.monotonic() < deadline
    finally:
        for c in consumers:
            c.close()


def test_a_client_quota_keeps_heartbeats_on_the_handler(fast):
    """While a client quota is set (the handler's path measures each request and answers its throttle time) no
    Heartbeat is answered fast, not even another client's; once the quota is removed they are again."""
    group = "hb-quota"

    def quota(remove: bool) -> None:
        with fast.wire("admin") as admin:
            answer = admin.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": "limited"}],
                 "ops": [{"key": "request_percentage", "value": 1000.0, "remove": remove}]}], "validate_only": False})
            assert [e.error_code for e in answer.entries] == [E.NONE]

    with fast.wire() as wire:
        member, generation = form(wire, group)
        quota(remove=False)
        try:
            before = fast.fast_answers()
            for cid in range(3):
                assert error_of(4, exchange(wire, heartbeat_frame(4, cid, group, generation, member))) == E.NONE
            assert fast.fast_answers() == before
        finally:
            quota(remove=True)
        assert error_of(4, exchange(wire, heartbeat_frame(4, 9, group, generation, member))) == E.NONE
        assert fast.fast_answers() == before + 1


def test_under_an_authorizer_every_heartbeat_is_checked_by_the_handler(tmp_path):
    """Under an authorizer none is answered fast: Read on the group is checked per request, so a client host the
    ACLs deny gets GROUP_AUTHORIZATION_FAILED for the member's own Heartbeat while an allowed one gets NONE."""
    port = free_port()
    props = {**CONFIG, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "allow.everyone.if.no.acl.found": "true", "klog.metrics.listener": f"127.0.0.1:{port}"}
    group = "hb-guarded"
    with BrokerProcess(tmp_path, props) as proc:
        node = Node(proc, port)
        admin = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
        bindings = [AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:ANONYMOUS", host,
                               AclOperation.READ, permission)
                    for host, permission in (("*", AclPermissionType.ALLOW), ("127.0.0.2", AclPermissionType.DENY))]
        for future in admin.create_acls(bindings).values():
            assert future.result(30) is None
        with node.wire() as wire, WireClient(proc.host, proc.port, source_host="127.0.0.2") as denied:
            deadline = time.monotonic() + 30   # the ACLs (one request) reach the broker's image a moment later
            while error_of(4, exchange(denied, heartbeat_frame(4, 0, group, 1, "m"))) != E.GROUP_AUTHORIZATION_FAILED:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            member, generation = form(wire, group)
            for version in range(5):
                frame = heartbeat_frame(version, version, group, generation, member)
                assert error_of(version, exchange(wire, frame)) == E.NONE
                assert error_of(version, exchange(denied, frame)) == E.GROUP_AUTHORIZATION_FAILED
        assert node.fast_answers() == 0


def test_only_the_groups_coordinator_answers_and_others_say_not_coordinator(tmp_path):
    """Three nodes: the group's coordinator (FindCoordinator's answer) answers its member's Heartbeats fast; the
    other two answer the same Heartbeat NOT_COORDINATOR through the handler, none counted as fast there."""
    ports = {i: free_port() for i in (1, 2, 3)}
    group = "hb-coordinated"
    with KlogCluster(tmp_path, 3, node_properties={i: {**CONFIG, "klog.metrics.listener": f"127.0.0.1:{p}"}
                                                   for i, p in ports.items()}) as cluster:
        cluster.wait_for_brokers()
        with WireClient("127.0.0.1", cluster.client_ports[cluster.node_ids[0]]) as any_node:
            deadline = time.monotonic() + 60
            while (found := any_node.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})).error_code:
                assert time.monotonic() < deadline, found
                time.sleep(0.2)
        coordinator = found.node_id
        with WireClient("127.0.0.1", cluster.client_ports[coordinator]) as wire:
            member, generation = form(wire, group)
            frame = heartbeat_frame(4, 5, group, generation, member)
            assert error_of(4, exchange(wire, frame)) == E.NONE
            assert fast_answers_at(ports[coordinator]) == 1
        for other in (i for i in cluster.node_ids if i != coordinator):
            with WireClient("127.0.0.1", cluster.client_ports[other]) as wire:
                assert error_of(4, exchange(wire, frame)) == E.NOT_COORDINATOR
            assert fast_answers_at(ports[other]) == 0
