"""Apache Kafka 4.3.1's command-line tools run against klog as against Apache Kafka 4.3.1, each checked by what it
prints: kafka-broker-api-versions (BrokerApiVersionsCommand), kafka-groups (GroupsCommand), kafka-get-offsets
(GetOffsetShell), VerifiableProducer with VerifiableConsumer (both group protocols), EndToEndLatency,
ConsumerPerformance, and ReplicaVerificationTool on 3-node clusters. One broker of each kind for the module, started
from the same properties; every tool runs with a timeout, and the long-running ones are stopped by the test."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING, cluster_of
from klog.testing.kafka_tools import (CONSUMER_PERFORMANCE, TOPIC_COMMAND, VERIFIABLE_PRODUCER, kafka_tool_command,
                                      run_kafka_tool)
from klog.testing.process import stop_process
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

BROKER_API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"
GROUPS_COMMAND = "org.apache.kafka.tools.GroupsCommand"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
END_TO_END_LATENCY = "org.apache.kafka.tools.EndToEndLatency"
REPLICA_VERIFICATION = "org.apache.kafka.tools.ReplicaVerificationTool"
#: the longest one tool run may take
TOOL_TIMEOUT_S = 90.0
#: the module's brokers' properties beside the defaults (conftest's klog_and_kafka_bootstrap)
BROKER_PROPERTIES = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "auto.create.topics.enable": "false",
                     "group.initial.rebalance.delay.ms": 0, "group.streams.initial.rebalance.delay.ms": 0}


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    return klog_and_kafka_bootstrap


def tool(main_class: str, *args: str, timeout: float = TOOL_TIMEOUT_S) -> str:
    """What the tool printed on stdout; it must exit 0."""
    done = run_kafka_tool(main_class, *args, timeout=timeout)
    assert done.returncode == 0, (main_class, args, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


class Wire(WireClient):
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id="kafka-tools")

    def __enter__(self) -> Wire:
        return self

    def create_topic(self, partitions: int) -> str:
        name = f"tools-{uuid.uuid4().hex[:8]}"
        created = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 30000, "validate_only": False}).topics[0]
        assert created.error_code == ErrorCode.NONE, created
        return name

    def produce(self, topic: str, partition: int, records: list[dict[str, Any]]) -> None:
        """``records`` as one batch into ``partition``, once its leader takes them."""
        for _ in range(200):
            answer = self.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                                      "topic_data": [{"name": topic, "partition_data": [
                                                          {"index": partition, "records": encode_batch(records)}]}]})
            code = answer.responses[0].partition_responses[0].error_code
            if code == ErrorCode.NONE:
                return
            assert code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ErrorCode.LEADER_NOT_AVAILABLE), code
            time.sleep(0.05)
        raise AssertionError(f"{topic}-{partition} has no leader")

    def coordinator_ready(self, group: str) -> None:
        """FindCoordinator until the group's coordinator answers (Kafka creates __consumer_offsets on the first
        ask)."""
        deadline = time.monotonic() + 60
        while self.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}
                           ).coordinators[0].error_code != ErrorCode.NONE:
            assert time.monotonic() < deadline, f"no coordinator for {group}"
            time.sleep(0.2)


def _listed_ranges(output: str) -> dict[int, tuple[int, int] | None]:
    """kafka-broker-api-versions' lines ``Name(key): min to max [usable: n]`` / ``Name(key): v [usable: v]`` /
    ``Name(key): UNSUPPORTED``: key -> (min, max), None where unsupported."""
    listed: dict[int, tuple[int, int] | None] = {}
    for key, text in re.findall(r"^\s+\w+\((\d+)\): (.*?),?$", output, re.MULTILINE):
        if text.startswith("UNSUPPORTED"):
            listed[int(key)] = None
            continue
        found = re.match(r"(\d+)(?: to (\d+))? \[usable: \d+\]", text)
        assert found, text
        listed[int(key)] = (int(found[1]), int(found[2] or found[1]))
    return listed


def test_broker_api_versions_lists_every_api_the_broker_advertises_with_its_range(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in wire.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "tools", "client_software_version": "1"}).api_keys}
    output = tool(BROKER_API_VERSIONS, "--bootstrap-server", bootstrap)
    assert re.match(r"^127\.0\.0\.1:\d+ \(id: 1 rack: null isFenced: false\) -> \($", output.splitlines()[0]), output
    listed = _listed_ranges(output)
    assert {key: span for key, span in listed.items() if span is not None} == advertised
    # the APIs the broker listener serves, whatever else it answers (Kafka's broker forwards some to the controller)
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
                ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_HEARTBEAT,
                ApiKey.DESCRIBE_QUORUM):
        assert listed[key] is not None, key


def _groups_listed(bootstrap: str, *options: str, prefix: str) -> set[tuple[str, ...]]:
    """kafka-groups --list rows (group, type[, protocol]) of the groups named ``prefix``..."""
    lines = tool(GROUPS_COMMAND, "--bootstrap-server", bootstrap, "--list", *options).splitlines()
    assert lines[0].split() == ["GROUP", "TYPE", "PROTOCOL"], lines
    return {tuple(line.split()) for line in lines[1:] if line.startswith(prefix)}


def test_kafka_groups_lists_each_group_with_its_type_and_protocol(bootstrap: str) -> None:
    """A classic consumer group, a classic group of another protocol (Connect's), a simple group (offsets only,
    no protocol), a KIP-848 consumer group, a share group and a streams group, each filtered as Kafka's
    GroupsCommand filters them (``--consumer``: consumer groups and classic ones of protocol consumer or none)."""
    p = f"g{uuid.uuid4().hex[:6]}-"
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(1)
        for suffix, protocol_type in (("classic", "consumer"), ("connect", "connect")):
            group = p + suffix
            wire.coordinator_ready(group)
            join: dict[str, Any] = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                                    "member_id": "", "group_instance_id": None, "protocol_type": protocol_type,
                                    "protocols": [{"name": "range", "metadata": b""}], "reason": None}
            first = wire.request(ApiKey.JOIN_GROUP, 9, join)
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
            joined = wire.request(ApiKey.JOIN_GROUP, 9, {**join, "member_id": first.member_id})
            assert joined.error_code == ErrorCode.NONE, joined
        wire.coordinator_ready(p + "simple")
        committed = wire.request(ApiKey.OFFSET_COMMIT, 9, {
            "group_id": p + "simple", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE, committed
        wire.coordinator_ready(p + "consumer")
        beat = wire.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": p + "consumer", "member_id": "m" * 22, "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
            "server_assignor": None, "topic_partitions": []})
        assert beat.error_code == ErrorCode.NONE, beat
        wire.coordinator_ready(p + "share")
        share = wire.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": p + "share", "member_id": "s" * 22, "member_epoch": 0, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic]})
        assert share.error_code == ErrorCode.NONE, share
        wire.coordinator_ready(p + "streams")
        streams = wire.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, {
            "group_id": p + "streams", "member_id": "t" * 22, "member_epoch": 0, "endpoint_information_epoch": -1,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000, "process_id": "p1",
            "user_endpoint": None, "client_tags": [], "task_offsets": None, "task_end_offsets": None,
            "shutdown_application": False, "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
            "topology": {"epoch": 0, "subtopologies": [
                {"subtopology_id": "0", "source_topics": [topic], "source_topic_regex": [],
                 "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
                 "copartition_groups": []}]}})
        assert streams.error_code == ErrorCode.NONE, streams.error_message
    classic, connect, simple = (p + "classic", "Classic", "consumer"), (p + "connect", "Classic", "connect"), (
        p + "simple", "Classic")
    consumer, share_row, streams_row = (p + "consumer", "Consumer", "consumer"), (p + "share", "Share", "share"), (
        p + "streams", "Streams", "streams")
    expected = {
        (): {classic, connect, simple, consumer, share_row, streams_row},
        ("--consumer",): {classic, simple, consumer},
        ("--share",): {share_row},
        ("--streams",): {streams_row},
        ("--group-type", "classic"): {classic, connect, simple},
        ("--group-type", "consumer"): {consumer},
        ("--protocol", "connect"): {connect},
    }
    with ThreadPoolExecutor(3) as pool:
        listed = dict(zip(expected, pool.map(lambda o: _groups_listed(bootstrap, *o, prefix=p), expected)))
    assert listed == expected


def _offsets(bootstrap: str, *spec: str) -> dict[str, int]:
    """kafka-get-offsets' ``topic:partition:offset`` lines."""
    output = tool(GET_OFFSET_SHELL, "--bootstrap-server", bootstrap, *spec)
    return {line.rsplit(":", 1)[0]: int(line.rsplit(":", 1)[1]) for line in output.splitlines() if line}


