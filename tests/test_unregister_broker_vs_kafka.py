"""UnregisterBroker (64): an operator removes a decommissioned broker's registration (``kafka-cluster unregister``),
answered by klog as by Apache Kafka 4.3.1. One dedicated-layout cluster of each kind (a controller and three
brokers) for the module: the request sent to a broker (which forwards it to the active controller, in an
envelope) and to the controller listener; a stopped broker unregistered with Kafka's own tool and with the raw
request; an unknown id, a live broker; what DescribeCluster and Metadata answer afterwards; an unregistered broker
that starts again registers again. Every test failed on klog before 2026-12-07: no broker or controller listener
advertised API 64 (``kafka-cluster unregister`` failed with UnsupportedVersionException)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import cluster_of
from klog.testing.cluster_api import Cluster
from klog.testing.kafka_tools import run_kafka_tool
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, until

pytestmark = [pytest.mark.java, pytest.mark.timeout(600)]

CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
CONTROLLER = 101


@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_of(request.param, tmp_path_factory.mktemp(request.param), 3, controllers=1,
                    properties={"offsets.topic.replication.factor": 1}) as started:
        started.wait_for_brokers([1, 2, 3])
        yield started


def _unregister(wire: WireClient, broker_id: int) -> tuple[int, Any]:
    answer = wire.request(ApiKey.UNREGISTER_BROKER, 0, {"broker_id": broker_id})
    return answer.error_code, answer.error_message


def _controller_wire(cluster: Cluster) -> WireClient:
    return WireClient("127.0.0.1", cluster.controller_ports[CONTROLLER], client_id="unregister-test")


def _described(wire: WireClient) -> dict[int, bool]:
    """DescribeCluster v2 with fenced brokers: broker id -> fenced."""
    answer = wire.request(ApiKey.DESCRIBE_CLUSTER, 2, {"include_cluster_authorized_operations": False,
                                                       "endpoint_type": 1, "include_fenced_brokers": True})
    assert answer.error_code == ErrorCode.NONE, answer
    return {b.broker_id: b.is_fenced for b in answer.brokers}


def _metadata_brokers(wire: WireClient) -> set[int]:
    answer = wire.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
    return {b.node_id for b in answer.brokers}


def test_both_listeners_advertise_unregister_broker_and_the_voter_changes(cluster: Cluster) -> None:
    """Kafka 4.3.1's broker listener advertises UnregisterBroker v0, AddRaftVoter v0-1 and RemoveRaftVoter v0 (it
    forwards them to the active controller); its controller listener UnregisterBroker v0 too."""
    body = {"client_software_name": "unregister-test", "client_software_version": "1"}
    with cluster.wire(1) as broker, _controller_wire(cluster) as controller:
        on_broker = {k.api_key: (k.min_version, k.max_version) for k in
                     broker.request(ApiKey.API_VERSIONS, 3, body).api_keys}
        on_controller = {k.api_key: (k.min_version, k.max_version) for k in
                         controller.request(ApiKey.API_VERSIONS, 3, body).api_keys}
    assert {k: on_broker.get(k) for k in (64, 80, 81, 82)} == {64: (0, 0), 80: (0, 1), 81: (0, 0), 82: None}
    assert {k: on_controller.get(k) for k in (64, 80, 81, 82)} == {64: (0, 0), 80: (0, 1), 81: (0, 0), 82: (0, 0)}


#: What Apache Kafka 4.3.1's controller listener advertises (ApiVersions v3), api key -> versions, but for the APIs
#: of KRAFT_ONLY and NOT_HANDLED below.
KAFKA_CONTROLLER_APIS = {
    18: (0, 4), 19: (2, 7), 20: (1, 6), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 37: (0, 3),
    38: (1, 3), 39: (1, 2), 40: (1, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 49: (0, 1), 51: (0, 0),
    55: (0, 2), 56: (2, 3), 57: (0, 2), 58: (0, 0), 60: (0, 2), 62: (0, 4), 63: (0, 2), 64: (0, 0), 67: (0, 0),
    73: (0, 0), 80: (0, 1), 81: (0, 0), 82: (0, 0)}
#: KRaft's own RPCs (Fetch, Vote, Begin/EndQuorumEpoch, FetchSnapshot, ControllerRegistration: klog's controllers
#: speak raft-rs on the port instead) and SaslHandshake/SaslAuthenticate, which klog's controller listener lists on
#: a SASL listener only (docs/reliability.md)
KRAFT_ONLY = {1, 17, 36, 52, 53, 54, 59, 70}
#: advertised by Kafka's controller listener although its ControllerApis (4.3.1) has no handler for them
NOT_HANDLED = {41, 50}


def test_the_controller_listener_advertises_kafkas_controller_apis(cluster: Cluster) -> None:
    """Kafka 4.3.1's controller listener, but KRaft's own RPCs: klog's lacked UnregisterBroker (64) and DescribeAcls
    (29, ``kafka-acls --bootstrap-controller --list``), answered SECURITY_DISABLED without an authorizer, on either
    listener with Kafka's message."""
    body = {"client_software_name": "unregister-test", "client_software_version": "1"}
    any_acl = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    with _controller_wire(cluster) as controller, cluster.wire(1) as broker:
        advertised = {k.api_key: (k.min_version, k.max_version) for k in
                      controller.request(ApiKey.API_VERSIONS, 3, body).api_keys}
        described = [wire.request(ApiKey.DESCRIBE_ACLS, 3, any_acl) for wire in (controller, broker)]
    assert {k: v for k, v in advertised.items() if k not in KRAFT_ONLY | NOT_HANDLED} == KAFKA_CONTROLLER_APIS
    # DescribeAcls' message is its own (klog's broker answered "No Authorizer is configured.", the other ACL APIs')
    assert [(d.error_code, d.error_message, list(d.resources)) for d in described] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])] * 2


