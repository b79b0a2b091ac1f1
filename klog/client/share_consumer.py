"""``klog.ShareConsumer`` / ``klog.aio.ShareConsumer``: a share-group (KIP-932, "queues for Kafka") consumer.

Several share consumers of one group read the same partitions; each record is acquired by one of them for a lock
period and acknowledged: ACCEPT (done), RELEASE (deliver again, to any member), REJECT (never again), or RENEW
(extend the lock). As Kafka's ``KafkaShareConsumer``:

- ``acknowledgement_mode="implicit"`` (``share.acknowledgement.mode``): the next :meth:`poll` (or
  :meth:`commit_sync`/:meth:`commit_async`/:meth:`close`) accepts every record the previous poll returned;
- ``"explicit"``: call :meth:`acknowledge` for each record; the acknowledgements go with the next poll
  (piggybacked on ShareFetch) or with :meth:`commit_sync`/:meth:`commit_async` (ShareAcknowledge). A poll with
  records of the previous poll still unacknowledged raises, as Kafka's ``IllegalStateException``. A record
  acknowledged with RENEW (KIP-1222) counts as acknowledged: the next poll sends the renewal and, once the broker
  renewed its lock, returns the record again (still acquired by this consumer, same delivery count) instead of
  fetching new ones, to be acknowledged later, as Kafka's ``KafkaShareConsumer`` does; a renewal the broker
  refused drops the record (its lock runs out).

Each record's ``delivery_count`` says how often it was delivered (1 the first time).

:meth:`poll_batch` is the columnar twin of :meth:`poll`: one ``pyarrow.RecordBatch`` with the columns of
``klog.Consumer.poll_batch`` (topic, partition, offset, timestamp, key, value, headers, decoded natively) plus
``delivery_count`` (int16); :meth:`acknowledge_batch` acknowledges its rows by a boolean mask (ACCEPT where true,
RELEASE or another type elsewhere) or by one type per row, so a pool of workers can process a topic as a queue a
batch at a time.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import functools
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

from klog.protocol import ApiKey, Struct
from klog.protocol.error_codes import ErrorCode
from klog.records import DEFAULT_MAX_DECOMPRESSED_SIZE, _decode_raw, _raw_arrays, decode_batches

from .cluster import ClusterClient
from .config import CONSUMER_CONFIG, resolve_config
from .errors import ClientClosedError, IllegalStateError, KafkaError, for_code
from .group import find_coordinator
from .loop_thread import BlockingClient, blocking
from .types import Header, TopicPartition

__all__ = ["AsyncShareConsumer", "ShareConsumer", "ShareRecord", "AcknowledgeType"]


class AcknowledgeType:
    """Kafka's AcknowledgeType names and wire ids."""

    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    RENEW = "renew"
    IDS = {"accept": 1, "release": 2, "reject": 3, "renew": 4}


