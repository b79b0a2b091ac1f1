"""Broker-wide state shared by the handlers and handed to the group coordinator (see groups/api.py)."""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from klog.broker.config import BrokerConfig
from klog.broker.errors import (COORDINATOR_NOT_AVAILABLE, INVALID_TXN_STATE, NOT_LEADER_OR_FOLLOWER,
                               TOPIC_ALREADY_EXISTS)
from klog.broker.groups.api import AppendRefused
from klog.broker.clean_shutdown import (CLEAN_SHUTDOWN_FILE, NO_EPOCH, read_high_watermarks, read_previous_broker_epoch,
                                        write_broker_epoch, write_high_watermarks)
from klog.broker.cluster_metadata import ClusterMetadata, now_ms
from klog.broker.controller_channel import REQUEST_TIMEOUT_MS as CONTROLLER_REQUEST_TIMEOUT_MS
from klog.broker.controller_channel import ControllerChannel, ControllerConnection, controller_security
from klog.broker.fetch_sessions import FetchSessionCache
from klog.broker.access import AccessControl, access_control
from klog.broker.heartbeat_answers import HeartbeatAnswers
from klog.broker.metadata_answers import MetadataAnswers
from klog.broker.quotas import QuotaControl, quota_control
from klog.broker.share_partitions import SharePartitionManager
from klog.broker.security import InterBrokerConnector
from klog.broker.share_state import ShareCoordinatorFinder, ShareStateStore
from klog.broker.forwarding import ControllerForwarder
from klog.broker.groups import GroupCoordinator
from klog.broker.groups.coordinator import KEY_TYPE_SHARE, KEY_TYPE_TRANSACTION
from klog.broker.handlers.transactions import create_transaction_coordinator
from klog.broker.transactions.lazy import TRANSACTION_STATE_TOPIC, LazyTransactionCoordinator
from klog.broker.partitions import PartitionManager
from klog.broker.producer_id_blocks import LocalProducerIdManager, RpcProducerIdManager
from klog.broker import txn_index
from klog.broker.producer_state import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
)
from klog.broker.replication.manager import ReplicaManager, monotonic_ms
from klog.broker.replication.throttle import ReplicationThrottle
from klog.controller.apis import ControllerApis
from klog.controller.topics import CreatableTopic, TopicError, internal_topic_spec, is_internal
from klog.metadata.features import SHARE_VERSION
from klog.metadata.storage import METADATA_TOPIC
from klog.protocol.errors import ErrorCode, error_info
from klog.security.tokens import TokenCredentials, token_secret_key

if TYPE_CHECKING:
    from klog.broker.handlers.context import HandlerMetrics
    from klog.broker.telemetry import ClientTelemetry
    from klog.controller.describe_quorum import ControllerListener

log = logging.getLogger("klog.broker")

#: How long a quorum member waits for the active controller to create ``__consumer_offsets``.
INTERNAL_TOPIC_CREATE_TIMEOUT_S = 10.0
#: read size when replaying the log tail into the producer state at startup
PRODUCER_REPLAY_CHUNK_BYTES = 8 << 20
#: partitions named in the log line about the producer state rebuilt from their logs
LOGGED_PARTITIONS = 10
#: The CreateTopics a quorum member forwards to the active controller to auto-create a topic (Metadata with
#: allow_auto_topic_creation): its version and how long it is retried while the controller moves.
AUTO_CREATE_VERSION = 7
AUTO_CREATE_TIMEOUT_MS = 10_000


def _load_or_create_cluster_id(config: BrokerConfig, usable_dirs: list[str]) -> str:
    """Kafka keeps ``meta.properties`` (version, node.id, cluster.id, directory.id) in every log dir; klog
    does the same so a data dir cannot silently be reused by another node id. ``usable_dirs``: the log dirs whose
    meta.properties could be read at startup (a failed one is left alone, offline)."""
    from klog.controller.applier import new_cluster_id
    from klog.controller.node import META_PROPERTIES, stored_cluster_id, write_meta_properties

    found = stored_cluster_id(usable_dirs, config.node_id)
    if found is None:
        metadata_log = os.path.join(config.log_dirs[0], METADATA_TOPIC + "-0")
        if any(name.endswith((".log", ".checkpoint")) and os.path.getsize(os.path.join(metadata_log, name))
               for name in (os.listdir(metadata_log) if os.path.isdir(metadata_log) else ())):
            # the metadata log belongs to a cluster whose id only meta.properties names: never invent another
            raise RuntimeError(f"{metadata_log} holds cluster metadata but {META_PROPERTIES} is missing from "
                               f"{', '.join(config.log_dirs)}: restore it (cluster.id, node.id)")
    if found is not None and config["cluster.id"] and found != config["cluster.id"]:
        raise RuntimeError(f"log dirs belong to cluster {found}, config says cluster.id {config['cluster.id']}")
    cluster_id = config["cluster.id"] or found or new_cluster_id()
    for directory in usable_dirs:
        write_meta_properties(directory, config.node_id, cluster_id)
    _check_directory_ids(usable_dirs)
    return cluster_id


