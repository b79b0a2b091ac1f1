"""A real broker's segment files: the open-descriptor bound (klog.log.max.open.segment.files) and delayed removal
of deleted files (file.delete.delay.ms), checked through /proc/<pid>/fd and the data directory."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, fetch_raw

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to count descriptors")]


def _open_segment_logs(pid: int, root: Path) -> list[str]:
    """Paths of ``.log`` segment files under ``root`` (a topic's partition directories) that process ``pid``
    holds open."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith(str(root)) and target.endswith(".log"):
            found.append(target)
    return found


def _create_topic(wire: WireClient, name: str, partitions: int, configs: dict[str, str]) -> None:
    response = wire.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == 0, response.topics[0].error_message


def _produce(wire: WireClient, topic: str, partition: int, batches: int, value_size: int = 200) -> None:
    for i in range(batches):
        batch = encode_batch([{"key": None, "value": b"%d-" % i + b"x" * value_size}])
        response = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        assert response.responses[0].partition_responses[0].error_code == 0


def test_sealed_segment_descriptors_stay_under_the_configured_bound(tmp_path: Path):
    bound, partitions = 4, 3
    with BrokerProcess(tmp_path, {"klog.log.max.open.segment.files": bound}) as broker, \
            WireClient(broker.host, broker.port) as wire:
        # ~2 batches per 600-byte segment: about 10 segments per partition, 30 in all, far above the bound
        _create_topic(wire, "many", partitions, {"segment.bytes": "600"})
        for p in range(partitions):
            _produce(wire, "many", p, 20)
        segments = sorted(tmp_path.glob("many-*/*.log"))
        assert len(segments) > 3 * (bound + partitions)
        for _ in range(2):  # read every segment of every partition, twice: each is opened, most reopened
            for p in range(partitions):
                batches = fetch_raw(broker.host, broker.port, "many", p)
                assert [b.base_offset for b in batches] == list(range(20))
            # the active segment of each partition stays open besides the bounded sealed ones
            # (no other topic has sealed segments: __consumer_offsets' active segments are outside the count)
            assert len(_open_segment_logs(broker.pid, tmp_path / "many-")) <= bound + partitions


def test_a_segment_file_bound_below_one_stops_startup_naming_the_setting(tmp_path: Path):
    with pytest.raises(RuntimeError, match="klog.log.max.open.segment.files"):
        BrokerProcess(tmp_path, {"klog.log.max.open.segment.files": 0}).start()


def _deleted_dirs(root: Path, topic: str) -> list[str]:
    return [n for n in os.listdir(root) if n.startswith(f"{topic}-") and n.endswith("-delete")]


def test_deleted_topic_directories_wait_file_delete_delay_then_go(tmp_path: Path):
    with BrokerProcess(tmp_path) as broker, WireClient(broker.host, broker.port) as wire:
        _create_topic(wire, "gone", 2, {"segment.bytes": "600", "file.delete.delay.ms": "4000"})
        for p in range(2):
            _produce(wire, "gone", p, 6)
        deleted = wire.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["gone"], "timeout_ms": 5000})
        assert deleted.responses[0].error_code == 0
        deleted_at = time.monotonic()
        # renamed out of the way at once (clients can no longer find it), files still there
        waiting = _deleted_dirs(tmp_path, "gone")
        assert sorted(n.split(".")[0] for n in waiting) == ["gone-0", "gone-1"]
        assert all(any(f.endswith(".log") for f in os.listdir(tmp_path / n)) for n in waiting)
        assert not (tmp_path / "gone-0").exists()
        # the same name can be created again meanwhile, as a new empty topic
        _create_topic(wire, "gone", 1, {})
        assert fetch_raw(broker.host, broker.port, "gone", 0) == []
        while time.monotonic() - deleted_at < 2.5:
            assert len(_deleted_dirs(tmp_path, "gone")) == 2, "removed before file.delete.delay.ms"
            time.sleep(0.2)
        deadline = deleted_at + 4 + 10  # the delay, then the next maintenance pass
        while _deleted_dirs(tmp_path, "gone"):
            assert time.monotonic() < deadline, _deleted_dirs(tmp_path, "gone")
            time.sleep(0.2)


def test_a_segment_file_bound_beyond_the_open_files_limit_is_warned_about(tmp_path: Path):
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft >= 2**31 - 1:
        pytest.skip("no finite open-files limit to exceed")
    with BrokerProcess(tmp_path, {"klog.log.max.open.segment.files": 2**31 - 1}) as broker:
        assert any("klog.log.max.open.segment.files=2147483647" in line and "open-files limit" in line
                   for line in broker.lines), broker.lines
    with BrokerProcess(tmp_path, {"klog.log.max.open.segment.files": 16}) as broker:
        assert not any("open-files limit" in line for line in broker.lines), broker.lines
