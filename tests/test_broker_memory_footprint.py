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
#: The coordinators of features a default broker's clients may never use, made (and imported) on their first use:
#: the transaction coordinator and its records.
LAZY_COORDINATOR_MODULES = ("klog.broker.transactions.coordinator", "klog.broker.transactions.records")
#: KIP-714 client telemetry, made on the first telemetry request or metrics scrape (tests/test_client_telemetry.py
#: covers that use)
LAZY_TELEMETRY_MODULES = ("klog.broker.telemetry",)
#: streams groups (KIP-1071), made on the first StreamsGroupHeartbeat/Describe or a streams group's record loaded
#: (tests/test_streams_groups.py covers their use, and a restart's reload)
LAZY_STREAMS_MODULES = ("klog.broker.groups.streams",)
#: Shared libraries of those modules, looked for in a running broker's /proc/<pid>/maps.
HEAVY_LIBRARY_DIRS = ("/numpy/", "/numpy.libs/", "/pyarrow/", "/cryptography/", "/google/protobuf/", "/jinja2/")


def test_broker_entry_point_and_server_import_no_heavy_module(tmp_path: Path) -> None:
    lazy = LAZY_COORDINATOR_MODULES + LAZY_TELEMETRY_MODULES + LAZY_STREAMS_MODULES
    probe = ("import json, sys\n"
             "import klog.broker.__main__, klog.broker.server\n"
             f"print(json.dumps([m for m in {HEAVY_MODULES + lazy!r} if m in sys.modules]))\n")
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


#: idle connections held open in the connection test, and the RSS each may add after its Produce requests: a read
#: buffer of its own per connection (the native front's 64 KiB, zero-filled; the event loop's touched pages) is
#: far above it, the connection's objects and its kernel-side socket are not counted or are well below it
IDLE_CONNECTIONS = 300
IDLE_CONNECTION_MAX_KIB = 24


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _produce_frame(correlation_id: int) -> bytes:
    from klog.protocol import Struct, encode_request
    from klog.records import encode_batch

    batch = encode_batch([{"value": b"v" * 100}] * 10)
    return encode_request(0, 9, correlation_id, "footprint", Struct(
        transactional_id=None, acks=1, timeout_ms=30000,
        topic_data=[Struct(name="idle", partition_data=[Struct(index=0, records=batch)])]))


def test_idle_connections_keep_no_read_buffer_of_their_own_after_produce(tmp_path: Path) -> None:
    # reads land in a buffer shared by the idle connections (the native front's and the event loop's): hundreds
    # of producers that are idle between requests do not each keep a read buffer resident
    from klog.testing.wire import WireClient

    with BrokerProcess(tmp_path / "data", {"num.partitions": 1}) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)

        def produce_on(wires: list[WireClient], rounds: int) -> None:
            for round_ in range(rounds):
                for wire in wires:
                    wire.send_raw(_produce_frame(round_))
                for wire in wires:
                    assert len(wire.read_frame()) > 0
                time.sleep(0.2)   # idle between rounds: the connections move to the native front

        warm = [WireClient(host, int(port)) for _ in range(20)]   # the topic, and the allocator's first growth
        wires: list[WireClient] = []
        try:
            produce_on(warm, 3)
            before = _rss_kib(broker.pid)
            wires = [WireClient(host, int(port)) for _ in range(IDLE_CONNECTIONS)]
            produce_on(wires, 3)
            grown = _rss_kib(broker.pid) - before
        finally:
            for wire in warm + wires:
                wire.close()
        assert grown < IDLE_CONNECTIONS * IDLE_CONNECTION_MAX_KIB, f"{grown / IDLE_CONNECTIONS:.1f} KiB a connection"


#: A broker in a process of its own serves a producer, a consumer group and, last, a transactional producer; it
#: prints the lazily loaded modules (coordinators, telemetry, streams groups) it had imported before the
#: transactional producer, then after it.
_LAZY_PROBE = """
import json, sys, time
import klog
from confluent_kafka import Consumer, Producer
lazy = %r
with klog.Broker(config={"num.partitions": 1, "offsets.topic.replication.factor": 1,
                         "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}) as b:
    producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for i in range(20):
        producer.produce("plain", b"v%%d" %% i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["plain"])
    got, deadline = 0, time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        got += sum(m.error() is None for m in consumer.consume(20, 0.5))
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == 20, got
    before = [m for m in lazy if m in sys.modules]
    txn = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "t1", "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("plain", b"in-txn")
    txn.commit_transaction(30)
    after = [m for m in lazy if m in sys.modules]
print(json.dumps([before, after]))
"""


def test_transaction_coordinator_is_loaded_on_first_use_not_by_produce_consume_and_groups(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(klog.__file__).resolve().parent.parent)}
    lazy = LAZY_COORDINATOR_MODULES + LAZY_TELEMETRY_MODULES + LAZY_STREAMS_MODULES
    done = subprocess.run([sys.executable, "-c", _LAZY_PROBE % (lazy,)], capture_output=True,
                          text=True, timeout=100, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    # the first transactional producer's requests made it, and its transaction committed; telemetry and streams
    # groups still unused
    assert after == list(LAZY_COORDINATOR_MODULES)


_HEAP_PROBE = """
import json
from klog._native import release_free_heap

def anon_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))

garbage = [bytearray(1024) for _ in range(40_000)]   # ~40 MiB of malloc'd chunks (over pymalloc's 512 bytes)
kept = bytearray(1024)   # above them on the heap: freeing them leaves a hole, not a top glibc trims by itself
del garbage
before = anon_kib()
released = release_free_heap()
print(json.dumps([before, anon_kib(), released]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_free_heap_gives_freed_heap_pages_back_to_the_kernel(tmp_path: Path) -> None:
    """What the broker's maintenance thread calls every HEAP_RELEASE_EVERY_S (after start-up and after bursts):
    without it, glibc keeps freed chunks below the heap's top resident for good."""
    env = {**os.environ, "PYTHONPATH": str(Path(klog.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", _HEAP_PROBE], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after, released = json.loads(done.stdout.strip().splitlines()[-1])
    assert released is True
    assert before - after > 30 * 1024, (before, after)


def test_a_connection_keeps_its_attributes_in_slots_not_a_dict_of_its_own() -> None:
    """With over 30 attributes a Connection's __dict__ would be a full dict per instance (~1.5 KiB a connection)."""
    from klog.broker.network.connection import Connection

    assert Connection.__dictoffset__ == 0, "Connection instances have a __dict__: an attribute missing in __slots__?"


def test_producing_connections_share_the_native_checks_and_keep_no_empty_answer_queue(tmp_path: Path) -> None:
    """Per connection, only what is its own: the native Produce path's checks (closures over the broker state) are
    one set for the broker, and the queue of acks=all answers waiting holds nothing (no deque block, ~0.7 KiB) while
    no answer waits."""
    from klog.testing.wire import WireClient

    with klog.Broker(str(tmp_path / "data"), config={"num.partitions": 1}) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        wires = [WireClient(host, int(port)) for _ in range(3)]
        try:
            for wire in wires:
                wire.send_raw(_produce_frame(1))
            for wire in wires:
                assert len(wire.read_frame()) > 0
            connections = [c for c in broker._server.acceptor.connections if c.native_produce]
            assert len(connections) == 3
            assert len({id(c._replicated) for c in connections}) == 1
            assert len({id(c._in_transaction) for c in connections}) == 1
            assert all(sys.getsizeof(c.pipeline.answers) <= sys.getsizeof([]) for c in connections)
        finally:
            for wire in wires:
                wire.close()
