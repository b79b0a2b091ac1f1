"""The web console (klog.console): its pure helpers, then the real thing end to end - ``python -m klog.console``
as a process, against a klog broker process (with its metrics endpoint) and against Apache Kafka, driven in
Debian's headless Chromium by Playwright. Pages must load, show what the test produced, and link together.

Screenshots of every page go to ``$KLOG_CONSOLE_SCREENSHOTS`` when set (how docs/img/console-*.png are made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from browser_support import save_screenshot
from console_support import ConsoleProcess

from klog.console.history import History, Rates
from klog.console.render import MAX_SHOWN_BYTES, format_bytes, line_chart, sparkline
from klog.console.server import BadRequest, format_timestamp, parse_timestamp
from klog.testing.process import BrokerProcess

_METRICS_RE = re.compile(r"metrics on (http://\S+/metrics)")


# ---- pure helpers -----------------------------------------------------------------------------------------

def test_values_show_as_text_json_or_hex() -> None:
    data = b'{"id":1,"name":"caf\xc3\xa9"}'
    assert format_bytes(data, "text") == '{"id":1,"name":"café"}'
    assert format_bytes(data, "json") == '{\n  "id": 1,\n  "name": "café"\n}'
    assert format_bytes(b"not json", "json") == "not json"
    assert format_bytes(b"\x00\xffA", "hex") == "00 ff 41"
    assert format_bytes(b"\xff", "text") == "\\xff"
    assert format_bytes(None, "text") == "null"
    with pytest.raises(ValueError, match="format must be one of"):
        format_bytes(b"", "yaml")


def test_long_values_are_cut_with_the_number_of_bytes_left_out() -> None:
    shown = format_bytes(b"a" * (MAX_SHOWN_BYTES + 10), "text")
    assert shown.endswith("(10 more bytes)") and shown.startswith("a" * 100)


def test_sparkline_draws_a_line_from_two_points_and_a_frame_before() -> None:
    assert "polyline" not in sparkline([5.0])
    assert "polyline" in sparkline([1.0, 3.0, 2.0])
    assert "<title>rate &lt;x&gt;</title>" in sparkline([1.0, 2.0], label="rate <x>")


def test_line_chart_has_a_legend_per_series() -> None:
    svg = line_chart({"t-0": [(0.0, 5.0), (1.0, 3.0)], "t-1": [(0.0, 1.0)]})
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1
    assert ">t-0<" in svg and ">t-1<" in svg
    assert "no samples yet" in line_chart({})


def test_history_keeps_the_newest_samples_and_series() -> None:
    history = History(max_samples=3, max_series=2)
    for t in range(5):
        history.add("a", float(t), float(t))
    assert history.values("a") == [2.0, 3.0, 4.0]
    history.add("b", 0.0, 1.0)
    history.add("c", 0.0, 1.0)   # drops "a", the least recently updated
    assert history.series("a") == [] and len(history) == 2


def test_rates_skip_an_interval_in_which_the_counter_restarted() -> None:
    history = History()
    rates = Rates(history)
    rates.observe("k", 10.0, 100.0)
    rates.observe("k", 12.0, 300.0)
    rates.observe("k", 14.0, 50.0)     # restarted broker
    rates.observe("k", 15.0, 150.0)
    assert history.values("k") == [100.0, 100.0]


def test_timestamps_parse_as_ms_or_iso_utc() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    assert format_timestamp(1_700_000_000_123) == "2023-11-14 22:13:20.123 UTC"
    with pytest.raises(BadRequest, match="neither milliseconds nor an ISO"):
        parse_timestamp("yesterday")


def test_console_templates_and_assets_ship_in_the_package() -> None:
    # under tools/test.sh this is the installed wheel: maturin must have packaged the non-Python files
    from importlib import resources

    package = resources.files("klog.console")
    templates = {t.name for t in package.joinpath("templates").iterdir()}
    assert {"base.html", "overview.html", "topics.html", "topic.html", "messages.html", "groups.html",
            "group.html", "error.html"} <= templates
    assert {s.name for s in package.joinpath("static").iterdir()} >= {"console.css", "console.js"}
    for name in templates:
        text = package.joinpath("templates").joinpath(name).read_text()
        assert "http://" not in text and "https://" not in text, f"{name} loads something from the network"


def test_client_properties_are_split_between_admin_and_consumer() -> None:
    from klog.console.data import split_client_config

    admin, consumer = split_client_config({"client.id": "ops", "default.api.timeout.ms": "5000",
                                           "fetch.max.bytes": "1000"})
    assert admin == {"client.id": "ops", "default.api.timeout.ms": "5000"}
    assert consumer == {"client.id": "ops", "default.api.timeout.ms": "5000", "fetch.max.bytes": "1000"}
    with pytest.raises(ValueError, match="'fetch.max.byte'"):
        split_client_config({"fetch.max.byte": "1"})


def klog_console_command() -> list[str]:
    """The installed ``klog`` script's ``console`` command (``python -m klog.cli`` when not on the path)."""
    script = shutil.which("klog", path=os.path.dirname(sys.executable))
    return [script, "console"] if script else [sys.executable, "-m", "klog.cli", "console"]


