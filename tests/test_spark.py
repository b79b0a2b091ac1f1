"""The klog Spark source and sink in a real Spark session (local[2]) against real brokers.

One SparkSession, one Apache Kafka 4.x broker (KRaft, from Maven Central jars) and one klog broker
(``klog-broker`` subprocess) per module; every test runs on both brokers (Apache Kafka's side nightly, in
make test-long). Test data comes from an independent client (confluent-kafka / librdkafka).
Where Spark's own Kafka connector can be fetched from Maven Central, it reads the same topics as the
oracle.
"""

from __future__ import annotations

import ast
import contextlib
import json
import time
from pathlib import Path

import pytest

from _spark_support import create_topic, spark_kafka_jars, spark_session
from klog.spark.source import _HAS_ADMISSION_CONTROL
from klog.testing.kafka import apache_kafka
from klog.testing.process import BrokerProcess

pyspark = pytest.importorskip("pyspark")
confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.java, pytest.mark.timeout(600)]

TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = [2500, 1700, 3100]
# recent (an hour ago): the broker keeps 7 days, older records would be deleted by retention
BASE_TS = int(time.time() * 1000) - 3_600_000


class Broker:
    """A running broker of the module: bootstrap address, log dir, and a way to stop it early."""

    def __init__(self, name: str, stack: contextlib.ExitStack, bootstrap: str, log_dir: Path) -> None:
        self.name = name
        self._stack = stack
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.orders: dict[int, list[dict]] | None = None

    def stop(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def apache(tmp_path_factory):
    base = tmp_path_factory.mktemp("apache-kafka")
    with contextlib.ExitStack() as stack:
        bootstrap = stack.enter_context(apache_kafka(base, config={"log.retention.check.interval.ms": 500}))
        yield Broker("apache", stack, bootstrap, base / "kafka-data")


@pytest.fixture(scope="module")
def klog_broker_process(tmp_path_factory):
    base = tmp_path_factory.mktemp("klog-broker")
    with contextlib.ExitStack() as stack:
        proc = stack.enter_context(BrokerProcess(base, {"log.retention.check.interval.ms": 500}))
        yield Broker("klog", stack, proc.bootstrap_servers, base)


@pytest.fixture(params=["apache", "klog"])
def kafka(request):
    """Every test reads and writes through klog's Spark source and sink against Apache Kafka (nightly: make
    test-long) and against klog's own broker; each broker starts only when a test of its side runs."""
    return request.getfixturevalue("apache" if request.param == "apache" else "klog_broker_process")


@pytest.fixture(scope="module")
def kafka_jars() -> list[str]:
    return spark_kafka_jars()


@pytest.fixture(scope="module")
def spark(kafka_jars):
    session = spark_session("klog-spark-tests", jars=kafka_jars)
    yield session
    session.stop()


def _record(p: int, i: int) -> dict:
    """Deterministic test record i of partition p: null and empty keys/values, headers on some."""
    key = None if i % 7 == 0 else (b"" if i % 11 == 0 else b"customer-%d" % (i % 50))
    value = None if i % 13 == 0 else b'{"p":%d,"i":%d,"amount":%d}' % (p, i, i * 3 % 1000)
    headers = [("source", b"test"), ("n", b"%d" % i)] if i % 2 else None
    if i % 17 == 0:
        headers = [("nullvalue", None)]
    return {"key": key, "value": value, "headers": headers, "timestamp": BASE_TS + p * 1_000_000 + i}


def produce(bootstrap: str, topic: str, counts: list[int], make=_record) -> dict[int, list[dict]]:
    """Produce with librdkafka to explicit partitions; returns the records per partition in order."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    expected: dict[int, list[dict]] = {}
    failed: list[str] = []   # flush() counts only what is still queued: a refused batch must fail the test here

    def delivered(err, _msg):
        if err is not None:
            failed.append(str(err))

    for p, n in enumerate(counts):
        for i in range(n):
            r = make(p, i)
            producer.produce(topic, value=r["value"], key=r["key"], partition=p, timestamp=r["timestamp"],
                             headers=r["headers"], on_delivery=delivered)
            expected.setdefault(p, []).append(r)
            if i % 5000 == 0:
                producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, f"{len(failed)} record(s) refused, first: {failed[0]}"
    return expected


@pytest.fixture
def orders(kafka) -> dict[int, list[dict]]:
    """The ``orders`` topic of the test's broker (produced once per broker)."""
    if kafka.orders is None:
        create_topic(kafka.bootstrap, TOPIC, PARTITIONS)
        kafka.orders = produce(kafka.bootstrap, TOPIC, PER_PARTITION)
    return kafka.orders


def read(spark, **options):
    reader = spark.read.format("klog")
    for k, v in options.items():
        reader = reader.option(k.replace("_", "."), v)
    return reader.load()


def _headers_of(row_headers):
    if row_headers is None:
        return None
    return [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in row_headers]


@pytest.mark.parametrize("fetch_bytes", [None, 4096], ids=["default-fetch", "small-fetches"])
def test_batch_read_returns_exactly_what_was_produced(spark, kafka, orders, fetch_bytes):
    # small fetches: many responses per range, each read into the reader's reused receive buffer
    extra = {} if fetch_bytes is None else {"kafka_max_partition_fetch_bytes": str(fetch_bytes)}
    df = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, includeHeaders="true", **extra)
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    rows = df.orderBy("partition", "offset").collect()
    assert len(rows) == sum(PER_PARTITION)
    for p in range(PARTITIONS):
        got = [r for r in rows if r.partition == p]
        assert [r.offset for r in got] == list(range(PER_PARTITION[p]))
        want = orders[p]
        assert [None if r.key is None else bytes(r.key) for r in got] == [w["key"] for w in want]
        assert [None if r.value is None else bytes(r.value) for r in got] == [w["value"] for w in want]
        assert [_headers_of(r.headers) for r in got] == [w["headers"] for w in want]
        assert [int(r.timestamp.timestamp() * 1000) for r in got] == [w["timestamp"] for w in want]
        assert {r.topic for r in got} == {TOPIC} and {r.timestampType for r in got} == {0}
    # the byte totals Spark computes agree with the producer's
    sums = df.selectExpr("sum(length(key)) as k", "sum(length(value)) as v").first()
    assert sums.k == sum(len(w["key"]) for ws in orders.values() for w in ws if w["key"] is not None)
    assert sums.v == sum(len(w["value"]) for ws in orders.values() for w in ws if w["value"] is not None)


