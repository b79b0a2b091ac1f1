"""klog's Spark integration: ``format("klog")`` source and sink on PySpark 4's Python Data Source API.

Register it once per session::

    import klog.spark
    klog.spark.register(spark)
    df = (spark.read.format("klog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())

(With klog installed, Spark also finds it by itself at session start through the ``pyspark_klog``
package.) The schema, options and offsets JSON are those of Spark's Kafka source; see
``spark/README.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from klog.spark.errors import BrokerError, DataLossError, KlogSparkError, KlogSparkOptionError

if TYPE_CHECKING:
    from klog.spark.source import KlogDataSource

__all__ = [
    "register",
    "klog_identity",
    "worker_mismatch",
    "KlogDataSource",
    "KlogSparkError",
    "KlogSparkOptionError",
    "DataLossError",
    "BrokerError",
]


#: What a user without PySpark is told (the pure-Python parts of klog.spark import without it).
PYSPARK_MISSING = ("klog's Spark data source needs PySpark 4: install the spark extra, "
                   "pip install 'klog[spark]' (or pip install 'pyspark>=4.0')")


def _data_source_class() -> Any:
    try:
        from klog.spark.source import KlogDataSource
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "pyspark":
            raise ImportError(PYSPARK_MISSING, name="pyspark") from exc
        raise
    return KlogDataSource


def klog_identity() -> dict[str, Any]:
    """Which klog this interpreter imports: its version and whether it is an installed package or a source
    tree (a checkout on ``sys.path`` shadowing the wheel). Runs on the driver and, through a one-task job,
    on Spark's Python workers."""
    import os

    import klog

    package_dir = os.path.dirname(os.path.realpath(klog.__file__))
    root = os.path.dirname(package_dir)
    source_tree = os.path.exists(os.path.join(root, "pyproject.toml")) and os.path.isdir(os.path.join(root, "rust"))
    return {"version": klog.__version__, "path": package_dir, "source_tree": source_tree}


def worker_mismatch(driver: dict[str, Any], worker: dict[str, Any]) -> str | None:
    """Why the workers' klog is not the driver's (None when it is): a different version, or one side a
    source tree and the other an installed wheel. Different install paths of the same version are fine
    (executors on other machines)."""
    def where(i: dict[str, Any]) -> str:
        return f"klog {i['version']} from {'a source tree' if i['source_tree'] else 'an installed package'} " \
               f"at {i['path']}"

    if driver["version"] != worker["version"] or driver["source_tree"] != worker["source_tree"]:
        return (f"Spark's Python workers import {where(worker)}, the driver {where(driver)}. Install the same "
                "klog wheel for both (spark.pyspark.python / PYSPARK_PYTHON name the workers' interpreter) and "
                "keep a klog checkout off the workers' sys.path (PYTHONSAFEPATH=1, or run from another directory).")
    return None


def _workers_identity(spark: Any) -> dict[str, Any] | None:
    """klog's identity as a Python worker sees it (None on Spark Connect, which has no SparkContext)."""
    try:
        context = spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect sessions raise here; there is nothing to check from here
        return None
    try:
        return context.parallelize([0], 1).map(lambda _: klog_identity()).collect()[0]  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001 - a worker that cannot import klog fails the job
        if "No module named 'klog" in str(exc):
            raise KlogSparkError("Spark's Python workers cannot import klog: install the klog wheel into the "
                                 "workers' Python (spark.pyspark.python / PYSPARK_PYTHON)") from None
        raise


def register(spark: Any, *, check_workers: bool = True) -> None:
    """Register the ``klog`` format with a SparkSession (``spark.dataSource.register``).

    ``check_workers`` (default) first runs a one-task job to check that Spark's Python workers import the
    same klog as the driver (same version, installed vs source tree); a mismatch raises
    :class:`KlogSparkError` saying what each side imports.
    """
    source = _data_source_class()  # first: without PySpark there is no session to register with
    if check_workers:
        worker = _workers_identity(spark)
        if worker is not None:
            problem = worker_mismatch(klog_identity(), worker)
            if problem:
                raise KlogSparkError(problem)
    spark.dataSource.register(source)


def __getattr__(name: str) -> Any:
    # pyspark is imported only when the data source class itself is needed.
    if name == "KlogDataSource":
        return _data_source_class()
    raise AttributeError(name)
