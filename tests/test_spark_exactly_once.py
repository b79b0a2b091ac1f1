"""klog's exactly-once Spark sink (``exactlyOnce=true``) and the read_committed streaming source, end to end: a
streaming query whose driver is SIGKILLed in the middle of a micro-batch (one task's transaction prepared, the
other task still running) and restarted from its checkpoint writes every committed input record exactly once (count
and content, read with read_committed); so does a restart that re-runs a batch whose transactions were already
committed (the driver died after the sink's commit but before Spark's commit log: simulated by deleting the last
commit-log entry). The input holds an aborted transaction and transaction markers, which the read_committed source
leaves out and steps over without reporting data loss. On klog (CI) and on Apache Kafka (nightly)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from _spark_support import REPO, create_topic

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.java, pytest.mark.timeout(900)]

PROPS = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
         "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"}
#: Committed input records per input partition, and where the record that stalls a task sits (partition 1,
#: in the third micro-batch of 200 offsets).
PER_PARTITION = 300
STALL_AT = 230
#: Bounds of one driver run and of waiting for a prepared transaction to show.
RUN_TIMEOUT_S = 300
PREPARED_TIMEOUT_S = 180


def _produce_input(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """Committed transactions with an aborted one in between (its records and the markers take offsets the
    source must step over); returns the committed (key, value) pairs."""
    import klog

    committed: list[tuple[bytes, bytes]] = []
    with klog.Producer(bootstrap_servers=bootstrap, transactional_id=f"input-{topic}", linger_ms=5) as p:
        p.init_transactions(30)
        for round_ in range(6):
            p.begin_transaction()
            for part in (0, 1):
                for i in range(round_ * 50, round_ * 50 + 50):
                    key = b"k-%d-%03d" % (part, i)
                    value = b"stall" if (part, i) == (1, STALL_AT) else b"v-%d-%03d" % (part, i)
                    p.send(topic, value, key=key, partition=part)
                    committed.append((key, value))
            p.commit_transaction(30)
            if round_ == 2:
                p.begin_transaction()
                for part in (0, 1):
                    for i in range(20):
                        p.send(topic, b"aborted-%d-%d" % (part, i), key=b"x", partition=part)
                p.flush(10)
                p.abort_transaction(30)
    return committed


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes]]:
    import klog
    from klog.client.types import TopicPartition

    c = klog.Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps, timeout=10)
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"positions {[c.position(tp) for tp in tps]} < ends {ends}"
            out.extend((r.key, r.value) for r in c.poll(0.2))
        return sorted(out)
    finally:
        c.close()


def _open_transaction(bootstrap: str, topic: str, partitions: int) -> bool:
    """Does some partition of ``topic`` hold records of an open transaction (high watermark past the last stable
    offset)?"""
    from klog.client.direct import DirectClient
    from klog.client.types import TopicPartition

    tps = {TopicPartition(topic, p): -1 for p in range(partitions)}
    with DirectClient(bootstrap) as hw, DirectClient(bootstrap, isolation_level="read_committed") as lso:
        highs, stables = hw.list_offsets(tps), lso.list_offsets(tps)
    return any(highs[tp].offset > stables[tp].offset for tp in tps)


def _driver(bootstrap: str, source: str, sink: str, checkpoint: Path, mode: str) -> subprocess.Popen:
    # tests/ for _spark_support; not the checkout itself: klog is the installed wheel's (CI builds no _core in the
    # source tree), or whatever PYTHONPATH already names
    # (an empty entry would put the working directory, the checkout, first)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests"), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, str(REPO / "tests" / "_spark_eos_query.py"), bootstrap, source, sink,
                             str(checkpoint), mode], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the driver's whole process group: the Python driver, its JVM and the JVM's Python workers."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


@pytest.fixture(params=["klog", "kafka"])
def bootstrap(request, tmp_path):
    from klog.testing.kafka import one_broker

    with one_broker(request.param, tmp_path / "broker", PROPS) as servers:
        yield servers


@pytest.mark.long
def test_a_query_killed_mid_batch_and_restarted_writes_each_record_exactly_once(bootstrap, tmp_path):
    source, sink = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 3)
    expected = sorted(_produce_input(bootstrap, source))
    checkpoint = tmp_path / "checkpoint"

    # 1. Run until the batch with the stalling record has one task's transaction prepared while the other task
    # stalls before writing, then kill the driver: that batch is neither committed nor in Spark's commit log.
    stalled = tmp_path / "stalled"
    proc = _driver(bootstrap, source, sink, checkpoint, f"stall:{stalled}")
    try:
        deadline = time.monotonic() + PREPARED_TIMEOUT_S
        while not (stalled.exists() and _open_transaction(bootstrap, sink, 3)):
            assert proc.poll() is None, proc.communicate()[0][-4000:]
            assert time.monotonic() < deadline, f"no prepared transaction appeared (stalled: {stalled.exists()})"
            time.sleep(0.2)
    finally:
        _kill(proc)
    assert _open_transaction(bootstrap, sink, 3)   # the killed batch's prepared transaction is left open
    before = _read_committed(bootstrap, sink, 3)
    assert 0 < len(before) < len(expected)   # earlier batches committed, the killed one not

    # 2. Restart from the checkpoint: the killed batch is written again (its open transaction aborted), to the end.
    # 3. Then, in the same driver, the driver dies after the sink committed the last batch but before Spark's
    # commit log has it: the query re-runs that batch, and the sink's per-task markers keep it from being written
    # twice.
    proc = _driver(bootstrap, source, sink, checkpoint, "replay")
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        _kill(proc)
    assert proc.returncode == 0, out[-4000:]
    replayed = re.search(r"replayed (\d+) rows", out)
    assert replayed is not None and int(replayed.group(1)) > 0, out[-4000:]
    assert _read_committed(bootstrap, sink, 3) == expected
    assert not _open_transaction(bootstrap, sink, 3)


def test_exactly_once_is_refused_where_there_is_no_micro_batch():
    """A batch write (df.write) has no batch id to make a retried job idempotent, and a task outside a micro-batch
    streaming query (continuous processing) has no query and batch ids: both are refused with a clear error."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from klog.spark.errors import KlogSparkOptionError
    from klog.spark.sink import KlogStreamWriter, KlogWriter

    schema = StructType([StructField("value", BinaryType())])
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "out", "exactlyOnce": "true"}
    with pytest.raises(KlogSparkOptionError, match="streaming writes"):
        KlogWriter(opts, schema)
    with pytest.raises(KlogSparkOptionError, match="micro-batch streaming query"):
        KlogStreamWriter(opts, schema).write(iter([]))
