"""Start N ``quorum_member`` members as real OS processes on 127.0.0.1 and talk to them (tests, benches).

Every process started here is stopped by ``close()`` (SIGKILL after a grace period).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from klog.testing.kafka import free_port

#: Test timing: election timeout 500 ms, so a failover takes about 1-1.5 s.
FAST_TIMING = {"election_timeout_ms": 500, "fetch_timeout_ms": 1000, "election_backoff_max_ms": 500}


class Member:
    def __init__(self, node_id: int, voters: str, directory: Path, timing: dict[str, int]) -> None:
        self.node_id = node_id
        self.voters = voters
        self.dir = directory
        self.timing = timing
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes] = queue.Queue()

    def start(self) -> None:
        cmd = [sys.executable, "-m", "klog.testing.quorum_member", "--node-id", str(self.node_id), "--voters", self.voters,
               "--dir", str(self.dir)]
        for k, v in self.timing.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        self._lines = queue.Queue()
        self.log_path = self.dir.parent / f"node-{self.node_id}.stderr"
        err = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        err.close()
        out = self.proc.stdout
        assert out is not None
        lines = self._lines
        def pump() -> None:
            for line in iter(out.readline, b""):
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        ready = self._read(30)
        assert ready.get("ready"), ready

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _read(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"node {self.node_id} did not answer within {timeout}s; stderr: {self.stderr_tail()}") from None
        return dict(json.loads(line))

    def stderr_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def cmd(self, line: str, timeout: float = 20.0) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self._read(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"quit\n")
            self.proc.stdin.flush()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


class QuorumProcesses:
    def __init__(self, root: str | os.PathLike[str], size: int, timing: dict[str, int] | None = None) -> None:
        self.root = Path(root)
        ports = [free_port() for _ in range(size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        self.members = {i + 1: Member(i + 1, voters, self.root / f"node-{i + 1}" / "__cluster_metadata-0",
                                      timing or FAST_TIMING) for i in range(size)}

    def __enter__(self) -> QuorumProcesses:
        try:
            for m in self.members.values():
                m.dir.parent.mkdir(parents=True, exist_ok=True)
                m.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for m in self.members.values():
            m.stop()

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.alive]

    def wait_for_leader(self, timeout: float = 30.0, exclude: int | None = None) -> int:
        """The leader every live member agrees on."""
        deadline = time.monotonic() + timeout
        last: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            last = [m.cmd("status") for m in self.live()]
            leaders = {s["leader_id"] for s in last}
            roles = [s for s in last if s["role"] == "leader"]
            if len(leaders) == 1 and 0 not in leaders and len(roles) == 1 and exclude not in leaders:
                return int(roles[0]["node_id"])
            time.sleep(0.1)
        raise TimeoutError(f"no agreed leader within {timeout}s: {last}")

    def propose(self, count: int, records: int = 1, timeout: float = 30.0) -> list[int]:
        """Propose ``count`` batches through whoever leads; retries on a lost leader."""
        offsets: list[int] = []
        deadline = time.monotonic() + timeout
        leader = self.wait_for_leader(timeout)
        while len(offsets) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(offsets)} of {count} proposals committed")
            r = self.members[leader].cmd(f"propose {records}")
            if "offset" in r:
                offsets.append(int(r["offset"]))
            else:
                leader = self.wait_for_leader(max(1.0, deadline - time.monotonic()))
        return offsets

    def wait_applied(self, index: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(m.cmd("status")["applied"] >= index for m in self.live()):
                return
            time.sleep(0.1)
        raise TimeoutError(f"not every member applied index {index}: {[m.cmd('status') for m in self.live()]}")
