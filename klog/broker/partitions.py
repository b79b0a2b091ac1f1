"""The partition manager: partition logs, their topic configs, high watermarks, fetch wake-ups.

Layering: segment -> partition log (native ``klog._native.PartitionLog``) -> this manager -> request handlers.
Handlers never see file offsets: they ask this manager to append and read, and get offsets, watermarks and
file slices back. This is the log layer (Kafka's LogManager): it never decides a high watermark. Appends as a
leader go through the replica manager (``klog.broker.replication.manager.ReplicaManager.append``), which owns every
local partition's high watermark (its leader or follower state, or the log end of a partition with one replica)
and mirrors it into the native log; reads stop there.

Which topics and partitions exist, their ids, leader epochs and config overrides come from the committed
metadata image (``klog.metadata``): the broker's metadata publisher (``klog.broker.cluster_metadata``) calls
:meth:`PartitionManager.apply_topic` / :meth:`remove_topic` / :meth:`set_topic_configs` for each change; this
manager keeps no topic store of its own.

A broker creates and deletes partition logs only when it applies a committed metadata image: the partition files
of a topic (or of partitions added to one) placed on this broker are made by :meth:`PartitionManager.create_logs`
on a worker thread, all or none (a failure midway, out of descriptors or disk full, removes what it made and the
partitions are not served), before the image is published. Directories on disk that no topic of the image owns
(a deleted topic's leftovers, a crash of an older klog between making files and committing) are removed at the
next start (Kafka's stray logs).

A log dir whose writes fail (ENOSPC, EIO, ...) goes offline (see the native LogManager): appends to its
partitions are refused with KAFKA_STORAGE_ERROR, reads go on, the other log dirs are unaffected. A log dir whose
``meta.properties`` could not be read at startup (``failed_log_dirs``), or that cannot be made, listed or loaded, is
offline from the start, never read nor written (Kafka's ``initialOfflineDirs``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from klog.broker import errors
from klog.broker.config import TOPIC_KEYS, BrokerConfig, validate_topic_configs
from klog.broker.descriptors import DESCRIPTORS_PER_PARTITION, DescriptorBudget, open_files_limit
from klog.broker.log_dir_moves import LogDirMoves
from klog.controller.topics import TopicError, is_internal
from klog.metadata.config import CORDONED_LOG_DIRS, cordoned_paths
from klog.metadata.storage import METADATA_TOPIC, kafka_uuid

if TYPE_CHECKING:
    from klog._native import ProducedBatch

log = logging.getLogger("klog.broker.partitions")

POLICY_VIOLATION = errors.POLICY_VIOLATION
#: the native LogConfig's smallest segment.index.bytes (rust/klog-core storage/config.rs MIN_SEGMENT_INDEX_BYTES)
NATIVE_MIN_SEGMENT_INDEX_BYTES = 12
KAFKA_STORAGE_ERROR = errors.KAFKA_STORAGE_ERROR
LOG_DIR_FAILURE_ERRNOS = frozenset((errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT))


class CreationFailed(TopicError):
    """Making a creation's partition files failed (KAFKA_STORAGE_ERROR); ``leftovers``: some could not be
    removed (the next start removes them: they belong to no topic of the image)."""

    def __init__(self, message: str, *, leftovers: bool) -> None:
        super().__init__(KAFKA_STORAGE_ERROR, message)
        self.leftovers = leftovers


class LogDirOfflineError(OSError):
    """An append to a partition whose log dir is offline (answered with KAFKA_STORAGE_ERROR)."""


def leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> int:
    """KIP-320: FENCED_LEADER_EPOCH if a client's epoch (-1: none given) is older than the partition's,
    UNKNOWN_LEADER_EPOCH if newer, else NONE."""
    if current_leader_epoch == -1 or current_leader_epoch == leader_epoch:
        return errors.NONE
    return errors.FENCED_LEADER_EPOCH if current_leader_epoch < leader_epoch else errors.UNKNOWN_LEADER_EPOCH


@dataclass
class Topic:
    """A topic as this broker serves it: the image's id, partition count and overrides, plus derived values."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)   # overrides, Kafka string form
    internal: bool = False
    #: typed effective values of every topic config (defaults merged), refreshed on change
    effective: dict[str, Any] = field(default_factory=dict)
    #: values request handlers derive from ``effective`` (e.g. produce checks), dropped when it changes
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _answer(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def native_log_config(effective: Mapping[str, Any]) -> Any:
    """The native ``LogConfig`` of a topic's effective configs (every topic config, parsed); ValueError names a
    value klog's logs cannot take."""
    from klog import _native

    flush_messages = effective["flush.messages"]
    flush_ms = effective["flush.ms"]
    return _native.LogConfig(
        segment_bytes=effective["segment.bytes"],
        segment_ms=effective["segment.ms"],
        # Kafka takes 4-11 (an index holding no entry of a kind, so that every batch rolls a segment); klog's
        # indexes hold one entry of each kind at least
        segment_index_bytes=max(effective["segment.index.bytes"], NATIVE_MIN_SEGMENT_INDEX_BYTES),
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


class PartitionManager:
    def __init__(self, config: BrokerConfig, loop: asyncio.AbstractEventLoop | None = None, *,
                 failed_log_dirs: Mapping[str, str] | None = None) -> None:
        """``failed_log_dirs``: log dir -> why its meta.properties could not be read at startup (it starts
        offline)."""
        from klog import _native

        self._native = _native
        self.config = config
        self.loop = loop
        self.log_dirs = config.log_dirs
        #: the log dirs whose meta.properties could not be read at startup -> why (offline from the start, their
        #: directory.id unknown)
        self.failed_log_dirs: dict[str, str] = dict(failed_log_dirs or {})
        for directory in self.log_dirs:
            if directory not in self.failed_log_dirs:
                os.makedirs(directory, exist_ok=True)
        self.topics: dict[str, Topic] = {}
        #: partition files being made on a worker thread (counted against klog.max.partitions.per.broker)
        self.creating_partitions = 0
        #: the leader epoch of each partition (from the metadata image): appends are stamped with it
        self._leader_epochs: dict[tuple[str, int], int] = {}
        #: (topic, partition) -> the log dir AlterReplicaLogDirs named for a replica this broker does not hold
        #: yet: its log is made there when it arrives (Kafka's ``LogManager.preferredLogDirs``; kept in memory)
        self.preferred_dirs: dict[tuple[str, int], str] = {}
        #: offline log dirs -> the error that took each offline (kept in step with the native LogManager)
        self.offline_dirs: dict[str, str] = {}
        #: called on the event loop with the offline dirs each time more go offline (a quorum member reports them to
        #: the controller, KIP-858, and stops fetching their partitions)
        self.on_dirs_offline: Callable[[dict[str, str]], None] | None = None
        #: called on the event loop with (topic, partition, log) when a partition log opens, before anything is
        #: appended to it or read from it (the broker rebuilds the partition's producer state from the log)
        self.on_log_opened: Callable[[str, int, Any], None] | None = None
        self._logs: dict[tuple[str, int], Any] = {}
        #: fetch requests waiting for data: partition -> futures. Followers' fetches read up to the log end and are
        #: woken by appends; consumers' fetches read up to the high watermark and are woken when it moves (an
        #: append to a replicated partition moves only the log end: waking them then would find nothing).
        self._replica_waiters: dict[tuple[str, int], list[asyncio.Future[None]]] = {}
        self._consumer_waiters: dict[tuple[str, int], list[asyncio.Future[None]]] = {}
        #: waiting ShareFetches: woken as consumers' are, and also when a share-partition's records become
        #: acquirable (wake_share)
        self._share_waiters: dict[tuple[str, int], list[asyncio.Future[None]]] = {}
        #: waiting ShareFetches woken and not yet run (share_wakes_pending): they acquire before a newer ShareFetch
        self._share_woken: set[asyncio.Future[None]] = set()
        #: resolved with the errors once every log dir is offline (None without an event loop): a broker of a
        #: cluster stops then, as Kafka's does, so that the controller moves its partitions to brokers that can
        #: write them. Dirs go offline on any thread (flushes, checkpoints): the result is set on the loop.
        self.all_dirs_failed: asyncio.Future[dict[str, str]] | None = None if loop is None else loop.create_future()
        self.log_manager = _native.LogManager(self.log_dirs, native_log_config(self._effective({})),
                                              max_open_segment_files=config["klog.log.max.open.segment.files"],
                                              excluded_topics=[METADATA_TOPIC] if config.quorum_mode else [],
                                              # passed only when some failed: a core built before the option
                                              # still opens the others
                                              **({"offline_dirs": self.failed_log_dirs} if self.failed_log_dirs
                                                 else {}))
        self._cordoned_dirs: frozenset[str] = frozenset()
        self.cordoned_dirs = cordoned_paths(config[CORDONED_LOG_DIRS], config.configured_log_dirs)
        self.descriptors = DescriptorBudget(open_files_limit(), self.log_manager.open_segment_files[0],
                                            config["socket.listen.backlog.size"])
        #: klog.max.partitions.per.broker (explicit, or derived from the descriptor budget)
        self.max_partitions: int = config["klog.max.partitions.per.broker"] or \
            self.descriptors.default_max_partitions(config["max.connections"])
        self._check_descriptor_budget(config)
        #: the partitions the native Produce path appends to (klog/broker/native_produce.py; None: switched off by
        #: klog.produce.native.enable). Learned by the Python path's appends, forgotten on every change of
        #: topics, configs, leader epochs, leadership or log dirs.
        self.native_routes: Any = _native.ProduceRoutes(
            check_records=config["klog.produce.record.validation.enable"],
            max_decompressed_bytes=config["klog.message.max.decompressed.bytes"],
            work_budget=config["klog.produce.validation.inline.bytes"],
            error_codes=(errors.NONE, errors.CORRUPT_MESSAGE, errors.MESSAGE_TOO_LARGE, errors.KAFKA_STORAGE_ERROR)) \
            if config["klog.produce.native.enable"] and hasattr(_native, "ProduceRoutes") else None
        #: the partitions the native Fetch path serves consumers and replicas from (klog/broker/native_fetch.py;
        #: None: switched off by klog.fetch.native.enable). Learned by the Python path's fetches, forgotten with the
        #: Produce routes, and a partition's when a transaction starts on it.
        self.fetch_routes: Any = _native.FetchRoutes(rack_aware=bool(config["replica.selector.class"]),
                                                    error_none=errors.NONE,
                                                    max_parked=config["klog.fetch.native.wait.max.parked"]) \
            if config["klog.fetch.native.enable"] and hasattr(_native, "FetchRoutes") else None
        #: the connections whose long polls are parked in fetch_routes' native wait table
        #: (klog/broker/native_fetch.py::ParkedFetches, made at the first park)
        self.parked_fetches: Any = None
        #: the native Fetch path's hook judging a replica's fetch (klog/broker/native_fetch.py::judge_replica)
        self.replica_judge: Any = None
        self._refresh_offline_dirs()  # dirs that cannot be written at startup (a full disk) are offline already
        #: replicas moving to another log dir (AlterReplicaLogDirs)
        self.moves = LogDirMoves(self)
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
        return len(self._logs) + self.creating_partitions

    def check_partition_limit(self, topic: str, adding: int) -> None:
        """Refuse a creation up front when the broker would exceed klog.max.partitions.per.broker."""
        held = self.partitions_total
        if held + adding > self.max_partitions:
            raise TopicError(POLICY_VIOLATION,
                             f"Creating {adding} partition(s) of topic '{topic}' would exceed "
                             f"klog.max.partitions.per.broker={self.max_partitions}: this broker holds {held} "
                             f"(each holds {DESCRIPTORS_PER_PARTITION} open file; the limit follows the "
                             "open-files limit, ulimit -n)")

    # ---- configs ------------------------------------------------------------------------------------

    def _effective(self, overrides: dict[str, str]) -> dict[str, Any]:
        parsed = validate_topic_configs(overrides)
        return {key: parsed[key] if key in parsed else self.config.topic_default(key) for key in TOPIC_KEYS}

    def topic_config(self, topic: str) -> dict[str, Any]:
        return self.topics[topic].effective

    # ---- topics, as the metadata publisher applies them ----------------------------------------------

    def _create_log(self, topic: str, partition: int, log_config: Any, leader_epoch: int,
                    leader: bool = True, log_dir: str | None = None, topic_id: uuid.UUID | None = None) -> Any:
        """The file-system part of opening a partition (directory, first segment, ``partition.metadata`` naming
        ``topic_id``). Thread-safe: the native LogManager locks, and this touches no Python state of the manager
        but ``preferred_dirs``. ``leader``: this broker leads it (a follower's epochs come with the leader's
        batches, never from its own log end). ``log_dir``: the log dir a new log is made in (see
        :meth:`placement`; None: the native LogManager's choice); an existing log stays where it is."""
        key = (topic, partition)
        if topic_id is not None:
            self._set_aside_stray_log(topic, partition, topic_id)
        if log_dir is not None and self.log_manager.get(topic, partition) is None:
            log_ = self.log_manager.create(topic, partition, log_config, log_dir=log_dir)
            if self.preferred_dirs.pop(key, None) is not None:   # satisfied (Kafka's getOrCreateLog)
                log.info("created the log of %s-%d in log dir %s, as AlterReplicaLogDirs asked", topic, partition,
                         log_dir)
        else:
            log_ = self.log_manager.create(topic, partition, log_config)
        if topic_id is not None:
            self._assign_topic_id(log_, topic, partition, topic_id)
        log_.update_config(log_config)
        # Record the leader epoch's start now (the epoch checkpoint is written here, possibly in a worker
        # thread) so the first append to the partition writes no checkpoint on the event loop.
        entries = log_.leader_epoch_entries()
        if leader and (not entries or max(e for e, _ in entries) < leader_epoch):
            log_.assign_epoch_start(leader_epoch)
        return log_   # opened with HW = log end; the replica manager sets it once the image says who leads

    def _set_aside_stray_log(self, topic: str, partition: int, topic_id: uuid.UUID) -> None:
        """Kafka's stray log (KRaft): a log of ``topic``-``partition`` on disk whose ``partition.metadata`` names
        another topic id than ``topic_id``, the image's (the topic was deleted and created again while this
        broker was down, or the directory came from another cluster), is not served: its directory is renamed
        ``<topic>-<partition>.<id>-stray`` with its files kept (a start skips it; never deleted by the broker, as
        Kafka's) and the partition is served from a new empty log. A file that cannot be read leaves the log as
        it is (:meth:`_assign_topic_id` says so)."""
        found = self.log_manager.get(topic, partition)
        if found is None:
            return
        try:
            recorded = found.recorded_topic_id()
        except self._native.CorruptLogError:
            return
        if recorded is None or recorded == kafka_uuid(topic_id):
            return
        where = found.dir
        renamed = self.log_manager.mark_stray(topic, partition)
        log.warning("Log of %s-%d in %s names topic id %s in its partition.metadata, the metadata has %s for "
                    "topic %s: marked stray and renamed to %s; the partition is served from a new log",
                    topic, partition, where, recorded, kafka_uuid(topic_id), topic, renamed)

    def _assign_topic_id(self, log_: Any, topic: str, partition: int, topic_id: uuid.UUID) -> None:
        """Kafka's ``partition.metadata`` (KIP-516) in the log's directory, which a Kafka broker started on this data
        dir needs to keep the log (without it, it takes the log for a stray replica). A file naming another topic
        id, or unreadable, is left as it is and said (the log stays served, as before klog wrote the file); a
        failed write is the log's (an OSError)."""
        try:
            log_.assign_topic_id(kafka_uuid(topic_id))
        except (ValueError, self._native.CorruptLogError) as exc:
            log.error("partition %s-%d: %s", topic, partition, exc)

    @property
    def cordoned_dirs(self) -> frozenset[str]:
        """The cordoned log dirs (cordoned.log.dirs, KIP-1066; absolute paths): the native LogManager makes no new
        log in them unless the cluster metadata or AlterReplicaLogDirs names one, or every online dir is cordoned
        (the metadata publisher keeps it current)."""
        return self._cordoned_dirs

    @cordoned_dirs.setter
    def cordoned_dirs(self, paths: frozenset[str]) -> None:
        self.log_manager.set_cordoned_dirs([d for d in self.log_dirs if os.path.abspath(d) in paths])
        self._cordoned_dirs = paths

    def placement(self, topic: str, partition: int, assigned: str | None) -> str | None:
        """The log dir a new log of ``topic``-``partition`` is made in (Kafka's ``LogManager.getOrCreateLog``): the
        one AlterReplicaLogDirs named before this broker held the replica (``preferred_dirs``), else ``assigned``
        (the online log dir the cluster metadata names for the replica, None: UNASSIGNED or not one of this
        broker's online dirs); None: the native LogManager picks the online dir that is not cordoned holding the
        fewest partitions."""
        return self.preferred_dirs.get((topic, partition), assigned)

    def create_logs(self, topic: str, partitions: Iterable[tuple[int, int]], overrides: Mapping[str, str],
                    followed: frozenset[int] | set[int] = frozenset(),
                    log_dirs: Mapping[int, str] | None = None, topic_id: uuid.UUID | None = None) -> None:
        """Create (or open) the logs of ``partitions`` ((index, leader epoch) pairs) of a topic a committed image
        places on this broker (``followed``: those it follows), all or none: on a failure (out of descriptors,
        disk full) what was made is removed and CreationFailed(KAFKA_STORAGE_ERROR) raised. For a worker thread:
        the metadata publisher makes the directories and files there before it publishes the image
        (:meth:`apply_topic` then opens them), so the event loop is not blocked by thousands of mkdir/open
        calls. ``log_dirs``: partition -> the log dir its log is made in (:meth:`placement`; the others: the native
        LogManager's choice)."""
        try:
            log_config = native_log_config(self._effective(dict(overrides)))
        except ValueError as exc:   # a value the controller let through that klog's logs cannot take: not served
            raise CreationFailed(f"The configs {dict(overrides)} of topic '{topic}' cannot be applied to its logs: "
                                 f"{exc}", leftovers=False) from None
        wanted = sorted(partitions)
        made = 0
        dirs = log_dirs or {}
        try:
            for partition, epoch in wanted:
                self._create_log(topic, partition, log_config, epoch, partition not in followed, dirs.get(partition),
                                 topic_id)
                made += 1
        except OSError as exc:
            failed_at = wanted[made][0]
            leftovers = not self._remove_partitions(topic, range(wanted[0][0], wanted[-1][0] + 1))
            undone = "the rest is removed at the next start" if leftovers else "nothing was kept"
            log.error("creating partition %d of topic %s failed: %s; %s", failed_at, topic, exc, undone)
            self.note_write_failure(exc, None)
            raise CreationFailed(f"Creating partition {failed_at} of topic '{topic}' failed: "
                                 f"{exc.strerror or exc}; {undone}", leftovers=leftovers) from None

    def apply_topic(self, name: str, topic_id: uuid.UUID, partition_epochs: Mapping[int, int],
                    overrides: Mapping[str, str], followed: frozenset[int] | set[int] = frozenset(),
                    log_dirs: Mapping[int, str] | None = None) -> None:
        """Serve ``name`` as the image has it: its id, overrides and partitions (index -> leader epoch); logs
        not open yet are opened (created if missing, in the dir ``log_dirs`` names for the partition, as
        :meth:`create_logs`). A new leader epoch starts at the log end of the partitions this broker leads
        (Kafka's makeLeader), not of those it follows (``followed``)."""
        self.forget_native_routes()
        topic = self.topics.get(name)
        assert topic is None or topic.topic_id == topic_id, f"topic {name} served with another id"
        if topic is None:
            topic = self.topics[name] = Topic(name, topic_id, 0, dict(overrides), is_internal(name),
                                              self._effective(dict(overrides)))
        elif topic.configs != overrides:
            self.set_topic_configs(name, overrides)
        log_config = None
        for partition, epoch in sorted(partition_epochs.items()):
            key = (name, partition)
            log_ = self._logs.get(key)
            if log_ is None:
                log_config = log_config or native_log_config(topic.effective)
                log_ = self._logs[key] = self._create_log(name, partition, log_config, epoch,
                                                          partition not in followed,
                                                          (log_dirs or {}).get(partition), topic_id)
                if self.on_log_opened is not None:
                    self.on_log_opened(name, partition, log_)
            elif self._leader_epochs.get(key, epoch) < epoch and partition not in followed:
                log_.assign_epoch_start(epoch)
            self._leader_epochs[key] = epoch
        topic.partitions = max(topic.partitions, max(partition_epochs, default=-1) + 1)

    def start_leader_epoch(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Start ``leader_epoch`` at the log end now (Kafka's makeLeader) if the log has no later epoch: for a
        leadership that waited for a follower append (``apply_topic`` was told the partition is followed)."""
        self.forget_native_routes()
        log_ = self._logs[(topic, partition)]
        entries = log_.leader_epoch_entries()
        if not entries or max(e for e, _ in entries) < leader_epoch:
            log_.assign_epoch_start(leader_epoch)

    def remove_topic(self, name: str) -> None:
        """The topic was deleted: stop serving it and delete its logs (renamed now, files removed later)."""
        self.forget_native_routes()
        topic = self.topics.pop(name, None)
        if topic is None:
            return
        for partition in range(topic.partitions):
            self.moves.cancel((name, partition))
            self._logs.pop((name, partition), None)
            self._leader_epochs.pop((name, partition), None)
            self.wake((name, partition))
        self.log_manager.delete_topic(name)
        log.info("deleted topic %s", name)

    def remove_partition(self, name: str, partition: int) -> None:
        """This broker no longer hosts the partition (a reassignment moved it away): stop serving it and delete its
        log (renamed now, files removed after file.delete.delay.ms), as Kafka's StopReplica with delete."""
        self.forget_native_routes()
        key = (name, partition)
        self.moves.cancel(key)
        if self._logs.pop(key, None) is None:
            return
        self._leader_epochs.pop(key, None)
        self.wake(key)
        self.log_manager.delete_partition(name, partition)
        log.info("deleted the local replica of %s-%d: this broker is no longer among its replicas", name, partition)

    def set_topic_configs(self, name: str, overrides: Mapping[str, str]) -> None:
        """A committed config change: new effective values, derived values dropped, logs reconfigured. A change the
        native log refuses (a value the controller's checks let through that klog's logs cannot take) is logged and
        left out, the topic keeping its settings: the change is committed, and refusing it here must not stop this
        broker from applying the metadata changes after it."""
        entry = self.topics[name]
        try:
            effective = self._effective(dict(overrides))
            log_config = native_log_config(effective)
        except ValueError as exc:   # ConfigError too
            log.error("topic %s: its committed configs %s cannot be applied to its logs here (%s); it keeps its "
                      "previous settings", name, dict(overrides), exc)
            return
        self.forget_native_routes()
        entry.configs = dict(overrides)
        entry.effective = effective
        entry.derived.clear()
        for partition in range(entry.partitions):
            log_ = self._logs.get((name, partition))
            if log_ is not None:
                log_.update_config(log_config)

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

    def check_metadata_dir_online(self) -> None:
        """Refuse a metadata change up front (KAFKA_STORAGE_ERROR) when the log dir of the metadata log is
        offline: nothing could be committed."""
        self._refresh_offline_dirs()
        error = self.offline_dirs.get(self.log_dirs[0])
        if error is not None:
            raise TopicError(KAFKA_STORAGE_ERROR, f"The log dir {self.log_dirs[0]} holding the cluster metadata "
                                                  f"log ({METADATA_TOPIC}-0) is offline: {error}")

    def _remove_partition_dirs(self, topic: str, first: int, total: int) -> int:
        """Remove the directories of partitions [first, total) of ``topic`` from every log dir, also those
        already renamed for deletion (``<topic>-<p>.<id>-delete``); returns how many there were."""
        removed = 0
        for directory in self.log_dirs:
            if directory in self.failed_log_dirs:   # never read nor written
                continue
            for entry in os.scandir(directory):
                name = entry.name
                if name.endswith("-delete"):
                    name = name[:-len("-delete")].rpartition(".")[0]
                owner, _, number = name.rpartition("-")
                if owner == topic and number.isdigit() and first <= int(number) < total and entry.is_dir():
                    shutil.rmtree(entry.path)
                    removed += 1
        return removed

    def stray_partitions(self) -> list[tuple[str, int]]:
        """Partition directories on disk that no topic of the image owns (left by a crash between making a
        creation's files and committing it, or copied in): they are not served."""
        return sorted((t, p) for t, p in self.log_manager.partitions()
                      if t != METADATA_TOPIC and (t, p) not in self._logs)

    def remove_stray_partitions(self) -> list[tuple[str, int]]:
        """Delete the stray partitions (as Kafka deletes stray logs): returns what was removed."""
        stray = self.stray_partitions()
        first: dict[str, int] = {}
        for topic, partition in stray:
            first[topic] = min(first.get(topic, partition), partition)
        for topic, partition in first.items():
            first_stray = partition if self.topics.get(topic) is not None else 0
            # removed now, not renamed for a later deletion: the name is free for a new creation at once
            self._remove_partitions(topic, range(first_stray, sys.maxsize))
        return stray

    def remove_stray_replicas(self, hosted: Callable[[str, int], bool]) -> list[tuple[str, int]]:
        """Before a quorum member's first image is applied: delete the partition logs on disk that ``hosted`` says
        the image does not place here (their topic was deleted, or moved away, while the node was down), as Kafka's
        broker deletes its stray replicas once its metadata caught up (renamed now, files removed after
        file.delete.delay.ms). Returns what was deleted."""
        removed: list[tuple[str, int]] = []
        for topic, partition in self.stray_partitions():
            if hosted(topic, partition):
                continue
            try:
                self.log_manager.delete_partition(topic, partition)
            except OSError as exc:   # e.g. its log dir is offline: left as it is, tried again at the next start
                log.warning("cannot delete the stray replica %s-%d: %s", topic, partition, exc)
                continue
            removed.append((topic, partition))
        return removed

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self._leader_epochs.get((topic, partition), 0)

    def partition_count(self, topic: str) -> int | None:
        entry = self.topics.get(topic)
        return None if entry is None else entry.partitions

    def logs(self) -> list[tuple[tuple[str, int], Any]]:
        return list(self._logs.items())

    def get(self, topic: str, partition: int) -> Any:
        return self._logs.get((topic, partition))

    def learn_native_route(self, topic: str, partition: int, *, replicated: bool, max_message_bytes: int,
                           compacted: bool, create_time: bool, before_max_ms: int, after_max_ms: int,
                           compression: int | None, compression_level: int | None) -> None:
        """The Python path has just appended to ``topic``-``partition`` as its leader, under the topic's produce
        policy given here: the native Produce path may append to it too (with its current leader epoch) until
        :meth:`forget_native_routes`."""
        log_ = self._logs.get((topic, partition))
        entry = self.topics.get(topic)
        if self.native_routes is None or log_ is None or entry is None:
            return
        self.native_routes.learn(topic, partition, log_, leader_epoch=self._leader_epochs.get((topic, partition), 0),
                                 replicated=replicated, max_message_bytes=max_message_bytes, compacted=compacted,
                                 create_time=create_time, before_max_ms=before_max_ms, after_max_ms=after_max_ms,
                                 compression=compression, compression_level=compression_level,
                                 topic_id=entry.topic_id.bytes)

    def learn_fetch_route(self, topic: str, partition: int, log_: Any) -> None:
        """The Python path has just served a consumer's or a replica's fetch of ``topic``-``partition`` as its
        leader, without an error: the native Fetch path may serve it too (under its current leader epoch) until
        :meth:`forget_native_routes`, a read_committed consumer's with the last stable offset and the aborted
        transactions the broker's transaction state sets on the log (``first_unstable_offset``,
        ``aborted_transactions``)."""
        entry = self.topics.get(topic)
        if self.fetch_routes is None or entry is None:
            return
        self.fetch_routes.learn(topic, partition, log_, topic_id=entry.topic_id.bytes,
                                leader_epoch=self._leader_epochs.get((topic, partition), 0))

    def forget_native_routes(self) -> None:
        """Something a native route was learned under may have changed: every partition takes the Python path
        again until that path has appended to it or served a fetch of it (and routed it) once more."""
        if self.native_routes is not None:
            self.native_routes.clear()
        if self.fetch_routes is not None:
            self.fetch_routes.clear()

    # ---- data ---------------------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: bytes | ProducedBatch, *, now_ms: int | None = None) -> Any:
        """Append as the leader: ``records``, or a Produce partition's batch as the produce checks accepted it,
        stamped with the partition's leader epoch; wakes the followers' fetches. The high watermark is not moved
        here: call :meth:`ReplicaManager.append` (its owner)."""
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
            result = log_.append(records, leader_epoch=self._leader_epochs.get(key, 0), now_ms=now_ms)
        except OSError as exc:
            self.note_log_write_failure(topic, partition, exc, log_=log_)
            raise
        self._wake(self._replica_waiters, key)   # consumers wait for the high watermark, which moves elsewhere
        return result

    def read(self, log_: Any, offset: int, max_bytes: int, *, min_one_batch: bool, replica: bool = False,
             stable_offset: int | None = None) -> Any:
        """Whole batches from ``offset``, only below the high watermark (what every replica has), except for a
        replica's fetch (up to the log end), and below ``stable_offset`` (the last stable offset) for a
        read_committed consumer: the visibility rule lives here, not in the handlers. Raises OffsetOutOfRange
        (ValueError)."""
        limit: int | None = None if replica else int(log_.high_watermark)
        if stable_offset is not None and limit is not None:
            limit = min(limit, stable_offset)
        return log_.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

    def wake_replicas(self, key: tuple[str, int]) -> None:
        """An append happened outside :meth:`append` (the native Produce path): answer the followers' fetches."""
        self._wake(self._replica_waiters, key)

    def wake(self, key: tuple[str, int]) -> None:
        """Answer every fetch waiting on ``key`` (a high watermark that moved, a deletion)."""
        self._wake(self._replica_waiters, key)
        self._wake(self._consumer_waiters, key)
        self.wake_share(*key)

    def wake_share(self, topic: str, partition: int) -> None:
        """A share-partition of ``topic``-``partition`` may have records to acquire again (a release, a lock
        expiry, its in-flight window moved): answer the ShareFetches waiting on it, in the order they came."""
        waiters = self._share_waiters.pop((topic, partition), None) if self._share_waiters else None
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)
                    self._share_woken.add(future)

    def share_wakes_pending(self) -> bool:
        """Some waiting ShareFetch was woken and has not run yet (it has not tried to acquire)."""
        return bool(self._share_woken)

    @staticmethod
    def _wake(registry: dict[tuple[str, int], list[asyncio.Future[None]]], key: tuple[str, int]) -> None:
        waiters = registry.pop(key, None) if registry else None
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    async def wait_for_append(self, partitions: Iterable[tuple[str, int]], timeout_s: float, *,
                              replica: bool = False, share: bool = False) -> None:
        """Wait until any of ``partitions`` has more to read, or is deleted, or ``timeout_s`` passes: for a
        follower's fetch (``replica``) an append; for a consumer's a high watermark that moved; for a ShareFetch
        (``share``) that, or records of a share-partition that became acquirable (:meth:`wake_share`)."""
        # The broker's own loop when it gave one: Python 3.11's get_running_loop makes a getpid system call each time
        # (5% of an empty long poll's CPU in its flame graph).
        loop = self.loop if self.loop is not None else asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        keys = list(partitions)
        registry = self._replica_waiters if replica else self._share_waiters if share else self._consumer_waiters
        for key in keys:
            registry.setdefault(key, []).append(future)
        if not replica:
            self._note_waited(keys, True)
        # One timer that answers the future itself rather than asyncio.wait_for, which adds a second future, a done
        # callback and a cancellation to every long poll: most consumer fetches on caught-up partitions expire.
        timer = loop.call_later(timeout_s, _answer, future)
        try:
            await future
        finally:
            timer.cancel()
            if share:
                self._share_woken.discard(future)
            for key in keys:
                waiters = registry.get(key)
                if waiters is not None:
                    try:
                        waiters.remove(future)
                    except ValueError:
                        pass
                    if not waiters:
                        del registry[key]
            if not replica:
                self._note_waited([k for k in keys if k not in self._consumer_waiters and k not in self._share_waiters],
                                  False)

    def _note_waited(self, keys: Iterable[tuple[str, int]], waited: bool) -> None:
        """Tell the logs of ``keys`` whether a long poll waits here for their high watermark: the native front, which
        moves the high watermark of a partition with one replica itself, then wakes the event loop at once to wake
        it (else within its accounting interval). A move that lands just before the flag is set is seen at that
        interval."""
        logs = self._logs
        for key in keys:
            log_ = logs.get(key)
            if log_ is not None:
                log_.high_watermark_waited = waited

    # ---- maintenance --------------------------------------------------------------------------------

    # ---- log dir failure ------------------------------------------------------------------------------

    def note_write_failure(self, exc: OSError, log_dir: str | None) -> None:
        """A write to ``log_dir`` outside a partition's log (a checkpoint, the files of a new partition, the
        metadata log) failed: the dir goes offline if ``exc`` says it cannot be written (disk full, I/O error,
        read-only, over quota); a partition log's own writes go through :meth:`note_log_write_failure`."""
        if log_dir is not None and exc.errno in LOG_DIR_FAILURE_ERRNOS:
            self.log_manager.mark_dir_offline(log_dir, str(exc))
        self._refresh_offline_dirs()

    def note_log_write_failure(self, topic: str, partition: int, exc: OSError, *, log_: Any = None,
                               log_dir: str | None = None) -> None:
        """The broker's one failure channel for a partition log's writes (Kafka's LogDirFailureChannel, which
        takes any IOException of a log's write): a leader's or a follower's append or truncation, a log-start move,
        DeleteRecords, a dir move's copy into ``log_dir``. The dir (``log_dir``, by default the log's own) goes
        offline whatever the error (retried, the same write fails at every round for ever), unless the partition's
        log is no longer the one written: ``log_`` when known, else the one in ``log_dir`` (a topic deletion or a
        dir move closed it under the write: no failure of the dir)."""
        current = self._logs.get((topic, partition))
        if log_ is not None:
            written = current is log_
        else:
            written = current is not None and os.path.dirname(current.dir) == log_dir
        if written and current is not None:
            self.log_manager.mark_dir_offline(log_dir or os.path.dirname(current.dir), str(exc))
        self._refresh_offline_dirs()

    def _refresh_offline_dirs(self) -> None:
        """Learn the dirs the storage took offline (flushes, checkpoints and startup do that on their own)."""
        offline = dict(self.log_manager.offline_dirs)
        if offline != self.offline_dirs:
            self.offline_dirs = offline
            self.forget_native_routes()   # no native append may reach an offline dir
            if self.on_dirs_offline is not None and self.loop is not None and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self.on_dirs_offline, dict(offline))
            if self.all_dirs_offline() and self.loop is not None and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self._resolve_all_dirs_failed, dict(offline))

    def _resolve_all_dirs_failed(self, reasons: dict[str, str]) -> None:
        if self.all_dirs_failed is not None and not self.all_dirs_failed.done():
            self.all_dirs_failed.set_result(reasons)

    def log_dir_offline(self, log_: Any) -> bool:
        """The partition log ``log_`` is in an offline log dir."""
        return bool(self.offline_dirs) and os.path.dirname(log_.dir) in self.offline_dirs

    def log_dir_of(self, log_: Any) -> str:
        """The log dir holding the partition log ``log_``."""
        return os.path.dirname(log_.dir)

    def all_dirs_offline(self) -> bool:
        return bool(self.offline_dirs) and all(d in self.offline_dirs for d in self.log_dirs)

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

    def close(self) -> None:
        self.moves.close()   # future logs stay: the next start resumes their moves
        # Kafka's shutdown closes the logs on num.recovery.threads.per.data.dir threads per log dir.
        self.log_manager.close(self.config["num.recovery.threads.per.data.dir"] * len(self.log_dirs))
        self._logs.clear()
