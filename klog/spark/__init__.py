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


def register(spark: Any) -> None:
    """Register the ``klog`` format with a SparkSession (``spark.dataSource.register``)."""
    from klog.spark.source import KlogDataSource

    spark.dataSource.register(KlogDataSource)


def __getattr__(name: str) -> Any:
    # pyspark is imported only when the data source class itself is needed.
    if name == "KlogDataSource":
        from klog.spark.source import KlogDataSource

        return KlogDataSource
    raise AttributeError(name)
