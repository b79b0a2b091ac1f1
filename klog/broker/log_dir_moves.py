"""Moving local replicas between this broker's log dirs while they are served (AlterReplicaLogDirs, API 34; Kafka's
``ReplicaManager.alterReplicaLogDirs`` and ``ReplicaAlterLogDirsThread``).

A move makes a future log ``<topic>-<partition>.<id>-future`` in the target dir and copies the partition's files into
it in passes on a worker thread (the native ``LogManager.copy_to_future``: the log's lock is held only to list the
files, so appends and reads go on). Once a pass has little left to copy (``MOVE_CATCH_UP_BYTES``), or after
``MOVE_MAX_PASSES``, the swap runs on the event loop: under the log's lock (appends wait) the last bytes are copied,
the future directory becomes ``<topic>-<partition>`` and its segments are swapped into the same log object, so
every holder of the log (leader and follower state, native routes, fetch sessions) keeps working; the old
directory is deleted after ``file.delete.delay.ms``. The new dir is then reported to the controller
(AssignReplicasToDirs, KIP-858) by the ``on_moved`` callback.

A dir named for a partition this broker does not hold yet is remembered (the manager's ``preferred_dirs``, Kafka's
``LogManager.preferredLogDirs``): its log is made there when the partition arrives.

A truncation or a cleaner swap during the copy rewrites bytes already copied: the swap notices (the log's generation
moved) and the copy starts again. A future log found at startup (the broker stopped mid-move) is discarded and its
move started again from the beginning (Kafka resumes the copy; the outcome is the same: the move completes).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from klog.broker import errors

__all__ = ["FUTURE_SUFFIX", "MOVE_CATCH_UP_BYTES", "MOVE_MAX_PASSES", "LogDirMoves", "future_dirs"]

log = logging.getLogger("klog.broker.partitions")

FUTURE_SUFFIX = "-future"
#: A pass that copied at most this much ends the copy: the rest is copied under the log's lock by the swap.
MOVE_CATCH_UP_BYTES = 1 << 20
#: Passes before the swap copies what is left anyway (a partition appended to faster than a pass copies).
MOVE_MAX_PASSES = 20
#: Copy passes per second of a throttled move (each copies its share of the rate).
MOVE_PASSES_PER_SECOND = 10
#: A pass budget that copies everything listed.
COPY_ALL = 2**64 - 1
#: Kafka's unset long rate (Long.MAX_VALUE): no throttle.
LONG_MAX = 2**63 - 1
#: Pause before a move whose copy failed (the target dir went offline, the log changed) is tried again.
MOVE_RETRY_S = 1.0

Key = tuple[str, int]


def future_dirs(log_dir: str) -> list[tuple[str, int, str]]:
    """The future logs in ``log_dir``: (topic, partition, path) of each ``<topic>-<partition>.<id>-future``."""
    found = []
    try:
        entries = list(os.scandir(log_dir))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(FUTURE_SUFFIX) or not entry.is_dir():
            continue
        name = entry.name[:-len(FUTURE_SUFFIX)].rpartition(".")[0]
        topic, _, number = name.rpartition("-")
        if topic and number.isdigit():
            found.append((topic, int(number), entry.path))
    return sorted(found)


@dataclass
class Move:
    """One replica moving to ``target`` (a log dir) through the future log ``future``."""

    key: Key
    target: str
    future: str
    #: the log end offset the last copy pass copied up to (-1: none yet), for DescribeLogDirs' future replica
    copied_end_offset: int = -1
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class LogDirMoves:
    """The moves of ``partitions``' logs (the klog.broker.partitions.PartitionManager that owns this, which imports
    this module); ``on_moved(topic, partition)`` is called on the event loop after each swap."""

    def __init__(self, partitions: Any) -> None:
        self.partitions = partitions
        self.moves: dict[Key, Move] = {}
        self.on_moved: Callable[[str, int], None] | None = None
        #: replica.alter.log.dirs.io.max.bytes.per.second now (a quorum member reads its dynamic value from the image)
        self.rate: Callable[[], int] = lambda: int(partitions.config["replica.alter.log.dirs.io.max.bytes.per.second"])
        self._closed = False

    def _log_dir(self, path: str) -> str | None:
        """The configured log dir ``path`` names (Kafka compares absolute paths), or None."""
        wanted = os.path.abspath(path)
        for directory in self.partitions.log_dirs:
            if os.path.abspath(directory) == wanted:
                return directory
        return None

    def alter(self, topic: str, partition: int, path: str, *, known: bool = True) -> int:
        """Move the local replica of ``topic``-``partition`` to the log dir ``path``; the error code of Kafka's answer
        (``ReplicaManager.alterReplicaLogDirs``): LOG_DIR_NOT_FOUND (not a configured log dir), KAFKA_STORAGE_ERROR
        (it, the replica's dir, or any dir is offline), REPLICA_NOT_AVAILABLE (no local replica; ``known``: the
        cluster metadata has the partition) or UNKNOWN_TOPIC_OR_PARTITION (it has not), the dir remembered either
        way and the replica's log made there when it arrives, else NONE. Moving to the dir the replica is in stops a
        move under way (as Kafka's)."""
        target = self._log_dir(path)
        if target is None:
            return errors.LOG_DIR_NOT_FOUND
        if target in self.partitions.offline_dirs:
            return errors.KAFKA_STORAGE_ERROR
        key = (topic, partition)
        log_ = self.partitions.get(topic, partition)
        held = log_ is not None and topic in self.partitions.topics
        if held and self.partitions.log_dir_offline(log_):
            return errors.KAFKA_STORAGE_ERROR
        current = self.partitions.log_dir_of(log_) if held else None
        moving = self.moves.get(key)
        if moving is not None and moving.target != target:
            self.cancel(key)
            moving = None
        # Kafka's maybeUpdatePreferredLogDir: remembered unless the log or its future log is in that dir already;
        # the log made later (or the future log of the move started below) goes there
        if current != target and moving is None:
            self.partitions.preferred_dirs[key] = target
        if not held:
            return errors.REPLICA_NOT_AVAILABLE if known else errors.UNKNOWN_TOPIC_OR_PARTITION
        if moving is not None or current == target:
            return errors.NONE
        if self.partitions.offline_dirs:
            # Kafka makes no future log while a dir is offline: it could end up with one in two dirs
            return errors.KAFKA_STORAGE_ERROR
        self.start(key, target)
        return errors.NONE

    def start(self, key: Key, target: str) -> Move:
        self.partitions.preferred_dirs.pop(key, None)   # satisfied by the future log (Kafka's getOrCreateLog)
        future = os.path.join(target, f"{key[0]}-{key[1]}.{uuid.uuid4().hex}{FUTURE_SUFFIX}")
        move = self.moves[key] = Move(key, target, future)
        loop = self.partitions.loop or asyncio.get_running_loop()
        move.task = loop.create_task(self._run(move), name=f"move-{key[0]}-{key[1]}")
        log.info("moving the replica of %s-%d to log dir %s (future log %s)", key[0], key[1], target, future)
        return move

    def cancel(self, key: Key) -> None:
        move = self.moves.pop(key, None)
        if move is None:
            return
        if move.task is not None:
            move.task.cancel()
        shutil.rmtree(move.future, ignore_errors=True)
        log.info("stopped moving the replica of %s-%d to %s", key[0], key[1], move.target)

    def future_size(self, key: Key) -> int:
        """Bytes in the future log of a move (DescribeLogDirs' partition_size of the future replica)."""
        move = self.moves.get(key)
        if move is None:
            return 0
        total = 0
        try:
            for entry in os.scandir(move.future):
                total += entry.stat().st_size
        except OSError:
            pass
        return total

    def resume(self) -> None:
        """Restart the moves a stop interrupted: each future log found is removed and its move started again (the
        copy starts over). A future log of a partition this broker no longer holds is just removed."""
        for directory in self.partitions.log_dirs:
            if directory in self.partitions.offline_dirs:
                continue
            for topic, partition, path in future_dirs(directory):
                shutil.rmtree(path, ignore_errors=True)
                if self.partitions.get(topic, partition) is not None and (topic, partition) not in self.moves:
                    log.info("resuming the move of %s-%d to log dir %s interrupted by the last stop", topic,
                             partition, directory)
                    self.start((topic, partition), directory)

    def _pass_budget(self, rate: int) -> int:
        """Bytes one copy pass may copy: a tenth of a second at ``rate`` (unthrottled: everything)."""
        return COPY_ALL if rate >= LONG_MAX else max(1, rate // MOVE_PASSES_PER_SECOND)

    async def _run(self, move: Move) -> None:
        topic, partition = move.key
        manager: Any = self.partitions.log_manager
        while not self._closed and self.moves.get(move.key) is move:
            source = self.partitions.get(topic, partition)   # the log copied (a deletion or a swap replaces it)
            try:
                generation = None
                complete_passes = 0
                while True:
                    rate = self.rate()
                    started = time.monotonic()
                    copied, gen, end, complete = await asyncio.to_thread(
                        manager.copy_to_future, topic, partition, move.future, self._pass_budget(rate))
                    if generation is not None and gen != generation:
                        raise _Restart("the log was truncated or cleaned during the copy")
                    generation = gen
                    if complete:
                        move.copied_end_offset = end
                        complete_passes += 1
                        if copied <= MOVE_CATCH_UP_BYTES or complete_passes >= MOVE_MAX_PASSES:
                            break
                    if self.moves.get(move.key) is not move:
                        return
                    if rate < LONG_MAX:   # replica.alter.log.dirs.io.max.bytes.per.second
                        await asyncio.sleep(max(0.0, copied / rate - (time.monotonic() - started)))
                if self.moves.get(move.key) is not move:
                    return
                assert generation is not None
                # on the event loop: no Python code touches the log meanwhile; the native threads wait for its lock
                swap_started = time.monotonic()
                if not manager.swap_in_future(topic, partition, move.future, generation):
                    raise _Restart("the log was truncated or cleaned during the copy")
                swap_ms = (time.monotonic() - swap_started) * 1000
            except (_Restart, OSError, ValueError) as exc:
                if self.moves.get(move.key) is not move:
                    return
                log.warning("moving %s-%d to %s: %s; copying again", topic, partition, move.target, exc)
                shutil.rmtree(move.future, ignore_errors=True)
                move.copied_end_offset = -1
                if isinstance(exc, OSError):
                    self._note_copy_failure(move, exc, source)
                if move.target in self.partitions.offline_dirs or self.partitions.get(topic, partition) is None:
                    self.moves.pop(move.key, None)
                    return
                await asyncio.sleep(MOVE_RETRY_S)
                continue
            del self.moves[move.key]
            self.partitions.forget_native_routes()
            # how long the partition's appends waited: the last bytes copied and the copy swapped in under its lock
            log.info("moved the replica of %s-%d to log dir %s (the swap held its appends %.1f ms)", topic, partition,
                     move.target, swap_ms)
            if self.on_moved is not None:
                self.on_moved(topic, partition)
            return

    def _note_copy_failure(self, move: Move, exc: OSError, source: Any) -> None:
        """A copy pass or the swap of ``move`` failed with ``exc``: a write of its future log (the error names a
        file in it) takes the target dir offline whatever the error, as Kafka hands any IOException of the future
        log to the LogDirFailureChannel, unless the partition's log is no longer ``source``, the log copied (a
        deletion closed it under the copy: no failure of the dir), as
        :meth:`klog.broker.partitions.PartitionManager.note_log_write_failure`; any other error only when it
        says the disk is full or failing."""
        if source is not None and move.future in str(exc):
            self.partitions.note_log_write_failure(*move.key, exc, log_=source, log_dir=move.target)
        else:
            self.partitions.note_write_failure(exc, move.target)

    def close(self) -> None:
        """Stop every move (a stop: the future logs stay, the next start resumes them)."""
        self._closed = True
        for move in self.moves.values():
            if move.task is not None:
                move.task.cancel()


class _Restart(Exception):
    """The copy must start over."""
