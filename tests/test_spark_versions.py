"""The oldest PySpark klog supports (4.0.x) runs the core Spark tests too.

PySpark 4.0 differs where it matters: ``latestOffset()`` takes no arguments (the source caps itself
with maxOffsetsPerTrigger and learns its start from ``partitions``/``commit``), there is no
``SupportsTriggerAvailableNow`` or ``DataSourceStreamArrowWriter`` (the stream sink gets Rows), and
Arrow batch schemas are not checked before the JVM reads them. The leg runs in a second virtualenv
(``.cache/spark40-venv``) that has only ``pyspark==4.0.x`` of its own and sees everything else
(klog, pyarrow, confluent-kafka, pytest) from this interpreter's site-packages. In that leg the
session does not call ``klog.spark.register``: ``format("klog")`` must be found through the
``pyspark_klog`` package (Spark's automatic registration).
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = [pytest.mark.java, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parent.parent
#: The oldest supported line; 4.0.4 is the newest 4.0 release whose spark-sql-kafka connector is
#: on Maven Central, so the leg can also compare with Spark's own Kafka source.
PYSPARK_OLDEST = "4.0.4"
#: The behaviours that differ by version (kept small for CI time): batch read, Spark's own Kafka
#: source on klog's broker, streaming restarts with the self-capping latestOffset(), the Row-based
#: stream sink.
LEG_TESTS = (
    "(test_batch_read_returns_exactly_what_was_produced and apache)"
    " or (test_spark_kafka_source_returns_the_same_dataframe and klog)"
    " or (test_streaming_with_a_checkpoint and apache)"
    " or test_streaming_sink_copies_a_topic"
)


def oldest_pyspark_python() -> Path:
    """A Python whose own pyspark is PYSPARK_OLDEST and which sees this interpreter's packages."""
    env_dir = Path(os.environ.get("KLOG_SPARK40_VENV", REPO / ".cache" / "spark40-venv"))
    python = env_dir / "bin" / "python"
    probe = [str(python), "-c", "import pyspark, klog.spark; print(pyspark.__version__)"]
    if python.exists() and subprocess.run(probe, capture_output=True, text=True).stdout.strip() == PYSPARK_OLDEST:
        return python
    venv.EnvBuilder(clear=True, with_pip=True).create(env_dir)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"pyspark=={PYSPARK_OLDEST}"], check=True, timeout=900)
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # Its own site-packages come first (pyspark 4.0 wins); this interpreter's follow, processed as a
    # site dir so their .pth files (an editable klog install) apply too.
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(own) / "zz_klog_parent_site.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in parents) + "\n"
    )
    got = subprocess.run(probe, capture_output=True, text=True)
    assert got.stdout.strip() == PYSPARK_OLDEST, got.stderr
    return python


def test_core_spark_tests_pass_on_the_oldest_pyspark_with_automatic_registration():
    python = oldest_pyspark_python()
    env = {**os.environ, "KLOG_SPARK_AUTOREGISTER": "1"}
    result = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(REPO / "tests" / "test_spark.py"), "-k", LEG_TESTS],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1100,
    )
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, tail
    # Only passes and deselections: nothing skipped, failed or errored; at least one test per leg ran.
    summary = re.match(r"(\d+) passed, \d+ deselected in ", result.stdout.strip().splitlines()[-1])
    assert summary is not None and int(summary.group(1)) >= 4, tail
