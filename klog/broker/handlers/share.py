"""ShareFetch (78) and ShareAcknowledge (79): share sessions and the share-partitions this broker leads (KIP-932).

A share session belongs to (group, member) on this broker: ShareFetch with epoch 0 opens it (with the partitions
it names), later requests carry the next epoch and add or forget partitions, epoch -1 closes it (ShareFetch or
ShareAcknowledge) and releases the records the member still holds. Acknowledgements ride on ShareFetch or come
alone in ShareAcknowledge; records come as whole batches with the acquired offset ranges and delivery counts
(the client delivers only the records of those ranges). The share-partition state machine is
:mod:`klog.broker.share_partitions`.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import struct
import time
import uuid
from typing import TYPE_CHECKING, Any, cast

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.share_partitions import (
    ACK_TYPES, RENEW, SharePartition, SharePartitionManager, ShareSession, ShareStateError,
)
from klog.broker.share_state import restore
from klog.metadata import group_config
from klog.metadata.features import SHARE_VERSION
from klog.metadata.image import ConfigResourceType
from klog.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from klog._native import PartitionLog, ReadResult

    from klog.protocol.message_types import (
        ShareAcknowledgeRequest,
        ShareAcknowledgeRequestAcknowledgementBatch,
        ShareAcknowledgeResponse,
        ShareAcknowledgeResponsePartitionData,
        ShareAcknowledgeResponseTopicResponse,
        ShareFetchRequest,
        ShareFetchRequestAcknowledgementBatch,
        ShareFetchResponse,
        ShareFetchResponseLeaderIdAndEpoch,
        ShareFetchResponsePartitionData,
        ShareFetchResponseShareFetchableTopicResponse,
        WriteShareGroupStateRequest,
        WriteShareGroupStateResponse,
        WriteShareGroupStateResponsePartitionResult,
        WriteShareGroupStateResponseWriteStateResult,
    )

    AckBatches = Sequence[ShareFetchRequestAcknowledgementBatch] | Sequence[ShareAcknowledgeRequestAcknowledgementBatch]

#: API keys of the share data path (advertised with the share group APIs)
SHARE_DATA_API_KEYS = frozenset((78, 79, 83, 84, 85, 86, 87))
#: a waiting ShareFetch looks again this long after the earliest acquired record's lock is due to expire (its
#: lock expiry makes the record acquirable; appends, releases and acknowledgements wake it at once)
SHARE_FETCH_LOCK_EXPIRY_SLACK_S = 0.001
#: at most this many turns of the event loop a ShareFetch leaves to the waiting ShareFetches its arrival (its
#: acknowledgements) woke, so that they acquire first, as Kafka's purgatory completes the older DelayedShareFetch
#: first; without it the member whose acknowledgement freed room took it back in the same request and the same
#: members kept every batch while the others' fetches waited
SHARE_FETCH_YIELDS_TO_WAITERS = 4
#: bytes of a segment file read at once to find the record batches' headers of a ShareFetch's records
HEADER_WINDOW_BYTES = 4096
#: bytes read from a partition log per share-partition and ShareFetch (the batches past MaxRecords are cut off)
SHARE_FETCH_READ_BYTES = 1 << 20
#: ShareFetch's ShareAcquireMode (KIP-1206, v2+; v1 requests are batch_optimized): batch_optimized takes MaxRecords
#: as a soft limit and acquires up to the end of the record batch holding the last record it allows, as Kafka's
#: SharePartition does; record_limit acquires at most MaxRecords
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1

_BATCH_HEADER = struct.Struct(">qi")   # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")
# a v2 record batch's attributes (at byte 21) and producer id (at byte 43), Kafka's DefaultRecordBatch layout
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_ID = struct.Struct(">q")
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
_V2_HEADER_BYTES = 61


def _now_ms() -> int:
    return int(time.time() * 1000)


def _sessions(broker: HandlerBroker) -> dict[tuple[str, str], ShareSession]:
    return broker.share_sessions


def _manager(broker: HandlerBroker) -> SharePartitionManager:
    return broker.share_partitions


def share_enabled(broker: HandlerBroker) -> bool:
    """Share groups are usable once the cluster finalized share.version 1 (Kafka 4.2+; ``share`` in
    group.coordinator.rebalance.protocols is accepted but no longer enables them, as in Kafka 4.3)."""
    return broker.metadata.image.features.get(SHARE_VERSION, 0) >= 1


class _SubRegion:
    """The first ``length`` bytes of a segment file region (a FileSlice, kept alive here so that its descriptor
    stays open until the response is sent): records a response sends as they are in the file (zero copy)."""

    __slots__ = ("fd", "position", "length", "_owner")

    def __init__(self, owner: Any, length: int) -> None:
        self.fd, self.position, self.length, self._owner = owner.fd, owner.position, length, owner

    def to_bytes(self) -> bytes:
        data = os.pread(self.fd, self.length, self.position)
        if len(data) != self.length:
            raise OSError(errno.EIO, f"segment file shorter than expected ({len(data)} of {self.length} bytes)")
        return data


def _batch_headers(read: ReadResult, header_bytes: int) -> list[tuple[int, int, bytes]]:
    """The record batches of ``read`` as (slice index, end of the batch in the slice, its first ``header_bytes``
    bytes, at least the 27 up to its last offset delta), read from the segment files a HEADER_WINDOW_BYTES window
    at a time (the headers of small batches come in one read, a large batch costs one small read; the records stay
    in the page cache), up to the first incomplete one."""
    out: list[tuple[int, int, bytes]] = []
    for i, piece in enumerate(read.slices):
        fd, start, n = piece.fd, piece.position, piece.length
        pos = 0
        window, window_at = b"", 0   # the bytes of the slice from window_at on that were read last
        while pos + 12 <= n:
            want = min(header_bytes, n - pos)
            if pos + want > window_at + len(window):
                window_at = pos
                window = os.pread(fd, min(max(HEADER_WINDOW_BYTES, want), n - pos), start + pos)
            header = window[pos - window_at:pos - window_at + want]
            if len(header) < 12:
                break
            _, length = _BATCH_HEADER.unpack_from(header, 0)
            end = pos + 12 + length
            if end > n or length < 15 or len(header) < 27:
                return out
            out.append((i, end, header))
            pos = end
    return out


def _cut_batches(read: ReadResult, first: int, max_records: int, zero_copy: bool, header_bytes: int = 27
                 ) -> tuple[Any, int, list[bytes]]:
    """The complete record batches of ``read`` up to the one holding offset ``first + max_records - 1`` (so a
    response carries about the records it acquires, not all the read returned): as file regions (``zero_copy``,
    sent as they are in the segment files, as Fetch's records) or as bytes; the last offset they hold (-1 when
    none is complete); and the headers of those batches (their first ``header_bytes`` bytes)."""
    last = -1
    headers: list[bytes] = []
    cut_slice, cut_end = -1, 0
    for i, end, header in _batch_headers(read, header_bytes):
        base, _ = _BATCH_HEADER.unpack_from(header, 0)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(header, 23)
        last = base + delta
        headers.append(header)
        cut_slice, cut_end = i, end
        if last >= first + max_records - 1:
            break
    if cut_slice < 0:
        return b"", -1, headers
    slices = read.slices
    regions: list[Any] = slices[:cut_slice]
    tail = slices[cut_slice]
    regions.append(tail if cut_end == tail.length else _SubRegion(tail, cut_end))
    if zero_copy:
        return regions, last, headers
    return b"".join(r.to_bytes() for r in regions), last, headers


def _unreadable(headers: Sequence[bytes], aborted: Sequence[Any]) -> list[tuple[int, int]]:
    """The offset ranges of the batches (``headers``: each batch's first _V2_HEADER_BYTES bytes) a
    read_committed share group never gets (Kafka's SharePartition under ``share.isolation.level=read_committed``):
    control batches (transaction markers) and the transactional batches of the ``aborted`` transactions (producer
    id, first offset, marker offset)."""
    out: list[tuple[int, int]] = []
    for header in headers:
        if len(header) < _V2_HEADER_BYTES or header[16] != 2:   # magic: only v2 batches carry transactions
            continue
        base, _ = _BATCH_HEADER.unpack_from(header, 0)
        (attributes,) = _ATTRIBUTES.unpack_from(header, 21)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(header, 23)
        (producer_id,) = _PRODUCER_ID.unpack_from(header, 43)
        last = base + delta
        if attributes & _CONTROL or (attributes & _TRANSACTIONAL and any(
                a.producer_id == producer_id and a.first_offset <= base and last <= a.last_offset for a in aborted)):
            out.append((base, last))
    return out


def _group_setting(broker: HandlerBroker, group_id: str, name: str) -> str:
    """The group's config ``name`` (GROUP resource), else the broker's synonym or Kafka's default; read on each
    request, so an altered group config applies at once, as Kafka's GroupConfigManager does."""
    configs = broker.metadata.image.configs.get((ConfigResourceType.GROUP, group_id), {})
    return group_config.effective(configs, name, broker.config)


def _renew_enabled(broker: HandlerBroker, group_id: str) -> bool:
    """``share.renew.acknowledge.enable`` (KIP-1222, default true): whether the group accepts RENEW."""
    return _group_setting(broker, group_id, group_config.RENEW_ACKNOWLEDGE_ENABLE).lower() == "true"


def _session_for(broker: HandlerBroker, group_id: str, member_id: str, epoch: int, *, fetch: bool,
                 connection_id: int | None = None) -> tuple[ShareSession | None, int]:
    sessions = _sessions(broker)
    key = (group_id, member_id)
    if epoch == 0:
        if not fetch:
            return None, ErrorCode.INVALID_SHARE_SESSION_EPOCH
        # a new session replaces the member's old one; the records the member holds stay acquired by it (it may
        # still acknowledge them) until their locks expire, as Kafka 4.3's SharePartitionManager.newContext
        sessions.pop(key, None)
        if len(sessions) >= int(broker.config["group.share.max.share.sessions"]):
            return None, ErrorCode.SHARE_SESSION_LIMIT_REACHED
        sessions[key] = ShareSession(group_id, member_id, connection_id=connection_id)
        return sessions[key], ErrorCode.NONE
    session = sessions.get(key)
    if session is None:
        return None, ErrorCode.SHARE_SESSION_NOT_FOUND
    if epoch == -1:
        return session, ErrorCode.NONE
    if epoch != session.epoch:
        return None, ErrorCode.INVALID_SHARE_SESSION_EPOCH
    session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
    return session, ErrorCode.NONE


def _close(broker: HandlerBroker, session: ShareSession) -> None:
    sessions = _sessions(broker)
    sessions.pop((session.group_id, session.member_id), None)
    _manager(broker).release_member(session.group_id, session.member_id, session.partitions.keys())


def close_share_sessions_of(broker: HandlerBroker, connection_id: int) -> None:
    """The share sessions a closed client connection opened close, and the records their members hold are
    released (then written durably), as Kafka 4.3's ShareSessionCache does when the connection goes: a crashed
    consumer's records come back at once, not when their locks expire."""
    sessions = _sessions(broker)
    if not sessions:
        return
    for session in [s for s in sessions.values() if s.connection_id == connection_id]:
        _close(broker, session)
        persisting = asyncio.ensure_future(_persist_closed(broker, session))
        _PERSISTING.add(persisting)   # the loop keeps only a weak reference to a task
        persisting.add_done_callback(_PERSISTING.discard)


#: the durable writes of closed connections' share sessions still running
_PERSISTING: set[asyncio.Future[None]] = set()


async def _persist_closed(broker: HandlerBroker, session: ShareSession) -> None:
    await _persist(broker, session.group_id, list(session.partitions))
    _forget_idle_group(broker, session.group_id)


def _forget_idle_group(broker: HandlerBroker, group_id: str) -> None:
    """The group's last share session here closed: its share-partitions leave this broker's cache once their
    state is durable, so the next fetch loads the durable state (an AlterShareGroupOffsets or
    DeleteShareGroupOffsets, allowed only while the group is empty, may have changed it since)."""
    if any(gid == group_id for gid, _ in _sessions(broker)):
        return
    manager = _manager(broker)
    if not any(sp.dirty for (gid, _, _), sp in manager.partitions.items() if gid == group_id):
        manager.drop_group(group_id)


def _partition_state(broker: HandlerBroker, group_id: str, name: str, index: int
                     ) -> tuple[SharePartition | None, PartitionLog | None, int]:
    """(share-partition, partition log, error code) of a partition this broker must lead."""
    log_ = broker.partitions.get(name, index)
    if log_ is None:
        return None, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    code = broker.replicas.leader_error(name, index)
    if code:
        return None, None, code
    manager = _manager(broker)
    sp = manager.get(group_id, name, index)
    if sp is None:   # not loaded by _load (a partition the request did not name): this broker's replica
        topic = broker.metadata.topic(name)
        topic_id = topic.id if topic is not None else None
        snapshot = manager.store.read(group_id, topic_id, index) \
            if manager.store is not None and topic_id is not None else None
        sp = _create(broker, group_id, name, index, log_, topic_id, snapshot)
    return sp, log_, ErrorCode.NONE


def _create(broker: HandlerBroker, group_id: str, name: str, index: int, log_: PartitionLog,
            topic_id: uuid.UUID | None, snapshot: Any) -> SharePartition:
    """A share-partition this broker starts serving: its durable state when it has one, else a new one at
    ``share.auto.offset.reset``, with its group's configs (GROUP resource), else the broker's group.share.*."""
    configs = broker.metadata.image.configs.get((ConfigResourceType.GROUP, group_id), {})
    setting = functools.partial(group_config.effective, configs, config=broker.config)
    sp = _manager(broker).get_or_init(group_id, name, index,
                                      _reset_offset(log_, setting(group_config.AUTO_OFFSET_RESET)))
    sp.lock_duration_ms = int(setting(group_config.RECORD_LOCK_DURATION_MS))
    sp.delivery_count_limit = int(setting(group_config.DELIVERY_COUNT_LIMIT))
    sp.max_record_locks = int(setting(group_config.PARTITION_MAX_RECORD_LOCKS))
    sp.topic_id = topic_id
    if snapshot is not None:
        restore(sp, snapshot)
    return sp


def _reset_offset(log_: PartitionLog, reset: str) -> int:
    """Where a new share-partition starts (``share.auto.offset.reset``): latest (Kafka's default) at the
    partition's end, earliest at its log start, by_duration:<ISO 8601 duration> at the first record written since
    that long ago (the end when there is none)."""
    if reset == "earliest":
        return int(log_.log_start_offset)
    duration = group_config.duration_ms(reset)
    if duration is not None:
        found = log_.offset_for_timestamp(_now_ms() - duration)
        if found is not None and found[0] < log_.high_watermark:
            return max(int(found[0]), int(log_.log_start_offset))
    return int(log_.high_watermark)


async def _load(broker: HandlerBroker, group_id: str, keys: Iterable[tuple[str, int]]) -> None:
    """Loads the share-partitions of ``keys`` this broker leads and does not serve yet, as Kafka's share-partition
    leader does: their state read from their share coordinator (ReadShareGroupState when another broker leads the
    key's ``__share_group_state`` partition); one never initialized starts at ``share.auto.offset.reset`` and is
    initialized there (InitializeShareGroupState), so its offsets are described from the first fetch on."""
    manager = _manager(broker)
    store = manager.store
    if store is None:
        return
    for name, index in set(keys):
        log_ = broker.partitions.get(name, index)
        topic = broker.metadata.topic(name)
        if manager.get(group_id, name, index) is not None or log_ is None or topic is None \
                or broker.replicas.leader_error(name, index):
            continue
        code, snapshot = await store.load(group_id, topic.id, index)
        if manager.get(group_id, name, index) is not None:
            continue   # another request loaded it meanwhile
        if code:   # the share coordinator did not answer: this broker's replica of the state partition
            snapshot = store.read(group_id, topic.id, index)
        sp = _create(broker, group_id, name, index, log_, topic.id, snapshot)
        if snapshot is None and not code:
            await store.initialize(group_id, topic.id, index, state_epoch=sp.state_epoch,
                                   start_offset=sp.start_offset)


async def _persist(broker: HandlerBroker, group_id: str, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Writes the changed share-partitions' state durably; returns each one's error code (NONE: durable), the
    result of the write that carried the share-partition's changes made before the call (the caller's
    acknowledgements): a write another request started after them, or one started here. As Kafka's
    share-partition leader completes an acknowledgement only with the persister write that carries it, a caller
    never answers NONE for a change whose write is still in flight or failed."""
    manager = _manager(broker)
    out: dict[tuple[str, int], int] = {}
    if manager.store is None:
        return out
    for name, index in set(keys):
        sp = manager.get(group_id, name, index)
        if sp is None or not sp.dirty or sp.topic_id is None:
            continue
        out[(name, index)] = await _write_carrying(broker, sp, sp.changes)
    return out


async def _write_carrying(broker: HandlerBroker, sp: SharePartition, target: int) -> int:
    """The error code of the write of ``sp`` that carries its first ``target`` changes: the write in flight when
    it carries them, else the next one (started here once the write in flight, started before them, ended)."""
    while sp.persisted_changes < target:
        if sp.writing is None:
            sp.writing = (asyncio.ensure_future(_write_state(broker, sp)), sp.changes)
        task, carries = sp.writing
        code: int = await asyncio.shield(task)
        if carries >= target:
            return code   # the write that carried the change: its result, NONE or the error
    return ErrorCode.NONE


async def _write_state(broker: HandlerBroker, sp: SharePartition) -> int:
    """One write of ``sp``'s state (a task, so that a caller that stops waiting does not stop it for the others
    waiting on it); a failed write leaves ``sp`` dirty."""
    carries = sp.changes   # the store reads the state before its first await: every change counted so far
    try:
        assert sp.topic_id is not None
        code: int = await _manager(broker).store.persist(
            sp, sp.topic_id, leader_epoch=broker.partitions.leader_epoch(sp.topic, sp.partition), now_ms=_now_ms())
    finally:
        sp.writing = None
    if code == ErrorCode.NONE:
        sp.persisted_changes = max(sp.persisted_changes, carries)
    elif code == ErrorCode.FENCED_STATE_EPOCH:   # the offsets were altered since it was loaded: load again
        manager = _manager(broker)
        if manager.get(sp.group_id, sp.topic, sp.partition) is sp:
            manager.drop_group(sp.group_id, sp.topic)
    return code


def _refusal(code: int, message: str | None = None) -> dict[str, Any]:
    """A ShareFetch/ShareAcknowledge response refusing the whole request (both have this top level): no lock
    timeout, as Kafka 4.3 answers a refused request."""
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message,
            "acquisition_lock_timeout_ms": 0, "responses": [], "node_endpoints": []}


def _lock_timeout_ms(broker: HandlerBroker, group_id: str) -> int:
    """The AcquisitionLockTimeoutMs of an answered request: the group's ``share.record.lock.duration.ms`` (GROUP
    resource), else the broker's, as Kafka 4.3 answers it (a client learns when its records' locks expire)."""
    return int(_group_setting(broker, group_id, group_config.RECORD_LOCK_DURATION_MS))


def _admit(broker: HandlerBroker, ctx: RequestContext, group_id: str, member_id: str,
           topic_ids: list[uuid.UUID]) -> tuple[tuple[int, str | None] | None, set[uuid.UUID]]:
    """ShareFetch's and ShareAcknowledge's first checks: (the whole request's refusal as (code, message), else
    None; the topics the principal may not read)."""
    if not share_enabled(broker):
        return (ErrorCode.UNSUPPORTED_VERSION, "share groups are not enabled"), set()
    if not group_id or not member_id:   # Kafka 4.3 answers no message
        return (ErrorCode.INVALID_REQUEST, None), set()
    group_ok, refused = _refused_topics(broker, ctx, group_id, topic_ids)
    if not group_ok:
        return (ErrorCode.GROUP_AUTHORIZATION_FAILED, None), set()
    return None, refused


def _refused_topics(broker: HandlerBroker, ctx: RequestContext, group_id: str,
                    topic_ids: list[uuid.UUID]) -> tuple[bool, set[uuid.UUID]]:
    """Kafka's authorization of ShareFetch/ShareAcknowledge: Read on the group (else the whole request is
    refused), Read on each topic (a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED)."""
    if broker.access is None:
        return True, set()
    if not authz.allowed(broker, ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, group_id):
        return False, set()
    names = {}
    for tid in topic_ids:
        known = broker.metadata.topic_by_id(tid)
        if known is not None:
            names[tid] = known.name
    allowed = authz.filter_allowed(broker, ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC, names.values())
    return True, {tid for tid, name in names.items() if name not in allowed}


def _acknowledge(broker: HandlerBroker, group_id: str, member_id: str, name: str, index: int, batches: AckBatches,
                 now_ms: int, renew: tuple[bool, bool] = (False, True)) -> int:
    """Applies one partition's acknowledgement batches, all or none (as Kafka's SharePartition rolls back a
    request's acknowledgements of a partition when one fails); ``renew``: (the request's IsRenewAck, the group's
    share.renew.acknowledge.enable)."""
    is_renew_ack, renew_enabled = renew
    if _malformed(batches):
        return ErrorCode.INVALID_REQUEST
    if any(RENEW in b.acknowledge_types for b in batches):
        # KIP-1222, as Kafka 4.3: a RENEW needs the request's IsRenewAck (v2+), and the group's consent
        if not is_renew_ack:
            return ErrorCode.INVALID_REQUEST
        if not renew_enabled:
            return ErrorCode.INVALID_RECORD_STATE
    if broker.partitions.get(name, index) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    code = broker.replicas.leader_error(name, index)
    if code:
        return code
    sp = _manager(broker).get(group_id, name, index)
    if sp is None:   # as Kafka's SharePartitionManager: a share-partition this broker does not serve (no fetch
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION   # loaded it) is not acknowledged, nor created
    sp.expire_locks(now_ms)
    held_last = None   # the last offset of the batch before, when the member still holds it once acknowledged
    accepted: list[tuple[int, int, list[int]]] = []   # (first, last, types) of each batch, checked once
    try:
        for b in batches:
            types = list(b.acknowledge_types)
            checked = sp.check_acknowledgement(member_id, b.first_offset, b.last_offset, types)
            if checked is not None and checked[0] == held_last:
                raise ShareStateError(ErrorCode.INVALID_RECORD_STATE, f"offset {held_last} acknowledged twice")
            held_last = b.last_offset if checked is not None and types[-1] != RENEW else None
            if checked is not None:
                accepted.append((checked[0], b.last_offset, checked[1]))
    except ShareStateError as e:
        return e.code
    for first, last, types in accepted:
        sp.apply_acknowledgement(first, last, types, now_ms)
    return ErrorCode.NONE


def _named_partitions(topics: Iterable[Any]) -> dict[uuid.UUID, dict[int, AckBatches]]:
    """A ShareFetch's or ShareAcknowledge's partitions by topic id: the acknowledgement batches of each, from the
    last entry naming it (a partition named twice is acknowledged and answered once, as Kafka keys them in a map)."""
    out: dict[uuid.UUID, dict[int, AckBatches]] = {}
    for t in topics:
        for p in t.partitions:
            out.setdefault(t.topic_id, {})[p.partition_index] = p.acknowledgement_batches
    return out


def _malformed(batches: AckBatches) -> bool:
    """Kafka's KafkaApis.validateAcknowledgementBatches: each batch's offsets in order and after the batch
    before's last one (the same offset may end one and start the next), and one acknowledge type, or one for each
    offset, every one known; a malformed partition's acknowledgements are all refused (INVALID_REQUEST)."""
    previous_last = -1
    for b in batches:
        types = b.acknowledge_types
        if b.first_offset > b.last_offset or b.first_offset < previous_last or not types \
                or (len(types) > 1 and len(types) != b.last_offset - b.first_offset + 1) \
                or any(t not in ACK_TYPES for t in types):
            return True
        previous_last = b.last_offset
    return False


