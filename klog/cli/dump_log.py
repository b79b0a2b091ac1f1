"""``klog dump-log PATH...``: print Kafka log files (``kafka-dump-log.sh --deep-iteration --print-data-log``).

Understands segment files (``.log``: every batch and, with deep iteration, every record), offset indexes
(``.index``), time indexes (``.timeindex``), offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) and
``leader-epoch-checkpoint``. Records of the KRaft metadata log (``__cluster_metadata-0``) and of its snapshots
(``<end offset>-<epoch>.checkpoint``) are decoded as ``kafka-dump-log --cluster-metadata-decoder`` shows them
(Kafka's JSON of each record, :mod:`klog.metadata.kafka_json`). Files are read through klog's readers (the segment scanner
and index readers of :mod:`klog.spark.segments`, batches decoded by :func:`klog.records.decode_batches`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from klog.cli.common import CliError

CHECKPOINT_FILES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                    "replication-offset-checkpoint", "cleaner-offset-checkpoint")
METADATA_TOPIC = "__cluster_metadata"


def register(app: typer.Typer) -> None:
    app.command("dump-log")(dump_log)


def _segment(path: Path) -> Any:
    from klog.spark.segments import Segment

    try:
        base = int(path.name.split(".", 1)[0])
    except ValueError:
        raise CliError(f"{path}: not a segment file name (<20-digit base offset>.log/.index/.timeindex)") from None
    return Segment(path.parent, base)


#: Batch attribute bit: the base timestamp is the delete horizon of a compacted batch (KIP-534).
DELETE_HORIZON_FLAG = 0x40


def _delete_horizon(batch: Any) -> str:
    """Kafka's tool prints Java's OptionalLong."""
    return f"OptionalLong[{batch.base_timestamp}]" if batch.attributes & DELETE_HORIZON_FLAG else "OptionalLong.empty"


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def _metadata_payload(batch: Any, r: Any) -> str:
    """A ``__cluster_metadata`` record as Kafka's ``--cluster-metadata-decoder`` prints it."""
    from klog.metadata.kafka_json import control_record_text, metadata_record_json, to_json
    from klog.metadata.records import MetadataRecordError, _decode_control, decode_record

    try:
        if batch.is_control:
            return control_record_text(_decode_control(r.key, r.value, r.offset))
        return "payload: " + to_json(metadata_record_json(decode_record(r.value, r.offset)))
    except MetadataRecordError as exc:
        return f"(not a metadata record: {exc})"


def _print_batch(batch: Any, position: int, size: int, print_data: bool, is_metadata: bool, out: Any) -> None:
    last_seq = batch.base_sequence + batch.last_offset_delta if batch.base_sequence >= 0 else -1
    ts_type = "LogAppendTime" if batch.timestamp_type == "log_append" else "CreateTime"
    out(f"baseOffset: {batch.base_offset} lastOffset: {batch.base_offset + batch.last_offset_delta} "
        f"count: {batch.records_count} baseSequence: {batch.base_sequence} lastSequence: {last_seq} "
        f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
        f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {str(batch.is_transactional).lower()} "
        f"isControl: {str(batch.is_control).lower()} deleteHorizonMs: {_delete_horizon(batch)} "
        f"position: {position} "
        f"{ts_type}: {batch.max_timestamp} size: {size} magic: {batch.magic} "
        f"compresscodec: {batch.compression} crc: {batch.crc} "
        f"isvalid: true")
    for r in batch.records:
        line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                f"keySize: {-1 if r.key is None else len(r.key)} "
                f"valueSize: {-1 if r.value is None else len(r.value)} "
                f"sequence: {batch.base_sequence + r.offset - batch.base_offset if batch.base_sequence >= 0 else -1} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        if print_data:
            if is_metadata:
                line += " " + _metadata_payload(batch, r)
            elif batch.is_control:
                line += f" controlRecordKey: {r.key.hex() if r.key else ''}"
            else:  # as Kafka's tool: a null key or value is left out
                line += (f" key: {_text(r.key)}" if r.key is not None else "") + \
                        (f" payload: {_text(r.value)}" if r.value is not None else "")
        out(line)


def dump_segment(path: Path, print_data: bool, out: Any) -> None:
    from klog.records import decode_batches

    seg = _segment(path)
    is_metadata = path.parent.name.rsplit("-", 1)[0] == METADATA_TOPIC
    out(f"Dumping {path}")
    out(f"Log starting offset: {seg.base_offset}")
    fd = os.open(path, os.O_RDONLY)
    try:
        end = 0
        for prefix in seg.scan(0, fd):
            data = os.pread(fd, prefix.size, prefix.position)
            try:
                (batch,) = decode_batches(data, allow_compacted=True)
            except ValueError as exc:
                raise CliError(f"{path}: batch at byte {prefix.position}: {exc}") from None
            _print_batch(batch, prefix.position, prefix.size, print_data, is_metadata, out)
            end = prefix.position + prefix.size
        size = os.fstat(fd).st_size
        if end < size:
            out(f"Found {size - end} trailing bytes at position {end} (a partial batch: a write in progress or "
                "a crash; recovery truncates them)")
    finally:
        os.close(fd)


