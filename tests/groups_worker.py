"""A consumer-group member process for the real-client tests: ``python groups_worker.py LIB BOOTSTRAP TOPIC GROUP
[--instance ID] [--assignor NAME] [--session-ms N] [--max-seconds S] [--protocol classic|consumer]``
(``--protocol consumer``: confluent-kafka's KIP-848 consumer, ``group.protocol=consumer``).

Prints one JSON object per line on stdout, flushed: ``{"ev": "assigned", "partitions": [...]}``,
``{"ev": "revoked", ...}``, ``{"ev": "rec", "p": partition, "o": offset, "v": value}`` and ``{"ev": "ready"}`` once
subscribed. Commits offsets after each processed batch (a refused commit is reported as ``{"ev": "commit_error"}``
with ``--protocol``, and the records are consumed again: at least once). Exits cleanly (closing the consumer, i.e. leaving the
group) on SIGTERM or after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

stop = False


def emit(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def on_term(*_):
    global stop
    stop = True


def run_confluent(a) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": a.session_ms, "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": a.assignor or "range", "client.id": f"w-{a.instance or 'dyn'}"}
    if a.protocol == "consumer":   # the coordinator assigns and times sessions: these are the broker's settings
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            del conf[key]
        conf["group.protocol"] = "consumer"
    if a.instance:
        conf["group.instance.id"] = a.instance
    c = Consumer(conf)

    def assigned(consumer, parts):
        emit(ev="assigned", partitions=sorted(p.partition for p in parts))
        if a.assignor == "cooperative-sticky":
            consumer.incremental_assign(parts)

    def revoked(consumer, parts):
        emit(ev="revoked", partitions=sorted(p.partition for p in parts))
        if a.assignor == "cooperative-sticky":
            consumer.incremental_unassign(parts)

    c.subscribe([a.topic], on_assign=assigned, on_revoke=revoked)
    emit(ev="ready")
    deadline = time.monotonic() + a.max_seconds
    while not stop and time.monotonic() < deadline:
        msgs = c.consume(100, 0.2)
        good = [m for m in msgs if m.error() is None]
        for m in good:
            emit(ev="rec", p=m.partition(), o=m.offset(), v=m.value().decode())
        if good:
            if a.protocol is None:
                c.commit(asynchronous=False)
                continue
            try:
                c.commit(asynchronous=False)
            except KafkaException as e:   # e.g. a rebalance moved the partitions on: they are consumed again
                emit(ev="commit_error", error=str(e))
    c.close()
    emit(ev="closed")


def run_kafka_python(a) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "sticky": StickyPartitionAssignor}[a.assignor or "range"]
    kw = {}
    if a.instance:
        kw["group_instance_id"] = a.instance
    c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=a.session_ms, heartbeat_interval_ms=500,
                      partition_assignment_strategy=[assignor], **kw)

    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, parts):
            emit(ev="assigned", partitions=sorted(p.partition for p in parts))

        def on_partitions_revoked(self, parts):
            emit(ev="revoked", partitions=sorted(p.partition for p in parts))

    c.subscribe([a.topic], listener=Listener())
    emit(ev="ready")
    deadline = time.monotonic() + a.max_seconds
    while not stop and time.monotonic() < deadline:
        batches = c.poll(timeout_ms=200)
        n = 0
        for tp, recs in batches.items():
            for r in recs:
                emit(ev="rec", p=tp.partition, o=r.offset, v=r.value.decode())
                n += 1
        if n:
            c.commit()
    c.close()
    emit(ev="closed")


def run_aiokafka(a) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, parts):
            emit(ev="assigned", partitions=sorted(p.partition for p in parts))

        async def on_partitions_revoked(self, parts):
            emit(ev="revoked", partitions=sorted(p.partition for p in parts))

    async def main():
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[a.assignor or "range"]
        c = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=a.session_ms, heartbeat_interval_ms=500,
                             partition_assignment_strategy=(assignor,))
        await c.start()
        c.subscribe([a.topic], listener=Listener())
        emit(ev="ready")
        deadline = time.monotonic() + a.max_seconds
        try:
            while not stop and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=200)
                n = 0
                for tp, recs in batches.items():
                    for r in recs:
                        emit(ev="rec", p=tp.partition, o=r.offset, v=r.value.decode())
                        n += 1
                if n:
                    await c.commit()
        finally:
            await c.stop()
        emit(ev="closed")

    asyncio.run(main())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("lib", choices=["confluent", "kafka-python", "aiokafka"])
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("group")
    p.add_argument("--instance")
    p.add_argument("--assignor")
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--max-seconds", type=float, default=90)
    p.add_argument("--protocol", choices=["classic", "consumer"])
    a = p.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[a.lib](a)


if __name__ == "__main__":
    main()
