"""BROKER_LOGGER config resources on the controller listener (Kafka's ``--bootstrap-controller`` path, KIP-919),
on klog and on Apache Kafka 4.x (one combined node): IncrementalAlterConfigs changes the controller node's log
levels (its own node id only, Kafka's error codes), answered in the request's order beside resources the
controller decides."""

from __future__ import annotations

import uuid

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import cluster_of
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

BROKER_LOGGER = 8
SET, DELETE = 0, 1


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root: Path = tmp_path_factory.mktemp(f"loggers-{request.param}")
    with cluster_of(request.param, root, 1, properties={"offsets.topic.replication.factor": 1}) as started:
        yield started


def _controller(node: Any) -> tuple[WireClient, str]:
    node_id = node.controller_ids[0]
    return WireClient("127.0.0.1", node.controller_ports[node_id], client_id="loggers-test"), str(node_id)


def _alter(wire: WireClient, name: str, *changes: tuple[str, int, str | None]) -> Any:
    [response] = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": BROKER_LOGGER, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in changes]}],
        "validate_only": False}).responses
    return response


def test_a_controllers_root_logger_level_is_set_on_its_controller_listener(node: Any) -> None:
    wire, me = _controller(node)
    with wire:
        assert _alter(wire, me, ("root", SET, "INFO")).error_code == ErrorCode.NONE
        # the root logger's level may be set, not removed (Kafka's RuntimeLoggerManager)
        assert _alter(wire, me, ("root", DELETE, None)).error_code == ErrorCode.INVALID_REQUEST


def test_a_controllers_logger_changes_are_refused_with_kafkas_codes(node: Any) -> None:
    wire, me = _controller(node)
    with wire:
        other = _alter(wire, "99", ("root", SET, "DEBUG"))
        assert (other.error_code, other.error_message) == (ErrorCode.INVALID_REQUEST,
                                                           f"Unexpected node id. Expected {me}, but received 99")
        assert _alter(wire, me, ("root", SET, "VERBOSE")).error_code == ErrorCode.INVALID_CONFIG


def test_a_mixed_request_on_the_controller_listener_is_answered_in_the_requests_order(node: Any) -> None:
    wire, me = _controller(node)
    topic = "no-such-topic-" + uuid.uuid4().hex[:8]
    with wire:
        responses = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configs": [
                {"name": "retention.ms", "config_operation": SET, "value": "1000"}]},
            {"resource_type": BROKER_LOGGER, "resource_name": me, "configs": [
                {"name": "root", "config_operation": SET, "value": "INFO"}]}],
            "validate_only": True}).responses
    assert [(r.resource_type, r.resource_name, r.error_code) for r in responses] == [
        (2, topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (BROKER_LOGGER, me, ErrorCode.NONE)]
