"""Kafka's connection quotas on klog and on Apache Kafka 4.3 from the same properties, seen from a client:
``max.connections.per.ip.overrides`` closes the connection over an address's count, the ``connection_creation_rate``
quota of an ``ip`` entity (``kafka-configs --entity-type ips``) closes connections made faster than it, and
``listener.name.<l>.max.connection.creation.rate`` delays connections made faster than it without closing them.
The test's connections come from their own loopback source addresses (127.0.0.2, 127.0.0.3) to the broker on
127.0.0.1, so the admin tool's connections (from 127.0.0.1) are not limited."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from klog.testing import kafka_tools as kt
from klog.testing.kafka import free_port, one_broker

pytestmark = pytest.mark.java

#: the address max.connections.per.ip.overrides limits to 2 connections
COUNTED = "127.0.0.2"
#: the address the connection_creation_rate quota is set on
RATED = "127.0.0.3"
#: the EXTERNAL listener accepts 2 new connections a second
EXTERNAL_RATE = 2
#: a bound on how many connections it takes to go over the address's rate (far more than 1/s over 1 s windows)
ATTEMPTS = 40


def _properties():
    return {"max.connections.per.ip.overrides": f"{COUNTED}:2",
            "listener.name.external.max.connection.creation.rate": EXTERNAL_RATE,
            # rates over 2 windows of 1 s: a rate is measured over the last 1-2 seconds
            "quota.window.num": 2, "quota.window.size.seconds": 1}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    """(PLAINTEXT bootstrap, EXTERNAL listener port) of a klog broker or an Apache Kafka broker."""
    root = tmp_path_factory.mktemp(request.param)
    external = free_port()
    protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"
    with one_broker(request.param, root, {**_properties(), "listener.security.protocol.map": protocols},
                    extra_listeners=[f"EXTERNAL://127.0.0.1:{external}"]) as bootstrap:
        yield bootstrap, external


def _port(bootstrap: str) -> int:
    return int(bootstrap.rpartition(":")[2])


def _connect(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=15, source_address=(source, 0))


def _served(sock: socket.socket) -> bool:
    """Whether an ApiVersions v0 request on ``sock`` is answered (False: the broker closed the connection)."""
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    try:
        sock.sendall(struct.pack(">i", len(body)) + body)
        head = sock.recv(4)
        if len(head) < 4:
            return False
        size = struct.unpack(">i", head)[0]
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                return False
            data += chunk
        return struct.unpack(">i", data[:4])[0] == 7
    except (ConnectionResetError, BrokenPipeError):
        return False


def test_an_address_over_its_per_ip_override_gets_its_connection_closed(server):
    bootstrap, _ = server
    port = _port(bootstrap)
    first, second = _connect(port, COUNTED), _connect(port, COUNTED)
    try:
        assert _served(first) and _served(second)
        with _connect(port, COUNTED) as third:
            assert not _served(third)
        with _connect(port, "127.0.0.1") as other:   # other addresses keep max.connections.per.ip
            assert _served(other)
        first.close()
        deadline = time.monotonic() + 30   # the broker sees the close; a new connection then fits again
        while True:
            with _connect(port, COUNTED) as again:
                if _served(again) or time.monotonic() > deadline:
                    break
            time.sleep(0.2)
        assert time.monotonic() <= deadline, "a connection of an address below its count was not served"
    finally:
        first.close()
        second.close()


def test_the_ip_connection_creation_rate_quota_closes_connections_made_faster(server):
    bootstrap, _ = server
    port = _port(bootstrap)
    result = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--alter", "--add-config",
                               "connection_creation_rate=1", "--entity-type", "ips", "--entity-name", RATED)
    assert result.returncode == 0, result.stderr
    # the quota reaches the broker's connection quotas once the record is applied: connect until one is closed
    refused_at = None
    for attempt in range(ATTEMPTS):
        with _connect(port, RATED) as sock:
            if not _served(sock):
                refused_at = attempt
                break
    assert refused_at is not None, f"{ATTEMPTS} connections from {RATED} in a row were all served"
    with _connect(port, "127.0.0.1") as other:   # another address has no quota
        assert _served(other)
    result = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--alter", "--delete-config",
                               "connection_creation_rate", "--entity-type", "ips", "--entity-name", RATED)
    assert result.returncode == 0, result.stderr


def test_connections_over_the_listener_creation_rate_wait_and_are_all_served(server):
    _, external = server
    count = 4 * EXTERNAL_RATE
    started = time.monotonic()
    socks = [_connect(external, "127.0.0.1") for _ in range(count)]
    try:
        assert all(_served(sock) for sock in socks)   # none is closed
    finally:
        for sock in socks:
            sock.close()
    # 8 connections at 2 a second: the last ones wait for the rate (without the limit: milliseconds)
    assert time.monotonic() - started >= 1.0


def test_a_per_ip_override_set_with_kafka_configs_applies_to_new_connections(server):
    bootstrap, _ = server
    port = _port(bootstrap)
    address = "127.0.0.4"
    first = _connect(port, address)
    try:
        assert _served(first)
        with _connect(port, address) as second:   # no override yet: max.connections.per.ip
            assert _served(second)
        result = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--entity-type", "brokers",
                                   "--entity-default", "--alter", "--add-config",
                                   f"max.connections.per.ip.overrides=[{COUNTED}:2,{address}:1]")
        assert result.returncode == 0, result.stderr
        deadline = time.monotonic() + 30   # applied once the broker has the record: connect until refused
        while True:
            with _connect(port, address) as another:
                if not _served(another) or time.monotonic() > deadline:
                    break
            time.sleep(0.2)
        assert time.monotonic() <= deadline, f"a second connection from {address} is still served"
        assert _served(first)   # the open connection stays
    finally:
        first.close()
        kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--entity-type", "brokers",
                          "--entity-default", "--alter", "--delete-config", "max.connections.per.ip.overrides")