def _check_directory_ids(log_dirs: list[str]) -> None:
    """Each log dir needs a directory.id of its own (the controller tracks replicas by it, KIP-858): a
    ``meta.properties`` copied from another dir is refused, as Kafka refuses to start on duplicate directory ids."""
    from klog.controller.meta_properties import META_PROPERTIES, stored_directory_id

    seen: dict[uuid.UUID, str] = {}
    for directory in log_dirs:
        directory_id = stored_directory_id(directory)
        if directory_id is None:
            continue
        if directory_id in seen:
            raise RuntimeError(f"{os.path.join(directory, META_PROPERTIES)} has the same directory.id as "
                               f"{os.path.join(seen[directory_id], META_PROPERTIES)}: each log dir needs its own "
                               "(remove the meta.properties of the dir that is a copy: the next start writes it again)")
        seen[directory_id] = directory


#: Kafka's (and klog's storage's) marker of a clean shutdown in each log dir, removed while the broker runs.
CLEAN_SHUTDOWN_MARKER = CLEAN_SHUTDOWN_FILE
METADATA_LOG_DIR_NAME = f"{METADATA_TOPIC}-0"


def _unclean_log_dirs(log_dirs: list[str]) -> dict[str, int]:
    """Partition directories (path -> bytes in their ``.log`` files) of the log dirs that hold partitions but no
    clean-shutdown marker: the last run ended in a crash or a kill, and opening them runs recovery."""
    out: dict[str, int] = {}
    for directory in log_dirs:
        if os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_MARKER)) or not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            # the metadata log is recovered by its own owner (the quorum member), before the broker starts
            if entry.is_dir() and "-" in entry.name and entry.name != METADATA_LOG_DIR_NAME:
                out[entry.path] = _segment_bytes(entry.path)
    return out


def _segment_bytes(partition_dir: str) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(partition_dir) if e.name.endswith(".log"))
    except OSError:  # deleted by recovery (an interrupted topic deletion)
        return 0


def _set_transactions(log_: Any, producers: ProducerStateManager, topic: str, partition: int, *,
                      aborted: bool = True) -> None:
    """Set a partition's first unstable offset (at its high watermark now) and (``aborted``) its aborted transactions
    on its log: the bounds of its cleaner and of the native paths, and what the native Fetch path tells
    read_committed consumers."""
    log_.first_unstable_offset = producers.first_unstable_offset(topic, partition, log_.high_watermark)
    if aborted:
        log_.aborted_transactions = [(a.producer_id, a.first_offset, a.last_offset)
                                     for a in producers.aborted_in_log(topic, partition)]


