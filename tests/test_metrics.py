"""Prometheus metrics: the counters and their export (no sockets), the listener's config, and Debian's real
``prometheus`` server scraping a real broker process while a real client produces and consumes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser_support import save_screenshot

from klog.broker.config import BrokerConfig, ConfigError
from klog.broker.metrics import (
    REQUEST_TIME_BUCKETS_MS,
    BrokerMetrics,
    Histogram,
    PartitionState,
    Snapshot,
    families,
    parse_listener,
    request_name,
)
from klog.testing.kafka import free_port
from klog.testing.process import BrokerProcess, stop_process

PROMETHEUS = shutil.which("prometheus")
_METRICS_RE = re.compile(r"metrics on http://([^:]+):(\d+)/metrics")


# ---- sans-IO ----------------------------------------------------------------------------------------------

def test_histogram_buckets_are_cumulative_with_an_inf_bucket() -> None:
    histogram = Histogram((1, 10))
    for value in (0.5, 1, 5, 50, 50):
        histogram.observe(value)
    buckets, total = histogram.cumulative()
    assert buckets == [("1.0", 2), ("10.0", 3), ("+Inf", 5)]
    assert total == 106.5


def test_request_names_follow_kafka_request_metrics() -> None:
    assert request_name(0) == "Produce"
    assert request_name(1) == "FetchConsumer"
    assert request_name(-1) == "FetchFollower"
    assert request_name(2) == "ListOffsets"
    assert request_name(18) == "ApiVersions"


def test_produce_and_fetch_are_counted_per_topic_not_per_record() -> None:
    metrics = BrokerMetrics()
    metrics.produced("t", 1000, 40)
    metrics.produced("t", 500, 10)

    class Region:
        length = 300

    metrics.fetched([{"topic": "t", "partitions": [{"records": [Region(), Region()]}, {"records": b"xx"}]}])
    counters = metrics.topics["t"]
    assert (counters.bytes_in, counters.messages_in, counters.produce_requests) == (1500, 50, 2)
    assert (counters.bytes_out, counters.fetch_requests) == (602, 1)


def test_request_latency_lands_in_the_bucket_of_its_milliseconds() -> None:
    metrics = BrokerMetrics()
    metrics.request_done(0, 0.003)   # 3 ms
    buckets, total = metrics.request_time_ms[0].cumulative()
    by_le = dict(buckets)
    assert by_le["2.5"] == 0 and by_le["5.0"] == 1 and by_le["+Inf"] == 1
    assert total == pytest.approx(3.0)
    assert len(buckets) == len(REQUEST_TIME_BUCKETS_MS) + 1


def _exported(snap: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in families(snap):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_partition_health_is_derived_from_replicas_and_isr() -> None:
    snap = Snapshot(node_id=1)
    snap.partitions = [
        PartitionState("a", 0, leader=1, replicas=3, isr=3, min_isr=2, size_bytes=10, start_offset=0,
                       end_offset=5, segments=1),
        PartitionState("a", 1, leader=1, replicas=3, isr=1, min_isr=2, size_bytes=0, start_offset=0,
                       end_offset=0, segments=1),
        PartitionState("a", 2, leader=-1, replicas=3, isr=0, min_isr=2, size_bytes=0, start_offset=0,
                       end_offset=0, segments=1),
        PartitionState("b", 0, leader=2, replicas=3, isr=2, min_isr=1, size_bytes=0, start_offset=0,
                       end_offset=0, segments=1),
    ]
    values = _exported(snap)
    assert values[("kafka_server_replicamanager_partitioncount", ())] == 4
    assert values[("kafka_server_replicamanager_leadercount", ())] == 2
    assert values[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    assert values[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 1
    assert values[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 1
    assert values[("kafka_log_log_size", (("partition", "0"), ("topic", "a")))] == 10


def test_metrics_listener_config_is_validated_naming_the_key() -> None:
    assert parse_listener("127.0.0.1:9644") == ("127.0.0.1", 9644)
    assert parse_listener("http://[::1]:0") == ("::1", 0)
    assert parse_listener(":9644") == ("", 9644)
    assert BrokerConfig({"klog.metrics.listener": ""})["klog.metrics.listener"] == ""
    with pytest.raises(ConfigError, match="klog.metrics.listener"):
        BrokerConfig({"klog.metrics.listener": "localhost"})
    with pytest.raises(ConfigError, match="klog.metrics.listener"):
        BrokerConfig({"klog.metrics.listener": "127.0.0.1:99999"})


# ---- a real broker, a real client, a real Prometheus ----------------------------------------------------

def _metrics_address(broker: BrokerProcess) -> tuple[str, int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in broker.lines:
            match = _METRICS_RE.search(line)
            if match:
                return match.group(1), int(match.group(2))
        time.sleep(0.05)
    raise AssertionError("no 'metrics on' line in the broker log:\n" + broker.log_text())


def test_metrics_endpoint_is_off_by_default(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        time.sleep(0.2)
        assert not any("metrics on" in line for line in broker.lines)


def test_broker_refuses_to_start_when_the_metrics_port_is_taken(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        broker = BrokerProcess(tmp_path / "data", {"klog.metrics.listener": f"127.0.0.1:{port}"})
        with pytest.raises(RuntimeError, match=f"klog.metrics.listener=127.0.0.1:{port}"):
            broker.start()
        broker.stop()


class _Prometheus:
    """Debian's prometheus server scraping one target every 500 ms, on 127.0.0.1."""

    def __init__(self, tmp: Path, target: str) -> None:
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"
            "scrape_configs:\n  - job_name: klog\n    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.log = open(tmp / "prometheus.log", "wb")
        assert PROMETHEUS is not None
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code in (400, 422):   # the expression is wrong (503 while starting: an OSError to retry)
                raise AssertionError(f"{promql}: {exc.read().decode()}") from None
            raise
        assert body["status"] == "success", body
        return body["data"]["result"]  # type: ignore[no-any-return]

    def wait_for(self, promql: str, expected: float, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Query until every series of ``promql`` has ``expected`` (scrapes lag the test a little)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.query(promql)
            except OSError as exc:   # not up yet
                last = exc
            else:
                if last and all(float(series["value"][1]) == expected for series in last):
                    return last  # type: ignore[no-any-return]
            time.sleep(0.25)
        raise AssertionError(f"{promql}: expected {expected}, Prometheus last said {last}")

    def stop(self) -> None:
        stop_process(self.proc, 20)
        self.log.close()


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus (bash tools/install-peers.sh)")
def test_prometheus_scrapes_what_a_real_client_did(tmp_path: Path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    records, partitions, consumed = 300, 3, 200
    with BrokerProcess(tmp_path / "data", {"klog.metrics.listener": "127.0.0.1:0",
                                           "num.partitions": partitions}) as broker:
        host, port = _metrics_address(broker)
        prometheus = _Prometheus(tmp_path, f"{host}:{port}")
        try:
            producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
            for i in range(records):
                producer.produce("metered", key=b"k%d" % i, value=b"v" * 100, partition=i % partitions)
            assert producer.flush(30) == 0
            consumer = confluent_kafka.Consumer({
                "bootstrap.servers": broker.bootstrap_servers, "group.id": "meter-group",
                "auto.offset.reset": "earliest", "enable.auto.commit": False})
            consumer.assign([confluent_kafka.TopicPartition("metered", p, 0) for p in range(partitions)])
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < consumed and time.monotonic() < deadline:
                got += [m for m in consumer.consume(consumed - len(got), 1.0) if m.error() is None]
            assert len(got) == consumed
            consumer.commit(asynchronous=False)
            committed = {p.partition: p.offset for p in consumer.committed(
                [confluent_kafka.TopicPartition("metered", p) for p in range(partitions)], 10)}
            consumer.close()

            prometheus.wait_for('kafka_server_brokertopicmetrics_messagesin_total{topic="metered"}', records)
            # bytes in = the record batches appended = the partitions' log sizes
            sizes = prometheus.query('sum(kafka_log_log_size{topic="metered"})')
            prometheus.wait_for('kafka_server_brokertopicmetrics_bytesin_total{topic="metered"}',
                                float(sizes[0]["value"][1]))
            # lag is reported for the partitions the group committed (as kafka_exporter does)
            committed = {p: offset for p, offset in committed.items() if offset >= 0}
            assert sum(committed.values()) == consumed
            for p in range(partitions):
                prometheus.wait_for(f'kafka_log_log_logendoffset{{topic="metered",partition="{p}"}}',
                                    records // partitions)
                if p in committed:
                    prometheus.wait_for('kafka_consumergroup_lag{consumergroup="meter-group",topic="metered",'
                                        f'partition="{p}"}}', records // partitions - committed[p])
            prometheus.wait_for('sum(kafka_consumergroup_lag{consumergroup="meter-group"})',
                                len(committed) * (records // partitions) - consumed)
            prometheus.wait_for('sum(kafka_consumergroup_current_offset{consumergroup="meter-group"})', consumed)
            assert float(prometheus.query(
                'kafka_server_brokertopicmetrics_bytesout_total{topic="metered"}')[0]["value"][1]) > 0
            produce = prometheus.query('kafka_network_requestmetrics_requests_total{request="Produce"}')
            assert float(produce[0]["value"][1]) >= 1
            assert prometheus.query('kafka_network_requestmetrics_totaltimems_bucket{request="Produce",le="+Inf"}')
            prometheus.wait_for("kafka_server_replicamanager_underreplicatedpartitions", 0)
            prometheus.wait_for("kafka_controller_kafkacontroller_offlinepartitionscount", 0)
            prometheus.wait_for("kafka_controller_kafkacontroller_activecontrollercount", 1)
            prometheus.wait_for('kafka_coordinator_group_groupmetadatamanager_numgroups{state="Empty"}', 1)
            prometheus.wait_for("up", 1)
            _check_dashboard_queries(prometheus)
        finally:
            prometheus.stop()


DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana-klog.json"


def _check_dashboard_queries(prometheus: _Prometheus) -> None:
    """Every query of docs/grafana-klog.json parses and runs on this Prometheus (Grafana's variables filled in
    as "All" does), and the panels about what the test did show data."""
    if not DASHBOARD.is_file():   # running against an installed wheel without the docs
        return
    dashboard = json.loads(DASHBOARD.read_text())
    # rate() needs two samples in its window: wait for a few scrapes
    prometheus.wait_for("count_over_time(up[1m]) >= bool 3", 1)
    empty = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$__rate_interval", "1m").replace("$job", ".*")
                    .replace("$topic", ".*").replace("$group", ".*"))
            if not prometheus.query(expr):
                empty.append(panel["title"] + ": " + expr)
    # only the series nothing in this test produces may be empty (flushes: no flush.ms set)
    assert {e.split(":")[0] for e in empty} <= {"Log flush time", "ISR shrinks / expands per second"}, "\n".join(empty)


# ---- Prometheus's own graph page, in Debian's headless Chromium --------------------------------------------

#: what the graph page plots (title for the reader, PromQL); the screenshot in docs/img/ shows these
GRAPHS = (
    ("messages in per second, by topic",
     "sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total[5s]))"),
    ("Produce request time, 99th percentile (ms)",
     'histogram_quantile(0.99, sum by (le, request) '
     '(rate(kafka_network_requestmetrics_totaltimems_bucket{request="Produce"}[5s])))'),
    ("consumer lag, by group and topic",
     "sum by (consumergroup, topic) (kafka_consumergroup_lag)"),
)
#: load steps of 0.5 s: a few in the suite, a longer shaped load when a screenshot for the docs is asked for
LOAD_STEPS, LOAD_STEPS_FOR_SCREENSHOT = 8, 100
CONSUMED_PER_STEP = 60


def _orders_in_step(step: int, steps: int) -> int:
    """Two waves over the run, above and below what the consumer takes per step: its lag grows and shrinks."""
    import math

    return int(CONSUMED_PER_STEP + 45 * math.sin(4 * math.pi * step / steps))


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus (bash tools/install-peers.sh)")
def test_prometheus_graph_page_plots_klog_metrics(headless_chromium: Any, tmp_path: Path) -> None:
    """Debian's prometheus serves its classic web UI: its graph page, in a real browser, draws a line for every
    series of klog's per-topic rates, Produce latency and consumer lag. With KLOG_METRICS_SCREENSHOTS=docs/img the
    load runs longer and the page is saved as docs/img/metrics-prometheus.png."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    screenshot_dir = os.environ.get("KLOG_METRICS_SCREENSHOTS")
    steps = LOAD_STEPS_FOR_SCREENSHOT if screenshot_dir else LOAD_STEPS
    with BrokerProcess(tmp_path / "data", {"klog.metrics.listener": "127.0.0.1:0", "num.partitions": 3}) as broker:
        host, port = _metrics_address(broker)
        prometheus = _Prometheus(tmp_path, f"{host}:{port}")
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": "billing", "auto.offset.reset": "earliest",
            "enable.auto.commit": False})
        page = headless_chromium.new_page(viewport={"width": 1280, "height": 900})
        try:
            consumer.subscribe(["orders"])
            prometheus.wait_for("up", 1)   # scraping (its first scrape comes seconds after it starts)
            started = time.monotonic()
            orders = 0
            for step in range(steps):
                step_end = time.monotonic() + 0.5
                count = _orders_in_step(step, steps)
                for i in range(count):
                    producer.produce("orders", key=b"c%d" % (orders + i), value=b"o" * 100)
                for i in range(25):
                    producer.produce("payments", value=b"p" * 200)
                orders += count
                assert producer.flush(30) == 0
                if step < steps - 1:   # not in the last step: some lag is left to see
                    taken = [m for m in consumer.consume(CONSUMED_PER_STEP, 0.2) if m.error() is None]
                    if taken:
                        consumer.commit(asynchronous=False)
                time.sleep(max(0.0, step_end - time.monotonic()))
            committed = consumer.committed([confluent_kafka.TopicPartition("orders", p) for p in range(3)], 10)
            assert all(p.error is None for p in committed), committed
            # lag as kafka_exporter sums it: over the partitions the group has committed in. Under load a step's
            # consume can take records of only some partitions, and a partition never committed has no lag series.
            lag = sum(consumer.get_watermark_offsets(p, 10)[1] - p.offset for p in committed if p.offset >= 0)
            assert lag > 0, "the consumer kept up: nothing to plot"
            prometheus.wait_for('sum(kafka_server_brokertopicmetrics_messagesin_total{topic="orders"})', orders)
            prometheus.wait_for('sum(kafka_consumergroup_lag{consumergroup="billing",topic="orders"})', lag)

            seconds = int(time.monotonic() - started) + 2
            query = {"g0.range_input": f"{seconds}s"}   # the whole run
            for n, (_, expr) in enumerate(GRAPHS):
                query |= {f"g{n}.expr": expr, f"g{n}.tab": "0", f"g{n}.range_input": f"{seconds}s"}
            page.goto(f"http://127.0.0.1:{prometheus.port}/graph?" + urllib.parse.urlencode(query))
            assert "/classic/graph" in page.url, "not Debian's classic Prometheus UI"
            panels = page.locator("#graph_container .graph_area")
            expected_legends = [['{topic="orders"}', '{topic="payments"}'], ['{request="Produce"}'],
                                ['{consumergroup="billing",topic="orders"}']]
            for n, legends in enumerate(expected_legends):
                panel = panels.nth(n)
                panel.locator("svg path.path").first.wait_for(state="attached", timeout=20_000)
                legend = page.locator("#graph_container .legend").nth(n).inner_text()
                assert sorted(line.lstrip("✔").strip() for line in legend.splitlines()) == legends, legend
                lines = panel.locator("svg path.path").evaluate_all("ps => ps.map(p => p.getAttribute('d'))")
                assert len(lines) == len(legends)
                # a line through several points (the samples over the run), all of them numbers
                assert all(d.count("L") >= 2 and "NaN" not in d for d in lines), lines
            page.evaluate("window.scrollTo(0, 0)")   # the fixed navigation bar at the top of the picture
            save_screenshot(page, "KLOG_METRICS_SCREENSHOTS", "metrics-prometheus", tmp_path)
        finally:
            page.close()
            consumer.close()
            del producer   # its connections go now, not after the broker stopped
            prometheus.stop()
