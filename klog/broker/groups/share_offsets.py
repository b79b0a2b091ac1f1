"""The share-group offset admin of the group coordinator (KIP-932): DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92), and the share state a DeleteGroups removes, as Kafka
4.3's ``GroupCoordinatorService`` answers them.

A share group's offsets are its share-partitions' start offsets, kept by the share coordinator in
``__share_group_state`` (:class:`klog.broker.share_state.ShareStateStore`): describing reads each one's
summary (ReadShareGroupStateSummary), altering starts a new state epoch at the given offset
(InitializeShareGroupState), deleting writes a tombstone (DeleteShareGroupState), routed to the broker that leads
the key's state partition as Kafka's persister routes them. Altering and deleting need the group empty (no
member could hold a record of the old state), as in Kafka; the share-partitions this broker caches for the group
are dropped, so the next ShareFetch loads the new state.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, TypeVar

from klog.protocol import ApiKey, Struct

from .errors import ErrorCode, GroupError
from .share import ShareGroup

log = logging.getLogger(__name__)
T = TypeVar("T")

# ListOffsets as a consumer asks it (replica -1, read uncommitted) for the latest offset: the leader's high watermark
_LATEST, _LIST_OFFSETS_VERSION = -1, 4
_END_OFFSET_TIMEOUT_MS = 30_000
#: at most this many partitions in one ListOffsets to a leader for lags (a group's partitions are unbounded)
_LIST_OFFSETS_MAX_PARTITIONS = 1000
#: a lag ListOffsets answer's bound: a fixed part and an allowance per partition asked (its topic name included)
_LIST_OFFSETS_RESPONSE_BYTES, _LIST_OFFSETS_BYTES_PER_PARTITION = 1 << 16, 512


def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class ShareOffsetsAdmin:
    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator

    @property
    def _store(self) -> Any:
        manager = getattr(self.coordinator.context, "share_partitions", None)
        return getattr(manager, "store", None)

    def _drop_cached(self, group_id: str, topic: str | None = None) -> None:
        manager = getattr(self.coordinator.context, "share_partitions", None)
        if manager is not None:
            manager.drop_group(group_id, topic)

    def _group(self, group_id: str) -> tuple[ShareGroup | None, int, str | None]:
        """(the share group, else the error code and message Kafka answers for the group)."""
        if unavailable := self.coordinator._unavailable(group_id):
            return None, unavailable, None
        if not group_id:
            return None, ErrorCode.INVALID_GROUP_ID, "The group id is invalid."
        group = self.coordinator.groups.get(group_id)
        if group is None:
            return None, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        if not isinstance(group, ShareGroup):
            return None, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        return group, ErrorCode.NONE, None

    async def _end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """Each partition's end offset for its lag, as Kafka's ``PartitionMetadataClient.listLatestOffsets``: its
        leader's high watermark, read here when this broker leads it (or is the single node), else asked of the
        leader: one ListOffsets (latest, as a consumer) per leader for all its partitions, the leaders asked at
        once. None for a partition whose leader is unknown or did not answer (its lag is then unknown)."""
        context = self.coordinator.context
        endpoint_of = getattr(context, "partition_leader_endpoint", None)
        metadata = getattr(context, "metadata", None)
        if endpoint_of is None or metadata is None or metadata.controller is None:   # a single node leads them all
            return {tp: self._local_high_watermark(*tp) for tp in partitions}
        offsets: dict[tuple[str, int], int | None] = {}
        by_leader: dict[tuple[int, str, int], list[tuple[str, int]]] = {}
        for topic, partition in dict.fromkeys(partitions):
            endpoint = endpoint_of(topic, partition, context.listener_name)
            if endpoint is None:
                offsets[(topic, partition)] = None
            elif endpoint[0] == context.node_id and not context.replicas.leader_error(topic, partition):
                offsets[(topic, partition)] = self._local_high_watermark(topic, partition)
            else:
                by_leader.setdefault(endpoint, []).append((topic, partition))
        asked = [self._ask_leader(endpoint, chunk) for endpoint, leads in by_leader.items()
                 for chunk in _chunks(leads, _LIST_OFFSETS_MAX_PARTITIONS)]
        for answered in await asyncio.gather(*asked):
            offsets.update(answered)
        return offsets

    async def _ask_leader(self, endpoint: tuple[int, str, int], partitions: list[tuple[str, int]]
                          ) -> dict[tuple[str, int], int | None]:
        """The leader's high watermarks of ``partitions`` by one ListOffsets; None for each it did not answer."""
        context = self.coordinator.context
        node, host, port = endpoint
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        body = Struct(replica_id=-1, isolation_level=0, topics=[Struct(name=topic, partitions=[Struct(
            partition_index=p, current_leader_epoch=-1, timestamp=_LATEST, max_num_offsets=1) for p in parts])
            for topic, parts in topics.items()])
        offsets: dict[tuple[str, int], int | None] = dict.fromkeys(partitions)
        try:
            conn = await context.inter_broker.open(
                host, port, node, client_id=f"klog-share-lag-{context.node_id}",
                request_timeout_ms=_END_OFFSET_TIMEOUT_MS, connect_timeout_ms=5000,
                max_response_bytes=_LIST_OFFSETS_RESPONSE_BYTES + _LIST_OFFSETS_BYTES_PER_PARTITION * len(partitions))
            try:
                response = await conn.request(ApiKey.LIST_OFFSETS, body, version=_LIST_OFFSETS_VERSION)
            finally:
                conn.close()
        except Exception as exc:  # noqa: BLE001 - the lags are unknown
            log.info("ListOffsets of %d partition(s) to node %d for a share-group lag failed: %s",
                     len(partitions), node, exc)
            return offsets
        for topic in response.topics:
            for answered in topic.partitions:
                key = (topic.name, int(answered.partition_index))
                if key in offsets and not answered.error_code:
                    offsets[key] = int(answered.offset)
        return offsets

    def _local_high_watermark(self, topic: str, partition: int) -> int | None:
        plog = self.coordinator.context.partition_log(topic, partition) \
            if hasattr(self.coordinator.context, "partition_log") else None
        return None if plog is None else int(plog.high_watermark)

    # -- DescribeShareGroupOffsets ------------------------------------------------------------------------------
    async def describe(self, header: Any, request: Any, client_host: str) -> Struct:
        return Struct(throttle_time_ms=0, groups=[await self._describe_group(g) for g in request.groups])

    async def _describe_group(self, asked: Any) -> Struct:
        group, code, message = self._group(asked.group_id)
        # an unknown group, another type's, or the empty group id, has no share state: Kafka answers its offsets
        # as it does a never-initialized group's (not GROUP_ID_NOT_FOUND nor INVALID_GROUP_ID)
        unknown = code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.INVALID_GROUP_ID)
        if group is None and not unknown:
            return Struct(group_id=asked.group_id, topics=[], error_code=int(code), error_message=message)
        catalog = self.coordinator.topic_catalog()
        wanted: list[tuple[str, uuid.UUID | None, list[int]]] = []
        if asked.topics is None and group is not None:   # every share-partition the group has state for
            for initialized_id, initialized in sorted(group.initialized.items(),
                                                      key=lambda kv: catalog.by_id.get(kv[0], "")):
                name = catalog.by_id.get(initialized_id)
                if name is not None and initialized:
                    wanted.append((name, initialized_id, sorted(initialized)))
        elif asked.topics is not None:
            for t in asked.topics:
                known = catalog.by_name.get(t.topic_name)
                wanted.append((t.topic_name, known[0] if known else None, list(t.partitions)))
        summaries = {(name, index): await self._summary(asked.group_id, name, tid, index)
                     for name, tid, parts in wanted for index in parts}
        ends = await self._end_offsets([tp for tp, summary in summaries.items()
                                        if summary is not None and not summary.error_code
                                        and summary.start_offset >= 0])
        topics = [Struct(topic_name=name, topic_id=tid or uuid.UUID(int=0),
                         partitions=[_partition_answer(index, summaries[(name, index)], ends.get((name, index)))
                                     for index in parts])
                  for name, tid, parts in wanted]
        return Struct(group_id=asked.group_id, topics=topics, error_code=ErrorCode.NONE, error_message=None)

    async def _summary(self, group_id: str, name: str, tid: uuid.UUID | None, index: int) -> Any:
        """The share-partition's state summary (ReadShareGroupStateSummary), None where it has no state."""
        count = self.coordinator.topic_catalog().by_name.get(name, (None, 0))[1]
        if tid is None or not 0 <= index < count:   # no such share-partition: no state, as Kafka answers it
            return None
        store = self._store
        return None if store is None else await store.summary(group_id, tid, index)

    # -- AlterShareGroupOffsets ---------------------------------------------------------------------------------
    async def alter(self, header: Any, request: Any, client_host: str) -> Struct:
        def refused(code: int, message: str | None) -> Struct:
            return Struct(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[])

        group_id = request.group_id
        if unavailable := self.coordinator._unavailable(group_id):
            return refused(unavailable, None)
        if not group_id:
            return refused(ErrorCode.INVALID_GROUP_ID, "The group id is empty.")
        group = self.coordinator.groups.get(group_id)
        created = group is None
        if group is None:   # Kafka creates the share group, so its offsets can be set before any member joins
            group = ShareGroup(group_id)
        elif not isinstance(group, ShareGroup):
            return refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not group.is_empty():
            return refused(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        catalog = self.coordinator.topic_catalog()
        store = self._store
        responses = []
        added: dict[uuid.UUID, set[int]] = {}
        for topic_name, partitions in _merged_topics(request.topics):
            known = catalog.by_name.get(topic_name)
            parts = []
            for p in partitions:
                code: int = ErrorCode.NONE
                message = None
                if known is None or not 0 <= p.partition_index < known[1]:
                    code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, \
                        "This server does not host this topic-partition."
                elif store is not None:
                    code = await self._initialize(store, group_id, known[0], p.partition_index, p.start_offset)
                    if code == ErrorCode.NONE:
                        added.setdefault(known[0], set()).add(p.partition_index)
                parts.append(Struct(partition_index=p.partition_index, error_code=int(code), error_message=message))
            self._drop_cached(group_id, topic_name)
            responses.append(Struct(topic_name=topic_name, topic_id=known[0] if known else uuid.UUID(int=0),
                                    partitions=parts))
        # the state writes awaited: the group as it is now (a member may have joined, or it was deleted)
        current = self.coordinator.groups.get(group_id)
        if current is None:
            group, created = (group if created else ShareGroup(group_id)), True
        elif not isinstance(current, ShareGroup):
            return refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        elif not current.is_empty():
            return refused(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        else:
            group, created = current, False
        initialized = {tid: set(ps) for tid, ps in group.initialized.items()}
        for tid, ps in added.items():
            initialized.setdefault(tid, set()).update(ps)
        if created or initialized != group.initialized:
            try:   # the group (when new) and its share-partitions with state, in __consumer_offsets
                self.coordinator.share.record_initialized(group, initialized, created=created)
            except GroupError as e:
                return refused(e.code, e.message)
            self.coordinator.groups.setdefault(group_id, group)
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=responses)

    @staticmethod
    async def _initialize(store: Any, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> int:
        summary = await store.summary(group_id, topic_id, partition)
        if summary.error_code:
            return int(summary.error_code)
        return int(await store.initialize(group_id, topic_id, partition, state_epoch=summary.state_epoch + 1,
                                          start_offset=start_offset))

    # -- DeleteShareGroupOffsets --------------------------------------------------------------------------------
    async def delete_offsets(self, header: Any, request: Any, client_host: str) -> Struct:
        group, code, message = self._group(request.group_id)
        if group is None:
            return Struct(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[])
        if not group.is_empty():
            return Struct(throttle_time_ms=0, error_code=ErrorCode.NON_EMPTY_GROUP,
                          error_message="The group is not empty.", responses=[])
        catalog = self.coordinator.topic_catalog()
        responses: list[Struct] = []
        answered: set[str] = set()
        for t in request.topics:
            if t.topic_name in answered:   # named twice: answered once, as Kafka
                continue
            answered.add(t.topic_name)
            known = catalog.by_name.get(t.topic_name)
            if known is None:
                responses.append(Struct(topic_name=t.topic_name, topic_id=uuid.UUID(int=0),
                                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        error_message="This server does not host this topic-partition."))
                continue
            if known[0] not in group.initialized:   # as Kafka: the group has no share state of the topic
                responses.append(Struct(topic_name=t.topic_name, topic_id=known[0],
                                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        error_message="There is no offset information to delete."))
                continue
            code = await self._delete_state(group, known[0], range(known[1]))
            if code == ErrorCode.NONE and (changed := self._changed(group)) is not None:
                return Struct(throttle_time_ms=0, error_code=int(changed[0]), error_message=changed[1],
                              responses=[])
            if code == ErrorCode.NONE and known[0] in group.initialized:
                try:
                    self.coordinator.share.record_initialized(
                        group, {tid: ps for tid, ps in group.initialized.items() if tid != known[0]})
                except GroupError as e:
                    code = e.code
            self._drop_cached(group.group_id, t.topic_name)
            responses.append(Struct(topic_name=t.topic_name, topic_id=known[0], error_code=int(code),
                                    error_message=None))
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=responses)

    async def _delete_state(self, group: ShareGroup, topic_id: uuid.UUID, partitions: Any) -> int:
        store = self._store
        if store is None:
            return ErrorCode.NONE
        for index in partitions:
            if self._changed(group) is not None:   # a member joined meanwhile: its share state stays
                return ErrorCode.NONE   # (the caller answers the change)
            code = int(await store.delete(group.group_id, topic_id, index))
            if code:
                return code
        return ErrorCode.NONE

    def _changed(self, group: ShareGroup) -> tuple[int, str] | None:
        """After an await: (the error to answer, its message) when ``group`` is no longer the coordinator's group
        of its id or is no longer empty (share state is altered or deleted only while the group is empty)."""
        if self.coordinator.groups.get(group.group_id) is not group:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group.group_id} was deleted meanwhile."
        if not group.is_empty():
            return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
        return None

    # -- DeleteGroups -------------------------------------------------------------------------------------------
    async def delete_group_state(self, group: ShareGroup) -> int:
        """Deletes the share state of every share-partition the (empty) group has state for; the error code."""
        catalog = self.coordinator.topic_catalog()
        for tid in list(group.initialized):
            count = catalog.by_name.get(catalog.by_id.get(tid, ""), (None, 0))[1]
            code = await self._delete_state(group, tid, range(count) if count else sorted(group.initialized[tid]))
            if code:
                return code
            if (changed := self._changed(group)) is not None:   # a member joined, or the group went meanwhile
                return changed[0]
            group.initialized.pop(tid, None)
        self._drop_cached(group.group_id)
        return ErrorCode.NONE


