"""Streams groups (KIP-1071: StreamsGroupHeartbeat 88, StreamsGroupDescribe 89) on klog and on Apache Kafka 4.3.1
from the same properties: the same scenario runs on both and checks Kafka's behaviour.

- on the wire: a member joins with a word-count topology whose source topic is missing (MISSING_SOURCE_TOPICS, no
  tasks), the topic appears, the coordinator creates the repartition and changelog topics (MISSING_INTERNAL_TOPICS
  until they exist) with the partitions the topology implies, then assigns every task; a second member takes half
  of the tasks only after the first revoked them; StreamsGroupDescribe, ListGroups, DescribeGroups and
  OffsetCommit/OffsetFetch see the streams group; the members leave and the empty group is deleted.
- a real Kafka Streams application (tests/java/StreamsGroupApp.java, kafka-streams from Maven Central) with
  ``group.protocol=streams``: a word count on two instances (a rebalance moves tasks to the second one, each learns
  the other's endpoint for Interactive Queries), its output counts checked exactly, and Kafka's
  ``kafka-streams-groups.sh --describe`` (StreamsGroupCommand) showing the group.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from klog.protocol.errors import ErrorCode
from klog.testing.kafka import find_kafka_libs, one_broker
from klog.testing.kafka_tools import run_kafka_tool
from klog.testing.wire import WireClient

pytestmark = pytest.mark.java

REPO = Path(__file__).resolve().parent.parent
#: short timeouts so a rebalance round is quick (the min bounds lowered with them, as Kafka requires)
PROPS = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "group.streams.initial.rebalance.delay.ms": 0,
         "group.streams.heartbeat.interval.ms": 500, "group.streams.min.heartbeat.interval.ms": 500,
         "group.streams.session.timeout.ms": 10000, "group.streams.min.session.timeout.ms": 6000}
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
#: how long one step (a join, a rebalance, an internal topic's creation) may take
STEP_S = 60.0
PARTITIONS = 4
STATUS_MISSING_SOURCE_TOPICS, STATUS_MISSING_INTERNAL_TOPICS, STATUS_ASSIGNMENT_DELAYED = 1, 3, 5


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"streams-{request.param}")
    with one_broker(request.param, root, PROPS) as bootstrap:
        yield bootstrap


def _wire(bootstrap: str) -> WireClient:
    host, port = bootstrap.split(",")[0].split(":")
    return WireClient(host, int(port), client_id="streams-wire")


def _create_topics(bootstrap: str, *names: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).items():
        future.result(30)


def _partition_counts(bootstrap: str) -> dict[str, int]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    return {name: len(t.partitions) for name, t in topics.items()}


def _topic_info(name: str, partitions: int = 0, configs: dict[str, str] | None = None) -> dict:
    return {"name": name, "partitions": partitions, "replication_factor": 0,
            "topic_configs": [{"key": k, "value": v} for k, v in (configs or {}).items()]}


def _topology(app: str, source: str, sink: str) -> dict:
    """Kafka Streams' word count: subtopology 0 reads the source and writes the repartition topic, subtopology 1
    reads it, counts into a store (its changelog) and writes the sink."""
    repartition = f"{app}-words-repartition"
    changelog = f"{app}-counts-changelog"
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [repartition], "repartition_source_topics": [], "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [_topic_info(changelog, 0, {"cleanup.policy": "compact"})],
         "repartition_sink_topics": [], "repartition_source_topics": [_topic_info(repartition)],
         "copartition_groups": []},
    ]}


def _join(group: str, member: str, topology: dict, process: str, *, endpoint: bool = True) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": 0, "endpoint_information_epoch": -1,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000, "topology": topology,
            "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": process,
            "user_endpoint": {"host": "localhost", "port": 9000 + int(process[-1])} if endpoint else None,
            "client_tags": [],
            "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}


def _beat(group: str, member: str, epoch: int, active: dict[str, list[int]] | None = None,
          endpoint_epoch: int = -1, endpoint: tuple[str, int] | None = None) -> dict:
    tasks = None if active is None else [{"subtopology_id": s, "partitions": ps} for s, ps in sorted(active.items())]
    return {"group_id": group, "member_id": member, "member_epoch": epoch,
            "endpoint_information_epoch": endpoint_epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": -1, "topology": None, "active_tasks": tasks,
            "standby_tasks": None if active is None else [], "warmup_tasks": None if active is None else [],
            "process_id": None, "client_tags": None, "task_offsets": None,
            "user_endpoint": None if endpoint is None else {"host": endpoint[0], "port": endpoint[1]},
            "task_end_offsets": None, "shutdown_application": False}


def _tasks(items) -> dict[str, list[int]]:
    return {t.subtopology_id: sorted(t.partitions) for t in items or [] if t.partitions}


def _coordinator_ready(wire: WireClient, group: str) -> None:
    """FindCoordinator until the group's coordinator answers (Kafka creates __consumer_offsets on the first ask)."""
    deadline = time.monotonic() + STEP_S
    while True:
        found = wire.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        if found.error_code == ErrorCode.NONE:
            probe = wire.request(89, 0, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
            if probe.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                return
        assert time.monotonic() < deadline, f"no coordinator for {group}: {found}"
        time.sleep(0.2)


def _beat_until(wire: WireClient, make, done, what: str):
    """Heartbeats (``make()`` the request) until ``done(response)``; the last response."""
    deadline = time.monotonic() + STEP_S
    while True:
        response = wire.request(88, 0, make())
        assert response.error_code == ErrorCode.NONE, (response.error_code, response.error_message)
        if done(response):
            return response
        assert time.monotonic() < deadline, f"{what}: last answer {response}"
        time.sleep(0.2)


def test_streams_group_heartbeat_and_describe_on_the_wire(server):
    app = f"wc-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app}-in", f"{app}-out"
    topology = _topology(app, source, sink)
    with _wire(server) as wire:
        advertised = {a.api_key: (a.min_version, a.max_version) for a in wire.request(
            18, 3, {"client_software_name": "wire", "client_software_version": "1"}).api_keys}
        assert advertised[88] == (0, 0) and advertised[89] == (0, 0)
        _coordinator_ready(wire, app)
        # a topology whose source topic is missing: the member joins, gets no task, and is told why (without an
        # endpoint: Kafka 4.3.1 fails the heartbeat of a member with one while the topology is not configured)
        first = wire.request(88, 0, _join(app, "m-a", topology, "p1", endpoint=False))
        assert first.error_code == ErrorCode.NONE, first.error_message
        assert first.member_id == "m-a" and first.member_epoch >= 1
        assert [s.status_code for s in first.status] == [STATUS_MISSING_SOURCE_TOPICS]
        assert source in first.status[0].status_detail
        assert _tasks(first.active_tasks) == {}
        epoch = first.member_epoch
        _create_topics(server, source, sink)
        # the coordinator creates the internal topics, then assigns every task of both subtopologies
        statuses: set[int] = set()

        def assigned(r) -> bool:
            nonlocal epoch
            epoch = r.member_epoch
            statuses.update(s.status_code for s in r.status or [])
            return r.active_tasks is not None and _tasks(r.active_tasks) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}

        got = _beat_until(wire, lambda: _beat(app, "m-a", epoch), assigned, "all tasks to the only member")
        assert not got.status, got.status
        counts = _partition_counts(server)
        assert counts[f"{app}-words-repartition"] == PARTITIONS and counts[f"{app}-counts-changelog"] == PARTITIONS
        a_epoch = got.member_epoch
        a_tasks = _tasks(got.active_tasks)
        # endpoints for Interactive Queries: the member's own, with the input partitions of its active tasks
        got = wire.request(88, 0, _beat(app, "m-a", a_epoch, endpoint=("localhost", 9001)))
        assert got.error_code == ErrorCode.NONE, got.error_message
        endpoints = {(e.user_endpoint.host, e.user_endpoint.port): sorted(
            (p.topic, tuple(p.partitions)) for p in e.active_partitions) for e in got.partitions_by_user_endpoint}
        assert endpoints == {("localhost", 9001): sorted([(source, (0, 1, 2, 3)),
                                                          (f"{app}-words-repartition", (0, 1, 2, 3))])}

        with _wire(server) as wire_b:
            joined = wire_b.request(88, 0, _join(app, "m-b", topology, "p2"))
            assert joined.error_code == ErrorCode.NONE, joined.error_message
            b_epoch = joined.member_epoch
            # the second member gets nothing another member still owns: the first revokes half of its tasks first
            revoke = _beat_until(wire, lambda: _beat(app, "m-a", a_epoch, a_tasks),
                                 lambda r: r.active_tasks is not None and _tasks(r.active_tasks) != a_tasks,
                                 "the first member told to revoke")
            kept = _tasks(revoke.active_tasks)
            assert sum(map(len, kept.values())) == 4, kept
            b_view = wire_b.request(88, 0, _beat(app, "m-b", b_epoch))
            assert _tasks(b_view.active_tasks) == {}, "tasks not yet released were handed out"
            a_done = _beat_until(wire, lambda: _beat(app, "m-a", revoke.member_epoch, kept),
                                 lambda r: r.member_epoch > a_epoch, "the first member's revocation completed")
            got_b = _beat_until(wire_b, lambda: _beat(app, "m-b", b_epoch, {}),
                                lambda r: r.active_tasks is not None and sum(map(len, _tasks(r.active_tasks).values()))
                                == 4, "the second member's tasks")
            mine = _tasks(got_b.active_tasks)
            union = {s: sorted(set(kept.get(s, [])) | set(mine.get(s, []))) for s in ("0", "1")}
            assert union == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}
            assert all(not set(kept.get(s, [])) & set(mine.get(s, [])) for s in ("0", "1"))
            a_epoch = a_done.member_epoch
            b_epoch = got_b.member_epoch

            # StreamsGroupDescribe: the topology with its partitions, both members and their tasks
            described = _beat_until(wire, lambda: _beat(app, "m-a", a_epoch), lambda r: True, "a heartbeat")
            group = wire.request(89, 0, {"group_ids": [app, "nope"], "include_authorized_operations": False}).groups
            assert group[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
            g = group[0]
            assert g.error_code == ErrorCode.NONE and g.group_state == "Stable", (g.group_state, described)
            assert g.topology.epoch == 0
            subs = {s.subtopology_id: s for s in g.topology.subtopologies}
            assert subs["0"].source_topics == [source]
            assert subs["0"].repartition_sink_topics == [f"{app}-words-repartition"]
            assert [(t.name, t.partitions) for t in subs["1"].repartition_source_topics] == \
                [(f"{app}-words-repartition", PARTITIONS)]
            assert [(t.name, t.partitions) for t in subs["1"].state_changelog_topics] == \
                [(f"{app}-counts-changelog", PARTITIONS)]
            members = {m.member_id: m for m in g.members}
            assert set(members) == {"m-a", "m-b"}
            assert members["m-b"].process_id == "p2" and members["m-b"].user_endpoint.port == 9002
            assert _tasks(members["m-b"].assignment.active_tasks) == mine
            assert _tasks(members["m-b"].target_assignment.active_tasks) == mine
            assert members["m-a"].is_classic is False

            # the other group APIs know the streams group
            listed = wire.request(16, 5, {"states_filter": [], "types_filter": ["streams"]}).groups
            assert [(x.group_id, x.group_type, x.protocol_type) for x in listed if x.group_id == app] == \
                [(app, "streams", "streams")]
            classic_view = wire.request(15, 6, {"groups": [app], "include_authorized_operations": False}).groups[0]
            assert classic_view.error_code == ErrorCode.GROUP_ID_NOT_FOUND
            consumer_view = wire.request(69, 1, {"group_ids": [app], "include_authorized_operations": False})
            assert consumer_view.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
            commit = wire.request(8, 9, {"group_id": app, "generation_id_or_member_epoch": a_epoch,
                                         "member_id": "m-a", "group_instance_id": None, "topics": [
                                             {"name": source, "partitions": [{"partition_index": 0,
                                                                              "committed_offset": 7,
                                                                              "committed_leader_epoch": -1,
                                                                              "committed_metadata": ""}]}]})
            assert commit.topics[0].partitions[0].error_code == ErrorCode.NONE
            stale = wire.request(8, 9, {"group_id": app, "generation_id_or_member_epoch": a_epoch + 5,
                                        "member_id": "m-a", "group_instance_id": None, "topics": [
                                            {"name": source, "partitions": [{"partition_index": 0,
                                                                             "committed_offset": 8,
                                                                             "committed_leader_epoch": -1,
                                                                             "committed_metadata": ""}]}]})
            assert stale.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
            fetched = wire.request(9, 9, {"groups": [{"group_id": app, "member_id": "m-a", "member_epoch": a_epoch,
                                                      "topics": [{"name": source, "partition_indexes": [0]}]}],
                                          "require_stable": False}).groups[0]
            assert fetched.error_code == ErrorCode.NONE and fetched.topics[0].partitions[0].committed_offset == 7
            busy = wire.request(42, 2, {"groups_names": [app]}).results[0]
            assert busy.error_code == ErrorCode.NON_EMPTY_GROUP

            # unknown members and bad epochs are refused with Kafka's errors
            assert wire.request(88, 0, _beat(app, "m-x", 3)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
            assert wire.request(88, 0, _beat(app, "m-a", a_epoch + 10)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
            other = dict(_join(app, "m-c", topology, "p3"))
            other["topology"] = _topology(app, source, f"{app}-elsewhere")
            other["topology"]["subtopologies"][1]["state_changelog_topics"][0]["topic_configs"] = []
            assert wire.request(88, 0, other).error_code == ErrorCode.INVALID_REQUEST
            assert wire.request(88, 0, {**_join(app, "", topology, "p3")}).error_code == ErrorCode.INVALID_REQUEST

            for member, conn, ep in (("m-a", wire, a_epoch), ("m-b", wire_b, b_epoch)):
                left = conn.request(88, 0, {**_beat(app, member, -1)})
                assert left.error_code == ErrorCode.NONE and left.member_epoch == -1
        g = wire.request(89, 0, {"group_ids": [app], "include_authorized_operations": False}).groups[0]
        assert g.group_state == "Empty" and g.members == []
        assert wire.request(42, 2, {"groups_names": [app]}).results[0].error_code == ErrorCode.NONE
        gone = wire.request(89, 0, {"group_ids": [app], "include_authorized_operations": False}).groups[0]
        assert gone.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_new_groups_first_assignment_waits_the_initial_rebalance_delay(server):
    """streams.initial.rebalance.delay.ms (a group config here; group.streams.initial.rebalance.delay.ms on the
    broker): the first member joins at an epoch without tasks, told ASSIGNMENT_DELAYED (and which internal topics
    are being created), and gets every task at a new epoch once the delay is over."""
    app = f"delay-{uuid.uuid4().hex[:6]}"
    _create_topics(server, f"{app}-in", f"{app}-out")
    with _wire(server) as wire:
        altered = wire.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": app, "configs": [
            {"name": "streams.initial.rebalance.delay.ms", "config_operation": 0, "value": "3000"}]}],
            "validate_only": False}).responses[0]
        assert altered.error_code == ErrorCode.NONE, altered.error_message
        _coordinator_ready(wire, app)
        time.sleep(1)   # the brokers apply the group config from the metadata log
        started = time.monotonic()
        first = wire.request(88, 0, _join(app, "m", _topology(app, f"{app}-in", f"{app}-out"), "p1", endpoint=False))
        assert first.error_code == ErrorCode.NONE, first.error_message
        assert [s.status_code for s in first.status] == [STATUS_ASSIGNMENT_DELAYED, STATUS_MISSING_INTERNAL_TOPICS]
        assert first.status[0].status_detail == "Assignment delayed due to the configured initial rebalance delay."
        missing = first.status[1].status_detail.removeprefix("Internal topics are missing: ")
        assert set(missing.split(", ")) == {f"{app}-words-repartition", f"{app}-counts-changelog"}, first.status
        assert _tasks(first.active_tasks) == {} and first.member_epoch > 0
        epoch = first.member_epoch
        seen: list[tuple[float, list[int]]] = []

        def assigned(r) -> bool:
            nonlocal epoch
            epoch = r.member_epoch
            seen.append((time.monotonic() - started, [s.status_code for s in r.status or []]))
            return r.active_tasks is not None and _tasks(r.active_tasks) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}

        got = _beat_until(wire, lambda: _beat(app, "m", epoch), assigned, "the tasks after the delay")
        assert time.monotonic() - started >= 2.5 and got.member_epoch > first.member_epoch and not got.status
        assert all(codes == [STATUS_ASSIGNMENT_DELAYED] for _, codes in seen[:-1] if _ > 0.5 and _ < 2.5), seen
        wire.request(88, 0, _beat(app, "m", -1))


