"""Apache Kafka 4.x's own Java CLI tools (from .cache/kafka/libs, installed by tools/install-peers.sh) against a
real klog-broker process: TopicCommand, ConfigCommand, ConsoleProducer, ConsoleConsumer, ProducerPerformance,
ConsumerGroupCommand, LogDirsCommand. These run the Java client (idempotent producer by default) and the Java admin client."""

from __future__ import annotations

import uuid

import pytest

from klog.partitioner import partition_for_key
from klog.testing import kafka_tools as kt
from klog.testing.process import BrokerProcess
from klog.testing.wire import fetch_raw

pytestmark = [pytest.mark.timeout(120), pytest.mark.java]

LIBS = kt.kafka_libs_dir(__file__)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    assert LIBS is not None, "Kafka jars missing: run tools/install-peers.sh"
    with BrokerProcess(tmp_path_factory.mktemp("java"), {"num.partitions": 1}) as proc:
        yield proc


def tool(main_class, *args, input=None, timeout=90):
    result = kt.run_kafka_tool(main_class, *args, libs=LIBS, input=input, timeout=timeout)
    assert result.returncode == 0, f"{main_class} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def topics(broker, *args):
    return tool(kt.TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap_servers, *args)


def topic_name():
    return f"java-{uuid.uuid4().hex[:10]}"


def test_topic_command_create_describe_alter_list_delete(broker):
    name = topic_name()
    assert "Created topic" in topics(broker, "--create", "--topic", name, "--partitions", "3",
                                     "--config", "retention.ms=86400000")
    described = topics(broker, "--describe", "--topic", name)
    assert "PartitionCount: 3" in described and "retention.ms=86400000" in described
    topics(broker, "--alter", "--topic", name, "--partitions", "5")
    assert "PartitionCount: 5" in topics(broker, "--describe", "--topic", name)
    assert name in topics(broker, "--list").split()
    topics(broker, "--delete", "--topic", name)
    assert name not in topics(broker, "--list").split()


def test_config_command_alters_and_describes_topic_configs(broker):
    name = topic_name()
    topics(broker, "--create", "--topic", name, "--partitions", "1")
    tool(kt.CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap_servers, "--alter", "--entity-type", "topics",
         "--entity-name", name, "--add-config", "max.message.bytes=500000,cleanup.policy=compact")
    out = tool(kt.CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap_servers, "--describe", "--entity-type",
               "topics", "--entity-name", name)
    assert "max.message.bytes=500000" in out and "cleanup.policy=compact" in out
    out = tool(kt.CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap_servers, "--describe", "--entity-type",
               "brokers", "--entity-name", "1", "--all")
    assert "num.partitions=1" in out


# gzip, snappy and lz4 nightly (make test-long): each a JVM producer and consumer, the codecs are the same code paths
@pytest.mark.parametrize("codec", ["none", *(pytest.param(c, marks=pytest.mark.long) for c in ("gzip", "snappy", "lz4")), "zstd"])
def test_console_producer_and_consumer_round_trip(broker, codec):
    name = topic_name()
    topics(broker, "--create", "--topic", name, "--partitions", "3")
    lines = "".join(f"h1:a{i},h2:b{i}\tkey{i}\tvalue {i}\n" for i in range(30)) + "h1:z\tnullkey\tNULL\n"
    tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name,
         "--compression-codec", codec, "--reader-property", "parse.key=true", "--reader-property",
         "parse.headers=true", "--reader-property", "null.marker=NULL", input=lines)
    out = tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name,
               "--from-beginning", "--max-messages", "31", "--timeout-ms", "20000",
               "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
               "--formatter-property", "print.partition=true", "--formatter-property", "null.literal=NULL",
               "--group", f"cc-{uuid.uuid4().hex[:6]}")
    got = sorted(out.strip().splitlines())
    expected = sorted([f"Partition:{partition_for_key(f'key{i}'.encode(), 3)}\th1:a{i},h2:b{i}\tkey{i}\tvalue {i}"
                       for i in range(30)] + [f"Partition:{partition_for_key(b'nullkey', 3)}\th1:z\tnullkey\tNULL"])
    assert got == expected     # Java's partitioner placed every key where klog.partitioner says
    codec_id = ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
    batches = [b for p in range(3) for b in fetch_raw(broker.host, broker.port, name, p)]
    assert {b.attributes & 0x07 for b in batches} == {codec_id}
    assert all(b.producer_id >= 0 for b in batches)   # the Java producer is idempotent by default


