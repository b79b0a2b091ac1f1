"""``klog consume TOPIC``: print records (kafka-console-consumer, kcat -C).

Without ``--group`` the consumer reads every partition (or ``--partition``) from where ``--from`` says and
commits nothing. With ``--group`` it joins the group; ``--from beginning|end`` then only applies where the group
has no committed offset (Kafka's auto.offset.reset), and offsets are committed as it goes.
"""

from __future__ import annotations

import base64
import enum
import json
import sys
import time
from typing import Annotated, Any, Optional

import typer

from klog.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CliError,
    CommandConfigOption,
    Connection,
    admin_client,
    counted,
    parse_timestamp,
    topic_partitions,
)


class OutputFormat(str, enum.Enum):
    value = "value"
    key_value = "key-value"
    json = "json"
    hex = "hex"


def register(app: typer.Typer) -> None:
    app.command("consume")(consume)


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="backslashreplace")


def _json_bytes(data: bytes | None) -> Any:
    """A key/value in JSON output: the UTF-8 text, or ``{"base64": ...}`` for bytes that are not UTF-8."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def format_record(record: Any, fmt: OutputFormat, key_separator: str) -> str:
    if fmt is OutputFormat.value:
        return _text(record.value)
    if fmt is OutputFormat.key_value:
        return f"{_text(record.key)}{key_separator}{_text(record.value)}"
    if fmt is OutputFormat.hex:
        key = "" if record.key is None else record.key.hex()
        value = "" if record.value is None else record.value.hex()
        return f"{key}{key_separator}{value}"
    return json.dumps({
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": "LogAppendTime" if record.timestamp_type == 1 else "CreateTime",
        "key": _json_bytes(record.key), "value": _json_bytes(record.value),
        "headers": [[k, _json_bytes(v)] for k, v in record.headers],
    }, ensure_ascii=False)


def _start_positions(conn: Connection, topic: str, partitions: list[int] | None, start: str) -> dict[Any, int]:
    """Where each partition starts: ``beginning``, ``end``, an offset (negative: that many before the end) or
    ``@timestamp`` (ms or ISO-8601; partitions with nothing that new start at the end)."""
    with admin_client(conn) as admin:
        tps = topic_partitions(admin, topic, partitions)
        if start == "beginning":
            return {tp: o.offset for tp, o in admin.list_offsets({tp: "earliest" for tp in tps}).items()}
        if start == "end":
            return {tp: o.offset for tp, o in admin.list_offsets({tp: "latest" for tp in tps}).items()}
        if start.startswith("@"):
            ts = parse_timestamp(start[1:])
            found = admin.list_offsets({tp: ts for tp in tps})
            ends = admin.list_offsets({tp: "latest" for tp in tps if tp not in found})
            return {tp: (found.get(tp) or ends[tp]).offset for tp in tps}
        try:
            offset = int(start)
        except ValueError:
            raise CliError(f"--from {start!r}: use beginning, end, an offset, -N (N before the end) or "
                           "@timestamp") from None
        if offset >= 0:
            return {tp: offset for tp in tps}
        lows = admin.list_offsets({tp: "earliest" for tp in tps})
        highs = admin.list_offsets({tp: "latest" for tp in tps})
        return {tp: max(lows[tp].offset, highs[tp].offset + offset) for tp in tps}


def consume(
    topic: Annotated[str, typer.Argument(help="the topic to read")],
    start: Annotated[str, typer.Option(
        "--from", "-o", help="beginning, end, an offset, -N (the last N of each partition) or @timestamp "
                             "(ms or ISO-8601)")] = "end",
    from_beginning: Annotated[bool, typer.Option("--from-beginning", help="same as --from beginning")] = False,
    partition: Annotated[Optional[list[int]], typer.Option(
        "--partition", "-p", help="read only this partition (repeatable; not with --group)")] = None,
    group: Annotated[Optional[str], typer.Option("--group", "-g", help="consume as a member of this group")]
    = None,
    count: Annotated[Optional[int], typer.Option("--count", "-n", help="exit after this many records")] = None,
    idle_timeout: Annotated[Optional[float], typer.Option(
        "--idle-timeout", help="exit after this many seconds without a record")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f", help="value, key-value, json (with metadata) or "
                                              "hex (key and value)")] = OutputFormat.value,
    key_separator: Annotated[str, typer.Option("--key-separator", "-K", help="between key and value")] = "\t",
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
) -> None:
    """Print records as they arrive (Ctrl-C stops)."""
    if from_beginning:
        start = "beginning"
    if count is not None and count < 1:
        raise CliError("--count must be at least 1")
    conn = Connection(bootstrap_server, command_config)
    if group is not None:
        if partition:
            raise CliError("--partition reads without a group; drop --group or --partition")
        if start not in ("beginning", "end"):
            raise CliError("with --group, --from is beginning or end (where the group has no committed offset); "
                           "move a group with 'klog groups reset-offsets'")
        consumer = conn.consumer(topic, group_id=group,
                                 auto_offset_reset="earliest" if start == "beginning" else "latest")
    else:
        positions = _start_positions(conn, topic, partition, start)
        consumer = conn.consumer(enable_auto_commit=False)
        consumer.assign(list(positions))
        for tp, offset in positions.items():
            consumer.seek(tp, offset)
    printed = 0
    last_record = time.monotonic()
    out = sys.stdout
    try:
        while count is None or printed < count:
            records = consumer.poll(timeout=0.5, max_records=None if count is None else count - printed)
            if not records:
                if idle_timeout is not None and time.monotonic() - last_record >= idle_timeout:
                    break
                continue
            last_record = time.monotonic()
            for record in records:
                out.write(format_record(record, fmt, key_separator) + "\n")
            printed += len(records)
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    print(f"Consumed {counted(printed, 'record')}.", file=sys.stderr)
