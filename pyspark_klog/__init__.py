"""Lets Spark find klog's data source by itself: PySpark (4.0+) imports every installed top-level
package named ``pyspark_*`` when a session first uses a Python data source, and registers its
``DefaultSource`` under ``DefaultSource.name()`` (here ``"klog"``). ``klog.spark.register(spark)``
does the same explicitly.
"""

from klog.spark.source import KlogDataSource as DefaultSource

__all__ = ["DefaultSource"]
