"""KIP-966's config rules for ``min.insync.replicas`` while eligible leader replicas are on, on klog and on Apache
Kafka 4.3 from the same requests (Kafka's ConfigurationControlManager: ``maybeGenerateElrSafetyRecords``,
``isDisallowedBrokerMinIsrTransition``, ``isDisallowedClusterMinIsrTransition``, ``createClearElrRecordsAsNeeded``):

- a new cluster (ELR finalized at 1) has a cluster-level ``min.insync.replicas``, the controller's static value,
  written into its bootstrap records, which every topic then reports as a dynamic cluster default;
- a broker-level ``min.insync.replicas`` cannot be set or deleted, the cluster-level one cannot be removed
  (IncrementalAlterConfigs DELETE, or AlterConfigs leaving it out), both INVALID_CONFIG with Kafka's message;
- a change of a topic's ``min.insync.replicas`` clears that topic's ELRs and one of the cluster's (set again even
  to its value) clears every ELR: a ClearElrRecord after the ConfigRecord in the metadata log, read with Kafka's
  own DumpLogSegments;
- turning ELR on again (UpdateFeatures) writes the cluster-level value back and removes a broker-level one.

Each runs on a single node and on a 3-node cluster of combined nodes (klog's quorum controller,
klog.controller.node.ControllerNode, is another code path than its single voter), the requests sent to node 1, which
forwards them to the active controller, the metadata log read off node 1's replica."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing import kafka_tools
from klog.testing.cluster import CLUSTER_TIMING, cluster_of
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.java

NODE_ID = "1"
BROKER, TOPIC = 4, 2
OP_SET, OP_DELETE = 0, 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
ELR = "eligible.leader.replicas.version"
UPGRADE, SAFE_DOWNGRADE = 1, 2
BROKER_LEVEL_REFUSAL = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
CLUSTER_REMOVAL_REFUSAL = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."


class Server:
    def __init__(self, bootstrap: str, metadata_dir: Path) -> None:
        self.bootstrap, self.metadata_dir = bootstrap, metadata_dir

    def request(self, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        host, _, port = self.bootstrap.rpartition(":")
        with WireClient(host, int(port)) as wire:
            return wire.request(api, version, body)

    def metadata_payloads(self) -> list[dict[str, Any]]:
        """Every record of the metadata log as Kafka's DumpLogSegments decodes it (``{"type", "data"}``)."""
        files = sorted(str(p) for p in self.metadata_dir.glob("*.log"))
        dump = kafka_tools.run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--cluster-metadata-decoder",
                                          "--files", ",".join(files))
        assert dump.returncode == 0, dump.stderr
        return [json.loads(line.split("payload: ", 1)[1]) for line in dump.stdout.splitlines() if "payload: " in line]


@pytest.fixture(scope="module", params=["klog", "kafka"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module", params=[pytest.param(1, id="1-node"), pytest.param(3, id="3-nodes")])
def server(request: pytest.FixtureRequest, kind: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp(f"{kind}-{request.param}")
    if request.param == 1:
        with one_broker(kind, root, {"node.id": NODE_ID}) as bootstrap:
            data = root / ("data" if kind == "klog" else "kafka-data")
            yield Server(bootstrap, data / "__cluster_metadata-0")
        return
    with cluster_of(kind, root, request.param, properties={**CLUSTER_TIMING}) as cluster:
        cluster.wait_for_brokers()
        # node 1 answers (it describes its own broker configs), forwarding changes to the active controller, which
        # may be another node; its replica of the metadata log is read
        node = int(NODE_ID)
        yield Server(f"127.0.0.1:{cluster.client_ports[node]}", cluster.log_dir(node) / "__cluster_metadata-0")


def _incremental(server: Server, rtype: int, name: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
    [result] = server.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": rtype, "resource_name": name, "configs": [
            {"name": key, "config_operation": op, "value": value} for key, op, value in ops]}],
        "validate_only": False}).responses
    return result.error_code, result.error_message


def _describe(server: Server, rtype: int, name: str) -> dict[str, tuple[str | None, list[tuple[str, str, int]]]]:
    """name -> (value, [(synonym, value, source)]) of resource ``name``'s configs."""
    [result] = server.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": rtype, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False}).results
    assert result.error_code == ErrorCode.NONE, result
    return {e.name: (e.value, [(s.name, s.value, s.source) for s in e.synonyms]) for e in result.configs}


def _dynamic(server: Server, broker: str) -> dict[str, str | None]:
    """A broker resource's dynamic configs (DescribeConfigs of "" lists only the cluster-level ones)."""
    source = DYNAMIC_DEFAULT_BROKER_CONFIG if broker == "" else 2
    return {name: value for name, (value, synonyms) in _describe(server, BROKER, broker).items()
            if synonyms and synonyms[0][2] == source}


def _topic(server: Server, configs: dict[str, str] | None = None) -> str:
    name = f"elr-{uuid.uuid4().hex[:8]}"
    [result] = server.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 30_000, "validate_only": False}).topics
    assert result.error_code == ErrorCode.NONE, result
    return name


