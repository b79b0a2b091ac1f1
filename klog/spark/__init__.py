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


def register(spark: Any) -> None:
    """Register the ``klog`` format with a SparkSession (``spark.dataSource.register``)."""
    source = _data_source_class()  # first: without PySpark there is no session to register with
    spark.dataSource.register(source)


def __getattr__(name: str) -> Any:
    # pyspark is imported only when the data source class itself is needed.
    if name == "KlogDataSource":
        return _data_source_class()
    raise AttributeError(name)
