"""klog.spark.register() checks that Spark's Python workers import the same klog as the driver."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from klog.spark import klog_identity, worker_mismatch

REPO = Path(__file__).resolve().parent.parent


def test_the_same_version_installed_in_different_places_is_fine() -> None:
    driver = {"version": "1.2.0", "path": "/venv-a/site-packages/klog", "source_tree": False}
    assert worker_mismatch(driver, {**driver, "path": "/opt/venv-b/site-packages/klog"}) is None


def test_another_version_or_a_source_tree_on_the_workers_is_named() -> None:
    driver = {"version": "1.2.0", "path": "/venv/site-packages/klog", "source_tree": False}
    other_version = worker_mismatch(driver, {**driver, "version": "1.1.0"})
    assert other_version is not None and "workers import klog 1.1.0" in other_version
    assert "the driver klog 1.2.0 from an installed package" in other_version
    shadowed = worker_mismatch(driver, {"version": "1.2.0", "path": "/home/me/klog/klog", "source_tree": True})
    assert shadowed is not None and "from a source tree at /home/me/klog/klog" in shadowed


def test_this_interpreter_knows_which_klog_it_imports() -> None:
    import klog

    me = klog_identity()
    assert me["version"] == klog.__version__ and Path(me["path"]) == Path(klog.__file__).resolve().parent


_DRIVER = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import klog.spark
spark = (SparkSession.builder.master("local[1]").appName("klog-worker-check")
         .config("spark.ui.enabled", "false").config("spark.executorEnv.PYTHONPATH", sys.argv[1]).getOrCreate())
try:
    klog.spark.register(spark)
    print("REGISTERED")
except klog.spark.KlogSparkError as exc:
    print("REFUSED:", exc)
finally:
    spark.stop()
"""


@pytest.mark.slow
@pytest.mark.long
def test_register_refuses_workers_that_import_another_klog(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    # A klog 9.9.9 first on the workers' sys.path (what a stray checkout or an old install does).
    fake = tmp_path / "workers" / "klog"
    (fake / "spark").mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "9.9.9"\n')
    import klog.spark

    real_spark = Path(klog.spark.__file__).parent
    for name in ("__init__.py", "errors.py"):
        shutil.copy(real_spark / name, fake / "spark" / name)
    r = subprocess.run([sys.executable, "-c", _DRIVER, str(tmp_path / "workers")], capture_output=True, text=True,
                       timeout=240, cwd=tmp_path)
    assert "REFUSED: Spark's Python workers import klog 9.9.9" in r.stdout, r.stdout + r.stderr[-3000:]
    assert f"the driver klog {klog.__version__}" in r.stdout
