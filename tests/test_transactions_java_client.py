"""The Java client's transactional producer (Kafka 4.3.1, tests/java/TxnClient.java) on klog and on Apache Kafka 4.3
from the same properties: with ``transaction.version`` 2 finalized (a new cluster's default on both) it runs
transaction protocol v2 (Produce v12+ with no AddPartitionsToTxn, EndTxn v5, TxnOffsetCommit v5 with no
AddOffsetsToTxn) through a commit, an abort, the fencing of a zombie producer and a consume-transform-produce loop
with sendOffsetsToTransaction; read_committed consumers then see exactly the committed records. Both brokers must
print the same lines."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port, one_broker
from klog.testing.kafka_tools import java_available, run_kafka_tool
from klog.testing.process import BrokerProcess, broker_command

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
PROPERTIES = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3}
#: bound on the Java program (one JVM: five producers and three consumers)
JAVA_TIMEOUT_S = 240

EXPECTED = [
    "COMMITTED 5",
    "ABORTED 5",
    # the zombie's next call after the new instance's InitProducerId (its transaction aborted with a bumped epoch)
    "ZOMBIE FENCED InvalidProducerEpochException",
    "FRESH COMMITTED",
    "TRANSFORMED 10",
    "GROUP OFFSET 10",
    "CTP TRANSACTIONS>0 true",
    "DATA committed-0,committed-1,committed-2,committed-3,committed-4,fresh",
    "OUTPUT " + ",".join(f"out-in-{i}" for i in range(10)),
]


@pytest.fixture(scope="module")
def txn_client(tmp_path_factory) -> Path:
    if not java_available():
        pytest.skip("no java")
    try:
        libs = find_kafka_libs()
    except Exception as exc:  # noqa: BLE001 - any reason the jars cannot be found
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    classes = tmp_path_factory.mktemp("txn-client-classes")
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{libs}/*",
                    str(REPO / "tests" / "java" / "TxnClient.java")], check=True, capture_output=True, timeout=120)
    return classes


def _run(classes: Path, bootstrap: str, replication: int = 1) -> list[str]:
    libs = find_kafka_libs()
    result = subprocess.run(["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                             "-Dlog4j2.level=ERROR", "-cp", f"{classes}:{libs}/*", "TxnClient", bootstrap,
                             uuid.uuid4().hex[:6], str(replication)], capture_output=True, text=True,
                            timeout=JAVA_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.splitlines()


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_java_transactional_producer_runs_protocol_v2_as_on_kafka(kind, txn_client, tmp_path):
    if kind == "kafka":
        with one_broker(kind, tmp_path, PROPERTIES) as bootstrap:
            assert _run(txn_client, bootstrap) == EXPECTED
        return
    # klog: the same lines, and its request trace shows the producers used protocol v2's requests (Produce v13: v12's
    # protocol v2 with topics by id, EndTxn v5, TxnOffsetCommit v5) and never AddPartitionsToTxn or AddOffsetsToTxn:
    # the partitions joined the transactions on the server
    with BrokerProcess(tmp_path / "data", {**PROPERTIES, "listeners": "PLAINTEXT://127.0.0.1:0"},
                       log_level="DEBUG") as node:
        assert _run(txn_client, node.bootstrap_servers) == EXPECTED
        used = _producer_requests(node.lines)
    assert used[0] == {13} and used[26] == {5} and used[28] == {5}
    assert 24 not in used and 25 not in used
    _assert_transaction_log_is_v1(tmp_path / "data")


def _finalized_transaction_version(bootstrap: str) -> str:
    out = run_kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap, "describe")
    found = re.search(r"Feature: transaction\.version\s.*?FinalizedVersionLevel: (\S+)", out.stdout)
    assert found, out.stdout + out.stderr
    return found.group(1)


@pytest.mark.long
@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_java_producer_moves_from_protocol_v1_to_v2_when_the_feature_is_upgraded(kind, txn_client, tmp_path):
    """A cluster formatted with transaction.version 1: the Java client runs protocol v1; after ``kafka-features
    upgrade --feature transaction.version=2`` a new producer runs protocol v2, on klog as on Kafka."""
    format_args = ["--feature", "transaction.version=1"]
    if kind == "klog":
        props = tmp_path / "server.properties"
        props.write_text(f"log.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                         + "".join(f"{k}={v}\n" for k, v in PROPERTIES.items()))
        fmt = subprocess.run([*broker_command(), "format", "-t", "dHYyLXVwZ3JhZGUtMDAwMQ", "-c", str(props),
                              *format_args], capture_output=True, text=True, timeout=60)
        assert fmt.returncode == 0, fmt.stderr
        context = BrokerProcess(tmp_path / "data", properties_file=props, log_level="DEBUG")
    else:
        context = apache_kafka(tmp_path, free_port(), heap="512m", config=PROPERTIES, format_args=format_args)
    with context as started:
        bootstrap = started.bootstrap_servers if isinstance(started, BrokerProcess) else str(started)
        assert _finalized_transaction_version(bootstrap) == "1"
        # protocol v1 (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4; the leader verifies each first batch,
        # KIP-890 part 1): the same lines (the zombie's late batch is refused first there too)
        assert _run(txn_client, bootstrap) == EXPECTED
        if isinstance(started, BrokerProcess):
            v1 = _producer_requests(started.lines)
            # (Produce v11 from the transactional producers; the plain seed producer sends v13)
            assert v1[26] == {4} and 24 in v1 and 25 in v1 and 11 in v1[0], v1
            seen = len(started.lines)
        upgrade = run_kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap,
                                 "upgrade", "--feature", "transaction.version=2")
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        deadline = time.monotonic() + 30   # Kafka's broker applies the controller's record a moment later
        while _finalized_transaction_version(bootstrap) != "2":
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert _run(txn_client, bootstrap) == EXPECTED
        if isinstance(started, BrokerProcess):
            v2 = _producer_requests(started.lines[seen:])
            assert v2[0] == {13} and v2[26] == {5} and 24 not in v2 and 25 not in v2, v2


def _producer_requests(lines: list[str]) -> dict[int, set[int]]:
    """api key -> the versions the Java producers sent (klog's DEBUG request trace)."""
    used: dict[int, set[int]] = {}
    for line in lines:
        match = re.search(r"request api_key=(\d+) version=(\d+) client_id='producer-", line)
        if match:
            used.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return used


@pytest.mark.long
def test_java_transactional_producer_on_a_3_node_cluster(txn_client, tmp_path):
    """Protocol v2 across brokers (topics and __transaction_state replicated on 3 nodes, leaders spread): a
    partition leader adds its partition at a coordinator on another node (AddPartitionsToTxn v5), the coordinator
    writes v2 markers to other nodes (WriteTxnMarkers v2); the same lines as on one node."""
    with KlogCluster(tmp_path, 3, properties={**CLUSTER_TIMING, **PROPERTIES}) as cluster:
        cluster.wait_for_brokers()
        assert _run(txn_client, cluster.bootstrap_servers, replication=3) == EXPECTED


def _assert_transaction_log_is_v1(data: Path) -> None:
    """``kafka-dump-log --transaction-log-decoder`` reads klog's ``__transaction_state``: the commit-then-abort
    producer's states are TransactionLogValue v1 records with clientTransactionVersion 2 and previousProducerId
    the producer id (Kafka's transit metadata carries the id before the transition), the epoch bumped by each
    PrepareCommit/PrepareAbort (Empty 0, Ongoing 0, PrepareCommit 1, CompleteCommit 1, Ongoing 1, PrepareAbort 2,
    CompleteAbort 2)."""
    from klog.testing.kafka_tools import run_kafka_tool

    segments = [str(f) for f in data.glob("__transaction_state-*/*.log") if f.stat().st_size > 0]
    dumped = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--transaction-log-decoder", "--files",
                            ",".join(segments))
    assert dumped.returncode == 0, dumped.stderr
    states = []
    for line in dumped.stdout.splitlines():
        if '"transactionalId":"tid-a-' not in line:
            continue
        version = re.search(r'payload: \{"version":"(\d+)"', line)
        status = re.search(r'"transactionStatus":(\d+)', line)
        epoch = re.search(r'"producerEpoch":(\d+)', line)
        tv = re.search(r'"clientTransactionVersion":(\d+)', line)
        pid = re.search(r'"producerId":(\d+),"previousProducerId":(\d+)', line)
        assert version and status and epoch and pid and pid.group(1) == pid.group(2), line
        states.append((int(version.group(1)), int(status.group(1)), int(epoch.group(1)),
                       int(tv.group(1)) if tv else 0))
    # v1 throughout, as Kafka 4.3 writes it with transaction.version 1+ finalized (InitProducerId's Empty has
    # clientTransactionVersion 0: no protocol v2 request has named the id yet)
    assert states == [(1, 0, 0, 0), (1, 1, 0, 2), (1, 2, 1, 2), (1, 4, 1, 2), (1, 1, 1, 2), (1, 3, 2, 2),
                      (1, 5, 2, 2)], dumped.stdout[-3000:]
