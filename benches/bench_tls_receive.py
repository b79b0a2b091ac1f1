"""Where a TLS produce's receive-side CPU goes (issue 33): the cost of decrypting with Python's ssl module by TLS
record size, and the server CPU per GB of uvloop's SSL transport against a hand-made ``ssl.MemoryBIO`` protocol
over a plain TCP transport.

Run: ``python benches/bench_tls_receive.py`` (``--mb 256 --rounds 3``), under the bench lock on a shared machine.

- ``decrypt``: TLS 1.3 with the broker's own server context (klog.security.tls.server_context, the ECDSA P-256
  test certificate) between two ``ssl.MemoryBIO`` pairs in this process; the client side's records of a given
  size are decrypted 256 KiB of input at a time into a 1 MiB buffer (``SSLObject.read(n, buffer)``, as uvloop's
  SSL transport does for a BufferedProtocol): CPU per GB of plaintext and per record. The cost per record is in
  OpenSSL's ``SSL_read_ex`` (one record per call); calling the C method directly instead of
  ``ssl.SSLObject.read`` is shown too (the Python wrapper's share).
- ``transports``: a child process sends ``--mb`` MiB over loopback (2304-byte TLS records) to an asyncio server on
  uvloop whose BufferedProtocol discards into a 1 MiB buffer: plain TCP; uvloop's SSL transport
  (``create_server(ssl=...)``, what klog's TLS listeners use); and a MemoryBIO protocol over plain TCP (socket
  reads of 256 KiB written into the incoming BIO, decrypted with ``SSLObject.read(n, buffer)`` straight into the
  buffer); and the native TLS session (``klog._native.TlsServerSession``, rustls) over a plain TCP transport (socket
  reads of 256 KiB, every record of a read decrypted in one ``receive`` call). Server CPU per GB (user+system of this
  process), rounds alternating the kinds, medians.
- ``decrypt`` also runs the native session on the same records (``native receive``: 256 KiB of input per call).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import resource
import socket
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from klog._native import TlsServerConfig, TlsServerSession
from klog.security.tls import server_context
from klog.testing.certs import CertificateAuthority, Issued

#: record sizes decrypted: about librdkafka's average on a produce (2.3 KB, see docs/security.md) and TLS's maximum
RECORD_SIZES = (2304, 4096, 16384)
#: the sender's writes (one TLS record each) in ``transports``: librdkafka's average on a produce
TRANSPORT_RECORD_BYTES = 2304
RECEIVE_BYTES = 256 * 1024
BUFFER_BYTES = 1 << 20


def _contexts(root: Path) -> tuple[ssl.SSLContext, ssl.SSLContext, str, Issued]:
    ca = CertificateAuthority(root / "pki")
    cert = ca.issue("broker")
    server = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": cert.keystore_file})
    client = ssl.create_default_context(cafile=ca.ca_file)
    client.check_hostname = False
    return server, client, ca.ca_file, cert


def _native_config(cert: Issued) -> TlsServerConfig:
    return TlsServerConfig(cert.cert_pem.encode(), cert.key_pem.encode())


# ---- decrypt -----------------------------------------------------------------------------------------------------

def _memory_pair(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[ssl.SSLObject, ssl.MemoryBIO,
                                                                         ssl.SSLObject, ssl.MemoryBIO]:
    """(server object, its incoming BIO, client object, its outgoing BIO), handshaken (TLS 1.3)."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s_obj = server.wrap_bio(s_in, s_out, server_side=True)
    c_obj = client.wrap_bio(c_in, c_out, server_side=False)
    for _ in range(10):
        for obj in (c_obj, s_obj):
            with contextlib.suppress(ssl.SSLWantReadError):
                obj.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    with contextlib.suppress(ssl.SSLWantReadError):
        c_obj.read(1)   # the session tickets
    return s_obj, s_in, c_obj, c_out


