"""Consumer groups with Apache Kafka's Java consumer (classic and the KIP-848 consumer protocol) and Kafka's
consumer-group tool (ConsumerGroupCommand: list, describe with lag, reset offsets) against ``klog-broker``."""

from __future__ import annotations

import re
import time

import pytest

from klog.testing.kafka_tools import CONSOLE_CONSUMER, CONSUMER_GROUP_COMMAND, run_kafka_tool
from klog.testing.process import BrokerProcess

from groups_support import KAFKA_LIBS, kafka_classpath
from test_groups_clients import (MOVE_BOUND_S, Worker, assert_per_partition_order, consumed, create_topic,
                                 produce, produce_and_consume, start_group, wait_covered,
                                 workers)  # noqa: F401 - fixture

pytestmark = pytest.mark.java

KIP848 = {"group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 1000,
          "group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    kafka_classpath()  # fail early and clearly without the jars
    with BrokerProcess(tmp_path_factory.mktemp("groups-java"), {"num.partitions": 4, **KIP848}) as b:
        yield b


def tool(*args: str) -> str:
    r = run_kafka_tool(CONSUMER_GROUP_COMMAND, *args, libs=KAFKA_LIBS, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout


def describe_rows(bootstrap: str, group: str) -> dict[int, tuple[int, int, int]]:
    """partition -> (current offset, log end offset, lag) from `kafka-consumer-groups --describe`."""
    out = tool("--bootstrap-server", bootstrap, "--describe", "--group", group)
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[2].isdigit():
            cur = -1 if cols[3] == "-" else int(cols[3])
            lag = -1 if cols[5] == "-" else int(cols[5])
            rows[int(cols[2])] = (cur, int(cols[4]), lag)
    return rows


@pytest.mark.long
def test_console_consumer_group_then_describe_with_lag_and_reset_offsets(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "jtool", 3)
    produce(bs, "jtool", 60)
    r = run_kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", bs, "--topic", "jtool", "--group", "jg",
                       "--from-beginning", "--max-messages", "40", "--timeout-ms", "30000", libs=KAFKA_LIBS)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 40, r.stderr[-2000:]
    assert "jg" in tool("--bootstrap-server", bs, "--list").split()
    rows = describe_rows(bs, "jg")
    assert set(rows) == {0, 1, 2}
    assert sum(end for _, end, _ in rows.values()) == 60
    assert sum(cur for cur, _, _ in rows.values()) == 40, rows
    assert sum(lag for _, _, lag in rows.values()) == 20
    state = tool("--bootstrap-server", bs, "--describe", "--group", "jg", "--state")
    assert re.search(r"jg\s+\S+\s+\(1\)\s+\S+\s+Empty\s+0", state), state
    out = tool("--bootstrap-server", bs, "--reset-offsets", "--group", "jg", "--topic", "jtool", "--to-earliest",
               "--execute")
    assert "NEW-OFFSET" in out
    rows = describe_rows(bs, "jg")
    assert all(cur == 0 and lag == end for cur, end, lag in rows.values()), rows
    out = tool("--bootstrap-server", bs, "--reset-offsets", "--group", "jg", "--topic", "jtool:1", "--to-offset",
               "3", "--execute")
    assert describe_rows(bs, "jg")[1][0] == 3
    # Everything is consumed again from the reset positions.
    r = run_kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", bs, "--topic", "jtool", "--group", "jg",
                       "--max-messages", "57", "--timeout-ms", "30000", libs=KAFKA_LIBS)
    assert len(r.stdout.splitlines()) == 57, r.stderr[-2000:]
    out = tool("--bootstrap-server", bs, "--delete", "--group", "jg")
    assert "was successful" in out
    assert "jg" not in tool("--bootstrap-server", bs, "--list").split()


def test_java_classic_consumers_share_partitions_and_describe_shows_members(broker, workers):
    bs = broker.bootstrap_servers
    ws = start_group(workers, bs, "jclassic", 4, "jgc", ["java-classic"] * 2, 90)
    out = tool("--bootstrap-server", bs, "--describe", "--group", "jgc", "--members")
    assert len([ln for ln in out.splitlines() if ln.startswith("jgc ")]) == 2, out
    produce_and_consume(ws, bs, "jclassic", 200, 60)
    assert len(consumed(ws)) == 200
    assert_per_partition_order(ws)


def test_java_consumer_with_the_kip848_protocol(broker, workers):
    bs = broker.bootstrap_servers
    ws = start_group(workers, bs, "j848", 4, "jg848", ["java-consumer"] * 2, 90)
    produce_and_consume(ws, bs, "j848", 200, 60)
    recs = consumed(ws)
    assert len(recs) == 200 and len({(r["p"], r["o"]) for r in recs}) == 200
    assert_per_partition_order(ws)
    out = tool("--bootstrap-server", bs, "--describe", "--group", "jg848", "--state")
    assert re.search(r"jg848\s+\S+\s+\(1\)\s+uniform\s+Stable\s+2", out), out
    rows = describe_rows(bs, "jg848")
    assert sum(cur for cur, _, _ in rows.values()) == 200 and all(lag == 0 for _, _, lag in rows.values()), rows

    # A third member joins: partitions are revoked and reassigned incrementally; then one is SIGKILLed.
    third = Worker("java-consumer", bs, "j848", "jg848")
    workers.append(third)
    wait_covered(ws + [third], 4, 60)
    killed_at = time.monotonic()
    third.kill()
    wait_covered(ws, 4, MOVE_BOUND_S + 20)
    assert time.monotonic() - killed_at - 1.0 < MOVE_BOUND_S + 5
    produce_and_consume(ws, bs, "j848", 100, 60, start=200)
    # A clean close leaves the group (member epoch -1): the survivor takes everything at once.
    ws[1].terminate()
    wait_covered(ws[:1], 4, 20)
