"""This machine's limits, measured in the same run as the brokers: the ceilings a broker's figures are read
against. Page-cache write bandwidth (write() of 1 MiB chunks, no fsync), loopback TCP (two processes,
send/recv of 1 MiB chunks), sendfile from page cache over loopback, CRC-32C (klog's native one) and a
description of the CPU, memory and kernel.

Besides the bandwidths, the kernel's own CPU per GB for the work every broker does on each byte it moves, whatever
its language: a produce's bytes read from a loopback socket and written into the page cache, a consume's sent from
the page cache with sendfile(). Each is the CPU of the one process doing that work in 1 MiB chunks (the peer
process that sends or reads is not counted), so it is a floor for a broker's CPU per GB (issue 38's CPU-per-GB
target is read against it: no broker can spend less than the kernel does for it)."""

from __future__ import annotations

import multiprocessing
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def page_cache_write_gbps(directory: Path, total: int) -> float:
    """GB/s (10**9 B) of write() into a new file in ``directory``, no fsync: what a log append costs at best."""
    buf = os.urandom(CHUNK)
    path = directory / "sidebyside-write.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(total // CHUNK):
            os.write(fd, buf)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return total / elapsed / 1e9


def _sink(port_q: Any, total: int) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port_q.put(srv.getsockname()[1])
        conn, _ = srv.accept()
        buf = bytearray(CHUNK)
        got = 0
        with conn:
            while got < total:
                n = conn.recv_into(buf)
                if not n:
                    break
                got += n


def _connect_sink(total: int) -> tuple[socket.socket, Any]:
    ctx = multiprocessing.get_context("spawn")
    port_q = ctx.Queue()
    proc = ctx.Process(target=_sink, args=(port_q, total), daemon=True)
    proc.start()
    sock = socket.create_connection(("127.0.0.1", port_q.get(timeout=30)))
    return sock, proc


def loopback_tcp_gbps(total: int) -> float:
    """GB/s of send() to a reader process over 127.0.0.1."""
    buf = os.urandom(CHUNK)
    sock, proc = _connect_sink(total)
    with sock:
        start = time.perf_counter()
        for _ in range(total // CHUNK):
            sock.sendall(buf)
        sock.shutdown(socket.SHUT_WR)
        proc.join(60)
        elapsed = time.perf_counter() - start
    return total / elapsed / 1e9


def _sendfile_to_reader(directory: Path, total: int, sndbuf: int | None = None) -> tuple[float, float]:
    """sendfile() ``total`` bytes from a file in page cache to a reader process over 127.0.0.1, in this process:
    (wall seconds until the reader has them all, this process's CPU seconds for the sends). ``sndbuf``: the socket's
    SO_SNDBUF."""
    path = directory / "sidebyside-sendfile.tmp"
    size = min(total, 256 * CHUNK)
    path.write_bytes(os.urandom(CHUNK) * (size // CHUNK))
    try:
        sock, proc = _connect_sink(total)
        if sndbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        fd = os.open(path, os.O_RDONLY)
        try:
            with sock:
                start, cpu0 = time.perf_counter(), _cpu_s()
                sent = 0
                while sent < total:
                    offset = sent % size
                    sent += os.sendfile(sock.fileno(), fd, offset, min(size - offset, total - sent))
                cpu = _cpu_s() - cpu0
                sock.shutdown(socket.SHUT_WR)
                proc.join(60)
                elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
    finally:
        path.unlink()
    return elapsed, cpu


def sendfile_loopback_gbps(directory: Path, total: int) -> float:
    """GB/s of sendfile() from a file already in page cache to a reader process over 127.0.0.1."""
    elapsed, _ = _sendfile_to_reader(directory, total)
    return total / elapsed / 1e9


def _cpu_s() -> float:
    """This process's user + system CPU seconds."""
    t = os.times()
    return t.user + t.system


def _source(port_q: Any, total: int) -> None:
    buf = os.urandom(CHUNK)
    with socket.create_connection(("127.0.0.1", port_q.get(timeout=30))) as sock:
        sent = 0
        while sent < total:
            sock.sendall(buf)
            sent += len(buf)


def produce_floor_cpu_s_per_gb(directory: Path, total: int, rcvbuf: int | None = None) -> float:
    """CPU s per GB (10**9 B) of this process reading ``total`` bytes from a loopback socket (a writer process
    sends them) into a 1 MiB buffer and write()-ing each read into a new file, no fsync: a produce's kernel work
    (copy out of the socket, copy into the page cache), none of a broker's own. ``rcvbuf``: the socket's
    SO_RCVBUF, as the brokers' ``socket.receive.buffer.bytes`` (over loopback a read that reopens a full window
    sends the writer's queued bytes on the reader's CPU, so the buffer size moves the kernel's share)."""
    ctx = multiprocessing.get_context("spawn")
    port_q = ctx.Queue()
    path = directory / "sidebyside-produce-floor.tmp"
    with socket.socket() as srv:
        if rcvbuf is not None:   # inherited by the accepted socket, set before the handshake sizes the window
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        proc = ctx.Process(target=_source, args=(port_q, total), daemon=True)
        proc.start()
        port_q.put(srv.getsockname()[1])
        conn, _ = srv.accept()
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with conn:
                start = _cpu_s()
                got = 0
                while got < total:
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    os.write(fd, view[:n])
                    got += n
                used = _cpu_s() - start
        finally:
            os.close(fd)
            path.unlink()
            proc.join(60)
    return used / (got / 1e9)


def consume_floor_cpu_s_per_gb(directory: Path, total: int, sndbuf: int | None = None) -> float:
    """CPU s per GB of this process sendfile()-ing ``total`` bytes from a file in page cache to a reader process
    over 127.0.0.1: a consume's kernel work, none of a broker's own. ``sndbuf``: the socket's SO_SNDBUF, as the
    brokers' ``socket.send.buffer.bytes``."""
    _, cpu = _sendfile_to_reader(directory, total, sndbuf)
    return cpu / (total / 1e9)


def crc32c_gbps(total: int) -> float:
    """GB/s of klog's native CRC-32C over 16 MiB buffers (one core)."""
    from klog._native import crc32c

    buf = os.urandom(16 * CHUNK)
    crc32c(buf)
    start = time.perf_counter()
    for _ in range(max(1, total // len(buf))):
        crc32c(buf)
    return max(1, total // len(buf)) * len(buf) / (time.perf_counter() - start) / 1e9


def describe() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "loadavg_at_start": os.getloadavg()[0]}


def measure(directory: Path, scale: float = 1.0, socket_buffer_bytes: int | None = None) -> dict[str, Any]:
    """All limits; ``scale`` < 1 shortens them (smoke runs); ``socket_buffer_bytes``: the brokers' socket
    send/receive buffers, for the kernel floors."""
    directory.mkdir(parents=True, exist_ok=True)
    volume = max(64 * CHUNK, int(2 * 2**30 * scale)) // CHUNK * CHUNK
    return {
        **describe(),
        "page_cache_write_gbps": page_cache_write_gbps(directory, volume),
        "loopback_tcp_gbps": loopback_tcp_gbps(volume),
        "sendfile_loopback_gbps": sendfile_loopback_gbps(directory, volume),
        "crc32c_gbps": crc32c_gbps(volume * 2),
        "produce_floor_cpu_s_per_gb": produce_floor_cpu_s_per_gb(directory, volume, socket_buffer_bytes),
        "consume_floor_cpu_s_per_gb": consume_floor_cpu_s_per_gb(directory, volume, socket_buffer_bytes),
        "floor_socket_buffer_bytes": socket_buffer_bytes,
    }