def decrypt(server: ssl.SSLContext, client: ssl.SSLContext, mb: int, record: int, direct: bool) -> dict[str, float]:
    """CPU per GB and per record of decrypting ``mb`` MiB sent in ``record``-byte TLS records."""
    s_obj, s_in, c_obj, c_out = _memory_pair(server, client)
    payload = os.urandom(1 << 20)
    sent = []
    for _ in range(mb):
        for offset in range(0, len(payload), record):
            c_obj.write(payload[offset:offset + record])
        sent.append(c_out.read())
    stream = memoryview(b"".join(sent))
    del sent
    view = memoryview(bytearray(BUFFER_BYTES))
    # with a buffer, both return the count of bytes read into it
    read = cast(Callable[[int, memoryview], int], s_obj._sslobj.read if direct   # type: ignore[attr-defined]
                else s_obj.read)
    pending = s_obj.pending
    total = calls = pos = 0
    started = time.process_time()
    for offset in range(0, len(stream), RECEIVE_BYTES):
        s_in.write(stream[offset:offset + RECEIVE_BYTES])
        with contextlib.suppress(ssl.SSLWantReadError):
            while s_in.pending or pending():   # as uvloop's _do_read__buffered
                n = read(BUFFER_BYTES - pos, view[pos:])
                calls += 1
                total += n
                pos = pos + n if pos + n < BUFFER_BYTES - 65536 else 0
    cpu = time.process_time() - started
    return {"cpu_s_per_gb": cpu / (total / 2**30), "us_per_record": cpu / calls * 1e6,
            "records_per_gb": calls / (total / 2**30)}


def native_decrypt(config: TlsServerConfig, client: ssl.SSLContext, mb: int, record: int) -> dict[str, float]:
    """As ``decrypt``, through the native session: each 256 KiB of input decrypted in one ``receive`` call."""
    session = TlsServerSession(config)
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    c_obj = client.wrap_bio(c_in, c_out, server_side=False)
    for _ in range(10):
        with contextlib.suppress(ssl.SSLWantReadError):
            c_obj.do_handshake()
        session.receive(c_out.read())
        c_in.write(session.outgoing())
    payload = os.urandom(1 << 20)
    sent = []
    for _ in range(mb):
        for offset in range(0, len(payload), record):
            c_obj.write(payload[offset:offset + record])
        sent.append(c_out.read())
    stream = memoryview(b"".join(sent))
    del sent
    total = calls = 0
    started = time.process_time()
    for offset in range(0, len(stream), RECEIVE_BYTES):
        total += len(session.receive(stream[offset:offset + RECEIVE_BYTES]))
        calls += 1
    cpu = time.process_time() - started
    return {"cpu_s_per_gb": cpu / (total / 2**30), "us_per_record": cpu / (total / record) * 1e6,
            "records_per_gb": 2**30 / record}


# ---- transports --------------------------------------------------------------------------------------------------

class _Sink(asyncio.BufferedProtocol):
    """Receives into a 1 MiB buffer and drops; ``done`` once ``expected`` bytes arrived."""

    def __init__(self, done: asyncio.Future[None], expected: int) -> None:
        self.view = memoryview(bytearray(BUFFER_BYTES))
        self.received = 0
        self.done = done
        self.expected = expected

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self._got(nbytes)

    def _got(self, nbytes: int) -> None:
        self.received += nbytes
        if self.received >= self.expected and not self.done.done():
            self.done.set_result(None)


class _CiphertextSink(_Sink):
    """Reads the socket's ciphertext into a buffer of its own (RECEIVE_BYTES) and answers through the transport."""

    def __init__(self, done: asyncio.Future[None], expected: int) -> None:
        super().__init__(done, expected)
        self.receive = memoryview(bytearray(RECEIVE_BYTES))
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport   # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receive


class _MemoryBioSink(_CiphertextSink):
    """TLS over a plain transport: socket reads into the incoming BIO, decrypted straight into the buffer."""

    def __init__(self, done: asyncio.Future[None], expected: int, context: ssl.SSLContext) -> None:
        super().__init__(done, expected)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.sslobj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.read = self.sslobj._sslobj.read   # type: ignore[attr-defined]
        self.handshaking = True

    def buffer_updated(self, nbytes: int) -> None:
        incoming, sslobj = self.incoming, self.sslobj
        incoming.write(self.receive[:nbytes])
        if self.handshaking:
            try:
                sslobj.do_handshake()
                self.handshaking = False
            except ssl.SSLWantReadError:
                pass
            answer = self.outgoing.read()
            if answer and self.transport is not None:
                self.transport.write(answer)
            if self.handshaking:
                return
        read, view = self.read, self.view
        got = 0
        with contextlib.suppress(ssl.SSLWantReadError):
            while incoming.pending or sslobj.pending():
                got += read(BUFFER_BYTES, view)
        self._got(got)