def test_kafka_get_offsets_prints_the_offset_of_each_spec(bootstrap: str) -> None:
    """Partition 0 holds offsets 0-2 with timestamps 1000, 3000, 2000 (one batch each) and starts at 1 after a
    DeleteRecords; partition 1 is empty. A partition without an offset for the spec is not printed."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(2)
        for ts in (1000, 3000, 2000):
            wire.produce(topic, 0, [{"value": b"v", "timestamp": ts}])
        deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout_ms": 10000})
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE, deleted
    p0, p1 = f"{topic}:0", f"{topic}:1"
    expected: dict[tuple[str, ...], dict[str, int]] = {
        ("--time", "-1"): {p0: 3, p1: 0},
        ("--time", "-2"): {p0: 1, p1: 0},
        ("--time", "-3"): {p0: 1},           # the offset of the largest timestamp
        ("--time", "-4"): {p0: 1, p1: 0},    # earliest local: the log start without tiered storage
        ("--time", "-5"): {},                # latest tiered: none without tiered storage
        ("--time", "1500"): {p0: 1},         # the first offset whose timestamp is at least 1500
        ("--time", "3001"): {},
        ("--topic-partitions", f"{topic}:1-"): {p1: 0},
        ("--topic-partitions", f"{topic}:0,{topic}:1", "--time", "-2"): {p0: 1, p1: 0},
    }
    with ThreadPoolExecutor(3) as pool:
        got = dict(zip(expected, pool.map(
            lambda spec: _offsets(bootstrap, "--topic", re.escape(topic), *spec)
            if spec[0] != "--topic-partitions" else _offsets(bootstrap, *spec), expected)))
        everything, external = pool.map(lambda extra: _offsets(bootstrap, "--topic", ".*", *extra),
                                        [(), ("--exclude-internal-topics",)])
    assert got == expected
    assert "__consumer_offsets:0" in everything and everything[p0] == 3
    assert not any(name.startswith("__") for name in external) and external[p0] == 3


def _events(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_verifiable_consumer_consumes_and_commits_every_record_the_verifiable_producer_acked(
        bootstrap: str, protocol: str) -> None:
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(3)
    acked: dict[int, list[int]] = {}
    for event in _events(tool(VERIFIABLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
                              "--max-messages", "60", "--acks", "-1", "--repeating-keys", "12")):
        if event["name"] == "producer_send_success":
            acked.setdefault(event["partition"], []).append(event["offset"])
    assert sum(map(len, acked.values())) == 60 and len(acked) > 1, acked
    events = _events(tool(VERIFIABLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--group-id",
                          f"vc-{protocol}-{topic}", "--group-protocol", protocol, "--max-messages", "60"))
    consumed: dict[int, list[int]] = {}
    committed: dict[int, int] = {}
    for event in events:
        if event["name"] == "records_consumed":
            for part in event["partitions"]:
                consumed.setdefault(part["partition"], []).append(part["count"])
                assert part["maxOffset"] - part["minOffset"] + 1 == part["count"], part
        elif event["name"] == "offsets_committed":
            assert event["success"], event
            committed.update({o["partition"]: o["offset"] for o in event["offsets"]})
    assert {p: sum(c) for p, c in consumed.items()} == {p: len(o) for p, o in acked.items()}
    assert committed == {p: max(o) + 1 for p, o in acked.items()}
    assert "shutdown_complete" in [e["name"] for e in events]


def test_end_to_end_latency_and_consumer_performance_finish_and_report(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(1)
    latency = tool(END_TO_END_LATENCY, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", "100",
                   "--producer-acks", "all", "--record-size", "100")
    assert re.search(r"^Avg latency: [\d.]+ ms$", latency, re.MULTILINE), latency
    assert re.search(r"^Percentiles: 50th = \d+, 99th = \d+, 99\.9th = \d+$", latency, re.MULTILINE), latency
    report = tool(CONSUMER_PERFORMANCE, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", "100",
                  "--timeout", "30000", "--group", f"perf-{topic}").splitlines()
    header, row = report[0].split(", "), report[1].split(", ")
    stats = dict(zip(header, row))
    assert int(stats["data.consumed.in.nMsg"]) == 100, report
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(100 * 100 / 1024 / 1024, abs=1e-4)


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_replica_verification_tool_finds_no_lag_on_a_3_node_cluster(kind: str,
                                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    with cluster_of(kind, tmp_path_factory.mktemp(f"rv-{kind}"), 3, properties={**CLUSTER_TIMING}) as cluster:
        cluster.wait_for_brokers()
        topic = f"rv-{uuid.uuid4().hex[:6]}"
        servers = cluster.bootstrap_servers
        tool(TOPIC_COMMAND, "--bootstrap-server", servers, "--create", "--topic", topic, "--partitions", "3",
             "--replication-factor", "3")
        cluster.wait_for_topic(topic, 3)
        tool(VERIFIABLE_PRODUCER, "--bootstrap-server", servers, "--topic", topic, "--max-messages", "90",
             "--acks", "-1", "--repeating-keys", "9")
        proc = subprocess.Popen(kafka_tool_command(REPLICA_VERIFICATION, "--broker-list", servers,
                                                   "--topics-include", re.escape(topic), "--report-interval-ms",
                                                   "1000"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
        watchdog = threading.Timer(TOOL_TIMEOUT_S, proc.kill)   # the tool runs until stopped: bound its silence
        watchdog.start()
        reports: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if "max lag is" in line:
                    reports.append(line.strip())
                    if len(reports) == 2:
                        break
        finally:
            watchdog.cancel()
            stop_process(proc, 10)
    assert len(reports) == 2, reports
    for report in reports:
        assert re.search(rf"max lag is 0 for partition {re.escape(topic)}-\d at offset \d+ among 3 partitions$",
                         report), report
