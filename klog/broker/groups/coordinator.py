"""``GroupCoordinator``: the broker-facing group coordinator (see ``api.py`` for the contract).

It answers the group APIs for the groups of the ``__consumer_offsets`` partitions this broker leads (every one
on a single node), keeps group and offset state in memory, writes every change to ``__consumer_offsets`` in
Kafka's record layouts before answering, and rebuilds the state from that topic when it gains a partition; the
leadership, replicated writes, timers and loading are the shared
:class:`~klog.broker.coordinator.runtime.CoordinatorRuntime`'s. Request validation and answers follow Kafka 4.x
(``GroupCoordinatorService``, ``KafkaApis``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from klog.broker.coordinator.runtime import CoordinatorRuntime
from klog.broker.coordinator.timer import Clock
from klog.controller.topics import internal_topic_spec
from klog.protocol import Struct
from klog.protocol.errors import error_info

from . import records as R
from .classic import ClassicGroupManager
from .classic_group import ClassicGroup, ClassicGroupState, join_error, sync_response
from .consumer import ConsumerGroup, ConsumerGroupManager, TopicCatalog
from .migration import ClassicMembers, GroupMigration
from .share import ShareGroup, ShareGroupManager
from .share_offsets import ShareOffsetsAdmin
from .errors import ErrorCode, GroupError, storage_error_code
from .offsets import OffsetAndMetadata, OffsetStore, metadata_too_large

if TYPE_CHECKING:
    from .streams import StreamsGroup, StreamsGroupManager

log = logging.getLogger("klog.groups")

#: The group APIs whose request may write a new group's first records (OffsetCommit, JoinGroup, SyncGroup,
#: ConsumerGroupHeartbeat, ShareGroupHeartbeat, AlterShareGroupOffsets, StreamsGroupHeartbeat, TxnOffsetCommit):
#: on a single node ``__consumer_offsets`` is created before they run.
_FIRST_WRITE_API_KEYS = frozenset((8, 11, 14, 68, 76, 91, 88, 28))
#: FindCoordinator key types (Kafka's CoordinatorType).
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2



def java_host(address: str) -> str:
    """A connection's address as Java's ``InetAddress.toString()`` writes it (how Kafka names a group member's
    host): ``"/127.0.0.1"``; IPv6 uncompressed, each group in lower-case hex without leading zeros
    (``"/0:0:0:0:0:0:0:1"`` for ``::1``), a scope kept after ``%``; an IPv4-mapped address as its IPv4 address
    (Java makes it an Inet4Address). ``""`` (no address) stays ``""``."""
    address = address.lstrip("/")
    if not address:
        return address
    host, percent, scope = address.partition("%")
    try:
        parsed = ipaddress.ip_address(host)
    except ValueError:
        return "/" + address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return f"/{parsed.ipv4_mapped}"
        packed = parsed.packed
        host = ":".join(f"{int.from_bytes(packed[i:i + 2], 'big'):x}" for i in range(0, 16, 2))
    return "/" + host + percent + scope

class _NoStreamsGroup:
    """Stands for the streams group class until the first streams group loads it: no group is one of these."""


class CoordinatorFinder(Protocol):
    """What FindCoordinator asks of a coordinator (a CoordinatorRuntime, or the transaction coordinator's made on
    first use)."""

    async def coordinator_for(self, key: str, listener: str | None) -> tuple[int, str | None, tuple[int, str, int]]:
        ...
#: ConfigRecord resource type of a group's configs (Kafka's ConfigResource.Type.GROUP)
GROUP_CONFIG_RESOURCE = 32


def _every_partition_answers(topics: Any, code: int) -> Struct:
    """An OffsetCommit/TxnOffsetCommit response where every partition asked answers ``code``."""
    return Struct(throttle_time_ms=0, topics=[
        Struct(name=t.name, partitions=[Struct(partition_index=p.partition_index, error_code=int(code))
                                        for p in t.partitions]) for t in topics])


def _answer_unwritten(topics: list[Struct], code: int) -> Struct:
    """An OffsetCommit response whose write failed: the partitions accepted answer ``code``."""
    for t in topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.NONE:
                p.error_code = int(code)
    return Struct(throttle_time_ms=0, topics=topics)


class _CommitsInFlight:
    """The OffsetCommits of one group's (topic, partition) written and waiting for the ISR: ``seq`` counts the
    partition's commit and tombstone writes, ``tombstoned`` is the count at its last tombstone, ``applied`` the
    count of the last commit applied to memory, ``waiting`` the commits still waiting."""

    __slots__ = ("seq", "tombstoned", "applied", "waiting")

    def __init__(self) -> None:
        self.seq = self.tombstoned = self.applied = self.waiting = 0


class GroupCoordinator:
    #: Every api key -> (min, max) version the coordinator implements; ``SUPPORTED_APIS`` is the part of it this
    #: instance advertises under its config.
    IMPLEMENTED_APIS: ClassVar[dict[int, tuple[int, int]]] = {
        8: (2, 10),   # OffsetCommit (v10 names topics by id: klog/broker/handlers/groups.py)
        9: (1, 10),   # OffsetFetch (v10 names topics by id: klog/broker/handlers/groups.py)
        10: (0, 6),   # FindCoordinator
        11: (0, 9),   # JoinGroup
        12: (0, 4),   # Heartbeat
        13: (0, 5),   # LeaveGroup
        14: (0, 5),   # SyncGroup
        15: (0, 6),   # DescribeGroups
        16: (0, 5),   # ListGroups
        42: (0, 2),   # DeleteGroups
        47: (0, 0),   # OffsetDelete
        68: (0, 1),   # ConsumerGroupHeartbeat (KIP-848)
        69: (0, 1),   # ConsumerGroupDescribe (v1 adds each member's MemberType)
        76: (1, 1),   # ShareGroupHeartbeat (KIP-932)
        77: (1, 1),   # ShareGroupDescribe
        90: (0, 1),   # DescribeShareGroupOffsets (v1 adds the lag)
        91: (0, 0),   # AlterShareGroupOffsets
        92: (0, 0),   # DeleteShareGroupOffsets
        88: (0, 0),   # StreamsGroupHeartbeat (KIP-1071)
        89: (0, 0),   # StreamsGroupDescribe
        28: (0, 5),   # TxnOffsetCommit (v3: the KIP-447 generation and member; v5: transaction protocol v2)
    }

    @classmethod
    def supported_apis(cls, config: Any) -> dict[int, tuple[int, int]]:
        """api key -> (min, max) a coordinator with ``config`` serves: the consumer protocol's APIs only when
        enabled (Kafka's group.coordinator.rebalance.protocols), the streams group's likewise (``streams``); the
        share group's always, as Kafka 4.3 advertises them (the share.version feature decides whether they are
        usable)."""
        protocols = set(config["group.coordinator.rebalance.protocols"])
        return {k: v for k, v in cls.IMPLEMENTED_APIS.items()
                if (k not in (68, 69) or "consumer" in protocols) and (k not in (88, 89) or "streams" in protocols)}

    def __init__(self, context: Any, *, clock: Clock | None = None, persist: bool = True,
                 other_key_types: Mapping[int, CoordinatorFinder] | None = None) -> None:
        """``other_key_types``: FindCoordinator key type -> the runtime of another coordinator answering it (the
        broker's transaction coordinator's, for transactional ids)."""
        self.context = context
        self.config = context.config
        self.SUPPORTED_APIS: dict[int, tuple[int, int]] = self.supported_apis(self.config)
        self.groups: dict[str, Any] = {}
        self.offsets = OffsetStore()
        self.offsets_retention_ms = int(self.config["offsets.retention.minutes"]) * 60_000
        self.offsets_retention_check_ms = int(self.config["offsets.retention.check.interval.ms"])
        self.offset_metadata_max_bytes = int(self.config["offset.metadata.max.bytes"])
        self.topic = None
        if persist:
            from .storage import OffsetsTopic

            self.topic = OffsetsTopic(context, internal_topic_spec("__consumer_offsets", self.config),
                                      int(self.config["offsets.topic.compression.codec"]),
                                      int(self.config["offsets.load.buffer.size"]))
        #: how long an answer waits for the ISR to have the request's writes (Kafka's offsets.commit.timeout.ms)
        self.runtime = CoordinatorRuntime(context, self.topic, name="group-coordinator",
                                          commit_timeout_ms=int(self.config["offsets.commit.timeout.ms"]),
                                          load=self._load, unload=self._unload, clock=clock)
        self.timer = self.runtime.timer
        #: FindCoordinator key type -> the runtime that answers it (the broker adds its transaction coordinator's)
        self.key_types: dict[int, CoordinatorFinder] = {**(other_key_types or {}), KEY_TYPE_GROUP: self.runtime}
        self.classic = ClassicGroupManager(self.groups, self.timer, self._write, self.config, self._new_future,
                                           self._await_writes)
        migration = GroupMigration(self.config, self.classic)
        self.consumer = ConsumerGroupManager(self.groups, self.timer, self._write, self.config, self.topic_catalog,
                                             self._forget_group, migration, self.group_configs)
        #: classic-protocol members of consumer groups (a group being moved between the protocols)
        self.classic_members = ClassicMembers(self.consumer, self.classic, migration)
        self.share = ShareGroupManager(self.groups, self.timer, self.config, self.topic_catalog,
                                       self.group_configs, self._write)
        self.share_offsets = ShareOffsetsAdmin(self)
        self._streams: StreamsGroupManager | None = None
        #: the class of streams groups once their module is loaded (what no group is an instance of before)
        self._streams_group = cast("type[StreamsGroup]", _NoStreamsGroup)
        self._handlers = {
            8: self._offset_commit, 9: self._offset_fetch, 10: self._find_coordinator, 11: self._join_group,
            12: self._heartbeat, 13: self._leave_group, 14: self._sync_group, 15: self._describe_groups,
            16: self._list_groups, 42: self._delete_groups, 47: self._offset_delete,
            68: self._consumer_group_heartbeat, 69: self._consumer_group_describe,
            76: self._share_group_heartbeat, 77: self._share_group_describe,
            88: self._streams_group_heartbeat, 89: self._streams_group_describe,
            90: self.share_offsets.describe, 91: self.share_offsets.alter, 92: self.share_offsets.delete_offsets,
            28: self._txn_offset_commit,
        }
        #: producer id -> the offsets its open transaction committed (TxnOffsetCommit), visible only once a COMMIT
        #: marker reaches their __consumer_offsets partition (dropped on ABORT)
        self.pending_txn_offsets: dict[int, dict[tuple[str, str, int], OffsetAndMetadata]] = {}
        #: group id -> (topic, partition) -> the OffsetCommits of it written and waiting for the ISR: a commit
        #: applies its offset when its write ends only if no tombstone of the partition was written after it (a
        #: DeleteGroups, OffsetDelete, expiry or topic deletion meanwhile: the log has no offset) and no later commit
        #: was applied (Kafka applies a commit to its timeline at write time, so later tombstones cover it)
        self._commits_in_flight: dict[str, dict[tuple[str, int], _CommitsInFlight]] = {}

    @property
    def records_written(self) -> int:
        """Records written to __consumer_offsets (tests and benchmarks read it)."""
        return self.runtime.records_written

    @property
    def owned_partitions(self) -> set[int] | None:
        """The ``__consumer_offsets`` partitions whose groups this coordinator serves (None: all, a single node)."""
        return self.runtime.owned_partitions

    @property
    def _active(self) -> bool:
        return self.runtime.active

    # -- lifecycle --------------------------------------------------------------------------------------------
    async def start(self, *, run_timers: bool = True) -> None:
        """Loads ``__consumer_offsets`` and starts the timer task. ``run_timers=False`` leaves timers to the
        caller (``coordinator.timer.poll()``), for deterministic tests with a fake clock."""
        self.runtime.start(run_timers=run_timers)
        self._schedule_offset_expiry()

    async def stop(self) -> None:
        await self.runtime.stop()
        # Answer parked JoinGroup/SyncGroup requests, as Kafka does when it unloads a partition.
        for group in list(self.groups.values()):
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    group.complete_join(member, join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                    group.complete_sync(member, sync_response(ErrorCode.NOT_COORDINATOR))

    # -- leadership of __consumer_offsets partitions (the runtime calls _load and _unload) -------------------
    def on_metadata_published(self) -> None:
        """The broker applied a new metadata image: load the offsets partitions it now leads, unload those it
        stopped leading."""
        self.runtime.on_metadata_published()

    def _unload(self, partitions: set[int]) -> None:
        """Kafka's onResignation: forget the groups and offsets of ``partitions``; parked JoinGroup/SyncGroup
        requests answer NOT_COORDINATOR, so their members find the new coordinator."""
        assert self.topic is not None
        for group_id in [g for g in self.groups if self.topic.partition_for(g) in partitions]:
            group = self.groups[group_id]
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    group.complete_join(member, join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                    group.complete_sync(member, sync_response(ErrorCode.NOT_COORDINATOR))
            if isinstance(group, ShareGroup):
                # only the membership moves: the share-partitions this broker leads keep their in-flight records
                self.groups.pop(group_id, None)
                self.share.forget(group)
                continue
            self._forget_group(group)
        for group_id in [g for g in self.offsets.groups() if self.topic.partition_for(g) in partitions]:
            self.offsets.drop_group(group_id)
        for producer in list(self.pending_txn_offsets):
            pending = self.pending_txn_offsets[producer]
            for key in [k for k in pending if self.topic.partition_for(k[0]) in partitions]:
                del pending[key]
            if not pending:
                del self.pending_txn_offsets[producer]

    def _unavailable(self, group_id: str | None) -> int:
        """The error a request about ``group_id`` gets from this coordinator: COORDINATOR_NOT_AVAILABLE before
        ``start``, NOT_COORDINATOR when another broker leads the group's ``__consumer_offsets`` partition (the
        client looks the coordinator up again), else 0."""
        return self.runtime.unavailable(group_id)

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _new_future(self) -> asyncio.Future[Struct]:
        return asyncio.get_running_loop().create_future()

    def _write(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.runtime.write(group_id, records)

    async def _await_writes(self) -> int:
        """Waits until the ISR has every write the current request made so far (Kafka's coordinator answers only
        then, so an acknowledged commit survives the leader's loss); the error to answer with, or NONE."""
        return await self.runtime.await_writes()

    async def handle(self, header: Any, request: Any, *, client_host: str = "", listener: str | None = None,
                     verification: object | None = None) -> Any:
        handler = self._handlers.get(header.api_key)
        if handler is None:
            raise ValueError(f"api key {header.api_key} is not a group API")
        # a member's host as Kafka names it, Java's InetAddress.toString() of the connection: "/127.0.0.1"
        # (DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe, the group records)
        client_host = java_host(client_host)
        if header.api_key == 10:   # FindCoordinator answers the coordinator's address on the client's listener
            return await self._find_coordinator(header, request, client_host, listener)
        if header.api_key in _FIRST_WRITE_API_KEYS:
            await self.runtime.ensure_log()
        if verification is not None:   # a TxnOffsetCommit's guard: checked at its write
            return await self.runtime.run(lambda: self._txn_offset_commit(header, request, client_host, verification))
        return await self.runtime.run(lambda: handler(header, request, client_host))

    async def ensure_log(self) -> None:
        await self.runtime.ensure_log()

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's dynamic configs (its GROUP config resource in the metadata image), as the broker has them."""
        metadata = getattr(self.context, "metadata", None)
        image = getattr(metadata, "image", None)
        configs = getattr(image, "configs", None)
        return configs.get((GROUP_CONFIG_RESOURCE, group_id), {}) if configs is not None else {}

    def topic_catalog(self) -> TopicCatalog:
        """Every topic's id and partition count (KIP-848 assignments address topics by id)."""
        fn = getattr(self.context, "topic_catalog", None)
        if fn is not None:
            return TopicCatalog(dict(fn()))
        manager = getattr(self.context, "partitions", None)
        topics = getattr(manager, "topics", None)
        if topics is None:
            return TopicCatalog({})
        return TopicCatalog({name: (t.topic_id, t.partitions) for name, t in topics.items()})

    def partition_count(self, topic: str) -> int | None:
        fn = getattr(self.context, "partition_count", None)
        return None if fn is None else fn(topic)

    # -- FindCoordinator --------------------------------------------------------------------------------------
    async def _find_coordinator(self, header: Any, request: Any, client_host: str,
                                listener: str | None = None) -> Struct:
        """FindCoordinator for every key type a coordinator registered in ``key_types`` (groups: this one's;
        transactional ids: the transaction coordinator's, when the broker runs one)."""
        v = header.api_version
        key_type = request.key_type if v >= 1 else KEY_TYPE_GROUP
        keys = list(request.coordinator_keys) if v >= 4 else [request.key]
        runtime = self.key_types.get(key_type)
        results = []
        for key in keys:
            code: int
            msg: str | None
            if runtime is None:   # Kafka's words: the error's default one; none for share groups not enabled
                code, msg, found = (ErrorCode.INVALID_REQUEST, "" if key_type == KEY_TYPE_SHARE else error_info(
                    ErrorCode.INVALID_REQUEST).message, (-1, "", -1))
            else:
                code, msg, found = await runtime.coordinator_for(key, listener)
            results.append(Struct(key=key, node_id=found[0], host=found[1], port=found[2], error_code=int(code),
                                  error_message=msg))
        if v >= 4:
            return Struct(throttle_time_ms=0, coordinators=results)
        r = results[0]
        return Struct(throttle_time_ms=0, error_code=r.error_code, error_message=r.error_message, node_id=r.node_id,
                      host=r.host, port=r.port)

    # -- classic protocol -------------------------------------------------------------------------------------
    async def _join_group(self, header: Any, request: Any, client_host: str) -> Struct:
        v = header.api_version
        if unavailable := self._unavailable(request.group_id):
            response = join_error(unavailable, request.member_id)
        else:
            existing = self.groups.get(request.group_id)
            converted: int = ErrorCode.NONE
            if isinstance(existing, (ConsumerGroup, self._streams_group)) and existing.is_empty() \
                    and request.member_id == "":
                # Kafka converts an empty consumer-protocol or streams group when a classic member joins.
                converted = self._convert_to_classic(existing)
                existing = None
            if converted != ErrorCode.NONE:
                response = join_error(converted, request.member_id)
            elif isinstance(existing, ConsumerGroup):
                response = self.classic_members.join(existing, request, v, header.client_id or "", client_host)
            elif existing is not None and not isinstance(existing, ClassicGroup):
                response = join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            else:
                response = await self.classic.join(request, v, header.client_id or "", client_host)
        if v < 7 and response.protocol_name is None:
            # Non-nullable before v7, as in Kafka's JoinGroupResponse: the same answer with an empty name (a copy:
            # the parked request's answer is not changed under anyone else).
            return Struct(**{**vars(response), "protocol_name": ""})
        return response

    async def _sync_group(self, header: Any, request: Any, client_host: str) -> Struct:
        if unavailable := self._unavailable(request.group_id):
            return sync_response(unavailable)
        if header.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            # From v5 the protocol type and name are mandatory (Kafka answers this before any other check).
            return sync_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.sync(group, request, header.api_version)
        return await self.classic.sync(request, header.api_version)

    async def _heartbeat(self, header: Any, request: Any, client_host: str) -> Struct:
        if unavailable := self._unavailable(request.group_id):
            return Struct(throttle_time_ms=0, error_code=unavailable)
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup):
            return Struct(throttle_time_ms=0,
                          error_code=int(self.classic_members.heartbeat(group, request, header.api_version)))
        return Struct(throttle_time_ms=0, error_code=int(self.classic.heartbeat(request, header.api_version)))

    async def _leave_group(self, header: Any, request: Any, client_host: str) -> Struct:
        if unavailable := self._unavailable(request.group_id):
            return Struct(throttle_time_ms=0, error_code=unavailable, members=[])
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.leave(group, request, header.api_version)
        return self.classic.leave(request, header.api_version)

    # -- consumer protocol (KIP-848) --------------------------------------------------------------------------
    async def _consumer_group_heartbeat(self, header: Any, request: Any, client_host: str) -> Struct:
        if unavailable := self._unavailable(request.group_id):
            return Struct(throttle_time_ms=0, error_code=unavailable, error_message=None,
                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)
        return self.consumer.heartbeat(request, header.api_version, header.client_id or "", client_host)

    async def _consumer_group_describe(self, header: Any, request: Any, client_host: str) -> Struct:
        groups = []
        for group_id in request.group_ids:
            if unavailable := self._unavailable(group_id):
                groups.append(Struct(error_code=unavailable, error_message=None,
                                     group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
                                     assignor_name="", members=[], authorized_operations=-2147483648))
            else:
                groups.append(self.consumer.describe(group_id, header.api_version))
        return Struct(throttle_time_ms=0, groups=groups)

    async def _share_group_heartbeat(self, header: Any, request: Any, client_host: str) -> Struct:
        if unavailable := self._unavailable(request.group_id):
            return Struct(throttle_time_ms=0, error_code=unavailable, error_message=None,
                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)
        return self.share.heartbeat(request, header.client_id or "", client_host)

    async def _share_group_describe(self, header: Any, request: Any, client_host: str) -> Struct:
        groups = []
        for group_id in request.group_ids:
            if unavailable := self._unavailable(group_id):
                groups.append(Struct(error_code=unavailable, error_message=None,
                                     group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
                                     assignor_name="", members=[], authorized_operations=-2147483648))
            else:
                groups.append(self.share.describe(group_id))
        return Struct(throttle_time_ms=0, groups=groups)

    @property
    def streams(self) -> StreamsGroupManager:
        """The streams groups (KIP-1071): made, and their module imported, on the first StreamsGroupHeartbeat or
        StreamsGroupDescribe, or a streams group's record loaded from ``__consumer_offsets``."""
        if self._streams is None:
            from .streams import StreamsGroup, StreamsGroupManager

            self._streams = StreamsGroupManager(self.groups, self.timer, self._write, self.config, self.topic_catalog,
                                                self._forget_group, self.group_configs, self._create_streams_topics)
            self._streams_group = StreamsGroup
        return self._streams

    async def _streams_group_heartbeat(self, header: Any, request: Any, client_host: str) -> Struct:
        if unavailable := self._unavailable(request.group_id):
            return Struct(throttle_time_ms=0, error_code=unavailable, error_message=None, member_id="",
                          member_epoch=-1, heartbeat_interval_ms=0, acceptable_recovery_lag=0,
                          task_offset_interval_ms=0, status=None, active_tasks=None, standby_tasks=None,
                          warmup_tasks=None, endpoint_information_epoch=0, partitions_by_user_endpoint=None)
        # (the runtime answers only once the ISR has the request's writes)
        return await self.streams.heartbeat(request, header.client_id or "", client_host)

    async def _streams_group_describe(self, header: Any, request: Any, client_host: str) -> Struct:
        from .streams import described_error

        groups = []
        for group_id in request.group_ids:
            if unavailable := self._unavailable(group_id):
                groups.append(described_error(group_id, unavailable, None))
            else:
                groups.append(self.streams.describe(group_id))
        return Struct(throttle_time_ms=0, groups=groups)

    async def _create_streams_topics(self, topics: Mapping[str, tuple[int, int, dict[str, str]]]) -> None:
        """The internal topics (repartition, changelog) a streams group's topology needs, created through the
        controller as Kafka's broker creates them for its group coordinator."""
        create = getattr(self.context, "create_topic_async", None)
        if create is None:
            return
        for name, (partitions, replication_factor, configs) in topics.items():
            code = await create(name, partitions, replication_factor, configs)
            if code and code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("creating the streams internal topic %s failed with error %d", name, code)
            else:
                log.info("created the streams internal topic %s with %d partitions", name, partitions)

    # -- offsets ----------------------------------------------------------------------------------------------
    def _group_for_offsets(self, group_id: str) -> Any:
        return self.groups.get(group_id)

    async def _offset_commit(self, header: Any, request: Any, client_host: str) -> Struct:
        v = header.api_version
        group_id = request.group_id

        def all_partitions(code: int) -> Struct:
            return _every_partition_answers(request.topics, code)

        if unavailable := self._unavailable(group_id):
            return all_partitions(unavailable)
        if group_id is None:
            return all_partitions(ErrorCode.INVALID_GROUP_ID)
        generation = request.generation_id_or_member_epoch if v >= 1 else -1
        member_id = request.member_id if v >= 1 else ""
        instance_id = request.group_instance_id if v >= 7 else None
        try:
            group = self._validate_offset_commit(group_id, member_id, instance_id, generation, v)
        except GroupError as e:
            return all_partitions(e.code)
        if isinstance(group, ClassicGroup) and group.state in (ClassicGroupState.STABLE,
                                                               ClassicGroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            if member is not None:
                self.classic.reschedule_heartbeat(group, member)

        now = self.timer.now()
        retention = request.retention_time_ms if 2 <= v <= 4 else -1
        expire = None if retention is None or retention == -1 else now + retention
        records, accepted, topics = self._offsets_to_commit(group_id, request.topics, now, expire,
                                                            with_leader_epoch=v >= 6)
        if records:
            try:
                self._write(group_id, records)
            except Exception as exc:  # noqa: BLE001 - a failed append is answered with an error code
                code = storage_error_code(exc)
                log.warning("group %s: offset commit append failed: %s", group_id, exc)
                return _answer_unwritten(topics, code)
            in_flight = self._commits_in_flight.setdefault(group_id, {})
            sequences = []
            for topic, partition, _ in accepted:   # written: a later tombstone of them is later in the log
                entry = in_flight.setdefault((topic, partition), _CommitsInFlight())
                entry.seq += 1
                entry.waiting += 1
                sequences.append(entry.seq)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
            try:
                code = await self._await_writes()   # offsets become visible only once the ISR has them
            except Exception as exc:  # noqa: BLE001 - a failed append is answered with an error code
                code = storage_error_code(exc)
                log.warning("group %s: offset commit append failed: %s", group_id, exc)
            finally:
                self._apply_commit(group_id, in_flight, accepted, sequences, applied=not code)
            if code:
                return _answer_unwritten(topics, code)
        return Struct(throttle_time_ms=0, topics=topics)

    def _apply_commit(self, group_id: str, in_flight: dict[tuple[str, int], _CommitsInFlight],
                      accepted: list[tuple[str, int, OffsetAndMetadata]], sequences: list[int], *,
                      applied: bool) -> None:
        """An OffsetCommit's write ended (``applied``: the ISR has it): its offsets no tombstone written since
        covers become committed (the log has them last), in a "simple" group when the group is gone, as Kafka
        creates one, unless a later commit of the partition was applied already; none when this coordinator no
        longer leads the group's partition (its new leader loads them from the log)."""
        apply = applied and not self._unavailable(group_id)
        for (topic, partition, om), sequence in zip(accepted, sequences, strict=True):
            entry = in_flight[(topic, partition)]
            entry.waiting -= 1
            if not entry.waiting:
                del in_flight[(topic, partition)]
            if apply and entry.tombstoned < sequence and entry.applied < sequence:
                entry.applied = sequence
                if group_id not in self.groups:
                    self.classic.get_or_create(group_id, True)
                self.offsets.put(group_id, topic, partition, om)
        if not in_flight and self._commits_in_flight.get(group_id) is in_flight:
            del self._commits_in_flight[group_id]

    def _tombstoned(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Tombstones of ``partitions``' offsets were written: the OffsetCommits of them in flight (written
        before) apply nothing when their writes end."""
        in_flight = self._commits_in_flight.get(group_id)
        if in_flight:
            for key in partitions:
                entry = in_flight.get(key)
                if entry is not None:
                    entry.seq += 1
                    entry.tombstoned = entry.seq

    def _committing(self, group_id: str) -> Collection[tuple[str, int]]:
        """The (topic, partition)s of ``group_id`` an OffsetCommit wrote and waits on (a tombstone of the group's
        offsets must cover them too: the log has their records)."""
        return self._commits_in_flight.get(group_id, {}).keys()

    def _offsets_to_commit(self, group_id: str, topics: Any, now: int, expire: int | None, *,
                           with_leader_epoch: bool
                           ) -> tuple[list[tuple[bytes, bytes | None]], list[tuple[str, int, OffsetAndMetadata]],
                                      list[Struct]]:
        """OffsetCommit's and TxnOffsetCommit's checks of each offset (the partition exists, its metadata is
        within offset.metadata.max.bytes): the __consumer_offsets records of those accepted, the accepted
        offsets, and the per-topic answers (NONE for the accepted until their write is known)."""
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[str, int, OffsetAndMetadata]] = []
        answers: list[Struct] = []
        for t in topics:
            nparts = self.partition_count(t.name)
            parts = []
            for p in t.partitions:
                metadata = p.committed_metadata if p.committed_metadata is not None else ""
                code: int
                if nparts is None or not 0 <= p.partition_index < nparts:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif metadata_too_large(metadata, self.offset_metadata_max_bytes):
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    code = ErrorCode.NONE
                    epoch = p.committed_leader_epoch if with_leader_epoch else -1
                    om = OffsetAndMetadata(p.committed_offset, -1 if epoch is None else epoch, metadata, now, expire)
                    records.append(R.offset_commit_record(group_id, t.name, p.partition_index, offset=om.offset,
                                                          leader_epoch=om.leader_epoch, metadata=om.metadata,
                                                          commit_timestamp=now, expire_timestamp=expire))
                    accepted.append((t.name, p.partition_index, om))
                parts.append(Struct(partition_index=p.partition_index, error_code=int(code)))
            answers.append(Struct(name=t.name, partitions=parts))
        return records, accepted, answers

    async def _txn_offset_commit(self, header: Any, request: Any, client_host: str,
                                 verification: object | None = None) -> Struct:
        """TxnOffsetCommit: the offsets join the producer's transaction (a transactional batch in the group's
        __consumer_offsets partition) and become visible when its COMMIT marker arrives (KIP-98; KIP-447 checks
        the consumer's generation and member from v3). ``verification``: the producer's verification guard on
        that partition (Kafka's VerificationGuard), which the append checks."""
        v = header.api_version
        group_id = request.group_id

        def all_partitions(code: int) -> Struct:
            return _every_partition_answers(request.topics, code)

        if unavailable := self._unavailable(group_id):
            return all_partitions(unavailable)
        if not group_id:
            return all_partitions(ErrorCode.INVALID_GROUP_ID)
        generation = request.generation_id if v >= 3 else -1
        member_id = request.member_id if v >= 3 else ""
        instance_id = request.group_instance_id if v >= 3 else None
        group = self.groups.get(group_id)
        created = None
        if group is None and generation < 0:
            # a group that does not exist yet is made at once, a "simple" one, as Kafka's
            # validateTransactionalOffsetCommit (a later commit naming a member answers UNKNOWN_MEMBER_ID; Kafka
            # reverts it with a failed write)
            group = created = self.classic.get_or_create(group_id, True)
        if generation >= 0 or member_id or instance_id is not None:
            # the producer passed the consumer's group metadata (KIP-447)
            if group is None:
                return all_partitions(ErrorCode.ILLEGAL_GENERATION)
            try:
                self._validate_offset_commit(group_id, member_id, instance_id, generation, v, transactional=True)
            except GroupError as e:
                # TxnOffsetCommit has no STALE_MEMBER_EPOCH: a consumer-protocol member's stale epoch reads as an
                # illegal generation
                return all_partitions(ErrorCode.ILLEGAL_GENERATION if e.code == ErrorCode.STALE_MEMBER_EPOCH
                                      else e.code)
        now = self.timer.now()
        records, accepted, topics = self._offsets_to_commit(group_id, request.topics, now, None,
                                                            with_leader_epoch=v >= 2)
        if records:
            # pending before the write, as Kafka's prepareTxnOffsetCommit: an OffsetFetch with RequireStable made
            # while the write waits for the ISR is answered UNSTABLE_OFFSET_COMMIT, not with the offset this
            # transaction is replacing (a new owner of the partition would read its records again)
            pending = self.pending_txn_offsets.setdefault(request.producer_id, {})
            prepared = []
            for topic, partition, om in accepted:
                key = (group_id, topic, partition)
                prepared.append((key, pending.get(key), om))
                pending[key] = om
            try:
                self.runtime.write(group_id, records, producer=(request.producer_id, request.producer_epoch),
                                   verification=verification)
                code = await self._await_writes()
            except Exception as exc:  # noqa: BLE001 - a failed append is answered with an error code
                fenced = getattr(exc, "code", None) == ErrorCode.INVALID_PRODUCER_EPOCH
                code = int(ErrorCode.INVALID_PRODUCER_EPOCH) if fenced else storage_error_code(exc)
                log.info("group %s: transactional offset commit failed: %s", group_id, exc)
            if code:
                self._fail_pending_txn_offsets(request.producer_id, prepared)
                if created is not None and created.is_empty() and not self.offsets.group_offsets(group_id) \
                        and not self._has_pending_txn_offsets(group_id):
                    self._forget_group(created)
                for t in topics:
                    for p in t.partitions:
                        if p.error_code == ErrorCode.NONE:
                            p.error_code = int(code)
                return Struct(throttle_time_ms=0, topics=topics)
        return Struct(throttle_time_ms=0, topics=topics)

    def _fail_pending_txn_offsets(self, producer_id: int, prepared: list[tuple[tuple[str, str, int],
                                  OffsetAndMetadata | None, OffsetAndMetadata]]) -> None:
        """A TxnOffsetCommit's write failed: its offsets ((group, topic, partition), the pending offset it replaced,
        its own) are no longer pending (Kafka's failPendingTxnOffsetCommit); an earlier commit of the same
        transaction that was written is pending again."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None:
            return
        for key, before, om in reversed(prepared):
            if pending.get(key) is not om:   # replaced meanwhile, or the transaction ended
                continue
            if before is None:
                del pending[key]
            else:
                pending[key] = before
        if not pending:
            del self.pending_txn_offsets[producer_id]

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` reached ``__consumer_offsets-partition``: its pending
        transactional offsets of the groups there become committed offsets, or are dropped."""
        pending = self.pending_txn_offsets.get(producer_id)
        if not pending:
            return
        offsets_topic = self.topic
        for key in [k for k in pending if offsets_topic is None or offsets_topic.partition_for(k[0]) == partition]:
            om = pending.pop(key)
            if not commit:
                continue
            group_id, topic, p = key
            self.offsets.put(group_id, topic, p, om)
            if group_id not in self.groups:
                self.classic.get_or_create(group_id, True)   # a "simple" group, as for a plain commit
        if not pending:
            del self.pending_txn_offsets[producer_id]

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in offsets for offsets in self.pending_txn_offsets.values())

    def _has_pending_txn_offsets(self, group_id: str) -> bool:
        """An open transaction committed offsets of the group (Kafka keeps such a group, empty and without
        offsets, from being deleted)."""
        return any(key[0] == group_id for offsets in self.pending_txn_offsets.values() for key in offsets)

    def _validate_offset_commit(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                                api_version: int, *, transactional: bool = False) -> Any:
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                return None  # created once the commit is written
            if api_version >= 9:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if isinstance(group, (ConsumerGroup, self._streams_group)):
            group.validate_offset_commit(member_id, instance_id, generation, api_version, transactional=transactional)
        else:
            group.validate_offset_commit(member_id, instance_id, generation, transactional=transactional)
        return group

    async def _offset_fetch(self, header: Any, request: Any, client_host: str) -> Struct:
        v = header.api_version
        if v >= 8:
            groups = []
            for g in request.groups:
                topics = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                group = self.groups.get(g.group_id)
                if v >= 9 and isinstance(group, (ConsumerGroup, self._streams_group)):
                    try:
                        group.validate_offset_fetch(g.member_id, g.member_epoch)
                    except GroupError as e:
                        groups.append(Struct(group_id=g.group_id, topics=[], error_code=e.code))
                        continue
                code, result = self._fetch_group_offsets(g.group_id, topics, request.require_stable)
                groups.append(Struct(group_id=g.group_id, topics=result, error_code=int(code)))
            return Struct(throttle_time_ms=0, groups=groups)
        topics = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        code, result = self._fetch_group_offsets(request.group_id, topics, v >= 7 and request.require_stable)
        if v < 2 and code != ErrorCode.NONE:
            for t in result:  # v0-1 have no top-level error: it goes on every partition
                for p in t.partitions:
                    p.error_code = int(code)
        return Struct(throttle_time_ms=0, topics=result, error_code=int(code))

    def _fetch_group_offsets(self, group_id: str | None, topics: list[tuple[str, list[int]]] | None,
                             require_stable: bool = False) -> tuple[int, list[Struct]]:
        if unavailable := self._unavailable(group_id):
            return unavailable, self._empty_offsets(topics)
        if group_id is None:
            return ErrorCode.INVALID_GROUP_ID, self._empty_offsets(topics)
        group = self.groups.get(group_id)
        exists = group is not None and not (isinstance(group, ClassicGroup) and group.is_in(ClassicGroupState.DEAD))
        stored = self.offsets.group_offsets(group_id) if exists else {}
        if topics is None:
            # all the group's committed offsets (a partition only a transaction is committing is not among them,
            # as Kafka's fetchAllOffsets)
            topics = [(topic, list(parts)) for topic, parts in stored.items()]
        out = []
        for topic, partitions in topics:
            parts = stored.get(topic, {})
            fetched = [_fetched(p, parts.get(p)) for p in partitions]
            if require_stable and self.pending_txn_offsets:
                # RequireStable (KIP-447): an offset a transaction is still committing is not answered yet (nor
                # the committed one's metadata or epoch, as Kafka)
                for i, f in enumerate(fetched):
                    if self.has_pending_txn_offset(group_id, topic, f.partition_index):
                        fetched[i] = _fetched(f.partition_index, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
            out.append(Struct(name=topic, partitions=fetched))
        return ErrorCode.NONE, out

    @staticmethod
    def _empty_offsets(topics: list[tuple[str, list[int]]] | None) -> list[Struct]:
        return [] if topics is None else [Struct(name=t, partitions=[_fetched(p, None) for p in ps])
                                          for t, ps in topics]

    async def _offset_delete(self, header: Any, request: Any, client_host: str) -> Struct:
        def top(code: int) -> Struct:
            return Struct(error_code=int(code), throttle_time_ms=0, topics=[])

        if unavailable := self._unavailable(request.group_id or None):
            return top(unavailable)
        if not request.group_id:
            return top(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(request.group_id)
        if group is None:
            return top(ErrorCode.GROUP_ID_NOT_FOUND)
        try:
            group.validate_offset_delete()
        except GroupError as e:
            return top(e.code)
        records = []
        deleted = []
        topics = []
        for t in request.topics:
            nparts = self.partition_count(t.name)
            parts = []
            subscribed = group.is_subscribed_to_topic(t.name)
            for p in t.partitions:
                if nparts is None or not 0 <= p.partition_index < nparts:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif subscribed:
                    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    code = ErrorCode.NONE
                    if self.offsets.get(request.group_id, t.name, p.partition_index) is not None \
                            or (t.name, p.partition_index) in self._committing(request.group_id):
                        records.append(R.offset_commit_tombstone(request.group_id, t.name, p.partition_index))
                        deleted.append((t.name, p.partition_index))
                parts.append(Struct(partition_index=p.partition_index, error_code=int(code)))
            topics.append(Struct(name=t.name, partitions=parts))
        if records:
            try:
                self._write(request.group_id, records)
            except Exception as exc:  # noqa: BLE001
                return top(storage_error_code(exc))
            self._tombstoned(request.group_id, deleted)
            for topic, partition in deleted:
                self.offsets.delete(request.group_id, topic, partition)
        return Struct(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)

    # -- group administration ---------------------------------------------------------------------------------
    async def _list_groups(self, header: Any, request: Any, client_host: str) -> Struct:
        if not self._active:
            return Struct(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[])
        v = header.api_version
        states = {s.strip().lower() for s in request.states_filter} if v >= 4 else set()
        types = {s.strip().lower() for s in request.types_filter} if v >= 5 else set()
        out = []
        for group_id, group in self.groups.items():
            if states and group.state_lower() not in states:
                continue
            if types and group.group_type not in types:
                continue
            out.append(Struct(group_id=group_id, protocol_type=group.protocol_type or "",
                              group_state=group.state_name(), group_type=group.group_type))
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=out)

    async def _describe_groups(self, header: Any, request: Any, client_host: str) -> Struct:
        v = header.api_version
        out = []
        for group_id in request.groups:
            if unavailable := self._unavailable(group_id):
                out.append(_described(group_id, unavailable, "", members=[]))
                continue
            group = self.groups.get(group_id)
            if not isinstance(group, ClassicGroup) or group.is_in(ClassicGroupState.DEAD):
                # Kafka 4.x (KIP-1043): GROUP_ID_NOT_FOUND from v6; older versions see a Dead group.
                if v >= 6:
                    kind = "is not a classic group" if group is not None else "not found"
                    out.append(_described(group_id, ErrorCode.GROUP_ID_NOT_FOUND, "Dead",
                                          error_message=f"Group {group_id} {kind}."))
                else:
                    out.append(_described(group_id, ErrorCode.NONE, "Dead"))
                continue
            stable = group.is_in(ClassicGroupState.STABLE)
            members = [Struct(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                              client_host=m.client_host,
                              member_metadata=m.metadata(group.protocol_name) if stable else b"",
                              member_assignment=m.assignment) for m in group.members.values()]
            out.append(_described(group_id, ErrorCode.NONE, group.state_name(),
                                  protocol_type=group.protocol_type or "",
                                  protocol_data=(group.protocol_name or "") if stable else "", members=members))
        return Struct(throttle_time_ms=0, groups=out)

    async def _delete_groups(self, header: Any, request: Any, client_host: str) -> Struct:
        results = []
        # Kafka answers each group once, however often it is named.
        for group_id in dict.fromkeys(request.groups_names):
            code: int
            if unavailable := self._unavailable(group_id):
                code = unavailable
            elif group_id is None:
                code = ErrorCode.INVALID_GROUP_ID
            else:
                code = await self._delete_share_state(group_id)
                if code == ErrorCode.NONE:
                    code = self._delete_group(group_id)
            results.append(Struct(group_id=group_id, error_code=int(code)))
        return Struct(throttle_time_ms=0, results=results)

    async def _delete_share_state(self, group_id: str) -> int:
        """An empty share group's share state goes first (DeleteShareGroupState), as Kafka deletes it."""
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup) or not group.is_empty():
            return ErrorCode.NONE   # _delete_group answers the rest
        return await self.share_offsets.delete_group_state(group)

    def _delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        try:
            group.validate_delete_group()
        except GroupError as e:
            return e.code
        offsets = {(t, p) for t, parts in self.offsets.group_offsets(group_id).items() for p in parts}
        offsets.update(self._committing(group_id))
        records = [R.offset_commit_tombstone(group_id, t, p) for t, p in sorted(offsets)]
        records.extend(self._group_tombstones(group))
        try:
            self._write(group_id, records)
        except Exception as exc:  # noqa: BLE001
            return storage_error_code(exc)
        self._tombstoned(group_id, offsets)
        self.offsets.drop_group(group_id)
        self._forget_group(group)
        return ErrorCode.NONE

    def _group_tombstones(self, group: Any) -> list[tuple[bytes, None]]:
        if isinstance(group, ClassicGroup):
            return [R.group_metadata_tombstone(group.group_id)]
        return group.tombstones()

    def _convert_to_classic(self, group: Any) -> int:
        """An empty consumer or streams group a classic member joins goes (its tombstones written, its offsets
        kept): NONE, or the error a refused write is answered with (Kafka's mapping of a failed group write:
        COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), the group then left as it was (Kafka reverts the conversion
        with its failed write)."""
        try:
            self._write(group.group_id, self._group_tombstones(group))
        except Exception as exc:  # noqa: BLE001 - a failed append is answered with an error code
            log.warning("group %s: converting the empty group to a classic group failed: %s", group.group_id, exc)
            return storage_error_code(exc)
        self._forget_group(group)
        return ErrorCode.NONE

    def _forget_group(self, group: Any) -> None:
        group_id = group.group_id
        if self.groups.get(group_id) is group:
            self.groups.pop(group_id, None)
        if isinstance(group, ConsumerGroup):
            self.consumer.forget(group)
            return
        if isinstance(group, self._streams_group):
            self.streams.forget(group)
            return
        if isinstance(group, ShareGroup):
            self.share.forget(group)
            manager = getattr(self.context, "share_partitions", None)
            if manager is not None:
                manager.drop_group(group_id)
            return
        if isinstance(group, ClassicGroup):
            # requests still parked (a group upgraded online: Kafka's convertToConsumerGroup) rejoin the group
            # that replaced it
            for member in group.members.values():
                group.complete_join(member, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
                group.complete_sync(member, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
            group.transition_to(ClassicGroupState.DEAD, self.timer.now())
            for member in group.members.values():
                if member.heartbeat_key:
                    self.timer.release(member.heartbeat_key)
            for kind in ("join", "sync"):
                self.timer.cancel((kind, group.group_id))

    # -- offset expiry (offsets.retention.minutes) ------------------------------------------------------------
    def _schedule_offset_expiry(self) -> None:
        self.timer.schedule(("offset-expiry",), self.offsets_retention_check_ms, self._expire_offsets_and_reschedule)

    def _expire_offsets_and_reschedule(self) -> None:
        try:
            self.expire_offsets()
        finally:
            self._schedule_offset_expiry()

    def expire_offsets(self, now: int | None = None) -> int:
        """Kafka's cleanupGroupMetadata: drops expired offsets, then empty groups left without offsets.
        Returns the number of offsets removed."""
        now = self.timer.now() if now is None else now
        removed = 0
        self._drop_offsets_of_deleted_topics()
        for group_id in list(self.groups):
            group = self.groups[group_id]
            if isinstance(group, ShareGroup):   # no committed offsets; deleted only by DeleteGroups
                continue
            stored = self.offsets.group_offsets(group_id)
            expired: list[tuple[str, int]] = []
            all_expired = True
            base = group.offset_expiration_base() if stored else None
            if stored and base is None:
                continue  # the group's state keeps its offsets
            for topic, parts in stored.items():
                if group.is_subscribed_to_topic(topic):
                    all_expired = False
                    continue
                for partition, om in parts.items():
                    base_ts = base(om) if base is not None else om.commit_timestamp
                    if om.is_expired(now, base_ts, self.offsets_retention_ms):
                        expired.append((topic, partition))
                    else:
                        all_expired = False
            records = [R.offset_commit_tombstone(group_id, t, p) for t, p in expired]
            # a commit in flight is not expired: the group keeps it (its write may reach the ISR)
            delete_group = all_expired and group.is_empty() and not self._committing(group_id) \
                and not self._has_pending_txn_offsets(group_id)
            if delete_group:
                records.extend(self._group_tombstones(group))
            if not records:
                continue
            try:
                self._write(group_id, records)
            except Exception as exc:  # noqa: BLE001 - retried at the next check
                log.warning("group %s: writing expired-offset tombstones failed: %s", group_id, exc)
                continue
            self._tombstoned(group_id, expired)
            for t, p in expired:
                self.offsets.delete(group_id, t, p)
            removed += len(expired)
            if expired:
                log.info("group %s: expired %d committed offsets", group_id, len(expired))
            if delete_group:
                log.info("group %s: empty and without offsets; deleted", group_id)
                self._forget_group(group)
        return removed

    def on_topics_deleted(self, topics: Collection[str]) -> None:
        """Kafka's onPartitionsDeleted: the metadata image deleted ``topics``; every group of this coordinator
        loses its committed offsets of them (tombstones in __consumer_offsets), so a topic created again under the
        same name starts without the old topic's offsets. Offsets of those topics a transaction is still
        committing are dropped too."""
        deleted = set(topics)
        if not deleted or not self._active:
            return
        for group_id in dict.fromkeys([*self.offsets.groups(), *self._commits_in_flight]):
            gone = [(t, p) for t, parts in self.offsets.group_offsets(group_id).items() if t in deleted for p in parts]
            gone.extend(key for key in self._committing(group_id) if key[0] in deleted and key not in gone)
            self._remove_offsets(group_id, gone)
        for producer in list(self.pending_txn_offsets):
            pending = self.pending_txn_offsets[producer]
            for key in [k for k in pending if k[1] in deleted]:
                del pending[key]
            if not pending:
                del self.pending_txn_offsets[producer]

    def _drop_offsets_of_deleted_topics(self) -> None:
        """A second net under :meth:`on_topics_deleted` at each retention check: offsets of topics and partitions
        that no longer exist (e.g. loaded from records written before their topic's deletion was seen)."""
        for group_id in list(self.offsets.groups()):
            gone: list[tuple[str, int]] = []
            for topic, parts in self.offsets.group_offsets(group_id).items():
                count = self.partition_count(topic)
                gone.extend((topic, p) for p in parts if count is None or p >= count)
            self._remove_offsets(group_id, gone)

    def _remove_offsets(self, group_id: str, gone: list[tuple[str, int]]) -> None:
        """Tombstones ``gone``'s committed offsets of ``group_id`` (offsets of deleted topics or partitions); a
        failed write leaves them for the next retention check."""
        if not gone:
            return
        try:
            self._write(group_id, [R.offset_commit_tombstone(group_id, t, p) for t, p in gone])
        except Exception as exc:  # noqa: BLE001 - retried at the next check
            log.warning("group %s: removing offsets of deleted topics failed: %s", group_id, exc)
            return
        self._tombstoned(group_id, gone)
        for t, p in gone:
            self.offsets.delete(group_id, t, p)
        log.info("group %s: removed %d committed offsets of deleted topics", group_id, len(gone))

    # -- loading ----------------------------------------------------------------------------------------------
    def _load(self, partitions: set[int] | None = None) -> None:
        """Rebuild the groups and offsets of ``partitions`` (None: every partition) from their records."""
        assert self.topic is not None
        group_values: dict[str, dict[str, Any] | None] = {}
        offsets: dict[tuple[str, str, int], OffsetAndMetadata | None] = {}
        count = 0
        before = set(self.groups)
        #: producer id -> offsets its open transaction committed (applied at its COMMIT marker)
        txn_offsets: dict[int, dict[tuple[str, str, int], OffsetAndMetadata | None]] = {}
        for partition in sorted(partitions) if partitions is not None else range(self.topic.num_partitions):
            for offset, key, value, producer, control in self.topic.read_partition_records(partition):
                if control is not None:   # a transaction marker: its offsets become committed, or are dropped
                    done = txn_offsets.pop(producer, {})
                    if control == 1:
                        offsets.update(done)
                    continue
                count += 1
                try:
                    rec = R.decode_record(key, value)
                except R.UnknownRecordType:
                    continue
                except R.RecordFormatError as e:
                    log.error("__consumer_offsets-%d offset %d: skipping unreadable record: %s", partition, offset, e)
                    continue
                if rec.type in (R.OFFSET_COMMIT, R.LEGACY_OFFSET_COMMIT):
                    k = (rec.key["group"], rec.key["topic"], rec.key["partition"])
                    if rec.value is None:
                        offsets[k] = None
                    else:
                        val = rec.value
                        expire = val.get("expire_timestamp", -1)
                        read = OffsetAndMetadata(val["offset"], val.get("leader_epoch", -1), val["metadata"],
                                                 val["commit_timestamp"], None if expire == -1 else expire)
                        if producer >= 0:
                            txn_offsets.setdefault(producer, {})[k] = read
                        else:
                            offsets[k] = read
                elif rec.type == R.GROUP_METADATA:
                    # Records are replayed in log order: a group converted between the classic and the consumer
                    # protocol ends up as whichever came last.
                    gid = rec.key["group"]
                    group_values[gid] = rec.value
                    if rec.value is not None and isinstance(self.groups.get(gid), (ConsumerGroup, self._streams_group)):
                        del self.groups[gid]
                else:
                    gid = rec.key["group_id"]
                    if rec.value is not None and group_values.get(gid) is not None:
                        del group_values[gid]
                    if rec.type in R.STREAMS_GROUP_RECORD_TYPES:
                        self.streams.replay(rec)
                    elif rec.type in R.SHARE_GROUP_RECORD_TYPES:
                        self.share.replay_one(rec)
                    else:
                        self.consumer.replay([rec])
        for producer, pending in txn_offsets.items():   # transactions still open: their markers come later
            self.pending_txn_offsets.setdefault(producer, {}).update(
                {k: om for k, om in pending.items() if om is not None})
        for group_id, metadata in group_values.items():
            if metadata is not None:
                self.groups[group_id] = self.classic.load_group(group_id, metadata)
        for (group_id, topic, partition), om in offsets.items():
            if om is None:
                continue
            self.offsets.put(group_id, topic, partition, om)
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, ClassicGroupState.EMPTY, self.timer.now())
        for group_id, group in self.groups.items():
            if group_id in before:   # coordinated already (another partition's group)
                continue
            if isinstance(group, ClassicGroup):
                self.classic.on_loaded(group)
            elif isinstance(group, ConsumerGroup):
                self.consumer.on_loaded(group)
            elif isinstance(group, self._streams_group):
                self.streams.on_loaded(group)
            elif isinstance(group, ShareGroup):
                self.share.on_loaded(group)
        log.info("loaded %d groups and their offsets from %d __consumer_offsets records", len(self.groups), count)



def _fetched(partition: int, om: OffsetAndMetadata | None, code: int = ErrorCode.NONE) -> Struct:
    if om is None:
        return Struct(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                      error_code=int(code))
    return Struct(partition_index=partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                  metadata=om.metadata, error_code=ErrorCode.NONE)


def _described(group_id: str, code: int, state: str, *, error_message: str | None = None, protocol_type: str = "",
               protocol_data: str = "", members: list[Struct] | None = None) -> Struct:
    return Struct(error_code=int(code), error_message=error_message, group_id=group_id, group_state=state,
                  protocol_type=protocol_type, protocol_data=protocol_data, members=members or [],
                  authorized_operations=-2147483648)
