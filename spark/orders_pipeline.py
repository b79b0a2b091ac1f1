"""Orders -> per-customer totals: a streaming materialized view on klog, with Spark.

An ``orders`` topic receives order events (key = customer id, value = JSON). A Structured Streaming
job reads it with ``format("klog")``, keeps running totals per customer (orders, amount, last order)
and writes every changed total to ``customer-totals``, a compacted topic keyed by customer: the
topic *is* the materialized view (its latest record per key is the current total), and any
consumer can rebuild the view by reading it.

    spark-submit spark/orders_pipeline.py --bootstrap 127.0.0.1:9092 demo
    spark-submit --master spark://127.0.0.1:7077 spark/orders_pipeline.py --bootstrap ... demo

Subcommands:
  generate  write ``--orders`` deterministic orders (the batch sink, ``df.write.format("klog")``)
  run       process new orders into the view (streaming, checkpointed; ``--trigger availableNow``
            processes what is there and stops, ``--trigger 5`` runs every 5 seconds until stopped)
  view      print the view (the latest record per customer of the compacted topic)
  demo      generate half, run, generate the other half, run again (the checkpoint makes the
            second run read only the new orders), then check the view against the expected totals
            and exit 1 if it differs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ORDER_SCHEMA = "order_id long, customer string, amount_cents long, ts long"


def expected_totals(first: int, count: int, customers: int) -> dict[str, tuple[int, int, int]]:
    """customer -> (orders, total cents, last order id) of orders ``first .. first + count - 1``."""
    out: dict[str, list[int]] = {}
    for i in range(first, first + count):
        c = out.setdefault(f"c{i % customers:04d}", [0, 0, -1])
        c[0] += 1
        c[1] += amount_cents(i)
        c[2] = max(c[2], i)
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def amount_cents(i: int) -> int:
    return (i * 7919) % 10_000 + 1


def _spark_version() -> tuple[int, int]:
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def session(app: str):
    from pyspark.sql import SparkSession

    import klog.spark

    spark = SparkSession.builder.appName(app).config("spark.sql.shuffle.partitions", "4").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    klog.spark.register(spark)  # also found automatically (pyspark_klog); explicit is clearer
    return spark


def create_topics(bootstrap: str, orders_topic: str, view_topic: str, partitions: int) -> None:
    import klog
    from klog.client.admin import NewTopic

    admin = klog.AdminClient(bootstrap_servers=bootstrap)
    try:
        existing = set(admin.list_topics())
        wanted = [
            NewTopic(orders_topic, partitions, 1, {}),
            # the view: compacted, so the latest total per customer is kept forever
            NewTopic(view_topic, partitions, 1, {"cleanup.policy": "compact"}),
        ]
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            admin.create_topics(missing)
    finally:
        admin.close()


def generate(spark, args, first: int, count: int) -> None:
    """Orders ``first .. first + count - 1`` as JSON values keyed by customer (the batch sink)."""
    now = int(time.time() * 1000)
    orders = spark.range(first, first + count, numPartitions=max(2, count // 200_000)).selectExpr(
        "id as order_id",
        f"format_string('c%04d', cast(id % {args.customers} as int)) as customer",
        "(id * 7919) % 10000 + 1 as amount_cents",
        f"{now} as ts",
    )
    (orders.selectExpr("customer as key", "to_json(struct(*)) as value")
        .write.mode("append").format("klog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.orders_topic)
        .save())


def run(spark, args) -> int:
    """Fold new orders into the view; returns the number of orders this run processed."""
    from pyspark.sql import functions as F

    orders = (
        spark.readStream.format("klog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.orders_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .selectExpr(f"from_json(cast(value as string), '{ORDER_SCHEMA}') as o")
        .select("o.*")
    )
    totals = orders.groupBy("customer").agg(
        F.count("order_id").alias("orders"),
        F.sum("amount_cents").alias("total_cents"),
        F.max("order_id").alias("last_order"),
    )
    view_records = totals.selectExpr("customer as key", "to_json(struct(*)) as value")

    def publish(changed, batch_id: int) -> None:
        # Each micro-batch's changed totals go to the compacted topic with the batch sink.
        # (Spark's Python data source API takes streaming writes in append mode only; an
        # aggregation emits updates, so they go through foreachBatch. At-least-once, like
        # Spark's Kafka sink: a replayed batch writes the same totals again, which the
        # compacted view absorbs.)
        (changed.write.mode("append").format("klog")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.view_topic)
            .save())

    writer = (
        view_records.writeStream.outputMode("update").foreachBatch(publish)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.trigger == "availableNow":
        processed = 0
        while True:
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination()
            if query.exception() is not None:
                raise query.exception()
            done = sum(p["numInputRows"] for p in query.recentProgress)
            processed += done
            # Spark < 4.2 cannot tell a Python source that a run is AvailableNow: the source caps
            # each run at maxOffsetsPerTrigger, so repeat until a run finds nothing new.
            if done == 0 or _spark_version() >= (4, 2):
                return processed
    else:
        query = writer.trigger(processingTime=f"{int(args.trigger)} seconds").start()
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    return sum(p["numInputRows"] for p in query.recentProgress)


def _where_tasks_run(_: object) -> tuple[int, str, str]:
    """(executor process id, its role, the klog._native file) seen from a task's Python worker."""
    import klog._native

    daemon = os.getppid()  # the pyspark daemon that forked this worker; its parent is the executor
    with open(f"/proc/{daemon}/stat") as f:
        executor = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{executor}/cmdline") as f:
        role = "executor" if "CoarseGrainedExecutorBackend" in f.read() else "driver (local mode)"
    return executor, role, klog._native.__file__


