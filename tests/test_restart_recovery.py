"""A start after a clean shutdown runs no log recovery; a start after SIGKILL does: one script for a klog node and an
Apache Kafka 4.x node, on real processes and real segment files.

Recovery is what reads segment data at start (every batch from the recovery point on, its CRC checked, a corrupt or
torn tail cut). To see whether it ran, the last batch of a partition's segment is damaged while the node is down (one
byte of a record value flipped: the batch header still parses, its CRC no longer matches). After a clean stop the
node trusts the log it closed (``.kafka_cleanshutdown``, recovery points at the log end) and reads none of it: the
damaged batch is still there and the log end is unchanged. After a SIGKILL recovery checks the batches written since
the last recovery-point checkpoint (none was taken: the interval is an hour) and cuts the damaged one.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs

pytestmark = pytest.mark.timeout(300)

NONE, NOT_LEADER_OR_FOLLOWER = 0, 6
PROPERTIES = {**CLUSTER_TIMING, "log.flush.offset.checkpoint.interval.ms": 3_600_000}
FIRST, SECOND = 10, 5


def _open(kind: str, root: Any) -> Cluster:
    if kind == "kafka":
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        return KafkaCluster(root, 1, properties=PROPERTIES, startup_timeout=300)
    return KlogCluster(root, 1, properties=PROPERTIES)


def _produce(cluster: Cluster, topic: str, count: int, tag: bytes) -> int:
    with cluster.wire(1, timeout=30) as wire:
        answer = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 15000,
                                                  "topic_data": [{"name": topic, "partition_data": [
                                                      {"index": 0, "records": encode_batch(
                                                          [{"value": tag + b"-%03d-" % i + b"v" * 100}
                                                           for i in range(count)])}]}]})
    return int(answer.responses[0].partition_responses[0].error_code)


def _log_end(cluster: Cluster, topic: str) -> int:
    with cluster.wire(1) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    p = answer.topics[0].partitions[0]
    assert p.error_code == NONE, p
    return int(p.offset)


def _damage_last_batch(segment: Path) -> None:
    """Flip a byte inside the last batch's last record value (inside the CRC's range, outside the header)."""
    data = bytearray(segment.read_bytes())
    pos, last = 0, None
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        if length == 0 or pos + 12 + length > len(data):   # a preallocated segment's zeroed tail
            break
        last, pos = (pos, length), pos + 12 + length
    assert last is not None, f"no batch in {segment}"
    start, length = last
    data[start + 12 + length - 10] ^= 0xFF
    segment.write_bytes(bytes(data))


@pytest.mark.parametrize("stop", ["clean", "sigkill"])
@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_a_clean_stop_skips_log_recovery_and_a_sigkill_runs_it(kind: str, stop: str,
                                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    with _open(kind, tmp_path_factory.mktemp(f"{kind}-{stop}")) as cluster:
        cluster.wait_for_brokers()
        topic = f"recovery-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + 60
        while (answer := cluster.create_topic(topic, 1, 1))[0] != NONE:
            assert time.monotonic() < deadline, answer
            time.sleep(0.3)
        cluster.wait_for_leader(topic, 0)
        while (code := _produce(cluster, topic, FIRST, b"first")) == NOT_LEADER_OR_FOLLOWER:   # not led there yet
            assert time.monotonic() < deadline
            time.sleep(0.3)
        assert code == NONE
        assert _produce(cluster, topic, SECOND, b"second") == NONE
        assert _log_end(cluster, topic) == FIRST + SECOND
        segment = cluster.log_dir(1) / f"{topic}-0" / "00000000000000000000.log"
        if stop == "clean":
            cluster.stop_node(1)
            assert (cluster.log_dir(1) / ".kafka_cleanshutdown").exists()
        else:
            cluster.kill(1)
            assert not (cluster.log_dir(1) / ".kafka_cleanshutdown").exists()
        _damage_last_batch(segment)
        size = segment.stat().st_size
        cluster.restart(1)
        cluster.wait_for_leader(topic, 0, timeout=120)
        if stop == "clean":
            # nothing was read: the damaged batch is kept and the log ends where it did
            assert _log_end(cluster, topic) == FIRST + SECOND
            assert segment.stat().st_size == size
        else:
            # recovery read the batches, found the damaged one's CRC wrong and cut it
            assert _log_end(cluster, topic) == FIRST