class ShareRecord(NamedTuple):
    """One record a share consumer acquired."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list[Header]
    delivery_count: int


_GAP = 0
#: Java's ``KafkaShareConsumer.close()``: ``DEFAULT_CLOSE_TIMEOUT_MS``
CLOSE_TIMEOUT_S = 30.0
_ACCEPT = AcknowledgeType.IDS["accept"]
_RENEW = AcknowledgeType.IDS["renew"]


class _Acks:
    """One partition's acknowledgements not sent yet, as runs of offsets with one wire type each (Kafka's
    AcknowledgementBatches are offset ranges): a batch of rows acknowledged alike is a few runs, not one entry per
    record. An offset acknowledged twice before sending (possible only across share sessions) keeps the later type."""

    __slots__ = ("firsts", "lasts", "kinds")

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.lasts: list[int] = []
        self.kinds: list[int] = []

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def add(self, offset: int, kind: int) -> None:
        self.add_run(offset, offset, kind)

    def add_run(self, first: int, last: int, kind: int) -> None:
        """Offsets ``first``..``last`` acknowledged with ``kind``."""
        if self.kinds and self.kinds[-1] == kind and self.lasts[-1] == first - 1:
            self.lasts[-1] = last
        else:
            self.firsts.append(first)
            self.lasts.append(last)
            self.kinds.append(kind)

    def add_offsets(self, offsets: Any, kinds: Any) -> None:
        """``offsets`` (int64 ndarray, distinct, any order) acknowledged with ``kinds`` (one wire type, or an int8
        ndarray with one per offset)."""
        import numpy as np

        if not len(offsets):
            return
        per_row = isinstance(kinds, np.ndarray)
        ordered = len(offsets) == 1 or bool((offsets[1:] > offsets[:-1]).all())
        if ordered and not per_row and int(offsets[-1]) - int(offsets[0]) == len(offsets) - 1:
            self.firsts.append(int(offsets[0]))   # one run (a whole batch of one partition, acknowledged alike)
            self.lasts.append(int(offsets[-1]))
            self.kinds.append(int(kinds))
            return
        if not ordered:
            order = np.argsort(offsets, kind="stable")
            offsets = offsets[order]
            kinds = kinds[order] if per_row else kinds
        breaks = np.diff(offsets) != 1
        if per_row:
            breaks |= np.diff(kinds) != 0
        starts = np.concatenate(([0], np.flatnonzero(breaks) + 1))
        ends = np.append(starts[1:], len(offsets)) - 1
        self.firsts.extend(offsets[starts].tolist())
        self.lasts.extend(offsets[ends].tolist())
        self.kinds.extend(kinds[starts].tolist() if per_row else [int(kinds)] * len(starts))

    def kind_of(self, offset: int) -> int | None:
        for first, last, kind in zip(reversed(self.firsts), reversed(self.lasts), reversed(self.kinds)):
            if first <= offset <= last:
                return kind
        return None

    def has(self, kind: int) -> bool:
        return kind in self.kinds

    def runs(self) -> list[tuple[int, int, int]]:
        """The (first offset, last offset, wire type) runs in offset order, neighbours of one type merged."""
        runs = sorted(zip(self.firsts, self.lasts, self.kinds))
        if any(a[1] >= b[0] for a, b in zip(runs, runs[1:])):   # overlapping: the later acknowledgement wins
            by_offset: dict[int, int] = {}
            for first, last, kind in zip(self.firsts, self.lasts, self.kinds):
                by_offset.update(dict.fromkeys(range(first, last + 1), kind))
            runs = [(offset, offset, by_offset[offset]) for offset in sorted(by_offset)]
        merged: list[list[int]] = []
        for first, last, kind in runs:
            if merged and merged[-1][1] == first - 1 and merged[-1][2] == kind:
                merged[-1][1] = last
            else:
                merged.append([first, last, kind])
        return [(first, last, kind) for first, last, kind in merged]

    def batches(self) -> list[Struct]:
        return [Struct(first_offset=first, last_offset=last, acknowledge_types=[kind])
                for first, last, kind in self.runs()]

    def offsets(self) -> set[int]:
        """Every offset acknowledged (what the acknowledgement commit callback is told)."""
        return {o for first, last in zip(self.firsts, self.lasts) for o in range(first, last + 1)}


#: ``callback(offsets, exception)``: ``offsets`` maps (topic, partition) to the offsets whose acknowledgements one
#: request carried; ``exception`` None when the broker made them, else why they were not (Kafka's
#: ``AcknowledgementCommitCallback.onComplete``)
AcknowledgementCommitCallback = Callable[[dict[tuple[str, int], set[int]], Optional[Exception]], Any]


class _Piece(NamedTuple):
    """One partition's rows of a ShareFetch response as Arrow (poll_batch's columns), with their offsets."""

    tp: tuple[str, int]
    offsets: Any
    batch: Any


class _HeldRows:
    """The rows of one partition :meth:`AsyncShareConsumer.poll_batch` handed out and not acknowledged yet: their
    offsets (a sorted int64 ndarray of distinct offsets) and which of them are still held, without an object per
    record; ``run``: (first, last) when they are every offset from first to last (a whole batch), else None."""

    __slots__ = ("offsets", "held", "count", "run")

    def __init__(self, offsets: Any) -> None:
        self._set(offsets)

    def _set(self, offsets: Any) -> None:
        import numpy as np

        self.offsets = offsets
        self.held = np.ones(len(offsets), dtype=bool)
        self.count = n = len(offsets)
        first, last = (int(offsets[0]), int(offsets[-1])) if n else (0, -1)
        self.run = (first, last) if n and last - first == n - 1 else None

    def extend(self, offsets: Any) -> None:
        import numpy as np

        self._set(np.union1d(self.remaining(), offsets))

    def find(self, offsets: Any) -> Any:
        """Positions of ``offsets`` among the held rows (-1 where not held)."""
        import numpy as np

        pos = np.searchsorted(self.offsets, offsets)
        ok = pos < len(self.offsets)
        ok[ok] = (self.offsets[pos[ok]] == offsets[ok]) & self.held[pos[ok]]
        return np.where(ok, pos, -1)

    def take(self, positions: Any) -> None:
        self.held[positions] = False
        self.count -= len(positions)

    def take_all(self) -> None:
        self.held[:] = False
        self.count = 0

    def remaining(self) -> Any:
        return self.offsets[self.held]


class _BatchAcks(NamedTuple):
    """One partition's rows of a batch :meth:`AsyncShareConsumer.acknowledge_batch` checked: their offsets and
    wire types (one, or one per row), where they are among the held rows (None: they are all of them), the
    keys of rows that were records of poll() (renewed ones), and (first, last) when they are every offset from
    first to last, acknowledged alike (one acknowledgement run, no NumPy step)."""

    tp: tuple[str, int]
    offsets: Any
    kinds: Any
    held: Optional[_HeldRows]
    positions: Optional[Any]
    records: list[tuple[str, int, int]]
    run: Optional[tuple[int, int]] = None


class AsyncShareConsumer:
    """The asyncio share consumer (``klog.aio.ShareConsumer``)."""

    def __init__(self, *topics: str, bootstrap_servers: str | Sequence[str] | None = None,
                 group_id: str | None = None, acknowledgement_mode: str = "implicit",
                 acknowledgement_commit_callback: AcknowledgementCommitCallback | None = None,
                 **config: Any) -> None:
        if not group_id:
            raise ValueError("a share consumer needs a group_id")
        if acknowledgement_mode not in ("implicit", "explicit"):
            raise ValueError("acknowledgement_mode is 'implicit' or 'explicit'")
        cfg = dict(config)
        if bootstrap_servers is not None:
            cfg["bootstrap.servers"] = bootstrap_servers
        cfg["group.id"] = group_id
        self._cfg = resolve_config(CONSUMER_CONFIG, cfg, kind="consumer")
        self.group_id = group_id
        self.explicit = acknowledgement_mode == "explicit"
        self._topics = sorted(set(topics))
        self.cluster: ClusterClient | None = None
        #: generated by the client, as Kafka 4.x's clients do (KIP-1082); kept for the consumer's lifetime
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.member_epoch = 0
        self._coordinator: int | None = None
        self._heartbeat_ms = 5000
        self._hb_task: asyncio.Task[None] | None = None
        #: (topic, partition) assigned, with topic ids
        self.assignment: dict[tuple[str, int], uuid.UUID] = {}
        self._ids: dict[uuid.UUID, str] = {}
        #: leader node -> the share session epoch of the next request (0: open one)
        self._epochs: dict[int, int] = {}
        #: (topic, partition) -> the acknowledgements not sent yet (runs of offsets)
        self._pending: dict[tuple[str, int], _Acks] = {}
        #: records of poll() delivered by the last poll and not acknowledged yet
        self._delivered: dict[tuple[str, int, int], ShareRecord | None] = {}
        #: rows of poll_batch() delivered by the last poll and not acknowledged yet, by partition
        self._held: dict[tuple[str, int], _HeldRows] = {}
        #: records acknowledged with RENEW whose renewal the broker has not answered yet
        self._renewing: dict[tuple[str, int, int], ShareRecord] = {}
        #: records whose lock the broker renewed: the next poll returns them again
        self._renewed: dict[tuple[str, int, int], ShareRecord] = {}
        #: records whose renewal the broker refused: not returned again, but still acknowledgeable (the broker
        #: keeps them acquired until their lock runs out) until the next poll
        self._refused: dict[tuple[str, int, int], ShareRecord] = {}
        #: the batch the last poll_batch() returned (weakly) and its rows by partition, as _rows_by_partition()
        #: would find them: ((topic, partition), the rows (None: every row; else a slice), their offsets)
        self._last_batch: weakref.ref[Any] | None = None
        self._last_plan: list[tuple[tuple[str, int], Any, Any]] = []
        #: batches the blocking client acknowledged from its caller's thread (checked, rows taken), recorded in
        #: _pending by the loop before it next reads them: no hand-off to the loop per acknowledge_batch()
        self._deferred: collections.deque[list[_BatchAcks]] = collections.deque()
        self._closed = False
        self._ack_callback = acknowledgement_commit_callback
        #: the outcomes of sent acknowledgements the callback has not been told yet: (offsets, exception)
        self._ack_outcomes: collections.deque[tuple[dict[tuple[str, int], set[int]], Exception | None]] = \
            collections.deque()
        #: the blocking client tells the callback in its caller's thread (Kafka's: the application thread)
        self._callback_in_caller = False
        #: The one rule for state a caller's thread shares with the event loop (the blocking client's
        #: acknowledge_batch runs in the caller's thread): _held, _delivered, _last_batch/_last_plan, _deferred and
        #: _closed change only under this lock, taken in synchronous sections only (never across an await), so an
        #: acknowledgement is checked, taken and queued whole before or after a poll, a renewal or the close.
        self._rows_lock = threading.RLock()

    # -- lifecycle --------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self.cluster = ClusterClient(self._cfg)
        await self.cluster.start()
        self.cluster.track_topics(self._topics)
        await self.cluster.refresh_metadata(self._topics)
        deadline = time.monotonic() + float(self._cfg["request.timeout.ms"]) / 1000
        while True:   # join (the coordinator may still be loading)
            await self._heartbeat()
            if self.member_epoch > 0 or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.1)
        self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def __aenter__(self) -> AsyncShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Sends the outstanding acknowledgements (implicit mode: accepts what the last poll returned), closes
        the share sessions (records still held are released) and leaves the group, within ``timeout`` seconds
        (default 30, Java's ``close()``; what is not done by then is given up, as Java's ``close(Duration)``)."""
        if self._closed or self.cluster is None:
            return
        deadline = time.monotonic() + (CLOSE_TIMEOUT_S if timeout is None else max(0.0, timeout))

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        with self._rows_lock:   # from here on acknowledge_batch() refuses (ClientClosedError): none is lost
            self._closed = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._hb_task
        with contextlib.suppress(Exception):
            with self._rows_lock:
                self._record_deferred()
                if not self.explicit:   # explicit mode: what is not acknowledged is released by the session close
                    self._implicit_accept()
                self._held.clear()
                self._delivered.clear()
            await asyncio.wait_for(self._acknowledge_all(close=True), remaining())
        with contextlib.suppress(Exception):
            self.member_epoch = -1
            await asyncio.wait_for(self._heartbeat(timeout=remaining()), remaining())
        await self.cluster.close()
        self._tell_ack_callback()

    # -- membership -------------------------------------------------------------------------------------------
    async def _heartbeat(self, *, timeout: float = 30.0) -> None:
        assert self.cluster is not None
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self, self.group_id, timeout=timeout)
        body = Struct(group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
                      rack_id=None, subscribed_topic_names=self._topics if self.member_epoch == 0 else None)
        try:
            r = await self.cluster.request(self._coordinator, ApiKey.SHARE_GROUP_HEARTBEAT, body, version=1)
        except (KafkaError, OSError, asyncio.TimeoutError):
            self._coordinator = None   # the coordinator is gone: look it up again at the next heartbeat
            raise
        if r.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self._coordinator = None
            return
        if r.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            self.member_epoch = 0   # rejoin at the next heartbeat
            return
        if r.error_code:
            err = for_code(r.error_code, f"ShareGroupHeartbeat: {r.error_message}")
            if err.retriable:
                return
            raise err
        if self.member_epoch == -1:
            return
        if r.member_id:
            self.member_id = r.member_id
        self.member_epoch = r.member_epoch
        self._heartbeat_ms = r.heartbeat_interval_ms or self._heartbeat_ms
        if r.assignment is not None:
            unknown = [t.topic_id for t in r.assignment.topic_partitions if t.topic_id not in self._ids]
            if unknown:
                await self.cluster.refresh_metadata(self._topics)
                self._ids = {t.topic_id: name for name, t in self.cluster.metadata.topics.items()}
            self.assignment = {(self._ids[t.topic_id], p): t.topic_id for t in r.assignment.topic_partitions
                               if t.topic_id in self._ids for p in t.partitions}

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._heartbeat_ms / 1000)
            with contextlib.suppress(KafkaError, OSError, asyncio.TimeoutError):
                await self._heartbeat()

    # -- acknowledgement --------------------------------------------------------------------------------------
    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        """``callback(offsets, exception)`` is told the outcome of every acknowledgement sent, by a commit or on a
        poll's ShareFetch (``exception`` None: made), at the next poll, commit or close (Kafka's
        ``setAcknowledgementCommitCallback``)."""
        self._ack_callback = callback

    def _acks_completed(self, sent: dict[tuple[str, int], _Acks],
                        outcomes: dict[tuple[str, int], Exception | None]) -> None:
        """The acknowledgements ``sent`` (by partition) ended with ``outcomes``: kept for the callback."""
        if self._ack_callback is None:
            return
        for tp, acks in sent.items():
            if acks and tp in outcomes:
                self._ack_outcomes.append(({tp: acks.offsets()}, outcomes[tp]))

    def _tell_ack_callback(self, *, caller: bool = False) -> None:
        """Tells the callback the outcomes kept (on the loop for the asyncio client; ``caller``: from the blocking
        client's caller's thread). An exception the callback raises goes to the caller (the rest wait)."""
        if caller != self._callback_in_caller:
            return
        while self._ack_outcomes and self._ack_callback is not None:
            offsets, exc = self._ack_outcomes.popleft()
            self._ack_callback(offsets, exc)

    def acknowledge(self, record: ShareRecord, type: str = AcknowledgeType.ACCEPT) -> None:
        """Acknowledges one record the last poll returned (sent with the next poll or commit)."""
        if type not in AcknowledgeType.IDS:
            raise ValueError(f"unknown acknowledge type {type!r}")
        with self._rows_lock:
            self._acknowledge(record, type)

    def _acknowledge(self, record: ShareRecord, type: str) -> None:
        import numpy as np

        self._record_deferred()   # acknowledged before this one: this one wins

        key = (record.topic, record.partition, record.offset)
        held: ShareRecord | None = None
        rows = self._held.get((record.topic, record.partition))
        position = int(rows.find(np.array([record.offset], dtype=np.int64))[0]) if rows is not None else -1
        if position >= 0:   # a row of poll_batch() (no record kept)
            assert rows is not None
            rows.take([position])
        else:
            # a renewed record may be acknowledged before the poll that returns it again (klog is lenient there)
            for holder in (self._delivered, self._renewed, self._renewing, self._refused):
                if key in holder:
                    break
            else:
                raise IllegalStateError(f"record {key} was not delivered by the last poll or is acknowledged "
                                        "already")
            held = holder.pop(key)
        if type == AcknowledgeType.RENEW:
            # a row of poll_batch() (no record kept) is renewed from the record the caller passes
            self._renewing[key] = held if held is not None else record
        self._acks((record.topic, record.partition)).add(record.offset, AcknowledgeType.IDS[type])

    def _acks(self, tp: tuple[str, int]) -> _Acks:
        acks = self._pending.get(tp)
        if acks is None:
            acks = self._pending[tp] = _Acks()
        return acks

    def _settle_renewals(self, keys: set[tuple[str, int, int]],
                         outcomes: dict[tuple[str, int], Exception | None]) -> None:
        """The renewals of ``keys`` were sent (or could not be: no share session) and the broker answered each
        partition's acknowledgements: a renewed record is returned again by the next poll; one not renewed is
        dropped (its lock runs out), as Kafka's client drops it."""
        for key in keys:
            record = self._renewing.pop(key, None)
            tp = (key[0], key[1])
            if record is not None and tp in outcomes and outcomes[tp] is None:
                self._renewed[key] = record
            elif record is not None:
                self._refused[key] = record

    def _implicit_accept(self) -> None:
        for (topic, partition, offset) in self._delivered:
            self._acks((topic, partition)).add(offset, _ACCEPT)
        self._delivered.clear()
        for tp, rows in self._held.items():
            if rows.count:
                self._acks(tp).add_offsets(rows.remaining(), _ACCEPT)
        self._held.clear()

    def _holds_records(self) -> bool:
        return bool(self._delivered) or any(rows.count for rows in self._held.values())

    def _leader(self, tp: tuple[str, int]) -> int | None:
        assert self.cluster is not None
        return self.cluster.metadata.leader_for(*tp)

    def _pending_by_leader(self) -> dict[int, dict[tuple[str, int], _Acks]]:
        out: dict[int, dict[tuple[str, int], _Acks]] = {}
        for tp, acks in self._pending.items():
            leader = self._leader(tp)
            if acks and leader is not None:
                out.setdefault(leader, {})[tp] = acks
        return out

    async def commit_sync(self, timeout: float | None = 30.0) -> dict[tuple[str, int], Exception | None]:
        """Sends the acknowledgements now (ShareAcknowledge) and waits; returns each partition's outcome."""
        with self._rows_lock:
            self._record_deferred()
            if not self.explicit:
                self._implicit_accept()
        results = await asyncio.wait_for(self._acknowledge_all(close=False), timeout)
        self._tell_ack_callback()
        return results

    def commit_async(self) -> asyncio.Task[dict[tuple[str, int], Exception | None]]:
        """Sends the acknowledgements without waiting (the returned task has each partition's outcome)."""
        with self._rows_lock:
            self._record_deferred()
            if not self.explicit:
                self._implicit_accept()
        return asyncio.get_running_loop().create_task(self._acknowledge_all(close=False))

    async def _acknowledge_all(self, *, close: bool) -> dict[tuple[str, int], Exception | None]:
        assert self.cluster is not None
        results: dict[tuple[str, int], Exception | None] = {}
        renewals = {k for k in self._renewing
                    if (k[0], k[1]) in self._pending and self._pending[(k[0], k[1])].kind_of(k[2]) == _RENEW}
        pending = self._pending_by_leader()
        sent = dict(self._pending)
        # as Kafka's ShareConsumeRequestManager, an acknowledgement that cannot be sent fails (the record's lock
        # runs out, it is delivered again) and says so in the result: none is dropped unreported
        for tp, unsent in self._pending.items():
            if unsent and self._leader(tp) is None:   # a leader being elected
                results[tp] = for_code(ErrorCode.NETWORK_EXCEPTION, f"no leader known for {tp[0]}-{tp[1]}: its "
                                                                    "acknowledgements could not be sent")
                self.cluster.request_update()
        self._pending = {}
        nodes = set(pending) | (set(self._epochs) if close else set())
        for node in nodes:
            acks = pending.get(node, {})
            epoch = self._epochs.get(node, 0)
            if epoch == 0:   # no session with this leader (it changed, or a request failed): ShareAcknowledge needs one
                for tp in acks:
                    results[tp] = for_code(ErrorCode.NETWORK_EXCEPTION, f"no share session with node {node}, the "
                                                                        f"leader of {tp[0]}-{tp[1]}: its "
                                                                        "acknowledgements could not be sent")
                continue
            topics: dict[uuid.UUID, list[Struct]] = {}
            for (topic, partition), by_offset in acks.items():
                tid = self.assignment.get((topic, partition)) or self.cluster.metadata.topics[topic].topic_id
                topics.setdefault(tid, []).append(Struct(partition_index=partition,
                                                         acknowledgement_batches=by_offset.batches()))
            renew = any(by_offset.has(_RENEW) for by_offset in acks.values())
            body = Struct(group_id=self.group_id, member_id=self.member_id,
                          share_session_epoch=-1 if close else epoch, is_renew_ack=renew,
                          topics=[Struct(topic_id=t, partitions=ps) for t, ps in topics.items()])
            try:
                r = await self.cluster.request(node, ApiKey.SHARE_ACKNOWLEDGE, body)
            except (KafkaError, OSError, asyncio.TimeoutError) as exc:   # the other leaders' still go
                self._epochs[node] = 0
                for tp in acks:
                    results[tp] = exc
                continue
            self._epochs[node] = 0 if close or r.error_code else epoch + 1
            for t in r.responses:
                name = self._ids.get(t.topic_id, "")
                for p in t.partitions:
                    results[(name, p.partition_index)] = for_code(p.error_code) if p.error_code else None
            for tp in acks:
                results.setdefault(tp, for_code(r.error_code) if r.error_code else for_code(
                    ErrorCode.INVALID_RECORD_STATE, f"no answer for {tp[0]}-{tp[1]}'s acknowledgements"))
        self._settle_renewals(renewals, results)
        self._acks_completed(sent, results)
        return results

    # -- poll -------------------------------------------------------------------------------------------------
    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareRecord]:
        """Acquires records (at most ``max_records``, default ``max.poll.records``) from the assigned partitions,
        waiting up to ``timeout`` seconds; sends the pending acknowledgements with the request."""
        try:
            renewed = await self._before_poll()
            if renewed:
                return renewed
            return await self._poll_pieces(timeout, max_records, arrow=False)
        finally:
            self._tell_ack_callback()

    async def poll_batch(self, timeout: float = 1.0, max_records: int | None = None) -> Any:
        """Like :meth:`poll`, as one ``pyarrow.RecordBatch``: columns topic (dictionary), partition (int32),
        offset (int64), timestamp (timestamp[ms]), key, value (binary), headers (as ``klog.Consumer.poll_batch``)
        and delivery_count (int16); an empty batch when nothing arrived within ``timeout``. Acknowledge its rows
        with :meth:`acknowledge_batch` (explicit mode) or let the next poll accept them (implicit mode)."""
        import pyarrow as pa

        try:
            renewed = await self._before_poll()
            if renewed:
                return _share_records_to_arrow(renewed)
            pieces: list[_Piece] = await self._poll_pieces(timeout, max_records, arrow=True)
        finally:
            self._tell_ack_callback()
        if not pieces:
            return _empty_share_batch()
        if len(pieces) == 1:
            batch = pieces[0].batch
            plan: list[tuple[tuple[str, int], Any, Any]] = [(pieces[0].tp, None, pieces[0].offsets)]
        else:
            if hasattr(pa, "concat_batches"):
                batch = pa.concat_batches([p.batch for p in pieces])
            else:  # pragma: no cover - pyarrow < 19
                batch = pa.Table.from_batches([p.batch for p in pieces]).combine_chunks().to_batches()[0]
            plan, start = [], 0
            for p in pieces:
                plan.append((p.tp, slice(start, start + len(p.offsets)), p.offsets))
                start += len(p.offsets)
        # acknowledge_batch() of this very batch (immutable) needs not read its columns again
        with self._rows_lock:
            self._last_batch, self._last_plan = weakref.ref(batch), plan
        return batch

    async def _before_poll(self) -> list[ShareRecord]:
        """What every poll does first: refuses to go on past unacknowledged records (explicit mode), accepts the
        last poll's (implicit mode), sends the renewals (KIP-1222); the renewed records, which are then the poll's
        answer (empty: fetch)."""
        assert self.cluster is not None
        with self._rows_lock:
            self._last_batch = None
            self._record_deferred()
            if self.explicit and self._holds_records():
                raise IllegalStateError("explicit acknowledgement: acknowledge every record of the last poll before "
                                        "polling again")
            self._implicit_accept()
        self._refused = {}
        if self._renewing:   # KIP-1222: renew first; the renewed records are this poll's answer
            await self._acknowledge_all(close=False)
        out = sorted(self._renewed.values(), key=lambda r: (r.topic, r.partition, r.offset))
        with self._rows_lock:
            self._delivered.update(self._renewed)
        self._renewed = {}
        return out

    async def _poll_pieces(self, timeout: float, max_records: int | None, *, arrow: bool) -> list[Any]:
        max_records = max_records or int(self._cfg["max.poll.records"])
        deadline = time.monotonic() + timeout
        while True:
            out = await self._fetch_once(max(0.0, deadline - time.monotonic()), max_records, arrow)
            if out or time.monotonic() >= deadline:
                return out
            if not self.assignment:
                await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def acknowledge_batch(self, batch: Any, mask_or_types: Any, otherwise: str = AcknowledgeType.RELEASE) -> None:
        """Acknowledges rows of a batch :meth:`poll_batch` returned (a ``RecordBatch`` or ``Table`` with its
        topic, partition and offset columns, or rows of it). ``mask_or_types``: a boolean mask (pyarrow array,
        numpy array or sequence; one per row): ACCEPT where true, ``otherwise`` (default RELEASE; or REJECT)
        where false or null; or one type name per row; or one type name for every row. Every row must be held
        (delivered and not acknowledged yet), else nothing is acknowledged and IllegalStateError is raised.
        RENEW needs :meth:`acknowledge` with a record of :meth:`poll`."""
        with self._rows_lock:
            self._record_deferred()
            self._record_batch(self._check_batch(batch, mask_or_types, otherwise, take=True))

    def _check_batch(self, batch: Any, mask_or_types: Any, otherwise: str, *, take: bool) -> list[_BatchAcks]:
        """:meth:`acknowledge_batch`'s checks (every row held, none twice; IllegalStateError else) and, with
        ``take``, its marking of the rows as acknowledged; what is left to record, by partition. The caller holds
        ``_rows_lock``."""
        import numpy as np

        if self._closed:
            raise ClientClosedError("share consumer closed")
        wire = _wire_types(batch.num_rows, mask_or_types, otherwise)
        # every row is checked before any is acknowledged
        plan = []
        missing: list[tuple[str, int, int]] = []
        repeated = False
        last = self._last_batch() if self._last_batch is not None else None
        for tp, rows, offsets in (self._last_plan if last is batch else _rows_by_partition(batch)):
            held = self._held.get(tp)
            if held is not None and held.offsets is offsets and held.count == len(offsets):
                # the rows of this partition that very poll returned, all still held (the usual case)
                per_row = isinstance(wire, np.ndarray)
                kinds = wire if rows is None or not per_row else wire[rows]
                plan.append(_BatchAcks(tp, offsets, kinds, held, None, [], None if per_row else held.run))
                continue
            if len(offsets) > 1 and not bool((offsets[1:] > offsets[:-1]).all()):
                ordered = np.sort(offsets)
                repeated = repeated or bool((ordered[1:] == ordered[:-1]).any())
            positions = held.find(offsets) if held is not None else np.full(len(offsets), -1)
            # rows of a poll_batch() that returned records of poll() (renewed ones)
            records: list[tuple[str, int, int]] = []
            if held is None or not bool((positions >= 0).all()):
                for i in np.flatnonzero(positions < 0).tolist():
                    key = (tp[0], tp[1], int(offsets[i]))
                    (records if key in self._delivered else missing).append(key)
                positions = positions[positions >= 0]
            kinds = wire if rows is None or not isinstance(wire, np.ndarray) else wire[rows]
            plan.append(_BatchAcks(tp, offsets, kinds, held, positions, records))
        if missing or repeated:
            raise IllegalStateError(f"rows {missing[:5] or 'repeated'} were not delivered by the last poll or are "
                                    "acknowledged already")
        if take:
            _take_rows(plan)
        return plan

    def _record_batch(self, plan: list[_BatchAcks]) -> None:
        """The acknowledgements of a checked batch (:meth:`_check_batch`), to be sent (on the loop)."""
        for part in plan:
            for key in part.records:
                del self._delivered[key]
            if part.run is not None:
                self._acks(part.tp).add_run(part.run[0], part.run[1], int(part.kinds))
            else:
                self._acks(part.tp).add_offsets(part.offsets, part.kinds)

    def _record_deferred(self) -> None:
        """Records the batches the blocking client acknowledged from its caller's thread (see
        :meth:`ShareConsumer.acknowledge_batch`), before anything reads or sends the pending acknowledgements. The
        caller holds ``_rows_lock``."""
        deferred = self._deferred
        while deferred:
            self._record_batch(deferred.popleft())

    async def _fetch_once(self, wait_s: float, max_records: int, arrow: bool = False) -> list[Any]:
        assert self.cluster is not None
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in self.assignment:
            leader = self._leader(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append(tp)
        pending = self._pending_by_leader()
        for node in pending:
            by_leader.setdefault(node, [])
        if not by_leader:
            return []
        wait_ms = int(wait_s * 1000) if len(by_leader) == 1 else 0
        fetches = [self._fetch_from(node, tps, pending.get(node, {}), wait_ms, max_records, arrow)
                   for node, tps in by_leader.items()]
        if len(fetches) == 1:   # one leader (the usual case): no task of its own
            return await fetches[0]
        return [piece for pieces in await asyncio.gather(*fetches) for piece in pieces]

    async def _fetch_from(self, node: int, tps: list[tuple[str, int]], acks: dict[tuple[str, int], _Acks],
                          wait_ms: int, max_records: int, arrow: bool) -> list[Any]:
        """:meth:`_share_fetch`, a failed request (its error, or its own cancellation: not the poll's) giving
        nothing and a metadata update."""
        assert self.cluster is not None
        try:
            return await self._share_fetch(node, tps, acks, wait_ms, max_records, arrow)
        except asyncio.CancelledError:
            cancelling = getattr(asyncio.current_task(), "cancelling", None)   # Python 3.11+
            if cancelling is None or cancelling():
                raise
        except Exception:  # noqa: BLE001 - the next poll asks again, after the metadata update
            pass
        self.cluster.request_update()
        return []

    async def _share_fetch(self, node: int, tps: list[tuple[str, int]], acks: dict[tuple[str, int], _Acks],
                           wait_ms: int, max_records: int, arrow: bool = False) -> list[Any]:
        assert self.cluster is not None
        epoch = self._epochs.get(node, 0)
        topics: dict[uuid.UUID, list[Struct]] = {}
        for tp in set(tps) | set(acks):
            tid = self.assignment.get(tp) or self.cluster.metadata.topics[tp[0]].topic_id
            batches = acks[tp].batches() if tp in acks and epoch != 0 else []
            topics.setdefault(tid, []).append(Struct(partition_index=tp[1], partition_max_bytes=0,
                                                     acknowledgement_batches=batches))
        sent: dict[tuple[str, int], _Acks] = {}
        if epoch == 0:   # acknowledgements cannot open a session: keep them for the next request
            for tp, by_offset in acks.items():
                kept = self._pending.setdefault(tp, by_offset)
                if kept is not by_offset:   # acknowledged again since: those come later (and win)
                    kept.firsts[:0], kept.lasts[:0], kept.kinds[:0] = by_offset.firsts, by_offset.lasts, by_offset.kinds
        else:
            sent = acks
            for tp in acks:
                self._pending.pop(tp, None)
        # KIP-1222: RENEW acknowledgements go in a ShareFetch that fetches nothing (IsRenewAck, zero limits)
        renew = epoch != 0 and any(by_offset.has(_RENEW) for by_offset in acks.values())
        limits = (0, 0, 0, 0) if renew else (wait_ms, 1, int(self._cfg["fetch.max.bytes"]), max_records)
        body = Struct(group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch,
                      max_wait_ms=limits[0], min_bytes=limits[1], max_bytes=limits[2],
                      max_records=limits[3], batch_size=max_records, share_acquire_mode=0, is_renew_ack=renew,
                      topics=[Struct(topic_id=t, partitions=ps) for t, ps in topics.items()], forgotten_topics_data=[])
        try:
            r = await self.cluster.request(node, ApiKey.SHARE_FETCH, body, timeout=wait_ms / 1000 + 30)
        except (Exception, asyncio.CancelledError) as exc:   # the acknowledgements it carried were not made (or
            # not known to be): told so, also when the request or the poll was cancelled before the answer
            told = exc if isinstance(exc, Exception) else KafkaError(
                "the ShareFetch carrying these acknowledgements was cancelled before it was answered: whether "
                "they were made is not known")
            self._acks_completed(sent, dict.fromkeys(sent, told))
            raise
        if sent:
            outcomes: dict[tuple[str, int], Exception | None] = {}
            for t in r.responses:
                for p in t.partitions:
                    code = r.error_code or p.acknowledge_error_code
                    outcomes[(self._ids.get(t.topic_id, ""), p.partition_index)] = for_code(
                        code, p.acknowledge_error_message or "ShareFetch acknowledgements") if code else None
            for tp in sent:
                outcomes.setdefault(tp, for_code(r.error_code, f"ShareFetch: {r.error_message}") if r.error_code
                                    else for_code(ErrorCode.INVALID_RECORD_STATE,
                                                  f"no answer for {tp[0]}-{tp[1]}'s acknowledgements"))
            self._acks_completed(sent, outcomes)
        if r.error_code:
            self._epochs[node] = 0
            if r.error_code in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH):
                return []
            raise for_code(r.error_code, f"ShareFetch: {r.error_message}")
        self._epochs[node] = epoch + 1 if epoch < 2**31 - 1 else 1
        out: list[Any] = []
        for t in r.responses:
            name = self._ids.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                if p.error_code:
                    self.cluster.request_update()
                    continue
                if not p.acquired_records:
                    continue
                if arrow:
                    piece = self._arrow_piece(name, p)
                    if piece is not None:
                        out.append(piece)
                else:
                    out.extend(self._records(name, p))
        return out

    def _arrow_piece(self, topic: str, p: Any) -> Any:
        """One partition's acquired records as Arrow (decoded natively, built as one RecordBatch), with their
        delivery counts; offsets acquired without a record (compacted away, control records) are acknowledged as
        gaps."""
        import numpy as np
        import pyarrow as pa

        from .consumer import _partition_columns

        tp = (topic, p.partition_index)
        ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
        raw = _decode_raw(p.records, min(r[0] for r in ranges), True, True, True, True,
                          DEFAULT_MAX_DECOMPRESSED_SIZE) if p.records else None
        columns = _raw_arrays(raw) if raw is not None else None
        offsets = columns[0].to_numpy() if columns is not None else np.empty(0, dtype=np.int64)
        n = len(offsets)
        acquired = None   # every row
        if len(ranges) == 1 and n == ranges[0][1] - ranges[0][0] + 1 and \
                (not n or (offsets[0] == ranges[0][0] and offsets[-1] == ranges[0][1])):
            # the common case: one acquired range, a record at every offset of it and nothing else
            delivery_count = _delivery_counts(ranges[0][2], n) if n else None
        else:
            counts = np.zeros(n, dtype=np.int16)
            inside_any = np.zeros(n, dtype=bool)
            for first, last, count in ranges:
                inside = (offsets >= first) & (offsets <= last)
                counts[inside] = count
                inside_any |= inside
                if int(inside.sum()) != last - first + 1:   # no record there: acknowledged as a gap
                    self._acks(tp).add_offsets(np.setdiff1d(np.arange(first, last + 1), offsets[inside]), _GAP)
            delivery_count = pa.array(counts, pa.int16())
            if not inside_any.all():
                acquired = inside_any
        if columns is None or not n or (acquired is not None and not acquired.any()):
            return None
        topic_column, partition_column = _partition_columns(topic, p.partition_index, n)
        piece = pa.RecordBatch.from_arrays([topic_column, partition_column, *columns, delivery_count],
                                           schema=_share_batch_schema())
        if acquired is not None:
            piece, offsets = piece.filter(pa.array(acquired)), offsets[acquired]
        with self._rows_lock:
            rows = self._held.get(tp)
            if rows is None or not rows.count:
                self._held[tp] = _HeldRows(offsets)
            else:
                rows.extend(offsets)
        return _Piece(tp, offsets, piece)

    def _records(self, topic: str, p: Any) -> list[ShareRecord]:
        ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
        found: dict[int, Any] = {}
        data = bytes(p.records) if p.records else b""
        if data:
            for b in decode_batches(data, allow_partial_trailing=True, allow_compacted=True):
                if b.is_control:
                    continue
                for rec in b.records:
                    found[rec.offset] = rec
        out: list[ShareRecord] = []
        gaps: dict[int, int] = {}
        for first, last, count in ranges:
            for offset in range(first, last + 1):
                record = found.get(offset)
                if record is None:   # no record there (compacted away, a control record): acknowledged as a gap
                    gaps[offset] = _GAP
                    continue
                out.append(ShareRecord(topic, p.partition_index, offset, record.timestamp, record.key, record.value,
                                       list(record.headers or []), count))
        with self._rows_lock:
            self._delivered.update(((topic, p.partition_index, r.offset), r) for r in out)
        if gaps:
            acks = self._acks((topic, p.partition_index))
            for offset in gaps:
                acks.add(offset, _GAP)
        return out

    # the cluster/retry facade find_coordinator expects
    @property
    def core(self) -> Any:
        return self

    @property
    def retry_backoff(self) -> Any:
        assert self.cluster is not None
        return self.cluster._retry