def test_an_unknown_broker_id_is_broker_id_not_registered(cluster: Cluster) -> None:
    """Kafka's BrokerIdNotRegisteredException, its message in the answer, on either listener."""
    with cluster.wire(1) as broker, _controller_wire(cluster) as controller:
        not_registered = (ErrorCode.BROKER_ID_NOT_REGISTERED, "Broker ID 77 is not currently registered")
        assert _unregister(broker, 77) == not_registered
        assert _unregister(controller, 77) == not_registered
        assert _unregister(broker, -1) == (ErrorCode.BROKER_ID_NOT_REGISTERED,
                                           "Broker ID -1 is not currently registered")


def test_a_stopped_broker_unregistered_with_kafka_cluster_leaves_describe_cluster(cluster: Cluster) -> None:
    """``kafka-cluster unregister --bootstrap-server`` on a stopped (fenced) broker: it is gone from DescribeCluster
    (fenced ones included) and Metadata; a second unregister is BROKER_ID_NOT_REGISTERED; started again, the
    broker registers again and serves."""
    cluster.stop_node(3)
    with cluster.wire(1) as wire:
        until(lambda: _described(wire).get(3) is True, "broker 3 fenced")
        out = run_kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.node_bootstrap(1),
                             "--id", "3")
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert "Broker 3 is no longer registered." in out.stdout, out.stdout
        until(lambda: 3 not in _described(wire), "broker 3 unregistered")
        assert _metadata_brokers(wire) == {1, 2}
        again = run_kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.node_bootstrap(1),
                               "--id", "3")
        assert again.returncode != 0 and "BrokerIdNotRegisteredException" in again.stdout + again.stderr, again
    cluster.restart(3)
    cluster.wait_for_brokers([1, 2, 3])
    with cluster.wire(2) as wire:
        assert _described(wire) == {1: False, 2: False, 3: False}


def test_a_stopped_broker_unregistered_on_the_controller_listener(cluster: Cluster) -> None:
    """The raw request to the controller listener (``--bootstrap-controller``) unregisters it as well."""
    cluster.stop_node(2)
    with cluster.wire(1) as wire, _controller_wire(cluster) as controller:
        until(lambda: _described(wire).get(2) is True, "broker 2 fenced")
        # Kafka 4.3.1 answers a success with an empty message (its new response's default), not null
        assert _unregister(controller, 2) == (ErrorCode.NONE, "")
        until(lambda: 2 not in _described(wire), "broker 2 unregistered")
    cluster.restart(2)
    cluster.wait_for_brokers([1, 2, 3])


def test_a_live_broker_is_unregistered_too(cluster: Cluster) -> None:
    """Kafka 4.3.1's controller does not check that the broker is stopped (only that it is registered): a live
    broker is unregistered as well. What follows differs, deliberately (docs/reliability.md): Kafka's broker, its
    heartbeats answered STALE_BROKER_EPOCH, stays unregistered until it restarts (its controlled shutdown then
    waits out its timeout); klog's registers again at its next heartbeat and is unfenced. Last in the module: on
    Kafka broker 1 stays out."""
    def registrations() -> int:   # klog's broker logs each registration the controller answered
        return sum("broker 1 registered with epoch" in line for line in cluster.log_lines(1))

    before = registrations() if cluster.kind == "klog" else 0
    with cluster.wire(2) as wire:
        assert _unregister(wire, 1) == (ErrorCode.NONE, "")
        if cluster.kind == "kafka":
            time.sleep(3.0)   # six heartbeat intervals (broker.heartbeat.interval.ms=500)
            assert 1 not in _described(wire)
        else:
            until(lambda: registrations() == before + 1, "broker 1 registered again")
            until(lambda: _described(wire).get(1) is False, "broker 1 unfenced")


def test_a_single_node_answers_unregister_broker_and_refuses_voter_changes(tmp_path: Path) -> None:
    """klog's own single node (Kafka has none): its metadata decides UnregisterBroker (an unknown id
    BROKER_ID_NOT_REGISTERED), and its quorum of one cannot change, as a Kafka quorum of ``controller.quorum.voters``
    (UNSUPPORTED_VERSION)."""
    with BrokerProcess(tmp_path, {}) as node, WireClient(node.host, node.port) as wire:
        assert _unregister(wire, 9) == (ErrorCode.BROKER_ID_NOT_REGISTERED, "Broker ID 9 is not currently registered")
        removed = wire.request(ApiKey.REMOVE_RAFT_VOTER, 0, {"cluster_id": None, "voter_id": 9,
                                                             "voter_directory_id": uuid.UUID(int=9)})
        assert removed.error_code == ErrorCode.UNSUPPORTED_VERSION