#: A v2 batch starts with baseOffset (int64) and batchLength (int32, the bytes after it).
BATCH_LENGTH_END = 12


def dump_snapshot(path: Path, print_data: bool, out: Any) -> None:
    """A KRaft snapshot (``<end offset>-<epoch>.checkpoint``): its batches and records, like a metadata segment."""
    from klog.metadata.storage import SnapshotId
    from klog.records import decode_batches

    snapshot_id = SnapshotId.parse(path.name)
    if snapshot_id is None:
        raise CliError(f"{path}: not a snapshot file name (<20-digit end offset>-<10-digit epoch>.checkpoint)")
    out(f"Dumping {path}")
    out(f"Snapshot end offset: {snapshot_id.end_offset}, epoch: {snapshot_id.epoch}")
    data = path.read_bytes()
    position = 0
    while position < len(data):
        if len(data) - position < BATCH_LENGTH_END:
            raise CliError(f"{path}: {len(data) - position} trailing bytes at position {position} (not a batch)")
        size = BATCH_LENGTH_END + int.from_bytes(data[position + 8:position + 12], "big", signed=True)
        if size <= BATCH_LENGTH_END or position + size > len(data):
            raise CliError(f"{path}: batch at byte {position} claims {size} bytes, the file has "
                           f"{len(data) - position} left")
        try:
            (batch,) = decode_batches(data[position:position + size])
        except ValueError as exc:
            raise CliError(f"{path}: batch at byte {position}: {exc}") from None
        _print_batch(batch, position, size, print_data, True, out)
        position += size


def dump_index(path: Path, out: Any) -> None:
    seg = _segment(path)
    out(f"Dumping {path}")
    offsets, positions = seg.index
    entries = list(zip(offsets, positions))[1:]  # [0] is the segment start, not an entry
    if not entries:
        out(f"{path} is empty.")
    for offset, position in entries:
        out(f"offset: {offset} position: {position}")


def dump_time_index(path: Path, out: Any) -> None:
    seg = _segment(path)
    out(f"Dumping {path}")
    stamps, offsets = seg.time_index
    if not stamps:
        out(f"{path} is empty.")
    for ts, offset in zip(stamps, offsets):
        out(f"timestamp: {ts} offset: {offset}")


def dump_offset_checkpoint(path: Path, out: Any) -> None:
    from klog.spark.segments import LogDirError, _read_checkpoint

    out(f"Dumping {path}")
    try:
        entries = _read_checkpoint(path)
    except LogDirError as exc:
        raise CliError(str(exc)) from None
    for (topic, partition), offset in sorted(entries.items()):
        out(f"topic: {topic} partition: {partition} offset: {offset}")


def dump_leader_epoch_checkpoint(path: Path, out: Any) -> None:
    out(f"Dumping {path}")
    lines = path.read_text().splitlines()
    if not lines:
        return
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CliError(f"{path}: unsupported leader-epoch-checkpoint (version line {lines[:1]!r})")
    for line in lines[2:]:
        try:
            epoch, start = (int(x) for x in line.split())
        except ValueError:
            raise CliError(f"{path}: malformed line {line!r} (expected '<epoch> <start offset>')") from None
        out(f"epoch: {epoch} startOffset: {start}")


def dump_file(path: Path, print_data: bool, out: Any) -> None:
    name = path.name
    if name.endswith(".log"):
        dump_segment(path, print_data, out)
    elif name.endswith(".index"):
        dump_index(path, out)
    elif name.endswith(".timeindex"):
        dump_time_index(path, out)
    elif name in CHECKPOINT_FILES:
        dump_offset_checkpoint(path, out)
    elif name == "leader-epoch-checkpoint":
        dump_leader_epoch_checkpoint(path, out)
    elif name.endswith(".checkpoint"):
        dump_snapshot(path, print_data, out)
    else:
        raise CliError(f"{path}: not a file dump-log reads (.log, .index, .timeindex, "
                       f"{', '.join(CHECKPOINT_FILES)}, leader-epoch-checkpoint, <offset>-<epoch>.checkpoint)")


def dump_log(
    paths: Annotated[list[Path], typer.Argument(help="files, or partition directories (every segment file)",
                                                 exists=True)],
    print_data: Annotated[bool, typer.Option("--print-data-log/--no-data",
                                             help="print keys and values (default) or only record metadata")]
    = True,
) -> None:
    """Print the batches and records of segment files, index entries and checkpoints."""
    out = typer.echo
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".log", ".index", ".timeindex", ".checkpoint")
                           or p.name in CHECKPOINT_FILES or p.name == "leader-epoch-checkpoint")
            for f in files:
                dump_file(f, print_data, out)
        else:
            dump_file(path, print_data, out)
