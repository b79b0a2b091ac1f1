"""KIP-227 incremental fetch sessions, the serving side: Kafka's ``FetchManager`` and ``FetchSessionCache``, pure
(the clock is an argument; no IO).

A client opens a session with a full fetch (``session_epoch`` 0); the answer carries a session id. Its next
fetches are incremental (that id, epochs 1, 2, ...): they name only the partitions whose fetch parameters changed
and in ``forgotten_topics_data`` those to drop; the session remembers the rest. The answer to an incremental fetch
holds only the partitions with something to say: records, a moved high watermark or log start, an error, a
diverging epoch or a preferred read replica. A replica following hundreds of partitions then sends and reads a few
entries a round instead of all of them.

- ``session_epoch`` -1 is a sessionless full fetch (a ``session_id`` given is closed); 0 closes any session named
  and opens a new one; above 0 is the next fetch of a session: an unknown id answers FETCH_SESSION_ID_NOT_FOUND, an
  epoch other than the expected one INVALID_FETCH_SESSION_EPOCH, and a version that names topics otherwise than
  the session did (names before v13, ids from v13) FETCH_SESSION_TOPIC_ID_ERROR. A session left with no partitions
  is closed and answered as sessionless.
- ``max.incremental.fetch.session.cache.slots`` bounds the sessions kept (0: none; every answer is sessionless).
  When the cache is full a new session takes the slot of one unused for :data:`SESSION_EVICTION_MS`, else of the
  least valuable evictable one (Kafka's order: not a replica's, then fewer partitions) if that is worth no more
  than the newcomer. A replica's session ("privileged") may evict any non-replica session; others only sessions
  older than :data:`SESSION_EVICTION_MS`. Otherwise the fetch is answered without a session.
- ``klog.fetch.session.max.partitions`` bounds the partitions one session holds (incremental fetches can add
  partitions without end, unknown ones included): a full fetch naming more is answered without a session, and an
  incremental one that would grow a session past it closes the session and is answered as sessionless (the
  client's next incremental fetch is told FETCH_SESSION_ID_NOT_FOUND and starts again in full).
- ``klog.fetch.session.cache.max.partitions`` bounds the partitions all sessions hold together, so the cache's
  memory is bounded by one figure (about 270 bytes a partition) rather than slots x partitions a session. A new
  session that would pass it evicts by the rules above while it may, else is answered without a session; an
  incremental fetch that would pass it ends its session as above.
- A partition named again with a new leader epoch is answered in full once more (klog's addition: a client may
  have dropped the last answer as one for its old epoch, and would otherwise wait for the next change).
- Partitions that returned records move to the end of their session, so a response's byte limit does not starve
  the partitions after them.
- The native Fetch path (``klog/broker/native_fetch.py``) may hold a session: :meth:`FetchSessionCache.
  hand_over` gives it the session's partitions once every one is routed to it; it then serves the incremental
  fetches that only update partitions already in the session (epoch and partitions move on there). The cache stays
  the owner: :meth:`FetchSessionCache.get` takes the state back before the Python path reads or changes the
  session, :meth:`FetchSessionCache.remove` (closing, eviction) drops it there too, and
  :meth:`FetchSessionCache.touch` records each native use for eviction.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from klog.broker import errors
from klog.client.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INT32_MAX, INVALID_SESSION_ID, next_epoch

if TYPE_CHECKING:
    from klog.protocol.message_types import FetchRequestPartition

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "SESSION_EVICTION_MS", "FetchContext",
           "FetchPartition", "FetchSession", "FetchSessionCache", "PartitionKey", "next_epoch"]

#: Kafka's FetchSessionCache eviction time: a session unused this long gives up its slot to any newcomer, and only
#: a session this old may be evicted by a non-replica's
SESSION_EVICTION_MS = 120_000
#: ``klog.fetch.session.max.partitions`` default
MAX_SESSION_PARTITIONS = 100_000
#: ``klog.fetch.session.cache.max.partitions`` default
MAX_CACHED_PARTITIONS = 1_000_000

#: (topic id from Fetch v13, the topic name before; partition)
PartitionKey = tuple[str | uuid.UUID, int]
#: a partition's answer (the Fetch response's PartitionData)
Answer = TypeVar("Answer", bound=Mapping[str, Any])


@dataclass(slots=True)
class FetchPartition:
    """One partition's fetch parameters, as a request gives them and a session keeps them, and (in a session) what
    the last answer told the client of it."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    #: the high watermark and log start last answered (-1: not yet, or an error, which is answered again)
    answered_high_watermark: int = -1
    answered_log_start_offset: int = -1

    @classmethod
    def of(cls, request_partition: FetchRequestPartition) -> FetchPartition:
        """A request's partition; a negative leader epoch or last fetched epoch is none (-1), as Kafka's
        ``FetchRequest.optionalEpoch`` reads both."""
        p = request_partition
        return cls(p.partition, p.fetch_offset, p.partition_max_bytes, max(p.current_leader_epoch, -1),
                   max(p.last_fetched_epoch, -1), p.log_start_offset)

    def update(self, new: FetchPartition) -> None:
        """A later request's parameters. What was answered stays, unless the client names a new leader epoch: it
        may have dropped the last answer as one for the old epoch (klog's replica fetcher does), so the partition
        is answered again in full."""
        if new.current_leader_epoch != self.current_leader_epoch:
            self.answered_high_watermark = self.answered_log_start_offset = -1
        self.fetch_offset = new.fetch_offset
        self.partition_max_bytes = new.partition_max_bytes
        self.current_leader_epoch = new.current_leader_epoch
        self.last_fetched_epoch = new.last_fetched_epoch
        self.log_start_offset = new.log_start_offset

    def would_answer(self, answer: Mapping[str, Any]) -> bool:
        """Whether an incremental fetch's answer includes this partition (Kafka's
        ``CachedPartition.maybeUpdateResponseData``)."""
        return bool(answer["records"]) or answer["high_watermark"] != self.answered_high_watermark \
            or answer["log_start_offset"] != self.answered_log_start_offset or bool(answer["error_code"]) \
            or answer["preferred_read_replica"] >= 0 or "diverging_epoch" in answer

    def must_answer(self, answer: Mapping[str, Any]) -> bool:
        """:meth:`would_answer`, remembering what the answer tells the client."""
        must = self.would_answer(answer)
        self.answered_high_watermark = -1 if answer["error_code"] else answer["high_watermark"]   # -1: answered
        self.answered_log_start_offset = answer["log_start_offset"]                            # again once fixed
        return must


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    #: a replica's (Kafka's "privileged"): it may take the slot of any client's session
    privileged: bool
    #: opened by a Fetch v13+ (partitions keyed by topic id), or an older one (by topic name)
    uses_topic_ids: bool
    partitions: dict[PartitionKey, FetchPartition]
    created_ms: int
    last_used_ms: int
    #: the epoch the session's next fetch must carry
    epoch: int = 1
    #: the native Fetch path holds the session's epoch and partitions (``FetchSessionCache.hand_over``): this
    #: object's are stale until ``FetchSessionCache.get`` takes them back
    native: bool = False

    def eviction_rank(self) -> tuple[bool, int, int]:
        """Less is evicted first (Kafka's ``EvictableKey``)."""
        return (self.privileged, len(self.partitions), self.id)

    def update(self, requested: Iterable[tuple[PartitionKey, FetchPartition]], forgotten: Iterable[PartitionKey]
               ) -> None:
        for key, fetch in requested:
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = fetch
            else:
                cached.update(fetch)
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """At most ``max_slots`` sessions by id (``max.incremental.fetch.session.cache.slots``), holding at most
    ``max_cached_partitions`` partitions together."""

    def __init__(self, max_slots: int, *, max_partitions: int = MAX_SESSION_PARTITIONS,
                 max_cached_partitions: int = MAX_CACHED_PARTITIONS, eviction_ms: int = SESSION_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        assert max_slots >= 0 and max_partitions >= 0 and max_cached_partitions >= 0 and eviction_ms >= 0
        self.max_slots = max_slots
        #: partitions one session may hold (``klog.fetch.session.max.partitions``)
        self.max_partitions = max_partitions
        #: partitions all sessions may hold together (``klog.fetch.session.cache.max.partitions``)
        self.max_cached_partitions = max_cached_partitions
        self.eviction_ms = eviction_ms
        self._rng = rng if rng is not None else random.Random()
        self.sessions: dict[int, FetchSession] = {}
        #: the partitions the sessions hold, kept as they change (the bound is checked on every fetch)
        self._cached = 0
        #: sessions evicted for a newcomer
        self.evictions = 0
        #: the native Fetch path's table (a ``klog._native.FetchRoutes``) sessions are handed over to; None: none
        self.native: Any = None

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        """The session, its state taken back from the native Fetch path if it held it."""
        session = self.sessions.get(session_id)
        if session is not None and session.native:
            self._take_back(session)
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._cached -= len(session.partitions)
            if session.native:
                session.native = False
                self.native.drop_session(session_id)
        return session

    def hand_over(self, session: FetchSession) -> bool:
        """Give ``session`` (a consumer's or a replica's, after the Python path answered one of its fetches) to the
        native Fetch path, which takes it only if every partition is routed to it; whether it did. A replica's
        (``privileged``) is continued there by replicas' fetches only."""
        native = self.native
        if native is None or session.native or self.sessions.get(session.id) is not session:
            return False
        by_id = session.uses_topic_ids
        partitions = [(cast("uuid.UUID", topic).bytes if by_id else topic, p.partition, p.fetch_offset,
                       p.partition_max_bytes, p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset,
                       p.answered_high_watermark, p.answered_log_start_offset)
                      for (topic, _), p in session.partitions.items()]
        session.native = native.adopt_session(session.id, epoch=session.epoch, uses_topic_ids=by_id,
                                              partitions=partitions, replica=session.privileged)
        return session.native

    def touch(self, session_id: int, now_ms: int) -> None:
        """The native Fetch path served one of the session's fetches at ``now_ms`` (its last use, for eviction)."""
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_used_ms = now_ms

    def _take_back(self, session: FetchSession) -> None:
        """The session's epoch and partitions (in read order) as the native Fetch path left them. Their count is
        unchanged: the native path serves no fetch that adds or forgets partitions."""
        session.native = False
        state = self.native.release_session(session.id)
        if state is None:
            return
        session.epoch, partitions = state
        by_id = session.uses_topic_ids
        session.partitions = {
            (uuid.UUID(bytes=topic) if by_id else topic, index): FetchPartition(index, *fields)
            for topic, index, *fields in partitions}

    def partitions_cached(self) -> int:
        return self._cached

    def create(self, now_ms: int, privileged: bool, uses_topic_ids: bool,
               partitions: dict[PartitionKey, FetchPartition]) -> FetchSession | None:
        """A new session, if it gets a slot and room for its partitions (None: answer without one)."""
        size = len(partitions)
        if size > self.max_partitions or size > self.max_cached_partitions:
            return None
        victims: dict[int, FetchSession] = {}
        freed = 0
        while len(self.sessions) - len(victims) >= self.max_slots or \
                self._cached - freed + size > self.max_cached_partitions:
            victim = self._victim_for(privileged, size, now_ms, victims)
            if victim is None:
                return None   # no room even with every session it may evict gone: evict none
            victims[victim.id] = victim
            freed += len(victim.partitions)
        for victim in victims.values():
            self.remove(victim.id)
            self.evictions += 1
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, partitions, now_ms, now_ms)
        self.sessions[session.id] = session
        self._cached += size
        assert len(self.sessions) <= self.max_slots and self._cached <= self.max_cached_partitions
        return session

    def update(self, session: FetchSession, requested: Iterable[tuple[PartitionKey, FetchPartition]],
               forgotten: Iterable[PartitionKey]) -> bool:
        """An incremental fetch's changes to ``session``; False (and the session is closed) when it is left empty
        or would pass a bound."""
        before = len(session.partitions)
        session.update(requested, forgotten)
        after = len(session.partitions)
        self._cached += after - before
        if not after or after > self.max_partitions or self._cached > self.max_cached_partitions:
            self.remove(session.id)
            return False
        return True

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, INT32_MAX)
            if candidate not in self.sessions:
                return candidate

    def _victim_for(self, privileged: bool, size: int, now_ms: int, chosen: dict[int, FetchSession]
                    ) -> FetchSession | None:
        """The session a newcomer may evict next (Kafka's ``tryEvict``), besides those ``chosen`` already."""
        candidates = [s for s in self.sessions.values() if s.id not in chosen]
        if not candidates:
            return None
        stalest = min(candidates, key=lambda s: s.last_used_ms)
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            return stalest
        evictable = [s for s in candidates
                     if now_ms - s.created_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not evictable:
            return None
        cheapest = min(evictable, key=FetchSession.eviction_rank)
        if (privileged, size, 0) < cheapest.eviction_rank():
            return None
        return cheapest


@dataclass(slots=True)
class FetchContext:
    """What one Fetch reads and how its answer is shaped. ``error``: a top-level error answered at once, with no
    partitions; otherwise ``partitions`` are read in order, and :meth:`answer` keeps those the response holds."""

    partitions: list[tuple[PartitionKey, FetchPartition]] = field(default_factory=list)
    error: int = errors.NONE
    #: the session an incremental fetch continues (None: a full fetch)
    session: FetchSession | None = None
    #: a full fetch opens a session (epoch 0), or stays sessionless (epoch -1)
    opens_session: bool = False

    @classmethod
    def new(cls, cache: FetchSessionCache, *, session_id: int, session_epoch: int, uses_topic_ids: bool,
            requested: list[tuple[PartitionKey, FetchPartition]], forgotten: list[PartitionKey],
            now_ms: int) -> FetchContext:
        """The context of a Fetch carrying ``session_id`` / ``session_epoch`` (Kafka's
        ``FetchManager.newContext``)."""
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                cache.remove(session_id)   # a full fetch closes the session it names
            return cls(requested, opens_session=session_epoch == INITIAL_EPOCH)
        session = cache.get(session_id)
        if session is None:
            return cls(error=errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != session_epoch:
            return cls(error=errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return cls(error=errors.FETCH_SESSION_TOPIC_ID_ERROR)
        if not cache.update(session, requested, forgotten):
            return cls(requested)   # left empty, or grown past a bound: the client starts again in full
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        return cls(list(session.partitions.items()), session=session)

    def would_answer(self, answers: list[tuple[PartitionKey, Answer]]) -> list[tuple[PartitionKey, Answer]]:
        """The partition answers :meth:`answer` would keep, changing nothing (what a throttled fetch weighs)."""
        session = self.session
        if session is None:
            return answers
        return [(key, answer) for key, answer in answers
                if (cached := session.partitions.get(key)) is not None and cached.would_answer(answer)]

    def answer(self, cache: FetchSessionCache, answers: list[tuple[PartitionKey, Answer]], *,
               privileged: bool, uses_topic_ids: bool, now_ms: int) -> tuple[int, list[tuple[PartitionKey, Answer]]]:
        """(the response's session id, the partition answers it holds), given one answer per partition read, in
        :attr:`partitions` order."""
        session = self.session
        if session is not None:
            kept = []
            for key, answer in answers:
                cached = session.partitions.get(key)
                if cached is None:
                    continue
                if cached.must_answer(answer):
                    kept.append((key, answer))
                    if answer["records"]:   # to the end: the next fetch reads the others first
                        session.partitions[key] = session.partitions.pop(key)
            return session.id, kept
        if not self.opens_session:
            return INVALID_SESSION_ID, answers
        partitions = dict(self.partitions)
        for key, answer in answers:
            cached = partitions[key]
            if not answer["error_code"]:
                cached.answered_high_watermark = answer["high_watermark"]
                cached.answered_log_start_offset = answer["log_start_offset"]
        created = cache.create(now_ms, privileged, uses_topic_ids, partitions)
        return (created.id if created is not None else INVALID_SESSION_ID), answers
