"""Cordoned log dirs (KIP-1066, metadata.version 4.3-IV0) on klog and on Apache Kafka 4.3.1 from the same properties:
``cordoned.log.dirs`` (static and dynamic per broker) keeps new partition logs out of those dirs, DescribeLogDirs v5
marks them ``is_cordoned``, the heartbeats report them to the controller, which places no new replica on a broker
whose log dirs are all cordoned (CreateTopics then answers as Kafka's StripedReplicaPlacer), and a cluster below
4.3-IV0 refuses the config. Real processes; each answer is checked against the same scenario on Kafka."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing import kafka_tools as kt
from klog.testing.cluster import CLUSTER_TIMING
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port, one_broker
from klog.testing.process import BrokerProcess, broker_command
from klog.testing.wire import WireClient

from jbod_support import open_cluster, placed

pytestmark = [pytest.mark.java, pytest.mark.timeout(420)]

KINDS = ["klog", pytest.param("kafka", marks=pytest.mark.long)]
PROPERTIES = {**CLUSTER_TIMING, "offsets.topic.num.partitions": 1}
CORDONED = "cordoned.log.dirs"
#: Kafka's StripedReplicaPlacer, which CreatePartitions answers as it is and CreateTopics after its own words
NO_USABLE_BROKER = "All brokers are currently fenced, or have all their log directories cordoned."
ALL_CORDONED = f"Unable to replicate the partition 1 time(s): {NO_USABLE_BROKER}"
BELOW_4_3 = "The cordoned.log.dirs configuration value cannot be set because it requires metadata.version >= 4.3-IV0"


def _alter(wire: WireClient, node: str, value: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1: SET (DELETE when ``value`` is None) broker ``node``'s cordoned.log.dirs."""
    answer = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 4, "resource_name": node, "configs": [
            {"name": CORDONED, "config_operation": 1 if value is None else 0, "value": value}]}],
        "validate_only": False}).responses[0]
    return answer.error_code, answer.error_message