def test_console_consumer_reads_a_partition_from_an_offset(broker):
    name = topic_name()
    topics(broker, "--create", "--topic", name, "--partitions", "1")
    tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name,
         input="".join(f"m{i}\n" for i in range(10)))
    out = tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name,
               "--partition", "0", "--offset", "6", "--max-messages", "4", "--timeout-ms", "20000",
               "--formatter-property", "print.offset=true")
    assert [line.split("\t")[-1] for line in out.strip().splitlines()] == ["m6", "m7", "m8", "m9"]


def test_producer_performance_acks_all(broker):
    name = topic_name()
    topics(broker, "--create", "--topic", name, "--partitions", "2")
    out = tool(kt.PRODUCER_PERFORMANCE, "--topic", name, "--num-records", "20000", "--record-size", "100",
               "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap_servers}",
               "acks=all", "linger.ms=5", "batch.size=65536")
    assert "20000 records sent" in out
    total = sum(sum(len(b.records) for b in fetch_raw(broker.host, broker.port, name, p)) for p in range(2))
    assert total == 20000


def test_consumer_group_command_lists_and_describes_groups(broker):
    name = topic_name()
    group = f"jg-{uuid.uuid4().hex[:6]}"
    topics(broker, "--create", "--topic", name, "--partitions", "2")
    tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name,
         input="".join(f"x{i}\n" for i in range(8)))
    tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name, "--group", group,
         "--from-beginning", "--max-messages", "8", "--timeout-ms", "20000")
    listed = tool(kt.CONSUMER_GROUP_COMMAND, "--bootstrap-server", broker.bootstrap_servers, "--list")
    assert group in listed.split()
    described = tool(kt.CONSUMER_GROUP_COMMAND, "--bootstrap-server", broker.bootstrap_servers, "--describe",
                     "--group", group)
    lag_lines = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert sum(int(cols[3]) for cols in lag_lines) == 8     # CURRENT-OFFSET summed over partitions


def test_consumer_protocol_console_consumer_commits_and_fetches_offsets_by_topic_id(tmp_path):
    """The KIP-848 Java consumer (group.protocol=consumer) picks OffsetCommit and OffsetFetch v10 (topics by id) and
    Metadata v13 from klog's ApiVersions (the broker's DEBUG request trace shows them), and a second consumer of
    the group resumes where the first committed."""
    import re

    with BrokerProcess(tmp_path, {"num.partitions": 1}, log_level="DEBUG") as proc:
        name, group = topic_name(), f"jc-{uuid.uuid4().hex[:6]}"
        topics(proc, "--create", "--topic", name, "--partitions", "2")
        tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", proc.bootstrap_servers, "--topic", name,
             input="".join(f"v{i}\n" for i in range(10)))
        seen: list[str] = []
        for _ in range(2):
            out = tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", proc.bootstrap_servers, "--topic", name,
                       "--group", group, "--from-beginning", "--max-messages", "5", "--timeout-ms", "20000",
                       "--command-property", "group.protocol=consumer")
            seen += [line for line in out.splitlines() if re.fullmatch(r"v\d", line)]
        assert sorted(seen) == [f"v{i}" for i in range(10)]   # the second consumer read on from the commits
        used = {(int(m[1]), int(m[2])) for line in proc.lines
                if (m := re.search(r"request api_key=(\d+) version=(\d+)", line))}
    assert {(8, 10), (9, 10), (3, 13)} <= used


def test_log_dirs_command_describes_partition_sizes(broker):
    import json

    name = topic_name()
    topics(broker, "--create", "--topic", name, "--partitions", "2")
    tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap_servers, "--topic", name,
         input="".join(f"line-{i}\n" for i in range(20)))
    out = tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", broker.bootstrap_servers,
               "--describe", "--topic-list", name)
    report = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    [broker_entry] = report["brokers"]
    [log_dir] = broker_entry["logDirs"]
    assert log_dir["error"] is None
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert set(sizes) == {f"{name}-0", f"{name}-1"} and sum(sizes.values()) > 20 * len("line-00")