def test_assignments_wait_the_assignment_interval_and_share_every_subtopology(server):
    """streams.assignment.interval.ms (a group config): an epoch bump within the interval of the last assignment
    waits (ASSIGNMENT_DELAYED, the group Assigning); the assignment then made for two new members gives each a share
    of both subtopologies (Kafka's sticky assignor: partitions 0 and 2 to the first, 1 and 3 to the second)."""
    app = f"ival-{uuid.uuid4().hex[:6]}"
    _create_topics(server, f"{app}-in", f"{app}-out")
    topology = _topology(app, f"{app}-in", f"{app}-out")
    with _wire(server) as wire, _wire(server) as wire_b:
        altered = wire.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": app, "configs": [
            {"name": "streams.assignment.interval.ms", "config_operation": 0, "value": "3000"}]}],
            "validate_only": False}).responses[0]
        assert altered.error_code == ErrorCode.NONE, altered.error_message
        _coordinator_ready(wire, app)
        time.sleep(1)   # the brokers apply the group config from the metadata log
        first = wire.request(88, 0, _join(app, "a", topology, "p1", endpoint=False))
        assert first.error_code == ErrorCode.NONE and _tasks(first.active_tasks) == {}, first
        epoch = first.member_epoch
        # the internal topics appear: a new epoch, whose assignment waits for the interval
        waiting = _beat_until(wire, lambda: _beat(app, "a", epoch, {}),
                              lambda r: [s.status_code for s in r.status] == [STATUS_ASSIGNMENT_DELAYED],
                              "the assignment interval")
        assert waiting.status[0].status_detail == "Assignment delayed due to the configured assignment interval."
        group = wire.request(89, 0, {"group_ids": [app], "include_authorized_operations": False}).groups[0]
        assert group.group_state == "Assigning" and group.group_epoch > group.assignment_epoch, group
        joined = wire_b.request(88, 0, _join(app, "b", topology, "p2", endpoint=False))
        assert joined.error_code == ErrorCode.NONE, joined.error_message
        got = _beat_until(wire, lambda: _beat(app, "a", epoch, {}),
                          lambda r: r.active_tasks is not None and _tasks(r.active_tasks) != {}, "a's tasks")
        assert _tasks(got.active_tasks) == {"0": [0, 2], "1": [0, 2]}
        b_got = _beat_until(wire_b, lambda: _beat(app, "b", joined.member_epoch, {}),
                            lambda r: r.active_tasks is not None and _tasks(r.active_tasks) != {}, "b's tasks")
        assert _tasks(b_got.active_tasks) == {"0": [1, 3], "1": [1, 3]}
        wire.request(88, 0, _beat(app, "a", -1))
        wire_b.request(88, 0, _beat(app, "b", -1))


