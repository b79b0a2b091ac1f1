"""``klog produce TOPIC [FILE...]``: records from stdin or files (kafka-console-producer, kcat -P).

Each input line is one record. ``--format lines`` (default): the line is the value, or ``key<SEP>value`` with
``--key-separator SEP``. ``--format json``: each line is a JSON object with optional ``key``, ``value``,
``headers`` (an object of strings) and ``partition``; a non-string ``value``/``key`` is sent as its JSON text.
Files get a progress bar; every run ends with the record count and rate on stderr.
"""

from __future__ import annotations

import enum
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any, Optional

import typer

from klog.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CliError,
    CommandConfigOption,
    Connection,
    counted,
    human_bytes,
    parse_key_values,
    stderr_console,
)


class InputFormat(str, enum.Enum):
    lines = "lines"
    json = "json"


class Compression(str, enum.Enum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)


class DeliveryTally:
    """Counts acknowledged and failed records from the producer's delivery callbacks (on its loop thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def future_done(self, future: Any) -> None:
        self(future.exception(), None)

    def __call__(self, error: BaseException | None, _metadata: Any) -> None:
        with self.lock:
            if error is None:
                self.acked += 1
            else:
                self.failed += 1
                if self.first_error is None:
                    self.first_error = error


def _text_or_json(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def parse_line(line: bytes, fmt: InputFormat, key_separator: bytes | None, where: str
               ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int | None]:
    """One input line -> (key, value, headers, partition)."""
    if fmt is InputFormat.json:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise CliError(f"{where}: not a JSON object ({exc})") from None
        if not isinstance(obj, dict):
            raise CliError(f"{where}: expected a JSON object with key/value/headers/partition, got {line[:60]!r}")
        unknown = set(obj) - {"key", "value", "headers", "partition"}
        if unknown:
            raise CliError(f"{where}: unknown field {sorted(unknown)[0]!r} (use key, value, headers, partition)")
        headers = obj.get("headers") or {}
        if not isinstance(headers, dict):
            raise CliError(f"{where}: headers must be a JSON object of strings")
        partition = obj.get("partition")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise CliError(f"{where}: partition must be a non-negative integer, got {partition!r}")
        return (_text_or_json(obj.get("key")), _text_or_json(obj.get("value")),
                [(str(k), _text_or_json(v)) for k, v in headers.items()], partition)  # type: ignore[misc]
    if key_separator is not None:
        key, sep, value = line.partition(key_separator)
        if not sep:
            raise CliError(f"{where}: no key separator {key_separator.decode()!r} in the line")
        return key, value, [], None
    return None, line, [], None


def _lines(handle: IO[bytes], on_bytes: Any) -> Iterator[bytes]:
    for raw in handle:
        on_bytes(len(raw))
        line = raw.rstrip(b"\n").rstrip(b"\r")
        if line:
            yield line


def produce(
    topic: Annotated[str, typer.Argument(help="the topic to write to")],
    files: Annotated[Optional[list[Path]], typer.Argument(
        help="files to read (default: stdin)", exists=True, dir_okay=False, readable=True)] = None,
    fmt: Annotated[InputFormat, typer.Option("--format", "-f", help="lines: one value (or key+value) a line; "
                                             "json: one {key, value, headers, partition} object a line")]
    = InputFormat.lines,
    key_separator: Annotated[Optional[str], typer.Option(
        "--key-separator", "-K", help="split each line into key and value at the first SEP")] = None,
    header: Annotated[Optional[list[str]], typer.Option(
        "--header", "-H", help="key=value header on every record (repeatable)")] = None,
    partition: Annotated[Optional[int], typer.Option(
        "--partition", "-p", help="write every record to this partition (default: by key)")] = None,
    compression: Annotated[Compression, typer.Option("--compression", "-z", help="batch compression")]
    = Compression.none,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all")] = "all",
    linger_ms: Annotated[int, typer.Option("--linger-ms", help="batching delay")] = 5,
    progress: Annotated[Optional[bool], typer.Option(
        "--progress/--no-progress", help="progress bar (default: on for files on a terminal)")] = None,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
) -> None:
    """Write records read from stdin or files."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    fixed_headers = [(k, v.encode()) for k, v in parse_key_values(header, "--header").items()]
    sep = key_separator.encode() if key_separator else None
    if sep is not None and fmt is InputFormat.json:
        raise CliError("--key-separator applies to --format lines (JSON lines carry a key field)")
    err = stderr_console()
    show_progress = bool(files) and (err.is_terminal if progress is None else progress)
    total_bytes = sum(f.stat().st_size for f in files or [])
    tally = DeliveryTally()
    sent = 0
    sent_bytes = 0
    started = time.monotonic()
    conn = Connection(bootstrap_server, command_config)
    producer = conn.producer(acks=acks, linger_ms=linger_ms, compression_type=compression.value)
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn(), console=err, disable=not show_progress, transient=False)
    try:
        with bar:
            task = bar.add_task(f"produce {topic}", total=total_bytes or None)
            sources: list[tuple[str, Any]] = [(str(f), f) for f in files] if files else [("stdin", None)]
            for name, path in sources:
                handle = open(path, "rb") if path is not None else sys.stdin.buffer
                try:
                    for number, line in enumerate(_lines(handle, lambda n: bar.advance(task, n)), 1):
                        key, value, headers, line_partition = parse_line(line, fmt, sep, f"{name}:{number}")
                        # No per-record callback argument: plain records keep the producer's fast path.
                        producer.send(topic, value=value, key=key, headers=(fixed_headers + headers) or None,
                                      partition=line_partition if line_partition is not None else partition,
                                      ).add_done_callback(tally.future_done)
                        sent += 1
                        sent_bytes += len(line)
                        if tally.first_error is not None:
                            break
                finally:
                    if path is not None:
                        handle.close()
            producer.flush()
    finally:
        producer.close()
    elapsed = max(time.monotonic() - started, 1e-9)
    if tally.first_error is not None:
        raise CliError(f"{tally.failed} of {sent} records failed; first error: {tally.first_error}")
    err.print(f"Produced {counted(tally.acked, 'record')} ({human_bytes(sent_bytes)}) to {topic} in {elapsed:.2f} s: "
              f"{tally.acked / elapsed:,.0f} records/s, {human_bytes(sent_bytes / elapsed)}/s")
