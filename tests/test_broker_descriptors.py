"""The descriptor budget under a low ``ulimit -n``: connections beyond it are refused cleanly (no EMFILE, a few
log lines for thousands of refusals), partitions stop at klog.max.partitions.per.broker with POLICY_VIOLATION
validated up front; the files of a committed creation that run out of descriptors midway are removed and the
partitions not served, and a creation a crash cut short is finished at the next start."""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import socket
import time
import uuid
from pathlib import Path

import pytest
from test_broker_robustness import assert_serving

from klog.broker.descriptors import DescriptorBudget
from klog.broker.log_limit import RateLimitedLog
from klog.protocol import ApiKey, encode_request
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)

OPEN_FILES = 1024
#: a creation wide enough to kill the broker while it makes the files, narrow enough to leave descriptors for
#: connections once they are all made
CRASHED_PARTITIONS = 4_000
BACKLOG = 128
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, TOPIC_ALREADY_EXISTS, POLICY_VIOLATION = 3, 6, 36, 44


def _raise_own_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def _budget_line(broker) -> tuple[DescriptorBudget, int]:
    """(the descriptor budget, the partition limit) from the broker's startup line."""
    for line in broker.lines:
        match = re.search(r"RLIMIT_NOFILE (\d+) = \d+ reserved \+ (\d+) accept burst \+ (\d+) sealed segment "
                          r"files .* partitions up to (\d+)", line)
        if match:
            return DescriptorBudget(int(match[1]), int(match[3]), int(match[2])), int(match[4])
    raise AssertionError(broker.lines)


def _create_topics(wire, topics: dict[str, int]):
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
        for name, n in topics.items()], "timeout_ms": 60000, "validate_only": False})
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


def _produce(wire, topic: str, partition: int) -> int:
    """The error code of a one-record acks=1 Produce to ``topic``-``partition``."""
    response = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                "topic_data": [{"name": topic, "partition_data": [
                                                    {"index": partition,
                                                     "records": encode_batch([{"key": None, "value": b"v"}])}]}]})
    return int(response.responses[0].partition_responses[0].error_code)


def _partitions_held(wire) -> int:
    metadata = wire.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
    return sum(len(t.partitions) for t in metadata.topics)


def _partition_dirs(data_dir, topic: str) -> list[str]:
    return [n for n in os.listdir(data_dir) if n.startswith(f"{topic}-")]


def _committed_topics(data_dir) -> set[str]:
    """Topics of the metadata log (created and not removed since), read from its segment file."""
    from klog.metadata.records import decode_batches

    segment = Path(data_dir) / "__cluster_metadata-0" / ("0" * 20 + ".log")
    names: dict = {}
    for batch in decode_batches(segment.read_bytes()):
        for r in batch.records if not batch.is_control else ():
            if r.name == "TopicRecord":
                names[r.data.topic_id] = r.data.name
            elif r.name == "RemoveTopicRecord":
                names.pop(r.data.topic_id, None)
    return set(names.values())


# ---- sans-IO -------------------------------------------------------------------------------------------

def test_the_budget_counts_two_descriptors_per_connection_and_one_per_partition():
    budget = DescriptorBudget(open_files_limit=1024, segment_files=512, accept_burst=128)
    assert budget.shared == 1024 - 64 - 128 - 512
    assert budget.max_connections(0) == budget.shared // 2
    # a small limit is shared evenly: half for partitions, half for (two-descriptor) connections
    assert budget.default_max_partitions(10_000) == budget.shared // 2
    assert budget.max_connections(budget.default_max_partitions(10_000)) == budget.shared // 4
    # a larger one keeps room for CONNECTIONS_FLOOR connections (or max.connections if lower)
    large = DescriptorBudget(open_files_limit=20_000, segment_files=10_000, accept_burst=1024)
    assert large.max_connections(large.default_max_partitions(10_000)) == 1000
    assert large.max_connections(large.default_max_partitions(100)) == 100
    assert DescriptorBudget(None, 10_000, 1024).max_connections(10**6) is None


