"""The partition manager: topics, their configs and partition logs, high watermarks, fetch wake-ups.

Layering: segment -> partition log (native ``klog._native.PartitionLog``) -> this manager -> request handlers.
Handlers never see file offsets: they ask this manager to append and read, and get offsets, watermarks and
file slices back. Single node: this broker leads every partition, the ISR is {this broker}, so the high
watermark equals the log end offset after every append.

Topic metadata (id, partition count, config overrides, internal flag) persists in ``klog-topics.json`` at
the root of the first log directory, written atomically (temp file, fsync, rename).

Creation is all-or-nothing, across restarts too: before the first partition directory of a new topic (or of
partitions added to one) is made, the creation is recorded in the file as in progress; the topic entry (or its
new partition count) replaces that record only once every partition exists. A creation that fails midway (out
of descriptors, disk full) removes what it made; one cut short by a crash is removed at the next start, before
the partition directories are opened. Partition directories the file knows nothing about (data copied from
Kafka, a data dir from before the file existed) are still adopted.

A log dir whose writes fail (ENOSPC, EIO, ...) goes offline (see the native LogManager): appends to its
partitions are refused with KAFKA_STORAGE_ERROR, reads go on, the other log dirs are unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from klog.broker.config import TOPIC_KEYS, BrokerConfig, ConfigError, validate_topic_configs
from klog.broker.descriptors import DESCRIPTORS_PER_PARTITION, DescriptorBudget, open_files_limit
from klog.metadata.storage import METADATA_TOPIC

log = logging.getLogger("klog.broker.partitions")

TOPICS_FILE = "klog-topics.json"
TOPIC_NAME_MAX_LENGTH = 249
_TOPIC_NAME_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
#: the leader epoch of every partition on this single node
LEADER_EPOCH = 0
#: Kafka caps partitions per CreateTopics/CreatePartitions request implicitly by memory; we name a limit.
MAX_PARTITIONS_PER_TOPIC = 10_000


class TopicError(Exception):
    """A topic operation failed with a Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CreationFailed(TopicError):
    """Making a creation's partition files failed (KAFKA_STORAGE_ERROR); ``leftovers``: some could not be
    removed (the next start removes them)."""

    def __init__(self, message: str, *, leftovers: bool) -> None:
        super().__init__(KAFKA_STORAGE_ERROR, message)
        self.leftovers = leftovers


# Kafka error codes used here (klog.protocol.errors has the full table).
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56
TOPIC_DELETION_DISABLED = 73

#: errors that mean a log dir cannot be written any more (Kafka's LogDirFailureChannel takes it offline)
LOG_DIR_FAILURE_ERRNOS = frozenset((errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT))


class LogDirOfflineError(OSError):
    """An append to a partition whose log dir is offline (answered with KAFKA_STORAGE_ERROR)."""


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(INVALID_TOPIC_EXCEPTION, "Topic name is empty")
    if name in (".", ".."):
        raise TopicError(INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        raise TopicError(INVALID_TOPIC_EXCEPTION,
                         f"Topic name is longer than {TOPIC_NAME_MAX_LENGTH} characters")
    if not _TOPIC_NAME_RE.match(name):
        raise TopicError(INVALID_TOPIC_EXCEPTION,
                         f"Topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' "
                         "and '-'")


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)   # overrides, Kafka string form
    internal: bool = False
    #: typed effective values of every topic config (defaults merged), refreshed on change
    effective: dict[str, Any] = field(default_factory=dict)
    #: values request handlers derive from ``effective`` (e.g. produce checks), dropped when it changes
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"id": str(self.topic_id), "partitions": self.partitions, "configs": self.configs,
                "internal": self.internal}


