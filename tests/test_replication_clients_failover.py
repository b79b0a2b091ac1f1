"""Kafka's own producers writing with acks=all through the loss of a partition leader, on real 3-node clusters, one
script for klog and for Apache Kafka 4.x: kafka-python's ``KafkaProducer`` and the Java producer (Kafka's
``VerifiableProducer`` tool from ``.cache/kafka/libs``, which prints every acknowledged record with its partition and
offset). (confluent-kafka's: tests/test_replication_cluster.py.)

Both are idempotent (the clients' default with acks=all) and write a few thousand keyed records at a bounded rate
to an RF=3 topic (min.insync.replicas=2); once a part of them is acknowledged, the leader of partition 0 is
SIGKILLed, SIGSTOPped until the controller fenced it and elected another leader (then SIGCONTed), or shut down
cleanly. Every record must be acknowledged (two of three replicas stay); after the node is back and in the ISR of
every partition, all replicas hold the same bytes, and reading every partition from the start gives each
acknowledged record exactly once, at the offset it was acknowledged with, and each partition's records in the order
they were sent.

One cluster of each kind for the module; every test makes its own topic and leaves every node running and in sync.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.testing.cluster_api import Cluster
from klog.testing.kafka_tools import VERIFIABLE_PRODUCER, java_available, kafka_libs_dir, kafka_tool_command
from replication_support import (REPLICATION_PROPERTIES, create_rf3_topic, heal, latest_offsets, three_node_cluster,
                                 wait, wait_same_logs)

pytestmark = pytest.mark.timeout(300)

#: a stopped leader is fenced after 6 s without heartbeats (the SIGSTOP case waits that long)
PROPERTIES: dict[str, Any] = {**REPLICATION_PROPERTIES, "broker.session.timeout.ms": 6000}
PARTITIONS = 3
RECORDS = 3000
RECORDS_PER_S = 1000
#: the leader goes once this many records are acknowledged (a third of them: the rest is in flight or still to send)
ACKED_BEFORE_FAULT = 1000
#: keys "0".."11", the same for both clients: murmur2 puts 5 of them on partition 0, 3 on 1 and 4 on 2
KEYS = 12
#: how long a producer request to a stopped leader waits before the client retries elsewhere (clients default to 30 s)
CLIENT_REQUEST_TIMEOUT_MS = 5000
#: all records acknowledged within this (a failover takes the session timeout, about 6 s, plus an election)
PRODUCE_TIMEOUT_S = 90.0
STOPS = ["sigkill", "sigstop", "sigterm"]
# the Java client's runs are nightly (make test-long): minutes of JVMs on a 2-core CI machine
CLIENTS = ["kafka-python", pytest.param("java", marks=pytest.mark.long)]


@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from three_node_cluster(request, tmp_path_factory, PROPERTIES)


@pytest.fixture(autouse=True)
def healed(cluster: Cluster) -> Iterator[None]:
    """Every node running and resumed after each test (a failing test included), every broker registered again."""
    yield
    heal(cluster)


# ---- the producers ------------------------------------------------------------------------------------------------

class ProducerRun:
    """One producer writing ``RECORDS`` records, values "0", "1"... with keys value % ``KEYS``, at about
    ``RECORDS_PER_S``, acks=all, in the background; what it acknowledged so far (value -> (partition, offset))."""

    def __init__(self) -> None:
        self.acked: dict[int, tuple[int, int]] = {}
        self.errors: list[str] = []

    def done(self) -> bool:
        raise NotImplementedError

    def join(self, timeout: float) -> None:
        """Until every record is acknowledged or failed and the producer closed (or ``timeout``)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Ends the producer now if it still runs (after a failure)."""


class KafkaPythonRun(ProducerRun):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__()
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                      request_timeout_ms=CLIENT_REQUEST_TIMEOUT_MS, delivery_timeout_ms=120000)
        self.topic = topic
        self.stopping = threading.Event()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._write, name="kafka-python-producer", daemon=True)
        self.thread.start()

    def _write(self) -> None:
        try:
            started = time.monotonic()
            for i in range(RECORDS):
                if self.stopping.is_set():
                    return
                ahead = started + i / RECORDS_PER_S - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)   # the rate limit: sends are spread over RECORDS / RECORDS_PER_S seconds
                future = self.producer.send(self.topic, key=b"%d" % (i % KEYS), value=b"%d" % i)
                future.add_callback(lambda meta, i=i: self.acked.__setitem__(i, (meta.partition, meta.offset)))
                future.add_errback(lambda error, i=i: self.errors.append(f"record {i}: {error!r}"))
            self.producer.flush(timeout=PRODUCE_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.errors.append(f"producer: {error!r}")
        finally:
            self.producer.close(timeout=10)
            self.closed.set()

    def done(self) -> bool:
        return self.closed.is_set()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def stop(self) -> None:
        if not self.closed.is_set():
            self.stopping.set()
            self.producer.close(timeout=1)   # a flush under way gives up
            self.thread.join(10)


class VerifiableProducerRun(ProducerRun):
    """Kafka's ``VerifiableProducer``: one JSON line per acknowledged record (``producer_send_success`` with
    partition and offset) or failed one (``producer_send_error``)."""

    def __init__(self, bootstrap: str, topic: str, config: Path, libs: Path | None) -> None:
        super().__init__()
        # the tool sets retries=0 (Kafka's system tests count the failed sends), which also turns idempotence off;
        # the file (applied after) puts back the Java producer's defaults: retried until delivery.timeout.ms,
        # idempotent, 5 requests in flight
        config.write_text(f"retries={2**31 - 1}\nenable.idempotence=true\nmax.in.flight.requests.per.connection=5\n"
                          f"request.timeout.ms={CLIENT_REQUEST_TIMEOUT_MS}\nlinger.ms=5\n")
        command = kafka_tool_command(VERIFIABLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
                                     "--max-messages", str(RECORDS), "--throughput", str(RECORDS_PER_S),
                                     "--acks", "-1", "--repeating-keys", str(KEYS), "--command-config", str(config),
                                     libs=libs)
        self.other_lines: list[str] = []
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, name="verifiable-producer-output", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line) if line.startswith("{") else None
            if event is None:
                self.other_lines.append(line.rstrip())
            elif event["name"] == "producer_send_success":
                self.acked[int(event["value"])] = (event["partition"], event["offset"])
            elif event["name"] == "producer_send_error":
                self.errors.append(f"record {event['value']}: {event['exception']}: {event['message']}")

    def done(self) -> bool:
        return self.proc.poll() is not None

    def join(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return
        self.reader.join(10)
        if self.proc.returncode != 0:
            self.errors.append(f"VerifiableProducer exited {self.proc.returncode}: "
                               + "\n".join(self.other_lines[-20:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _start_producer(client: str, cluster: Cluster, topic: str, tmp_path: Path) -> ProducerRun:
    if client == "kafka-python":
        return KafkaPythonRun(cluster.bootstrap_servers, topic)
    if not java_available() or kafka_libs_dir(__file__) is None:   # the Kafka cluster needs them too
        pytest.skip("needs java and the Kafka jars (bash tools/install-peers.sh)")
    return VerifiableProducerRun(cluster.bootstrap_servers, topic, tmp_path / "producer.properties",
                                 kafka_libs_dir(__file__))


# ---- the faults and the checks ------------------------------------------------------------------------------------

def _lose_leader(cluster: Cluster, topic: str, leader: int, stop: str) -> None:
    """Until another node leads partition 0."""
    if stop == "sigkill":
        cluster.kill(leader)
    elif stop == "sigterm":
        # a controlled shutdown: klog exits 0, the JVM 143 (128 + SIGTERM) after its shutdown hooks
        assert cluster.stop_node(leader) in ((0,) if cluster.kind == "klog" else (0, 143))
    else:
        # stopped, it holds the producers' requests; the controller fences it after the session timeout and elects
        # another leader from the ISR; running again, it answers what it held and learns it is no longer the leader
        cluster.pause(leader)
    cluster.wait_for_leader(topic, 0, exclude=leader)
    if stop == "sigstop":
        cluster.resume(leader)


def _check_read_back(acked: dict[int, tuple[int, int]], read: list[tuple[int, bytes]]) -> None:
    """Each acknowledged record exactly once, at its acknowledged offset (offsets are contiguous from 0: the n-th
    record read from a partition has offset n); no record twice; each partition's records in the order sent."""
    logs: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for partition, value in read:
        logs[partition].append(int(value))
    values = [v for log in logs.values() for v in log]
    assert len(set(values)) == len(values), "a record was written twice: " + repr(
        sorted({v for v in values if values.count(v) > 1})[:10])
    for partition, log in logs.items():
        assert log == sorted(log), f"partition {partition} out of order: " + repr(
            [(o, v) for o, v in enumerate(log) if o and v < log[o - 1]][:10])
    misplaced = [(value, at, logs[at[0]][at[1]] if at[1] < len(logs[at[0]]) else None)
                 for value, at in sorted(acked.items()) if at[1] >= len(logs[at[0]]) or logs[at[0]][at[1]] != value]
    assert not misplaced, f"acknowledged records not read at their offset (value, (partition, offset), read): " \
                          f"{misplaced[:10]} of {len(misplaced)}"


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("client", CLIENTS)
def test_every_acknowledged_record_is_read_once_in_order_after_the_leader_is_lost(
        cluster: Cluster, client: str, stop: str, tmp_path: Path) -> None:
    topic = create_rf3_topic(cluster, PARTITIONS)
    leader = cluster.wait_for_leader(topic, 0)
    run = _start_producer(client, cluster, topic, tmp_path)
    try:
        wait(lambda: len(run.acked) >= ACKED_BEFORE_FAULT or run.done(),
             f"{ACKED_BEFORE_FAULT} records acknowledged", timeout=60)
        assert not run.done() and not run.errors, (len(run.acked), run.errors[:5])
        acked_before = dict(run.acked)
        _lose_leader(cluster, topic, leader, stop)
        run.join(PRODUCE_TIMEOUT_S + 30)
        assert run.done(), f"the producer still runs after {PRODUCE_TIMEOUT_S + 30} s ({len(run.acked)} acknowledged)"
    finally:
        run.stop()
    assert not run.errors, run.errors[:5]
    assert len(run.acked) == RECORDS   # two replicas of three stay: nothing may fail
    assert {p for p, _ in run.acked.values()} == set(range(PARTITIONS))
    assert [v for v, (p, _) in run.acked.items() if p == 0 and v not in acked_before], \
        "no record of partition 0 acknowledged after its leader was lost"

    # healed: the node back, in the ISR of every partition, every replica holding the same batches
    heal(cluster)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(topic, p, cluster.node_ids, timeout=90)
    wait_same_logs(cluster, topic, PARTITIONS, cluster.node_ids)
    ends = latest_offsets(cluster, topic, PARTITIONS)
    read = cluster.read(topic, range(PARTITIONS), sum(ends.values()))
    assert len(read) == sum(ends.values()), (len(read), ends)
    _check_read_back(run.acked, read)