def test_a_flood_of_refusals_logs_one_line_a_second_counting_the_rest(caplog):
    now = [100.0]
    limited = RateLimitedLog(logging.getLogger("flood"), "refused connections", 1.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="flood"):
        assert limited.warning("refused #0")
        for i in range(1, 500):
            now[0] += 0.001
            assert not limited.warning(f"refused #{i}")
        limited.flush()  # within the interval: nothing yet
        assert [r.getMessage() for r in caplog.records] == ["refused #0"]
        now[0] += 1.0
        limited.flush()
        now[0] += 1.0
        assert limited.warning("refused #500")
    assert [r.getMessage() for r in caplog.records] == [
        "refused #0", "499 more refused connections not logged; the last: refused #499", "refused #500"]


# ---- a real broker under a low ulimit -n ---------------------------------------------------------------

@pytest.fixture
def low_limit_broker(tmp_path):
    with BrokerProcess(tmp_path, {"socket.listen.backlog.size": BACKLOG}, open_files_limit=OPEN_FILES) as broker:
        yield broker


@pytest.mark.long
def test_ten_thousand_connection_attempts_are_refused_cleanly_beyond_the_budget(low_limit_broker):
    broker = low_limit_broker
    budget, _ = _budget_line(broker)
    room = budget.max_connections(0)
    assert budget.open_files_limit == OPEN_FILES and room < 410
    _raise_own_fd_limit(4096)
    mark = len(broker.lines)
    attempts = served_max = 0
    for round_ in range(25):
        socks = []
        try:
            for _ in range(410):  # more than the budget's room each round
                sock = socket.create_connection((broker.host, broker.port), timeout=10)
                socks.append(sock)
                attempts += 1
            served = 0
            for i, sock in enumerate(socks):
                try:
                    sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, i, "flood", {}))
                    if len(sock.recv(4, socket.MSG_WAITALL)) == 4:
                        served += 1
                except OSError:  # refused: reset by the broker
                    pass
            served_max = max(served_max, served)
            assert broker.open_descriptors() < OPEN_FILES
        finally:
            for sock in socks:
                sock.close()
    assert attempts >= 10_000
    assert 0 < served_max <= room  # the refused ones never reached a handler
    lines = broker.lines[mark:]
    refusals = [line for line in lines if "refusing connection" in line or "refused" in line]
    assert refusals and all("descriptor budget" in line for line in refusals), refusals[:3]
    assert len(refusals) < 200, len(refusals)  # at most a line a second, not one per refusal
    assert not [line for line in lines if "Too many open files" in line or "Traceback" in line
                or "out of system resource" in line]
    assert_serving(broker)


def test_partitions_stop_at_the_limit_with_policy_violation_validated_up_front(low_limit_broker):
    broker = low_limit_broker
    budget, limit = _budget_line(broker)
    assert limit == budget.default_max_partitions(10_000)
    room = budget.max_connections(limit)
    with WireClient(broker.host, broker.port) as wire:
        held = _partitions_held(wire)  # the broker's own (__consumer_offsets, once made) count too
        first = f"lim-{uuid.uuid4().hex[:8]}"
        assert _create_topics(wire, {first: limit - held - 1}) == {first: (0, None)}
        too_many = f"lim-{uuid.uuid4().hex[:8]}"
        code, message = _create_topics(wire, {too_many: 2})[too_many]
        assert code == POLICY_VIOLATION and "klog.max.partitions.per.broker" in message, message
        assert _partition_dirs(broker.data_dir, too_many) == []
        response = wire.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": first, "count": limit - held + 1,
                                "assignments": None}], "timeout_ms": 5000, "validate_only": False})
        assert response.results[0].error_code == POLICY_VIOLATION, response
        last = f"lim-{uuid.uuid4().hex[:8]}"
        assert _create_topics(wire, {last: 1}) == {last: (0, None)}  # exactly at the limit
        assert _partitions_held(wire) == limit
    # with every partition held, the connections the budget leaves are all served
    clients = [WireClient(broker.host, broker.port) for _ in range(room - 2)]
    try:
        for wire in clients:
            assert wire.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        for wire in clients:
            wire.close()
    assert broker.open_descriptors() < OPEN_FILES


