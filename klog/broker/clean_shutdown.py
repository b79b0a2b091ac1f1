"""The clean-shutdown file's broker epoch (KIP-966): Kafka's ``CleanShutdownFileHandler`` and
``LogManager.readBrokerEpochFromCleanShutdownFiles``.

On a clean stop the native log manager closes every log and leaves ``.kafka_cleanshutdown`` in each log dir it could
write (its presence is what lets the next start skip log recovery); the broker then writes into it, as Kafka does,
``{"version":0,"brokerEpoch":N}``: the epoch of its last registration. The next start reads it before the logs open
(opening removes the file) and registers with ``previous_broker_epoch=N``; the controller counts the restart as clean
when N is the epoch it still holds for the broker, so the broker keeps its ELR memberships. Any doubt reads as
unclean (-1), as in Kafka: a log dir without the file, a file that is not that JSON (an empty one: the process died
between closing the logs and writing the epoch), or log dirs naming different epochs.

The high watermarks go with it: Kafka's ``replication-offset-checkpoint`` (written before the logs close), read back
only from a log dir that closed cleanly, so a replica elected from the ELR after a clean restart serves every record
that was committed before it stopped (after a crash klog starts a replicated partition's HW at its log start).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping

__all__ = ["CLEAN_SHUTDOWN_FILE", "HIGH_WATERMARK_CHECKPOINT", "NO_EPOCH", "read_high_watermarks",
           "read_previous_broker_epoch", "write_broker_epoch", "write_high_watermarks"]

log = logging.getLogger("klog.broker")

#: Kafka's file name (the native log manager's CLEAN_SHUTDOWN_MARKER)
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: previous_broker_epoch of a restart that cannot prove it was clean
NO_EPOCH = -1
_VERSION = 0
#: Kafka's high-watermark checkpoint file, one per log dir
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"


def _read_epoch(log_dir: str) -> int | None:
    try:
        with open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), encoding="utf-8") as f:
            content = json.load(f)
    except (OSError, ValueError):
        return None
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    return epoch if type(epoch) is int else None


def read_previous_broker_epoch(log_dirs: Iterable[str]) -> int:
    """The broker epoch every log dir's clean-shutdown file names, else :data:`NO_EPOCH`."""
    found: set[int] = set()
    for directory in log_dirs:
        epoch = _read_epoch(directory)
        if epoch is None:
            log.info("no broker epoch in %s: this start counts as unclean for the controller (KIP-966)",
                     os.path.join(directory, CLEAN_SHUTDOWN_FILE))
            return NO_EPOCH
        found.add(epoch)
    if len(found) != 1:
        log.info("the log dirs' clean-shutdown files name different broker epochs %s: an unclean start",
                 sorted(found))
        return NO_EPOCH
    return found.pop()


def write_broker_epoch(log_dirs: Iterable[str], epoch: int) -> None:
    """Write ``epoch`` into the clean-shutdown file of each log dir whose logs closed cleanly (those that have the
    file: a dir that went offline has none, so its next start recovers and counts as unclean), synced to disk."""
    payload = json.dumps({"version": _VERSION, "brokerEpoch": epoch}, separators=(",", ":")).encode()
    for directory in log_dirs:
        path = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
        if not os.path.exists(path):
            continue
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:   # the empty file still skips recovery; the restart counts as unclean for ELR
            log.warning("could not write the broker epoch into %s: %s", path, exc)


def write_high_watermarks(log_dirs: Iterable[str], high_watermarks: Mapping[tuple[str, int], int]) -> None:
    """Kafka's checkpoint format (version 0, a count, ``topic partition offset`` lines) in each log dir, for the
    partitions whose directory is there; replaced atomically (a temporary file, fsync, rename)."""
    for directory in log_dirs:
        here = sorted((k, hw) for k, hw in high_watermarks.items()
                      if os.path.isdir(os.path.join(directory, f"{k[0]}-{k[1]}")))
        text = "".join([f"0\n{len(here)}\n", *(f"{t} {p} {hw}\n" for (t, p), hw in here)])
        path = os.path.join(directory, HIGH_WATERMARK_CHECKPOINT)
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(path + ".tmp", path)
        except OSError as exc:   # the restart then starts these high watermarks at the log start
            log.warning("could not write %s: %s", path, exc)


def read_high_watermarks(log_dirs: Iterable[str]) -> dict[tuple[str, int], int]:
    """The high watermarks checkpointed by the last clean stop, from the log dirs that have their clean-shutdown
    file (read before the logs open); an unreadable checkpoint counts as none."""
    out: dict[tuple[str, int], int] = {}
    for directory in log_dirs:
        if not os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE)):
            continue
        path = os.path.join(directory, HIGH_WATERMARK_CHECKPOINT)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            if lines[:1] != ["0"] or len(lines) != 2 + int(lines[1]):
                raise ValueError("not a version 0 checkpoint")
            for line in lines[2:]:
                topic, partition, offset = line.split(" ")
                out[(topic, int(partition))] = int(offset)
        except FileNotFoundError:
            continue
        except (OSError, ValueError, IndexError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
    return out