def test_offsets_json_timestamps_and_min_partitions_select_and_split_ranges(spark, kafka, orders):
    df = read(spark, kafka_bootstrap_servers=kafka.bootstrap, assign='{"orders":[0,2]}',
              startingOffsets='{"orders":{"0":100,"2":-2}}', endingOffsets='{"orders":{"0":-1,"2":500}}')
    got = df.groupBy("partition").agg({"offset": "min", "*": "count"}).orderBy("partition").collect()
    assert [(r["partition"], r["min(offset)"], r["count(1)"]) for r in got] == [(0, 100, PER_PARTITION[0] - 100), (2, 0, 500)]

    # startingTimestamp: first offset whose timestamp >= T, per partition (timestamps rise by 1 ms)
    ts = BASE_TS + 1_000_000 + 1000  # partition 1, record 1000; partition 2 starts later, at 0
    df = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, startingTimestamp=str(ts),
              startingOffsetsByTimestampStrategy="latest")
    mins = {r["partition"]: r["min(offset)"] for r in df.groupBy("partition").agg({"offset": "min"}).collect()}
    assert mins == {1: 1000, 2: 0}  # partition 0 has no record that late: starts at its end

    df = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, minPartitions="12")
    assert df.rdd.getNumPartitions() >= 12
    assert df.count() == sum(PER_PARTITION)
    assert df.select("partition", "offset").distinct().count() == sum(PER_PARTITION)


def test_user_errors_surface_as_clear_messages(spark, kafka, orders):
    with pytest.raises(Exception, match="Starting offset can't be latest for batch queries"):
        read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, startingOffsets="latest").count()
    with pytest.raises(Exception, match="you must specify all TopicPartitions"):
        read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, startingOffsets='{"orders":{"0":1}}').count()
    with pytest.raises(Exception, match="No offset matched"):
        read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, startingTimestamp=str(BASE_TS * 2)).count()