class PartitionManager:
    def __init__(self, config: BrokerConfig, loop: asyncio.AbstractEventLoop | None = None) -> None:
        from klog import _native

        self._native = _native
        self.config = config
        self.loop = loop
        self.log_dirs = config.log_dirs
        for directory in self.log_dirs:
            os.makedirs(directory, exist_ok=True)
        self.topics: dict[str, Topic] = {}
        #: creations in progress, recorded in klog-topics.json before their directories are made: topic ->
        #: (first partition, partition count after the creation)
        self._intents: dict[str, tuple[int, int]] = {}
        #: offline log dirs -> the error that took each offline (kept in step with the native LogManager)
        self.offline_dirs: dict[str, str] = {}
        #: topics whose partition logs are being created in a worker thread (names are reserved meanwhile),
        #: each with a future that is done once the topic is created or has failed
        self._creating: dict[str, asyncio.Future[None]] = {}
        #: klog-topics.json writes: each snapshot gets a generation; an older one never replaces a newer one
        self._topics_generation = 0
        self._topics_written = 0
        self._topics_write_lock = threading.Lock()
        self._logs: dict[tuple[str, int], Any] = {}
        #: fetch requests waiting for data, woken by appends: partition -> futures
        self._waiters: dict[tuple[str, int], list[asyncio.Future[None]]] = {}
        stored = self._read_topics_file()
        self._remove_interrupted_creations(stored)
        self.log_manager = _native.LogManager(self.log_dirs, self._log_config(self._effective({})),
                                              max_open_segment_files=config["klog.log.max.open.segment.files"],
                                              excluded_topics=[METADATA_TOPIC])
        self.descriptors = DescriptorBudget(open_files_limit(), self.log_manager.open_segment_files[0],
                                            config["socket.listen.backlog.size"])
        #: klog.max.partitions.per.broker (explicit, or derived from the descriptor budget)
        self.max_partitions: int = config["klog.max.partitions.per.broker"] or \
            self.descriptors.default_max_partitions(config["max.connections"])
        self._check_descriptor_budget(config)
        self._refresh_offline_dirs()  # dirs that cannot be written at startup (a full disk) are offline already
        self._load_topics(stored)
        if config["log.cleaner.enable"]:
            self.log_manager.start_cleaner(
                threads=config["log.cleaner.threads"],
                dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
                dedupe_buffer_load_factor=config["log.cleaner.io.buffer.load.factor"],
                io_buffer_size=config["log.cleaner.io.buffer.size"],
                backoff_ms=config["log.cleaner.backoff.ms"],
                producer_id_expiration_ms=config["producer.id.expiration.ms"],
                io_max_bytes_per_second=config["log.cleaner.io.max.bytes.per.second"])

    def _check_descriptor_budget(self, config: BrokerConfig) -> None:
        """Log the descriptor budget; warn when explicit limits exceed the open-files limit (the broker would
        then fail opens with EMFILE instead of refusing work or closing idle files)."""
        budget = self.descriptors
        log.info("descriptor budget: %s; partitions up to %d (klog.max.partitions.per.broker), connections up "
                 "to %s with that many partitions", budget.describe(), self.max_partitions,
                 budget.max_connections(self.max_partitions))
        limit = budget.open_files_limit
        bound = config["klog.log.max.open.segment.files"]
        if limit is None:
            return
        if bound is not None and bound + config["max.connections"] > limit:
            log.warning("klog.log.max.open.segment.files=%d plus max.connections=%d exceeds the open-files "
                        "limit %d (ulimit -n): opening files or accepting connections may fail with EMFILE",
                        bound, config["max.connections"], limit)
        if budget.max_connections(self.max_partitions) == 0:
            log.warning("klog.max.partitions.per.broker=%d leaves no descriptors for connections at the "
                        "open-files limit %d (ulimit -n) once that many partitions exist", self.max_partitions, limit)

    @property
    def partitions_total(self) -> int:
        """Partitions this broker holds, plus those being created (descriptors are counted for both)."""
        return len(self._logs) + sum(total - first for first, total in self._intents.values())

    def _check_partition_limit(self, topic: str, adding: int) -> None:
        """Refuse a creation up front when the broker would exceed klog.max.partitions.per.broker."""
        held = self.partitions_total
        if held + adding > self.max_partitions:
            raise TopicError(POLICY_VIOLATION,
                             f"Creating {adding} partition(s) of topic '{topic}' would exceed "
                             f"klog.max.partitions.per.broker={self.max_partitions}: this broker holds {held} "
                             f"(each holds {DESCRIPTORS_PER_PARTITION} open file; the limit follows the "
                             "open-files limit, ulimit -n)")

    # ---- topic store --------------------------------------------------------------------------------

    @property
    def _topics_path(self) -> str:
        return os.path.join(self.log_dirs[0], TOPICS_FILE)

    def _read_topics_file(self) -> dict[str, Any]:
        try:
            with open(self._topics_path, encoding="utf-8") as handle:
                return dict(json.load(handle))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{self._topics_path}: unreadable topic metadata ({exc}); fix or remove it") from exc

    def _remove_interrupted_creations(self, stored_file: dict[str, Any]) -> None:
        """Remove the partition directories of creations a crash cut short (recorded in progress, never
        completed), before the storage opens (and would adopt) them."""
        for name, entry in stored_file.get("creating", {}).items():
            first, total = int(entry["first"]), int(entry["total"])
            removed = self._remove_partition_dirs(name, first, total)
            what = "topic" if first == 0 else f"partitions {first}-{total - 1} of topic"
            log.warning("removed %d partition director%s of %s %s whose creation was interrupted", removed,
                        "y" if removed == 1 else "ies", what, name)
        if stored_file.get("creating"):
            stored_file["creating"] = {}
            try:
                self._write_topics(0, {**stored_file, "version": 1})
            except OSError as exc:  # the directories are gone: the next start finds nothing left to remove
                log.error("cannot write %s: %s", self._topics_path, exc)

    def _remove_partition_dirs(self, topic: str, first: int, total: int) -> int:
        """Remove the directories of partitions [first, total) of ``topic`` from every log dir, also those
        already renamed for deletion (``<topic>-<p>.<id>-delete``); returns how many there were."""
        removed = 0
        for directory in self.log_dirs:
            for entry in os.scandir(directory):
                name = entry.name
                if name.endswith("-delete"):
                    name = name[:-len("-delete")].rpartition(".")[0]
                owner, _, number = name.rpartition("-")
                if owner == topic and number.isdigit() and first <= int(number) < total and entry.is_dir():
                    shutil.rmtree(entry.path)
                    removed += 1
        return removed

    def _load_topics(self, stored_file: dict[str, Any]) -> None:
        stored: dict[str, Any] = stored_file.get("topics", {})
        on_disk: dict[str, int] = {}
        for topic_name, partition in self.log_manager.partitions():
            on_disk[topic_name] = max(on_disk.get(topic_name, 0), partition + 1)
        for name, entry in stored.items():
            configs = {str(k): str(v) for k, v in entry.get("configs", {}).items()}
            try:
                effective = self._effective(configs)
            except ConfigError as exc:
                raise RuntimeError(f"{self._topics_path}: topic {name!r}: {exc}") from exc
            self.topics[name] = Topic(name, uuid.UUID(entry["id"]), int(entry["partitions"]), configs,
                                      bool(entry.get("internal", False)), effective)
        adopted = False
        for name, count in on_disk.items():
            # Partition directories without metadata (data copied from Kafka, or a lost metadata file):
            # adopt them with broker defaults rather than ignore data.
            known = self.topics.get(name)
            if known is None:
                self.topics[name] = Topic(name, uuid.uuid4(), count, {}, name.startswith("__"),
                                          self._effective({}))
                adopted = True
            elif count > known.partitions:
                known.partitions = count
                adopted = True
        for entry_ in self.topics.values():
            log_config = self._log_config(entry_.effective)
            for partition in range(entry_.partitions):
                self._open(entry_.name, partition, log_config)
        if adopted or not os.path.exists(self._topics_path):
            self._save_topics_quietly()  # on a full disk the dir goes offline; the broker still starts

    def _topics_snapshot(self) -> tuple[int, dict[str, Any]]:
        self._topics_generation += 1
        payload: dict[str, Any] = {"version": 1,
                                   "topics": {name: t.to_json() for name, t in sorted(self.topics.items())}}
        if self._intents:
            payload["creating"] = {name: {"first": first, "total": total}
                                   for name, (first, total) in sorted(self._intents.items())}
        return self._topics_generation, payload

    def _save_topics(self) -> None:
        self._write_topics(*self._topics_snapshot())

    async def _save_topics_async(self) -> None:
        """``_save_topics`` with the writing and fsyncs in a worker thread (the snapshot is taken here)."""
        generation, payload = self._topics_snapshot()
        await asyncio.get_running_loop().run_in_executor(None, self._write_topics, generation, payload)

    def _write_topics(self, generation: int, payload: dict[str, Any]) -> None:
        """Write one snapshot atomically (temp file, fsync, rename, fsync of the log dir). Runs on the event loop
        or in a worker thread; serialized, and a snapshot older than the last one written is dropped."""
        with self._topics_write_lock:
            if generation <= self._topics_written and generation:
                return
            tmp = self._topics_path + ".tmp"
            try:
                with open(tmp, "w", encoding="utf-8") as handle:
                    json.dump(payload, handle, indent=1, sort_keys=True)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self._topics_path)
            except OSError:
                with contextlib.suppress(OSError):  # give a full disk its blocks back
                    os.unlink(tmp)
                raise
            dir_fd = os.open(self.log_dirs[0], os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._topics_written = generation

    # ---- configs ------------------------------------------------------------------------------------

    def _effective(self, overrides: dict[str, str]) -> dict[str, Any]:
        parsed = validate_topic_configs(overrides)
        return {key: parsed[key] if key in parsed else self.config.topic_default(key) for key in TOPIC_KEYS}

    def _log_config(self, effective: dict[str, Any]) -> Any:
        flush_messages = effective["flush.messages"]
        flush_ms = effective["flush.ms"]
        return self._native.LogConfig(
            segment_bytes=effective["segment.bytes"],
            segment_ms=effective["segment.ms"],
            segment_index_bytes=effective["segment.index.bytes"],
            index_interval_bytes=effective["index.interval.bytes"],
            retention_ms=effective["retention.ms"],
            retention_bytes=effective["retention.bytes"],
            flush_messages=None if flush_messages >= 2**63 - 1 else flush_messages,
            flush_ms=None if flush_ms >= 2**63 - 1 else flush_ms,
            message_timestamp_type=effective["message.timestamp.type"],
            file_delete_delay_ms=effective["file.delete.delay.ms"],
            preallocate=effective["preallocate"],
            max_message_bytes=effective["max.message.bytes"],
            cleanup_policy=",".join(effective["cleanup.policy"]),
            delete_retention_ms=effective["delete.retention.ms"],
            min_cleanable_dirty_ratio=effective["min.cleanable.dirty.ratio"],
            min_compaction_lag_ms=effective["min.compaction.lag.ms"],
            max_compaction_lag_ms=effective["max.compaction.lag.ms"],
        )

    def topic_config(self, topic: str) -> dict[str, Any]:
        return self.topics[topic].effective

    def alter_topic_configs(self, topic: str, overrides: dict[str, str], *, validate_only: bool) -> None:
        """Replace (AlterConfigs) a topic's overrides. Raises TopicError/ConfigError."""
        entry = self.topics.get(topic)
        if entry is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic!r} does not exist")
        effective = self._effective(overrides)
        if validate_only:
            return
        self._check_metadata_dir_online()
        previous = entry.configs, entry.effective
        self._apply_topic_configs(entry, dict(overrides), effective)
        try:
            self._save_topics_or_raise()
        except TopicError:  # not stored: not applied either
            self._apply_topic_configs(entry, *previous)
            raise

    def _apply_topic_configs(self, entry: Topic, overrides: dict[str, str], effective: dict[str, Any]) -> None:
        entry.configs = overrides
        entry.effective = effective
        entry.derived.clear()
        log_config = self._log_config(effective)
        for partition in range(entry.partitions):
            log_ = self._logs.get((entry.name, partition))
            if log_ is not None:
                log_.update_config(log_config)

    # ---- topics -------------------------------------------------------------------------------------

    def _open(self, topic: str, partition: int, log_config: Any) -> Any:
        log_ = self._create_log(topic, partition, log_config)
        self._logs[(topic, partition)] = log_
        return log_

    def _create_log(self, topic: str, partition: int, log_config: Any) -> Any:
        """The file-system part of opening a partition (directory, first segment). Thread-safe: the native
        LogManager locks, and this touches no Python state of the manager."""
        log_ = self.log_manager.create(topic, partition, log_config)
        log_.update_config(log_config)
        # This broker leads at epoch 0 from the start: record it now (the epoch checkpoint is written here, in
        # the creating thread) so the first append to the partition writes no checkpoint on the event loop.
        log_.assign_epoch_start(LEADER_EPOCH)
        # Single node: everything appended is replicated to the whole ISR (this broker).
        log_.high_watermark = log_.log_end_offset
        return log_

    def _create_logs(self, topic: str, partitions: range, log_config: Any) -> list[Any]:
        """Make the partitions' directories and files, all or none: on a failure (out of descriptors, disk
        full) what was made is removed and CreationFailed(KAFKA_STORAGE_ERROR) raised. Thread-safe."""
        logs = []
        try:
            for partition in partitions:
                logs.append(self._create_log(topic, partition, log_config))
            return logs
        except OSError as exc:
            failed_at = partitions.start + len(logs)
            leftovers = not self._remove_partitions(topic, partitions)
            undone = "the rest is removed at the next start" if leftovers else "nothing was kept"
            log.error("creating partition %d of topic %s failed: %s; %s", failed_at, topic, exc, undone)
            self.note_write_failure(exc, None)
            raise CreationFailed(f"Creating partition {failed_at} of topic '{topic}' failed: "
                                 f"{exc.strerror or exc}; {undone}", leftovers=leftovers) from None

    def _remove_partitions(self, topic: str, partitions: range) -> bool:
        """Close and remove the files of ``partitions`` of ``topic`` (a creation being undone); False if some
        could not be removed (their creation record then stays, and the next start removes them)."""
        try:
            self.log_manager.delete_topic(topic, first_partition=partitions.start)
            self._remove_partition_dirs(topic, partitions.start, partitions.stop)
            return True
        except OSError as exc:
            log.error("cannot remove the partitions %d-%d of topic %s: %s", partitions.start, partitions.stop - 1,
                      topic, exc)
            return False

    # A creation (a new topic, or partitions added to one) is all or nothing, across restarts too:
    #   _begin_creation    records it as in progress (in memory; the caller writes klog-topics.json)
    #   _create_logs       makes the files in a worker thread, all or none
    #   _creation_failed   drops the record (if nothing is left) after a failure there
    #   _install_creation  makes the partitions visible and drops the record; the caller saves the file, and
    #   _undo_install      takes them back if that save fails.

    def _begin_creation(self, name: str, first: int, total: int) -> None:
        self._check_metadata_dir_online()
        self._intents[name] = (first, total)

    def _creation_failed(self, name: str, exc: TopicError) -> None:
        if not (isinstance(exc, CreationFailed) and exc.leftovers):
            self._intents.pop(name, None)
        self._save_topics_quietly()

    def _install_creation(self, topic: Topic, first: int, logs: list[Any]) -> None:
        for partition, log_ in enumerate(logs, first):
            self._logs[(topic.name, partition)] = log_
        topic.partitions = first + len(logs)
        self.topics[topic.name] = topic
        del self._intents[topic.name]

    def _undo_install(self, topic: Topic, first: int) -> None:
        """The file recording a creation as complete could not be written: take the partitions back (the file
        still records the creation as in progress, so the next start removes whatever is left)."""
        total = topic.partitions
        for partition in range(first, total):
            self._logs.pop((topic.name, partition), None)
            self._wake((topic.name, partition))
        if first == 0:
            self.topics.pop(topic.name, None)
        else:
            topic.partitions = first
        if not self._remove_partitions(topic.name, range(first, total)):
            self._intents[topic.name] = (first, total)

    def _check_metadata_dir_online(self) -> None:
        error = self.offline_dirs.get(self.log_dirs[0])
        if error is not None:
            raise TopicError(KAFKA_STORAGE_ERROR, f"The log dir {self.log_dirs[0]} holding the topic metadata "
                                                  f"({TOPICS_FILE}) is offline: {error}")

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str | None] | None = None, *,
                     replication_factor: int = 1, validate_only: bool = False, internal: bool = False) -> Topic:
        topic = self._new_topic(name, num_partitions, configs, replication_factor=replication_factor,
                                internal=internal)
        if validate_only:
            return topic
        self._begin_creation(name, 0, num_partitions)
        try:
            self._save_topics_or_raise()
            logs = self._create_logs(name, range(num_partitions), self._log_config(topic.effective))
        except TopicError as exc:
            self._creation_failed(name, exc)
            raise
        self._install_creation(topic, 0, logs)
        try:
            self._save_topics_or_raise()
        except TopicError:
            self._undo_install(topic, 0)
            raise
        self._log_created(topic)
        return topic

    def _save_topics_or_raise(self) -> None:
        try:
            self._save_topics()
        except OSError as exc:
            raise self._topics_write_failed(exc) from None

    async def _save_topics_async_or_raise(self) -> None:
        try:
            await self._save_topics_async()
        except OSError as exc:
            raise self._topics_write_failed(exc) from None

    def _topics_write_failed(self, exc: OSError) -> TopicError:
        log.error("cannot write %s: %s", self._topics_path, exc)
        self.note_write_failure(exc, self.log_dirs[0])
        return TopicError(KAFKA_STORAGE_ERROR, f"Cannot write {self._topics_path}: {exc.strerror or exc}")

    def _save_topics_quietly(self) -> None:
        """Save after a creation failed, or at startup; a failure is logged (an in-progress record it would drop
        stays, and the next start cleans up after it). Nothing is written to an offline dir."""
        if self.log_dirs[0] in self.offline_dirs:
            return
        try:
            self._save_topics()
        except OSError as exc:
            self._topics_write_failed(exc)

    async def create_topic_async(self, name: str, num_partitions: int,
                                 configs: dict[str, str | None] | None = None, *, replication_factor: int = 1,
                                 validate_only: bool = False, internal: bool = False) -> Topic:
        """``create_topic`` for request handlers: the directories, segment files and the topic-metadata fsync
        run in a worker thread, so other connections are served meanwhile (a 1,000-partition topic is
        thousands of mkdir/open calls). The name is reserved while the files are made."""
        topic = self._new_topic(name, num_partitions, configs, replication_factor=replication_factor,
                                internal=internal)
        if validate_only:
            return topic
        self._begin_creation(name, 0, num_partitions)
        loop = asyncio.get_running_loop()
        done = self._creating[name] = loop.create_future()
        try:
            await self._save_topics_async_or_raise()
            logs = await loop.run_in_executor(None, self._create_logs, name, range(num_partitions),
                                              self._log_config(topic.effective))
        except TopicError as exc:
            self._creation_failed(name, exc)
            raise
        else:
            self._install_creation(topic, 0, logs)
        finally:
            del self._creating[name]
            done.set_result(None)
        try:
            await self._save_topics_async_or_raise()
        except TopicError:
            self._undo_install(topic, 0)
            raise
        self._log_created(topic)
        return topic

    async def wait_created(self, topic: str) -> None:
        """Wait until a ``create_topic_async`` of ``topic`` in progress has finished (or failed)."""
        done = self._creating.get(topic)
        if done is not None:
            await asyncio.shield(done)

    @staticmethod
    def _log_created(topic: Topic) -> None:
        log.info("created topic %s with %d partition(s)%s", topic.name, topic.partitions,
                 f" and configs {topic.configs}" if topic.configs else "")

    def _new_topic(self, name: str, num_partitions: int, configs: dict[str, str | None] | None, *,
                   replication_factor: int, internal: bool) -> Topic:
        """Validate a topic to be created; raises TopicError with Kafka's code and message."""
        validate_topic_name(name)
        if name in self.topics or name in self._creating:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise TopicError(INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if num_partitions > MAX_PARTITIONS_PER_TOPIC:
            raise TopicError(INVALID_PARTITIONS,
                             f"Number of partitions {num_partitions} exceeds klog's limit "
                             f"{MAX_PARTITIONS_PER_TOPIC}.")
        if not internal:  # the broker's own topics are counted, never refused
            self._check_partition_limit(name, num_partitions)
        if replication_factor < 1:
            raise TopicError(INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if replication_factor > 1 and not internal:
            raise TopicError(INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target "
                             "replication factor of {} cannot be reached because only 1 broker(s) are "
                             "registered.".format(replication_factor))
        overrides = {k: v for k, v in (configs or {}).items() if v is not None}
        try:
            effective = self._effective(overrides)
        except ConfigError as exc:
            raise TopicError(INVALID_CONFIG, str(exc)) from None
        colliding = self._colliding_topic(name)
        if colliding is not None:
            raise TopicError(INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {colliding}")
        return Topic(name, uuid.uuid4(), num_partitions, overrides, internal, effective)

    def _colliding_topic(self, name: str) -> str | None:
        # Kafka: '.' and '_' collide in metric names, so topics differing only by them are refused.
        key = name.replace(".", "_")
        for existing in [*self.topics, *self._creating]:
            if existing != name and existing.replace(".", "_") == key:
                return existing
        return None

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise TopicError(TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self._check_metadata_dir_online()
        del self.topics[name]
        for partition in range(topic.partitions):
            self._logs.pop((name, partition), None)
            self._wake((name, partition))
        self.log_manager.delete_topic(name)
        self._save_topics_or_raise()
        log.info("deleted topic %s", name)

    def _validate_new_partitions(self, name: str, total: int) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if total < topic.partitions:
            raise TopicError(INVALID_PARTITIONS,
                             f"Topic currently has {topic.partitions} partitions, which is higher than the "
                             f"requested {total}.")
        if total == topic.partitions:
            raise TopicError(INVALID_PARTITIONS, f"Topic already has {topic.partitions} partitions.")
        if total > MAX_PARTITIONS_PER_TOPIC:
            raise TopicError(INVALID_PARTITIONS, f"{total} partitions exceed klog's limit "
                                                 f"{MAX_PARTITIONS_PER_TOPIC}.")
        if name in self._intents:
            raise TopicError(INVALID_PARTITIONS, f"Partitions of topic '{name}' are being created.")
        if not topic.internal:
            self._check_partition_limit(name, total - topic.partitions)
        return topic

    async def create_partitions_async(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """CreatePartitions: validated up front, the files made in a worker thread, all or nothing."""
        topic = self._validate_new_partitions(name, total)
        if validate_only:
            return
        first = topic.partitions
        self._begin_creation(name, first, total)
        try:
            await self._save_topics_async_or_raise()
            logs = await asyncio.get_running_loop().run_in_executor(None, self._create_logs, name,
                                                                    range(first, total),
                                                                    self._log_config(topic.effective))
            if self.topics.get(name) is not topic:  # deleted meanwhile
                self._remove_partitions(name, range(first, total))
                raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' was deleted meanwhile.")
        except TopicError as exc:
            self._creation_failed(name, exc)
            raise
        self._install_creation(topic, first, logs)
        try:
            await self._save_topics_async_or_raise()
        except TopicError:
            self._undo_install(topic, first)
            raise
        log.info("topic %s now has %d partitions", name, total)

    def is_being_created(self, topic: str) -> bool:
        """True while ``create_topic_async`` makes this topic's files (it is not in ``topics`` yet)."""
        return topic in self._creating

    def partition_count(self, topic: str) -> int | None:
        entry = self.topics.get(topic)
        return None if entry is None else entry.partitions

    def logs(self) -> list[tuple[tuple[str, int], Any]]:
        return list(self._logs.items())

    def get(self, topic: str, partition: int) -> Any:
        return self._logs.get((topic, partition))

    # ---- data ---------------------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Any, *, now_ms: int | None = None) -> Any:
        key = (topic, partition)
        log_ = self._logs.get(key)
        if log_ is None:
            raise KeyError(f"{topic}-{partition}")
        if self.offline_dirs:
            log_dir = os.path.dirname(log_.dir)
            if log_dir in self.offline_dirs:
                raise LogDirOfflineError(errno.EROFS, f"log dir {log_dir} of {topic}-{partition} is offline: "
                                                      f"{self.offline_dirs[log_dir]}")
        try:
            result = log_.append(records, leader_epoch=LEADER_EPOCH, now_ms=now_ms)
        except OSError as exc:
            self.note_write_failure(exc, os.path.dirname(log_.dir))
            raise
        log_.high_watermark = log_.log_end_offset
        if self._waiters:
            self._wake(key)
        return result

    def read(self, log_: Any, offset: int, max_bytes: int, *, min_one_batch: bool) -> Any:
        """Whole batches from ``offset``, only below the high watermark (what every replica has): the
        visibility rule lives here, not in the handlers. Raises OffsetOutOfRange (ValueError)."""
        return log_.read(offset, max_bytes, max_offset=log_.high_watermark, min_one_batch=min_one_batch)

    def _wake(self, key: tuple[str, int]) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    async def wait_for_append(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Wait until any of ``partitions`` gets an append (or is deleted), or ``timeout_s`` passes."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, []).append(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    try:
                        waiters.remove(future)
                    except ValueError:
                        pass
                    if not waiters:
                        del self._waiters[key]

    # ---- maintenance --------------------------------------------------------------------------------

    # ---- log dir failure ------------------------------------------------------------------------------

    def note_write_failure(self, exc: OSError, log_dir: str | None) -> None:
        """Take ``log_dir`` offline if ``exc`` says it cannot be written (disk full, I/O error)."""
        if log_dir is not None and exc.errno in LOG_DIR_FAILURE_ERRNOS:
            self.log_manager.mark_dir_offline(log_dir, str(exc))
        self._refresh_offline_dirs()

    def _refresh_offline_dirs(self) -> None:
        """Learn the dirs the storage took offline (flushes, checkpoints and startup do that on their own)."""
        offline = dict(self.log_manager.offline_dirs)
        if offline != self.offline_dirs:
            self.offline_dirs = offline

    def apply_retention(self) -> int:
        removed = self.log_manager.apply_retention(int(time.time() * 1000))
        return removed

    def flush_due(self) -> int:
        """fsync logs whose flush.ms / flush.messages are due (the storage tracks both); remove deleted
        segments' files once file.delete.delay.ms has passed (this runs every maintenance tick)."""
        now_ms = int(time.time() * 1000)
        self.log_manager.delete_expired_files(now_ms)
        flushed = int(self.log_manager.flush_due(now_ms))
        self._refresh_offline_dirs()
        return flushed

    def checkpoint(self) -> None:
        self.log_manager.checkpoint()

    def flush_all(self) -> None:
        self.log_manager.flush_all()

    def close(self) -> None:
        self.log_manager.close()
        self._logs.clear()
