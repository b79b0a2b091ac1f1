"""A log whose ``partition.metadata`` names another topic id than the cluster's metadata (KIP-516), on Apache
Kafka 4.3.1 and on klog (the same test on each).

Such a log belongs to another topic of the same name: the topic was deleted and created again while the broker was
down, or the directory came from another cluster. Kafka's broker (KRaft) takes it for a stray log when it starts:
it renames the directory ``<topic>-<partition>.<32 hex digits>-stray`` with every file kept, serves the partition
from a new empty log, and leaves the stray directory where it is, also across later starts (an operator removes
it). klog does the same (klog/broker/partitions.py, the rename in the Rust storage layer)."""

from __future__ import annotations

import base64
import contextlib
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from klog.client import AdminClient, NewTopic, Producer
from klog.testing.kafka import apache_kafka, apache_kafka_again
from klog.testing.wire import fetch_raw

TOPIC = "recreated"
STRAY = re.compile(rf"{TOPIC}-0\.[0-9a-f]{{32}}-stray")


def _kafka_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@contextlib.contextmanager
def _broker(kind: str, root: Path, *, first: bool) -> Iterator[str]:
    """The broker of ``kind`` on the data in ``root``: formatted at the ``first`` start, started again after."""
    if kind == "klog":
        from klog.testing.process import BrokerProcess

        with BrokerProcess(root / "data", {"listeners": "PLAINTEXT://127.0.0.1:0"}) as node:
            yield node.bootstrap_servers
    elif first:
        with apache_kafka(root, heap="512m") as bootstrap:
            yield str(bootstrap)
    else:
        with apache_kafka_again(root, heap="512m") as bootstrap:
            yield str(bootstrap)


def _values(bootstrap: str) -> list[bytes]:
    host, port = bootstrap.rsplit(":", 1)
    return [record.value for batch in fetch_raw(host, int(port), TOPIC) for record in batch.records]


def _produce(bootstrap: str, values: list[bytes]) -> None:
    with Producer(bootstrap) as producer:
        for value in values:
            producer.send(TOPIC, value).result(30)


def _partition_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(f"{TOPIC}-0*") if p.is_dir())


@pytest.mark.parametrize("kind", ["kafka", "klog"])
def test_a_log_of_another_topic_id_is_set_aside_as_stray(kind: str, tmp_path: Path) -> None:
    with _broker(kind, tmp_path, first=True) as bootstrap:
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        _produce(bootstrap, [b"old-0", b"old-1", b"old-2"])
    [log_dir] = _partition_dirs(tmp_path)
    other_id = _kafka_uuid()
    (log_dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {other_id}")

    with _broker(kind, tmp_path, first=False) as bootstrap:
        dirs = _partition_dirs(tmp_path)
        assert [p.name for p in dirs if not STRAY.fullmatch(p.name)] == [f"{TOPIC}-0"]
        [stray] = [p for p in dirs if STRAY.fullmatch(p.name)]
        assert stray.parent == log_dir.parent
        # every file kept, the old records among them
        assert (stray / "partition.metadata").read_text().split() == ["version:", "0", "topic_id:", other_id]
        assert sum(f.stat().st_size for f in stray.glob("*.log")) > 0
        # the partition is served from a new, empty log
        assert _values(bootstrap) == []
        _produce(bootstrap, [b"new-0", b"new-1"])
        assert _values(bootstrap) == [b"new-0", b"new-1"]

    with _broker(kind, tmp_path, first=False) as bootstrap:
        assert _values(bootstrap) == [b"new-0", b"new-1"]
        # the stray directory stays (neither served nor deleted by the broker)
        assert [p.name for p in _partition_dirs(tmp_path)] == [f"{TOPIC}-0", stray.name]