class _NativeSessionSink(_CiphertextSink):
    """TLS over a plain transport with the native session: socket reads of 256 KiB, every record of a read
    decrypted in one call."""

    def __init__(self, done: asyncio.Future[None], expected: int, config: TlsServerConfig) -> None:
        super().__init__(done, expected)
        self.session = TlsServerSession(config)

    def buffer_updated(self, nbytes: int) -> None:
        plaintext = self.session.receive(self.receive[:nbytes])
        answer = self.session.outgoing()   # handshake messages, session tickets
        if answer and self.transport is not None:
            self.transport.write(answer)
        self._got(len(plaintext))


def _send(port: int, mb: int, ca_file: str | None) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    if ca_file is not None:
        context = ssl.create_default_context(cafile=ca_file)
        context.check_hostname = False
        sock = context.wrap_socket(sock)
    payload = memoryview(os.urandom(1 << 20))
    chunks = [payload[offset:offset + TRANSPORT_RECORD_BYTES] for offset in range(0, len(payload),
                                                                                 TRANSPORT_RECORD_BYTES)]
    for _ in range(mb + 1):
        for chunk in chunks:   # one TLS record per call
            sock.sendall(chunk)
    time.sleep(1)
    sock.close()


async def _receive(kind: str, server: ssl.SSLContext, ca_file: str, mb: int,
                   native: TlsServerConfig) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    expected = mb << 20
    if kind == "uvloop SSL transport":
        listening = await loop.create_server(lambda: _Sink(done, expected), "127.0.0.1", 0, ssl=server)
    elif kind == "native TLS session":
        listening = await loop.create_server(lambda: _NativeSessionSink(done, expected, native), "127.0.0.1", 0)
    elif kind == "MemoryBIO protocol":
        listening = await loop.create_server(lambda: _MemoryBioSink(done, expected, server), "127.0.0.1", 0)
    else:
        listening = await loop.create_server(lambda: _Sink(done, expected), "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    sender = multiprocessing.Process(target=_send, args=(port, mb, None if kind == "plain TCP" else ca_file))
    sender.start()
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    await done
    after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
    sender.join()
    listening.close()
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"cpu_s_per_gb": cpu / (mb / 1024), "mb_s": mb / elapsed}


TRANSPORTS = ("plain TCP", "uvloop SSL transport", "MemoryBIO protocol", "native TLS session")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="MiB per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import uvloop

    with tempfile.TemporaryDirectory(prefix="klog-bench-tls-receive-") as tmp:
        server, client, ca_file, cert = _contexts(Path(tmp))
        native = _native_config(cert)
        rows: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for record in RECORD_SIZES:
                for direct in (False, True):
                    name = f"{record} B records, {'_sslobj.read' if direct else 'SSLObject.read'}"
                    rows.setdefault(name, []).append(decrypt(server, client, args.mb // 2, record, direct))
                rows.setdefault(f"{record} B records, native receive", []).append(
                    native_decrypt(native, client, args.mb // 2, record))
        print(f"decrypt through MemoryBIOs (TLS 1.3, {server_cipher(server, client)}), medians of {args.rounds}")
        print(f"{'':<42}{'CPU s/GB':>10}{'us/record':>11}{'records/GB':>12}")
        for name, results in rows.items():
            print(f"{name:<42}{_median(results, 'cpu_s_per_gb'):>10.3f}{_median(results, 'us_per_record'):>11.2f}"
                  f"{_median(results, 'records_per_gb'):>12.0f}")
        received: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for kind in TRANSPORTS:
                received.setdefault(kind, []).append(
                    uvloop.run(_receive(kind, server, ca_file, args.mb, native)))   # type: ignore[attr-defined]
        print(f"server receiving {args.mb} MiB over loopback ({TRANSPORT_RECORD_BYTES} B records), medians of {args.rounds}")
        print(f"{'':<24}{'CPU s/GB':>10}{'MB/s':>8}")
        for kind, results in received.items():
            print(f"{kind:<24}{_median(results, 'cpu_s_per_gb'):>10.3f}{_median(results, 'mb_s'):>8.0f}")
    return 0


def server_cipher(server: ssl.SSLContext, client: ssl.SSLContext) -> str:
    s_obj = _memory_pair(server, client)[0]
    cipher = s_obj.cipher()
    return cipher[0] if cipher else "?"


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(row[key] for row in rows))


if __name__ == "__main__":
    sys.exit(main())