def _merged_topics(topics: Any) -> list[tuple[str, list[Any]]]:
    """AlterShareGroupOffsets' topics as (name, partitions), a topic named twice once with the partitions of
    both entries: Kafka 4.3 keys them by topic and answers each once."""
    merged: dict[str, list[Any]] = {}
    for t in topics:
        merged.setdefault(t.topic_name, []).extend(t.partitions)
    return list(merged.items())


def _partition_answer(index: int, summary: Any, end_offset: int | None) -> Struct:
    """A share-partition's DescribeShareGroupOffsets answer from its state summary (None: no state) and its
    leader's end offset (None: unknown, the lag -1)."""
    if summary is None:
        return Struct(partition_index=index, start_offset=-1, leader_epoch=0, lag=-1, error_code=ErrorCode.NONE,
                      error_message=None)
    if summary.error_code:
        return Struct(partition_index=index, start_offset=-1, leader_epoch=0, lag=-1,
                      error_code=int(summary.error_code), error_message=None)
    lag = -1
    if end_offset is not None and summary.start_offset >= 0:
        # Kafka's share-partition lag (KIP-1226): records from the start offset not yet delivered to completion
        # (negative, as Kafka answers it, for a start offset altered past the end)
        lag = end_offset - summary.start_offset - max(summary.delivery_complete_count, 0)
    return Struct(partition_index=index, start_offset=summary.start_offset, leader_epoch=summary.leader_epoch,
                  lag=lag, error_code=ErrorCode.NONE, error_message=None)
