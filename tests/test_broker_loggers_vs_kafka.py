"""A broker's log levels change at runtime (KIP-412: the BROKER_LOGGER config resource), on klog and on Apache Kafka
4.3 from the same calls: DescribeConfigs lists every logger (``root`` among them) with its effective level,
IncrementalAlterConfigs SETs a level or DELETEs a logger's own (back to its parent's), refusing what Kafka's
RuntimeLoggerManager refuses (an unknown level or logger: INVALID_CONFIG; deleting the root logger's level, APPEND
and SUBTRACT: INVALID_REQUEST), and Kafka's own ``kafka-configs --entity-type broker-loggers`` describes and alters
them. The loggers' names differ (log4j's on Kafka, Python's ``klog.*`` on klog), so the shared tests use ``root``
and a logger the describe names; a klog-only test proves a level set to DEBUG makes that logger's DEBUG lines reach
the broker's log, and its deletion stops them."""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.testing import kafka_tools
from klog.testing.kafka import one_broker_node
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.java

NODE_ID = "1"
BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NONE, INVALID_CONFIG, INVALID_REQUEST = 0, 40, 42
DYNAMIC_BROKER_LOGGER_CONFIG = 6


class Server:
    def __init__(self, kind: str, bootstrap: str, node: BrokerProcess | None) -> None:
        self.kind, self.bootstrap, self.node = kind, bootstrap, node
        host, _, port = bootstrap.rpartition(":")
        self.host, self.port = host, int(port)

    def wire(self, client_id: str = "klog-wire") -> WireClient:
        return WireClient(self.host, self.port, client_id=client_id)


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    with one_broker_node(request.param, root, {"node.id": NODE_ID}) as (bootstrap, node):
        yield Server(request.param, bootstrap, node)


def _describe(server: Server, keys: list[str] | None = None, name: str = NODE_ID) -> Any:
    with server.wire() as wire:
        [result] = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": False, "include_documentation": False}).results
    return result


def _levels(server: Server) -> dict[str, str]:
    result = _describe(server)
    assert result.error_code == NONE, result
    assert {entry.config_source for entry in result.configs} == {DYNAMIC_BROKER_LOGGER_CONFIG}
    return {entry.name: entry.value for entry in result.configs}


def _alter(server: Server, *changes: tuple[str, int, str | None], validate_only: bool = False,
           name: str = NODE_ID) -> tuple[int, str | None]:
    with server.wire() as wire:
        [response] = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": name, "configs": [
                {"name": n, "config_operation": op, "value": value} for n, op, value in changes]}],
            "validate_only": validate_only}).responses
    return response.error_code, response.error_message


def _some_logger(server: Server) -> str:
    """A logger besides ``root`` that the broker has, at root's level INFO (klog: a ``klog.*`` one; Kafka: a log4j
    ``kafka.*`` one)."""
    levels = _levels(server)
    names = sorted(n for n, level in levels.items() if n.startswith(("klog.", "kafka.")) and level == "INFO")
    assert names, levels
    return names[0]


def test_describe_lists_root_and_the_brokers_loggers_with_kafkas_level_names(server):
    levels = _levels(server)
    assert levels["root"] == "INFO", levels
    assert set(levels.values()) <= {"OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL"}, levels
    assert len(levels) > 1, levels
    keyed = _describe(server, ["root"])
    assert [(e.name, e.value) for e in keyed.configs] == [("root", "INFO")]
    assert _describe(server, name="").error_code == INVALID_REQUEST
    assert _describe(server, name="99").error_code == INVALID_REQUEST


def test_set_then_delete_a_loggers_level(server):
    name = _some_logger(server)
    assert _alter(server, (name, SET, "TRACE")) == (NONE, None)
    assert _levels(server)[name] == "TRACE"
    assert _alter(server, (name, SET, "WARN")) == (NONE, None)
    assert _levels(server)[name] == "WARN"
    assert _alter(server, (name, DELETE, None)) == (NONE, None)
    assert _levels(server)[name] == _levels(server)["root"] == "INFO"   # inherited again
    # validate_only checks and changes nothing
    assert _alter(server, (name, SET, "ERROR"), validate_only=True) == (NONE, None)
    assert _levels(server)[name] == "INFO"


def test_invalid_logger_changes_are_refused_with_kafkas_codes(server):
    name = _some_logger(server)
    assert _alter(server, (name, SET, "VERBOSE"))[0] == INVALID_CONFIG
    assert _alter(server, (name, SET, "debug"))[0] == INVALID_CONFIG   # level names are upper case
    assert _alter(server, (f"no.such.logger.{uuid.uuid4().hex[:8]}", SET, "DEBUG"))[0] == INVALID_CONFIG
    assert _alter(server, ("root", DELETE, None))[0] == INVALID_REQUEST
    assert _alter(server, (name, APPEND, "DEBUG"))[0] == INVALID_REQUEST
    assert _alter(server, (name, SUBTRACT, "DEBUG"))[0] == INVALID_REQUEST
    assert _alter(server, (name, SET, None))[0] == INVALID_REQUEST   # a null value
    assert _alter(server, (name, SET, "DEBUG"), name="99")[0] == INVALID_REQUEST   # another broker
    # one refused change refuses the resource's others too
    assert _alter(server, (name, SET, "DEBUG"), ("root", DELETE, None))[0] == INVALID_REQUEST
    assert _levels(server)[name] == "INFO"
    with server.wire() as wire:   # the legacy AlterConfigs has no BROKER_LOGGER
        [legacy] = wire.request(ApiKey.ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": NODE_ID, "configs": [
                {"name": name, "value": "DEBUG"}]}], "validate_only": False}).responses
    assert legacy.error_code == INVALID_REQUEST, legacy
    assert _levels(server)[name] == "INFO"