@functools.lru_cache(maxsize=None)
def _share_batch_schema() -> Any:
    """poll_batch's schema: klog.Consumer.poll_batch's columns plus delivery_count."""
    return _empty_share_batch().schema


@functools.lru_cache(maxsize=64)
def _delivery_counts(count: int, n: int) -> Any:
    """A delivery_count column of ``n`` rows delivered ``count`` times (immutable: kept for reuse)."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.full(n, count, dtype=np.int16), pa.int16())


def _wire_types(n: int, mask_or_types: Any, otherwise: str) -> Any:
    """:meth:`AsyncShareConsumer.acknowledge_batch`'s ``mask_or_types`` as wire acknowledge types: one (an int)
    for every row, or an int8 ndarray with one per row."""
    import numpy as np
    import pyarrow as pa

    flags = None
    if isinstance(mask_or_types, str):
        kinds = [mask_or_types]
    else:
        values = mask_or_types
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if isinstance(values, pa.Array) and pa.types.is_boolean(values.type):
            flags = values.fill_null(False).to_numpy(zero_copy_only=False)
        elif isinstance(values, np.ndarray) and values.dtype == np.bool_ and values.ndim == 1:
            flags = values
        else:
            if isinstance(values, pa.Array):
                values = values.to_pylist()
            values = list(values)
            if len(values) == n and all(v is None or isinstance(v, (bool, np.bool_)) for v in values):
                flags = np.fromiter((bool(v) for v in values), dtype=bool, count=n)
        if flags is not None:
            kinds = [otherwise, AcknowledgeType.ACCEPT]
            count = len(flags)
        else:
            kinds = sorted({str(v) for v in values})
            count = len(values)
        if count != n:
            raise ValueError(f"mask_or_types has {count} entries for a batch of {n} rows")
    for kind in kinds:
        if kind not in AcknowledgeType.IDS:
            raise ValueError(f"unknown acknowledge type {kind!r}")
        if kind == AcknowledgeType.RENEW:
            raise ValueError("acknowledge_batch does not renew: renew a record of poll() with acknowledge()")
    if len(kinds) == 1:
        return AcknowledgeType.IDS[kinds[0]]
    if flags is not None:
        return np.where(flags, _ACCEPT, AcknowledgeType.IDS[otherwise]).astype(np.int8)
    index = {k: AcknowledgeType.IDS[k] for k in kinds}
    return np.fromiter((index[str(v)] for v in values), dtype=np.int8, count=n)


def _take_rows(plan: list[_BatchAcks]) -> None:
    """Marks the rows of a checked batch as acknowledged (no longer held)."""
    for part in plan:
        if part.held is None:
            continue
        if part.positions is None:
            part.held.take_all()
        elif len(part.positions):
            part.held.take(part.positions)


def _rows_by_partition(batch: Any) -> list[tuple[tuple[str, int], Any, Any]]:
    """The rows of ``batch`` (topic, partition and offset columns) by partition: ((topic, partition), the rows'
    indexes (None: every row), their offsets as an int64 ndarray)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batch.num_rows:
        return []
    columns = []
    for name in ("topic", "partition", "offset"):
        column = batch.column(name)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.null_count:
            raise IllegalStateError(f"rows without a {name} were not delivered by the last poll")
        columns.append(column)
    topic, partition, offset = columns
    if not pa.types.is_dictionary(topic.type):
        topic = pc.dictionary_encode(topic)
    unique: dict[str, int] = {}
    names = topic.dictionary.to_pylist()
    remap = np.array([unique.setdefault(name, len(unique)) for name in names], dtype=np.int64)
    codes = remap[topic.indices.to_numpy(zero_copy_only=False)]
    names = list(unique)
    partitions = partition.to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = offset.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    key = (codes << 32) | (partitions & 0xFFFFFFFF)
    if bool((key == key[0]).all()):
        return [((names[codes[0]], int(partitions[0])), None, offsets)]
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    return [((names[codes[rows[0]]], int(partitions[rows[0]])), rows, offsets[rows])
            for rows in np.split(order, cuts)]


