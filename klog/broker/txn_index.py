"""The aborted-transaction index: one ``<base offset>.txnindex`` file per log segment, as Kafka writes it
(``TransactionIndex``/``AbortedTxn``), so ``kafka-dump-log`` reads it and a restart knows the aborted transactions
of the log without reading it.

Each entry is 34 bytes, big-endian: version (int16, 0), producer id (int64), first offset (int64), last offset
(int64, the ABORT marker's offset) and the last stable offset after the marker (int64). An entry goes into the file
of the segment holding its marker; files whose segment is gone (retention) are removed, entries past a truncation
are cut off.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable

log = logging.getLogger("klog.broker.txnindex")

ENTRY = struct.Struct(">hqqqq")
VERSION = 0
SUFFIX = ".txnindex"


def file_name(segment_base: int) -> str:
    return f"{segment_base:020d}{SUFFIX}"


def segment_of(offset: int, segment_bases: Iterable[int]) -> int:
    """The base offset of the segment holding ``offset`` (the largest base not above it)."""
    below = [b for b in segment_bases if b <= offset]
    return max(below) if below else 0


def append(partition_dir: str, segment_base: int, producer_id: int, first_offset: int, last_offset: int,
           last_stable_offset: int) -> None:
    """Adds one aborted transaction to its segment's index file."""
    with open(os.path.join(partition_dir, file_name(segment_base)), "ab") as handle:
        handle.write(ENTRY.pack(VERSION, producer_id, first_offset, last_offset, last_stable_offset))


def _files(partition_dir: str) -> list[tuple[int, str]]:
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if name.endswith(SUFFIX) and name[:-len(SUFFIX)].isdigit():
            out.append((int(name[:-len(SUFFIX)]), os.path.join(partition_dir, name)))
    return sorted(out)


def _entries(path: str) -> list[tuple[int, int, int, int]]:
    with open(path, "rb") as handle:
        data = handle.read()
    whole = len(data) - len(data) % ENTRY.size   # a torn last entry (a crash mid-write) is dropped
    out = []
    for pos in range(0, whole, ENTRY.size):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != VERSION:
            log.warning("%s: entry at byte %d has version %d; the rest of the file is skipped", path, pos, version)
            break
        out.append((pid, first, last, lso))
    return out


def read(partition_dir: str) -> list[tuple[int, int, int, int]] | None:
    """Every (producer id, first offset, last offset, last stable offset) of the partition's index files, in log
    order; None when the partition has no index file at all."""
    files = _files(partition_dir)
    if not files:
        return None
    entries: list[tuple[int, int, int, int]] = []
    for _, path in files:
        try:
            entries.extend(_entries(path))
        except OSError as exc:
            log.warning("%s: unreadable aborted-transaction index (%s)", path, exc)
    return sorted(entries, key=lambda e: e[2])


def truncate(partition_dir: str, end_offset: int) -> None:
    """Drops the entries whose marker is at or past ``end_offset`` (the log was truncated there)."""
    for base, path in _files(partition_dir):
        entries = _entries(path)
        kept = [e for e in entries if e[2] < end_offset]
        if len(kept) == len(entries):
            continue
        if not kept and base >= end_offset:
            os.remove(path)
            continue
        with open(path, "wb") as handle:
            handle.write(b"".join(ENTRY.pack(VERSION, *e) for e in kept))


def remove(partition_dir: str, markers: set[tuple[int, int]]) -> None:
    """Drops the entries of the aborted transactions ``markers`` names by (producer id, marker offset): the
    cleaner removed their records (Kafka's cleaner leaves them out of the cleaned segment's index)."""
    for _, path in _files(partition_dir):
        entries = _entries(path)
        kept = [e for e in entries if (e[0], e[2]) not in markers]
        if len(kept) != len(entries):
            tmp = path + ".tmp"
            with open(tmp, "wb") as handle:
                handle.write(b"".join(ENTRY.pack(VERSION, *e) for e in kept))
            os.replace(tmp, path)


def remove_orphans(partition_dir: str, segment_bases: Iterable[int], log_start_offset: int = 0) -> int:
    """Removes the index files of segments that no longer exist; how many. Their entries whose marker is still in
    the log (the cleaner replaced the segment rather than retention deleting it) move to the file of the segment
    holding the marker now."""
    bases = sorted(set(segment_bases))
    live = set(bases)
    removed = 0
    for base, path in _files(partition_dir):
        if base in live:
            continue
        try:
            kept = [e for e in _entries(path) if e[2] >= log_start_offset]
        except OSError:
            kept = []
        for pid, first, last, lso in kept:
            append(partition_dir, segment_of(last, bases), pid, first, last, lso)
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed
