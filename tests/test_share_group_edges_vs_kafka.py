"""Share group (KIP-932) edge cases answered as Apache Kafka 4.3 answers them, on a klog broker and on an Apache
Kafka broker started from the same properties (tests/test_share_groups.py's): ShareGroupHeartbeat with a missing or
unknown member id or group, epochs -2/-1/0/ahead, no/empty/unknown subscription, an empty group id or rack, the id of
a consumer group; ShareFetch and ShareAcknowledge with no session, a wrong session epoch, an unknown partition,
acknowledgements malformed, out of order, overlapping, past the acquired records or below the start offset,
forgotten partitions, MaxRecords and BatchSize 0; ShareGroupDescribe of
unknown and consumer groups; Describe/Alter/DeleteShareGroupOffsets of unknown, non-empty and consumer groups;
ListGroups' share type filter; DeleteGroups of a share group; the AcquisitionLockTimeoutMs answered (the group's
record lock duration, 0 when refused), a session reopened, a member leaving and a connection closing while holding
records; member ids longer than a UUID; the offset APIs given the empty group id or a topic twice.

Each scenario's observations (error codes and what a client acts on) must equal the ones Apache Kafka 4.3.1 gave,
written out below; the Kafka side checks the record. The differences klog keeps (docs/reliability.md, "Share group
APIs against Apache Kafka") are left out of the scenarios."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import klog
from klog.client.admin import ConfigResource
from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode as E
from klog.testing.wire import WireClient

from test_share_groups import _Server, broker  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(300)

SGHB, SGD, SFETCH, SACK, DSGO, ASGO, DELSGO = 76, 77, 78, 79, 90, 91, 92
ZERO = uuid.UUID(int=0)
#: the scenarios' record lock duration: no lock expires while a scenario runs
LOCK_MS = 60_000


class Wire:
    """A WireClient on ``broker``'s bootstrap address."""

    def __init__(self, server: _Server) -> None:
        host, port = server.bootstrap_servers.rsplit(":", 1)
        self.client = WireClient(host, int(port), timeout=30.0)

    def __enter__(self) -> Wire:
        self.client.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(*exc)

    def __call__(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        return self.client.request(api_key, version, body)


def _topic(server: _Server, partitions: int = 2, records: int = 10) -> tuple[str, str, uuid.UUID]:
    """A new topic with ``records`` records in partition 0, a group reading it from the earliest offset (with
    LOCK_MS record locks), and the topic's id."""
    name = f"se-{uuid.uuid4().hex[:8]}"
    group = f"g-{name}"
    with klog.AdminClient(bootstrap_servers=server.bootstrap_servers) as admin:
        admin.create_topics([klog.client.NewTopic(name, partitions, 1)])
        admin.alter_configs({ConfigResource("group", group): {"share.auto.offset.reset": "earliest",
                                                               "share.record.lock.duration.ms": str(LOCK_MS)}})
    with klog.Producer(bootstrap_servers=server.bootstrap_servers, batch_size=1 << 20, linger_ms=60_000) as p:
        for i in range(records):
            p.send(name, value=f"v{i}".encode(), partition=0)
        p.flush()
    with Wire(server) as w:
        meta = w(ApiKey.METADATA, 12, {"topics": [{"topic_id": ZERO, "name": name}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        _ready(w, group)
    return name, group, meta.topics[0].topic_id


def _ready(w: Wire, group: str, tries: int = 300) -> None:
    """The group's coordinator is loaded (Kafka creates and loads __consumer_offsets on first use)."""
    for _ in range(tries):
        if w(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].error_code == 0:
            r = w(SGHB, 1, hb(group, "probe", 1))
            if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
                return
        time.sleep(0.2)
    raise AssertionError("the group coordinator never loaded")


def hb(group: str, member: str, epoch: int, topics: list[str] | None = None, rack: str | None = None
       ) -> dict[str, Any]:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
            "subscribed_topic_names": topics}


def fetch(group: str | None, member: str | None, epoch: int, topics: list[tuple[uuid.UUID, int, list[Any]]],
          forgotten: tuple[tuple[uuid.UUID, list[int]], ...] = (), max_records: int = 500, batch_size: int = 500
          ) -> dict[str, Any]:
    """A ShareFetch v1 body: ``topics`` as (topic id, partition, acknowledgement batches (first, last, types))."""
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 0,
            "min_bytes": 0, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": batch_size,
            "topics": _topics(topics), "forgotten_topics_data": [{"topic_id": t, "partitions": ps}
                                                                   for t, ps in forgotten]}


def ack(group: str | None, member: str | None, epoch: int, topics: list[tuple[uuid.UUID, int, list[Any]]]
        ) -> dict[str, Any]:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "topics": _topics(topics)}


def _topics(topics: list[tuple[uuid.UUID, int, list[Any]]]) -> list[dict[str, Any]]:
    out: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for tid, index, batches in topics:
        out.setdefault(tid, []).append({"partition_index": index, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": la, "acknowledge_types": types} for f, la, types in batches]})
    return [{"topic_id": t, "partitions": ps} for t, ps in out.items()]


def fetched(r: Any) -> Any:
    """A ShareFetch answer as (top error, [(partition, error, ack error, acquired runs)] sorted), without the
    partitions that have nothing to say (no records, no errors): Kafka leaves them out of a session's later
    answers, klog answers every partition of the session."""
    parts = sorted((p.partition_index, p.error_code, p.acknowledge_error_code,
                    [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records])
                   for t in r.responses for p in t.partitions
                   if p.error_code or p.acknowledge_error_code or p.acquired_records)
    return (r.error_code, parts)


def acked(r: Any) -> Any:
    return (r.error_code, sorted((p.partition_index, p.error_code) for t in r.responses for p in t.partitions))


def beat(r: Any) -> Any:
    return (r.error_code, r.error_message)


def _joined(w: Wire, group: str, member: str, topic: str, tries: int = 100) -> Any:
    """A member's first heartbeat, then heartbeats until it is assigned (Kafka assigns a moment later)."""
    r = w(SGHB, 1, hb(group, member, 0, [topic]))
    assert r.error_code == 0, r
    epoch = r.member_epoch
    for _ in range(tries):
        if r.assignment is not None and r.assignment.topic_partitions:
            return r
        time.sleep(0.1)
        r = w(SGHB, 1, hb(group, member, epoch))
        epoch = r.member_epoch
    raise AssertionError("never assigned")


def _fetch_until(w: Wire, body_of: Callable[[int], dict[str, Any]], epoch: int, tries: int = 100
                 ) -> tuple[Any, int]:
    """ShareFetch until records are acquired (Kafka loads a share-partition asynchronously); the answer and the
    next session epoch."""
    for _ in range(tries):
        r = w(SFETCH, 1, body_of(epoch))
        epoch += 1
        if r.error_code == 0 and any(p.acquired_records for t in r.responses for p in t.partitions):
            return r, epoch
        time.sleep(0.1)
    return r, epoch


def _check(out: list[Any], expected: list[Any], **names: str) -> None:
    """``out`` equals ``expected`` once the ``names`` (the scenario's group and topic names) are replaced by their
    keys in the error messages."""
    def anonymous(value: Any) -> Any:
        if isinstance(value, str):
            for key, name in names.items():
                value = value.replace(name, key)
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(anonymous(v) for v in value)
        return value

    out = anonymous(out)
    print("OBSERVED", out)
    mismatches = [(want, got) for want, got in zip(expected, out) if want != got]
    assert not mismatches, "\n".join(f"kafka {want}\ngot   {got}" for want, got in mismatches)
    assert len(out) == len(expected), (out, expected)


# -- ShareGroupHeartbeat ------------------------------------------------------------------------------------------
def test_heartbeat_edges(broker: _Server) -> None:
    """ShareGroupHeartbeat's refusals (empty ids and rack, no subscription, epoch -2), a group or member it does not
    know (GROUP_ID_NOT_FOUND while the group does not exist, UNKNOWN_MEMBER_ID after), an epoch ahead, a rejoin at
    epoch 0, a leave."""
    topic, group, _ = _topic(broker)
    with Wire(broker) as w:
        out = [
            ("empty-group", beat(w(SGHB, 1, hb("", "m1", 0, [topic])))),
            ("empty-member", beat(w(SGHB, 1, hb(group, "", 0, [topic])))),
            ("null-subscription", beat(w(SGHB, 1, hb(group, "m1", 0, None)))),
            ("empty-subscription", beat(w(SGHB, 1, hb(group, "m1", 0, [])))),
            ("epoch-minus-2", beat(w(SGHB, 1, hb(group, "m1", -2, [topic])))),
            ("empty-rack", beat(w(SGHB, 1, hb(group, "m1", 0, [topic], rack="")))),
            ("unknown-member-epoch-5", beat(w(SGHB, 1, hb(group, "nobody", 5)))),
            ("unknown-member-leaves", beat(w(SGHB, 1, hb(group, "nobody", -1)))),
        ]
        r = w(SGHB, 1, hb(f"{group}-unknown-topic", "m1", 0, ["no-such-topic"], rack="r1"))
        out.append(("unknown-topic", r.error_code, r.member_epoch,
                    None if r.assignment is None else len(r.assignment.topic_partitions)))
        r = w(SGHB, 1, hb(group, "m1", 0, [topic]))
        out.append(("joins", r.error_code, r.member_id))
        epoch = r.member_epoch
        out.append(("ahead-epoch", beat(w(SGHB, 1, hb(group, "m1", epoch + 5)))))
        r = w(SGHB, 1, hb(group, "m1", 0, [topic]))
        out.append(("rejoins-epoch-0", r.error_code, r.member_epoch >= epoch))
        r = w(SGHB, 1, hb(group, "m1", -1))
        out.append(("leaves", r.error_code, r.member_id, r.member_epoch))
        out.append(("left-beats", beat(w(SGHB, 1, hb(group, "m1", epoch)))))
        r = w(SGHB, 1, hb(group, "m2", 0, [topic]))
        out.append(("other-joins", r.error_code))
        out.append(("existing-group-unknown-member", beat(w(SGHB, 1, hb(group, "nobody", 5)))))
        out.append(("existing-group-unknown-member-leaves", beat(w(SGHB, 1, hb(group, "nobody", -1)))))
        out.append(("existing-group-unknown-member-epoch-0-no-topics", beat(w(SGHB, 1, hb(group, "nobody", 0)))))
    _check(out, KAFKA_HEARTBEAT, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_HEARTBEAT: list[Any] = [
    ('empty-group', (42, "GroupId can't be empty.")),
    ('empty-member', (42, None)),
    ('null-subscription', (42, 'SubscribedTopicNames must be set in first request.')),
    ('empty-subscription', (42, 'SubscribedTopicNames must be set in first request.')),
    ('epoch-minus-2', (42, 'MemberEpoch is invalid.')),
    ('empty-rack', (42, "RackId can't be empty.")),
    ('unknown-member-epoch-5', (69, 'Share group G not found.')),
    ('unknown-member-leaves', (69, 'Group G not found.')),
    ('unknown-topic', 0, 2, 0),
    ('joins', 0, 'm1'),
    ('ahead-epoch',
      (110,
       'The share group member has a greater member epoch (7) than the one known by the group coordinator (2). The '
       'member must abandon all its partitions and rejoin.')),
    ('rejoins-epoch-0', 0, True),
    ('leaves', 0, 'm1', -1),
    ('left-beats', (25, 'Member m1 is not a member of group G.')),
    ('other-joins', 0),
    ('existing-group-unknown-member', (25, 'Member nobody is not a member of group G.')),
    ('existing-group-unknown-member-leaves', (25, 'Member nobody is not a member of group G.')),
    ('existing-group-unknown-member-epoch-0-no-topics', (42, 'SubscribedTopicNames must be set in first request.'))]


def _consumer_group(w: Wire, group: str, topic: str) -> None:
    r = w(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": group, "member_id": "cm", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "server_assignor": None,
        "topic_partitions": []})
    assert r.error_code == 0, r


def test_a_consumer_groups_id(broker: _Server) -> None:
    """The share group APIs given a consumer group's id: not found as a share group, but its offsets described as an
    unknown group's."""
    topic, group, _ = _topic(broker)
    with Wire(broker) as w:
        _consumer_group(w, group, topic)
        out: list[Any] = [("heartbeat", beat(w(SGHB, 1, hb(group, "m1", 0, [topic]))))]
        d = w(SGD, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
        out.append(("describe", d.error_code, d.error_message))
        r = w(DSGO, 1, {"groups": [{"group_id": group, "topics": None}]}).groups[0]
        out.append(("describe-offsets", r.error_code, r.error_message, [t.topic_name for t in r.topics]))
        r = w(DSGO, 1, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
        g = r.groups[0]
        out.append(("describe-offsets-topics", g.error_code, g.error_message,
                    [(t.topic_name, [(p.partition_index, p.start_offset, p.error_code, p.error_message)
                                     for p in t.partitions]) for t in g.topics]))
        r = w(ASGO, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]})
        out.append(("alter-offsets", r.error_code, r.error_message))
        r = w(DELSGO, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        out.append(("delete-offsets", r.error_code, r.error_message))
    _check(out, KAFKA_CONSUMER_GROUP_ID, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_CONSUMER_GROUP_ID: list[Any] = [
    ('heartbeat', (69, 'Group G is not a share group.')),
    ('describe', 69, 'Group G is not a share group.'),
    ('describe-offsets', 0, None, []),
    ('describe-offsets-topics', 0, None, [('T', [(0, -1, 0, None)])]),
    ('alter-offsets', 69, 'Group G is not a share group.'),
    ('delete-offsets', 69, 'Group G is not a share group.')]


# -- ShareFetch / ShareAcknowledge ---------------------------------------------------------------------------------
def test_share_fetch_and_acknowledge_edges(broker: _Server) -> None:
    """ShareFetch and ShareAcknowledge without a session or at the wrong epoch, with ids missing, an unknown
    partition, malformed or misplaced acknowledgement batches, a share-partition not fetched, forgotten partitions,
    MaxRecords 0, a close naming partitions."""
    topic, group, tid = _topic(broker)
    with Wire(broker) as w:
        out: list[Any] = [
            ("no-session", fetched(w(SFETCH, 1, fetch(group, "m1", 3, [(tid, 0, [])])))),
            ("acks-open-session", fetched(w(SFETCH, 1, fetch(group, "m1", 0, [(tid, 0, [(0, 0, [1])])])))),
            ("null-member", fetched(w(SFETCH, 1, fetch(group, None, 0, [(tid, 0, [])])))),
            ("ack-no-session", acked(w(SACK, 1, ack(group, "m1", 2, [(tid, 0, [(0, 0, [1])])])))),
            ("ack-epoch-0", acked(w(SACK, 1, ack(group, "m1", 0, [(tid, 0, [(0, 0, [1])])])))),
        ]
        _joined(w, group, "m1", topic)
        r, epoch = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])]), 0)
        out.append(("acquires", fetched(r)))
        r, _ = _fetch_until(w, lambda e: fetch(group, "stranger2", e, [(tid, 0, [])]), 0, tries=5)
        out.append(("not-a-member-after-init", fetched(r)))
        r = w(SFETCH, 1, fetch(group, "m7", 0, [(tid, 7, [])]))
        out.append(("unknown-partition", fetched(r)))
        out.append(("wrong-epoch", fetched(w(SFETCH, 1, fetch(group, "m1", epoch + 3, [(tid, 0, [])])))))
        out.append(("ack-wrong-epoch", acked(w(SACK, 1, ack(group, "m1", epoch + 3, [(tid, 0, [(0, 0, [1])])])))))
        out.append(("ack-overlap", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(0, 2, [1]), (1, 3, [1])])])))))
        epoch += 1
        out.append(("ack-out-of-range", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(5, 50, [1])])])))))
        epoch += 1
        out.append(("ack-not-acquired-partition", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 1, [(0, 0, [1])])])))))
        epoch += 1
        out.append(("ack-type-9", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(4, 4, [9])])])))))
        epoch += 1
        out.append(("ack-type-0-gap", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(4, 4, [0])])])))))
        epoch += 1
        out.append(("ack-last-before-first", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(6, 5, [1])])])))))
        epoch += 1
        out.append(("ack-types-mismatch", acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(6, 7, [1, 1, 1])])])))))
        epoch += 1
        out.append(("fetch-ack-out-of-range", fetched(w(SFETCH, 1, fetch(group, "m1", epoch,
                                                                          [(tid, 0, [(20, 30, [1])])])))))
        epoch += 1
        out.append(("forgets", fetched(w(SFETCH, 1, fetch(group, "m1", epoch, [], forgotten=((tid, [0, 1]),))))))
        epoch += 1
        out.append(("max-records-0", fetched(w(SFETCH, 1, fetch(group, "m1", epoch, [(tid, 0, [])], max_records=0,
                                                                 batch_size=0)))))
        epoch += 1
        out.append(("close-with-partitions", fetched(w(SFETCH, 1, fetch(group, "m1", -1, [(tid, 0, [])])))))
        out.append(("closed", fetched(w(SFETCH, 1, fetch(group, "m1", epoch, [(tid, 0, [])])))))
        out.append(("ack-close-no-session", acked(w(SACK, 1, ack(group, "m1", -1, [])))))
    _check(out, KAFKA_FETCH, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_FETCH: list[Any] = [
    ('no-session', (122, [])),
    ('acks-open-session', (42, [])),
    ('null-member', (42, [])),
    ('ack-no-session', (122, [])),
    ('ack-epoch-0', (123, [])),
    ('acquires', (0, [(0, 0, 0, [(0, 9, 1)])])),
    ('not-a-member-after-init', (0, [])),
    ('unknown-partition', (0, [(7, 3, 0, [])])),
    ('wrong-epoch', (123, [])),
    ('ack-wrong-epoch', (123, [])),
    ('ack-overlap', (0, [(0, 42)])),
    ('ack-out-of-range', (0, [(0, 42)])),
    ('ack-not-acquired-partition', (0, [(1, 3)])),
    ('ack-type-9', (0, [(0, 42)])),
    ('ack-type-0-gap', (0, [(0, 0)])),
    ('ack-last-before-first', (0, [(0, 42)])),
    ('ack-types-mismatch', (0, [(0, 42)])),
    ('fetch-ack-out-of-range', (0, [(0, 0, 42, [])])),
    ('forgets', (0, [])),
    ('max-records-0', (0, [])),
    ('close-with-partitions', (0, [])),
    ('closed', (122, [])),
    ('ack-close-no-session', (122, []))]


# -- ShareGroupDescribe, offsets, ListGroups, DeleteGroups ---------------------------------------------------------
def test_admin_edges(broker: _Server) -> None:
    """ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets of unknown groups and topics and of a group with a
    member, ListGroups' type and state filters, the consumer group APIs given a share group's id, DeleteGroups."""
    topic, group, _ = _topic(broker)
    other, _, _ = _topic(broker, records=0)
    with Wire(broker) as w:
        out: list[Any] = []
        d = w(SGD, 1, {"group_ids": ["no-such-group", ""], "include_authorized_operations": True}).groups
        out.append(("describe-unknown", sorted((g.group_id, g.error_code, g.error_message, g.authorized_operations)
                                                for g in d)))   # Kafka answers the empty id first
        r = w(DSGO, 1, {"groups": [{"group_id": "no-such-group", "topics": None},
                                   {"group_id": "no-such-group2", "topics": [{"topic_name": topic, "partitions": [0]}]}]})
        out.append(("describe-offsets-unknown", [(g.group_id, g.error_code, g.error_message,
                                                  [(t.topic_name, [(p.partition_index, p.start_offset, p.error_code)
                                                                   for p in t.partitions]) for t in g.topics])
                                                 for g in r.groups]))
        r = w(ASGO, 0, {"group_id": "no-such-group-a", "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 2}]},
            {"topic_name": "no-such-topic", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
        out.append(("alter-unknown-group", r.error_code, sorted(
            (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses)))
        r = w(DELSGO, 0, {"group_id": "no-such-group-d", "topics": [{"topic_name": topic}]})
        out.append(("delete-unknown-group", r.error_code, r.error_message,
                    [(t.topic_name, t.error_code) for t in r.responses]))
        _joined(w, group, "m1", topic)
        r = w(ASGO, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 2}]}]})
        out.append(("alter-non-empty", r.error_code, r.error_message))
        r = w(DELSGO, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        out.append(("delete-offsets-non-empty", r.error_code, r.error_message))
        r = w(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
        out.append(("delete-non-empty", [(g.group_id, g.error_code) for g in r.results]))
        r = w(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        out.append(("list-share", r.error_code, [(g.group_type, g.group_state, g.protocol_type)
                                                  for g in r.groups if g.group_id == group]))
        r = w(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
        out.append(("list-consumer", [g.group_id for g in r.groups if g.group_id == group]))
        r = w(ApiKey.LIST_GROUPS, 5, {"states_filter": ["stable"], "types_filter": ["SHARE"]})
        out.append(("list-stable-share", [g.group_id for g in r.groups if g.group_id == group]))
        r = w(DELSGO, 0, {"group_id": group, "topics": []})
        out.append(("delete-offsets-no-topics", r.error_code, r.error_message))
        r = w(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": group, "member_id": "cm", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "server_assignor": None,
            "topic_partitions": []})
        out.append(("consumer-heartbeat", r.error_code, r.error_message))
        r = w(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})
        out.append(("consumer-describe", [(g.error_code, g.error_message) for g in r.groups]))
        r = w(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        out.append(("classic-describe", [(g.error_code, g.group_state, g.protocol_type) for g in r.groups]))
        r = w(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})
        out.append(("offset-fetch", [(g.error_code, g.topics) for g in r.groups]))
        w(SGHB, 1, hb(group, "m1", -1))
        r = w(DELSGO, 0, {"group_id": group, "topics": [{"topic_name": "no-such-topic"}]})
        out.append(("delete-offsets-unknown-topic", r.error_code, [(t.topic_name, t.error_code, t.error_message)
                                                                   for t in r.responses]))
        r = w(ASGO, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 9, "start_offset": 2}]}]})
        out.append(("alter-unknown-partition", r.error_code, sorted(
            (t.topic_name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in r.responses)))
        r = w(ASGO, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 1000}]}]})
        out.append(("alter-past-the-end", r.error_code, [(p.partition_index, p.error_code)
                                                         for t in r.responses for p in t.partitions]))
        r = w(DSGO, 1, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
        out.append(("negative-lag", [(p.partition_index, p.start_offset, p.lag, p.error_code)
                                     for g in r.groups for t in g.topics for p in t.partitions]))
        r = w(DELSGO, 0, {"group_id": group, "topics": [{"topic_name": other}]})
        out.append(("delete-offsets-no-state", r.error_code, [(t.topic_name, t.error_code, t.error_message)
                                                              for t in r.responses]))
        r = w(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
        out.append(("delete-empty", [(g.group_id, g.error_code) for g in r.results]))
        d = w(SGD, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
        out.append(("describe-deleted", d.error_code, d.error_message))
    _check(out, KAFKA_ADMIN, G=group, T=topic, OTHER=other)


#: Apache Kafka 4.3.1's answers
KAFKA_ADMIN: list[Any] = [
    ('describe-unknown',
      [('', 24, None, -2147483648), ('no-such-group', 69, 'Group no-such-group not found.', -2147483648)]),
    ('describe-offsets-unknown', [('no-such-group', 0, None, []), ('no-such-group2', 0, None, [('T', [(0, -1, 0)])])]),
    ('alter-unknown-group', 0, [('no-such-topic', [(0, 3)]), ('T', [(0, 0)])]),
    ('delete-unknown-group', 69, 'Group no-such-group-d not found.', []),
    ('alter-non-empty', 68, 'The group is not empty.'),
    ('delete-offsets-non-empty', 68, 'The group is not empty.'),
    ('delete-non-empty', [('G', 68)]),
    ('list-share', 0, [('share', 'Stable', 'share')]),
    ('list-consumer', []),
    ('list-stable-share', ['G']),
    ('delete-offsets-no-topics', 68, 'The group is not empty.'),
    ('consumer-heartbeat', 69, 'Group G is not a consumer group.'),
    ('consumer-describe', [(69, 'Group G is not a consumer group.')]),
    ('classic-describe', [(0, 'Dead', '')]),
    ('offset-fetch', [(0, [])]),
    ('delete-offsets-unknown-topic', 0, [('no-such-topic', 3, 'This server does not host this topic-partition.')]),
    ('alter-unknown-partition', 0, [('T', [(9, 3, 'This server does not host this topic-partition.')])]),
    ('alter-past-the-end', 0, [(0, 0)]),
    ('negative-lag', [(0, 1000, -990, 0)]),
    ('delete-offsets-no-state', 0, [('OTHER', 3, 'There is no offset information to delete.')]),
    ('delete-empty', [('G', 0)]),
    ('describe-deleted', 69, 'Group G not found.')]


def test_acknowledgements_as_kafkas_share_partition_takes_them(broker: _Server) -> None:
    """MaxRecords 0 acquires nothing (BatchSize 0 does not matter); a forgotten partition's records stay acquired by
    the member; offsets below the start offset are skipped; a partition's batches are taken all or none (one past
    the acquired records refuses the others, so does an offset acknowledged twice)."""
    topic, group, tid = _topic(broker, records=30)
    with Wire(broker) as w, Wire(broker) as w2:
        _joined(w, group, "m1", topic)
        _joined(w2, group, "m2", topic)
        r, e = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])], max_records=5, batch_size=5), 0)
        out: list[Any] = [("first", fetched(r))]

        def step(tag: str, body: dict[str, Any], api: int = SACK) -> None:
            nonlocal e
            r = w(api, 1, body)
            out.append((tag, fetched(r) if api == SFETCH else acked(r)))
            e += 1

        step("release-all", ack(group, "m1", e, [(tid, 0, [(0, 29, [2])])]))
        step("max-records-0", fetch(group, "m1", e, [(tid, 0, [])], max_records=0, batch_size=5), SFETCH)
        step("batch-size-0", fetch(group, "m1", e, [(tid, 0, [])], max_records=5, batch_size=0), SFETCH)
        step("forget", fetch(group, "m1", e, [], forgotten=((tid, [0]),)), SFETCH)
        r, _ = _fetch_until(w2, lambda e: fetch(group, "m2", e, [(tid, 0, [])]), 0, tries=3)
        out.append(("other-member-after-forget", fetched(r)))
        step("ack-after-forget", ack(group, "m1", e, [(tid, 0, [(0, 0, [1])])]))
        step("ack-below-start", ack(group, "m1", e, [(tid, 0, [(0, 0, [1])])]))
        step("one-batch-past-acquired", ack(group, "m1", e, [(tid, 0, [(1, 1, [1]), (50, 60, [1])])]))
        step("first-batch-not-taken", ack(group, "m1", e, [(tid, 0, [(1, 1, [1])])]))
        step("offset-acknowledged-twice", ack(group, "m1", e, [(tid, 0, [(2, 3, [1]), (3, 4, [1])])]))
        step("none-taken", ack(group, "m1", e, [(tid, 0, [(2, 2, [1])])]))
        step("straddles-start", ack(group, "m1", e, [(tid, 0, [(0, 3, [1, 1, 1, 1])])]))
        step("next", ack(group, "m1", e, [(tid, 0, [(4, 4, [1])])]))
    _check(out, KAFKA_ACKNOWLEDGEMENTS, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_ACKNOWLEDGEMENTS: list[Any] = [
    ('first', (0, [(0, 0, 0, [(0, 29, 1)])])),
    ('release-all', (0, [(0, 0)])),
    ('max-records-0', (0, [])),
    ('batch-size-0', (0, [(0, 0, 0, [(0, 29, 2)])])),
    ('forget', (0, [])),
    ('other-member-after-forget', (0, [])),
    ('ack-after-forget', (0, [(0, 0)])),
    ('ack-below-start', (0, [(0, 0)])),
    ('one-batch-past-acquired', (0, [(0, 42)])),
    ('first-batch-not-taken', (0, [(0, 0)])),
    ('offset-acknowledged-twice', (0, [(0, 121)])),
    ('none-taken', (0, [(0, 0)])),
    ('straddles-start', (0, [(0, 0)])),
    ('next', (0, [(0, 0)]))]


def test_a_partition_named_twice_is_acknowledged_once_with_its_last_batches(broker: _Server) -> None:
    """Kafka keys a ShareFetch's and a ShareAcknowledge's partitions in a map: a partition named twice (in one topic
    entry or in two) is acknowledged with its last entry's batches and answered once; the first entry's records
    stay acquired (acknowledged afterwards without error)."""
    topic, group, tid = _topic(broker, records=30)
    with Wire(broker) as w:
        _joined(w, group, "m1", topic)
        r, e = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])]), 0)
        out: list[Any] = [("first", fetched(r))]
        r = w(SFETCH, 1, fetch(group, "m1", e, [(tid, 0, [(4, 5, [1])]), (tid, 0, [(2, 3, [1])])]))
        out.append(("fetch-names-it-twice", fetched(r)))
        r = w(SACK, 1, ack(group, "m1", e + 1, [(tid, 0, [(4, 5, [1])])]))
        out.append(("first-entry-still-acquired", acked(r)))
        r = w(SACK, 1, ack(group, "m1", e + 2, [(tid, 0, [(8, 9, [1])]), (tid, 0, [(6, 7, [1])])]))
        out.append(("acknowledge-names-it-twice", acked(r)))
        r = w(SACK, 1, ack(group, "m1", e + 3, [(tid, 0, [(8, 9, [1])])]))
        out.append(("its-first-entry-still-acquired", acked(r)))
        r = w(SACK, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": e + 4, "topics": [
            {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": offset, "last_offset": offset, "acknowledge_types": [1]}]}]} for offset in (11, 10)]})
        out.append(("two-topic-entries", [(t.topic_id == tid, [(p.partition_index, p.error_code) for p in t.partitions])
                                          for t in r.responses]))
        r = w(SACK, 1, ack(group, "m1", e + 5, [(tid, 0, [(11, 11, [1])])]))
        out.append(("the-first-topic-entrys-still-acquired", acked(r)))
    _check(out, KAFKA_NAMED_TWICE, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_NAMED_TWICE: list[Any] = [
    ('first', (0, [(0, 0, 0, [(0, 29, 1)])])),
    ('fetch-names-it-twice', (0, [])),
    ('first-entry-still-acquired', (0, [(0, 0)])),
    ('acknowledge-names-it-twice', (0, [(0, 0)])),
    ('its-first-entry-still-acquired', (0, [(0, 0)])),
    ('two-topic-entries', [(True, [(0, 0)])]),
    ('the-first-topic-entrys-still-acquired', (0, [(0, 0)]))]


def _top(r: Any) -> Any:
    """A ShareFetch's or ShareAcknowledge's top level: (error, message, acquisition lock timeout)."""
    return (r.error_code, r.error_message, r.acquisition_lock_timeout_ms)


def test_lock_timeout_answered_and_a_reopened_session_keeps_the_records(broker: _Server) -> None:
    """AcquisitionLockTimeoutMs is the group's share.record.lock.duration.ms (LOCK_MS, not the broker's 1500) in
    answered requests and 0 in refused ones, which carry no message; a ShareFetch at epoch 0 for a member that has
    a session opens a new one and leaves the member's records acquired (it can still acknowledge them)."""
    topic, group, tid = _topic(broker)
    with Wire(broker) as w:
        out: list[Any] = [
            ("no-session", _top(w(SFETCH, 1, fetch(group, "m1", 3, [(tid, 0, [])])))),
            ("null-member", _top(w(SFETCH, 1, fetch(group, None, 0, [(tid, 0, [])])))),
            ("acks-open-session", _top(w(SFETCH, 1, fetch(group, "m1", 0, [(tid, 0, [(0, 0, [1])])])))),
            ("ack-no-session-v2", _top(w(SACK, 2, {**ack(group, "m1", 2, []), "is_renew_ack": False}))),
            ("ack-null-member-v2", _top(w(SACK, 2, {**ack(group, None, 2, []), "is_renew_ack": False}))),
        ]
        _joined(w, group, "m1", topic)
        r, epoch = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])]), 0)
        out.append(("acquires", _top(r), fetched(r)))
        out.append(("wrong-epoch", _top(w(SFETCH, 1, fetch(group, "m1", epoch + 3, [(tid, 0, [])])))))
        r = w(SACK, 2, {**ack(group, "m1", epoch, [(tid, 0, [(2, 3, [2])])]), "is_renew_ack": False})
        out.append(("releases-2-3-v2", _top(r), acked(r)))
        r = w(SACK, 2, {**ack(group, "m1", epoch + 5, []), "is_renew_ack": False})
        out.append(("ack-wrong-epoch-v2", _top(r)))
        r, epoch = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])]), 0, tries=20)
        out.append(("reopened-acquires-only-the-released", fetched(r)))
        out.append(("acknowledges-the-old-sessions-records",
                    acked(w(SACK, 1, ack(group, "m1", epoch, [(tid, 0, [(0, 1, [1]), (4, 9, [1])])])))))
    _check(out, KAFKA_LOCK_TIMEOUT, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_LOCK_TIMEOUT: list[Any] = [
    ('no-session', (122, None, 0)),
    ('null-member', (42, None, 0)),
    ('acks-open-session', (42, None, 0)),
    ('ack-no-session-v2', (122, None, 0)),
    ('ack-null-member-v2', (42, None, 0)),
    ('acquires', (0, None, LOCK_MS), (0, [(0, 0, 0, [(0, 9, 1)])])),
    ('wrong-epoch', (123, None, 0)),
    ('releases-2-3-v2', (0, None, LOCK_MS), (0, [(0, 0)])),
    ('ack-wrong-epoch-v2', (123, None, 0)),
    ('reopened-acquires-only-the-released', (0, [(0, 0, 0, [(2, 3, 2)])])),
    ('acknowledges-the-old-sessions-records', (0, [(0, 0)]))]


def test_share_offsets_of_the_empty_group_id_and_topics_named_twice(broker: _Server) -> None:
    """DescribeShareGroupOffsets of the empty group id answers no error (an unknown group's answer),
    DeleteShareGroupOffsets INVALID_GROUP_ID with Kafka's message; a topic named twice is answered once (Alter:
    with the partitions of both entries)."""
    topic, group, _ = _topic(broker)
    with Wire(broker) as w:
        out: list[Any] = []
        for v in (0, 1):
            r = w(DSGO, v, {"groups": [{"group_id": "", "topics": None}]})
            out.append((f"describe-empty-id-v{v}", [(g.group_id, g.error_code, g.error_message, g.topics)
                                                     for g in r.groups]))
        r = w(DELSGO, 0, {"group_id": "", "topics": [{"topic_name": topic}]})
        out.append(("delete-empty-id", r.error_code, r.error_message))
        r = w(ASGO, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 3}]},
            {"topic_name": topic, "partitions": [{"partition_index": 1, "start_offset": 0}]}]})
        out.append(("alter-named-twice", r.error_code, [(t.topic_name, [(p.partition_index, p.error_code)
                                                                         for p in t.partitions])
                                                        for t in r.responses]))
        r = w(DELSGO, 0, {"group_id": group, "topics": [{"topic_name": topic}, {"topic_name": topic}]})
        out.append(("delete-named-twice", r.error_code, [(t.topic_name, t.error_code, t.error_message)
                                                         for t in r.responses]))
    _check(out, KAFKA_OFFSETS_EDGES, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_OFFSETS_EDGES: list[Any] = [
    ('describe-empty-id-v0', [('', 0, None, [])]),
    ('describe-empty-id-v1', [('', 0, None, [])]),
    ('delete-empty-id', 24, 'The group id is invalid.'),
    ('alter-named-twice', 0, [('T', [(0, 0), (1, 0)])]),
    ('delete-named-twice', 0, [('T', 0, None)])]


def test_a_member_that_left_keeps_its_records_until_its_session_closes(broker: _Server) -> None:
    """A member leaving the group (heartbeat at epoch -1) keeps the records it acquired: another member gets none
    of them, the one that left still acknowledges them; its share session's close releases the rest."""
    topic, group, tid = _topic(broker, partitions=1)
    with Wire(broker) as w, Wire(broker) as w2:
        _joined(w, group, "m1", topic)
        _joined(w2, group, "m2", topic)
        r, e = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])]), 0)
        out: list[Any] = [("m1-acquires", fetched(r))]
        out.append(("m1-leaves", beat(w(SGHB, 1, hb(group, "m1", -1)))))
        r, e2 = _fetch_until(w2, lambda e: fetch(group, "m2", e, [(tid, 0, [])]), 0, tries=10)
        out.append(("m2-gets-none", fetched(r)))
        out.append(("m1-acknowledges", acked(w(SACK, 1, ack(group, "m1", e, [(tid, 0, [(0, 4, [1])])])))))
        out.append(("m1-closes", acked(w(SACK, 1, ack(group, "m1", -1, [])))))
        r, _ = _fetch_until(w2, lambda e: fetch(group, "m2", e, [(tid, 0, [])]), e2, tries=50)
        out.append(("m2-gets-the-rest", fetched(r)))
    _check(out, KAFKA_LEFT_MEMBER, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_LEFT_MEMBER: list[Any] = [
    ('m1-acquires', (0, [(0, 0, 0, [(0, 9, 1)])])),
    ('m1-leaves', (0, None)),
    ('m2-gets-none', (0, [])),
    ('m1-acknowledges', (0, [(0, 0)])),
    ('m1-closes', (0, [])),
    ('m2-gets-the-rest', (0, [(0, 0, 0, [(5, 9, 2)])]))]


def test_heartbeat_refuses_a_member_id_longer_than_a_uuid_first(broker: _Server) -> None:
    """ShareGroupHeartbeat's member id is the client's UUID string: one longer than 36 characters (UTF-16 code
    units, as Java counts them) is INVALID_REQUEST with no message, before the group id, epoch or subscription are
    looked at."""
    topic, group, _ = _topic(broker, partitions=1)
    long_id = "m" * 37
    with Wire(broker) as w:
        out: list[Any] = [
            ("36", beat(w(SGHB, 1, hb(group, "m" * 36, 0, [topic])))),
            ("37", beat(w(SGHB, 1, hb(group, long_id, 0, [topic])))),
            ("36-and-a-non-ascii", beat(w(SGHB, 1, hb(group, "m" * 35 + "\N{GRINNING FACE}", 0, [topic])))),
            ("37-empty-group", beat(w(SGHB, 1, hb("", long_id, 0, [topic])))),
            ("37-no-subscription", beat(w(SGHB, 1, hb(group, long_id, 0, None)))),
            ("37-leaves", beat(w(SGHB, 1, hb(group, long_id, -1)))),
            ("37-unknown-group", beat(w(SGHB, 1, hb(f"{group}-unknown", long_id, 5)))),
        ]
    _check(out, KAFKA_LONG_MEMBER_ID, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_LONG_MEMBER_ID: list[Any] = [
    ('36', (0, None)),
    ('37', (42, None)),
    ('36-and-a-non-ascii', (42, None)),
    ('37-empty-group', (42, None)),
    ('37-no-subscription', (42, None)),
    ('37-leaves', (42, None)),
    ('37-unknown-group', (42, None))]


def test_a_closed_connection_closes_the_share_session_it_opened(broker: _Server) -> None:
    """The connection that opened a member's share session closing (no ShareFetch at epoch -1: a crashed client)
    closes the session: the records the member held go to another member at once, and the member's next
    requests on a new connection find no session."""
    topic, group, tid = _topic(broker, partitions=1)
    with Wire(broker) as w2:
        with Wire(broker) as w:
            _joined(w, group, "m1", topic)
            _joined(w2, group, "m2", topic)
            r, e = _fetch_until(w, lambda e: fetch(group, "m1", e, [(tid, 0, [])]), 0)
            out: list[Any] = [("m1-acquires", fetched(r))]
        r, _ = _fetch_until(w2, lambda e: fetch(group, "m2", e, [(tid, 0, [])]), 0, tries=50)
        out.append(("m2-gets-them", fetched(r)))
        with Wire(broker) as w3:
            out.append(("m1-acknowledges-on-a-new-connection",
                        acked(w3(SACK, 1, ack(group, "m1", e, [(tid, 0, [(0, 0, [1])])])))))
            out.append(("m1-fetches-on-a-new-connection", fetched(w3(SFETCH, 1, fetch(group, "m1", e, [(tid, 0, [])])))))
    _check(out, KAFKA_CLOSED_CONNECTION, G=group, T=topic)


#: Apache Kafka 4.3.1's answers
KAFKA_CLOSED_CONNECTION: list[Any] = [
    ('m1-acquires', (0, [(0, 0, 0, [(0, 9, 1)])])),
    ('m2-gets-them', (0, [(0, 0, 0, [(0, 9, 2)])])),
    ('m1-acknowledges-on-a-new-connection', (122, [])),
    ('m1-fetches-on-a-new-connection', (122, []))]
