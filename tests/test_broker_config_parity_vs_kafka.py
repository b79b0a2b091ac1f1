"""klog's promise "a properties file that starts an Apache Kafka KRaft node starts a klog node", checked against
Apache Kafka 4.3.1: DescribeConfigs (v4, all configs, with synonyms) of a broker and of a topic name the same
configs with the same types, read-only flags and default values on both, but for the deliberate differences
listed here; a server.properties holding every broker config Kafka describes, at Kafka's default, starts both; and
values Kafka refuses at start-up stop klog's start naming the key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.kafka import KafkaStartError, apache_kafka, one_broker_node
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(600)]

TOPIC, BROKER = 2, 4
DEFAULT_CONFIG = 5

#: klog's bounded defaults where Kafka's are unbounded or sized for a dedicated acceptor thread
#: (docs/operations.md), the internal topics' replication defaults (3 and 2 on Kafka too, but a single klog node
#: uses 1: these are Kafka's), and the node's identity and listeners a klog node starts without
DEFAULT_DIFFERENCES = {
    "max.connections": ("10000", "2147483647"),
    "queued.max.request.bytes": ("268435456", "-1"),
    "socket.listen.backlog.size": ("1024", "50"),
    # a klog node starts without node.id/process.roles/listeners (one node that is its own quorum)
    "node.id": ("1", None),
    "process.roles": ("broker,controller", None),
    "listeners": ("PLAINTEXT://127.0.0.1:9092", "PLAINTEXT://:9092"),
    "log.dir": ("./klog-data", "/tmp/kafka-logs"),
    # klog maps the CONTROLLER listener name without a line in the file
    "listener.security.protocol.map": (
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
}

#: broker configs Kafka changes at runtime (DynamicBrokerConfig) that klog takes only from server.properties:
#: read-only on klog (docs/compatibility.md, "Broker configs")
READ_ONLY_DIFFERENCES = frozenset({
    "background.threads", "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
    "num.replica.fetchers", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads", "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "group.consumer.assignment.interval.ms", "group.share.assignment.interval.ms",
    "group.streams.assignment.interval.ms", "share.coordinator.cached.buffer.max.bytes",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol", "principal.builder.class",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class", "ssl.keymanager.algorithm", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm", "listener.security.protocol.map",
    "listeners", "group.coordinator.cached.buffer.max.bytes", "metric.reporters", "remote.fetch.max.wait.ms", "remote.list.offsets.request.timeout.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.follower.thread.pool.size", "remote.log.index.file.cache.total.size.bytes",
    "remote.log.reader.threads", "follower.fetch.last.tiered.offset.enable", "config.providers",
})

#: what the harness writes into both nodes' properties (identity, listeners, quorum, data dir): not "defaults"
HARNESS_KEYS = frozenset({
    "node.id", "broker.id", "process.roles", "listeners", "advertised.listeners", "controller.listener.names",
    "listener.security.protocol.map", "log.dirs", "log.dir", "controller.quorum.voters",
    "controller.quorum.bootstrap.servers", "inter.broker.listener.name", "security.inter.broker.protocol",
})

#: value, read_only, config_type, default (its own DEFAULT_CONFIG synonym), synonyms (name, value, source)
Entry = tuple[str | None, bool, int, str | None, tuple[tuple[str, str | None, int], ...]]

def _describe(wire: WireClient, rtype: int, name: str) -> dict[str, Entry]:
    [result] = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": rtype, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False}).results
    assert result.error_code == ErrorCode.NONE, result
    out = {}
    for e in result.configs:
        default = next((s.value for s in e.synonyms if s.name == e.name and s.source == DEFAULT_CONFIG), None)
        out[e.name] = (e.value, e.read_only, e.config_type, default,
                       tuple((s.name, s.value, s.source) for s in e.synonyms))
    return out


def _wire(bootstrap: str) -> WireClient:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return WireClient(host, int(port), client_id="config-parity")


def _create_topic(wire: WireClient, name: str, configs: dict[str, str]) -> Any:
    [topic] = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout_ms": 30000, "validate_only": False}).topics
    return topic


def _described(kind: str, root: Path) -> dict[str, Any]:
    with one_broker_node(kind, root, {}) as (bootstrap, _proc):
        with _wire(bootstrap) as wire:
            assert _create_topic(wire, "t1", {}).error_code == ErrorCode.NONE
            md = wire.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
            node = str(md.brokers[0].node_id)
            return {"broker": _describe(wire, BROKER, node), "topic": _describe(wire, TOPIC, "t1")}


@pytest.fixture(scope="module")
def described(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    yield {kind: _described(kind, tmp_path_factory.mktemp(f"parity-{kind}")) for kind in ("klog", "kafka")}


def test_klog_describes_every_broker_config_kafka_does_and_only_its_own_beside(described: Any) -> None:
    klog, kafka = described["klog"]["broker"], described["kafka"]["broker"]
    assert sorted(set(kafka) - set(klog)) == []
    assert sorted(k for k in set(klog) - set(kafka) if not k.startswith("klog.")) == []


def test_broker_configs_have_kafkas_types_defaults_and_read_only_flags(described: Any) -> None:
    klog, kafka = described["klog"]["broker"], described["kafka"]["broker"]
    common = sorted(set(klog) & set(kafka))
    assert {k: (klog[k][2], kafka[k][2]) for k in common if klog[k][2] != kafka[k][2]} == {}
    defaults = {k: (klog[k][3], kafka[k][3]) for k in common if klog[k][3] != kafka[k][3]}
    assert defaults == DEFAULT_DIFFERENCES
    read_only = {k for k in common if klog[k][1] != kafka[k][1]}
    assert read_only == READ_ONLY_DIFFERENCES
    assert all(klog[k][1] and not kafka[k][1] for k in read_only)   # klog is only ever stricter


def test_topic_configs_are_kafkas(described: Any) -> None:
    klog, kafka = described["klog"]["topic"], described["kafka"]["topic"]
    assert sorted(klog) == sorted(kafka)
    # min.insync.replicas among them: a dynamic cluster default on both (the ELR safety record of a new cluster)
    assert {k: (klog[k], kafka[k]) for k in klog if klog[k] != kafka[k]} == {}


def test_a_properties_file_of_every_kafka_default_starts_klog_and_kafka(described: Any, tmp_path: Path) -> None:
    """Every broker config Kafka describes with a default value, written at that value into one properties file
    (beside the listeners and data dir each harness writes): both start and describe each value back."""
    defaults = {k: v[0] for k, v in described["kafka"]["broker"].items()
                if v[3] is not None and v[0] == v[3] and k not in HARNESS_KEYS}
    assert len(defaults) > 250
    props_file = tmp_path / "server.properties"
    props_file.write_text("".join(f"{k}={v}\n" for k, v in sorted(defaults.items())))
    with BrokerProcess(tmp_path / "klog-data", properties_file=props_file) as node:
        with _wire(node.bootstrap_servers) as wire:
            klog = _describe(wire, BROKER, "1")
    with apache_kafka(tmp_path / "kafka", config=defaults) as bootstrap:
        with _wire(str(bootstrap)) as wire:
            kafka = _describe(wire, BROKER, "1")
    for described_node in (klog, kafka):
        assert {k: described_node[k][0] for k in defaults} == defaults


#: (key, value) Kafka 4.3.1 refuses at start-up (its ConfigDef validators, KafkaConfig's checks, a class it
#: cannot load), among the configs klog accepts without effect or refuses when not the default
BAD_VALUES = [
    ("log.roll.jitter.hours", "-1"),
    ("metrics.num.samples", "0"),
    ("metrics.recording.level", "VERBOSE"),
    ("group.coordinator.cached.buffer.max.bytes", "1024"),
    ("sasl.oauthbearer.assertion.algorithm", "HS256"),
    ("sasl.oauthbearer.assertion.claim.exp.seconds", "86401"),
    ("remote.log.metadata.manager.impl.prefix", ""),
    ("create.topic.policy.class.name", "com.example.NoSuchPolicy"),
    ("client.quota.callback.class", "com.example.NoSuchCallback"),
    ("principal.builder.class", "com.example.NoSuchBuilder"),
    ("log.local.retention.ms", "-3"),
    ("replica.socket.timeout.ms", "100"),   # below replica.fetch.wait.max.ms (500)
    ("early.start.listeners", "NOPE"),
]


@pytest.mark.parametrize(("key", "value"), BAD_VALUES)
def test_a_value_kafka_refuses_at_start_up_stops_klog_naming_the_key(key: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(KafkaStartError):
        with apache_kafka(tmp_path / "kafka", config={key: value}):
            pass
    with pytest.raises(RuntimeError, match=f"config '{key}'"):
        with BrokerProcess(tmp_path / "klog-data", {key: value}):
            pass


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_removed_and_tiered_topic_configs_as_kafka_answers_them(kind: str, tmp_path: Path) -> None:
    """message.downconversion.enable (removed in Kafka 4.0) is an unknown topic config; remote.log.copy.disable and
    remote.log.delete.on.disable are booleans."""
    with one_broker_node(kind, tmp_path, {}) as (bootstrap, _proc):
        with _wire(bootstrap) as wire:
            removed = _create_topic(wire, "t-removed", {"message.downconversion.enable": "true"})
            not_boolean = _create_topic(wire, "t-bad", {"remote.log.copy.disable": "maybe"})
            tiered = _create_topic(wire, "t-tiered", {"remote.log.delete.on.disable": "false",
                                                      "remote.log.copy.disable": "false"})
    assert (removed.error_code, not_boolean.error_code, tiered.error_code) == (
        ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG, ErrorCode.NONE)


_PROVIDERS = "org.apache.kafka.common.config.provider."


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_kafkas_config_providers_resolve_references_from_files_a_directory_and_the_environment(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KIP-297/KIP-887: ${file:path:key}, ${dir:path:file} and ${env:NAME} in a properties file, resolved at
    start-up; a reference to a missing key stays as written; the provider settings are described as Kafka
    describes keys outside its ConfigDef (static, read-only, sensitive, of no type)."""
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("partitions=3\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "threads").write_text("2")
    monkeypatch.setenv("KLOG_PARITY_IO_THREADS", "5")
    props = {
        "config.providers": "file,dir,env",
        "config.providers.file.class": _PROVIDERS + "FileConfigProvider",
        "config.providers.dir.class": _PROVIDERS + "DirectoryConfigProvider",
        "config.providers.env.class": _PROVIDERS + "EnvVarConfigProvider",
        "config.providers.file.param.allowed.paths": str(tmp_path),
        "num.partitions": f"${{file:{secrets}:partitions}}",
        "log.cleaner.threads": f"${{dir:{tmp_path / 'dir'}:threads}}",
        "num.io.threads": "${env:KLOG_PARITY_IO_THREADS}",
        "broker.rack": f"${{file:{secrets}:no.such.key}}",
    }
    with one_broker_node(kind, tmp_path / kind, props) as (bootstrap, _proc):
        with _wire(bootstrap) as wire:
            described = _describe(wire, BROKER, "1")
    assert {k: described[k][0] for k in ("num.partitions", "log.cleaner.threads", "num.io.threads",
                                         "broker.rack")} == {
        "num.partitions": "3", "log.cleaner.threads": "2", "num.io.threads": "5",
        "broker.rack": f"${{file:{secrets}:no.such.key}}"}
    assert (described["config.providers"][0], described["config.providers"][2]) == ("file,dir,env", 7)
    assert described["config.providers.file.class"][:3] == (None, True, 0)


def test_a_config_provider_klog_does_not_have_refuses_the_start_as_on_kafka(tmp_path: Path) -> None:
    props = {"config.providers": "vault", "config.providers.vault.class": "com.example.VaultConfigProvider"}
    with pytest.raises(KafkaStartError):
        with apache_kafka(tmp_path / "kafka", config=props):
            pass
    with pytest.raises(RuntimeError, match="config 'config.providers.vault.class'"):
        with BrokerProcess(tmp_path / "klog-data", props):
            pass


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_log_roll_jitter_hours_is_the_default_of_segment_jitter_ms_without_log_roll_jitter_ms(
        kind: str, tmp_path: Path) -> None:
    with one_broker_node(kind, tmp_path, {"log.roll.jitter.hours": 2, "log.retention.hours": 5}) as (bootstrap, _):
        with _wire(bootstrap) as wire:
            assert _create_topic(wire, "t-jitter", {}).error_code == ErrorCode.NONE
            described = _describe(wire, TOPIC, "t-jitter")
    # Kafka's synonyms of a topic config start at its primary broker key (log.roll.jitter.ms, log.retention.ms):
    # neither is set, so neither topic config has a synonym and both are described as defaults
    assert described["segment.jitter.ms"][0] == str(2 * 3_600_000)
    assert described["retention.ms"][0] == str(5 * 3_600_000)
    assert described["segment.jitter.ms"][4] == described["retention.ms"][4] == ()