def _kafka_configs(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return kafka_tools.run_kafka_tool(kafka_tools.CONFIG_COMMAND, "--bootstrap-server", server.bootstrap,
                                      "--entity-type", "broker-loggers", "--entity-name", NODE_ID, *args)


def test_kafka_configs_describes_and_alters_broker_loggers(server):
    name = _some_logger(server)
    described = _kafka_configs(server, "--describe")
    assert described.returncode == 0, described.stderr + described.stdout
    assert "root=INFO" in described.stdout, described.stdout
    assert f"{name}=INFO" in described.stdout, described.stdout
    altered = _kafka_configs(server, "--alter", "--add-config", f"{name}=DEBUG")
    assert altered.returncode == 0, altered.stderr + altered.stdout
    assert _levels(server)[name] == "DEBUG"
    deleted = _kafka_configs(server, "--alter", "--delete-config", name)
    assert deleted.returncode == 0, deleted.stderr + deleted.stdout
    assert _levels(server)[name] == "INFO"
    refused = _kafka_configs(server, "--alter", "--add-config", f"{name}=LOUD")
    assert refused.returncode != 0
    assert "not a supported log level" in refused.stderr + refused.stdout


def test_a_klog_logger_set_to_debug_logs_its_debug_lines_until_deleted(server):
    if server.kind != "klog":
        pytest.skip("klog's own loggers and log lines")
    node = server.node
    assert node is not None
    # klog.broker.server logs every request at DEBUG ("request api_key=... client_id=...")
    assert _levels(server)["klog.broker.server"] == "INFO"
    before = f"before-{uuid.uuid4().hex[:8]}"
    with server.wire(before) as wire:
        wire.request(ApiKey.API_VERSIONS, 0, {})
    assert _alter(server, ("klog.broker.server", SET, "DEBUG")) == (NONE, None)
    during = f"during-{uuid.uuid4().hex[:8]}"
    with server.wire(during) as wire:
        wire.request(ApiKey.API_VERSIONS, 0, {})
    until(lambda: any(f"client_id='{during}'" in line and " DEBUG klog.broker.server: " in line
                      for line in node.lines), "the DEBUG line of a request", timeout=30)
    assert _alter(server, ("klog.broker.server", DELETE, None)) == (NONE, None)
    assert _levels(server)["klog.broker.server"] == "INFO"
    after = f"after-{uuid.uuid4().hex[:8]}"
    with server.wire(after) as wire:
        wire.request(ApiKey.API_VERSIONS, 0, {})
    # a change logged after that request's answer: every line the request logged is in the log before it
    marker = "klog.broker.loggers"   # logs each change at WARN
    assert _alter(server, (marker, SET, "INFO")) == (NONE, None)
    until(lambda: any(f"Updated the log level of {marker} to INFO" in line for line in node.lines),
          "the WARN line of the last change", timeout=30)
    assert _alter(server, (marker, DELETE, None)) == (NONE, None)
    text = "\n".join(node.lines)
    assert f"client_id='{before}'" not in text
    assert f"client_id='{after}'" not in text


def test_a_mixed_incremental_alter_configs_is_answered_in_the_requests_order(server):
    """Resources the broker answers itself (a BROKER_LOGGER, a refused other broker's id) among ones the
    controller answers (an unknown topic, the cluster-wide broker default): the answers keep the request's order,
    as Kafka's ConfigAdminManager reassembles them."""
    TOPIC, BROKER = 2, 4
    asked = [(TOPIC, "no-such-topic-" + uuid.uuid4().hex[:8], "retention.ms", "1000"),
             (BROKER_LOGGER, NODE_ID, "root", "INFO"),
             (BROKER, "", "log.retention.ms", "3600000"),
             (BROKER, "99", "log.cleaner.threads", "2")]
    with server.wire() as wire:
        responses = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": rtype, "resource_name": name, "configs": [
                {"name": key, "config_operation": SET, "value": value}]} for rtype, name, key, value in asked],
            "validate_only": True}).responses
    assert [(r.resource_type, r.resource_name) for r in responses] == [(t, n) for t, n, _, _ in asked]
    assert [r.error_code for r in responses] == [3, NONE, NONE, INVALID_REQUEST]   # 3: UNKNOWN_TOPIC_OR_PARTITION