def _cordoned(wire: WireClient) -> dict[str, bool]:
    """DescribeLogDirs v5: log dir (real path) -> is_cordoned."""
    answer = wire.request(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": None})
    return {os.path.realpath(r.log_dir): r.is_cordoned for r in answer.results}


def _eventually(what: Callable[[], Any], wanted: Callable[[Any], bool], timeout: float = 30.0) -> Any:
    """``what()`` once ``wanted`` holds of it (the heartbeat carrying a change reaches the controller within about
    broker.heartbeat.interval.ms); its last value otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if wanted(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


@pytest.mark.parametrize("kind", KINDS)
def test_a_cordoned_dir_gets_no_new_logs_and_a_broker_with_every_dir_cordoned_gets_no_replicas(kind, tmp_path):
    """One node, log.dirs=a,b,c, a cordoned in server.properties: a new topic's partitions spread over b and c only
    and DescribeLogDirs marks a. Values that are not log dirs, ``*`` with others, and the cluster-wide default resource
    are refused. Cordoning b too (IncrementalAlterConfigs on the broker) leaves no usable broker: CreateTopics answers
    INVALID_REPLICATION_FACTOR with Kafka's words. Deleting the dynamic value goes back to server.properties' a."""
    a, b, c = (str(tmp_path / f"node-1-{x}") for x in "abc")
    cluster = open_cluster(kind, tmp_path / "cluster", 1, PROPERTIES, f"{a},{b},{c}", node_properties={CORDONED: a})
    with cluster:
        cluster.wait_for_brokers()
        assert cluster.create_topic("spread", 4, 1) == (0, None)
        cluster.wait_for_topic("spread", 4)
        assert sorted(placed([a, b, c], "spread", 4).values()) == [b, b, c, c]
        with cluster.wire(1) as wire:
            assert _cordoned(wire) == {os.path.realpath(a): True, os.path.realpath(b): False,
                                       os.path.realpath(c): False}
            elsewhere = str(tmp_path / "elsewhere")
            assert _alter(wire, "1", elsewhere) == (ErrorCode.INVALID_REQUEST, "requirement failed: All entries in "
                                                    "cordoned.log.dirs must be present in log.dirs or log.dir. "
                                                    f"Missing entries : {elsewhere}")
            assert _alter(wire, "1", f"*,{a}") == (ErrorCode.INVALID_REQUEST, "requirement failed: When "
                                                   "cordoned.log.dirs is set to *, it must not contain other values")
            assert _alter(wire, "", b) == (ErrorCode.INVALID_REQUEST, "Cannot update these configs at default "
                                           "cluster level, broker id must be specified: [cordoned.log.dirs]")
            assert _alter(wire, "1", f"{a},{b},{c}") == (0, None)
            assert _eventually(lambda: _cordoned(wire), lambda got: all(got.values())) == {
                os.path.realpath(d): True for d in (a, b, c)}
        refused = _eventually(lambda: cluster.create_topic("nowhere", 1, 1), lambda got: got[0] != 0)
        assert refused == (ErrorCode.INVALID_REPLICATION_FACTOR, ALL_CORDONED)
        with cluster.wire(1) as wire:
            assert _alter(wire, "1", None) == (0, None)
        created = _eventually(lambda: cluster.create_topic("again", 2, 1), lambda got: got[0] == 0)
        assert created == (0, None)
        cluster.wait_for_topic("again", 2)
        assert sorted(placed([a, b, c], "again", 2).values()) == [b, c]
        with cluster.wire(1) as wire:
            assert _cordoned(wire) == {os.path.realpath(a): True, os.path.realpath(b): False,
                                       os.path.realpath(c): False}


def _replicas(cluster: Any, topic: str) -> set[int]:
    answer = cluster.metadata(1, [topic])
    return {r for t in answer.topics for p in t.partitions for r in p.replica_nodes}


@pytest.mark.parametrize("kind", KINDS)
def test_new_topics_avoid_the_broker_whose_dirs_are_all_cordoned(kind, tmp_path):
    """Three nodes, node 2 with ``cordoned.log.dirs=*``: a topic of 6 partitions, 2 replicas each, lives on nodes 1
    and 3 only; once node 2 uncordons its dir (IncrementalAlterConfigs), the next topic uses it too. On klog, Kafka's
    kafka-dump-log decodes the BrokerRegistrationChangeRecords that carried node 2's cordoned dirs."""
    only = str(tmp_path / "node-2-only")
    cluster = open_cluster(kind, tmp_path / "cluster", 3, PROPERTIES, only, node=2, node_properties={CORDONED: "*"})
    with cluster:
        cluster.wait_for_brokers()
        created = _eventually(lambda: cluster.create_topic("avoiding", 6, 2), lambda got: got[0] == 0)
        assert created == (0, None)
        cluster.wait_for_topic("avoiding", 6)
        assert _replicas(cluster, "avoiding") == {1, 3}
        with cluster.wire(2) as wire:
            assert _cordoned(wire) == {os.path.realpath(only): True}
            assert _alter(wire, "2", "") == (0, None)
            assert _eventually(lambda: _cordoned(wire), lambda got: not any(got.values())) == {
                os.path.realpath(only): False}
        time.sleep(2 * CLUSTER_TIMING["broker.heartbeat.interval.ms"] / 1000)   # the heartbeat reporting it
        assert cluster.create_topic("using", 6, 2) == (0, None)
        cluster.wait_for_topic("using", 6)
        assert _replicas(cluster, "using") == {1, 2, 3}
    if kind == "klog":
        from test_storage_oracle import run_dump

        meta = cluster.log_dir(1) / "__cluster_metadata-0"
        dump = run_dump([str(meta / n) for n in sorted(os.listdir(meta)) if n.endswith(".log")],
                        "--cluster-metadata-decoder")
        assert "Exception" not in dump and '"cordonedLogDirs":[' in dump, dump[-3000:]


@pytest.fixture(params=["klog", pytest.param("kafka", marks=pytest.mark.long)])
def at_4_2(request, tmp_path):
    """One combined broker,controller node formatted ``--standalone --release-version 4.2`` (metadata.version
    4.2-IV1, 29; kraft.version 1): (kind, bootstrap, its data dir)."""
    data = tmp_path / "data"
    args = ["--standalone", "--release-version", "4.2"]
    if request.param == "klog":
        port, controller = free_port(), free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
        props = tmp_path / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in {
            "process.roles": "broker,controller", "node.id": 1, "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}", "listeners": listeners,
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT", "log.dirs": data, "offsets.topic.replication.factor": 1,
            **CLUSTER_TIMING}.items()))
        fmt = subprocess.run([*broker_command(), "format", "-t", "Y29yZG9uZWQtbG9nLWRpcg", "-c", str(props), *args],
                             capture_output=True, text=True, timeout=60)
        assert fmt.returncode == 0, fmt.stderr
        with BrokerProcess(data, {"listeners": listeners}, properties_file=props):
            yield request.param, f"127.0.0.1:{port}", str(data)
        return
    try:
        find_kafka_libs()
    except Exception as exc:  # noqa: BLE001 - the jars are fetched by tools/install-peers.sh
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    with apache_kafka(tmp_path, free_port(), heap="512m", format_args=args[1:],
                      config={"broker.heartbeat.interval.ms": 500}) as bootstrap:
        yield request.param, str(bootstrap), None