def test_a_new_cluster_has_a_cluster_level_min_insync_replicas_every_topic_reports(server: Server) -> None:
    assert _dynamic(server, "") == {"min.insync.replicas": "1"}
    bootstrap = [p for p in server.metadata_payloads() if p["type"] == "CONFIG_RECORD"][0]
    assert bootstrap["data"] == {"resourceType": BROKER, "resourceName": "", "name": "min.insync.replicas",
                                 "value": "1"}
    topic = _topic(server)
    value, synonyms = until(lambda: _describe(server, TOPIC, topic)["min.insync.replicas"], "the topic described")
    assert value == "1"
    assert synonyms[0] == ("min.insync.replicas", "1", DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_a_broker_level_min_insync_replicas_is_refused_while_elr_is_on(server: Server) -> None:
    for op, value in ((OP_SET, "2"), (OP_DELETE, None)):
        assert _incremental(server, BROKER, NODE_ID, ("min.insync.replicas", op, value)) == (
            ErrorCode.INVALID_CONFIG, BROKER_LEVEL_REFUSAL)
    assert "min.insync.replicas" not in _dynamic(server, NODE_ID)


def test_the_cluster_level_min_insync_replicas_cannot_be_removed_while_elr_is_on(server: Server) -> None:
    assert _incremental(server, BROKER, "", ("min.insync.replicas", OP_DELETE, None)) == (
        ErrorCode.INVALID_CONFIG, CLUSTER_REMOVAL_REFUSAL)
    # AlterConfigs replaces a resource's configs: leaving it out removes it
    [result] = server.request(ApiKey.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": BROKER, "resource_name": "", "configs": [{"name": "log.retention.ms", "value": "86400000"}]}],
        "validate_only": False}).responses
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_CONFIG, CLUSTER_REMOVAL_REFUSAL)
    assert _dynamic(server, "") == {"min.insync.replicas": "1"}


def test_min_insync_replicas_changes_clear_the_elrs_they_were_computed_against(server: Server) -> None:
    topic = _topic(server)
    assert _incremental(server, TOPIC, topic, ("min.insync.replicas", OP_SET, "2")) == (ErrorCode.NONE, None)
    # the cluster's value set again, unchanged: every ELR is cleared all the same
    assert _incremental(server, BROKER, "", ("min.insync.replicas", OP_SET, "1")) == (ErrorCode.NONE, None)

    def tail() -> list[dict[str, Any]]:
        payloads = server.metadata_payloads()
        at = max(i for i, p in enumerate(payloads) if p["type"] == "TOPIC_RECORD" and p["data"]["name"] == topic)
        return [p for p in payloads[at + 1:] if p["type"] in ("CONFIG_RECORD", "CLEAR_ELR_RECORD")]

    assert until(lambda: records if len(records := tail()) >= 4 else None, "the four records") == [
        {"type": "CONFIG_RECORD", "version": 0, "data": {"resourceType": TOPIC, "resourceName": topic,
                                                         "name": "min.insync.replicas", "value": "2"}},
        {"type": "CLEAR_ELR_RECORD", "version": 0, "data": {"topicName": topic}},
        {"type": "CONFIG_RECORD", "version": 0, "data": {"resourceType": BROKER, "resourceName": "",
                                                         "name": "min.insync.replicas", "value": "1"}},
        {"type": "CLEAR_ELR_RECORD", "version": 0, "data": {"topicName": ""}},
    ]


def _update_elr(server: Server, level: int, upgrade_type: int) -> tuple[int, str | None]:
    answer = server.request(ApiKey.UPDATE_FEATURES, 1, {"timeout_ms": 30_000, "feature_updates": [
        {"feature": ELR, "max_version_level": level, "upgrade_type": upgrade_type}], "validate_only": False})
    return answer.error_code, answer.error_message


def test_turning_elr_on_writes_the_cluster_level_value_and_removes_broker_level_ones(server: Server) -> None:
    # last in this module: it turns ELR off and on again
    assert _update_elr(server, 0, SAFE_DOWNGRADE)[0] == ErrorCode.NONE
    assert _incremental(server, BROKER, NODE_ID, ("min.insync.replicas", OP_SET, "2")) == (ErrorCode.NONE, None)
    assert _incremental(server, BROKER, "", ("min.insync.replicas", OP_DELETE, None)) == (ErrorCode.NONE, None)
    until(lambda: (_dynamic(server, ""), _dynamic(server, NODE_ID).get("min.insync.replicas")) == ({}, "2"),
          "the broker-level value alone")

    assert _update_elr(server, 1, UPGRADE)[0] == ErrorCode.NONE
    until(lambda: (_dynamic(server, ""), _dynamic(server, NODE_ID).get("min.insync.replicas"))
          == ({"min.insync.replicas": "1"}, None), "the cluster-level value alone")
    safety = [p["data"] for p in server.metadata_payloads() if p["type"] in ("CONFIG_RECORD", "FEATURE_LEVEL_RECORD")]
    assert safety[-3:] == [
        {"resourceType": BROKER, "resourceName": "", "name": "min.insync.replicas", "value": "1"},
        {"resourceType": BROKER, "resourceName": NODE_ID, "name": "min.insync.replicas", "value": None},
        {"name": ELR, "featureLevel": 1},
    ]
