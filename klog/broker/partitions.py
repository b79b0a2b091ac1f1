"""The partition manager: topics, their configs and partition logs, high watermarks, fetch wake-ups.

Layering: segment -> partition log (native ``klog._native.PartitionLog``) -> this manager -> request handlers.
Handlers never see file offsets: they ask this manager to append and read, and get offsets, watermarks and
file slices back. Single node: this broker leads every partition, the ISR is {this broker}, so the high
watermark equals the log end offset after every append.

Topic metadata (id, partition count, config overrides, internal flag) persists in ``klog-topics.json`` at
the root of the first log directory, written atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from klog.broker.config import TOPIC_KEYS, BrokerConfig, ConfigError, validate_topic_configs
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


# Kafka error codes used here (klog.protocol.errors has the full table).
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
TOPIC_DELETION_DISABLED = 73


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
        self.log_manager = _native.LogManager(self.log_dirs, self._log_config(self._effective({})),
                                              max_open_segment_files=config["klog.log.max.open.segment.files"],
                                              excluded_topics=[METADATA_TOPIC])
        self._check_descriptor_budget(config)
        self._load_topics()

    def _check_descriptor_budget(self, config: BrokerConfig) -> None:
        """Warn when an explicit segment-file bound plus the connection limit exceeds the open-files limit:
        the broker would then fail opens (segments, connections) with EMFILE instead of closing idle files."""
        bound = config["klog.log.max.open.segment.files"]
        if bound is None:  # the default is capped at half the open-files limit by the storage itself
            return
        try:
            import resource
        except ImportError:  # not on this platform
            return
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY and bound + config["max.connections"] > soft:
            log.warning("klog.log.max.open.segment.files=%d plus max.connections=%d exceeds the open-files "
                        "limit %d (ulimit -n): opening files or accepting connections may fail with EMFILE",
                        bound, config["max.connections"], soft)

    # ---- topic store --------------------------------------------------------------------------------

    @property
    def _topics_path(self) -> str:
        return os.path.join(self.log_dirs[0], TOPICS_FILE)

    def _load_topics(self) -> None:
        stored: dict[str, Any] = {}
        try:
            with open(self._topics_path, encoding="utf-8") as handle:
                stored = json.load(handle).get("topics", {})
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{self._topics_path}: unreadable topic metadata ({exc}); fix or remove it") from exc
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
            self._save_topics()

    def _topics_snapshot(self) -> tuple[int, dict[str, Any]]:
        self._topics_generation += 1
        payload = {"version": 1, "topics": {name: t.to_json() for name, t in sorted(self.topics.items())}}
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
            if generation <= self._topics_written:
                return
            tmp = self._topics_path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(payload, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self._topics_path)
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
        entry.configs = dict(overrides)
        entry.effective = effective
        entry.derived.clear()
        log_config = self._log_config(effective)
        for partition in range(entry.partitions):
            log_ = self._logs.get((topic, partition))
            if log_ is not None:
                log_.update_config(log_config)
        self._save_topics()

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
        return [self._create_log(topic, partition, log_config) for partition in partitions]

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str | None] | None = None, *,
                     replication_factor: int = 1, validate_only: bool = False, internal: bool = False) -> Topic:
        topic = self._new_topic(name, num_partitions, configs, replication_factor=replication_factor,
                                internal=internal)
        if validate_only:
            return topic
        log_config = self._log_config(topic.effective)
        for partition in range(num_partitions):
            self._open(name, partition, log_config)
        self.topics[name] = topic
        self._save_topics()
        self._log_created(topic)
        return topic

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
        log_config = self._log_config(topic.effective)
        loop = asyncio.get_running_loop()
        done = self._creating[name] = loop.create_future()
        try:
            logs = await loop.run_in_executor(None, self._create_logs, name, range(num_partitions), log_config)
            for partition, log_ in enumerate(logs):
                self._logs[(name, partition)] = log_
            self.topics[name] = topic
        finally:
            del self._creating[name]
            done.set_result(None)
        await self._save_topics_async()
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
        del self.topics[name]
        for partition in range(topic.partitions):
            self._logs.pop((name, partition), None)
            self._wake((name, partition))
        self.log_manager.delete_topic(name)
        self._save_topics()
        log.info("deleted topic %s", name)

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
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
        if validate_only:
            return
        log_config = self._log_config(topic.effective)
        for partition in range(topic.partitions, total):
            self._open(name, partition, log_config)
        topic.partitions = total
        self._save_topics()
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
        result = log_.append(records, leader_epoch=LEADER_EPOCH, now_ms=now_ms)
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

    def apply_retention(self) -> int:
        removed = self.log_manager.apply_retention(int(time.time() * 1000))
        return removed

    def flush_due(self) -> int:
        """fsync logs whose flush.ms / flush.messages are due (the storage tracks both); remove deleted
        segments' files once file.delete.delay.ms has passed (this runs every maintenance tick)."""
        now_ms = int(time.time() * 1000)
        self.log_manager.delete_expired_files(now_ms)
        return int(self.log_manager.flush_due(now_ms))

    def checkpoint(self) -> None:
        self.log_manager.checkpoint()

    def flush_all(self) -> None:
        self.log_manager.flush_all()

    def close(self) -> None:
        self.log_manager.close()
        self._logs.clear()
