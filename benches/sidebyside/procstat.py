"""Broker resource accounting from /proc: CPU seconds and resident memory.

Both brokers are measured the same way, from outside, while the load generators run: CPU is utime+stime of
the broker process (all its threads) and of any worker processes it started, from ``/proc/<pid>/stat``;
memory is VmRSS (summed over those processes) sampled on a background thread (steady = median of the
samples in the second half of a workload) and VmHWM (the peak, reset before each workload through
``/proc/<pid>/clear_refs``).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
#: How often the RSS sampler reads /proc/<pid>/status while a workload runs.
RSS_SAMPLE_INTERVAL_S = 0.1


def _stat_fields(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces or parentheses: split after its closing ')'.
    return raw[raw.rindex(")") + 2:].split()  # [0] is field 3 of proc(5)


def descendants(pid: int) -> list[int]:
    """Processes started by ``pid``, transitively (a broker's worker processes)."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(_stat_fields(int(entry.name))[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        out += children
        todo += children
    return out


def cpu_seconds(pid: int, children: bool = True, *, system_only: bool = False) -> float:
    """User + system CPU seconds used so far by the process (all threads), its live descendants and the
    descendants it has reaped; ``system_only``: the system part alone (the kernel's work for them: system calls,
    page faults, the softirqs that ran in their context)."""
    f = _stat_fields(pid)
    if system_only:
        ticks = int(f[12]) + int(f[14])  # stime cstime (fields 15 and 17)
    else:
        ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime (fields 14-17)
    total = ticks / CLOCK_TICKS_PER_S
    if children:
        for child in descendants(pid):
            try:
                total += cpu_seconds(child, children=False, system_only=system_only)
            except OSError:  # exited meanwhile: its time moves to the parent's cutime
                continue
    return total


def thread_group(name: str) -> str:
    """A thread's name without its number (``data-plane-kafka-network-thread-1-ListenerName(PLAINTEXT)-PLAINTEXT-2``
    and ``...-0`` are one group; so are a JVM's ``GC Thread#0`` and ``GC Thread#1``)."""
    return name.rstrip("0123456789").rstrip("-#_ ") or name


def thread_cpu_seconds(pid: int) -> dict[str, tuple[float, float]]:
    """User and system CPU seconds used so far by each group of the process's live threads (``thread_group``):
    which thread paid for a request, and how much of it the kernel's work was."""
    groups: dict[str, tuple[float, float]] = {}
    for entry in os.scandir(f"/proc/{pid}/task"):
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name = thread_group(raw[raw.index("(") + 1:raw.rindex(")")])
        fields = raw[raw.rindex(")") + 2:].split()
        user, system = groups.get(name, (0.0, 0.0))
        groups[name] = (user + int(fields[11]) / CLOCK_TICKS_PER_S, system + int(fields[12]) / CLOCK_TICKS_PER_S)
    return groups


def thread_cpu_delta(before: dict[str, tuple[float, float]],
                     after: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """CPU seconds (user, system) each thread group used between two ``thread_cpu_seconds`` readings (a thread
    gone by ``after`` is left out; one started meanwhile counts whole)."""
    out = {}
    for name, (user, system) in after.items():
        user0, system0 = before.get(name, (0.0, 0.0))
        if user - user0 > 0 or system - system0 > 0:
            out[name] = (user - user0, system - system0)
    return out


def runqueue_wait_seconds(pid: int) -> float:
    """Seconds the process's threads have spent runnable but waiting for a CPU (the second field of
    ``/proc/<pid>/task/<tid>/schedstat``), summed over its live threads: how much the machine's other load
    delayed the broker. NaN without schedstats."""
    total = 0
    found = False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return float("nan")
    for tid in tasks:
        wait_ns = _schedstat_wait_ns(f"/proc/{pid}/task/{tid}/schedstat")
        if wait_ns is not None:  # else the thread exited meanwhile
            total += wait_ns
            found = True
    return total / 1e9 if found else float("nan")


def thread_runqueue_wait_seconds() -> float:
    """The same for the calling thread alone. NaN without schedstats."""
    wait_ns = _schedstat_wait_ns("/proc/thread-self/schedstat")
    return wait_ns / 1e9 if wait_ns is not None else float("nan")


def _schedstat_wait_ns(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(f"/proc/{pid}/status has no {key}")


def rss_bytes(pid: int, children: bool = True) -> int:
    """Resident memory of the process (and its descendants, if it has any)."""
    total = _status_kib(pid, "VmRSS") * 1024
    if children:
        for child in descendants(pid):
            try:
                total += _status_kib(child, "VmRSS") * 1024
            except (OSError, KeyError):
                continue
    return total


def peak_rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmHWM") * 1024


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0, same user). False if the kernel refused."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


@dataclass
class Usage:
    """What one broker spent during one workload."""

    cpu_s: float
    wall_s: float
    peak_rss: int          # VmHWM after the workload (peak since the reset before it)
    steady_rss: int        # median VmRSS over the second half of the workload
    runqueue_wait_s: float = float("nan")  # broker threads' time runnable but not running (other load)
    system_s: float = float("nan")  # the system part of cpu_s (the kernel's work for the broker)
    samples: list[int] = field(default_factory=list, repr=False)


class UsageMeter:
    """Measure a broker process over a block: ``with UsageMeter(pid) as m: ...; m.usage``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=f"rss-{pid}", daemon=True)
        self.usage: Usage | None = None

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self._samples.append(rss_bytes(self.pid))
            except (OSError, KeyError):
                return  # the process exited; the workload will report it
            self._stop.wait(RSS_SAMPLE_INTERVAL_S)

    def __enter__(self) -> UsageMeter:
        self._hwm_reset = reset_peak_rss(self.pid)
        self._cpu0 = cpu_seconds(self.pid)
        self._system0 = cpu_seconds(self.pid, system_only=True)
        self._wait0 = runqueue_wait_seconds(self.pid)
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        wall = time.monotonic() - self._t0
        samples = self._samples or [0]
        try:
            cpu = cpu_seconds(self.pid) - self._cpu0
            system = cpu_seconds(self.pid, system_only=True) - self._system0
            wait = runqueue_wait_seconds(self.pid) - self._wait0
            peak = peak_rss_bytes(self.pid) if self._hwm_reset else max(samples)
        except OSError:
            cpu, system, wait, peak = float("nan"), float("nan"), float("nan"), max(samples)
        half = samples[len(samples) // 2:]
        self.usage = Usage(cpu_s=cpu, wall_s=wall, peak_rss=max(peak, max(samples)),
                           steady_rss=int(statistics.median(half)), samples=samples, runqueue_wait_s=wait,
                           system_s=system)


#: ``PF_KTHREAD`` in the flags field of /proc/<pid>/stat: a kernel thread (writeback, softirq, workqueues).
_PF_KTHREAD = 0x00200000


def runnable_threads(own_pids: set[int]) -> tuple[int, int, int]:
    """Threads in state R (running or waiting for a CPU) right now: (this benchmark's own, kernel threads,
    every other process's). Kernel threads are counted apart: some of them (writeback, loopback softirqs)
    work for the benchmark itself."""
    own = kernel = other = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                fields = raw[raw.rindex(")") + 2:].split()
                if fields[0] != "R":
                    continue
                flags = int(fields[6])
            except (OSError, ValueError, IndexError):
                continue  # exited meanwhile
            if pid in own_pids:
                own += 1
            elif flags & _PF_KTHREAD:
                kernel += 1
            else:
                other += 1
    return own, kernel, other


#: How often the load sampler counts runnable threads while a workload runs.
LOAD_SAMPLE_INTERVAL_S = 0.5


@dataclass
class MachineLoad:
    """The machine's load around one workload measurement.

    ``loadavg_1m`` is the kernel's 1-minute load average when the measurement began (it counts this
    benchmark's own broker and load-generator threads over the last minute as well as everything else);
    ``other_runnable`` is the mean number of runnable threads of processes *outside* this benchmark while
    the workload ran (sampled from /proc): the other load the brokers competed with for the cores.
    """

    loadavg_1m: float
    loadavg_1m_after: float
    other_runnable: float
    kernel_runnable: float
    own_runnable: float
    samples: int


class LoadMeter:
    """Sample the machine's load over a block: ``with LoadMeter() as m: ...; m.load``. The benchmark's own
    threads are those of this process and its descendants (both brokers and the load generators)."""

    def __init__(self) -> None:
        self._counts: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load", daemon=True)
        self.load: MachineLoad | None = None

    def _sample(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            own_pids = {me, *descendants(me)}
            counts = runnable_threads(own_pids)
            self._counts.append((max(0, counts[0] - 1), counts[1], counts[2]))  # not this sampler itself
            self._stop.wait(LOAD_SAMPLE_INTERVAL_S)

    def __enter__(self) -> LoadMeter:
        self._before = os.getloadavg()[0]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        nan = float("nan")

        def mean(i: int) -> float:
            return statistics.fmean(c[i] for c in self._counts) if self._counts else nan

        self.load = MachineLoad(loadavg_1m=self._before, loadavg_1m_after=os.getloadavg()[0],
                                other_runnable=mean(2), kernel_runnable=mean(1), own_runnable=mean(0),
                                samples=len(self._counts))