def test_partitions_a_broker_runs_out_of_descriptors_for_are_not_served_and_leave_nothing_behind(tmp_path):
    # An explicit limit beyond what the descriptors allow: making a committed creation's files runs into EMFILE
    # partway. As on Kafka, CreateTopics is answered once the controller committed the topic; the broker, which
    # makes the files when it applies the records, serves none of the partitions it could not make all of.
    config = {"socket.listen.backlog.size": BACKLOG, "klog.max.partitions.per.broker": 50_000}
    with BrokerProcess(tmp_path, config, open_files_limit=OPEN_FILES) as broker:
        assert any("leaves no descriptors for connections" in line for line in broker.lines)
        wide = f"wide-{uuid.uuid4().hex[:6]}"
        with WireClient(broker.host, broker.port, timeout=120) as wire:
            # (9,999 partitions: with its topic record 10,000 records, the most one request may make, as Kafka's
            # controller bounds it)
            assert _create_topics(wire, {wide: 9_999}) == {wide: (0, None)}
            # answered once this broker applied it: its failure to make the files is logged by then
            assert any(f"of topic {wide} are not served here" in line and "nothing was kept" in line
                       for line in broker.lines), broker.lines[-5:]
            assert _partition_dirs(broker.data_dir, wide) == []
            refused = _produce(wire, wide, 0)
            assert refused in (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION), refused
            small = f"small-{uuid.uuid4().hex[:6]}"
            assert _create_topics(wire, {small: 3}) == {small: (0, None)}
            assert [_produce(wire, small, p) for p in range(3)] == [0, 0, 0]   # the broker goes on serving
            deleted = wire.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [wide], "timeout_ms": 30000})
            assert deleted.responses[0].error_code == 0
        broker.restart()
        with WireClient(broker.host, broker.port) as wire:
            metadata = wire.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})
        assert sorted(t.name for t in metadata.topics if not t.is_internal) == [small]
        assert [len(t.partitions) for t in metadata.topics if t.name == small] == [3]
        assert sorted(_partition_dirs(broker.data_dir, small)) == [f"{small}-{p}" for p in range(3)]
        assert _partition_dirs(broker.data_dir, wide) == []
        assert {name for name in _committed_topics(broker.data_dir) if not name.startswith("__")} == {small}


def test_a_creation_whose_files_a_crash_cut_short_is_finished_at_the_next_start(tmp_path):
    """The topic is committed before any broker makes its files (Kafka's order: brokers create logs as they apply
    the records): a broker killed while making them makes the rest when it starts again and applies its image."""
    _raise_own_fd_limit(32768)  # the broker inherits it: room for the partitions and connections after them
    with BrokerProcess(tmp_path, {"klog.max.partitions.per.broker": CRASHED_PARTITIONS + 100}) as broker:
        name = f"crash-{uuid.uuid4().hex[:6]}"
        with WireClient(broker.host, broker.port, timeout=120) as wire:
            wire.send(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": name, "num_partitions": CRASHED_PARTITIONS,
                      "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 60000,
                      "validate_only": False})
            # kill while the directories are being made (after the creation's records are committed)
            deadline = time.monotonic() + 60
            while len(_partition_dirs(broker.data_dir, name)) < 200:
                assert time.monotonic() < deadline, broker.lines[-5:]
                time.sleep(0.01)
            broker.kill()
        made = len(_partition_dirs(broker.data_dir, name))
        assert 0 < made < CRASHED_PARTITIONS
        assert name in _committed_topics(broker.data_dir)
        broker.config["listeners"] = "PLAINTEXT://127.0.0.1:0"
        broker.start()
        assert len(_partition_dirs(broker.data_dir, name)) == CRASHED_PARTITIONS
        with WireClient(broker.host, broker.port) as wire:
            metadata = wire.request(ApiKey.METADATA, 9, {"topics": [{"name": name}],
                                                         "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})
            assert metadata.topics[0].error_code == 0 and len(metadata.topics[0].partitions) == CRASHED_PARTITIONS
            assert [_produce(wire, name, p) for p in (0, CRASHED_PARTITIONS - 1)] == [0, 0]
            assert _create_topics(wire, {name: 2})[name][0] == TOPIC_ALREADY_EXISTS
        broker.stop()
