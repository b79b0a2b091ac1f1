"""A large request over a TLS listener served by klog's native TLS engine is read in a few large socket reads, not
one per TLS record the client's bytes come in (the socket's low watermark, SO_RCVLOWAT, set while a large request
is missing bytes: klog/broker/network/native_tls.py), and the watermark never keeps a request waiting: the large
request is answered, a small request after it is answered at once, and a client that stops halfway and closes has
its connection closed."""

from __future__ import annotations

import socket
import time

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from klog.protocol import ApiKey, decode_response, encode_request  # noqa: E402
from klog.records import encode_batch  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.ports import free_port  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402
from klog.testing.tls_probe import api_versions_v0, connect  # noqa: E402
from klog.testing.wire import read_frame  # noqa: E402

TOPIC = "large-over-tls"
#: the request's records (one batch of 15 records of 64 KiB, under max.message.bytes) and the pieces the client sends it in
VALUE_BYTES = 64 * 1024
RECORDS = 15
PIECE_BYTES = 4096
PAUSE_S = 0.002


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls-reads")
    ca = CertificateAuthority(root / "pki")
    issued = ca.issue("broker")
    ssl_port = free_port()
    with BrokerProcess(root / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": issued.keystore_file,
            "num.partitions": 1}) as node:
        assert any("listener SSL: TLS served by klog's native TLS session" in ln for ln in node.lines)
        yield node, ("127.0.0.1", ssl_port), ca.ca_file


def _produce_frame(correlation_id: int) -> bytes:
    records = [{"value": bytes([i]) * VALUE_BYTES} for i in range(RECORDS)]
    return bytes(encode_request(ApiKey.PRODUCE, 9, correlation_id, "tls-reads", {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": 0, "records": encode_batch(records)}]}]}))


def _read_syscalls(pid: int) -> int:
    with open(f"/proc/{pid}/io", encoding="ascii") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("syscr:"))


def _broker_side_open(broker_port: int, client_port: int) -> bool:
    """Whether the broker's end of the connection from ``client_port`` is still open (ESTABLISHED, or CLOSE_WAIT:
    the client closed and the broker has not), from /proc/net/tcp."""
    with open("/proc/net/tcp", encoding="ascii") as handle:
        for line in handle.readlines()[1:]:
            local, remote, state = line.split()[1:4]
            if int(local.split(":")[1], 16) == broker_port and int(remote.split(":")[1], 16) == client_port:
                return state in ("01", "08")
    return False


def _send_in_pieces(tls: socket.socket, data: bytes) -> None:
    """``data`` as the client's TLS records of PIECE_BYTES, a short pause after each (so each reaches the broker
    on its own: no Nagle coalescing on the client's side)."""
    tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for at in range(0, len(data), PIECE_BYTES):
        tls.sendall(data[at:at + PIECE_BYTES])
        time.sleep(PAUSE_S)


def test_a_large_request_sent_in_small_records_is_read_in_few_reads_and_answered(broker):
    node, address, ca_file = broker
    frame = _produce_frame(7)
    pieces = len(frame) // PIECE_BYTES
    with connect(address, ca_file) as tls:
        assert api_versions_v0(tls, 1) == 0   # the handshake and the topic's creation (auto-create) out of the way
        tls.sendall(encode_request(ApiKey.METADATA, 4, 2, "tls-reads", {
            "topics": [{"name": TOPIC}], "allow_auto_topic_creation": True}))
        read_frame(tls)
        time.sleep(1.0)   # the topic's leadership applied
        before = _read_syscalls(node.pid)
        _send_in_pieces(tls, frame)
        answer = read_frame(tls)
        reads = _read_syscalls(node.pid) - before
        correlation_id, response = decode_response(ApiKey.PRODUCE, 9, answer)
        assert correlation_id == 7
        assert response.responses[0].partition_responses[0].error_code == 0, response
        # one read per record would be >= pieces; the watermark leaves a few reads of up to 256 KiB, then the
        # last ~80 KiB (under the watermark's floor) as they come, plus the broker's other reads meanwhile
        assert reads < pieces // 2, f"{reads} read calls for a request sent as {pieces} records"
        # the watermark is back to a byte: a small request right after is answered at once
        started = time.monotonic()
        assert api_versions_v0(tls, 8) == 0
        assert time.monotonic() - started < 5


def test_a_client_that_stops_halfway_through_a_large_request_and_closes_is_closed(broker):
    """The watermark is up (half of a large request still missing) when the client closes: the broker sees the end
    of the stream all the same and lets the connection go, and serves the next client's whole request."""
    node, address, ca_file = broker
    frame = _produce_frame(9)
    with connect(address, ca_file) as tls:
        assert api_versions_v0(tls, 1) == 0
        client_port = tls.getsockname()[1]
        tls.sendall(frame[:len(frame) // 2])
        time.sleep(0.5)
        assert _broker_side_open(address[1], client_port)
    deadline = time.monotonic() + 10
    while _broker_side_open(address[1], client_port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _broker_side_open(address[1], client_port), "the broker kept the half-sent connection open"
    with connect(address, ca_file) as other:
        other.settimeout(30)
        other.sendall(_produce_frame(10))
        correlation_id, response = decode_response(ApiKey.PRODUCE, 9, read_frame(other))
        assert correlation_id == 10 and response.responses[0].partition_responses[0].error_code == 0