def test_spark_kafka_source_returns_the_same_dataframe(spark, kafka, orders, kafka_jars):
    if not kafka_jars:
        pytest.skip("spark-sql-kafka-0-10 for this pyspark is not on Maven Central (tools/spark/fetch-spark-kafka.sh)")
    opts = dict(kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, includeHeaders="true")
    ours = read(spark, **opts)
    theirs = spark.read.format("kafka")
    for k, v in opts.items():
        theirs = theirs.option(k.replace("_", "."), v)
    theirs = theirs.load()
    assert ours.schema == theirs.schema
    assert ours.count() == theirs.count() == sum(PER_PARTITION)
    assert ours.exceptAll(theirs).count() == 0 and theirs.exceptAll(ours).count() == 0


def test_read_committed_leaves_out_aborted_and_open_transactions(spark, kafka, kafka_jars):
    """``kafka.isolation.level=read_committed`` as Spark's Kafka source takes it: committed transactions only,
    nothing at or past an open transaction (the last stable offset), no control records; the default reads all."""
    import klog

    topic = f"txn-{time.monotonic_ns() % 10**9}"
    create_topic(kafka.bootstrap, topic, 2)
    p = klog.Producer(bootstrap_servers=kafka.bootstrap, transactional_id=f"spark-{topic}")
    # (A long transaction timeout: the open transaction must outlive the Spark reads on a loaded machine.)
    open_txn = klog.Producer(bootstrap_servers=kafka.bootstrap, transactional_id=f"spark-open-{topic}",
                             transaction_timeout_ms=600_000)
    try:
        p.init_transactions(30)
        for kind, n in (("c", 30), ("a", 20), ("z", 5)):
            p.begin_transaction()
            for i in range(n):
                p.send(topic, b"%s-%02d" % (kind.encode(), i), partition=i % 2)
            p.flush(10)
            if kind == "a":
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
        open_txn.init_transactions(30)
        open_txn.begin_transaction()
        open_txn.send(topic, b"open", partition=0)
        open_txn.flush(10)
        committed = sorted([b"c-%02d" % i for i in range(30)] + [b"z-%02d" % i for i in range(5)])
        opts = dict(kafka_bootstrap_servers=kafka.bootstrap, subscribe=topic, kafka_isolation_level="read_committed")
        got = sorted(bytes(r.value) for r in read(spark, **opts).collect())
        assert got == committed
        if kafka_jars:   # Spark's own Kafka source reads the same rows
            theirs = spark.read.format("kafka")
            for k, v in opts.items():
                theirs = theirs.option(k.replace("_", "."), v)
            assert sorted(bytes(r.value) for r in theirs.load().collect()) == committed
        everything = sorted(bytes(r.value) for r in
                            read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=topic).collect())
        assert everything == sorted(committed + [b"a-%02d" % i for i in range(20)] + [b"open"])
        open_txn.commit_transaction(30)
    finally:
        p.close()
        open_txn.close()


def test_log_append_time_topics_report_timestamp_type_1(spark, kafka):
    create_topic(kafka.bootstrap, "appended", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(kafka.bootstrap, "appended", [50])
    after = int(time.time() * 1000)
    rows = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe="appended").collect()
    assert len(rows) == 50 and {r.timestampType for r in rows} == {1}
    assert all(before - 1000 <= r.timestamp.timestamp() * 1000 <= after + 1000 for r in rows)


def test_batch_read_of_a_topic_with_no_records_returns_no_rows(spark, kafka):
    # no range to plan: PySpark still runs one task, with InputPartition(None)
    create_topic(kafka.bootstrap, "empty", 2)
    df = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe="empty")
    assert df.count() == 0 and df.collect() == []