def _set_streams_version(wire: WireClient, level: int) -> None:
    answer = wire.request(57, 1, {"timeout_ms": 10000, "validate_only": False, "feature_updates": [
        {"feature": "streams.version", "max_version_level": level, "upgrade_type": 1 if level else 2}]})
    assert (answer.error_code, [r.error_code for r in answer.results]) == (ErrorCode.NONE, [ErrorCode.NONE]), answer


def test_streams_version_gates_the_streams_protocol(server):
    """A new cluster finalizes streams.version 1 (Kafka 4.3's default); at 0 StreamsGroupHeartbeat answers
    UNSUPPORTED_VERSION, and the protocol is usable again once it is back at 1."""
    app = f"gate-{uuid.uuid4().hex[:6]}"
    topology = _topology(app, f"{app}-in", f"{app}-out")
    with _wire(server) as wire:
        finalized = {f.name: f.max_version_level for f in wire.request(
            18, 3, {"client_software_name": "wire", "client_software_version": "1"}).finalized_features}
        assert finalized.get("streams.version") == 1
        _coordinator_ready(wire, app)
        _set_streams_version(wire, 0)
        try:
            deadline = time.monotonic() + STEP_S   # the broker applies the controller's record after the answer
            while (answer := wire.request(88, 0, _join(app, "m", topology, "p1", endpoint=False))).error_code \
                    != ErrorCode.UNSUPPORTED_VERSION:
                assert time.monotonic() < deadline, answer
                if answer.error_code == ErrorCode.NONE:   # joined before the level moved: leave again
                    wire.request(88, 0, _beat(app, "m", -1))
                time.sleep(0.2)
        finally:
            _set_streams_version(wire, 1)
        deadline = time.monotonic() + STEP_S
        while (answer := wire.request(88, 0, _join(app, "m2", topology, "p1", endpoint=False))).error_code \
                == ErrorCode.UNSUPPORTED_VERSION:
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
        assert answer.error_code == ErrorCode.NONE and answer.member_epoch > 0, answer
        assert wire.request(88, 0, _beat(app, "m2", -1)).error_code == ErrorCode.NONE


