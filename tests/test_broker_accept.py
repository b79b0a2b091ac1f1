"""A burst of simultaneous connects is queued by the kernel, not dropped, while the broker's event loop is busy.

The broker is frozen (SIGSTOP) to stand for an event loop that is busy or descheduled: the kernel completes
handshakes into the listen queue on its own, up to ``socket.listen.backlog.size``; beyond it the handshakes
are dropped and each such client waits a 1 s+ SYN retransmit (or, in the worst case, is reset a minute later).
"""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import time
from pathlib import Path

import pytest

from klog.broker.config import LISTEN_BACKLOG_DEFAULT
from klog.protocol import ApiKey, decode_response, encode_request
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(90)

#: the burst: more than Kafka's default backlog of 50, within klog's default and Linux's usual somaxconn
BURST = min(300, LISTEN_BACKLOG_DEFAULT, int(Path("/proc/sys/net/core/somaxconn").read_text())
            if Path("/proc/sys/net/core/somaxconn").exists() else 128)


def _raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def _connect_burst_while_frozen(broker: BrokerProcess, count: int, settle_s: float = 0.5) -> list[socket.socket]:
    """Open ``count`` connections while the broker process is stopped; return those whose handshake completed
    (the others are closed)."""
    socks: list[socket.socket] = []
    os.kill(broker.pid, signal.SIGSTOP)
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex((broker.host, broker.port))
            socks.append(sock)
        time.sleep(settle_s)  # less than the 1 s SYN retransmit: only handshakes the kernel queued complete
        poller = select.poll()
        by_fd = {s.fileno(): s for s in socks}
        for fd in by_fd:
            poller.register(fd, select.POLLOUT)
        writable = {fd for fd, ev in poller.poll(0) if ev & select.POLLOUT}
        connected = []
        for fd, sock in by_fd.items():
            if fd in writable and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                connected.append(sock)
            else:
                sock.close()
        return connected
    finally:
        os.kill(broker.pid, signal.SIGCONT)


def _api_versions_round_trip(socks: list[socket.socket], timeout_s: float = 20.0) -> int:
    """Send ApiVersions on every socket; return how many got a well-formed answer."""
    answered = 0
    for i, sock in enumerate(socks):
        sock.setblocking(True)
        sock.settimeout(timeout_s)
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, i, "burst", {}))
    for i, sock in enumerate(socks):
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        frame = sock.recv(size, socket.MSG_WAITALL)
        correlation_id, response = decode_response(ApiKey.API_VERSIONS, 0, frame)
        assert correlation_id == i and response.error_code == 0
        answered += 1
    return answered


def test_a_burst_of_connects_while_the_broker_is_busy_all_complete_and_are_served(tmp_path):
    _raise_fd_limit(BURST + 256)
    with BrokerProcess(tmp_path) as broker:
        connected = _connect_burst_while_frozen(broker, BURST)
        try:
            assert len(connected) == BURST
            assert _api_versions_round_trip(connected) == BURST
        finally:
            for sock in connected:
                sock.close()


def test_an_explicit_listen_backlog_size_bounds_the_queued_connects(tmp_path):
    _raise_fd_limit(BURST + 256)
    backlog = 20
    with BrokerProcess(tmp_path, {"socket.listen.backlog.size": backlog}) as broker:
        connected = _connect_burst_while_frozen(broker, BURST)
        try:
            # Linux queues backlog + 1 completed handshakes
            assert backlog <= len(connected) <= backlog + 1
            assert _api_versions_round_trip(connected) == len(connected)
        finally:
            for sock in connected:
                sock.close()