def test_fail_on_data_loss_after_retention_removed_data(spark, kafka):
    topic = "retained"
    # Old timestamps expire at once (retention.ms=1 s) and make every append roll a new segment
    # (segment.ms=200 counts from the segment's first timestamp); future ones stay.
    create_topic(kafka.bootstrap, topic, 1, {"segment.ms": "200", "retention.ms": "1000", "file.delete.delay.ms": "0"})
    produce(kafka.bootstrap, topic, [300])
    # (within message.timestamp.after.max.ms, 1 h by default since Kafka 4.0: a later one is refused)
    future = int(time.time() * 1000) + 1_800_000
    produce(kafka.bootstrap, topic, [300], make=lambda p, i: {**_record(p, i), "timestamp": future + i})
    opts = dict(kafka_bootstrap_servers=kafka.bootstrap, subscribe=topic, startingOffsets='{"retained":{"0":0}}')
    deadline = time.monotonic() + 60
    # (retention may strike between planning and reading: poll with failOnDataLoss off)
    while read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=topic, failOnDataLoss="false").selectExpr("min(offset)").first()[0] != 300:
        assert time.monotonic() < deadline, "retention did not delete the old segments"
        time.sleep(0.5)
    with pytest.raises(Exception, match="Cannot read offsets 0-299: the log starts at 300.*failOnDataLoss"):
        read(spark, **opts).count()
    remaining = read(spark, **opts, failOnDataLoss="false")
    assert [r.offset for r in remaining.select("offset").orderBy("offset").collect()] == list(range(300, 600))


def _end_offset(progress: dict) -> dict:
    """The source's end offset in a progress report: JSON, except that Spark 4.0 reports the
    Python repr of a Python source's offset dict."""
    raw = progress["sources"][0]["endOffset"]
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return ast.literal_eval(raw)


def _run_available_now(stream_df, out: Path, checkpoint: Path):
    query = (
        stream_df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(240), "availableNow query did not finish"
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def test_streaming_with_a_checkpoint_reads_each_record_once_across_restarts(spark, kafka, tmp_path):
    topic = "events"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, [600, 400])
    stream = (
        spark.readStream.format("klog")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "300")
        .load()
        .selectExpr("partition", "offset", "value")
    )
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = _run_available_now(stream, out, checkpoint)
    assert all(p["numInputRows"] <= 300 for p in first)
    if _HAS_ADMISSION_CONTROL:
        # Spark >= 4.2 hands maxOffsetsPerTrigger back as ReadMaxRows: one run, several capped batches
        assert sum(p["numInputRows"] for p in first) == 1000 and len(first) >= 4
    else:
        # Spark 4.0/4.1 ask latestOffset() once per AvailableNow run and the source caps itself:
        # each run reads one capped batch and the next run continues where it stopped
        assert sum(p["numInputRows"] for p in first) == 300 and len(first) == 1
        runs = [first]
        while runs[-1]:
            runs.append(_run_available_now(stream, out, checkpoint))
            assert len(runs) < 10
        first = [p for run in runs for p in run]
        assert sum(p["numInputRows"] for p in first) == 1000
    assert _end_offset(first[-1]) == {topic: {"0": 600, "1": 400}}

    produce(kafka.bootstrap, topic, [150, 250])
    second = _run_available_now(stream, out, checkpoint)
    while not _HAS_ADMISSION_CONTROL and (more := _run_available_now(stream, out, checkpoint)):
        second += more
    assert sum(p["numInputRows"] for p in second) == 400
    assert _end_offset(second[-1]) == {topic: {"0": 750, "1": 650}}

    third = _run_available_now(stream, out, checkpoint)  # nothing new
    assert third == []
    rows = spark.read.parquet(str(out))
    assert rows.count() == 1400
    assert rows.select("partition", "offset").distinct().count() == 1400
    got = {(r.partition, r.offset) for r in rows.collect()}
    assert got == {(0, o) for o in range(750)} | {(1, o) for o in range(650)}


