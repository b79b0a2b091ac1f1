"""KIP-714 client telemetry: GetTelemetrySubscriptions/PushTelemetry as Kafka 4.3's ClientMetricsManager answers
them (sans-IO, against :class:`klog.broker.telemetry.ClientTelemetry`), client metrics subscriptions made with
Kafka's own ``kafka-client-metrics.sh`` (ClientMetricsCommand) on klog and on Apache Kafka alike, a real Java
producer's pushed metrics read back from klog's Prometheus endpoint, and bad payloads refused on the wire."""

from __future__ import annotations

import gzip
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1 import metrics_pb2

from klog.broker.telemetry import ClientMetadata, ClientTelemetry, decode_metrics, prometheus_name
from klog.metadata.client_metrics import SubscriptionError, validate
from klog.metadata.image import ConfigResourceType
from klog.protocol.errors import ErrorCode
from klog.testing import kafka_tools as kt
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port, one_broker
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient



CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"
ZERO = uuid.UUID(int=0)
_METRICS_RE = re.compile(r"metrics on http://([^:]+):(\d+)/metrics")


def payload(points: list[tuple[str, float]], *, monotonic: bool = True, delta: bool = True) -> bytes:
    """OTLP MetricsData with one sum point per (name, value), as a Java client pushes them."""
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for name, value in points:
        metric = scope.metrics.add()
        metric.name = name
        metric.sum.is_monotonic = monotonic
        metric.sum.aggregation_temporality = 1 if delta else 2
        point = metric.sum.data_points.add()
        point.as_double = value
        attribute = point.attributes.add()
        attribute.key, attribute.value.string_value = "node.id", "1"
    return bytes(data.SerializeToString())


# ---- sans-IO: Kafka's ClientMetricsManager rules ------------------------------------------------------------

class Subscriptions:
    """The image's configs as ClientTelemetry reads them: a new mapping object per change, as images are."""

    def __init__(self) -> None:
        self.configs: Mapping[tuple[Any, str], Mapping[str, str]] = {}

    def set(self, name: str, **values: str) -> None:
        configs = dict(self.configs)
        configs[(ConfigResourceType.CLIENT_METRICS, name)] = {k.replace("_", "."): v for k, v in values.items()}
        self.configs = configs


def client(client_id: str = "app-1", software: str = "apache-kafka-java") -> Any:
    return lambda instance_id: ClientMetadata(str(instance_id), client_id, software, "4.3.1", "127.0.0.1", "5000")


def push_request(instance_id: uuid.UUID, subscription_id: int, metrics: bytes, *, compression: int = 0,
                 terminating: bool = False) -> Any:
    return SimpleNamespace(client_instance_id=instance_id, subscription_id=subscription_id, terminating=terminating,
                           compression_type=compression, metrics=metrics)


@pytest.fixture
def subs() -> Subscriptions:
    return Subscriptions()


@pytest.fixture
def telemetry(subs: Subscriptions) -> ClientTelemetry:
    return ClientTelemetry(lambda: subs.configs, max_bytes=1000, max_clients=3, expiry_intervals=3)


def test_a_new_client_gets_an_instance_id_and_the_subscriptions_that_match_it(subs, telemetry):
    subs.set("producers", metrics="org.apache.kafka.producer.", interval_ms="2000",
             match="client_software_name=apache-kafka-java,client_id=app-.*")
    subs.set("others", metrics="org.apache.kafka.consumer.", interval_ms="500", match="client_id=other")
    answer = telemetry.get_subscriptions(ZERO, client(), 1_000_000)
    assert answer["error_code"] == ErrorCode.NONE and answer["client_instance_id"] != ZERO
    assert answer["requested_metrics"] == ["org.apache.kafka.producer."]
    assert answer["push_interval_ms"] == 2000
    assert answer["accepted_compression_types"] == [4, 3, 1, 2]   # zstd, lz4, gzip, snappy: Kafka's order
    assert answer["delta_temporality"] is True and answer["telemetry_max_bytes"] == 1000
    unmatched = telemetry.get_subscriptions(ZERO, client("batch-job"), 1_000_000)
    assert unmatched["requested_metrics"] == [] and unmatched["push_interval_ms"] == 300_000


