"""The Spark driver of tests/test_spark_exactly_once.py, run as its own process so the test can SIGKILL it (the
driver, its JVM and its Python workers) in the middle of a micro-batch.

``python _spark_eos_query.py BOOTSTRAP INPUT OUTPUT CHECKPOINT MODE``: reads INPUT with read_committed, 200 offsets
per micro-batch (Trigger.AvailableNow: it stops when it caught up), and writes key and value to OUTPUT with
``exactlyOnce=true``. MODE ``stall:FILE``: the task that meets the record ``stall`` creates FILE and waits (up to
STALL_S) before writing, so the other task of that batch prepares its transaction and the test kills the driver
before the commit. MODE ``replay``: run to the end, then delete the last entry of Spark's commit log (as if the
driver died after the sink committed that batch but before Spark recorded it) and run the query again in the same
session, which re-runs that batch; prints ``replayed N rows``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _spark_support import spark_session

#: How long the stalled task waits: the test kills the driver well within it.
STALL_S = 120


def main(bootstrap: str, source: str, sink: str, checkpoint: str, mode: str) -> None:
    stall_file = mode.split(":", 1)[1] if mode.startswith("stall:") else None
    # (The workers run this interpreter and this source tree: no need for register()'s check job.)
    spark = spark_session("klog-spark-eos", conf={"spark.task.maxFailures": "1"}, check_workers=False)

    from pyspark.sql.functions import udf

    @udf("binary")
    def pass_through(value):  # runs in the Python workers (a row UDF: no pandas needed)
        if stall_file and value == b"stall":
            open(stall_file, "w").close()
            time.sleep(STALL_S)
        return value

    stream = (
        spark.readStream.format("klog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("maxOffsetsPerTrigger", "200")
        .load()
        .select("key", pass_through("value").alias("value"))
    )

    def run() -> list[dict]:
        query = (
            stream.writeStream.format("klog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("exactlyOnce", "true")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        print(f"query {query.id} started", flush=True)
        query.awaitTermination()
        return list(query.recentProgress)

    run()
    if mode == "replay":
        commits = Path(checkpoint) / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        for entry in (str(last), f".{last}.crc"):   # the entry and its checksum file
            (commits / entry).unlink(missing_ok=True)
        replayed = run()
        assert (commits / str(last)).exists()
        print(f"replayed {sum(p['numInputRows'] for p in replayed)} rows", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
