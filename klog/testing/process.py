"""Run the real ``klog-broker`` as a subprocess on a free 127.0.0.1 port (for tests and benchmarks).

    with BrokerProcess(tmp_path, {"num.partitions": 3}) as broker:
        broker.bootstrap_servers   # "127.0.0.1:<port>"

The broker binds port 0 (the kernel picks a free port, no race) and logs the bound address; this helper reads
it from the broker's stderr. All stderr lines are kept in ``lines`` for assertions.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_LISTENING_RE = re.compile(r"listening on PLAINTEXT://([^:,\s]+|\[[^\]]+\]):(\d+)")
#: how long start() waits for the "listening on" line
START_TIMEOUT_S = 60.0


def broker_command() -> list[str]:
    """``$KLOG_BROKER_COMMAND`` (split on spaces; e.g. to run under a profiler), else the installed
    ``klog-broker`` console script next to this interpreter, else ``python -m klog.broker``."""
    override = os.environ.get("KLOG_BROKER_COMMAND")
    if override:
        return override.split()
    script = shutil.which("klog-broker", path=os.path.dirname(sys.executable))
    if script:
        return [script]
    return [sys.executable, "-m", "klog.broker"]


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM ``proc`` if it still runs, wait ``timeout`` s for it, then SIGKILL: its exit code. Every test helper's
    way of ending a child it started (a paused process must be resumed by the caller first)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


class BrokerProcess:
    def __init__(self, data_dir: str | os.PathLike[str], config: Mapping[str, Any] | None = None, *,
                 properties_file: str | os.PathLike[str] | None = None, log_level: str = "INFO",
                 cwd: str | os.PathLike[str] | None = None, port: int = 0,
                 open_files_limit: int | None = None, ready_re: re.Pattern[str] | None = None) -> None:
        self.data_dir = str(data_dir)
        #: the stderr line that says the process is up (default: the client listener's "listening on")
        self.ready_re = ready_re
        self.config = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": self.data_dir,
                       "group.initial.rebalance.delay.ms": 0, **(config or {})}
        self.properties_file = properties_file
        self.log_level = log_level
        self.cwd = cwd
        #: RLIMIT_NOFILE (soft and hard) of the broker process, e.g. to test its descriptor budget
        self.open_files_limit = open_files_limit
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.host = "127.0.0.1"
        self.port = 0
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    def command(self) -> list[str]:
        cmd = broker_command()
        if self.properties_file is not None:
            cmd.append(str(self.properties_file))
        for key, value in self.config.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cmd += ["--override", f"{key}={value}"]
        return cmd + ["--log-level", self.log_level]

    def start(self) -> BrokerProcess:
        self.spawn()
        return self.wait_started()

    def spawn(self) -> None:
        """Start the process without waiting (several nodes of a quorum start together)."""
        # a second spawn would drop the handle of a running process, which then outlives the test
        assert self.proc is None or self.proc.poll() is not None, f"klog-broker pid {self.proc.pid} is still running"
        self.lines = []
        self._listening.clear()
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, cwd=self.cwd,
                                     preexec_fn=self._limit_open_files if self.open_files_limit else None)
        self._reader = threading.Thread(target=self._read_stderr, args=(self.proc,), daemon=True)
        self._reader.start()

    def wait_started(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Wait for the ready line (the process is killed if it does not come within ``timeout``)."""
        assert self.proc is not None and self._reader is not None
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.05):
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(f"klog-broker exited with {self.proc.returncode}:\n" + "\n".join(self.lines))
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError("klog-broker did not start:\n" + "\n".join(self.lines))
        return self

    def _limit_open_files(self) -> None:
        import resource

        assert self.open_files_limit is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def _read_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            self.lines.append(line)
            match = _LISTENING_RE.search(line)
            if match and not self._listening.is_set():
                self.host = match.group(1).strip("[]")
                self.port = int(match.group(2))
                if self.ready_re is None:
                    self._listening.set()
            if self.ready_re is not None and self.ready_re.search(line):
                self._listening.set()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def resume(self) -> None:
        """SIGCONT (a process paused with SIGSTOP, e.g. by klog.testing.cluster, runs again)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def terminate(self) -> None:
        """SIGTERM without waiting (a paused process is resumed first): several nodes then stop together."""
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait (a paused process is resumed first): returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.dump_stacks()
                self.proc.kill()
                self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)
        code = self.proc.returncode
        self.proc = None
        return code

    def dump_stacks(self, settle_s: float = 2.0) -> None:
        """SIGQUIT: the node writes its threads' and tasks' stacks to its log (kept in ``lines``); a test that
        gives up waiting on it calls this first, and the stop-timeout path prints what the node was waiting on."""
        if self.proc is None or self.proc.poll() is not None:
            return
        mark = len(self.lines)
        self.proc.send_signal(signal.SIGQUIT)
        time.sleep(settle_s)
        print(f"node on port {self.port} did not stop; its last lines and stacks:", file=sys.stderr)
        for line in self.lines[max(0, mark - 40):]:
            print(line, file=sys.stderr)

    def kill(self) -> None:
        """SIGKILL (an unclean stop, for recovery tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)
        self.proc = None

    def restart(self) -> BrokerProcess:
        self.stop()
        # Listen on the same port again so clients' bootstrap addresses stay valid.
        self.config["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        return self.start()

    def peak_rss_bytes(self) -> int:
        """The most resident memory the broker process has used (Linux VmHWM)."""
        return self._status_kib("VmHWM") * 1024

    def open_descriptors(self) -> int:
        """Descriptors the broker process holds now (Linux)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_bytes(self) -> int:
        """Resident set size of the broker process (Linux)."""
        return self._status_kib("VmRSS") * 1024

    def _status_kib(self, field: str) -> int:
        with open(f"/proc/{self.pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
        return 0

    def log_text(self) -> str:
        return "\n".join(self.lines)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def data_dir_for(tmp: str | os.PathLike[str]) -> str:
    path = Path(tmp) / "klog-data"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def start_together(processes: Iterable[BrokerProcess]) -> None:
    """Spawn every process, then wait for each: nodes of a quorum come up only together (a combined node logs its
    client listener once the quorum has a cluster id, a broker-only node once the controllers unfenced it)."""
    started = list(processes)
    for p in started:
        p.spawn()
    for p in started:
        p.wait_started()
