"""Profile klog-broker under the side-by-side workloads with py-spy (sampling, Python + native frames).

``PYTHONPATH=benches python -m sidebyside.profile [--only TEXT] [--scale S] [--out DIR]``

For each selected workload: start ``py-spy record --native --format raw`` on the broker process, run the
workload, stop py-spy, then summarise the collapsed stacks: the share of wall time the broker's threads were
busy, the functions with the most self time, the frames with the most inclusive time, and time per layer
(native core, protocol codec, broker, asyncio/uvloop, sockets). Writes ``DIR/<workload>.txt`` (collapsed
stacks, loadable in speedscope or flamegraph.pl), ``DIR/<workload>.md`` (the summary) and
``DIR/<workload>.png`` (top self-time functions).
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from . import runner
from .brokers import klog_broker, shared_properties
from .workloads import matrix

SAMPLE_RATE_HZ = 200
DEFAULT_SELECTION = ("produce/java/100B/1p/acks=1", "produce/java/1024B/16p/acks=1", "consume/java/1024B/16p",
                     "e2e/confluent/1024B/16p/acks=1", "connections/")

IDLE = "idle (waiting in epoll/futex)"
OTHER = "other Python (stdlib, interpreter)"
#: Leaf frames where a thread waits rather than works (py-spy --native samples waiting threads too).
IDLE_LEAF = re.compile(r"^(epoll_wait|epoll_pwait|epoll_pwait2|pthread_cond_wait|pthread_cond_timedwait|"
                       r"__futex\w*|futex\w*|sem_wait|sem_timedwait|nanosleep|clock_nanosleep|select|poll|ppoll|"
                       r"__GI___\w*wait\w*) ")
#: Leaf frames that are system calls: the kernel's share.
SYSCALL_LEAF = re.compile(r"^(send|sendmsg|sendto|recv|recvmsg|recvfrom|write|writev|pwrite64|pwritev64|pwritev|"
                          r"read|readv|pread64|preadv64|sendfile|sendfile64|open64|openat|openat64|close|fsync|"
                          r"fdatasync|ftruncate64|ftruncate|fallocate|fallocate64|lseek64|fstat|fstat64|stat64|"
                          r"statx|mmap64|munmap|madvise|getrandom|syscall) \(")
#: (layer, pattern on a frame "function (file:line)") - the innermost matching frame decides.
LAYERS = [
    ("native core (klog._native, Rust)", re.compile(r"klog_core|klog_py|_core\.abi3|pyo3")),
    ("protocol codec (klog.protocol)", re.compile(r"klog/protocol/|<generated|codegen")),
    ("record batches (klog.records)", re.compile(r"klog/records")),
    ("storage (klog.storage)", re.compile(r"klog/storage|klog/log/")),
    ("broker (klog.broker)", re.compile(r"klog/broker/")),
    ("event loop (asyncio/uvloop)", re.compile(r"asyncio/|uvloop|loop\.c|loop\.pyx|handles\.pyx|stream\.pyx|"
                                               r"selector|\buv_|\buv__")),
]


#: Frames under which a thread blocks on a lock or queue (a worker thread waiting for work); py-spy often
#: cannot name the libc futex wrapper below them, so the leaf alone does not say the thread is idle.
BLOCKING_FRAME = re.compile(r"^(PyThread_acquire_lock_timed|_queue_SimpleQueue_get|pthread_cond_\w*wait) ")
UNNAMED_FRAME = re.compile(r"^0x[0-9a-f]+ ")


def layer_of(frames: list[str]) -> str:
    leaf = frames[-1]
    if IDLE_LEAF.match(leaf):
        return IDLE
    if UNNAMED_FRAME.match(leaf):
        # the first named frame above unnamed libc frames decides whether the thread was waiting
        named = next((f for f in reversed(frames) if not UNNAMED_FRAME.match(f)), "")
        if BLOCKING_FRAME.match(named) or IDLE_LEAF.match(named):
            return IDLE
    m = SYSCALL_LEAF.match(leaf)
    if m:
        return f"kernel: {m.group(1)}"
    for frame in reversed(frames):
        for name, pattern in LAYERS:
            if pattern.search(frame):
                return name
    return OTHER


def parse_collapsed(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            # py-spy's raw format lists the root first: "thread;outer;...;leaf"
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def summarise(stacks: Counter[tuple[str, ...]], wall_s: float, top: int = 15) -> tuple[str, list[tuple[str, int]]]:
    total = sum(stacks.values())
    if not total:
        return "no samples (the broker was idle or py-spy could not attach)\n", []
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    by_layer: Counter[str] = Counter()
    for stack, n in stacks.items():
        frames = [f for f in stack if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        layer = layer_of(frames)
        by_layer[layer] += n
        if layer == IDLE:
            continue
        self_time[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    work = total - by_layer.get(IDLE, 0)
    if not work:
        return "no working samples (the broker only waited)\n", []
    busy = work / (SAMPLE_RATE_HZ * wall_s) if wall_s else float("nan")
    lines = [f"{total} samples at {SAMPLE_RATE_HZ} Hz over {wall_s:.1f} s, {work} of them working (not waiting "
             f"in epoll/futex): the broker's threads kept {busy:.0%} of one core busy. Shares below are of the "
             "working samples.", "",
             "| where the time went (leaf syscall, else innermost klog/asyncio frame) | share |", "|---|---|"]
    lines += [f"| {name} | {n / work:.1%} |" for name, n in by_layer.most_common() if name != IDLE and work]
    lines += ["", "| self time | function |", "|---|---|"]
    lines += [f"| {n / work:.1%} | `{f[:140]}` |" for f, n in self_time.most_common(top)]
    # Inclusive time of klog's own frames (the event loop and interpreter frames above them are in every stack).
    ours = Counter({f: n for f, n in inclusive.items() if re.search(r"klog/|klog_core|klog_py|_core\.abi3", f)
                    and not f.startswith(("<module>", "main (", "run ("))})
    lines += ["", "| inclusive | klog frame |", "|---|---|"]
    lines += [f"| {n / work:.1%} | `{f[:140]}` |" for f, n in ours.most_common(top + 5)]
    return "\n".join(lines) + "\n", [(f, n) for f, n in self_time.most_common(top)]


def work_samples(stacks: Counter[tuple[str, ...]]) -> int:
    return sum(n for stack, n in stacks.items() if stack and layer_of(list(stack)) != IDLE)


def chart(top: list[tuple[str, int]], total: int, title: str, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 0.32 * len(top) + 1.2))
    names = [re.sub(r"\s*\((.*/)?", " (", f)[:90] for f, _ in top]
    ax.barh(range(len(top)), [n / total * 100 for _, n in top], color="#1f77b4")
    ax.set_yticks(range(len(top)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% of samples (self time)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


PERF_RATE_HZ = 499


def perf_summary(data: Path, wall_s: float, top: int = 20) -> str:
    """``perf report`` of a ``perf record -g`` file: CPU share per binary (kernel, interpreter, klog's Rust
    core, libc, uvloop) and the hottest symbols, self time."""
    def report(sort: str) -> list[tuple[float, str]]:
        out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", sort, "--stdio",
                              "-g", "none", "--percent-limit", "0.5"], capture_output=True, text=True,
                             timeout=300).stdout
        rows = []
        for line in out.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
            if m and not line.lstrip().startswith("#"):
                rows.append((float(m.group(1)), re.sub(r"\s{2,}", "  ", m.group(2))))
        return rows

    # -n adds each row's sample count (the "# Samples:" header rounds to thousands).
    full = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso",
                           "-g", "none", "-n"], capture_output=True, text=True, timeout=300).stdout
    samples = sum(int(m.group(1)) for m in re.finditer(r"^\s*[\d.]+%\s+(\d+)\s", full, re.M))
    lines = [f"perf: {samples} samples at {PERF_RATE_HZ} Hz over {wall_s:.1f} s "
             f"(~{samples / PERF_RATE_HZ / wall_s:.0%} of one core, all threads, user + kernel).", "",
             "| share | binary |", "|---|---|"]
    lines += [f"| {pct:.1f}% | `{name}` |" for pct, name in report("dso")]
    lines += ["", "| self | binary, symbol |", "|---|---|"]
    lines += [f"| {pct:.1f}% | `{name[:150]}` |" for pct, name in report("dso,sym")[:top]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sidebyside.profile", description=__doc__)
    p.add_argument("--only", action="append", default=[], help="workload id substring (repeatable)")
    p.add_argument("--scale", type=float, default=0.25)
    p.add_argument("--out", type=Path, default=runner.Path(__file__).resolve().parents[2] / ".cache" / "profiles")
    p.add_argument("--no-native", action="store_true", help="Python frames only")
    p.add_argument("--perf", action="store_true",
                   help="sample with Linux perf (user + kernel, by binary and symbol) instead of py-spy")
    args = p.parse_args(argv)
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    selection = args.only or list(DEFAULT_SELECTION)
    workloads = [w for w in matrix(args.scale) if any(s in w.id for s in selection)]
    # A consume workload reads what its produce workload wrote: run those first, unprofiled.
    sources = {w.source_topic for w in workloads if w.source_topic}
    fillers = [w for w in matrix(args.scale) if w.topic in sources and w not in workloads]
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "broker"
    shutil.rmtree(work, ignore_errors=True)
    with klog_broker(work, shared_properties()) as broker:
        runner.create_topic(broker.bootstrap, "warmup", 4)
        for w in fillers:
            runner.run_workload(broker, w, work)
        for w in workloads:
            name = w.id.replace("/", "_").replace("=", "")
            raw = args.out / f"{name}.txt"
            if args.perf:
                data = args.out / f"{name}.perf.data"
                spy = subprocess.Popen(["perf", "record", "-F", str(PERF_RATE_HZ), "-g", "-p", str(broker.pid),
                                        "-o", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True)
                time.sleep(1.0)
                t0 = time.monotonic()
                result = runner.run_workload(broker, w, work)
                wall = time.monotonic() - t0
                spy.send_signal(signal.SIGINT)
                spy.communicate(timeout=60)
                figures = ", ".join(f"{k}={v:.3g}" for k, v in result.items() if isinstance(v, float))
                text = perf_summary(data, wall)
                (args.out / f"{name}.perf.md").write_text(f"### {w.id} (perf)\n\n{figures}\n\n{text}")
                runner.log(f"{w.id}: {figures}\n{text}")
                continue
            cmd = [pyspy, "record", "--pid", str(broker.pid), "--rate", str(SAMPLE_RATE_HZ), "--format", "raw", "--function",
                   "--output", str(raw)] + (["--nonblocking"] if args.no_native else ["--native"])
            spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # let py-spy attach before the load starts
            t0 = time.monotonic()
            try:
                result = runner.run_workload(broker, w, work)
            except Exception as exc:  # noqa: BLE001
                result = {"error": str(exc)}
            wall = time.monotonic() - t0
            spy.send_signal(signal.SIGINT)
            _, err = spy.communicate(timeout=60)
            if not raw.exists():
                runner.log(f"{w.id}: py-spy wrote nothing: {err[-500:]}")
                continue
            stacks = parse_collapsed(raw)
            text, top = summarise(stacks, wall)
            figures = ", ".join(f"{k}={v:.3g}" for k, v in result.items() if isinstance(v, float))
            (args.out / f"{name}.md").write_text(f"### {w.id}\n\n{figures}\n\n{text}")
            if top:
                chart(top, work_samples(stacks), f"klog-broker self time: {w.id}", args.out / f"{name}.png")
            runner.log(f"{w.id}: {figures}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
