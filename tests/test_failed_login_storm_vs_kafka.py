"""A storm of failed SASL logins does not hold up the broker's other clients, on klog and on Apache Kafka 4.3 from
the same properties (issue 33: "a test shows other clients' latency stays bounded during a storm of failed
logins"). Sixteen connections log in with a wrong PLAIN password over and over (each refused
SASL_AUTHENTICATION_FAILED, answered after ``connection.failed.authentication.delay.ms`` and closed) while a
logged-in producer writes a record every 20 ms: every record is acknowledged, and none waits behind the failed
logins' delays (their waits run beside the other connections' requests, not in front of them)."""

from __future__ import annotations

import threading
import time

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.kafka import free_port, one_broker
from klog.testing.wire import WireClient

pytestmark = pytest.mark.java

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')
#: the failed logins' delay (Kafka's default is 100 ms too)
FAILED_DELAY_MS = 100
STORM_THREADS = 16
STORM_S = 6.0
#: the logged-in producer's pace
SEND_EVERY_S = 0.02
#: far above a record's acknowledgement here (p99 0.4 ms on klog, 3-4 ms on Kafka; max 11 and 37-48 ms), far below
#: what waiting behind the failed logins' delays adds (a broker that slept them on its event loop: p50 120 ms, p99
#: 1.35 s)
P99_BOUND_S = 0.25
MAX_BOUND_S = 2.0


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    """(plaintext bootstrap, SASL_PLAINTEXT port) of a klog broker or an Apache Kafka broker."""
    sasl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
             "sasl.enabled.mechanisms": "PLAIN",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
             "connection.failed.authentication.delay.ms": FAILED_DELAY_MS,
             "num.partitions": 1, "offsets.topic.replication.factor": 1}
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), props,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]) as bootstrap:
        yield bootstrap, sasl_port


def _failed_login(port: int) -> int:
    """One PLAIN login with a wrong password on a new connection: SaslAuthenticate's error code."""
    with WireClient("127.0.0.1", port, client_id="storm", timeout=30) as wire:
        handshake = wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert handshake.error_code == 0, handshake
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00alice\x00wrong-password"})
        return int(answer.error_code)


def test_other_clients_are_served_on_time_during_a_storm_of_failed_logins(server):
    from confluent_kafka import Producer

    _, sasl_port = server
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw",
                         "acks": 1, "linger.ms": 0})
    topic = "storm"
    producer.produce(topic, b"warm-up")   # the login, the topic's creation and its leader out of the way
    assert producer.flush(60) == 0

    codes: list[int] = []
    stop = threading.Event()

    def storm() -> None:
        while not stop.is_set():
            codes.append(_failed_login(sasl_port))

    threads = [threading.Thread(target=storm, daemon=True) for _ in range(STORM_THREADS)]
    for thread in threads:
        thread.start()
    latencies: list[float] = []
    failures: list[str] = []

    def delivered(err, _msg, sent_at: float) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            latencies.append(time.monotonic() - sent_at)

    try:
        time.sleep(0.5)   # the storm under way
        end = time.monotonic() + STORM_S
        sent = 0
        while time.monotonic() < end:
            sent_at = time.monotonic()
            producer.produce(topic, b"x" * 100, on_delivery=lambda err, msg, at=sent_at: delivered(err, msg, at))
            sent += 1
            producer.poll(SEND_EVERY_S)
        assert producer.flush(30) == 0
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failures, failures[:3]
    assert len(latencies) == sent
    ordered = sorted(latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    assert p99 < P99_BOUND_S and ordered[-1] < MAX_BOUND_S, \
        f"acknowledgements during the storm: p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
    # the storm was one: every login refused as Kafka refuses it
    assert len(codes) >= STORM_THREADS * 10, f"only {len(codes)} failed logins"
    assert set(codes) == {ErrorCode.SASL_AUTHENTICATION_FAILED}, set(codes)
