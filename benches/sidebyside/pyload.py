"""Python load generators, each run as its own process: ``python -m sidebyside.pyload MODE JSON_ARGS``.

Modes (each prints one JSON object on its last stdout line):

- ``produce``: confluent-kafka (librdkafka) producer, as fast as it goes.
- ``consume``: confluent-kafka consumer over all partitions from the beginning (assign, no group join).
- ``e2e-consume`` / ``e2e-produce``: end-to-end latency at a fixed rate. The producer stamps
  ``CLOCK_MONOTONIC`` nanoseconds (system-wide on Linux, so comparable across processes) in the first 8
  bytes of each value; the consumer, a separate process so neither waits on the other's GIL, subtracts it
  from its own clock when the record arrives.
- ``connections``: N concurrent TCP connections, each a closed loop of Kafka Produce requests (wire
  protocol v9, encoded with klog.protocol, one 10-record batch per request) for a fixed time.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
import time
from typing import Any

from .procstat import thread_runqueue_wait_seconds

_STAMP = struct.Struct(">q")
#: Drop this leading share of end-to-end samples: connection setup and first-batch effects.
E2E_WARMUP_SHARE = 0.1


def _emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def _payload(size: int) -> bytes:
    # Not all-zero, not trivially compressible (compression is off anyway); the same bytes for every record.
    return (os.urandom(64) * (size // 64 + 1))[:size]


def produce(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []
    conf = {"bootstrap.servers": a["bootstrap"], "acks": str(a["acks"]), "linger.ms": a.get("linger_ms", 5),
            "batch.size": a.get("batch_size", 65536), "compression.type": "none",
            "queue.buffering.max.kbytes": 65536, "delivery.report.only.error": True,
            "partitioner": "murmur2_random",
            "error_cb": lambda err: errors.append(str(err))}
    producer = Producer(conf)

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    value, topic, n = _payload(a["size"]), a["topic"], a["records"]
    deadline = time.monotonic() + a["time_limit_s"]
    producer.list_topics(topic, timeout=30)  # metadata first: do not time the connection setup
    # process_time over the timed window: this loop's thread and librdkafka's (the producer's CPU per GB, beside
    # the broker's, without the interpreter's start-up)
    start, process_cpu0 = time.monotonic(), time.process_time()
    sent = 0
    produce_one = producer.produce
    while sent < n:
        try:
            produce_one(topic, value, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
            if time.monotonic() > deadline:
                break
        if sent % 20000 == 0:
            producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    elapsed, process_cpu = time.monotonic() - start, time.process_time() - process_cpu0
    if remaining:
        raise KafkaException(f"{remaining} records undelivered at the time limit")
    if errors:
        raise KafkaException(f"{len(errors)} delivery errors, first: {errors[0]}")
    return {"records": sent, "seconds": elapsed, "records_per_s": sent / elapsed,
            "mb_per_s": sent * a["size"] / elapsed / 2**20, "complete": sent == n,
            "producer_process_cpu_s": process_cpu}


#: librdkafka's wait before it re-checks a full local fetch queue (its default is 1,000 ms)
CONSUME_QUEUE_BACKOFF_MS = 10
#: librdkafka's local queue bound per partition, raised past the read (its defaults: 65,536 KB, 100,000 msgs)
CONSUME_QUEUE_MAX_KBYTES = 2097151
CONSUME_QUEUE_MIN_MESSAGES = 10_000_000


def consume(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    # librdkafka stops fetching once its local queue holds queued.min.messages (100,000) and then waits
    # fetch.queue.backoff.ms (1 s by default) before it looks again, even if the queue drained long before.
    # With a broker that fills the queue faster than this Python loop empties it, that wait is most of the
    # run (measured on klog: 21 MB/s with the default, 152 MB/s with 10 ms), so the benchmark would time
    # the client's back-off rather than the broker. Both brokers get the same setting.
    # The local queue's bound is raised past the read for a second client effect: while the queues of a
    # broker's other partitions are full, librdkafka sends that broker a Fetch for only the partitions already
    # read to their end; the broker (either) rightly holds it for fetch.wait.max.ms (500 ms) as no data can
    # come, and librdkafka sends that broker nothing else meanwhile. Seen in librdkafka's fetch debug log on a
    # klog read that took 0.84 s instead of 0.47 s ("Fetch 1/1/5 toppar(s)", answered 488 ms later). It strikes
    # the broker that fills the queues faster more often, and timed the client's queue, not the broker.
    consumer = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": f"sbs-{os.getpid()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576,
                         "fetch.queue.backoff.ms": CONSUME_QUEUE_BACKOFF_MS,
                         "queued.max.messages.kbytes": CONSUME_QUEUE_MAX_KBYTES,
                         "queued.min.messages": CONSUME_QUEUE_MIN_MESSAGES})
    topic, n = a["topic"], a["records"]
    meta = consumer.list_topics(topic, timeout=30).topics[topic]
    # Timed from the assignment (like ConsumerPerformance's fetch time: after metadata, before the first
    # fetch) to the last record.
    # The CPU of this thread (turning librdkafka's messages into Python objects and reading them) is the
    # same work whichever broker serves: its share of the read shows whether the broker or the client set
    # the pace. process_time adds librdkafka's own threads (one per broker: fetch and parse).
    # The thread's run-queue wait (schedstat) is time it was ready but another thread had the cores.
    start, thread_cpu0, process_cpu0 = time.monotonic(), time.thread_time(), time.process_time()
    queued0 = thread_runqueue_wait_seconds()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
    deadline = start + a["time_limit_s"]
    got = nbytes = 0
    while got < n and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=10000, timeout=1.0)
        for m in batch:
            if m.error() is not None:
                raise KafkaException(m.error())
            nbytes += len(m)
        got += len(batch)
    end, thread_cpu, process_cpu = time.monotonic(), time.thread_time(), time.process_time()
    queued = thread_runqueue_wait_seconds()
    consumer.close()
    if got < n:
        raise KafkaException(f"consumed {got} of {n} records within {a['time_limit_s']} s")
    elapsed = end - start
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed,
            "mb_per_s": nbytes / elapsed / 2**20, "consumer_thread_cpu_s": thread_cpu - thread_cpu0,
            "consumer_process_cpu_s": process_cpu - process_cpu0,
            "consumer_thread_busy": (thread_cpu - thread_cpu0) / elapsed,
            "consumer_thread_runqueue_s": queued - queued0}



def e2e_consume(a: dict[str, Any]) -> dict[str, Any]:
    """Consume from the end of the topic until ``records`` arrived; print latency percentiles."""
    import numpy as np
    from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": f"sbs-e2e-{os.getpid()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    topic, n = a["topic"], a["records"]
    meta = consumer.list_topics(topic, timeout=30).topics[topic]
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in meta.partitions])
    settle = time.monotonic() + 1.0
    while time.monotonic() < settle:  # resolve OFFSET_END and start the fetchers before the producer runs
        if consumer.consume(num_messages=1000, timeout=0.1):
            raise KafkaException("records arrived before the producer started")
    print("ready", flush=True)
    latencies = np.empty(n, dtype=np.int64)
    got = 0
    deadline = time.monotonic() + a["time_limit_s"]
    clock, unpack = time.monotonic_ns, _STAMP.unpack_from
    poll = consumer.poll
    while got < n and time.monotonic() < deadline:
        # poll() returns as soon as one record is there (consume(num_messages=...) would wait for a full batch
        # or its timeout and add that wait to every latency).
        m = poll(0.1)
        if m is None:
            continue
        now = clock()
        if m.error() is not None:
            raise KafkaException(m.error())
        latencies[got] = now - unpack(m.value() or b"")[0]
        got += 1
    consumer.close()
    if got < n:
        raise KafkaException(f"received {got} of {n} records within {a['time_limit_s']} s")
    if a.get("dump"):  # per-record latencies (ns) for looking at when the tail happens
        np.save(a["dump"], latencies[:got])
    kept = latencies[int(n * E2E_WARMUP_SHARE):] / 1e6
    p50, p99, p999 = np.percentile(kept, [50, 99, 99.9])
    return {"records": got, "p50_ms": float(p50), "p99_ms": float(p99), "p999_ms": float(p999),
            "max_ms": float(kept.max()), "mean_ms": float(kept.mean())}


def send_paced(producer: Any, topic: str, n: int, rate: int, size: int) -> tuple[int, float]:
    """Send ``n`` records of ``size`` bytes at ``rate`` records/s (paced every millisecond), each stamped with its
    send time (CLOCK_MONOTONIC ns in its first 8 bytes); (records sent, seconds taken). Does not flush."""
    body = bytearray(_payload(size))
    start = time.monotonic()
    sent = 0
    clock, pack = time.monotonic_ns, _STAMP.pack_into
    while sent < n:
        due = min(n, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            pack(body, 0, clock())
            producer.produce(topic, bytes(body))
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    return sent, time.monotonic() - start


def e2e_produce(a: dict[str, Any]) -> dict[str, Any]:
    """Produce ``records`` at ``rate`` records/s (paced every millisecond), each stamped with its send time."""
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []
    producer = Producer({"bootstrap.servers": a["bootstrap"], "acks": str(a["acks"]),
                         "linger.ms": a["linger_ms"], "compression.type": "none",
                         "partitioner": "murmur2_random", "delivery.report.only.error": True,
                         "error_cb": lambda err: errors.append(str(err))})
    topic, n, rate = a["topic"], a["records"], a["rate"]
    producer.list_topics(topic, timeout=30)
    sent, elapsed = send_paced(producer, topic, n, rate, a["size"])
    left = producer.flush(30)
    if left or errors:
        raise KafkaException(f"{left} undelivered, {len(errors)} errors {errors[:1]}")
    return {"records": sent, "seconds": elapsed, "achieved_rate": sent / elapsed}


async def _connection_loop(host: str, port: int, request: bytes, stop_at: float,
                           latencies: list[float], problems: list[str]) -> int:
    from klog.protocol import decode_response

    reader, writer = await asyncio.open_connection(host, port)
    done = 0
    clock = time.perf_counter
    try:
        while clock() < stop_at:
            t0 = clock()
            writer.write(request)
            size = int.from_bytes(await reader.readexactly(4), "big")
            frame = await reader.readexactly(size)
            latencies.append(clock() - t0)
            done += 1
            if done % 64 == 1:  # check the answer regularly without decoding every one
                _, body = decode_response(0, 9, frame)
                for topic in body.responses:
                    for part in topic.partition_responses:
                        if part.error_code:
                            problems.append(f"partition {part.index}: error {part.error_code}")
                            return done
    finally:
        writer.close()
    return done


async def _connections(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from klog.protocol import Struct, encode_request
    from klog.records import encode_batch

    host, port = a["bootstrap"].rsplit(":", 1)
    value = _payload(a["size"])
    batch = encode_batch([{"value": value}] * a["records_per_request"])
    requests = [
        encode_request(0, 9, i, "sbs-conn", Struct(transactional_id=None, acks=a["acks"], timeout_ms=30000,
                       topic_data=[Struct(name=a["topic"], partition_data=[
                           Struct(index=i % a["partitions"], records=batch)])]))
        for i in range(a["connections"])
    ]
    latencies: list[float] = []
    problems: list[str] = []
    t_connect = time.perf_counter()
    stop_at = t_connect + a["seconds"]
    counts = await asyncio.gather(*(
        _connection_loop(host, int(port), req, stop_at, latencies, problems) for req in requests),
        return_exceptions=True)
    elapsed = time.perf_counter() - t_connect
    failures = [repr(c) for c in counts if isinstance(c, BaseException)]
    if failures or problems:
        raise RuntimeError(f"{len(failures)} connections failed ({failures[:2]}), errors: {problems[:2]}")
    total = sum(c for c in counts if isinstance(c, int))
    lat = np.array(latencies) * 1e3
    p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
    records = total * a["records_per_request"]
    return {"requests": total, "records": records, "seconds": elapsed, "requests_per_s": total / elapsed,
            "mb_per_s": records * a["size"] / elapsed / 2**20,
            "p50_ms": float(p50), "p99_ms": float(p99), "p999_ms": float(p999)}


def connections(a: dict[str, Any]) -> dict[str, Any]:
    try:
        import uvloop
        return uvloop.run(_connections(a))
    except ImportError:
        return asyncio.run(_connections(a))


MODES = {"produce": produce, "consume": consume, "e2e-consume": e2e_consume, "e2e-produce": e2e_produce,
         "connections": connections}


def main(argv: list[str]) -> int:
    mode, args = argv[0], json.loads(argv[1])
    try:
        _emit({"ok": True, **MODES[mode](args)})
    except Exception as exc:  # noqa: BLE001 - reported to the harness as a failed workload
        _emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