def test_stream_reader_latest_offset_signatures_before_and_since_spark_4_2(kafka, orders):
    """Both ways Spark asks for the end of the next micro-batch, on the reader itself."""
    from klog.spark.options import parse_source_options
    from klog.spark.source import KlogStreamReader

    opts = parse_source_options({"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": TOPIC,
                                 "startingOffsets": "earliest", "maxOffsetsPerTrigger": "1000"}, streaming=True)
    total = sum(PER_PARTITION)
    ends = {str(p): n for p, n in enumerate(PER_PARTITION)}

    # Spark 4.0/4.1: latestOffset() without arguments; the reader caps itself and learns where the
    # previous batch ended from partitions(start, end)
    old = KlogStreamReader(opts)
    try:
        start = old.initialOffset()
        assert start == {TOPIC: {"0": 0, "1": 0, "2": 0}}
        read = 0
        while True:
            end = old.latestOffset()
            step = sum(end[TOPIC].values()) - sum(start[TOPIC].values())
            if step == 0:
                break
            assert 0 < step <= 1000 + PARTITIONS  # proportional shares, at least one per backlog
            read += sum(p.task.range.size for p in old.partitions(start, end))
            start = end
        assert read == total and start == {TOPIC: ends}
        # after a restart Spark 4.0 reports the checkpointed offset as partitions(latest, latest)
        restarted = KlogStreamReader(opts)
        assert restarted.partitions(start, start) == []
        assert restarted.latestOffset() == start
        restarted.stop()
    finally:
        old.stop()

    # Spark >= 4.2: latestOffset(start, limit) with ReadMaxRows or ReadAllAvailable
    if _HAS_ADMISSION_CONTROL:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        new = KlogStreamReader(opts)
        try:
            assert new.getDefaultReadLimit() == ReadMaxRows(1000)
            zero = new.initialOffset()
            capped = new.latestOffset(zero, ReadMaxRows(10))
            assert 0 < sum(capped[TOPIC].values()) <= 10 + PARTITIONS
            assert new.latestOffset(zero, ReadAllAvailable()) == {TOPIC: ends}
            new.prepareForTriggerAvailableNow()
            assert new.reportLatestOffset() == {TOPIC: ends}
        finally:
            new.stop()


def test_streaming_fails_on_data_loss_and_skips_ahead_when_allowed(spark, kafka, tmp_path):
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient

    topic = "trimmed"
    create_topic(kafka.bootstrap, topic, 1)
    produce(kafka.bootstrap, topic, [200])

    def stream(fail_on_data_loss: str):
        return (spark.readStream.format("klog").option("kafka.bootstrap.servers", kafka.bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("failOnDataLoss", fail_on_data_loss).load().selectExpr("offset"))

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    assert sum(p["numInputRows"] for p in _run_available_now(stream("true"), out, checkpoint)) == 200
    produce(kafka.bootstrap, topic, [300])  # offsets 200..499
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for f in admin.delete_records([KafkaTopicPartition(topic, 0, 350)]).values():
        assert f.result(timeout=30).low_watermark == 350
    with pytest.raises(Exception, match="Cannot fetch offset 200: the log starts at 350.*failOnDataLoss"):
        _run_available_now(stream("true"), out, checkpoint)
    # the same checkpoint, failOnDataLoss off: the failed batch is re-run, skipping what is gone
    assert sum(p["numInputRows"] for p in _run_available_now(stream("false"), out, checkpoint)) == 150
    offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
    assert offsets == list(range(200)) + list(range(350, 500))


def test_stream_from_latest_sees_only_new_records(spark, kafka, tmp_path):
    topic = "latest-only"
    create_topic(kafka.bootstrap, topic, 1)
    produce(kafka.bootstrap, topic, [100])
    stream = (
        spark.readStream.format("klog").option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic).load().selectExpr("offset")
    )
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    assert _run_available_now(stream, out, checkpoint) == []  # starts at the end (latest)
    produce(kafka.bootstrap, topic, [40])
    assert sum(p["numInputRows"] for p in _run_available_now(stream, out, checkpoint)) == 40
    assert sorted(r.offset for r in spark.read.parquet(str(out)).collect()) == list(range(100, 140))