def test_below_4_3_the_controller_refuses_cordoned_log_dirs_until_the_upgrade(at_4_2):
    """At metadata.version 4.2-IV1 setting cordoned.log.dirs is refused INVALID_CONFIG (Kafka's
    ConfigurationControlManager). ``kafka-features upgrade --release-version 4.3`` finalizes 4.3-IV0; then the
    value is accepted, the dir cordoned, and with it every dir of the only broker: CreateTopics is refused."""
    kind, bootstrap, data = at_4_2
    host, port = bootstrap.split(":")
    with WireClient(host, int(port)) as wire:
        node = str(wire.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False}).brokers[0].node_id)
        (directory,) = _cordoned(wire)
        assert _alter(wire, node, "*") == (ErrorCode.INVALID_CONFIG, BELOW_4_3)
    upgraded = kt.run_kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap, "upgrade",
                                 "--release-version", "4.3")
    assert upgraded.returncode == 0 and "metadata.version was upgraded to 30." in upgraded.stdout.splitlines(), \
        upgraded
    with WireClient(host, int(port)) as wire:
        assert _eventually(lambda: _alter(wire, node, "*"), lambda got: got == (0, None)) == (0, None)
        assert _eventually(lambda: _cordoned(wire), lambda got: all(got.values())) == {directory: True}
        refused = _eventually(lambda: wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": "nowhere", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False}).topics[0], lambda got: got.error_code != 0)
        assert (refused.error_code, refused.error_message) == (ErrorCode.INVALID_REPLICATION_FACTOR, ALL_CORDONED)
    assert data is None or os.path.realpath(data) == directory


@pytest.mark.parametrize("kind", KINDS)
def test_describe_configs_lists_the_dynamic_value_over_server_properties(kind, tmp_path):
    """DescribeConfigs v4 of the broker: cordoned.log.dirs is a dynamic LIST config; set in server.properties it is
    STATIC_BROKER_CONFIG; set dynamically too, DYNAMIC_BROKER_CONFIG with server.properties' value still listed as
    its static synonym, then the default."""
    a, b = str(tmp_path / "node-1-a"), str(tmp_path / "node-1-b")
    cluster = open_cluster(kind, tmp_path / "cluster", 1, PROPERTIES, f"{a},{b}", node_properties={CORDONED: a})

    def described(wire: WireClient) -> tuple[Any, ...]:
        (entry,) = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": [CORDONED]}],
            "include_synonyms": True, "include_documentation": False}).results[0].configs
        return (entry.value, entry.read_only, entry.config_source, entry.config_type,
                [(s.value, s.source) for s in entry.synonyms])

    with cluster:
        cluster.wait_for_brokers()
        with cluster.wire(1) as wire:
            assert described(wire) == (a, False, 4, 7, [(a, 4), ("", 5)])
            assert _alter(wire, "1", b) == (0, None)
            assert _eventually(lambda: described(wire), lambda got: got[0] == b) == (
                b, False, 2, 7, [(b, 2), (a, 4), ("", 5)])


def _create(wire: WireClient, topic: str, partitions: int, *, validate_only: bool = False) -> tuple[int, str | None]:
    """CreateTopics v7 of ``topic`` (``partitions`` partitions, one replica): (error code, message)."""
    answer = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": validate_only}).topics[0]
    return answer.error_code, answer.error_message


def _grow(wire: WireClient, topic: str, count: int, *, validate_only: bool = False) -> tuple[int, str | None]:
    """CreatePartitions v3: ``topic`` to ``count`` partitions: (error code, message)."""
    answer = wire.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [
        {"name": topic, "count": count, "assignments": None}], "timeout_ms": 30000,
        "validate_only": validate_only}).results[0]
    return answer.error_code, answer.error_message


