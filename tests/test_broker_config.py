"""The broker's typed config schema: Kafka property names, defaults, and errors that name the key."""

import pytest

from klog.broker.config import BrokerConfig, ConfigError, load_properties, parse_overrides, validate_topic_configs


def test_defaults_serve_one_plaintext_listener_on_localhost_9092():
    config = BrokerConfig({})
    assert [(l.name, l.host, l.port) for l in config.listeners] == [("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.node_id == 1
    assert config["auto.create.topics.enable"] is True
    assert config.log_dirs[0].endswith("klog-data")
    assert config.retention_ms == 168 * 3_600_000


def test_unknown_key_stops_startup_naming_the_key():
    with pytest.raises(ConfigError, match="'log.segmnet.bytes'"):
        BrokerConfig({"log.segmnet.bytes": "100"})


@pytest.mark.parametrize("key,value", [
    ("num.partitions", "zero"), ("num.partitions", "0"), ("auto.create.topics.enable", "yes"),
    ("log.segment.bytes", "99999999999"), ("listeners", "PLAINTEXT:/127.0.0.1:9092"),
    ("listeners", "SSL://127.0.0.1:9093,SSL://127.0.0.1:9094"), ("log.cleanup.policy", "shred"),
    ("listener.security.protocol.map", "PLAINTEXT:KERBEROS"),
    ("default.replication.factor", "3"), ("klog.log.max.open.segment.files", "0"),
    ("klog.log.max.open.segment.files", "many"),
])
def test_invalid_value_stops_startup_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        BrokerConfig({key: value})


def test_kafka_server_properties_file_loads_with_overrides(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "# Kafka's own sample, trimmed\n"
        "process.roles=broker,controller\nnode.id=3\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n"
        "num.network.threads=3\nlog.dirs=/tmp/kraft-combined-logs\nnum.partitions=1\n"
        "offsets.topic.replication.factor=1\nlog.retention.hours=168\n"
        "log.segment.bytes=1073741824\nlog.retention.check.interval.ms=300000\n")
    raw = load_properties(str(props))
    raw.update(parse_overrides(["num.partitions=4", "log.retention.ms=1000"]))
    config = BrokerConfig(raw)
    assert config.node_id == 3
    assert [(l.name, l.host, l.port) for l in config.listeners] == [("PLAINTEXT", "", 9092)]
    assert config.advertised["PLAINTEXT"].host == "localhost"
    assert config["num.partitions"] == 4
    assert config.retention_ms == 1000
    assert config.topic_default("retention.ms") == 1000
    assert "num.network.threads" in config.ignored_keys()


def test_topic_defaults_follow_broker_synonyms():
    config = BrokerConfig({"log.segment.bytes": "1048576", "message.max.bytes": "2000000"})
    assert config.topic_default("segment.bytes") == 1048576
    assert config.topic_default("max.message.bytes") == 2000000
    assert config.topic_default_source("segment.bytes") == ("log.segment.bytes", True)
    assert config.topic_default_source("retention.bytes") == ("log.retention.bytes", False)


def test_topic_config_validation_names_the_key():
    assert validate_topic_configs({"cleanup.policy": "compact,delete"}) == {"cleanup.policy": ["compact", "delete"]}
    with pytest.raises(ConfigError, match="'retention.mss'"):
        validate_topic_configs({"retention.mss": "1"})
    with pytest.raises(ConfigError, match="'message.timestamp.type'"):
        validate_topic_configs({"message.timestamp.type": "WallTime"})


def test_topic_and_broker_compression_accept_kafkas_codecs_and_levels():
    for codec in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        assert validate_topic_configs({"compression.type": codec}) == {"compression.type": codec}
    assert BrokerConfig({"compression.type": "gzip"}).topic_default("compression.type") == "gzip"
    assert BrokerConfig({"compression.zstd.level": "9"}).topic_default("compression.zstd.level") == 9
    with pytest.raises(ConfigError, match="'compression.type'.*brotli"):
        validate_topic_configs({"compression.type": "brotli"})
    for key, bad in (("compression.gzip.level", "0"), ("compression.gzip.level", "10"),
                     ("compression.lz4.level", "18"), ("compression.zstd.level", "23")):
        with pytest.raises(ConfigError, match=f"'{key}'"):
            validate_topic_configs({key: bad})
    assert validate_topic_configs({"compression.gzip.level": "-1", "compression.zstd.level": "-5"}) == {
        "compression.gzip.level": -1, "compression.zstd.level": -5}


def test_an_env_config_providers_allowlist_that_is_no_regex_stops_the_start_naming_it():
    from klog.metadata.config_providers import resolve

    with pytest.raises(ConfigError, match=r"config\.providers\.env\.param\.allowlist\.pattern.*regular expression"):
        resolve({"config.providers": "env",
                 "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                 "config.providers.env.param.allowlist.pattern": "(unclosed", "sasl.jaas.config": "${env:SECRET}"})
