"""A broker's start-up and its normal produce/consume path load none of the heavy modules that only the client's
columnar API, the CLI, the console, OAUTHBEARER or telemetry push need: each one loaded costs every broker MiBs of
RSS (NumPy alone ~16 MiB, about a quarter of an idle broker before they were made lazy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

import klog
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

#: Modules a broker must not import to start: loaded on the paths that use them (the client's columnar API,
#: OAUTHBEARER token checks, TLS keystore conversion, telemetry push, the CLI and console, --version).
HEAVY_MODULES = ("numpy", "pyarrow", "cryptography", "jwt", "google.protobuf", "opentelemetry", "jinja2", "rich",
                 "typer", "importlib.metadata", "urllib.request", "email", "difflib", "klog.client.admin",
                 "klog.client.consumer", "klog.client.producer", "klog.cli")
#: Shared libraries of those modules, looked for in a running broker's /proc/<pid>/maps.
HEAVY_LIBRARY_DIRS = ("/numpy/", "/numpy.libs/", "/pyarrow/", "/cryptography/", "/google/protobuf/", "/jinja2/")


def test_broker_entry_point_and_server_import_no_heavy_module(tmp_path: Path) -> None:
    probe = ("import json, sys\n"
             "import klog.broker.__main__, klog.broker.server\n"
             f"print(json.dumps([m for m in {HEAVY_MODULES!r} if m in sys.modules]))\n")
    # The klog this test imported (a worktree's, say), not whichever the working directory holds.
    env = {**os.environ, "PYTHONPATH": str(Path(klog.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_serving_broker_maps_no_heavy_library_after_produce_and_consume(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"num.partitions": 1}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        # Small records and one above the frame reader's 64 KiB small-frame limit (its pooled-buffer path).
        values = [b"x" * 1024] * 50 + [b"y" * (200 * 1024)]
        for value in values:
            producer.produce("footprint", value)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "footprint",
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["footprint"])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < len(values) and time.monotonic() < deadline:
                for message in consumer.consume(100, 0.5):
                    assert message.error() is None, message.error()
                    got.append(message.value())
        finally:
            consumer.close()
        assert got == values
        maps = Path(f"/proc/{broker.pid}/maps").read_text()
        loaded = sorted({line.split()[-1] for line in maps.splitlines()
                         if any(part in line for part in HEAVY_LIBRARY_DIRS)})
        assert loaded == []
