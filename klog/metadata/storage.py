"""The metadata log on disk, in Apache Kafka's layout: ``<dir>/__cluster_metadata-0/``.

- the log itself: Kafka segments (``<offset>.log/.index/.timeindex``) written by klog's native partition log;
- snapshots: ``<end offset:20 digits>-<epoch:10 digits>.checkpoint``, a SnapshotHeader control batch (with
  KRaftVersion and Voters records when given), the image's records in batches, a SnapshotFooter control batch;
  written to ``.checkpoint.part``, fsynced, then renamed, so a crash never leaves a half snapshot under the
  final name (Kafka's ``RecordsSnapshotWriter`` / ``FileRawSnapshotWriter``);
- ``quorum-state``: the Raft election state as one line of JSON (Kafka's ``FileQuorumStateStore``).

Kafka's ``kafka-dump-log --cluster-metadata-decoder`` reads all three kinds of file klog writes here
(tests/test_metadata_storage.py), and :class:`MetadataLog` reads what Apache Kafka wrote.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from klog._native import LogConfig, LogManager

from .image import MetadataImage
from .loader import MetadataLoader
from .records import (
    ControlRecordType,
    MetadataBatch,
    MetadataRecord,
    MetadataRecordError,
    control,
    decode_batches,
    encode_batch,
)
from .writer import image_records

__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "QUORUM_STATE_FILE",
    "SNAPSHOT_RECORDS_PER_BATCH",
    "MetadataLog",
    "QuorumState",
    "SnapshotId",
    "read_quorum_state",
    "read_snapshot",
    "snapshot_ids",
    "write_quorum_state",
    "write_snapshot",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
QUORUM_STATE_FILE = "quorum-state"
SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SNAPSHOT_SUFFIX = ".checkpoint.part"
#: The same voter set, kept in the metadata log dir: raft deletes the bootstrap snapshot at its first own snapshot,
#: and a restarted controller still needs its voters' endpoints (klog's snapshots carry only their ids).
INITIAL_VOTERS_COPY = "klog-initial-voters.checkpoint"
#: Records per data batch in a snapshot (Kafka cuts snapshot batches by bytes; a record bound is simpler and
#: keeps each batch far below the default max.message.bytes).
SNAPSHOT_RECORDS_PER_BATCH = 1024
#: Bytes read from the log per read call while replaying.
READ_CHUNK_BYTES = 8 << 20
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True, order=True)
class SnapshotId:
    """A snapshot covers offsets below ``end_offset``; ``epoch`` is the epoch of its last record."""

    end_offset: int
    epoch: int

    @property
    def filename(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"

    @staticmethod
    def parse(name: str) -> SnapshotId | None:
        m = _SNAPSHOT_NAME.match(name)
        return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: str, data: bytes, temp: str) -> None:
    with open(temp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
    _fsync_dir(os.path.dirname(path) or ".")


# ---------------------------------------------------------------------------------------------------------------
# Snapshots.


def snapshot_bytes(records: Sequence[MetadataRecord], snapshot_id: SnapshotId, *,
                   last_contained_log_time_ms: int = 0, kraft_version: int = 0,
                   voters: list[dict[str, Any]] | None = None, timestamp: int | None = None) -> bytes:
    """The bytes of a snapshot file: offsets count from 0 within the file, every batch carries the epoch."""
    head = [control("SnapshotHeaderRecord", version=0, last_contained_log_timestamp=last_contained_log_time_ms)]
    if kraft_version > 0:
        head.append(control("KRaftVersionRecord", version=0, kraft_version=kraft_version))
        if voters is not None:
            head.append(control("VotersRecord", version=0, voters=voters))
    elif voters is not None:
        raise ValueError("voters need kraft_version >= 1 (as Kafka's RecordsSnapshotWriter requires)")
    epoch = snapshot_id.epoch
    parts = [encode_batch(head, base_offset=0, epoch=epoch, timestamp=timestamp)]
    offset = len(head)
    for i in range(0, len(records), SNAPSHOT_RECORDS_PER_BATCH):
        chunk = records[i:i + SNAPSHOT_RECORDS_PER_BATCH]
        parts.append(encode_batch(chunk, base_offset=offset, epoch=epoch, timestamp=timestamp))
        offset += len(chunk)
    parts.append(encode_batch([control("SnapshotFooterRecord", version=0)], base_offset=offset, epoch=epoch,
                              timestamp=timestamp))
    return b"".join(parts)


def snapshot_ids(directory: str) -> list[SnapshotId]:
    """The snapshots in a metadata log directory, oldest first."""
    return sorted(i for i in (SnapshotId.parse(n) for n in os.listdir(directory)) if i is not None)


def write_snapshot(directory: str, image: MetadataImage, snapshot_id: SnapshotId | None = None, *,
                   kraft_version: int = 0, voters: list[dict[str, Any]] | None = None) -> str:
    """Write ``image`` as a snapshot in ``directory`` (default id: the image's highest offset + 1 and epoch);
    returns the path. Goes through ``<id>.checkpoint.part`` then an atomic rename."""
    sid = snapshot_id or SnapshotId(image.highest_offset + 1, max(image.epoch, 0))
    data = snapshot_bytes(image_records(image), sid, kraft_version=kraft_version, voters=voters,
                          last_contained_log_time_ms=max(image.last_contained_log_time_ms, 0))
    path = os.path.join(directory, sid.filename)
    partial = os.path.join(directory, sid.filename[:-len(SNAPSHOT_SUFFIX)] + PARTIAL_SNAPSHOT_SUFFIX)
    _write_atomically(path, data, partial)
    return path


@dataclass(frozen=True)
class Snapshot:
    id: SnapshotId | None
    last_contained_log_time_ms: int
    batches: list[MetadataBatch]  # data batches only (header and footer batches stripped)
    control_records: list[Any]  # the header batch's records (SnapshotHeader, KRaftVersion, Voters)


def read_snapshot(path: str) -> Snapshot:
    """Read and validate a ``.checkpoint`` file: a SnapshotHeader first, a SnapshotFooter last."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        batches = decode_batches(data)
    except MetadataRecordError as e:
        raise MetadataRecordError(f"snapshot {path}: {e}") from e
    if not batches or not batches[0].is_control or batches[0].records[0].type != ControlRecordType.SNAPSHOT_HEADER:
        raise MetadataRecordError(f"snapshot {path} does not start with a SnapshotHeader control record")
    last = batches[-1]
    if len(batches) < 2 or not last.is_control or last.records[-1].type != ControlRecordType.SNAPSHOT_FOOTER:
        raise MetadataRecordError(f"snapshot {path} does not end with a SnapshotFooter control record (incomplete?)")
    header = batches[0].records[0]
    return Snapshot(SnapshotId.parse(os.path.basename(path)), header.data.last_contained_log_timestamp,
                    [b for b in batches[1:-1] if not b.is_control], list(batches[0].records))


# ---------------------------------------------------------------------------------------------------------------
# quorum-state.


@dataclass(frozen=True)
class QuorumState:
    """Kafka's ``QuorumStateData`` (data_version 1 since KIP-853; 0 also names the cluster and voters)."""

    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    voted_directory_id: uuid.UUID = uuid.UUID(int=0)
    data_version: int = 1
    cluster_id: str = ""  # version 0 only
    applied_offset: int = 0  # version 0 only
    current_voters: tuple[int, ...] | None = None  # version 0 only


def kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def random_kafka_uuid() -> uuid.UUID:
    """A random id as Kafka's ``Uuid.randomUuid`` makes one: never zero, never the metadata topic's, and never
    one whose string starts with ``-`` (a command line would read ``-t -xyz...`` as an option)."""
    while True:
        u = uuid.uuid4()
        if u.int > 1 and not kafka_uuid(u).startswith("-"):  # 0 and 1: Kafka's ZERO_UUID and METADATA_TOPIC_ID
            return u


def parse_kafka_uuid(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def quorum_state_json(state: QuorumState) -> str:
    """The one-line JSON Kafka writes (same key order)."""
    if state.data_version == 1:
        d: dict[str, Any] = {"leaderId": state.leader_id, "leaderEpoch": state.leader_epoch,
                             "votedId": state.voted_id, "votedDirectoryId": kafka_uuid(state.voted_directory_id)}
    elif state.data_version == 0:
        d = {"clusterId": state.cluster_id, "leaderId": state.leader_id, "leaderEpoch": state.leader_epoch,
             "votedId": state.voted_id, "appliedOffset": state.applied_offset,
             "currentVoters": None if state.current_voters is None else [{"voterId": v} for v in state.current_voters]}
    else:
        raise ValueError(f"quorum-state data_version {state.data_version} is not 0 or 1")
    d["data_version"] = state.data_version
    return json.dumps(d, separators=(",", ":"))


def write_quorum_state(path: str, state: QuorumState) -> None:
    """Write ``quorum-state`` atomically (``.tmp``, fsync, rename), as FileQuorumStateStore does."""
    _write_atomically(path, quorum_state_json(state).encode(), path + ".tmp")


def read_quorum_state(path: str) -> QuorumState | None:
    """The election state in ``path``, or None if there is no file. Bad content raises ValueError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline()
    except FileNotFoundError:
        return None
    try:
        d = json.loads(line)
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        version = d.get("data_version")
        if version not in (0, 1):
            raise ValueError(f"data_version {version!r} is not within the supported versions 0-1")
        voters = d.get("currentVoters")
        return QuorumState(
            int(d.get("leaderId", -1)), int(d.get("leaderEpoch", -1)), int(d.get("votedId", -1)),
            parse_kafka_uuid(d["votedDirectoryId"]) if version == 1 else uuid.UUID(int=0), version,
            str(d.get("clusterId", "")) if version == 0 else "", int(d.get("appliedOffset", 0)) if version == 0 else 0,
            tuple(int(v["voterId"]) for v in voters) if version == 0 and voters is not None else None)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: unreadable quorum state ({e})") from e


# ---------------------------------------------------------------------------------------------------------------
# The log.


def metadata_log_config(segment_bytes: int = 1 << 30, segment_ms: int = 7 * 24 * 3600 * 1000) -> LogConfig:
    """Kafka's ``metadata.log.segment.bytes``/``.ms`` defaults; no time or size retention (snapshots bound it)."""
    return LogConfig(segment_bytes=segment_bytes, segment_ms=segment_ms, retention_ms=-1, retention_bytes=-1,
                     max_message_bytes=8 << 20)


class MetadataLog:
    """``__cluster_metadata-0`` under ``log_dir``: append batches, read them back, snapshots, quorum-state."""

    def __init__(self, log_dir: str, config: LogConfig | None = None, *, manager: LogManager | None = None) -> None:
        """Open (or create) ``<log_dir>/__cluster_metadata-0``. A broker passes the ``manager`` that already
        holds ``log_dir`` (a second LogManager over the same directory would open every partition twice); the
        log then keeps the metadata log config (no retention), not the manager's topic defaults."""
        config = config or metadata_log_config()
        self._owns_manager = manager is None
        if manager is None:
            os.makedirs(log_dir, exist_ok=True)
            manager = LogManager([log_dir], config)
        self._manager = manager
        log = self._manager.get(METADATA_TOPIC, METADATA_PARTITION)
        self.log = log if log is not None else self._manager.create(METADATA_TOPIC, METADATA_PARTITION, config)
        self.log.update_config(config)

    @property
    def dir(self) -> str:
        return str(self.log.dir)

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    def append(self, records: Sequence[Any], epoch: int, *, timestamp: int | None = None) -> tuple[int, int]:
        """Append records as one batch at the log end with partitionLeaderEpoch ``epoch``; (first, last) offset."""
        r = self.log.append(encode_batch(records, epoch=epoch, timestamp=timestamp), leader_epoch=epoch)
        return int(r.base_offset), int(r.last_offset)

    def append_batch(self, batch: bytes, epoch: int) -> tuple[int, int]:
        """Append one encoded batch (a Raft entry): offsets are assigned here, the epoch stamped."""
        r = self.log.append(batch, leader_epoch=epoch)
        return int(r.base_offset), int(r.last_offset)

    def read(self, start_offset: int | None = None, end_offset: int | None = None) -> Iterator[MetadataBatch]:
        """Batches from ``start_offset`` (default: the log start) up to ``end_offset`` (default: log end)."""
        offset = self.log_start_offset if start_offset is None else start_offset
        end = self.log_end_offset if end_offset is None else end_offset
        while offset < end:
            data = self.log.read(offset, READ_CHUNK_BYTES, max_offset=end).to_bytes()
            if not data:
                return
            batches = decode_batches(data, allow_partial_trailing=True)
            if not batches:
                raise MetadataRecordError(f"no whole batch at offset {offset} within {READ_CHUNK_BYTES} bytes",
                                          offset=offset)
            for b in batches:
                if b.base_offset >= end:
                    return
                if b.next_offset <= offset:
                    continue
                yield b
            offset = batches[-1].next_offset

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def flush(self) -> None:
        self.log.flush()

    # snapshots

    def snapshots(self) -> list[SnapshotId]:
        return snapshot_ids(self.dir)

    def latest_snapshot(self) -> SnapshotId | None:
        ids = self.snapshots()
        return ids[-1] if ids else None

    def write_snapshot(self, image: MetadataImage, **kwargs: Any) -> SnapshotId:
        path = write_snapshot(self.dir, image, **kwargs)
        sid = SnapshotId.parse(os.path.basename(path))
        assert sid is not None
        return sid

    def read_snapshot(self, snapshot_id: SnapshotId) -> Snapshot:
        return read_snapshot(os.path.join(self.dir, snapshot_id.filename))

    def load(self, cluster_id: str | None = None, end_offset: int | None = None) -> MetadataLoader:
        """An image of the latest snapshot, then the log after it up to ``end_offset`` (default: the log end;
        a Raft node passes its commit offset so uncommitted entries stay out of the image)."""
        loader = MetadataLoader(MetadataImage(cluster_id=cluster_id))
        start = None
        sid = self.latest_snapshot()
        if sid is not None:
            snap = self.read_snapshot(sid)
            loader.load_snapshot(snap.batches, end_offset=sid.end_offset, epoch=sid.epoch,
                                 last_contained_log_time_ms=snap.last_contained_log_time_ms)
            start = sid.end_offset
        end = self.log_end_offset if end_offset is None else end_offset
        if start is None or start < end:
            loader.apply(self.read(start, end))
        return loader

    # quorum-state

    @property
    def quorum_state_path(self) -> str:
        return os.path.join(self.dir, QUORUM_STATE_FILE)

    def read_quorum_state(self) -> QuorumState | None:
        return read_quorum_state(self.quorum_state_path)

    def write_quorum_state(self, state: QuorumState) -> None:
        write_quorum_state(self.quorum_state_path, state)

    def close(self) -> None:
        if self._owns_manager:
            self._manager.close()

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