def _leader(broker: HandlerBroker, name: str, index: int) -> ShareFetchResponseLeaderIdAndEpoch:
    return {"leader_id": broker.node_id, "leader_epoch": broker.partitions.leader_epoch(name, index)}


@handler(78, 1, 2)
async def handle_share_fetch(broker: HandlerBroker, ctx: RequestContext, request: ShareFetchRequest
                             ) -> ShareFetchResponse:
    def top(code: int, message: str | None = None) -> ShareFetchResponse:
        return cast("ShareFetchResponse", _refusal(code, message))

    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    refusal, refused = _admit(broker, ctx, group_id or "", member_id or "", [t.topic_id for t in request.topics])
    if refusal is not None:
        return top(*refusal)
    assert group_id and member_id   # _admit refused an empty one
    lock_ms = _lock_timeout_ms(broker, group_id)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0 and has_acks:   # acknowledgements cannot open a share session (Kafka 4.3 answers no message)
        return top(ErrorCode.INVALID_REQUEST)
    if getattr(request, "is_renew_ack", False) and (request.max_wait_ms or request.min_bytes or request.max_bytes
                                                    or request.max_records):
        # KIP-1222: a ShareFetch carrying RENEW acknowledgements only acknowledges (it fetches nothing)
        return top(ErrorCode.INVALID_REQUEST)   # Kafka 4.3 answers no message
    session, code = _session_for(broker, group_id, member_id, epoch, fetch=True, connection_id=ctx.connection_id)
    if code or session is None:
        return top(code)
    now = _now_ms()
    is_renew_ack = bool(getattr(request, "is_renew_ack", False))   # v2+
    renew = (is_renew_ack, _renew_enabled(broker, group_id))
    names: dict[uuid.UUID, str | None] = {}

    def topic_name(topic_id: uuid.UUID) -> str | None:
        if topic_id not in names:
            known = broker.metadata.topic_by_id(topic_id)
            names[topic_id] = known.name if known is not None else None
        return names[topic_id]

    answers: dict[tuple[uuid.UUID, int], ShareFetchResponsePartitionData] = {}

    def answer(topic_id: uuid.UUID, index: int) -> ShareFetchResponsePartitionData:
        key = (topic_id, index)
        if key not in answers:
            answers[key] = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                            "acknowledge_error_code": ErrorCode.NONE, "acknowledge_error_message": None,
                            "current_leader": {"leader_id": -1, "leader_epoch": -1}, "records": b"",
                            "acquired_records": []}
        return answers[key]

    # forgotten partitions leave the session; the records this member holds there stay acquired until it
    # acknowledges them, their locks expire or the session closes, as in Kafka 4.3
    for ft in request.forgotten_topics_data:
        name = topic_name(ft.topic_id)
        for index in ft.partitions:
            if name is not None:
                session.partitions.pop((name, index), None)
    for topic_id, named in _named_partitions(request.topics).items():
        name = topic_name(topic_id)
        for index, batches in named.items():
            a = answer(topic_id, index)
            if name is None:
                a["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if topic_id in refused:
                a["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if batches:
                a["acknowledge_error_code"] = _acknowledge(broker, group_id, member_id, name, index, batches, now,
                                                           renew)
            if epoch != -1:
                session.partitions[(name, index)] = topic_id
    # the share-partitions this broker starts serving load after the acknowledgements, as Kafka's
    # KafkaApis acknowledges before it fetches: an acknowledgement of one not loaded yet is refused
    await _load(broker, group_id, [(known.name, p.partition_index) for t in request.topics
                                   if (known := broker.metadata.topic_by_id(t.topic_id)) is not None
                                   for p in t.partitions])
    if epoch == -1:
        _close(broker, session)
    acked = [(name, index) for (tid, index) in answers if (name := topic_name(tid)) is not None]
    for (name, index), code in (await _persist(broker, group_id, acked + list(session.partitions))).items():
        known = broker.metadata.topic(name)
        tid = session.partitions.get((name, index)) or (known.id if known is not None else None)
        answered = answers.get((tid, index)) if tid is not None else None
        if code and answered is not None and not answered["acknowledge_error_code"]:
            answered["acknowledge_error_code"] = code
    if epoch == -1 or is_renew_ack:   # closing, or only renewing locks: nothing is acquired
        if epoch == -1:
            _forget_idle_group(broker, group_id)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "acquisition_lock_timeout_ms": lock_ms, "responses": _by_topic(answers), "node_endpoints": []}

    max_records = request.max_records   # Kafka 4.3 acquires nothing for a MaxRecords of 0 or less
    max_bytes = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    read_committed = _group_setting(broker, group_id, group_config.ISOLATION_LEVEL) == "read_committed"
    whole_batches = getattr(request, "share_acquire_mode", BATCH_OPTIMIZED) != RECORD_LIMIT   # v2+
    for _ in range(SHARE_FETCH_YIELDS_TO_WAITERS):   # the fetches woken before this one acquire first
        if not broker.partitions.share_wakes_pending():
            break
        await asyncio.sleep(0)
    while True:
        acquired_any = _acquire_all(broker, session, answer, max_records, max_bytes, _now_ms(), read_committed,
                                    whole_batches, ctx.zero_copy)
        remaining = deadline - time.monotonic()
        if acquired_any or remaining <= 0:
            break
        # as Kafka's DelayedShareFetch: answered once records become acquirable (an append moving the high
        # watermark, a release, the in-flight window moving: those wake it), a lock expires, or at MaxWaitMs;
        # piggybacked acknowledgements (applied above) do not answer it sooner: Kafka 4.3's
        # KafkaApis.handleFetchFromShareFetchRequest passes the request's MaxWaitMs and MinBytes to
        # SharePartitionManager.fetchMessages whether or not the request carried acknowledgements
        await broker.partitions.wait_for_append(list(session.partitions),
                                                min(remaining, _until_lock_expiry_s(broker, session)), share=True)
    await _persist(broker, group_id, list(session.partitions))   # lock expiries found while acquiring
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": _by_topic(answers), "node_endpoints": []}


def _until_lock_expiry_s(broker: HandlerBroker, session: ShareSession) -> float:
    """Seconds until the earliest acquired record's lock of the session's share-partitions expires (infinite
    when none is acquired), plus SHARE_FETCH_LOCK_EXPIRY_SLACK_S."""
    manager = _manager(broker)
    earliest: int | None = None
    for name, index in session.partitions:
        sp = manager.get(session.group_id, name, index)
        due = sp.next_lock_deadline_ms() if sp is not None else None
        if due is not None and (earliest is None or due < earliest):
            earliest = due
    if earliest is None:
        return float("inf")
    return max(earliest - _now_ms(), 0) / 1000 + SHARE_FETCH_LOCK_EXPIRY_SLACK_S


def _acquire_all(broker: HandlerBroker, session: ShareSession,
                 answer: Callable[[uuid.UUID, int], ShareFetchResponsePartitionData], max_records: int, max_bytes: int,
                 now: int, read_committed: bool = False, whole_batches: bool = True, zero_copy: bool = False) -> bool:
    """Acquires records for the session's member from each of its partitions, at most ``max_records`` in all
    (``whole_batches``, batch_optimized mode: up to the end of the batch holding the last record allowed)."""
    remaining_records, remaining_bytes = max_records, max_bytes
    acquired_any = False
    for (name, index), topic_id in list(session.partitions.items()):
        a = answer(topic_id, index)
        if a["acquired_records"] or a["error_code"]:
            continue
        sp, log_, code = _partition_state(broker, session.group_id, name, index)
        if code or sp is None or log_ is None:
            a["error_code"] = code
            continue
        a["current_leader"] = _leader(broker, name, index)
        if remaining_records <= 0 or remaining_bytes <= 0:
            continue
        sp.expire_locks(now)
        if sp.start_offset < log_.log_start_offset:   # retention removed records the group never finished
            sp.skip_to(log_.log_start_offset)
        visible = log_.high_watermark
        if read_committed:   # only below the last stable offset, as Kafka's share fetch with TXN_COMMITTED
            visible = min(visible, broker.producers.last_stable_offset(name, index, visible,
                                                                            log_.log_start_offset))
        first = sp.next_fetch_offset(visible)
        if first is None:
            continue
        try:
            read = log_.read(first, min(remaining_bytes, SHARE_FETCH_READ_BYTES), max_offset=visible,
                             min_one_batch=True)
        except ValueError:
            continue
        # Kafka's SharePartition acquires at most min(MaxRecords, the in-flight room) records, a soft limit in
        # batch_optimized mode; with no room left it acquires only in-flight records again
        room = sp.lock_room()
        data, last, headers = _cut_batches(read, first, min(remaining_records, room) if room > 0
                                           else remaining_records, zero_copy,
                                           _V2_HEADER_BYTES if read_committed else 27)
        last = min(last, visible - 1)
        if room <= 0:
            last = min(last, sp.end_offset - 1)
        if last < first:
            continue
        unreadable = _unreadable(headers, broker.producers.aborted_txns(name, index, first, last + 1)) \
            if read_committed else ()
        # batch_optimized: every available record of the batches read, through the one holding the record the
        # limit allows last (_cut_batches stopped there), so no member is sent a batch it gets only part of
        limit = last - first + 1 if whole_batches else remaining_records
        runs = sp.acquire(session.member_id, first, last, limit, now, unreadable, past_lock_limit=whole_batches)
        if not runs:
            continue
        acquired_any = True
        a["records"] = data
        a["acquired_records"] = [{"first_offset": f, "last_offset": la, "delivery_count": c} for f, la, c in runs]
        remaining_records -= sum(la - f + 1 for f, la, _ in runs)
        remaining_bytes -= sum(r.length for r in data) if isinstance(data, list) else len(data)
    return acquired_any


def _by_topic(answers: dict[tuple[uuid.UUID, int], ShareFetchResponsePartitionData]
              ) -> list[ShareFetchResponseShareFetchableTopicResponse]:
    out: dict[uuid.UUID, list[ShareFetchResponsePartitionData]] = {}
    for (topic_id, _), a in answers.items():
        out.setdefault(topic_id, []).append(a)
    return [{"topic_id": t, "partitions": ps} for t, ps in out.items()]


@handler(79, 1, 2)
async def handle_share_acknowledge(broker: HandlerBroker, ctx: RequestContext, request: ShareAcknowledgeRequest
                                   ) -> ShareAcknowledgeResponse:
    def top(code: int, message: str | None = None) -> ShareAcknowledgeResponse:
        return cast("ShareAcknowledgeResponse", _refusal(code, message))

    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    refusal, refused = _admit(broker, ctx, group_id or "", member_id or "", [t.topic_id for t in request.topics])
    if refusal is not None:
        return top(*refusal)
    assert group_id and member_id   # _admit refused an empty one
    lock_ms = _lock_timeout_ms(broker, group_id)
    session, code = _session_for(broker, group_id, member_id, epoch, fetch=False)
    if code or session is None:
        return top(code)
    now = _now_ms()
    is_renew_ack = bool(getattr(request, "is_renew_ack", False))   # v2+
    renew = (is_renew_ack, _renew_enabled(broker, group_id))
    responses: list[ShareAcknowledgeResponseTopicResponse] = []
    for topic_id, named in _named_partitions(request.topics).items():
        known = broker.metadata.topic_by_id(topic_id)
        parts: list[ShareAcknowledgeResponsePartitionData] = []
        for index, batches in named.items():
            pcode: int
            if known is None:
                pcode = ErrorCode.UNKNOWN_TOPIC_ID
            elif topic_id in refused:
                pcode = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                pcode = _acknowledge(broker, group_id, member_id, known.name, index, batches, now, renew)
            leader = _leader(broker, known.name, index) if known is not None else \
                {"leader_id": -1, "leader_epoch": -1}
            parts.append({"partition_index": index, "error_code": int(pcode), "error_message": None,
                          "current_leader": leader})
        responses.append({"topic_id": topic_id, "partitions": parts})
    if epoch == -1:
        _close(broker, session)
    persisted = await _persist(broker, group_id, [(k.name, p.partition_index) for t in request.topics
                                                  if (k := broker.metadata.topic_by_id(t.topic_id)) is not None
                                                  for p in t.partitions])
    if epoch == -1:
        _forget_idle_group(broker, group_id)
    by_id = {t.topic_id: k.name for t in request.topics if (k := broker.metadata.topic_by_id(t.topic_id))}
    for r in responses:
        for part in r["partitions"]:
            code = persisted.get((by_id.get(r["topic_id"], ""), part["partition_index"]), ErrorCode.NONE)
            if code and not part["error_code"]:
                part["error_code"] = code
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": responses, "node_endpoints": []}


@handler(85, 0, 1)
async def handle_write_share_group_state(broker: HandlerBroker, ctx: RequestContext,
                                         request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    """The share coordinator's side of WriteShareGroupState: a share-partition leader's state, appended to this
    broker's ``__share_group_state`` partition (NOT_COORDINATOR when this broker does not lead it). Kafka's
    authorization: ClusterAction on the cluster (brokers only)."""
    results: list[WriteShareGroupStateResponseWriteStateResult] = []
    refused = broker.access is not None and not authz.allowed_cluster(broker, ctx, authz.AclOperation.CLUSTER_ACTION)
    store = _manager(broker).store
    for t in request.topics:
        parts: list[WriteShareGroupStateResponsePartitionResult] = []
        for p in t.partitions:
            code: int
            if refused:
                code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elif not share_enabled(broker) or store is None:
                code = ErrorCode.UNSUPPORTED_VERSION
            else:
                batches = [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                            "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                           for b in p.state_batches]
                code = await store.write_state(request.group_id, t.topic_id, p.partition,
                                               leader_epoch=p.leader_epoch, start_offset=p.start_offset,
                                               batches=batches, now_ms=_now_ms(), state_epoch=p.state_epoch)
            parts.append({"partition": p.partition, "error_code": int(code), "error_message": None})
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}