class BrokerState:
    """Everything a handler can reach. Implements ``klog.broker.handlers.context.HandlerBroker`` (what handlers
    read) and ``klog.broker.groups.api.BrokerContext`` (what the group coordinator uses)."""

    def _image_configs(self) -> Mapping[Any, Mapping[str, str]]:
        """The configs of the metadata image this broker serves (its dynamic broker configs among them)."""
        return self.metadata.image.configs

    def __init__(self, config: BrokerConfig, loop: asyncio.AbstractEventLoop, controller: Any = None, *,
                 metrics: HandlerMetrics | None = None, api_versions: Mapping[int, tuple[int, int]] | None = None,
                 controller_listener: ControllerListener | None = None,
                 bound_ports: Mapping[str, int] | None = None,
                 failed_log_dirs: Mapping[str, str] | None = None) -> None:
        """``controller``: the node's klog.controller.node.ControllerNode (or MetadataObserver) on a multi-node
        quorum (its applied image is what this broker serves), else None (a single voter over the first log dir's
        metadata log); ``metrics``: the broker's metrics (klog.metrics.listener set), handlers count into them;
        ``api_versions``: what ApiVersions advertises; ``controller_listener``: a combined node's controller
        listener (DescribeQuorum); ``bound_ports``: listener name -> the port it is bound to (the server binds
        before it makes the state; None: not bound, as in tests of the state alone); ``failed_log_dirs``: the log
        dirs whose meta.properties could not be read at startup (dir -> why; read here when not given), offline from
        the start as in Kafka (KIP-858: their replicas are not served, the controller moves their leaderships).
        Every part is made here, in dependency order, each given what it needs."""
        self.config = config
        self.loop = loop
        self.node_id = config.node_id
        if failed_log_dirs is None:
            from klog.controller.meta_properties import node_meta_properties

            failed_log_dirs = node_meta_properties(config).failed
        #: the log dirs offline from the start: their meta.properties could not be read
        self.failed_log_dirs: dict[str, str] = {d: why for d, why in failed_log_dirs.items() if d in config.log_dirs}
        usable_dirs = [d for d in config.log_dirs if d not in self.failed_log_dirs]
        self.cluster_id = _load_or_create_cluster_id(config, usable_dirs)
        #: listener name -> (host, port) given to clients who connected through that listener; an advertised port
        #: 0 is the port the listener is bound to, an empty host is this machine's name (as Kafka does)
        self.endpoints: dict[str, tuple[str, int]] = {}
        for listener in config.listeners:
            advertised = config.advertised[listener.name]
            port = advertised.port or (bound_ports or {}).get(listener.name, 0)
            self.endpoints[listener.name] = (advertised.host or socket.getfqdn(), port)
        #: how this broker reaches the other brokers (replica fetchers, transaction markers, share-group state):
        #: the inter-broker listener's TLS and SASL settings
        self.inter_broker = InterBrokerConnector(config, self._image_configs)
        #: the inter-broker listener, under which other brokers' endpoints are looked up
        self.listener_name = self.inter_broker.listener_name
        self.rack: str | None = config["broker.rack"]
        unclean = _unclean_log_dirs(usable_dirs)
        #: the broker epoch the last clean stop left (read before the logs open: opening removes the file); a failed
        #: log dir has none, so a start with one counts as unclean, as Kafka's (KIP-966)
        self.previous_broker_epoch = read_previous_broker_epoch(config.log_dirs)
        restored_high_watermarks = read_high_watermarks(usable_dirs)
        self.partitions = PartitionManager(config, loop, failed_log_dirs=self.failed_log_dirs)
        if unclean:
            dirs = sorted({os.path.dirname(p) for p in unclean})
            cut = {p: before - _segment_bytes(p) for p, before in unclean.items()}
            truncated = {os.path.basename(p): n for p, n in cut.items() if n > 0}
            log.warning("the last shutdown was unclean (no %s in %s): recovery checked %d partition logs from their "
                        "recovery points and rebuilt their indexes; %s", CLEAN_SHUTDOWN_MARKER, ", ".join(dirs),
                        len(unclean), "no data was cut" if not truncated else
                        f"{sum(truncated.values())} bytes of unfinished batches were cut from {len(truncated)} "
                        f"partitions ({', '.join(sorted(truncated)[:10])})")
        self.producers = ProducerStateManager(config.log_dirs[0], config["producer.id.expiration.ms"],
                                              on_txn_started=self._txn_started,
                                              on_txns_changed=self._txns_changed)
        #: the producer-state snapshot's log end offset per partition (None: no snapshot), each partition's log
        #: replayed from there when it opens: a quorum member opens its logs only as the metadata image places
        #: them on it, after this constructor (the image starts at the last metadata snapshot and the rest of
        #: the quorum's log follows), so the state is rebuilt per log, as each opens (:meth:`_log_opened`)
        self._producer_snapshot = self.producers.load()
        #: partition -> bytes of its log replayed into the producer state since the last log line about it
        self._replayed: dict[str, int] = {}
        self.partitions.on_log_opened = self._log_opened
        #: leader or follower of each local partition (klog.broker.replication), as the image says
        # ISR changes go to the active controller of a multi-node quorum
        isr_channel = None if controller is None else ControllerConnection(
            controller.controller_addresses, leader=controller.leader_address,
            client_id=f"klog-broker-{self.node_id}-alter-partition", request_timeout_ms=config["request.timeout.ms"],
            security=controller_security(controller))
        self.replicas = ReplicaManager(config.node_id, config, self.partitions, leader_address=self._broker_address,
                                       on_follower_appended=self._replay_replicated,
                                       on_follower_truncated=self._follower_truncated, controller=isr_channel,
                                       connector=self.inter_broker,
                                       restored_high_watermarks=restored_high_watermarks,
                                       first_unstable_offset=self.producers.first_unstable_offset)
        #: leader.replication.throttled.rate for the replica fetches this broker answers (the Fetch handler)
        self.leader_throttle = ReplicationThrottle.leader(config.node_id, lambda: self.replicas.image, config,
                                                          monotonic_ms)
        #: the KIP-227 fetch sessions of the consumers and replicas fetching from this broker (the Fetch handler)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                max_partitions=config["klog.fetch.session.max.partitions"],
                                                max_cached_partitions=config[
                                                    "klog.fetch.session.cache.max.partitions"])
        #: consumers' sessions are handed over to the native Fetch path's table (klog/broker/native_fetch.py)
        self.fetch_sessions.native = self.partitions.fetch_routes
        #: KIP-932: the share-partitions of the partitions this broker leads, and the share sessions of the share
        #: consumers fetching from it (klog.broker.handlers.share)
        self.share_partitions = SharePartitionManager(config, store=ShareStateStore(self, config))
        self.share_partitions.on_acquirable = self.partitions.wake_share
        self.share_sessions: dict[tuple[str, str], Any] = {}
        #: the transaction coordinator (producer ids, markers; it reads only the config until it starts), and the
        #: group coordinator, which answers FindCoordinator for transactional ids with the transaction
        #: coordinator's runtime; a quorum member coordinates the partitions of their topics it leads, which
        #: change with each published image
        # made on first use: a broker whose clients use no transactions does not load the coordinator
        self.transactions = LazyTransactionCoordinator(
            lambda: create_transaction_coordinator(self),
            lambda: self.metadata.topic(TRANSACTION_STATE_TOPIC) is not None)
        share_finder = ShareCoordinatorFinder(self, self.share_partitions.store, self.share_groups_enabled)
        self.coordinator = GroupCoordinator(self, other_key_types={KEY_TYPE_TRANSACTION: self.transactions.runtime,
                                                                   KEY_TYPE_SHARE: share_finder})
        #: called after each image published, after the coordinators (the native front re-reads the client
        #: quotas: a quota set while it holds connections applies to their next request, as in Kafka)
        self.after_publish: list[Callable[[], object]] = []
        #: the committed cluster metadata (topics, partitions, configs, brokers) handlers read, and the
        #: controller operations that change it; publishing it opens this broker's partition logs
        self.metadata = ClusterMetadata(config, self.cluster_id, self.partitions, self.endpoints,
                                        on_topic_removed=self.producers.forget_topic,
                                        legacy_producer_id_end=self.producers.legacy_block_end(),
                                        controller=controller, replicas=self.replicas,
                                        on_published=self._metadata_published,
                                        on_topics_deleted=self.coordinator.on_topics_deleted,
                                        previous_broker_epoch=self.previous_broker_epoch)
        #: the controller's decisions (CreateTopics, configs, elections, producer-id blocks, internal topics...),
        #: committed through this node's metadata: called in process while this node is the active controller (or
        #: a single voter), else forwarded
        self.controller_apis = ControllerApis(
            self.metadata, config, decisions=getattr(controller, "decisions", None))
        if controller is None:   # a single voter: its broker tells its own controller what a heartbeat would
            self.metadata.report_own_dirs_to(
                functools.partial(self.controller_apis.topics.report_all_dirs_cordoned, self.node_id))
        #: a single voter's producer ids, from blocks its controller commits
        self.local_producer_ids = LocalProducerIdManager(self._allocate_producer_id_block)
        #: the authorization hook (authorizer.class.name set), None: every request is allowed
        self.access: AccessControl | None = access_control(config, lambda: self.metadata.image.acls)
        #: Metadata answers kept encoded while the image they came from is current; none under an authorizer
        #: (an answer depends on the principal's ACLs then)
        self.metadata_answers: MetadataAnswers | None = MetadataAnswers(self.metadata) if self.access is None else None
        #: the auto-creations Metadata requests started and not finished, by topic (Kafka's AutoTopicCreationManager
        #: keeps such an in-flight set: a topic asked for again meanwhile is not sent to the controller again)
        self._auto_creations: dict[str, asyncio.Task[None]] = {}
        #: the SCRAM credentials of the image's delegation tokens (SCRAM logins with tokenauth=true)
        self.token_credentials = TokenCredentials(token_secret_key(config),
                                                  lambda: self.metadata.image.delegation_tokens,
                                                  lambda: int(time.time() * 1000))
        #: the client-quota hook (ClientQuotaRecords of the image): throttle times for the connection layer
        self.quotas: QuotaControl = quota_control(config, lambda: self.metadata.image.client_quotas)
        self._telemetry: ClientTelemetry | None = None
        #: a quorum member's requests to the active controller, and its producer ids from controller-allocated
        #: blocks (None on a single voter, which commits its blocks itself)
        self.controller_channel: ControllerChannel | None = None
        self.producer_id_manager: RpcProducerIdManager | None = None
        if controller is not None:
            self.controller_channel = ControllerChannel(ControllerConnection(
                controller.controller_addresses, leader=controller.leader_address,
                client_id=f"klog-broker-{self.node_id}-to-controller", request_timeout_ms=CONTROLLER_REQUEST_TIMEOUT_MS,
                security=controller_security(controller)))
            self.producer_id_manager = RpcProducerIdManager(
                self.node_id, lambda: self.metadata.lifecycle.broker_epoch if self.metadata.lifecycle else -1,
                self.controller_channel)
        legacy_ids = self.producers.legacy_block_path()
        if os.path.exists(legacy_ids) and self.metadata.image.next_producer_id >= self.producers.legacy_block_end():
            os.replace(legacy_ids, legacy_ids + ".migrated")   # the metadata log holds the next producer id now
        #: a quorum member's broker forwards the controller's requests to the active controller (None: a single
        #: voter decides them)
        self.forwarder = None if controller is None else ControllerForwarder(self.node_id, controller.driver)
        self._log_replayed()
        #: klog.broker.metrics.BrokerMetrics when klog.metrics.listener is set (handlers count bytes into it)
        self.metrics = metrics
        #: api key -> (min, max) advertised in ApiVersions
        self.api_versions: dict[int, tuple[int, int]] = dict(api_versions or {})
        #: common Heartbeats answered on the connection (klog/broker/heartbeat_answers.py); none under an authorizer
        #: (Read on the group is checked per request) or with klog.heartbeat.fast.enable=false
        self.heartbeat_answers: HeartbeatAnswers | None = \
            HeartbeatAnswers(self.coordinator, self.api_versions) \
            if self.access is None and config["klog.heartbeat.fast.enable"] else None
        self.started_at = time.time()
        #: klog.controller.describe_quorum.ControllerListener of a combined node's controller (DescribeQuorum)
        self.controller_listener = controller_listener
        # one owner each: a quorum member forwards, asks the controller for producer ids, and follows its image
        assert (controller is None) == (self.forwarder is None) == (self.producer_id_manager is None) \
            == (self.controller_channel is None) == (self.metadata.controller is None)
        assert controller_listener is None or controller is not None, "a controller listener needs a quorum"

    def _metadata_published(self) -> None:
        """After each image published to this broker's partitions: the coordinators follow the leaders of their
        topics' partitions."""
        self._log_replayed()
        self.coordinator.on_metadata_published()
        self.transactions.on_metadata_published()
        for hook in self.after_publish:
            hook()

    def _log_opened(self, topic: str, partition: int, log_: Any) -> None:
        """A partition log opened (at startup, or when the image placed it here later): its producer state as the
        log holds it, Kafka's loadProducerState. The aborted transactions its .txnindex files list; then the log
        written after the producer-state snapshot is replayed (after a crash up to one checkpoint interval of
        batches, after a clean stop nothing), so that retries are recognised, open transactions hold the last
        stable offset and their markers index the aborted ones (without it, a node restarted after a SIGKILL
        served aborted records to read_committed consumers: docs/reliability.md)."""
        # the log's append paths check and record producers' batches in the partition's table
        log_.producers = self.producers.table(topic, partition)
        end = log_.log_end_offset
        aborted = txn_index.read(log_.dir)
        if aborted is not None:   # Kafka's .txnindex files list the partition's aborted transactions
            if any(entry[2] >= end for entry in aborted):   # recovery cut the log below some markers
                txn_index.truncate(log_.dir, end)
                aborted = [entry for entry in aborted if entry[2] < end]
            self.producers.restore_aborted(topic, partition, aborted)
        self.producers.truncate_check(topic, partition, end)
        snapshot = self._producer_snapshot
        if snapshot is not None:
            start = snapshot.pop((topic, partition), log_.log_start_offset)
        else:
            # No snapshot at all (first start, or from before snapshots): the last segment is enough
            # to recognise retries of recent batches.
            bases = log_.segment_base_offsets()
            start = bases[-1] if bases else log_.log_start_offset
        start = max(start, log_.log_start_offset)
        began, replayed = time.monotonic(), 0
        while start < end:
            chunk = log_.read(start, PRODUCER_REPLAY_CHUNK_BYTES, max_offset=end, min_one_batch=True)
            if not chunk.length:
                break
            next_offset = self.producers.replay(topic, partition, chunk.to_bytes(), now_ms())
            if next_offset <= start:
                break
            replayed += chunk.length
            start = next_offset
        if replayed:
            self._replayed[f"{topic}-{partition}"] = replayed
            log.debug("%s-%d: rebuilt producer state from %d bytes of log in %.0f ms", topic, partition, replayed,
                      (time.monotonic() - began) * 1000)
        # (the snapshot's, which no change may have set yet)
        _set_transactions(log_, self.producers, topic, partition)

    def _log_replayed(self) -> None:
        """One log line for the producer state rebuilt from the logs opened since the last one (the partitions
        named, up to LOGGED_PARTITIONS)."""
        if self._replayed:
            names = sorted(self._replayed)
            more = f" and {len(names) - LOGGED_PARTITIONS} more" if len(names) > LOGGED_PARTITIONS else ""
            log.info("rebuilt producer state from %d bytes of log of %d partitions (%s%s)",
                     sum(self._replayed.values()), len(names), ", ".join(names[:LOGGED_PARTITIONS]), more)
            self._replayed = {}

    def save_producer_state(self) -> None:
        """Snapshot the producer state; skipped while its log dir is offline (the next start replays the log
        from the last snapshot that was written)."""
        log_dir = self.producers.log_dir
        if log_dir in self.partitions.offline_dirs:
            return
        # a follower append in flight on a worker thread may already count in the log end while its producers
        # are not replayed yet: the snapshot covers the log only up to where that append started
        appending = self.replicas.fetchers.appending if self.replicas.fetchers is not None else {}
        offsets = {key: appending.get(key, log_.log_end_offset) for key, log_ in self.partitions.logs()}
        try:
            self.producers.save(offsets)
        except OSError as exc:
            self.partitions.note_write_failure(exc, log_dir)
            raise

    def _follower_truncated(self, key: tuple[str, int], log_end: int) -> None:
        self.producers.truncate_check(key[0], key[1], log_end)
        log_ = self.partitions.get(key[0], key[1])
        if log_ is not None:
            try:
                txn_index.truncate(log_.dir, log_end)
            except OSError as exc:
                log.warning("%s-%d: truncating the aborted-transaction index failed: %s", key[0], key[1], exc)

    def _txn_started(self, topic: str, partition: int, first_offset: int) -> None:
        """A transaction started at ``first_offset``: the log cleaner and the native Fetch path's read_committed
        consumers stay below it from now on (the log's own append lowered the bound already on a leader; the replica
        manager sets it again with each high watermark)."""
        log_ = self.partitions.get(topic, partition)
        if log_ is not None and first_offset < log_.first_unstable_offset:
            log_.first_unstable_offset = first_offset

    def _txns_changed(self, topic: str, partition: int, added: CompletedTxn | None, replaced: bool) -> None:
        """A transaction of the partition ended (``added``: it was aborted), or its aborted transactions were
        ``replaced``: an abort's .txnindex entry, and the log's first unstable offset (the replica manager sets it
        with each high watermark, but a marker's high watermark may be set before its transaction is ended here)
        and aborted transactions again, where the native Fetch path reads them for consumers (the producer state
        stays their owner)."""
        log_ = self.partitions.get(topic, partition)
        if log_ is None:
            return
        if added is not None:   # (before the bound moves past it)
            self._index_aborted(log_, topic, partition, added,
                                self.producers.last_stable_offset(topic, partition, added.last_offset + 1,
                                                                  log_.log_start_offset))
            log_.add_aborted_transaction(added.producer_id, added.first_offset, added.last_offset)
        _set_transactions(log_, self.producers, topic, partition, aborted=replaced)

    @staticmethod
    def _index_aborted(log_: Any, topic: str, partition: int, aborted: CompletedTxn, last_stable_offset: int) -> None:
        """A marker aborted a transaction (on the leader or a follower): its entry in the .txnindex of the segment
        holding the marker, as Kafka writes it."""
        try:
            base = txn_index.segment_of(aborted.last_offset, log_.segment_base_offsets())
            txn_index.append(log_.dir, base, aborted.producer_id, aborted.first_offset, aborted.last_offset,
                             last_stable_offset)
        except OSError as exc:
            log.warning("%s-%d: writing the aborted-transaction index failed: %s", topic, partition, exc)

    def prune_aborted_transactions(self) -> None:
        """After retention: forget the aborted transactions below each log's start and remove the .txnindex files
        of deleted segments."""
        for (topic, partition), log_ in list(self.partitions.logs()):
            self.producers.drop_aborted_before(topic, partition, log_.log_start_offset)
            emptied = self._cleaned_aborted(topic, partition, log_)
            if emptied:
                self.producers.drop_aborted(topic, partition, emptied)
                try:
                    txn_index.remove(log_.dir, emptied)
                except OSError as exc:
                    log.warning("%s-%d: rewriting the aborted-transaction index failed: %s", topic, partition, exc)
            try:
                txn_index.remove_orphans(log_.dir, log_.segment_base_offsets(), log_.log_start_offset)
            except OSError as exc:
                log.warning("%s-%d: removing aborted-transaction index files failed: %s", topic, partition, exc)

    def _cleaned_aborted(self, topic: str, partition: int, log_: Any) -> set[tuple[int, int]]:
        """The aborted transactions of a compacted partition whose records the log cleaner removed: their ABORT
        marker carries a delete horizon (the cleaner sets one only once no record of the transaction is left) or
        is gone. Their index entries must go before the marker does: a consumer told of an aborted transaction
        whose marker it never meets would skip the producer's later transactions too."""
        aborted = self.producers.aborted_in_log(topic, partition)
        if not aborted or "compact" not in self.partitions.topic_config(topic)["cleanup.policy"]:
            return set()
        emptied: set[tuple[int, int]] = set()
        for txn in aborted:
            if txn.last_offset >= log_.high_watermark:
                continue
            try:
                chunk = log_.read(txn.last_offset, BATCH_HEADER_SIZE, max_offset=txn.last_offset + 1,
                                  min_one_batch=True)
                head = chunk.to_bytes()[:BATCH_HEADER_SIZE] if chunk.length else b""
            except (OSError, ValueError) as exc:
                log.warning("%s-%d: reading the marker at %d failed: %s", topic, partition, txn.last_offset, exc)
                continue
            if len(head) < BATCH_HEADER_SIZE:
                emptied.add((txn.producer_id, txn.last_offset))
                continue
            base_offset, attributes, producer_id = (int.from_bytes(head[0:8], "big", signed=True),
                                                    int.from_bytes(head[21:23], "big"),
                                                    int.from_bytes(head[43:51], "big", signed=True))
            if (base_offset != txn.last_offset or producer_id != txn.producer_id or not attributes & CONTROL_FLAG
                    or attributes & DELETE_HORIZON_FLAG):
                emptied.add((txn.producer_id, txn.last_offset))
        return emptied

    def _replay_replicated(self, key: tuple[str, int], records: Any) -> None:
        """A follower appended the leader's batches: their producers' sequences are known here too."""
        self.producers.replay(key[0], key[1], records, now_ms())

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """Where another broker listens for this broker's replica fetches (the listener of the same name as this
        broker's first, Kafka's inter-broker listener), from its registration in the image."""
        registration = self.metadata.image.brokers.get(broker_id)
        endpoint = None if registration is None else registration.endpoint(self.listener_name)
        return None if endpoint is None else (endpoint.host, endpoint.port)

    @property
    def telemetry(self) -> ClientTelemetry:
        """KIP-714 client instances, their subscriptions (CLIENT_METRICS configs) and pushed metrics: made (and its
        module imported) on the first telemetry request or metrics scrape, which most brokers never see."""
        if self._telemetry is None:
            from klog.broker.telemetry import ClientTelemetry

            config = self.config
            self._telemetry = ClientTelemetry(lambda: self.metadata.image.configs,
                                              max_bytes=int(config["telemetry.max.bytes"]),
                                              max_clients=int(config["klog.telemetry.max.clients"]),
                                              expiry_intervals=int(config["klog.telemetry.expiry.intervals"]))
        return self._telemetry

    # ---- groups.api.BrokerContext -------------------------------------------------------------------

    @property
    def host(self) -> str:
        """Advertised host of the first listener (what FindCoordinator answers)."""
        return self.endpoints[self.listener_name][0]

    @property
    def port(self) -> int:
        return self.endpoints[self.listener_name][1]

    @property
    def log_manager(self) -> Any:
        return self.partitions.log_manager

    def share_groups_enabled(self) -> bool:
        """The cluster finalized share.version 1 (its share coordinator answers FindCoordinator key type 2)."""
        return self.metadata.image.features.get(SHARE_VERSION, 0) >= 1

    def ensure_internal_topic(self, topic: str, num_partitions: int, configs: dict[str, str]) -> None:
        """``topic`` exists (it is created by :meth:`ensure_internal_topic_async`, a write that waits); OSError
        while it does not."""
        if self.metadata.topic(topic) is None:
            raise OSError(errno.EAGAIN, f"the internal topic {topic} is not created yet")

    async def _allocate_producer_id_block(self) -> tuple[int, int]:
        """A single voter's next block of producer ids from its controller; OSError when it cannot be committed
        (a storage error for InitProducerId)."""
        epoch = self.metadata.image.brokers[self.node_id].epoch
        try:
            return await self.controller_apis.allocate_producer_ids(self.node_id, epoch)
        except TopicError as exc:
            raise OSError(errno.EIO, exc.message) from None

    # ---- a quorum member's group coordination (the leader of an offsets partition coordinates its groups) ----

    def led_partitions(self, topic: str) -> set[int] | None:
        """The partitions of ``topic`` this broker leads and holds the log of; None on a single voter (it leads
        every partition there is)."""
        if self.metadata.controller is None:
            return None
        image_topic = self.metadata.topic(topic)
        if image_topic is None:
            return set()
        return {p for p, r in image_topic.partitions.items()
                if r.leader == self.node_id and self.partitions.get(topic, p) is not None}

    def partition_leader_endpoint(self, topic: str, partition: int, listener: str) -> tuple[int, str, int] | None:
        """(node id, host, port) on ``listener`` of the live broker leading ``topic``-``partition``, else None."""
        registration = self.metadata.partition(topic, partition)
        if registration is None or registration.leader < 0:
            return None
        broker = self.metadata.image.brokers.get(registration.leader)
        if broker is None or broker.fenced:
            return None
        if registration.leader == self.node_id:
            host, port = self.endpoints.get(listener, (self.host, self.port))
            return self.node_id, host, port
        endpoint = broker.endpoint(listener)
        return None if endpoint is None else (registration.leader, endpoint.host, endpoint.port)

    async def ensure_internal_topic_async(self, topic: str, num_partitions: int, configs: dict[str, str], *,
                                          replication_factor: int | None = None) -> None:
        """Create an internal topic if missing, decided by the controller: a single voter's own, or on a quorum
        the active controller, this node's when it is active, else a CreateTopics forwarded to it as any client's
        is. Raises OSError when it is not created (the caller answers COORDINATOR_NOT_AVAILABLE and the client asks
        again)."""
        if self.metadata.topic(topic) is not None:
            return
        controller = self.metadata.controller
        # the topic's replication factor setting (its spec's), capped by the controller at the brokers there are
        wanted = internal_topic_spec(topic, self.config).replication_factor if replication_factor is None \
            else replication_factor
        if controller is None:   # a single voter decides it
            try:
                code = await self.controller_apis.create_internal_topic(topic, num_partitions, wanted, configs)
            except TopicError as exc:  # e.g. the metadata log dir is offline: a storage error, as groups.api says
                raise OSError(errno.EIO, exc.message) from None
            if code:
                raise RuntimeError(f"could not create the internal topic {topic}: {error_info(code).name}")
            return
        control = self.controller_apis.topics
        # the replication factor the controller caps it at (live brokers, what it supports), so an ordinary
        # CreateTopics on the active controller accepts it
        rf = control.internal_replication_factor(wanted, self.metadata.image)
        code = await self._create_topic_through_controller(
            CreatableTopic(topic, num_partitions, rf, None, dict(configs)), int(INTERNAL_TOPIC_CREATE_TIMEOUT_S * 1000))
        if code not in (ErrorCode.NONE, TOPIC_ALREADY_EXISTS):
            raise OSError(errno.EAGAIN, f"could not create the internal topic {topic}: {error_info(code).name}")
        # the broker that created it answered once committed; this member applies it moments later
        deadline = time.monotonic() + INTERNAL_TOPIC_CREATE_TIMEOUT_S
        while self.metadata.topic(topic) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    def partition_count(self, topic: str) -> int | None:
        if self.metadata.controller is not None:   # a quorum member holds only its own replicas' logs
            image_topic = self.metadata.topic(topic)
            return None if image_topic is None else len(image_topic.partitions)
        return self.partitions.partition_count(topic)

    def topic_catalog(self) -> dict[str, tuple[Any, int]]:
        """Every topic's (id, partition count), for KIP-848 assignments: from the image on a quorum member."""
        if self.metadata.controller is not None:
            return {name: (t.id, len(t.partitions)) for name, t in self.metadata.image.topics_by_name.items()}
        return {name: (t.topic_id, t.partitions) for name, t in self.partitions.topics.items()}

    def partition_log(self, topic: str, partition: int) -> Any:
        return self.partitions.get(topic, partition)

    def append(self, topic: str, partition: int, records: bytes, *, producer: tuple[int, int] | None = None,
               verification: object | None = None) -> Any:
        """The coordinator's write: acks=all, so refused before the append when this broker does not lead the
        partition or its ISR is under the topic's min.insync.replicas (Kafka's coordinator appends with
        requiredAcks=-1). ``producer``: the (id, epoch) of the transactional producer whose transaction the batch
        joins (a TxnOffsetCommit): an older epoch than the partition knows is fenced, and the partition's
        producer state records the open transaction. ``verification``: the producer's verification guard on the
        partition (transaction protocol 1), started before its coordinator was asked: a batch whose guard a
        marker of the producer ended since is refused unless its transaction is open (Kafka's UnifiedLog checks
        the request's VerificationGuard so)."""
        if self.replicas.leader_error(topic, partition):
            raise AppendRefused(NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {topic}-{partition}")
        code, message = self.replicas.check_acks_all(topic, partition)
        if code:
            raise AppendRefused(code, message or error_info(code).name)
        if producer is not None:
            code = self.producers.check_marker(topic, partition, producer[0], producer[1])
            if code:
                raise AppendRefused(code, error_info(code).name)
            if verification is not None \
                    and not self.producers.verification_holds(topic, partition, producer[0], verification) \
                    and not self.producers.in_transaction(topic, partition, producer[0], producer[1]):
                # the transaction its coordinator verified ended while the write waited: appended now, the batch
                # would open a transaction no marker closes
                raise AppendRefused(INVALID_TXN_STATE, "Record was not part of an ongoing transaction")
        if producer is None:
            return self.replicas.append(topic, partition, records)
        producer_id, epoch = producer

        def record_producer(result: Any) -> None:   # before the high watermark moves (see ReplicaManager.append)
            self.producers.update(topic, partition, producer_id, epoch,
                                  BatchMetadata(-1, -1, result.base_offset, result.last_offset, result.max_timestamp),
                                  now_ms(), transactional=True)

        return self.replicas.append(topic, partition, records, recorded=record_producer)

    def wait_replicated(self, topic: str, partition: int, last_offset: int,
                        timeout_ms: int) -> asyncio.Future[int] | None:
        return self.replicas.wait_for_ack(topic, partition, last_offset, timeout_ms)

    def replicated_at_once(self, topic: str, partition: int) -> bool:
        """Whether an append to ``topic``-``partition`` is in the ISR as soon as it is made (:meth:`wait_replicated`
        would have nothing to wait for): an unreplicated partition this broker has."""
        return self.replicas.acked_at_once(topic, partition)

    # ---- helpers for handlers -----------------------------------------------------------------------

    async def auto_create_topic_async(self, name: str) -> int:
        """Create ``name`` with the broker defaults, the file-system work in a worker thread; returns a Kafka
        error code (0 on success)."""
        if is_internal(name):
            # Kafka's AutoTopicCreationManager creates an internal topic with its coordinator's spec (its own
            # partitions, replication factor and configs), never the broker defaults
            spec = internal_topic_spec(name, self.config)
            try:
                await self.ensure_internal_topic_async(name, spec.num_partitions, dict(spec.configs),
                                                       replication_factor=spec.replication_factor)
            except OSError:
                return COORDINATOR_NOT_AVAILABLE   # the client asks again
            return 0
        code = await self._create_topic_through_controller(CreatableTopic(name), AUTO_CREATE_TIMEOUT_MS)
        return 0 if code == TOPIC_ALREADY_EXISTS else code   # created meanwhile

    def start_auto_create_topic(self, name: str) -> None:
        """Start the auto-creation of ``name`` (:meth:`auto_create_topic_async`) without waiting for it, unless one
        is under way, as Kafka's broker sends the CreateTopics to the controller and answers the Metadata request
        at once: its client asks again until the topic is there. On the event loop."""
        if name in self._auto_creations:
            return
        task = asyncio.get_running_loop().create_task(self._auto_create(name), name=f"auto-create-{name}")
        self._auto_creations[name] = task
        task.add_done_callback(lambda _: self._auto_creations.pop(name, None))

    async def _auto_create(self, name: str) -> None:
        try:
            code = await self.auto_create_topic_async(name)
        except Exception as exc:  # noqa: BLE001 - no one awaits it: said, and the next Metadata request tries again
            log.warning("auto-creating topic %s failed: %s", name, exc)
            return
        if code:
            log.info("auto-creating topic %s: error code %d; the next Metadata request naming it tries again", name,
                     code)

    async def create_topic_async(self, name: str, num_partitions: int, replication_factor: int,
                                 configs: dict[str, str]) -> int:
        """Create an ordinary topic through the controller (a streams group's repartition and changelog topics,
        created by the group coordinator as Kafka's broker does); the Kafka error code."""
        return await self._create_topic_through_controller(
            CreatableTopic(name, num_partitions, replication_factor, None, dict(configs)), AUTO_CREATE_TIMEOUT_MS)

    async def _create_topic_through_controller(self, topic: CreatableTopic, timeout_ms: int) -> int:
        """CreateTopics for one topic decided by the active controller (this node's own without a quorum, or while
        it leads one), as Kafka's brokers auto-create; the error code."""
        async def create_here() -> dict[str, Any]:
            return {"topics": [created.item for created in await self.controller_apis.create([topic])]}

        if self.forwarder is None:
            answer = await create_here()
        else:
            answer = await self.forwarder.handle(19, AUTO_CREATE_VERSION, f"klog-broker-{self.node_id}", {
                "topics": [{"name": topic.name, "num_partitions": topic.num_partitions,
                            "replication_factor": topic.replication_factor, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in (topic.configs or {}).items()]}],
                "timeout_ms": timeout_ms, "validate_only": False}, create_here)
        topics = answer["topics"] if isinstance(answer, dict) else answer.topics
        first = topics[0]
        return int(first["error_code"] if isinstance(first, dict) else first.error_code)

    def close(self) -> None:
        for task in list(self._auto_creations.values()):
            task.cancel()
        self.share_partitions.store.cancel_topic_creation()
        try:
            self.save_producer_state()
        except OSError as exc:
            log.warning("could not save producer state: %s", exc)
        if self.producer_id_manager is not None:
            self.producer_id_manager.close()
        epoch = self.metadata.lifecycle.broker_epoch if self.metadata.lifecycle is not None else NO_EPOCH
        self.metadata.close()
        # not into an offline dir (as Kafka drops a failed dir's checkpoint): it is never written again
        write_high_watermarks([d for d in self.config.log_dirs if d not in self.partitions.offline_dirs],
                              {key: log_.high_watermark for key, log_ in self.partitions.logs()})
        self.partitions.close()
        # after the logs closed and the native manager left its clean-shutdown files: Kafka's
        # LogManager.shutdown(brokerEpoch), so the next start can prove to the controller it was clean (KIP-966)
        write_broker_epoch(self.config.log_dirs, epoch)
