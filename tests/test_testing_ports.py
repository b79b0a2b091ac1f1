"""The ports test processes listen on are handed out by klog.testing.ports: never from the kernel's ephemeral
range (where outgoing connections and bind(0) draw meanwhile), never twice across processes, never one in use."""

from __future__ import annotations

import multiprocessing
import socket
from pathlib import Path

import pytest

from klog.testing import ports


def _ports_of_one_process(n: int) -> list[int]:
    return [ports.free_port() for _ in range(n)]


def test_ports_come_from_below_the_ephemeral_range() -> None:
    low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    port_range = ports.port_range()
    assert port_range is not None, f"ephemeral range {low}-{high} leaves no room below it"
    for _ in range(50):
        port = ports.free_port()
        assert port in port_range and port < low


def test_processes_asking_at_once_never_get_the_same_port() -> None:
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        handed = [p for batch in pool.map(_ports_of_one_process, [100] * 4) for p in batch]
    assert len(handed) == 400
    assert len(set(handed)) == 400


def test_a_port_something_listens_on_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = ports.free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        # a counter of our own, pointing at the port in use: the next one handed out must be another
        counter = tmp_path / "next"
        counter.write_text(str(taken))
        monkeypatch.setattr(ports, "_COUNTER", counter)
        handed = ports.free_port()
    assert handed != taken
    assert int(counter.read_text()) == handed + 1