def test_a_star_subscription_asks_for_every_metric_at_the_shortest_interval(subs, telemetry):
    subs.set("a", metrics="org.apache.kafka.producer.", interval_ms="5000")
    subs.set("b", metrics="*", interval_ms="1000")
    answer = telemetry.get_subscriptions(ZERO, client(), 1_000_000)
    assert answer["requested_metrics"] == ["*"] and answer["push_interval_ms"] == 1000


def test_asking_again_before_the_push_interval_is_throttled(subs, telemetry):
    subs.set("s", metrics="*", interval_ms="1000")
    first = telemetry.get_subscriptions(ZERO, client(), 1_000_000)
    again = telemetry.get_subscriptions(first["client_instance_id"], client(), 1_000_500)
    assert again["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    later = telemetry.get_subscriptions(first["client_instance_id"], client(), 1_001_000)
    assert later["error_code"] == ErrorCode.NONE and later["subscription_id"] == first["subscription_id"]


def test_pushes_are_held_to_the_interval_but_the_first_after_a_get(subs, telemetry):
    subs.set("s", metrics="*", interval_ms="1000")
    got = telemetry.get_subscriptions(ZERO, client(), 1_000_000)
    iid, sid = got["client_instance_id"], got["subscription_id"]
    body = payload([("org.apache.kafka.producer.record.send.total", 1)])
    assert telemetry.push(push_request(iid, sid, body), client(), 1_000_010)["error_code"] == ErrorCode.NONE
    assert telemetry.push(push_request(iid, sid, body), client(), 1_000_500)["error_code"] \
        == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert telemetry.push(push_request(iid, sid, body), client(), 1_001_010)["error_code"] == ErrorCode.NONE
    # a terminating push is taken at any time; after it the instance takes nothing more
    assert telemetry.push(push_request(iid, sid, body, terminating=True), client(), 1_001_020)["error_code"] \
        == ErrorCode.NONE
    assert telemetry.push(push_request(iid, sid, body), client(), 1_002_100)["error_code"] == ErrorCode.INVALID_REQUEST


def test_a_changed_subscription_makes_the_old_id_unknown(subs, telemetry):
    subs.set("s", metrics="org.apache.kafka.producer.", interval_ms="1000")
    got = telemetry.get_subscriptions(ZERO, client(), 1_000_000)
    subs.set("s", metrics="org.apache.kafka.consumer.", interval_ms="1000")
    body = payload([("org.apache.kafka.consumer.fetch.total", 1)])
    refused = telemetry.push(push_request(got["client_instance_id"], got["subscription_id"], body), client(),
                             1_000_100)
    assert refused["error_code"] == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    # Kafka lets the client ask again at once after UNKNOWN_SUBSCRIPTION_ID
    renewed = telemetry.get_subscriptions(got["client_instance_id"], client(), 1_000_200)
    assert renewed["error_code"] == ErrorCode.NONE
    assert renewed["subscription_id"] != got["subscription_id"]
    assert renewed["requested_metrics"] == ["org.apache.kafka.consumer."]


@pytest.mark.parametrize("compression, pack", [
    (0, lambda b: b),
    (1, gzip.compress),
    (2, lambda b: __import__("cramjam").snappy.compress_raw(b).read()),
    (3, lambda b: __import__("lz4.frame", fromlist=["frame"]).compress(b)),
    (4, lambda b: __import__("zstandard").ZstdCompressor().compress(b)),
], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_accepted_compression_type_decodes(compression, pack):
    body = payload([("org.apache.kafka.producer.record.send.total", 7)])
    points = list(decode_metrics(pack(body), compression))
    assert points == [("org.apache.kafka.producer.record.send.total", "counter", True, (("node.id", "1"),), 7.0)]


def test_snappy_in_snappy_javas_framing_decodes():
    import cramjam

    raw = payload([("m", 1)])
    block = cramjam.snappy.compress_raw(raw).read()
    xerial = b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") * 2 + len(block).to_bytes(4, "big") + block
    assert [p[0] for p in decode_metrics(xerial, 2)] == ["m"]


def test_bad_payloads_size_and_codec_are_refused_with_kafkas_codes(subs, telemetry):
    subs.set("s", metrics="*", interval_ms="100")
    now = 1_000_000
    got = telemetry.get_subscriptions(ZERO, client(), now)
    iid, sid = got["client_instance_id"], got["subscription_id"]

    def push(body: bytes, compression: int = 0) -> int:
        nonlocal now
        now += 1000
        return int(telemetry.push(push_request(iid, sid, body, compression=compression), client(), now)["error_code"])

    assert push(b"\xff\xff\xff\xff") == ErrorCode.INVALID_RECORD                 # not protobuf
    assert push(b"not gzip at all", compression=1) == ErrorCode.INVALID_RECORD  # not the codec it names
    assert push(payload([("m", 1)]), compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert push(payload([("m" * 1200, 1)])) == ErrorCode.TELEMETRY_TOO_LARGE    # telemetry.max.bytes is 1000
    assert push(payload([("m", 1)])) == ErrorCode.NONE
    assert telemetry.push(push_request(ZERO, sid, b""), client(), now)["error_code"] == ErrorCode.INVALID_REQUEST


def test_delta_sums_accumulate_and_cumulative_ones_replace(subs, telemetry):
    subs.set("s", metrics="*", interval_ms="100")
    got = telemetry.get_subscriptions(ZERO, client(), 1_000_000)
    iid, sid = got["client_instance_id"], got["subscription_id"]
    for i, now in enumerate((1_000_001, 1_000_200, 1_000_400)):
        body = payload([("d.total", 2)]) + payload([("c.total", 10 * (i + 1))], delta=False)
        assert telemetry.push(push_request(iid, sid, body), client(), now)["error_code"] == ErrorCode.NONE
    values = {s.name: s.value for s in telemetry.series(1_000_400)}
    assert values == {"d.total": 6.0, "c.total": 30.0}
    labels = dict(telemetry.series(1_000_400)[0].labels)
    assert labels["client_instance_id"] == str(iid) and labels["client_id"] == "app-1"
    assert labels["client_software_name"] == "apache-kafka-java" and labels["node_id"] == "1"


def test_instances_are_bounded_and_expire_after_their_intervals(subs, telemetry):
    subs.set("s", metrics="*", interval_ms="1000")
    ids = [telemetry.get_subscriptions(ZERO, client(f"c{i}"), 1_000_000 + i)["client_instance_id"] for i in range(5)]
    assert len(telemetry) == 3                                  # klog.telemetry.max.clients: the oldest dropped
    assert telemetry.push(push_request(ids[4], 0, b""), client("c4"), 1_000_010)["error_code"] \
        == ErrorCode.UNKNOWN_SUBSCRIPTION_ID                    # kept, its id known (the subscription id is not 0)
    telemetry.series(1_000_010 + 3001)                          # 3 intervals without a request
    assert len(telemetry) == 0


def test_subscription_configs_are_validated_as_kafka_does():
    validate("s", {"metrics": "a.,b.", "interval.ms": "100", "match": "client_id=x.*,client_source_port=1"})
    for configs, message in [({"interval.ms": "99"}, "interval must be between"),
                             ({"interval.ms": "3600001"}, "interval must be between"),
                             ({"match": "client_colour=red"}, "Illegal client matching pattern"),
                             ({"match": "client_id=("}, "Illegal client matching pattern: client_id=\\("),
                             ({"colour": "red"}, "Unknown client metrics configuration")]:
        with pytest.raises(SubscriptionError, match=message):
            validate("s", configs)


def test_otlp_names_become_prometheus_names():
    assert prometheus_name("org.apache.kafka.producer.record.queue.time.avg") \
        == "org_apache_kafka_producer_record_queue_time_avg"
    assert prometheus_name("1.x-y") == "_1_x_y"


# ---- kafka-client-metrics.sh on klog and on Apache Kafka ---------------------------------------------------

@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp(request.param)
    with one_broker(request.param, root, None) as bootstrap:
        yield bootstrap


def _client_metrics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return kt.run_kafka_tool(CLIENT_METRICS, "--bootstrap-server", bootstrap, *args)


@pytest.mark.java
@pytest.mark.long
def test_kafka_client_metrics_command_alters_lists_describes_and_deletes(server):
    name = f"sub-{uuid.uuid4().hex[:6]}"
    made = _client_metrics(server, "--alter", "--name", name, "--metrics",
                           "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.",
                           "--interval", "1000", "--match", "client_software_name=apache-kafka-java")
    assert made.returncode == 0 and f"Altered client metrics config for {name}" in made.stdout, made.stderr
    listed = _client_metrics(server, "--list")
    assert listed.returncode == 0 and name in listed.stdout.split(), listed.stderr
    described = _client_metrics(server, "--describe", "--name", name)
    assert described.returncode == 0, described.stderr
    lines = sorted(line.strip() for line in described.stdout.splitlines()[1:] if line.strip())
    assert lines == ["interval.ms=1000", "match=client_software_name=apache-kafka-java",
                     "metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator."]
    bad = _client_metrics(server, "--alter", "--name", name, "--interval", "50")
    assert bad.returncode != 0 and "interval must be between 100 and 3600000" in bad.stdout + bad.stderr
    gone = _client_metrics(server, "--delete", "--name", name)
    assert gone.returncode == 0, gone.stderr
    assert name not in _client_metrics(server, "--list").stdout.split()


def _wire(bootstrap: str) -> WireClient:
    host, port = bootstrap.split(":")
    return WireClient(host, int(port), client_id="parity")


def _alter(wire: WireClient, name: str, *configs: tuple[str, int, str | None]) -> tuple[int, str | None]:
    answer = wire.request(44, 1, {"resources": [{"resource_type": 16, "resource_name": name, "configs": [
        {"name": key, "config_operation": op, "value": value} for key, op, value in configs]}],
        "validate_only": False}).responses[0]
    return int(answer.error_code), answer.error_message


def _describe(wire: WireClient, name: str) -> list[tuple[str, str, int, bool, int, str, int]]:
    result = wire.request(32, 4, {"resources": [{"resource_type": 16, "resource_name": name,
                                                 "configuration_keys": None}],
                                  "include_synonyms": True, "include_documentation": True}).results[0]
    assert result.error_code == ErrorCode.NONE
    return [(c.name, c.value, c.config_source, c.is_default, c.config_type, c.documentation, len(c.synonyms))
            for c in result.configs]


def test_subscription_wire_answers_are_kafkas(server):
    """The same IncrementalAlterConfigs, DescribeConfigs and ListConfigResources requests on CLIENT_METRICS get the
    same error codes, messages and entries from klog and from Kafka 4.3."""
    name = f"w-{uuid.uuid4().hex[:6]}"
    set_ = 0
    with _wire(server) as wire:
        assert _alter(wire, name, ("colour", set_, "red")) == (
            ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: colour")
        assert _alter(wire, name, ("interval.ms", set_, "50")) == (
            ErrorCode.INVALID_REQUEST, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 "
                                       "(1 hour)")
        assert _alter(wire, name, ("interval.ms", set_, "abc")) == (
            ErrorCode.INVALID_CONFIG, "Invalid value abc for configuration interval.ms: Not a number of type INT")
        assert _alter(wire, name, ("match", set_, "client_colour=red")) == (
            ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_colour=red")
        assert _alter(wire, name, ("match", set_, "client_id=(")) == (
            ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=(")
        assert _alter(wire, "", ("metrics", set_, "*")) == (ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        assert _alter(wire, name, ("metrics", 2, "c.")) == (
            ErrorCode.INVALID_CONFIG, "Can't APPEND to key metrics because its type is not LIST.")
        # an unknown subscription describes as its defaults
        defaults = [("interval.ms", "300000", 5, False, 3, "Metrics push interval in milliseconds", 0),
                    ("match", "", 5, False, 7, "Client match criteria", 0),
                    ("metrics", "", 5, False, 7, "Telemetry metric name prefix list", 0)]
        assert _describe(wire, name) == defaults
        assert _alter(wire, name, ("metrics", set_, "a.,b."), ("interval.ms", set_, "1000")) == (ErrorCode.NONE, None)
        expected = [("interval.ms", "1000", 7, False, 3, "Metrics push interval in milliseconds", 1), defaults[1],
                    ("metrics", "a.,b.", 7, False, 7, "Telemetry metric name prefix list", 1)]
        deadline = time.monotonic() + 15   # Kafka's broker applies the controller's records after answering
        while _describe(wire, name) != expected and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _describe(wire, name) == expected
        for version, body in ((0, {}), (1, {"resource_types": [16]})):
            listed = wire.request(74, version, body)
            assert listed.error_code == ErrorCode.NONE
            assert (name, 16) in [(r.resource_name, r.resource_type) for r in listed.config_resources]
        listed = wire.request(74, 1, {"resource_types": []})
        types = [r.resource_type for r in listed.config_resources]
        assert (name, 16) in [(r.resource_name, r.resource_type) for r in listed.config_resources]
        assert {4, 8} <= set(types) and types == sorted(types, key=[32, 16, 8, 4, 2].index)
        assert wire.request(74, 1, {"resource_types": [3]}).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert _alter(wire, name, ("metrics", 1, None), ("interval.ms", 1, None)) == (ErrorCode.NONE, None)


# ---- GetTelemetrySubscriptions/PushTelemetry on the wire, klog and Kafka 4.3 with a telemetry receiver --------

REPO = Path(__file__).resolve().parent.parent


def _kafka_libs_with_receiver(root: Path) -> Path:
    """Kafka's jars plus tests/java/TelemetryReceiver.java compiled: Kafka advertises the telemetry APIs only with a
    ClientTelemetry receiver in metric.reporters."""
    libs = find_kafka_libs()
    classes, with_receiver = root / "classes", root / "libs"
    classes.mkdir()
    with_receiver.mkdir()
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{libs}/*",
                    str(REPO / "tests" / "java" / "TelemetryReceiver.java")], check=True, capture_output=True,
                   timeout=120)
    subprocess.run(["jar", "cf", str(with_receiver / "telemetry-receiver.jar"), "-C", str(classes), "."], check=True,
                   timeout=60)
    for jar in libs.glob("*.jar"):
        (with_receiver / jar.name).symlink_to(jar)
    return with_receiver


@pytest.fixture(scope="module", params=["klog", "kafka"])
def telemetry_server(request, tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp(f"telemetry-{request.param}")
    if request.param == "klog":
        with BrokerProcess(root / "data", {"listeners": "PLAINTEXT://127.0.0.1:0",
                                           "klog.metrics.listener": "127.0.0.1:0"}) as node:
            yield node.bootstrap_servers
        return
    with apache_kafka(root, free_port(), heap="512m", libs=_kafka_libs_with_receiver(root),
                      config={"metric.reporters": "TelemetryReceiver"}) as bootstrap:
        yield str(bootstrap)


@pytest.mark.java
def test_telemetry_wire_answers_are_kafkas(telemetry_server):
    """One request sequence, the same answers from klog and Kafka 4.3: subscription fields, throttling of gets and
    pushes, the first push after a get, a terminating push, unknown subscription ids, codecs, sizes, bad payloads."""
    gauge = metrics_pb2.MetricsData()
    metric = gauge.resource_metrics.add().scope_metrics.add().metrics.add()
    metric.name = "x.y"
    metric.gauge.data_points.add().as_double = 1
    good = gauge.SerializeToString()
    with _wire(telemetry_server) as wire:
        advertised = {a.api_key: (a.min_version, a.max_version) for a in wire.request(
            18, 3, {"client_software_name": "parity", "client_software_version": "1"}).api_keys}
        assert (advertised[71], advertised[72], advertised[74]) == ((0, 0), (0, 0), (0, 1))
        assert _alter(wire, f"all-{uuid.uuid4().hex[:6]}", ("metrics", 0, "*"), ("interval.ms", 0, "120000")) \
            == (ErrorCode.NONE, None)
        deadline = time.monotonic() + 15   # Kafka's broker applies the controller's records after answering
        while not (got := wire.request(71, 0, {"client_instance_id": ZERO})).requested_metrics \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (got.error_code, got.requested_metrics, got.push_interval_ms, got.accepted_compression_types,
                got.telemetry_max_bytes, got.delta_temporality) == (0, ["*"], 120000, [4, 3, 1, 2], 1048576, True)
        iid, sid = got.client_instance_id, got.subscription_id

        def push(instance: uuid.UUID, subscription: int, data: bytes, compression: int = 0,
                 terminating: bool = False) -> int:
            return int(wire.request(72, 0, {"client_instance_id": instance, "subscription_id": subscription,
                                            "terminating": terminating, "compression_type": compression,
                                            "metrics": data}).error_code)

        def fresh() -> tuple[uuid.UUID, int]:
            answer = wire.request(71, 0, {"client_instance_id": ZERO})
            return answer.client_instance_id, answer.subscription_id

        # a 2 minute interval, far longer than these requests take: each answer is about their order
        assert wire.request(71, 0, {"client_instance_id": iid}).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(iid, sid, b"\xff\xff\xff\xff") == ErrorCode.INVALID_RECORD   # first push after a get
        assert push(iid, sid, good) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(iid, sid + 1, good) == ErrorCode.THROTTLING_QUOTA_EXCEEDED     # throttle checked first
        assert push(iid, sid + 1, good, terminating=True) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push(iid, sid, good, terminating=True) == ErrorCode.INVALID_REQUEST  # nothing after terminating
        assert push(ZERO, sid, good) == ErrorCode.INVALID_REQUEST
        instance, subscription = fresh()
        assert push(instance, subscription, good, compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert wire.request(71, 0, {"client_instance_id": instance}).error_code == ErrorCode.NONE
        assert push(*fresh(), b"x" * (1024 * 1024 + 1)) == ErrorCode.TELEMETRY_TOO_LARGE
        assert push(*fresh(), b"not gzip", compression=1) == ErrorCode.INVALID_RECORD
        assert push(*fresh(), b"\x00garbage", compression=4) == ErrorCode.INVALID_RECORD
        assert push(*fresh(), gzip.compress(good), compression=1) == ErrorCode.NONE
        assert push(*fresh(), b"") == ErrorCode.NONE
        assert push(uuid.uuid4(), 5, good) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert wire.request(71, 0, {"client_instance_id": uuid.uuid4()}).error_code == ErrorCode.NONE


# ---- a real Java producer pushes; Prometheus sees its metrics ---------------------------------------------

def _metrics_address(broker: BrokerProcess) -> tuple[str, int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in broker.lines:
            match = _METRICS_RE.search(line)
            if match:
                return match.group(1), int(match.group(2))
        time.sleep(0.05)
    raise AssertionError("no 'metrics on' line in the broker log:\n" + broker.log_text())


def _scrape(address: tuple[str, int]) -> str:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=10) as response:
        return response.read().decode()


@pytest.fixture
def telemetry_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, tuple[str, int]]]:
    with BrokerProcess(tmp_path / "data", {"listeners": "PLAINTEXT://127.0.0.1:0",
                                           "klog.metrics.listener": "127.0.0.1:0"}) as broker:
        yield broker, _metrics_address(broker)


@pytest.mark.java
def test_a_java_producer_and_consumers_pushed_metrics_are_on_the_prometheus_endpoint(telemetry_broker):
    broker, address = telemetry_broker
    made = _client_metrics(broker.bootstrap_servers, "--alter", "--name", "java-clients", "--metrics",
                           "org.apache.kafka.producer.,org.apache.kafka.consumer.fetch.manager.", "--interval", "1000",
                           "--match", "client_software_name=apache-kafka-java")
    assert made.returncode == 0, made.stderr
    clients = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for command in (
        kt.kafka_tool_command(kt.PRODUCER_PERFORMANCE, "--topic", "telemetry", "--num-records", "1000000",
                              "--record-size", "100", "--throughput", "200", "--producer-props",
                              f"bootstrap.servers={broker.bootstrap_servers}", "client.id=telemetry-producer"),
        kt.kafka_tool_command(kt.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap_servers, "--topic",
                              "telemetry", "--group", "telemetry", "--consumer-property",
                              "client.id=telemetry-consumer"))]
    wanted = (re.compile(r'^org_apache_kafka_producer_record_send_total\{[^}]*client_id="telemetry-producer"', re.M),
              re.compile(r'^org_apache_kafka_consumer_fetch_manager_records_consumed_total\{[^}]*'
                         r'client_id="telemetry-consumer"', re.M))
    try:
        deadline = time.monotonic() + 90
        text = ""
        while time.monotonic() < deadline and all(c.poll() is None for c in clients):
            text = _scrape(address)
            if all(pattern.search(text) for pattern in wanted):
                break
            time.sleep(0.5)
    finally:
        for c in clients:
            c.terminate()
        errors = [c.communicate(timeout=30)[1][-2000:] for c in clients]
    lines = [next((ln for ln in text.splitlines() if pattern.search(ln)), None) for pattern in wanted]
    assert None not in lines, f"pushed metrics missing on the endpoint; clients' stderr: {errors}\n{text}"
    for line in lines:
        assert line is not None and 'client_software_name="apache-kafka-java"' in line
        assert 'client_instance_id="' in line and float(line.rsplit(" ", 1)[1]) > 0
    assert re.search(r'klog_client_telemetry_pushes_total\{result="accepted"\} [1-9]', text)
    # only the subscribed prefixes were pushed: the consumer's coordinator metrics were not
    assert re.search(r"^org_apache_kafka_consumer_fetch_manager_", text, re.M)
    assert not re.search(r"^org_apache_kafka_consumer_coordinator_", text, re.M)


def test_a_librdkafka_producers_pushed_metrics_are_on_the_prometheus_endpoint(telemetry_broker):
    from confluent_kafka import Producer

    broker, address = telemetry_broker
    with _wire(broker.bootstrap_servers) as wire:
        assert _alter(wire, "librdkafka", ("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "1000"),
                      ("match", 0, "client_software_name=confluent-kafka-python")) == (ErrorCode.NONE, None)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "rdkafka-producer",
                         "log_level": 3})
    wanted = re.compile(r'^org_apache_kafka_producer_node_request_latency_avg\{[^}]*client_id="rdkafka-producer"'
                        r'[^}]*\} (\S+)$', re.M)
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline and not wanted.search(text):
        producer.produce("rdkafka-telemetry", b"x" * 100)
        producer.poll(0.2)
        text = _scrape(address)
    producer.flush(10)
    match = wanted.search(text)
    assert match is not None, text
    assert 'client_software_name="confluent-kafka-python"' in match.group(0) and float(match.group(1)) >= 0


def test_bad_payloads_are_refused_and_good_ones_scraped(telemetry_broker):
    broker, address = telemetry_broker
    host, port = broker.bootstrap_servers.split(":")
    with WireClient(host, int(port), client_id="wire-telemetry") as wire:
        # a long interval: nothing here waits for it, and the pushed metrics stay until the scrape
        assert _alter(wire, "all", ("metrics", 0, "*"), ("interval.ms", 0, "60000")) == (ErrorCode.NONE, None)
        listed = wire.request(74, 0, {})
        assert [r.resource_name for r in listed.config_resources] == ["all"]
        listed = wire.request(74, 1, {"resource_types": [16]})
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("all", 16)]

        def push(metrics: bytes, compression: int = 0) -> int:
            """A new instance's first push after its GetTelemetrySubscriptions: never throttled."""
            got = wire.request(71, 0, {"client_instance_id": ZERO})
            assert got.error_code == ErrorCode.NONE and got.requested_metrics == ["*"]
            return int(wire.request(72, 0, {"client_instance_id": got.client_instance_id,
                                            "subscription_id": got.subscription_id, "terminating": False,
                                            "compression_type": compression, "metrics": metrics}).error_code)

        assert push(b"\xff\xff\xff\xff") == ErrorCode.INVALID_RECORD
        assert push(b"\x00garbage", compression=4) == ErrorCode.INVALID_RECORD
        assert push(b"x" * (1024 * 1024 + 1)) == ErrorCode.TELEMETRY_TOO_LARGE
        assert push(gzip.compress(payload([("wire.sent.total", 3)])), compression=1) == ErrorCode.NONE
    text = _scrape(address)
    assert re.search(r'^wire_sent_total\{[^}]*client_id="wire-telemetry"[^}]*\} 3\.0$', text, re.M), text
    assert 'klog_client_telemetry_pushes_total{result="INVALID_RECORD"} 2.0' in text
    assert 'klog_client_telemetry_pushes_total{result="TELEMETRY_TOO_LARGE"} 1.0' in text


def test_telemetry_apis_are_not_advertised_without_the_metrics_endpoint(tmp_path: Path):
    with BrokerProcess(tmp_path / "data", {"listeners": "PLAINTEXT://127.0.0.1:0"}) as broker:
        host, port = broker.bootstrap_servers.split(":")
        with WireClient(host, int(port)) as wire:
            keys = {a.api_key for a in wire.request(18, 3, {"client_software_name": "t",
                                                            "client_software_version": "1"}).api_keys}
    assert 74 in keys and not {71, 72} & keys
