"""A Spark standalone cluster on this machine, started from the installed pyspark package: one
master and N workers, each its own JVM process (``bin/spark-class org.apache.spark.deploy...``), so
executors are real separate processes with their own Python workers.

    python spark/standalone.py start --workers 2      # prints the master URL, keeps running
    spark-submit --master spark://127.0.0.1:7077 ... # in another shell
    (Ctrl-C stops the cluster)

Also importable: ``with standalone_cluster(tmp_dir, workers=2) as master_url: ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from klog.testing.ports import free_port  # ports no other test process takes meanwhile

#: how long the master and the workers may take to come up on a loaded machine
STARTUP_TIMEOUT_S = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _alive_workers(webui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as r:
            state = json.load(r)
    except (OSError, ValueError):
        return -1
    return int(state.get("aliveworkers", 0))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def standalone_cluster(work_dir: str | os.PathLike[str], *, workers: int = 2, cores_per_worker: int = 1,
                       memory_per_worker: str = "1g") -> Iterator[str]:
    """Start a master and ``workers`` workers on 127.0.0.1; yields the master URL."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(work / "logs"), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    port, webui = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        log = open(work / "master.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(webui)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        master = f"spark://127.0.0.1:{port}"
        for i in range(workers):
            log = open(work / f"worker-{i}.log", "wb")
            logs.append(log)
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--cores", str(cores_per_worker), "--memory", memory_per_worker,
                 "--webui-port", str(free_port()), "--work-dir", str(work / f"worker-{i}"), master],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while _alive_workers(webui) < workers:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tails = "\n".join((work / n).read_text(errors="replace")[-2000:] for n in
                                  ["master.log", *[f"worker-{i}.log" for i in range(workers)]])
                raise RuntimeError(f"standalone cluster did not come up (exited: {dead}):\n{tails}")
            time.sleep(0.5)
        yield master
    finally:
        for p in reversed(procs):
            _stop(p)
        for log in logs:
            log.close()


def main() -> int:
    p = argparse.ArgumentParser(description="Run a Spark standalone cluster from the pyspark package")
    p.add_argument("command", choices=["start"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--memory", default="1g")
    p.add_argument("--work-dir", default="/tmp/klog-spark-standalone")
    args = p.parse_args()
    with standalone_cluster(args.work_dir, workers=args.workers, cores_per_worker=args.cores,
                            memory_per_worker=args.memory) as master:
        print(master, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