# ---- a real Kafka Streams application --------------------------------------------------------------------------


def _streams_classpath(root: Path) -> str:
    """Kafka's jars (kafka-streams with them, fetched by tools/install-peers.sh) and StreamsGroupApp compiled."""
    libs = find_kafka_libs()
    assert any(libs.glob("kafka-streams-*.jar")), f"no kafka-streams jar in {libs}: run tools/install-peers.sh"
    classes = root / "classes"
    classes.mkdir(exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{libs}/*",
                    str(REPO / "tests" / "java" / "StreamsGroupApp.java")], check=True, capture_output=True,
                   timeout=180)
    return f"{classes}:{libs}/*"


class App:
    """One StreamsGroupApp process and the lines it printed."""

    def __init__(self, classpath: str, bootstrap: str, app: str, source: str, sink: str, state: Path,
                 port: int) -> None:
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", classpath, "StreamsGroupApp", bootstrap, app, source, sink, str(state),
             f"localhost:{port}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_for(self, pattern: str, after: int = 0, timeout: float = STEP_S) -> tuple[int, str]:
        """The first printed line from index ``after`` matching ``pattern``: (its index, the line)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(after, len(self.lines)):
                    if regex.search(self.lines[i]):
                        return i, self.lines[i]
                errors = [x for x in self.lines if x.startswith("ERROR")]
                assert not errors, errors
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, f"no line like {pattern!r}; printed {self.lines}"
                self.cond.wait(min(left, 1.0))

    def stop(self) -> int:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return -9


def _streams_groups_tool(bootstrap: str, *args: str) -> str:
    result = run_kafka_tool(STREAMS_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args, libs=find_kafka_libs(),
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result.stdout


def _klog_cli(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "klog.cli", *args], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, line in enumerate(lines):
        producer.produce(topic, key=str(i), value=line)
    assert producer.flush(30) == 0


def _final_counts(bootstrap: str, topic: str, expected: dict[str, int]) -> dict[str, int]:
    """The last count of each word in the output topic, read until it shows ``expected`` (or the step's time)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    last: dict[str, int] = {}
    deadline = time.monotonic() + STEP_S
    try:
        while time.monotonic() < deadline and last != expected:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    last[msg.key().decode()] = int.from_bytes(msg.value(), "big", signed=True)
    finally:
        consumer.close()
    return last


@pytest.mark.long
def test_kafka_streams_word_count_with_the_streams_protocol(server, tmp_path):
    classpath = _streams_classpath(tmp_path)
    app = f"wordcount-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app}-lines", f"{app}-counts"
    _create_topics(server, source, sink)
    with _wire(server) as wire:   # one standby replica of each stateful task (a group config)
        altered = wire.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": app, "configs": [
            {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "1"}]}],
            "validate_only": False}).responses[0]
        assert altered.error_code == ErrorCode.NONE, altered.error_message
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    batch1 = [" ".join(words[(i + j) % len(words)] for j in range(i % 4 + 1)) for i in range(120)]
    batch2 = [" ".join(words[(i * 5 + j) % len(words)] for j in range(i % 3 + 1)) for i in range(120)]
    expected = collections.Counter(w for line in batch1 + batch2 for w in line.split())
    _produce_lines(server, source, batch1)
    first = App(classpath, server, app, source, sink, tmp_path / "state-a", 7001)
    second = None
    try:
        first.wait_for(r"^STATE RUNNING")
        _, tasks = first.wait_for(r"^TASKS .+")
        assert set(tasks.split()[1].split(",")) == {f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)}
        second = App(classpath, server, app, source, sink, tmp_path / "state-b", 7002)
        # the rebalance: the second instance runs with tasks of its own, the first gave them up
        _, mine = second.wait_for(r"^TASKS .+")
        second.wait_for(r"^HOSTS .*localhost:7001=\[.+localhost:7002=\[.+\]")
        first.wait_for(r"^HOSTS .*localhost:7002=")
        assert len(mine.split()[1].split(",")) == PARTITIONS, mine
        _produce_lines(server, source, batch2)
        got = _final_counts(server, sink, dict(expected))
        assert got == dict(expected)
        # Kafka's kafka-streams-groups.sh: the group, its members and their tasks (each a share of both
        # subtopologies, as Kafka's sticky assignor gives), the committed offsets of its input topics
        state = _streams_groups_tool(server, "--describe", "--group", app, "--state")
        assert re.search(rf"^{app}\s+\S+ \(\d+\)\s+Stable\s+2$", state, re.M), state
        members = _streams_groups_tool(server, "--describe", "--group", app, "--members")
        # and a standby copy of the other's stateful tasks (subtopology 1, the count), none of the stateless ones
        shares = re.findall(rf"^{app} .* ACTIVE: 0:\[(\d),(\d)\]; 1:\[(\d),(\d)\]; STANDBY: 1:\[(\d),(\d)\]; $",
                            members, re.M)
        assert len(shares) == 2 and all(a == c and b == d for a, b, c, d, _, _ in shares), members
        assert sorted(int(p) for share in shares for p in share[:2]) == list(range(PARTITIONS)), members
        assert shares[0][4:] == shares[1][:2] and shares[1][4:] == shares[0][:2], members
        offsets = _streams_groups_tool(server, "--describe", "--group", app, "--offsets")
        rows = {(cols[1], int(cols[2])) for cols in map(str.split, offsets.splitlines()) if cols[0] == app}
        assert rows == {(t, p) for t in (source, f"{app}-words-repartition") for p in range(PARTITIONS)}, offsets
        # klog's own CLI (a client) describes the streams group too: members with the partitions their tasks read
        described = json.loads(_klog_cli("groups", "describe", app, "--members", "-f", "json",
                                         "--bootstrap-server", server))
        assert described["state"] == "Stable" and described["protocol_type"] == "streams", described
        owned = sorted(tuple(tp) for m in described["members"] for tp in m["assignment"])
        assert owned == sorted((t, p) for t in (source, f"{app}-words-repartition") for p in range(PARTITIONS))
    finally:
        codes = [a.stop() for a in (second, first) if a is not None]
    assert codes == [0] * len(codes), (codes, first.lines, second.lines if second else None)
    # the application is gone (its members left): kafka-streams-groups resets its offsets and deletes the group
    reset = _streams_groups_tool(server, "--reset-offsets", "--group", app, "--all-input-topics", "--to-earliest",
                                 "--execute")
    rows = sorted((cols[1], int(cols[2]), int(cols[3])) for cols in map(str.split, reset.splitlines())
                  if cols and cols[0] == app)
    assert rows == [(source, p, 0) for p in range(PARTITIONS)], reset
    deleted = _streams_groups_tool(server, "--delete", "--group", app)
    assert f"Deletion of requested streams groups ('{app}') was successful." in deleted, deleted
    assert app not in _streams_groups_tool(server, "--list").split()


@pytest.mark.long
@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_kafka_streams_word_count_on_a_three_node_cluster(kind, tmp_path):
    """The same application on three brokers: the group's coordinator is the leader of its __consumer_offsets
    partition (the others answer NOT_COORDINATOR), the internal topics are created through the active controller."""
    from klog.testing.cluster import KlogCluster
    from klog.testing.kafka import KafkaCluster

    props = {**PROPS, "offsets.topic.replication.factor": 3, "default.replication.factor": 3}
    cluster_type = KlogCluster if kind == "klog" else KafkaCluster
    with cluster_type(tmp_path / "cluster", 3, properties=props) as cluster:
        cluster.wait_for_brokers()
        test_kafka_streams_word_count_with_the_streams_protocol(cluster.bootstrap_servers, tmp_path)
