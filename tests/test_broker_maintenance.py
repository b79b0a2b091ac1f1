"""The broker's periodic maintenance (due flushes, checkpoint files) while it keeps serving requests."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import klog
from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(60)


def _checkpoint_entries(path: Path) -> dict[tuple[str, int], int]:
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    entries = {}
    for line in lines[2:]:  # version, count, then "topic partition offset"
        topic, partition, offset = line.split()
        entries[(topic, int(partition))] = int(offset)
    return entries


def test_due_flushes_and_recovery_point_checkpoints_happen_while_serving(tmp_path: Path):
    # flush.ms and the checkpoint interval short enough for one-second maintenance passes to do both
    config = {"log.flush.interval.ms": 100, "log.flush.offset.checkpoint.interval.ms": 200}
    with klog.Broker(str(tmp_path), config=config) as broker, WireClient(broker.host, broker.port) as wire:
        wire.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 5000, "validate_only": False})
        batch = encode_batch([{"key": None, "value": b"v%d" % i} for i in range(5)])
        response = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
        assert response.responses[0].partition_responses[0].error_code == 0
        checkpoint = tmp_path / "recovery-point-offset-checkpoint"
        deadline = time.monotonic() + 15
        while _checkpoint_entries(checkpoint).get(("t", 0)) != 5:
            assert time.monotonic() < deadline, f"recovery point of t-0 never reached 5: {checkpoint.read_text()!r}"
            # the broker answers meanwhile (maintenance does not hold the event loop)
            assert wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                         "client_software_version": "1"}).error_code == 0
            time.sleep(0.1)
