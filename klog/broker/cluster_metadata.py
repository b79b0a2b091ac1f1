"""The broker's cluster metadata: the committed image handlers read, and the way requests change it.

One small service object per broker (``BrokerState.metadata``):

- reads: :attr:`ClusterMetadata.image` (the frozen :class:`klog.metadata.MetadataImage`) and helpers over it;
  handlers answer Metadata, DescribeCluster, DescribeConfigs... from it, never from a file;
- writes: it is the :class:`klog.controller.writer.QuorumWriter` of this node's
  :class:`klog.controller.apis.ControllerApis` (which decides), proposing the records to the quorum; every write
  of this node, the broker's own too (an internal topic, a producer-id block), is decided there;
- applying: once records are committed they are replayed into the next image and the changes published to this
  broker's partitions (create, open and delete partition logs, update topic configs: Kafka's
  ``BrokerMetadataPublisher``), in commit order; the files of new partitions are made on a worker thread before
  the image that places them here is published, on every node alike, the deciding one too.

The quorum is :class:`klog.controller.single_voter.SingleVoterQuorum` over ``<first log dir>/__cluster_metadata-0``
(Kafka's format): this node is its own controller, a commit is a durable append. On the first start of a data
directory the first records are written: ``metadata.version`` and, for a directory a single-node klog wrote
before, its topics from ``klog-topics.json`` (``klog.metadata.migration``; the file is then renamed
``klog-topics.json.migrated``). Every start registers this broker (RegisterBrokerRecord with a new incarnation,
its epoch the record's offset, as Kafka's controller assigns it). A restart reloads the image from the latest
snapshot and the log after it.

On a multi-node quorum (``controller.quorum.voters``, a combined ``broker,controller`` node) the image is the one
the node's Raft member (:class:`klog.controller.node.ControllerNode`) applies from the quorum's committed log,
through the same :class:`klog.controller.applier.MetadataApplier` and the same publishing; changes are proposed
through Raft on the active controller's node; the other nodes' brokers forward the requests that make them to it
(:mod:`klog.broker.forwarding`), whose controller listener hands them to its ControllerApis. The broker registers and
heartbeats to the active controller over the controller listeners (:mod:`klog.broker.lifecycle`), which fences it
when its session expires; SIGTERM runs a controlled shutdown first (:meth:`ClusterMetadata.controlled_shutdown`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from klog.broker.config import BrokerConfig
from klog.broker.controller_channel import ControllerChannel, ControllerConnection, controller_security
from klog.broker.directory_assignments import AssignmentSender
from klog.broker.lifecycle import BrokerLifecycleManager, Listener
from klog.broker.lifecycle import LifecycleState
from klog.broker.lifecycle_driver import LifecycleDriver, monotonic_ms
from klog.broker.partitions import KAFKA_STORAGE_ERROR, PartitionManager
from klog.broker.replication.throttle import broker_dynamic_config
from klog.controller.applier import MetadataApplier, SnapshotPolicy, bootstrap_records, read_bootstrap_records
from klog.controller.writer import RaftQuorumWriter
from klog.controller.node import ControllerNode, stored_directory_id
from klog.metadata.config import CORDONED_LOG_DIRS, cordoned_paths
from klog.metadata.features import MV_CORDONED_LOG_DIRS
from klog.controller.single_voter import SingleVoterQuorum, transaction_abort
from klog.controller.single_voter_start import (
    SECURITY_PROTOCOL_IDS,
    SUPPORTED_FEATURES,
    own_registration,
    registration_epoch,
    start_elections,
)
from klog.controller.topics import TopicError
from klog.metadata.delta import MetadataChanges, replay
from klog.metadata.image import (
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    MIGRATING_DIRECTORY,
    TopicImage,
    UNASSIGNED_DIRECTORY,
)
from klog.metadata.loader import StartupCatchUp, image_changes
from klog.metadata.migration import TOPICS_FILE, topic_store_records
from klog.metadata.records import MetadataRecord, record
from klog.metadata.storage import MetadataLog

log = logging.getLogger("klog.broker.metadata")

__all__ = ["ClusterMetadata"]

MIGRATED_SUFFIX = ".migrated"
#: Snapshots kept in the metadata log directory (the newest is loaded; an older one is a fallback to inspect).
SNAPSHOTS_KEPT = 2
#: the byte rate of moves between log dirs (AlterReplicaLogDirs), a dynamic broker config as in Kafka
MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
#: How often a broker waiting to be unfenced before it opens its client listeners says so.
UNFENCE_WAIT_LOG_INTERVAL_S = 10.0
#: How often a quorum member's broker that is catching up with the metadata log looks again whether it has (the
#: high watermark may become known with no new entry to apply), as Kafka's MetadataLoader retries every 100 ms.
CATCH_UP_RECHECK_S = 0.1
#: How often it says in the log that it is still catching up (every check is logged at debug).
CATCH_UP_LOG_INTERVAL_S = 5.0


class ClusterMetadata:
    """Construct with the broker's partitions (opened, empty of topics); the image is loaded, bootstrapped
    if new, and published to them before the constructor returns."""

    def __init__(self, config: BrokerConfig, cluster_id: str, partitions: PartitionManager,
                 endpoints: Mapping[str, tuple[str, int]],
                 on_topic_removed: Callable[[str], None] = lambda name: None, legacy_producer_id_end: int = 0,
                 controller: ControllerNode | None = None, replicas: Any = None,
                 on_published: Callable[[], None] = lambda: None,
                 on_topics_deleted: Callable[[list[str]], None] = lambda names: None,
                 previous_broker_epoch: int = -1) -> None:
        """``previous_broker_epoch``: what this broker registers with (klog.broker.clean_shutdown);
        ``on_topic_removed``: called with a deleted topic's name once its logs are gone; ``on_topics_deleted``:
        with the names of every topic an image deleted, whether or not this broker held replicas of them (the
        group coordinator drops their committed offsets, as Kafka's onPartitionsDeleted); ``on_published``: after
        each image is published to this broker's partitions (the group coordinator follows its offsets
        partitions' leaders)."""
        self.config = config
        self.previous_broker_epoch = previous_broker_epoch
        #: the broker's replica manager (klog.broker.replication.manager): leads or follows each local partition
        #: as the published image says
        self.replicas = replicas
        self.node_id = config.node_id
        self.partitions = partitions
        partitions.moves.rate = self._move_rate
        self.on_topic_removed = on_topic_removed
        #: committed images not yet published to this broker's partitions, in commit order: their new partitions'
        #: files are made on a worker thread first (:meth:`_publish_in_order`)
        self._unpublished: collections.deque[tuple[MetadataImage, MetadataChanges]] = collections.deque()
        self._publisher: asyncio.Task[None] | None = None
        #: the files being made on a worker thread for the image at the head of ``_unpublished``
        self._making_files: asyncio.Future[None] | None = None
        #: the offset of the last image published to this broker's partitions
        self.published_offset = -1
        #: whether the first image was published: a quorum member's broker publishes nothing until it caught up
        #: with the quorum's log (Kafka's MetadataLoader), then every committed image in commit order
        self.first_published = False
        self._catch_up = StartupCatchUp()
        self._catch_up_task: asyncio.Task[None] | None = None
        self._high_watermark: Callable[[], int | None] = lambda: None
        self._catch_up_started = time.monotonic()
        self._catch_up_logged = -CATCH_UP_LOG_INTERVAL_S
        #: the names of the topics deleted, while this node was down, by the images held back while catching up: a
        #: topic of the first image by one of these names is a new one, the logs on disk under that name the
        #: deleted topic's
        self._deleted_while_away: set[str] = set()
        self._applied_before_start: int | None = None
        self._publish_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._stopped = False
        #: the Raft member of a multi-node quorum whose applied image this broker serves (None: a single voter)
        self.controller = controller
        #: commits through the quorum's Raft member (None: a single voter commits to its own log)
        self._raft_writer = None if controller is None else RaftQuorumWriter(controller, self.node_id)
        self.cluster_id = cluster_id
        #: a quorum member's broker lifecycle with the active controller (None: a single voter, or not started)
        self.lifecycle: BrokerLifecycleManager | None = None
        self._lifecycle_driver: LifecycleDriver | None = None
        self._registrar: asyncio.Task[None] | None = None
        #: a quorum member's AssignReplicasToDirs to the active controller (JBOD), and its log dirs' directory ids
        self.assignments: AssignmentSender | None = None
        #: the directory.id of each log dir (meta.properties, written before this is made; the zero UUID where none)
        self.dir_ids: dict[str, uuid.UUID] = _directory_ids(partitions)
        #: a single voter's report of its log dirs to its own controller (:meth:`report_own_dirs_to`)
        self._report_own_dirs: Callable[[bool], None] | None = None
        #: a single voter's records name no log dir (MIGRATING): the partitions it held when it started while a log
        #: dir failed at the start (the failed dir may hold their logs, so none is made elsewhere)
        self._held_at_start: set[tuple[uuid.UUID, int]] = set()
        self.on_published = on_published
        self.on_topics_deleted = on_topics_deleted
        if controller is not None:
            self._init_quorum_member(controller, endpoints)
            return
        self.log = MetadataLog(config.log_dirs[0], manager=partitions.log_manager)
        state = self.log.read_quorum_state()
        if state is not None and state.leader_id not in (-1, self.node_id):
            raise RuntimeError(f"{self.log.quorum_state_path}: this metadata log was led by node {state.leader_id}, "
                               f"but this node is node.id {self.node_id} (a single-node quorum leads its own log)")
        self.quorum = SingleVoterQuorum(self.log, self.node_id, config["klog.controller.max.records.per.batch"])
        loader = self.log.load(cluster_id, end_offset=self.quorum.committed_end)
        snapshot = self.log.latest_snapshot()
        if loader.image.highest_offset >= 0:
            log.info("loaded the metadata image at offset %d %s", loader.image.highest_offset,
                     "from the log" if snapshot is None else
                     f"from snapshot {snapshot.filename} and the log after it")
        # the same replay and snapshot policy as a Raft member's (metadata.log.max.record.bytes.between.snapshots,
        # metadata.log.max.snapshot.interval.ms); its index is the committed end offset of the metadata log
        self.applier = MetadataApplier(cluster_id, SnapshotPolicy.from_config(config), _monotonic_ms(), loader)
        self.applier.applied_index = self.quorum.committed_end
        self._size_at_commit = self.log.log.size_in_bytes
        if snapshot is not None:   # log bytes after it are counted from this start
            self.applier.snapshot_index = snapshot.end_offset
        else:
            self.applier.bytes_since_snapshot = self.log.log.size_in_bytes
        if partitions.failed_log_dirs:
            self._held_at_start = {(t.id, p) for t in loader.image.topics_by_id.values()
                                   for p, r in t.partitions.items() if self.node_id in r.replicas}
        # at startup, before it serves: published here and now, the files of what was committed made on this thread
        self._publish(loader.image, image_changes(MetadataImage(), loader.image))
        self.applier.on_changes = self._publish
        self._bootstrap(endpoints, legacy_producer_id_end)
        stray: dict[str, int] = {}
        for topic, _ in partitions.remove_stray_partitions():
            stray[topic] = stray.get(topic, 0) + 1
        for topic, count in sorted(stray.items()):
            log.warning("removed %d partition director%s of topic %s whose creation was interrupted (not in the "
                        "cluster metadata)", count, "y" if count == 1 else "ies", topic)
        self.applier.on_changes = self._on_changes

    def _init_quorum_member(self, controller: ControllerNode, endpoints: Mapping[str, tuple[str, int]]) -> None:
        """Serve the image the Raft member applies from the quorum's committed log (the same publishing as a
        single voter's, for the partitions placed on this node). The broker registers and heartbeats to the
        active controller (:meth:`start_lifecycle`, once the server bound its listeners), as a Kafka broker."""
        self.applier = controller.applier
        self._endpoints = endpoints   # the server fills in the bound ports after this constructor
        self._incarnation = uuid.uuid4()
        self._high_watermark = controller.high_watermark
        self._applied_before_start = controller.applied_before_start()
        self.applier.on_changes = self._on_changes
        if self._caught_up():
            self._publish_first_image()
        else:
            self._catch_up_task = asyncio.get_running_loop().create_task(
                self._until_caught_up(), name=f"broker-{self.node_id}-metadata-catch-up")

    def _caught_up(self) -> bool:
        """Whether this quorum member applied the quorum's log up to the high watermark it learnt since it started
        (Kafka's ``MetadataLoader.stillNeedToCatchUp``). A single voter loaded its whole log before it published
        its first image."""
        if self.controller is None or not self._catch_up.catching_up:
            return True
        reason = self._catch_up.still_catching_up(self._high_watermark(), self.applier.applied_index,
                                                  self.applier.bootstrapped)
        now = time.monotonic()
        if reason is not None:
            log.debug("broker %d: still catching up with the metadata log: %s", self.node_id, reason)
            if now - self._catch_up_logged >= CATCH_UP_LOG_INTERVAL_S:
                self._catch_up_logged = now
                log.info("broker %d: publishing no metadata image until it caught up with the quorum's metadata "
                         "log: %s", self.node_id, reason)
            return False
        log.info("broker %d: caught up with the quorum's metadata log at index %d in %.0f ms: publishing the "
                 "image at offset %d", self.node_id, self.applier.applied_index,
                 (now - self._catch_up_started) * 1000, self.image.highest_offset)
        if self._catch_up_task is not None and self._catch_up_task is not asyncio.current_task():
            self._catch_up_task.cancel()
        self._catch_up_task = None
        return True

    def _publish_first_image(self) -> None:
        """Every image applied while catching up was held back: the first one published is the whole image. The
        logs on disk it does not place here go first (Kafka's stray replicas): those of topics deleted while this
        node was down (also when a new topic took the name), or of partitions moved away meanwhile."""
        image = self.image
        deleted = self._deleted_while_away

        def hosted(name: str, partition: int) -> bool:
            topic = image.topic(name)
            registration = None if topic is None else topic.partitions.get(partition)
            return registration is not None and self.node_id in registration.replicas and name not in deleted

        stray: dict[str, list[int]] = {}
        for name, partition in self.partitions.remove_stray_replicas(hosted):
            stray.setdefault(name, []).append(partition)
        for name, parts in sorted(stray.items()):
            log.warning("deleted the local replica(s) %s of topic %s: the cluster metadata no longer places them "
                        "on this broker", ",".join(str(p) for p in sorted(parts)), name)
        self._enqueue(image, image_changes(MetadataImage(), image))

    async def _until_caught_up(self) -> None:
        """Look again every CATCH_UP_RECHECK_S (the high watermark may become known with nothing new to apply)."""
        while not self._stopped and self._catch_up.catching_up:
            if self._caught_up():
                self._publish_first_image()
                return
            await asyncio.sleep(CATCH_UP_RECHECK_S)

    def start_lifecycle(self) -> None:
        """Register with the active controller and heartbeat to it (Kafka's BrokerLifecycleManager), through
        the controller listeners of ``controller.quorum.voters``. Logs were recovered when the partitions were
        opened, so the broker asks to be unfenced as soon as its image holds its registration."""
        controller = self.controller
        assert controller is not None and self.lifecycle is None
        protocols = {lst.name: lst.security_protocol for lst in self.config.listeners}
        listeners = [Listener(name, host, port, SECURITY_PROTOCOL_IDS.get(protocols.get(name, "PLAINTEXT"), 0))
                     for name, (host, port) in self._endpoints.items()]
        session_timeout_ms = self.config["broker.session.timeout.ms"]
        # JBOD (KIP-858): the directory.id of each log dir (meta.properties); the online ones are registered, the
        # offline ones reported in heartbeats (but those whose meta.properties could not be read: their id is unknown,
        # as on Kafka; the controller counts their replicas offline as they are in no registered dir)
        self.dir_ids = _directory_ids(self.partitions)
        online = [i for d, i in self.dir_ids.items() if d not in self.partitions.offline_dirs]
        self.lifecycle = BrokerLifecycleManager(
            self.node_id, self.cluster_id, self._incarnation, listeners, SUPPORTED_FEATURES,
            rack=self.config["broker.rack"], heartbeat_interval_ms=self.config["broker.heartbeat.interval.ms"],
            log_dirs=online,
            session_timeout_ms=session_timeout_ms,
            # past the session timeout the controller fences this broker anyway (its leaders then move)
            controlled_shutdown_timeout_ms=session_timeout_ms, previous_broker_epoch=self.previous_broker_epoch)
        now = monotonic_ms()
        self.lifecycle.start(now)
        if self.first_published:   # else once it is (Kafka's broker unfences after its first image is published)
            self.lifecycle.set_metadata_offset(self.published_offset)
            self.lifecycle.set_ready_to_unfence(now)
        self._lifecycle_driver = LifecycleDriver(
            self.lifecycle, controller.controller_addresses, leader=controller.leader_address,
            client_id=f"klog-broker-{self.node_id}-lifecycle", security=controller_security(controller))
        self._registrar = asyncio.get_running_loop().create_task(self._lifecycle_driver.run(),
                                                                  name=f"broker-{self.node_id}-lifecycle")
        self._update_cordoned_dirs(self.image)
        lifecycle = self.lifecycle
        self.assignments = AssignmentSender(
            self.node_id, lambda: lifecycle.broker_epoch if lifecycle.registered else -1,
            ControllerChannel(ControllerConnection(
                controller.controller_addresses, leader=controller.leader_address,
                client_id=f"klog-broker-{self.node_id}-dir-assignments", request_timeout_ms=self.config["request.timeout.ms"],
                security=controller_security(controller))))
        self.assignments.start()
        self.partitions.on_dirs_offline = self._on_dirs_offline
        # a replica moved to another log dir (AlterReplicaLogDirs): the controller learns its new dir
        self.partitions.moves.on_moved = lambda topic, partition: self._check_assignments(self.image, [topic])
        if self.partitions.offline_dirs:
            self._on_dirs_offline(dict(self.partitions.offline_dirs))
        self._check_assignments(self.image, list(self.image.topics_by_name))

    def _move_rate(self) -> int:
        """replica.alter.log.dirs.io.max.bytes.per.second: dynamic (this broker's, else the cluster default), else
        server.properties'."""
        value = broker_dynamic_config(self.image, self.node_id, MOVE_RATE)
        return max(1, int(value if value is not None else self.config[MOVE_RATE]))

    def _on_dirs_offline(self, offline: Mapping[str, str]) -> None:
        """Log dirs failed (on the event loop): stop fetching their partitions and report them to the controller
        at once (KIP-858), which moves their leaderships while this broker serves its other dirs."""
        if self.replicas is not None:
            self.replicas.on_log_dirs_offline()
        if self.lifecycle is None or self._lifecycle_driver is None:
            return
        ids = [self.dir_ids[d] for d in offline if d in self.dir_ids]
        self.lifecycle.set_offline_log_dirs(ids, monotonic_ms())
        self._lifecycle_driver.poke()

    def _check_assignments(self, image: MetadataImage, names: Sequence[str]) -> None:
        """Send AssignReplicasToDirs for the local replicas of ``names`` whose log dir the image does not name yet
        (UNASSIGNED, or another dir): the dir their log is in."""
        if self.assignments is None:
            return
        for name in names:
            topic = image.topic(name)
            if topic is None:
                continue
            for p, r in topic.partitions.items():
                if self.node_id not in r.replicas:
                    continue
                native = self.partitions.get(name, p)
                actual = None if native is None else self.dir_ids.get(self.partitions.log_dir_of(native))
                if actual is not None and r.directory(self.node_id) != actual:
                    self.assignments.submit(topic.id, p, actual)

    async def wait_until_unfenced(self, log_every_s: float = UNFENCE_WAIT_LOG_INTERVAL_S) -> None:
        """Return once the controller unfenced this broker (or it is shutting down). A Kafka broker enables its
        client listeners only then, so a client never sees a broker whose Metadata lists no registered broker
        yet. Waits as long as that takes (the quorum may lack a majority), saying so every ``log_every_s``."""
        lifecycle, driver = self.lifecycle, self._lifecycle_driver
        assert lifecycle is not None and driver is not None

        def serving() -> bool:
            return lifecycle.state in (LifecycleState.RUNNING, LifecycleState.PENDING_CONTROLLED_SHUTDOWN,
                                       LifecycleState.SHUTTING_DOWN)

        started = time.monotonic()
        while True:
            try:
                await asyncio.wait_for(driver.wait_for(serving), log_every_s)
                return
            except asyncio.TimeoutError:
                log.info("broker %d: waiting for the controller to unfence it (%s after %.0f s); client listeners "
                         "open once it has", self.node_id, lifecycle.state.name, time.monotonic() - started)

    async def controlled_shutdown(self) -> None:
        """SIGTERM: heartbeat WantShutDown until the controller answers ShouldShutDown (its leaders moved away)
        or ``broker.session.timeout.ms`` passed."""
        if self.lifecycle is None or self._lifecycle_driver is None or self._registrar is None:
            return
        self.lifecycle.begin_controlled_shutdown(monotonic_ms())
        self._lifecycle_driver.poke()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(self._registrar),
                                   self.lifecycle.controlled_shutdown_timeout_ms / 1000 + 1)
        log.info("broker %d: controlled shutdown finished: %s", self.node_id, self.lifecycle.shutdown_reason)

    @property
    def controller_id(self) -> int:
        """What Metadata/DescribeCluster answer as the controller: this node for a single voter. On a quorum
        (KRaft), as Kafka's brokers do, a live unfenced broker rather than the quorum leader, which a client
        would keep waiting on for as long as the followers take to notice it died: any broker forwards
        controller requests to the active controller. This node when it is unfenced (it is alive: it
        answers), else a random unfenced broker, else -1 (none: Kafka's NO_CONTROLLER_ID)."""
        if self.controller is None:
            return self.node_id
        me = self.image.brokers.get(self.node_id)
        if me is not None and not me.fenced:
            return self.node_id
        live = self.image.live_brokers()
        return random.choice(live).id if live else -1

    # ---- reads ----------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.applier.image

    def topic(self, name: str) -> TopicImage | None:
        return self.image.topic(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.image.topics_by_id.get(topic_id)

    def topic_names(self) -> list[str]:
        return sorted(self.image.topics_by_name)

    def topic_overrides(self, name: str) -> Mapping[str, str]:
        return self.image.topic_config(name)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        return self.image.partition(topic, partition)

    # ---- writes ---------------------------------------------------------------------------------------

    # ---- the QuorumWriter of this node's klog.controller.apis.ControllerApis ----------------------------

    def not_controller(self) -> TopicError | None:
        """None while this node decides metadata changes: a single voter always, a quorum member while it leads."""
        if self._raft_writer is None:
            return None
        return self._raft_writer.not_controller()

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Commit ``records`` and return once this broker published them (the files of its new partitions made on a
        worker thread after the commit, as every broker makes them when it applies the records); raises TopicError
        when they were not committed. Refused up front (nothing committed) when the metadata log dir is offline
        (KAFKA_STORAGE_ERROR) or the new partitions on this broker would exceed klog.max.partitions.per.broker
        (POLICY_VIOLATION)."""
        planned = _new_partitions(self.image, records, self.node_id)
        self.partitions.check_metadata_dir_online()
        if planned:
            self.partitions.check_partition_limit(next(iter(planned)),
                                                  sum(len(parts) for parts, _ in planned.values()))
        if self._raft_writer is not None:
            await self._raft_writer.commit(records)
        else:
            self._commit(records)
        await self._until_published(self.image.highest_offset)

    def _commit(self, records: list[MetadataRecord] | Any) -> None:
        # A record that does not replay on the image must never reach the log: every restart would fail on it.
        # The dry run raises MetadataReplayError (a controller bug) before anything is appended.
        replay(self.image, list(records))
        try:
            committed = self.quorum.propose(records)
        except OSError as exc:   # disk full, I/O error: the metadata log dir goes offline, nothing committed
            self.partitions.note_write_failure(exc, self.partitions.log_dirs[0])
            raise TopicError(KAFKA_STORAGE_ERROR, f"The cluster metadata log {self.log.dir} could not be "
                                                  f"written: {exc.strerror or exc}") from None
        size = self.log.log.size_in_bytes
        # from the end of what was applied (not the image's highest offset: that stays before a metadata transaction
        # the loader holds back, whose records it has already seen)
        self.applier.replay(list(self.log.read(self.applier.applied_index, committed)),
                            size - self._size_at_commit)
        self._size_at_commit = size
        self.applier.applied_index = committed
        self.maybe_snapshot()

    def maybe_snapshot(self) -> None:
        """Write a snapshot of the image when the policy says so (after a commit, and from the broker's
        maintenance pass for the time-based key), so a restart replays at most that much log (the log itself is
        kept: nothing truncates it yet)."""
        if self.controller is not None:   # the Raft member snapshots its own image
            return
        now = _monotonic_ms()
        if not self.applier.snapshot_due(now):
            return
        try:
            snapshot = self.log.write_snapshot(self.image)
            for old in self.log.snapshots()[:-SNAPSHOTS_KEPT]:
                os.remove(os.path.join(self.log.dir, old.filename))
        except OSError as exc:   # the log stays whole: the next restart replays more of it
            log.warning("could not write a metadata snapshot in %s: %s", self.log.dir, exc)
            return
        since = self.applier.bytes_since_snapshot
        self.applier.snapshot_taken(snapshot.end_offset, now)
        log.info("wrote metadata snapshot %s (%d bytes of log since the previous one)", snapshot.filename, since)

    # ---- publishing ------------------------------------------------------------------------------------

    def _on_changes(self, image: MetadataImage, changes: MetadataChanges) -> None:
        """A committed image (the applier's callback, on the event loop): published at once when it makes no
        partition files here, else once they are made on a worker thread; always in commit order. Held back while
        this quorum member catches up with the quorum's log (:meth:`_caught_up`)."""
        if self._stopped:
            return
        if self.controller is not None and self._catch_up.catching_up:
            if self._applied_before_start is not None and self.applier.applied_index > self._applied_before_start:
                self._deleted_while_away.update(changes.deleted_topics.values())
            if self._caught_up():
                self._publish_first_image()
            return
        self._enqueue(image, changes)

    def _enqueue(self, image: MetadataImage, changes: MetadataChanges) -> None:
        if not self._unpublished and not self._missing_logs(image, changes):
            self._publish_logged(image, changes)
            return
        self._unpublished.append((image, changes))
        if self._publisher is None:
            self._publisher = asyncio.get_running_loop().create_task(
                self._publish_in_order(), name=f"broker-{self.node_id}-metadata-publisher")

    async def _publish_in_order(self) -> None:
        """Publish the queued images in order, each once the files of its new local partitions are made (Kafka's
        broker creates a partition's log when it applies the delta that places it there). A partition whose
        files cannot be made (out of descriptors, disk full) is not served; the next image that touches its
        topic tries again."""
        loop = asyncio.get_running_loop()
        try:
            while self._unpublished and not self._stopped:
                image, changes = self._unpublished[0]
                failed: set[tuple[str, int]] = set()
                for name, (parts, overrides, followed) in self._missing_logs(image, changes).items():
                    self.partitions.creating_partitions += len(parts)
                    topic = image.topic(name)
                    assert topic is not None
                    # where the log goes: as the newest image queued has it (a replay at the start queues the
                    # record placing the replica and the later one naming its dir; Kafka's broker makes logs only
                    # once its metadata has caught up), for the same topic
                    newest = self._unpublished[-1][0].topic(name)
                    dirs, _ = self._log_dirs(name, newest if newest is not None and newest.id == topic.id else topic)
                    try:
                        self._making_files = loop.run_in_executor(
                            None, self.partitions.create_logs, name, parts, overrides, followed, dirs, topic.id)
                        await asyncio.shield(self._making_files)
                    except TopicError as exc:   # CreationFailed: what it made was removed again
                        log.error("partitions %s of topic %s are not served here: %s",
                                  ",".join(str(p) for p, _ in parts), name, exc.message)
                        failed.update((name, p) for p, _ in parts)
                    finally:
                        self._making_files = None
                        self.partitions.creating_partitions -= len(parts)
                    if self._stopped:
                        return
                self._unpublished.popleft()
                self._publish_logged(image, changes, not_served=failed)
        finally:
            self._publisher = None

    def _publish_logged(self, image: MetadataImage, changes: MetadataChanges,
                        not_served: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset()) -> None:
        """:meth:`_publish`, whose failure is logged and counted as published: one image that cannot be published
        must not stop the later ones (Kafka's broker logs a metadata publishing fault and goes on)."""
        try:
            self._publish(image, changes, not_served=not_served)
        except Exception:
            log.exception("publishing the metadata image at offset %d failed", image.highest_offset)
            self._published(image.highest_offset)

    def _missing_logs(self, image: MetadataImage, changes: MetadataChanges
                      ) -> dict[str, tuple[list[tuple[int, int]], dict[str, str], set[int]]]:
        """Topic -> (its partitions (index, leader epoch) placed on this broker with no log open yet, its overrides,
        those of them this broker follows) of the topics ``changes`` touch; not those whose log is not made here
        (:meth:`_log_dirs`)."""
        touched = set(changes.created_topics.values())
        touched.update(c.topic_name for c in changes.changed_partitions)
        out: dict[str, tuple[list[tuple[int, int]], dict[str, str], set[int]]] = {}
        for name in sorted(touched):
            topic = image.topic(name)
            if topic is None:
                continue
            _, skipped = self._log_dirs(name, topic)
            parts = [(p, r.leader_epoch) for p, r in topic.partitions.items()
                     if self.node_id in r.replicas and self.partitions.get(name, p) is None and p not in skipped]
            if parts:
                followed = {p for p, _ in parts if topic.partitions[p].leader != self.node_id}
                out[name] = (parts, dict(image.topic_config(name)), followed)
        return out

    def _log_dirs(self, name: str, topic: TopicImage, warn: bool = False) -> tuple[dict[int, str], set[int]]:
        """Where the logs of ``topic``'s local replicas with no log yet are made, as Kafka's
        ``Partition.createLogInAssignedDirectoryId`` and ``LogManager.getOrCreateLog``: (partition -> its log dir,
        the partitions whose log is not made at all). A log goes to the dir AlterReplicaLogDirs named for it before
        it existed, else to the dir the partition's record names for this broker's replica when that is one of its
        online log dirs, else to the online dir, not cordoned, holding the fewest partitions (the native LogManager's
        choice, then told to the controller). While a log dir of this broker is offline, a replica the records place
        in a dir that is not one of its online dirs (the offline one may hold its log) gets no log and is not served,
        as on Kafka (a replica UNASSIGNED is made as usual), nor does one whose AlterReplicaLogDirs dir is offline
        (``warn``: say so in the log)."""
        offline = self.partitions.offline_dirs
        online = {i: d for d, i in self.dir_ids.items() if d not in offline and not _reserved_directory_id(i)}
        dirs: dict[int, str] = {}
        skipped: set[int] = set()
        for p, r in topic.partitions.items():
            if self.node_id not in r.replicas or self.partitions.log_manager.get(name, p) is not None:
                continue   # its log exists (loaded at the start, or made for an image not published yet)
            assigned = r.directory(self.node_id)
            # UNASSIGNED, and MIGRATING (records that name no dir: a single node, metadata before KIP-858), say
            # nothing about where the log is: made as usual, but on a single node that held the partition when it
            # started with a failed log dir
            if assigned not in online and offline and assigned not in (UNASSIGNED_DIRECTORY, MIGRATING_DIRECTORY) \
                    or (topic.id, p) in self._held_at_start:
                skipped.add(p)
                continue
            chosen = self.partitions.placement(name, p, online.get(assigned))
            if chosen is not None and chosen in offline:
                skipped.add(p)
            elif chosen is not None:
                dirs[p] = chosen
        if skipped and warn:
            log.warning("not making the logs of partition(s) %s of topic %s: a log dir of this broker is offline "
                        "and may hold them (the cluster metadata names no online log dir of this broker for them)",
                        ",".join(str(p) for p in sorted(skipped)), name)
        return dirs, skipped

    async def _until_published(self, offset: int) -> None:
        """Return once the image at ``offset`` (or a later one) is published to this broker's partitions."""
        if self.published_offset >= offset or self._stopped:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._publish_waiters.append((offset, future))
        await future

    def _published(self, offset: int) -> None:
        self.published_offset = max(self.published_offset, offset)
        if self._publish_waiters:
            waiting = []
            for wanted, future in self._publish_waiters:
                if wanted <= self.published_offset or self._stopped:
                    if not future.done():
                        future.set_result(None)
                else:
                    waiting.append((wanted, future))
            self._publish_waiters = waiting

    def _publish(self, image: MetadataImage, changes: MetadataChanges,
                 not_served: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset()) -> None:
        """Apply what changed to this broker's partitions: those whose replicas include this node (on a single
        voter, every partition of the image)."""
        if self.lifecycle is not None:
            self.lifecycle.set_metadata_offset(image.highest_offset)
        for tid, name in changes.deleted_topics.items():
            served = self.partitions.topics.get(name)
            if served is not None and served.topic_id == tid:
                self.partitions.remove_topic(name)
                self.on_topic_removed(name)
        if changes.deleted_topics:
            self.on_topics_deleted(sorted(changes.deleted_topics.values()))
        touched = set(changes.created_topics.values())
        touched.update(c.topic_name for c in changes.changed_partitions)
        self._update_cordoned_dirs(image)
        if self._dynamic_log_configs_changed(image, changes):   # every topic without its own value follows
            for name in sorted(set(self.partitions.topics) - touched):
                if image.topic(name) is not None:
                    self.partitions.set_topic_configs(name, dict(image.topic_config(name)))
                    if self.replicas is not None:
                        self.replicas.on_log_config(name)
        for rtype, rname in changes.changed_configs:
            if rtype == ConfigResourceType.TOPIC:
                if rname in touched or image.topic(rname) is None or rname not in self.partitions.topics:
                    continue
                self.partitions.set_topic_configs(rname, dict(image.topic_config(rname)))
                if self.replicas is not None:
                    self.replicas.on_log_config(rname)
        for name in sorted(touched):
            topic = image.topic(name)
            if topic is None:
                continue
            dirs, skipped = self._log_dirs(name, topic, warn=True)
            local = {p: r.leader_epoch for p, r in topic.partitions.items()
                     if self.node_id in r.replicas and (name, p) not in not_served and p not in skipped}
            # a partition whose follower append is under way starts its leader epoch when it ends (ReplicaManager)
            followed = {p for p, r in topic.partitions.items() if self.node_id in r.replicas and (
                r.leader != self.node_id or self.replicas is not None and self.replicas.still_appending((name, p)))}
            if local or name in self.partitions.topics:
                self.partitions.apply_topic(name, topic.id, local, dict(image.topic_config(name)), followed, dirs)
        if self.replicas is not None:
            self.replicas.on_image(image, sorted(touched), changes.deleted_topics.values())
        for name in sorted(touched):   # replicas moved away by a reassignment: their local copies go
            topic = image.topic(name)
            for p, r in (topic.partitions.items() if topic is not None else ()):
                if self.node_id not in r.replicas and self.partitions.get(name, p) is not None:
                    self.partitions.remove_partition(name, p)
        self._check_assignments(image, sorted(touched))
        for tid, name in changes.created_topics.items():
            topic = image.topics_by_id[tid]
            log.info("created topic %s with %d partition(s)%s", name, len(topic.partitions),
                     f" and configs {dict(image.topic_config(name))}" if image.topic_config(name) else "")
        log.debug("published the metadata image at offset %d (%d topics)", image.highest_offset,
                  len(image.topics_by_name))
        if not self.first_published:
            self._first_image_published()
        self.on_published()
        self._published(image.highest_offset)

    def _update_cordoned_dirs(self, image: MetadataImage) -> None:
        """cordoned.log.dirs (KIP-1066): this broker's dynamic value, else server.properties'. No new log is made in
        those dirs, and from metadata.version 4.3-IV0 the heartbeats report them to the controller, which then
        places no new replica here while every log dir of this broker is cordoned."""
        value = broker_dynamic_config(image, self.node_id, CORDONED_LOG_DIRS)
        entries = self.config[CORDONED_LOG_DIRS] if value is None else [e.strip() for e in value.split(",")
                                                                         if e.strip()]
        paths = cordoned_paths(entries, self.config.configured_log_dirs)
        if paths != self.partitions.cordoned_dirs:
            log.info("cordoned log dirs: %s", ", ".join(sorted(paths)) or "none")
            self.partitions.cordoned_dirs = paths
            if self._report_own_dirs is not None:
                self._report_own_dirs(self.own_dirs_all_cordoned())
        if self.lifecycle is not None and self._lifecycle_driver is not None \
                and (image.metadata_version or 0) >= MV_CORDONED_LOG_DIRS:
            if self.lifecycle.set_cordoned_log_dirs([i for d, i in self.dir_ids.items() if d in paths],
                                                    monotonic_ms()):
                self._lifecycle_driver.poke()

    def own_dirs_all_cordoned(self) -> bool:
        """Whether every online log dir of this node is cordoned (cordoned.log.dirs, KIP-1066)."""
        if not self.partitions.cordoned_dirs:
            return False
        online = [d for d in self.partitions.log_dirs if d not in self.partitions.offline_dirs]
        return all(os.path.abspath(d) in self.partitions.cordoned_dirs for d in online)

    def report_own_dirs_to(self, report: Callable[[bool], None]) -> None:
        """A single voter's broker tells its own controller whether its log dirs are all cordoned (its registration
        holds no log dirs, and it sends no heartbeat, which carries a quorum broker's cordoned dirs): now, whenever
        its cordoned dirs change (each published image) and whenever a log dir goes offline."""
        assert self.controller is None, "a quorum member's broker reports its log dirs in its heartbeats"
        self._report_own_dirs = report
        self.partitions.on_dirs_offline = lambda _offline: report(self.own_dirs_all_cordoned())
        report(self.own_dirs_all_cordoned())

    def _first_image_published(self) -> None:
        """A quorum member's broker asks to be unfenced once its first image is published (Kafka's broker waits
        for it before it sets itself ready to unfence)."""
        self.first_published = True
        if self.lifecycle is not None and self._lifecycle_driver is not None:
            self.lifecycle.set_ready_to_unfence(monotonic_ms())
            self._lifecycle_driver.poke()

    def _dynamic_log_configs_changed(self, image: MetadataImage, changes: MetadataChanges) -> bool:
        """Whether this broker's or the cluster's dynamic broker defaults of topic configs (log.retention.ms,
        compression.type, ...; Kafka's DynamicLogConfig) changed; they are in the broker config from now on."""
        own, cluster = (ConfigResourceType.BROKER, str(self.node_id)), (ConfigResourceType.BROKER, "")
        if not any((rtype, rname) in (own, cluster) for rtype, rname in changes.changed_configs):
            return False
        return self.partitions.config.set_dynamic_log_configs(image.configs.get(own, {}),
                                                              image.configs.get(cluster, {}))

    # ---- first records -----------------------------------------------------------------------------

    def _bootstrap(self, endpoints: Mapping[str, tuple[str, int]], legacy_producer_id_end: int) -> None:
        start = self.applier.loader.transaction_start
        abort = transaction_abort(start)
        if abort:   # the process died between the batches of a metadata transaction: none of it counts
            log.warning("the metadata log ends inside the transaction begun at offset %d (this node stopped while "
                        "writing it): aborting it", start)
            try:
                self._commit(abort)
            except TopicError as exc:
                raise RuntimeError(f"cannot abort the unfinished metadata transaction: {exc.message}") from None
        records: list[MetadataRecord] = []
        migrated_from = None
        if self.image.metadata_version is None:
            # the finalized features and what klog-broker format added (--feature levels, --add-scram credentials)
            records += bootstrap_records(read_bootstrap_records(self.config["metadata.log.dir"]
                                                                or self.config.log_dirs[0]),
                                         static_min_insync_replicas=self.config["min.insync.replicas"])
            store = os.path.join(self.config.log_dirs[0], TOPICS_FILE)
            try:
                migrated = topic_store_records([d for d in self.config.log_dirs
                                                if d not in self.partitions.failed_log_dirs], self.node_id)
            except ValueError as exc:
                raise RuntimeError(f"cannot migrate the single-node topic store: {exc}") from exc
            if legacy_producer_id_end > 0:   # ids single-node klog handed out are never handed out again
                records.append(record("ProducerIdsRecord", broker_id=self.node_id, broker_epoch=-1,
                                      next_producer_id=legacy_producer_id_end))
            if migrated:
                records += migrated
                migrated_from = store if os.path.exists(store) else None
                log.info("migrating %d topics of this data directory into the cluster metadata log",
                         sum(1 for r in migrated if r.name == "TopicRecord"))
        # the registration's offset is the broker epoch (one more for a BeginTransactionRecord before it)
        records.append(own_registration(self.config, endpoints, registration_epoch(
            self.quorum.committed_end, len(records), self.quorum.max_records_per_batch)))
        if len(records) == 1 and self.partitions.log_dirs[0] in self.partitions.offline_dirs:
            log.warning("not registering this start in the metadata log: its log dir is offline; the previous "
                        "registration stays")
            return
        try:
            self._commit(records)
        except TopicError as exc:
            if len(records) > 1:   # a new cluster's first records: nothing to serve without them
                raise RuntimeError(exc.message) from None
            log.warning("not registering this start in the metadata log (the previous registration stays): %s",
                        exc.message)
        elections = start_elections(self.image, self.config)
        if elections:
            try:
                self._commit(elections)
                log.info("elected this node leader of %d partitions that had no leader", len(elections))
            except TopicError as exc:
                log.warning("could not elect this node leader of the %d partitions without a leader: %s",
                            len(elections), exc.message)
        if migrated_from is not None:
            os.replace(migrated_from, migrated_from + MIGRATED_SUFFIX)

    def stop_publishing(self) -> None:
        """The broker is stopping: records the quorum commits from now on no longer reach its partitions (a
        combined node's controller keeps applying them to its own image until it stops too), as Kafka's broker
        removes its metadata publisher at shutdown. Idempotent."""
        if self.applier.on_changes in (self._publish, self._on_changes):
            self.applier.on_changes = None
        self._stopped = True
        self._unpublished.clear()
        if self._publisher is not None:
            self._publisher.cancel()
        if self._catch_up_task is not None:
            self._catch_up_task.cancel()
        self._published(self.published_offset)   # a commit waiting for its publication returns

    async def wait_files_made(self) -> None:
        """Once :meth:`stop_publishing` was called: wait for the partition files a worker thread is still making
        (the partitions are closed after)."""
        making = self._making_files
        if making is not None:
            with contextlib.suppress(Exception):
                await making

    def close(self) -> None:
        self.stop_publishing()
        if self._registrar is not None:
            self._registrar.cancel()
        if self.assignments is not None:
            self.assignments.close()
        if self.controller is not None:   # the Raft member owns and closes the metadata log
            return
        try:
            self.log.flush()
            self.log.close()
        except OSError as exc:   # e.g. its log dir is full: every commit was flushed already, indexes rebuild
            log.warning("could not close the metadata log %s cleanly: %s", self.log.dir, exc)


def _new_partitions(image: MetadataImage, records: Any, node_id: int
                    ) -> dict[str, tuple[list[tuple[int, int]], dict[str, str]]]:
    """Topic -> ((partition, leader epoch) pairs the records add with a replica on ``node_id``, the topic's
    overrides after them), read off the records (TopicRecord, PartitionRecord, ConfigRecord) without replaying
    them."""
    names = {t.id: t.name for t in image.topics_by_id.values()}
    out: dict[str, tuple[list[tuple[int, int]], dict[str, str]]] = {}
    overrides: dict[str, dict[str, str]] = {}
    for r in records:
        if r.name == "TopicRecord":
            names[r.data.topic_id] = r.data.name
            overrides[r.data.name] = {}
        elif r.name == "PartitionRecord" and r.data.topic_id in names and node_id in r.data.replicas:
            name = names[r.data.topic_id]
            configs = overrides.setdefault(name, dict(image.topic_config(name)))
            out.setdefault(name, ([], configs))[0].append((r.data.partition_id, r.data.leader_epoch))
        elif r.name == "ConfigRecord" and r.data.resource_type == ConfigResourceType.TOPIC:
            configs = overrides.setdefault(r.data.resource_name, dict(image.topic_config(r.data.resource_name)))
            if r.data.value is None:
                configs.pop(r.data.name, None)
            else:
                configs[r.data.name] = r.data.value
    return out


def _directory_ids(partitions: PartitionManager) -> dict[str, uuid.UUID]:
    """The ``directory.id`` of each log dir (its meta.properties; the zero UUID where there is none), but those whose
    meta.properties could not be read at startup."""
    return {d: stored_directory_id(d) or uuid.UUID(int=0) for d in partitions.log_dirs
            if d not in partitions.failed_log_dirs}


def _reserved_directory_id(directory: uuid.UUID) -> bool:
    """Kafka's ``DirectoryId.reserved``: UNASSIGNED, LOST, MIGRATING and the other ids below 100 name no log dir."""
    return directory.int < 100


def _monotonic_ms() -> float:   # the snapshot clock, as klog.controller.node's
    return time.monotonic() * 1000.0


def now_ms() -> int:
    return int(time.time() * 1000)