def _share_records_to_arrow(records: list[ShareRecord]) -> Any:
    """Records of :meth:`AsyncShareConsumer.poll` in :meth:`~AsyncShareConsumer.poll_batch`'s columns."""
    import pyarrow as pa

    from .consumer import _records_to_arrow, _with_partition_columns

    pieces = []
    for tp in dict.fromkeys((r.topic, r.partition) for r in records):
        rows = [r for r in records if (r.topic, r.partition) == tp]
        pieces.append(_with_partition_columns(_records_to_arrow(rows), TopicPartition(*tp),  # type: ignore[arg-type]
                                              delivery_count=pa.array([r.delivery_count for r in rows], pa.int16())))
    if len(pieces) == 1:
        return pieces[0]
    return pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]


def _empty_share_batch() -> Any:
    import pyarrow as pa

    from .consumer_api import _empty_batch

    return _empty_batch().append_column("delivery_count", pa.array([], pa.int16()))


class ShareConsumer(BlockingClient):
    """A share-group consumer with a blocking API (each call runs :class:`AsyncShareConsumer`'s on a private
    event-loop thread)::

        with klog.ShareConsumer("jobs", bootstrap_servers=..., group_id="workers",
                                acknowledgement_mode="explicit") as c:
            for record in c.poll(timeout=1.0):
                c.acknowledge(record, "accept")
            c.commit_sync()
    """

    _kind = "share consumer"

    def __init__(self, *topics: str, bootstrap_servers: str | Sequence[str] | None = None,
                 group_id: str | None = None, acknowledgement_mode: str = "implicit",
                 acknowledgement_commit_callback: AcknowledgementCommitCallback | None = None,
                 **config: Any) -> None:
        self._aio = AsyncShareConsumer(*topics, bootstrap_servers=bootstrap_servers, group_id=group_id,
                                       acknowledgement_mode=acknowledgement_mode,
                                       acknowledgement_commit_callback=acknowledgement_commit_callback, **config)
        self._aio._callback_in_caller = True
        self._start_thread("klog-share-consumer", self._aio.start())

    _commit_sync = blocking(AsyncShareConsumer.commit_sync)

    def commit_sync(self, timeout: float | None = 30.0) -> dict[tuple[str, int], Exception | None]:
        try:
            return self._commit_sync(timeout)
        finally:
            self._aio._tell_ack_callback(caller=True)

    commit_sync.__doc__ = AsyncShareConsumer.commit_sync.__doc__

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        self._aio.set_acknowledgement_commit_callback(callback)

    set_acknowledgement_commit_callback.__doc__ = AsyncShareConsumer.set_acknowledgement_commit_callback.__doc__

    # poll and poll_batch run once per record batch: on the loop through LoopThread.run_lean (the lighter hand-off)
    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareRecord]:
        if self._closed:
            raise ClientClosedError(f"{self._kind} closed")
        try:
            return self._thread.run_lean(self._aio.poll(timeout, max_records))
        finally:
            self._aio._tell_ack_callback(caller=True)

    def poll_batch(self, timeout: float = 1.0, max_records: int | None = None) -> Any:
        if self._closed:
            raise ClientClosedError(f"{self._kind} closed")
        try:
            return self._thread.run_lean(self._aio.poll_batch(timeout, max_records))
        finally:
            self._aio._tell_ack_callback(caller=True)

    poll.__doc__ = AsyncShareConsumer.poll.__doc__
    poll_batch.__doc__ = AsyncShareConsumer.poll_batch.__doc__

    def acknowledge(self, record: ShareRecord, type: str = AcknowledgeType.ACCEPT) -> None:
        self._call_on_loop(self._aio.acknowledge, record, type)

    def acknowledge_batch(self, batch: Any, mask_or_types: Any, otherwise: str = AcknowledgeType.RELEASE) -> None:
        """See :meth:`AsyncShareConsumer.acknowledge_batch`. Checked, taken and queued here, in the caller's
        thread, under the consumer's ``_rows_lock`` (so whole, before or after anything the event loop does with
        the rows: a poll, a renewal, the close), and recorded by the event loop before its next poll or commit: no
        hand-off to the loop thread and back per batch."""
        if self._closed:
            raise ClientClosedError(f"{self._kind} closed")
        aio = self._aio
        with aio._rows_lock:
            plan = aio._check_batch(batch, mask_or_types, otherwise, take=False)
            if not any(part.records for part in plan):
                _take_rows(plan)
                aio._deferred.append(plan)
                return
        # rows that were records of poll() (renewed ones): on the loop
        self._call_on_loop(aio.acknowledge_batch, batch, mask_or_types, otherwise)

    def commit_async(self) -> None:
        async def send() -> None:
            self._aio.commit_async()

        self._run(send())

    @property
    def member_id(self) -> str:
        return self._aio.member_id

    def close(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncShareConsumer.close`: bounded by ``timeout`` seconds (default 30)."""
        self._close_with(self._aio.close(timeout))
        self._aio._tell_ack_callback(caller=True)