def executors(spark) -> list[tuple[int, str, str]]:
    """Where tasks run (Linux): distinct executor processes and the native core they load."""
    n = max(spark.sparkContext.defaultParallelism, 2) * 2
    return sorted(set(spark.sparkContext.parallelize(range(n), n).map(_where_tasks_run).collect()))


def read_view(spark, args) -> dict[str, dict]:
    """The latest record per customer: the view as any reader of the compacted topic sees it."""
    from pyspark.sql import functions as F

    records = (
        spark.read.format("klog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.view_topic)
        .load()
    )
    # one key always lands in the same partition, so its latest record has its highest offset
    latest = records.groupBy("key").agg(F.max_by("value", "offset").alias("value"))
    return {
        row.key.decode(): json.loads(row.value)
        for row in latest.collect()
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=os.environ.get("KLOG_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--orders-topic", default="orders")
    p.add_argument("--view-topic", default="customer-totals")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--customers", type=int, default=500)
    p.add_argument("--orders", type=int, default=200_000, help="orders to generate (demo: in two halves)")
    p.add_argument("--checkpoint", default="/tmp/klog-orders-pipeline/checkpoint")
    p.add_argument("--trigger", default="availableNow", help="availableNow, or a processing interval in seconds")
    p.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    p.add_argument("command", choices=["generate", "run", "view", "demo"])
    args = p.parse_args(argv)

    spark = session(f"klog orders pipeline: {args.command}")
    try:
        if args.command in ("generate", "demo"):
            create_topics(args.bootstrap, args.orders_topic, args.view_topic, args.partitions)
        if args.command == "generate":
            generate(spark, args, 0, args.orders)
        elif args.command == "run":
            print(f"processed {run(spark, args)} orders")
        elif args.command == "view":
            for customer, total in sorted(read_view(spark, args).items()):
                print(customer, total)
        else:
            half = args.orders // 2
            generate(spark, args, 0, half)
            first = run(spark, args)
            generate(spark, args, half, args.orders - half)
            second = run(spark, args)
            view = read_view(spark, args)
            want = expected_totals(0, args.orders, args.customers)
            got = {c: (v["orders"], v["total_cents"], v["last_order"]) for c, v in view.items()}
            import klog._native

            print(json.dumps({"processed_first_run": first, "processed_second_run": second,
                              "customers": len(got), "view_matches": got == want,
                              "driver_native": klog._native.__file__,
                              "executors": executors(spark) if sys.platform == "linux" else []}))
            if (first, second) != (half, args.orders - half) or got != want:
                bad = sorted(c for c in set(want) | set(got) if want.get(c) != got.get(c))[:5]
                print(f"view differs from the expected totals, e.g. {[(c, want.get(c), got.get(c)) for c in bad]}",
                      file=sys.stderr)
                return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