def test_python_m_klog_console_is_the_klog_console_command() -> None:
    via_module = subprocess.run([sys.executable, "-m", "klog.console", "--help"], capture_output=True, text=True,
                                timeout=60)
    via_cli = subprocess.run([*klog_console_command(), "--help"], capture_output=True, text=True, timeout=60)
    assert via_module.returncode == via_cli.returncode == 0, via_module.stderr + via_cli.stderr
    assert "--bootstrap-server" in via_cli.stdout and "--metrics-url" in via_cli.stdout
    assert via_module.stdout.replace("python -m klog.console", "klog console") == via_cli.stdout


def test_console_says_when_the_cluster_cannot_be_reached(tmp_path: Path) -> None:
    from klog.testing.kafka import free_port

    client_properties = tmp_path / "client.properties"
    client_properties.write_text("default.api.timeout.ms=3000\n")
    result = subprocess.run([*klog_console_command(), "--bootstrap-server",
                             f"127.0.0.1:{free_port()}", "--port", "0", "--command-config", str(client_properties)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "cannot reach the cluster at 127.0.0.1:" in result.stderr


# ---- end to end in a real browser -------------------------------------------------------------------------

def console_process(bootstrap: str, metrics_url: str | None) -> ConsoleProcess:
    """``klog console`` on a free port (with ``--metrics-url`` when given); stopped with SIGTERM."""
    cmd = [*klog_console_command(), "--bootstrap-server", bootstrap, "--port", "0", "--sample-interval", "1"]
    if metrics_url:
        cmd += ["--metrics-url", metrics_url]
    return ConsoleProcess(cmd)


def _shoot(page: Any, name: str, tmp_path: Path) -> None:
    save_screenshot(page, "KLOG_CONSOLE_SCREENSHOTS", f"console-{name}", tmp_path)


RECORDS = 90
PARTITIONS = 3
CONSUMED = 60


def _produce(confluent_kafka: Any, bootstrap: str, topic: str, count: int, start: int, partition: int | None,
             base_ts: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        kwargs: dict[str, Any] = {"partition": partition if partition is not None else i % PARTITIONS}
        producer.produce(topic, key=f"order-{i}".encode(),
                         value=json.dumps({"order": i, "item": "widget", "qty": i % 7}).encode(),
                         headers=[("source", b"console-test"), ("seq", str(i).encode())],
                         timestamp=base_ts + i * 1000, **kwargs)
    assert producer.flush(30) == 0


def _exercise_console(browser: Any, bootstrap: str, metrics_url: str | None, tmp_path: Path,
                      screenshots: bool) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("orders", PARTITIONS, 1, config={"retention.ms": "3600000"})])
    futures["orders"].result(30)
    cluster_id = admin.list_topics(timeout=10).cluster_id
    base_ts = int(time.time() * 1000) - 200_000
    console = console_process(bootstrap, metrics_url)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "billing", "client.id": "billing-app",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        # produced in three steps while the console samples the metrics (1 s): the rate sparklines have a shape
        for step in range(3):
            _produce(confluent_kafka, bootstrap, "orders", RECORDS // 3, step * RECORDS // 3, None, base_ts)
            time.sleep(1.2)
        consumer.subscribe(["orders"])
        got = 0
        deadline = time.monotonic() + 60
        while got < CONSUMED and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(CONSUMED - got, 1.0) if m.error() is None)
        assert got == CONSUMED and len(consumer.assignment()) == PARTITIONS
        # committed positions chosen by the test (not by fetch order), so every partition has a known lag
        committed = {0: 20, 1: 10, 2: 15}
        consumer.commit(offsets=[confluent_kafka.TopicPartition("orders", p, o) for p, o in committed.items()],
                        asynchronous=False)
        expected_lag = sum(RECORDS // PARTITIONS - offset for offset in committed.values())
        time.sleep(2.5)   # a few samples for the charts (sample interval 1 s)

        # overview
        page.goto(console.url + "/")
        assert page.inner_text("#cluster-id") == cluster_id
        assert page.inner_text("#broker-count") == "1"
        assert page.inner_text("#offline") == "0"
        assert page.inner_text("#under-replicated") == "0"
        assert "controller" in page.inner_text("#brokers")
        if screenshots:
            _shoot(page, "overview", tmp_path)

        # topics list -> topic page (navigation by links)
        page.click("#nav-topics")
        page.wait_for_url("**/topics")
        row = page.locator('tr[data-topic="orders"]')
        assert row.locator(".messages").inner_text() == str(RECORDS)
        # sizes from DescribeLogDirs (both brokers answer it)
        assert row.locator(".size").inner_text().endswith("KiB")
        if metrics_url:
            # rates from the broker's metrics: after a few samples the sparklines are lines
            page.reload()
            assert page.locator('tr[data-topic="orders"] svg.spark').count() == 2
        if screenshots:
            _shoot(page, "topics", tmp_path)
        row.locator("a").first.click()
        page.wait_for_url("**/topics/orders")
        assert page.inner_text("#topic-name") == "orders"
        ends = [int(t) for t in page.locator("#partitions .end-offset").all_inner_texts()]
        assert len(ends) == PARTITIONS and sum(ends) == RECORDS
        assert all(size.endswith("KiB") for size in page.locator("#partitions .size").all_inner_texts())
        retention = page.locator('#configs tr[data-config="retention.ms"]')
        assert "3600000" in retention.inner_text()
        assert "override" in (retention.get_attribute("class") or "")
        if metrics_url:
            assert page.locator(".cards svg.spark polyline").count() >= 1, "no rate sparkline drawn"
        if screenshots:
            _shoot(page, "topic", tmp_path)

        # message browser: partition 1 from offset 0 as JSON, then hex, then by time
        page.click("#browse-link")
        page.wait_for_url("**/topics/orders/messages")
        page.select_option("#partition", "1")
        page.fill("#offset", "0")
        page.fill("#limit", "5")
        page.select_option("#format", "json")
        page.click("#browse-button")
        page.wait_for_url("**partition=1**")
        offsets = page.locator("#messages tbody tr").evaluate_all("rows => rows.map(r => r.dataset.offset)")
        assert offsets == ["0", "1", "2", "3", "4"]
        first_value = json.loads(page.locator("#messages tbody tr pre.value").first.inner_text())
        assert first_value == {"order": 1, "item": "widget", "qty": 1}   # record 1 went to partition 1 first
        assert page.locator("#messages tbody tr pre.key").first.inner_text() == "order-1"
        assert "seq: 1" in page.locator("#messages tbody tr").first.inner_text()
        if screenshots:
            _shoot(page, "messages", tmp_path)
        page.select_option("#format", "hex")
        page.click("#browse-button")
        page.wait_for_url("**format=hex**")
        assert page.locator("#messages tbody tr pre.key").first.inner_text() == b"order-1".hex(" ")
        # by time: record i has timestamp base_ts + i s; partition 1 holds i = 1, 4, 7, ...; from record 31 on
        page.fill("#offset", "")
        page.fill("#timestamp", str(base_ts + 30_500))
        page.select_option("#format", "text")
        page.click("#browse-button")
        page.wait_for_url("**timestamp=**")
        assert page.locator("#messages tbody tr pre.key").first.inner_text() == "order-31"

        # live tail: new records appear without a reload
        page.fill("#timestamp", "")
        page.fill("#offset", "")
        page.click("#browse-button")
        page.wait_for_url("**timestamp=&**")
        page.click("#tail-button")
        # records 1000-1002, stamped a few seconds ago
        _produce(confluent_kafka, bootstrap, "orders", 3, 1000, 1, int(time.time() * 1000) - 1_000_000 - 3000)
        page.wait_for_selector('#messages pre.key:text-is("order-1002")', timeout=20_000)
        tail_keys = page.locator("#messages tbody tr pre.key").all_inner_texts()
        assert tail_keys[-3:] == ["order-1000", "order-1001", "order-1002"]
        page.click("#tail-button")
        if screenshots:
            _shoot(page, "tail", tmp_path)

        # consumer groups list -> group page
        page.click("#nav-groups")
        page.wait_for_url("**/groups")
        group_row = page.locator('tr[data-group="billing"]')
        # the live tail's 3 records went to partition 1 after the commit: its lag grew by 3
        assert group_row.locator(".lag").inner_text().replace(",", "") == str(expected_lag + 3)
        assert "Stable" in group_row.inner_text()
        if screenshots:
            _shoot(page, "groups", tmp_path)
        group_row.locator("a").click()
        page.wait_for_url("**/groups/billing")
        assert page.inner_text("#group-id") == "billing"
        assert page.inner_text("#group-state") == "Stable"
        assert page.inner_text("#member-count") == "1"
        assert "billing-app" in page.inner_text("#members")
        assert all(f"orders-{p}" in page.inner_text("#members") for p in range(PARTITIONS))
        for partition, offset in committed.items():
            lag_row = page.locator(f'#lag tr[data-partition="orders-{partition}"]')
            assert lag_row.locator(".committed").inner_text() == str(offset)
        assert int(page.inner_text("#total-lag").replace(",", "")) == expected_lag + 3
        lag_row = page.locator('#lag tr[data-partition="orders-1"]')
        assert lag_row.locator(".lag").inner_text() == str(RECORDS // PARTITIONS - committed[1] + 3)
        assert page.locator("#lag-chart svg polyline").count() == PARTITIONS, "no lag line over time"
        if screenshots:
            _shoot(page, "group", tmp_path)

        # a topic that does not exist: a clear 404 page
        response = page.goto(console.url + "/topics/no-such-topic")
        assert response is not None and response.status == 404
        assert "does not exist" in page.inner_text("#error-message")
    finally:
        page.close()
        consumer.close()
        assert console.stop() == 0, "\n".join(console.lines)


def test_console_shows_a_klog_cluster_in_chromium(headless_chromium: Any, tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"klog.metrics.listener": "127.0.0.1:0"}) as broker:
        metrics_url = next(m.group(1) for m in (_METRICS_RE.search(line) for line in broker.lines) if m)
        _exercise_console(headless_chromium, broker.bootstrap_servers, metrics_url, tmp_path, screenshots=True)


@pytest.mark.java
def test_console_shows_an_apache_kafka_cluster_in_chromium(headless_chromium: Any, apache_kafka_bootstrap: str,
                                                            tmp_path: Path) -> None:
    _exercise_console(headless_chromium, apache_kafka_bootstrap, None, tmp_path, screenshots=False)


def _exercise_consumer_protocol_group(browser: Any, bootstrap: str) -> None:
    """A KIP-848 group (group.protocol=consumer, klog's own consumer): its page shows the member and its
    assignment (ConsumerGroupDescribe: DescribeGroups does not describe such groups)."""
    import klog

    admin = klog.AdminClient(bootstrap)
    try:
        admin.create_topics(["events"], num_partitions=2)
    finally:
        admin.close()
    producer = klog.Producer(bootstrap)
    for i in range(10):
        producer.send("events", value=b"e%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    consumer = klog.Consumer("events", bootstrap_servers=bootstrap, group_id="kip848", client_id="new-protocol-app",
                             auto_offset_reset="earliest", **{"group.protocol": "consumer"})
    console = console_process(bootstrap, None)
    page = browser.new_page()
    try:
        got = 0
        deadline = time.monotonic() + 60
        while got < 10 and time.monotonic() < deadline:
            got += len(consumer.poll(1.0))
        assert got == 10
        consumer.commit()
        page.goto(console.url + "/groups")
        row = page.locator('tr[data-group="kip848"]')
        assert "Stable" in row.inner_text() and "consumer" in row.inner_text()
        row.locator("a").click()
        page.wait_for_url("**/groups/kip848")
        assert page.inner_text("#group-state") == "Stable"
        assert page.inner_text("#member-count") == "1"
        members = page.inner_text("#members")
        assert "new-protocol-app" in members and "events-0" in members and "events-1" in members
        assert page.locator("#lag .committed").all_inner_texts() == ["5", "5"]
    finally:
        page.close()
        consumer.close()
        assert console.stop() == 0, "\n".join(console.lines)


def test_console_shows_a_consumer_protocol_group_of_klog(headless_chromium: Any, tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        _exercise_consumer_protocol_group(headless_chromium, broker.bootstrap_servers)


@pytest.mark.java
def test_console_shows_a_consumer_protocol_group_of_apache_kafka(headless_chromium: Any,
                                                                 apache_kafka_bootstrap: str) -> None:
    _exercise_consumer_protocol_group(headless_chromium, apache_kafka_bootstrap)


def _exercise_share_group(browser: Any, bootstrap: str, metrics_url: str | None) -> None:
    """A share group (KIP-932) of two klog ShareConsumers: the groups page lists it (type share), its page shows
    the members with their assignments, the share-partition's start offset and lag, and (klog's metrics) its
    in-flight records by state: a worker holding the even offsets and having accepted the odd ones, then
    releasing the even ones."""
    import klog
    from klog.client.admin import ConfigResource

    group = "workers"
    with klog.AdminClient(bootstrap) as admin:
        admin.create_topics(["jobs"], num_partitions=1)
        admin.alter_configs({ConfigResource("group", group): {"share.auto.offset.reset": "earliest"}})
    with klog.Producer(bootstrap) as producer:
        for i in range(10):
            producer.send("jobs", value=b"job-%d" % i)
        producer.flush()
    console = console_process(bootstrap, metrics_url)
    worker = klog.ShareConsumer("jobs", bootstrap_servers=bootstrap, group_id=group, client_id="worker-a",
                                acknowledgement_mode="explicit")
    idle = None
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        held: list[Any] = []
        deadline = time.monotonic() + 60
        while len(held) < 10 and time.monotonic() < deadline:
            held.extend(worker.poll(timeout=0.5))   # nothing acknowledged: it may poll on only while it gets none
            if held and len(held) < 10:
                break
        assert sorted(r.offset for r in held) == list(range(10)), held
        for r in held:
            if r.offset % 2:
                worker.acknowledge(r, "accept")
        assert set(worker.commit_sync().values()) == {None}
        idle = klog.ShareConsumer("jobs", bootstrap_servers=bootstrap, group_id=group, client_id="worker-b")
        assert idle.poll(timeout=0.5) == []   # everything is acquired or acknowledged

        def shown(expected: dict[str, str]) -> dict[str, str]:
            """The share-partition's row once it shows ``expected`` (the console samples the metrics each second)."""
            cells: dict[str, str] = {}
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                page.goto(console.url + "/groups/" + group)
                row = page.locator('#share-partitions tr[data-partition="jobs-0"]')
                cells = {c: row.locator(f".{c}").inner_text() for c in
                         ("start", "lag", "acquired", "available", "acknowledged", "archived")}
                if all(cells[k] == v for k, v in expected.items()):
                    return cells
                time.sleep(0.5)
            raise AssertionError(f"share-partition row {cells}, expected {expected}")

        page.goto(console.url + "/groups")
        row = page.locator(f'tr[data-group="{group}"]')
        assert "share" in row.inner_text() and "Stable" in row.inner_text()
        row.locator("a").click()
        page.wait_for_url(f"**/groups/{group}")
        assert page.inner_text("#group-state") == "Stable" and page.inner_text("#member-count") == "2"
        assert page.inner_text("#group-type") == "share"
        # the second member's assignment comes with one of its heartbeats (on Kafka a moment after it joined)
        deadline = time.monotonic() + 20
        while True:
            members = page.inner_text("#members")
            if members.count("jobs-0") == 2 or time.monotonic() > deadline:
                break
            idle.poll(timeout=0.2)
            time.sleep(0.3)
            page.reload()
        assert "worker-a" in members and "worker-b" in members and members.count("jobs-0") == 2
        assert page.locator("#reset-offsets-form").count() == 0   # consumer-group offsets only
        if metrics_url is None:
            cells = shown({"start": "0"})
            assert [cells[k] for k in ("acquired", "available", "acknowledged")] == ["-", "-", "-"]
            return
        shown({"start": "0", "lag": "5", "acquired": "5", "available": "0", "acknowledged": "5", "archived": "0"})
        for r in held:
            if r.offset % 2 == 0:
                worker.acknowledge(r, "release")
        assert set(worker.commit_sync().values()) == {None}
        shown({"start": "0", "acquired": "0", "available": "5", "acknowledged": "5"})
    finally:
        page.close()
        worker.close()
        if idle is not None:
            idle.close()
        assert console.stop() == 0, "\n".join(console.lines)


def test_console_shows_a_share_group_with_in_flight_records_of_klog(headless_chromium: Any, tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"klog.metrics.listener": "127.0.0.1:0"}) as broker:
        metrics_url = next(m.group(1) for m in (_METRICS_RE.search(line) for line in broker.lines) if m)
        _exercise_share_group(headless_chromium, broker.bootstrap_servers, metrics_url)


@pytest.mark.java
def test_console_shows_a_share_group_of_apache_kafka(headless_chromium: Any, apache_kafka_bootstrap: str) -> None:
    _exercise_share_group(headless_chromium, apache_kafka_bootstrap, None)


# ---- write actions ------------------------------------------------------------------------------------------

def _act(page: Any, form: str, fields: dict[str, str], title: str) -> None:
    """Fill and submit one action's form, and check its confirmation page names the action."""
    for name, value in fields.items():
        field = page.locator(f"{form} [name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        elif field.get_attribute("type") == "checkbox":
            field.check()
        else:
            field.fill(value)
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("#action-title")
    assert page.inner_text("#action-title") == title


def _confirm(page: Any, notice: str) -> None:
    page.click("#confirm-button")
    page.wait_for_selector("#notice")
    assert page.inner_text("#notice") == notice


def _partition_cells(page: Any, column: int) -> list[str]:
    return page.locator(f"#partitions tbody tr td:nth-child({column})").all_inner_texts()


def _exercise_actions(browser: Any, bootstrap: str, tmp_path: Path, screenshots: bool) -> None:
    """Every write action through its form and confirmation page, checked with klog's client; refusals (the
    broker's and Kafka's empty-group rule) shown with their error; POSTs from elsewhere refused."""
    import klog
    from klog.client import ConfigResource, TopicPartition

    console = console_process(bootstrap, None)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    admin = klog.AdminClient(bootstrap)
    member = None
    try:
        # create a topic
        page.goto(console.url + "/topics")
        page.click("#create-topic")
        _act(page, "#create-topic-form", {"name": "payments", "partitions": "2", "configs": "retention.ms=86400000"},
             "Create topic payments")
        assert "2 partitions" in page.inner_text("#action-details")
        assert "retention.ms = 86400000" in page.inner_text("#action-details")
        _confirm(page, "Created topic payments.")
        assert page.inner_text("#topic-name") == "payments" and _partition_cells(page, 1) == ["0", "1"]
        retention = page.locator('#configs tr[data-config="retention.ms"]')
        assert "86400000" in retention.inner_text() and "override" in (retention.get_attribute("class") or "")

        # a confirmation can be cancelled: nothing happens
        _act(page, "#delete-topic-form", {}, "Delete topic payments")
        page.click("#cancel-link")
        page.wait_for_selector("#topic-name")
        assert "payments" in admin.list_topics()

        # produce three messages to partition 1, with a key and a header
        for i in range(3):
            _act(page, "#produce-form", {"partition": "1", "key": f"k{i}", "value": f"paid {i}",
                                         "headers": "source=console"}, "Produce a message to payments")
            _confirm(page, f"Produced a message to payments-1 at offset {i}.")
        with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("payments", 1)])
            records: list[Any] = []
            deadline = time.monotonic() + 30
            while len(records) < 3 and time.monotonic() < deadline:
                records += consumer.poll(0.5)
        assert [(r.key, r.value, list(r.headers)) for r in records] == [
            (f"k{i}".encode(), f"paid {i}".encode(), [("source", b"console")]) for i in range(3)]
        assert _partition_cells(page, 6) == ["0", "3"]

        # set a config, then reset it to the default
        _act(page, "#config-form", {"config": "retention.ms", "value": "3600000"}, "Change a config of topic payments")
        assert page.inner_text("#action-details") == "set retention.ms = 3600000"
        _confirm(page, "retention.ms of payments set to 3600000.")
        assert "3600000" in page.locator('#configs tr[data-config="retention.ms"]').inner_text()
        _act(page, "#config-form", {"config": "retention.ms", "reset": "1"}, "Change a config of topic payments")
        _confirm(page, "retention.ms of payments reset to its default.")
        configs = admin.describe_configs([ConfigResource("topic", "payments")])
        assert next(iter(configs.values()))["retention.ms"].is_default
        assert "override" not in (page.locator('#configs tr[data-config="retention.ms"]').get_attribute("class")
                                  or "")

        # add partitions
        _act(page, "#partitions-form", {"count": "4"}, "Add partitions to topic payments")
        assert "from 2 to 4 partitions" in page.inner_text("#action-details")
        _confirm(page, "Topic payments has 4 partitions.")
        assert _partition_cells(page, 1) == ["0", "1", "2", "3"]
        if screenshots:
            _shoot(page, "topic-actions", tmp_path)

        # delete the records of partition 1 below offset 2
        _act(page, "#delete-records-form", {"partition": "1", "offset": "2"}, "Delete records of payments-1")
        assert page.locator("#action-table tbody td").all_inner_texts() == ["payments", "1", "0", "2"]
        _confirm(page, "Deleted the records of payments-1 below offset 2.")
        assert _partition_cells(page, 5)[1] == "2"
        low = admin.list_offsets({("payments", 1): "earliest"})[TopicPartition("payments", 1)].offset
        assert low == 2

        # the broker refuses: a topic that exists already
        page.goto(console.url + "/topics")
        page.click("#create-topic")
        _act(page, "#create-topic-form", {"name": "payments"}, "Create topic payments")
        page.click("#confirm-button")
        page.wait_for_selector("#action-error")
        assert page.inner_text("#error-name") == "TOPIC_ALREADY_EXISTS"
        assert "payments" in page.inner_text("#error-text")

        # a group with a live member: Kafka's rule, offsets are reset only in an empty group
        member = klog.Consumer("payments", bootstrap_servers=bootstrap, group_id="settlement",
                               client_id="settlement-app", auto_offset_reset="earliest", enable_auto_commit=False)
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 4 and time.monotonic() < deadline:
            member.poll(0.2)
        member.commit({("payments", 1): 3})
        page.goto(console.url + "/groups/settlement")
        page.select_option("#reset-offsets-form [name=to]", "earliest")
        page.click("#reset-offsets-form button[type=submit]")
        page.wait_for_selector("#error-message")
        assert "can only be reset if the group 'settlement' is inactive" in page.inner_text("#error-message")
        member.close()
        member = None
        page.goto(console.url + "/groups/settlement")
        _act(page, "#reset-offsets-form", {"to": "earliest"}, "Reset offsets of group settlement")
        assert page.locator("#action-table tbody td").all_inner_texts() == ["payments", "1", "3", "2"]
        _confirm(page, "Reset the offsets of group settlement on 1 partitions.")
        assert page.locator('#lag tr[data-partition="payments-1"] .committed').inner_text() == "2"
        _act(page, "#reset-offsets-form", {"topic": "payments", "to": "offset", "offset": "1"},
             "Reset offsets of group settlement")
        _confirm(page, "Reset the offsets of group settlement on 4 partitions.")
        committed = {tp.partition: om.offset for tp, om in admin.list_group_offsets("settlement").items()}
        assert committed == {0: 0, 1: 2, 2: 0, 3: 0}   # offset 1, clamped to each partition's log start and end

        # delete the topic: the confirmation page, then the topic list without it
        page.goto(console.url + "/topics/payments")
        _act(page, "#delete-topic-form", {}, "Delete topic payments")
        if screenshots:
            _shoot(page, "delete-confirmation", tmp_path)
        _confirm(page, "Deleted topic payments.")
        assert page.locator('tr[data-topic="payments"]').count() == 0
        # the group's commits of the deleted topic (klog keeps them) do not hold up the pages
        response = page.goto(console.url + "/groups", timeout=15_000)
        assert response is not None and response.status == 200

        # the broker refuses: the topic was deleted behind the page's back
        admin.create_topics(["doomed"], num_partitions=1)
        page.goto(console.url + "/topics/doomed")
        admin.delete_topics(["doomed"])
        _act(page, "#delete-topic-form", {}, "Delete topic doomed")
        page.click("#confirm-button")
        page.wait_for_selector("#action-error")
        assert page.inner_text("#error-name") == "UNKNOWN_TOPIC_OR_PARTITION"
        if screenshots:
            _shoot(page, "action-refused", tmp_path)

        # POSTs not from the console's own pages
        no_token = page.request.post(console.url + "/topics", form={"name": "sneaky", "confirm": "yes"})
        assert no_token.status == 403 and "token" in no_token.text()
        page.goto(console.url + "/topics")
        token = page.locator("input[name=csrf]").first.get_attribute("value")
        foreign = page.request.post(console.url + "/topics", form={"name": "sneaky", "confirm": "yes", "csrf": token},
                                    headers={"Origin": "http://evil.example"})
        assert foreign.status == 403 and "cross-origin" in foreign.text()
        assert "sneaky" not in admin.list_topics()
    finally:
        if member is not None:
            member.close()
        admin.close()
        page.close()
        assert console.stop() == 0, "\n".join(console.lines)


def test_console_actions_on_a_klog_cluster_in_chromium(headless_chromium: Any, tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        _exercise_actions(headless_chromium, broker.bootstrap_servers, tmp_path, screenshots=True)


@pytest.mark.java
def test_console_actions_on_an_apache_kafka_cluster_in_chromium(headless_chromium: Any, apache_kafka_bootstrap: str,
                                                               tmp_path: Path) -> None:
    _exercise_actions(headless_chromium, apache_kafka_bootstrap, tmp_path, screenshots=False)
