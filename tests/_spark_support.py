"""Helpers shared by the Spark test modules: a SparkSession with klog registered, topic creation."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def spark_session(app: str, *, master: str = "local[2]", jars: list[str] | None = None, conf: Mapping[str, str] | None = None,
                  check_workers: bool = True):
    """A small local SparkSession whose Python workers run this interpreter, with klog registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import klog.spark

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if os.environ.get("KLOG_SPARK_AUTOREGISTER") != "1":
        klog.spark.register(spark, check_workers=check_workers)
    # else: Spark must find format("klog") by itself through the pyspark_klog package
    return spark


def create_topic(bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=dict(config or {}))], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until every partition has a leader
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after 30 s")


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector for the installed pyspark (tools/spark/fetch-spark-kafka.sh), or [] when Maven
    Central lacks it."""
    try:
        out = subprocess.run(["bash", str(REPO / "tools/spark/fetch-spark-kafka.sh"), sys.executable],
                             capture_output=True, text=True, timeout=300, check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return []
    return sorted(str(p) for p in Path(out).glob("*.jar"))
