"""A group member's client host, as DescribeGroups answers it, is Java's ``InetAddress.toString()`` of the
connection's address, on klog as on Apache Kafka 4.x: for a member connected over IPv6 loopback the full,
uncompressed form ``/0:0:0:0:0:0:0:1`` (not Python's ``::1``)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest

from klog.broker.groups.coordinator import java_host
from klog.protocol.errors import ErrorCode
from klog.testing.kafka import free_port, one_broker
from klog.testing.wire import WireClient, until

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_java_host_writes_addresses_as_javas_inet_address_to_string() -> None:
    assert java_host("127.0.0.1") == "/127.0.0.1"
    assert java_host("::1") == "/0:0:0:0:0:0:0:1"
    assert java_host("2001:db8::ff00:42:8329") == "/2001:db8:0:0:0:ff00:42:8329"
    assert java_host("::ffff:10.0.0.7") == "/10.0.0.7"   # Java: an IPv4-mapped address is an Inet4Address
    assert java_host("fe80::1%lo") == "/fe80:0:0:0:0:0:0:1%lo"
    assert java_host("/127.0.0.1") == "/127.0.0.1"
    assert java_host("") == ""


@pytest.fixture(scope="module", params=["klog", "kafka"])
def ipv6_port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The IPv6 loopback listener of a klog broker or an Apache Kafka broker."""
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    port = free_port()
    properties = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,V6:PLAINTEXT",
                  "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0}
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), properties,
                    extra_listeners=[f"V6://[::1]:{port}"]):
        yield port


def test_a_member_connected_over_ipv6_is_described_with_javas_full_address(ipv6_port: int) -> None:
    group = "ipv6-" + uuid.uuid4().hex[:8]
    with WireClient("::1", ipv6_port, client_id="ipv6-member") as wire:
        def joined() -> bool:
            # FindCoordinator creates Kafka's __consumer_offsets
            wire.request(10, 3, {"key": group, "key_type": 0})
            answer = wire.request(11, 3, {
                "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}]})
            return answer.error_code == ErrorCode.NONE
        until(joined, "the member joined the group")
        [described] = wire.request(15, 3, {"groups": [group], "include_authorized_operations": False}).groups
    assert [member.client_host for member in described.members] == ["/0:0:0:0:0:0:0:1"]
