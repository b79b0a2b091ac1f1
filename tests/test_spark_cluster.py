"""The example pipeline (spark/orders_pipeline.py) on a real Spark standalone cluster on this machine:
a master and two workers started from the pyspark package as separate JVMs, the job submitted with
spark-submit, executors (separate processes) decoding with klog._native, klog-broker as the broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from klog.testing.process import BrokerProcess  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "spark"))
from standalone import spark_home, standalone_cluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

def spark_submit(master: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master,
           "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.executor.memory=512m",
           "--conf", "spark.driver.memory=512m", "--conf", "spark.ui.enabled=false", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def test_orders_pipeline_on_a_standalone_cluster_with_two_workers(tmp_path):
    with BrokerProcess(tmp_path / "klog", {"num.partitions": 4}) as broker, \
            standalone_cluster(tmp_path / "cluster", workers=2, cores_per_worker=1, memory_per_worker="768m") as master:
        result = spark_submit(
            master, str(REPO / "spark" / "orders_pipeline.py"), "--bootstrap", broker.bootstrap_servers,
            "--orders", "20000", "--customers", "97", "--max-offsets-per-trigger", "4000",
            "--checkpoint", str(tmp_path / "checkpoint"), "demo",
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
        summary = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))
        executors = summary.pop("executors")
        driver_native = summary.pop("driver_native")
        assert summary == {"processed_first_run": 10000, "processed_second_run": 10000, "customers": 97,
                           "view_matches": True}
        # two executor JVMs (one per worker), each task in a Python worker loading the same klog._native
        assert {role for _, role, _ in executors} == {"executor"}
        assert len({pid for pid, _, _ in executors}) == 2, executors
        assert {native for _, _, native in executors} == {driver_native}