@pytest.mark.parametrize("kind", KINDS)
def test_a_lone_node_with_every_dir_cordoned_places_no_new_partition_on_itself(kind, tmp_path):
    """One node started with no more than its properties (klog: a single node without ``process.roles``, its own
    single voter; Kafka: one combined broker,controller node), log.dirs=a,b, both cordoned in server.properties:
    CreateTopics is refused INVALID_REPLICATION_FACTOR with Kafka's words (validate_only too). With b uncordoned
    (IncrementalAlterConfigs) a topic is created in b; with both cordoned again, CreatePartitions is refused
    INVALID_REPLICATION_FACTOR too, with the placer's words alone."""
    a, b = str(tmp_path / "dir-a"), str(tmp_path / "dir-b")
    properties = {"log.dirs": f"{a},{b}", CORDONED: f"{a},{b}", "offsets.topic.num.partitions": 1,
                  "broker.heartbeat.interval.ms": CLUSTER_TIMING["broker.heartbeat.interval.ms"]}
    with one_broker(kind, tmp_path / "node", properties) as bootstrap:
        host, port = bootstrap.split(":")
        with WireClient(host, int(port)) as wire:
            node = str(wire.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                          "include_topic_authorized_operations": False}
                                    ).brokers[0].node_id)
            assert _eventually(lambda: _cordoned(wire), lambda got: all(got.values())) == {
                os.path.realpath(a): True, os.path.realpath(b): True}
            # the controller learns the cordoned dirs from the broker's heartbeat on Kafka
            checked = _eventually(lambda: _create(wire, "nowhere", 1, validate_only=True), lambda got: got[0] != 0)
            assert checked == (ErrorCode.INVALID_REPLICATION_FACTOR, ALL_CORDONED)
            assert _create(wire, "nowhere", 1) == (ErrorCode.INVALID_REPLICATION_FACTOR, ALL_CORDONED)
            assert _alter(wire, node, a) == (0, None)
            assert _eventually(lambda: _create(wire, "spread", 2, validate_only=True), lambda got: got[0] == 0) \
                == (0, None)
            assert _create(wire, "spread", 2) == (0, None)
            assert placed([a, b], "spread", 2) == {0: b, 1: b}
            assert _alter(wire, node, f"{a},{b}") == (0, None)
            checked = _eventually(lambda: _grow(wire, "spread", 3, validate_only=True), lambda got: got[0] != 0)
            assert checked == (ErrorCode.INVALID_REPLICATION_FACTOR, NO_USABLE_BROKER)
            assert _grow(wire, "spread", 3) == (ErrorCode.INVALID_REPLICATION_FACTOR, NO_USABLE_BROKER)


VIA_CONTROLLERS = ("When updating cordoned.log.dirs via controllers,  the new value must be a subset of the current "
                   "configuration value.")


@pytest.mark.parametrize("kind", KINDS)
def test_the_controller_listener_may_uncordon_dirs_but_cordon_none(kind, tmp_path):
    """IncrementalAlterConfigs sent to the controller listener (``kafka-configs --bootstrap-controller``) rather than
    forwarded by a broker: the controller cannot check a value against the broker's log.dirs, so a new non-blank
    cordoned.log.dirs must name only entries of the current dynamic value (Kafka's INVALID_CONFIG otherwise); a
    blank value and a DELETE pass. Through the broker the same values pass its own log.dirs check."""
    a, b = str(tmp_path / "node-1-a"), str(tmp_path / "node-1-b")
    cluster = open_cluster(kind, tmp_path / "cluster", 1, PROPERTIES, f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        (controller,) = cluster.controller_ids
        with WireClient("127.0.0.1", cluster.controller_ports[controller]) as on_controller, \
                cluster.wire(1) as on_broker:
            assert _alter(on_controller, "1", a) == (ErrorCode.INVALID_CONFIG, VIA_CONTROLLERS)
            assert _alter(on_broker, "1", f"{a}, {b}") == (0, None)
            assert _alter(on_controller, "1", f"{b},{a}") == (0, None)
            assert _alter(on_controller, "1", a) == (0, None)
            assert _alter(on_controller, "1", f"{a},{b}") == (ErrorCode.INVALID_CONFIG, VIA_CONTROLLERS)
            assert _alter(on_controller, "1", "*") == (ErrorCode.INVALID_CONFIG, VIA_CONTROLLERS)
            assert _alter(on_controller, "1", " ") == (0, None)
            assert _alter(on_controller, "1", None) == (0, None)
            assert _alter(on_broker, "1", "*") == (0, None)
            assert _alter(on_controller, "1", a) == (ErrorCode.INVALID_CONFIG, VIA_CONTROLLERS)
            assert _alter(on_controller, "1", "*") == (0, None)