def test_sink_round_trip_with_key_value_headers_topic_and_partition_columns(spark, kafka):
    from klog.partitioner import partition_for_key

    create_topic(kafka.bootstrap, "sink-a", 3)
    create_topic(kafka.bootstrap, "sink-b", 2)
    rows = []
    for i in range(600):
        key = None if i % 5 == 0 else f"key-{i % 40}"
        partition = 1 if i % 9 == 0 else None
        headers = [("i", str(i).encode()), ("empty", None)] if i % 4 == 0 else None
        rows.append((key, f"value-{i}".encode(), "sink-a" if i % 3 else "sink-b", partition, headers))
    schema = "key string, value binary, topic string, partition int, headers array<struct<key:string,value:binary>>"
    df = spark.createDataFrame(rows, schema).repartition(3)
    df.write.mode("append").format("klog").option("kafka.bootstrap.servers", kafka.bootstrap).save()

    back = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe="sink-a,sink-b", includeHeaders="true").collect()
    assert len(back) == len(rows)
    by_value = {bytes(r.value): r for r in back}
    for key, value, topic, partition, headers in rows:
        r = by_value[value]
        assert r.topic == topic
        assert (None if r.key is None else bytes(r.key).decode()) == key
        assert _headers_of(r.headers) == headers
        if partition is not None:
            assert r.partition == partition
        elif key is not None:  # Java's default partitioner: murmur2 of the key
            assert r.partition == partition_for_key(key.encode(), 3 if topic == "sink-a" else 2)

    # the topic option wins over the column; string values are written as UTF-8
    spark.createDataFrame([("x", "other")], "value string, topic string").write.mode("append").format("klog").option(
        "kafka.bootstrap.servers", kafka.bootstrap).option("topic", "sink-b").save()
    assert read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe="sink-b").filter("value = cast('x' as binary)").count() == 1

    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        spark.createDataFrame([("k",)], "key string").write.mode("append").format("klog").option(
            "kafka.bootstrap.servers", kafka.bootstrap).option("topic", "sink-b").save()
    with pytest.raises(Exception, match="topic option required"):
        spark.createDataFrame([("v",)], "value string").write.mode("append").format("klog").option(
            "kafka.bootstrap.servers", kafka.bootstrap).save()


def test_sink_writes_tombstones_and_refuses_partitions_the_topic_lacks(spark, kafka):
    create_topic(kafka.bootstrap, "sink-tombstones", 2)
    rows = [(f"k{i}", None if i % 2 else f"v{i}".encode()) for i in range(50)]
    spark.createDataFrame(rows, "key string, value binary").write.mode("append").format("klog").option(
        "kafka.bootstrap.servers", kafka.bootstrap).option("topic", "sink-tombstones").save()
    back = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe="sink-tombstones").collect()
    assert sorted((bytes(r.key).decode(), None if r.value is None else bytes(r.value)) for r in back) == sorted(rows)
    with pytest.raises(Exception, match="partition 5 of topic 'sink-tombstones' does not exist"):
        spark.createDataFrame([("v", 5)], "value string, partition int").write.mode("append").format("klog").option(
            "kafka.bootstrap.servers", kafka.bootstrap).option("topic", "sink-tombstones").save()


def test_streaming_sink_copies_a_topic(spark, kafka, orders, tmp_path):
    create_topic(kafka.bootstrap, "orders-copy", 3)
    query = (
        spark.readStream.format("klog").option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", TOPIC).option("startingOffsets", "earliest").option("includeHeaders", "true").load()
        .selectExpr("key", "value", "headers", "partition")
        .writeStream.format("klog").option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", "orders-copy")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(240) and query.exception() is None
    source = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, includeHeaders="true")
    copy = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe="orders-copy", includeHeaders="true")
    cols = ["key", "value", "headers", "partition", "offset"]
    assert copy.count() == sum(PER_PARTITION)
    assert copy.select(*cols).exceptAll(source.select(*cols)).count() == 0


def test_path_mode_reads_segment_files_live_and_with_the_broker_stopped(spark, kafka, orders):
    """Runs last: it stops the module's broker."""
    expected = read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, includeHeaders="true")
    expected_rows = sorted(expected.collect(), key=lambda r: (r.partition, r.offset))
    log_dir = kafka.log_dir
    # live: the active segments' indexes are preallocated (zero-padded tails)
    live = read(spark, path=str(log_dir), subscribe=TOPIC, includeHeaders="true", minPartitions="6")
    assert sorted(live.collect(), key=lambda r: (r.partition, r.offset)) == expected_rows
    kafka.stop()
    with pytest.raises(Exception):
        read(spark, kafka_bootstrap_servers=kafka.bootstrap, subscribe=TOPIC, kafkaConsumer_pollTimeoutMs="3000").count()
    stopped = read(spark, path=str(log_dir), subscribe=TOPIC, includeHeaders="true")
    assert sorted(stopped.collect(), key=lambda r: (r.partition, r.offset)) == expected_rows
    per_partition = {r["partition"]: (r["min(offset)"], r["max(offset)"]) for r in stopped.groupBy("partition").agg({"offset": "min"}).join(stopped.groupBy("partition").agg({"offset": "max"}), "partition").collect()}
    assert per_partition == {p: (0, n - 1) for p, n in enumerate(PER_PARTITION)}
