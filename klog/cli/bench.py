"""``klog bench produce|consume``: quick load tests (kafka-producer-perf-test / kafka-consumer-perf-test).

``produce`` sends fixed-size records as fast as allowed (or at ``--throughput`` records/s), shows live
progress and ends with throughput and the send-to-acknowledgement latency percentiles. ``consume`` reads
records from the start of every partition without a group and reports throughput.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Annotated, Any

import typer

from klog.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CliError,
    CommandConfigOption,
    Connection,
    admin_client,
    stderr_console,
    topic_partitions,
)

bench_app = typer.Typer(help="Quick produce and consume benchmarks with a latency summary.",
                        no_args_is_help=True)
#: Percentiles in the produce summary (Kafka's tool prints 50th, 95th, 99th and 99.9th).
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(int(len(sorted_values) * pct / 100.0 + 0.5) - 1, 0)
    return sorted_values[min(rank, len(sorted_values) - 1)]


class LatencyRecorder:
    """Send-to-ack latencies (ms) of acknowledged records, fed by delivery callbacks on the client's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: BaseException | None = None

    def callback(self, sent_at: float) -> Any:
        def done(fut: Any) -> None:
            elapsed_ms = (time.perf_counter() - sent_at) * 1000.0
            error = fut.exception()
            with self.lock:
                if error is None:
                    self.latencies.append(elapsed_ms)
                else:
                    self.errors += 1
                    if self.first_error is None:
                        self.first_error = error
        return done

    def acked(self) -> int:
        with self.lock:
            return len(self.latencies)


@bench_app.command("produce")
def produce(
    topic: Annotated[str, typer.Argument(help="the topic to write (created by the broker if allowed)")],
    num_records: Annotated[int, typer.Option("--num-records", "-n", help="records to send")] = 100_000,
    record_size: Annotated[int, typer.Option("--record-size", "-s", help="value size in bytes")] = 100,
    throughput: Annotated[int, typer.Option(
        "--throughput", help="records per second at most (-1: as fast as possible)")] = -1,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all")] = "all",
    linger_ms: Annotated[int, typer.Option("--linger-ms")] = 5,
    batch_size: Annotated[int, typer.Option("--batch-size", help="bytes per partition batch")] = 1_000_000,
    compression: Annotated[str, typer.Option("--compression", help="none, gzip, snappy, lz4 or zstd")] = "none",
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
) -> None:
    """Send --num-records records of --record-size bytes and summarise throughput and latency."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if num_records < 1 or record_size < 0:
        raise CliError("--num-records must be at least 1 and --record-size at least 0")
    payload = os.urandom(record_size)
    recorder = LatencyRecorder()
    err = stderr_console()
    conn = Connection(bootstrap_server, command_config)
    producer = conn.producer(acks=acks, linger_ms=linger_ms, batch_size=batch_size, compression_type=compression)
    bar = Progress(TextColumn("[bold]produce"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=err, transient=True)
    started = time.perf_counter()
    try:
        with bar:
            task = bar.add_task("produce", total=num_records, rate="")
            next_refresh = started
            for i in range(num_records):
                if throughput > 0:
                    ahead = started + i / throughput - time.perf_counter()
                    if ahead > 0:
                        time.sleep(ahead)
                fut = producer.send(topic, payload)
                fut.add_done_callback(recorder.callback(time.perf_counter()))
                now = time.perf_counter()
                if now >= next_refresh:
                    acked = recorder.acked()
                    bar.update(task, completed=acked,
                               rate=f"{acked / max(now - started, 1e-9):,.0f} rec/s")
                    next_refresh = now + 0.2
                if recorder.first_error is not None:
                    break
            producer.flush()
    finally:
        producer.close()
    elapsed = max(time.perf_counter() - started, 1e-9)
    if recorder.first_error is not None:
        raise CliError(f"{recorder.errors} records failed; first error: {recorder.first_error}")
    lat = sorted(recorder.latencies)
    n = len(lat)
    typer.echo(f"{n} records sent, {n / elapsed:,.1f} records/sec ({n * record_size / elapsed / 2**20:.2f} MB/sec), "
               f"{sum(lat) / max(n, 1):.2f} ms avg latency, {lat[-1] if lat else 0:.2f} ms max latency, "
               + ", ".join(f"{percentile(lat, p):.2f} ms {p:g}th" for p in PERCENTILES) + ".")


@bench_app.command("consume")
def consume(
    topic: Annotated[str, typer.Argument(help="the topic to read")],
    num_records: Annotated[int, typer.Option("--num-records", "-n", help="records to read")] = 100_000,
    timeout: Annotated[float, typer.Option("--timeout", help="give up after this many seconds")] = 60.0,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
) -> None:
    """Read --num-records records from the start of every partition (no group) and summarise throughput."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    conn = Connection(bootstrap_server, command_config)
    with admin_client(conn) as admin:
        tps = topic_partitions(admin, topic)
        lows = admin.list_offsets({tp: "earliest" for tp in tps})
    consumer = conn.consumer(enable_auto_commit=False)
    err = stderr_console()
    bar = Progress(TextColumn("[bold]consume"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=True)
    count = 0
    nbytes = 0
    first_at: float | None = None
    started = time.perf_counter()
    try:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, lows[tp].offset)
        with bar:
            task = bar.add_task("consume", total=num_records)
            deadline = started + timeout
            while count < num_records and time.perf_counter() < deadline:
                batch = consumer.poll_batch(timeout=0.5, max_records=num_records - count)
                if batch.num_rows:
                    if first_at is None:
                        first_at = time.perf_counter()
                    count += batch.num_rows
                    nbytes += batch.column("value").nbytes
                    bar.update(task, completed=count)
    finally:
        consumer.close()
    elapsed = max(time.perf_counter() - started, 1e-9)
    if count < num_records:
        raise CliError(f"read {count} of {num_records} records in {timeout:g} s (is the topic that large?)")
    typer.echo(f"{count} records read, {count / elapsed:,.1f} records/sec ({nbytes / elapsed / 2**20:.2f} MB/sec), "
               f"{((first_at or started) - started) * 1000:.1f} ms to the first records, {elapsed:.2f} s in all.")
