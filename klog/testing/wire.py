"""A blocking, one-connection Kafka wire client over klog.protocol, for protocol-level tests.

    with WireClient("127.0.0.1", port) as wire:
        response = wire.request(ApiKey.METADATA, 9, {"topics": None})
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any, TypeVar

from klog.protocol import decode_response, encode_request

_Client = TypeVar("_Client", bound="WireClient")


def read_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``; raises ConnectionError when the broker closed first."""
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> bytes:
    """One response frame from ``sock`` without its size prefix; raises ConnectionError when the broker closed."""
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    return read_exactly(sock, size)


class WireClient:
    def __init__(self, host: str, port: int, *, client_id: str = "klog-wire", timeout: float = 15.0,
                 source_host: str | None = None) -> None:
        """``source_host``: the local address to connect from (``127.0.0.2`` reaches a loopback listener as
        another client host, which host-based ACLs tell apart)."""
        source = None if source_host is None else (source_host, 0)
        self.sock = socket.create_connection((host, port), timeout=timeout, source_address=source)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation = 0

    @classmethod
    def of_bootstrap(cls: type[_Client], bootstrap: str, *, client_id: str = "klog-wire") -> _Client:
        """A connection to the first of ``bootstrap``'s servers (``host:port,...``)."""
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        return cls(host, int(port), client_id=client_id)

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def send(self, api_key: int, version: int, body: Any, correlation_id: int | None = None) -> int:
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        self.sock.sendall(encode_request(api_key, version, cid, self.client_id, body))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """One response frame without its size prefix; raises ConnectionError when the broker closed."""
        return read_frame(self.sock)

    def send_header_only(self, api_key: int, version: int, correlation_id: int) -> None:
        """A request header (v1: no tagged fields) at any ``version``, without a body: what a client newer than the
        broker sends first (a too-new ApiVersions, KIP-511)."""
        client_id = (self.client_id or "").encode()
        header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + b"\0"
        self.sock.sendall(struct.pack(">i", len(header)) + header)

    def sasl_token(self, token: bytes) -> bytes:
        """A bare SASL token (after SaslHandshake v0, no request header) and the broker's bare answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self.read_frame()

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        return decode_response(api_key, version, self.read_frame())

    def request(self, api_key: int, version: int, body: Any) -> Any:
        cid = self.send(api_key, version, body)
        got_cid, response = self.receive(api_key, version)
        if got_cid != cid:
            raise AssertionError(f"correlation id {got_cid} != {cid}")
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return data == b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fetch_raw(host: str, port: int, topic: str, partition: int = 0, offset: int = 0,
              max_bytes: int = 64 << 20) -> Any:
    """The partition's stored record batches from ``offset`` to the high watermark as the broker serves them
    (Fetch v11, repeated: one fetch returns data from one segment), for checking what a client really wrote
    (compression, timestamps, producer ids)."""
    from klog.records import decode_batches

    batches: list[Any] = []
    with WireClient(host, port) as wire:
        while True:
            response = wire.request(1, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                     "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            part = response.responses[0].partitions[0]
            if part.error_code:
                raise AssertionError(f"fetch {topic}-{partition} at {offset}: error {part.error_code}")
            found = decode_batches(bytes(part.records or b""))
            if not found:
                return batches
            batches.extend(found)
            offset = found[-1].base_offset + found[-1].last_offset_delta + 1
            if offset >= part.high_watermark:
                return batches


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """``check()``'s first true answer, asked again (every 0.3 s) while it is false or the node does not answer
    (OSError); an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except OSError:   # ConnectionError is one
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.3)
