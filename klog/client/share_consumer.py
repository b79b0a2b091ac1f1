"""``klog.ShareConsumer`` / ``klog.aio.ShareConsumer``: a share-group (KIP-932, "queues for Kafka") consumer.

Several share consumers of one group read the same partitions; each record is acquired by one of them for a lock
period and acknowledged: ACCEPT (done), RELEASE (deliver again, to any member), REJECT (never again), or RENEW
(extend the lock). As Kafka's ``KafkaShareConsumer``:

- ``acknowledgement_mode="implicit"`` (``share.acknowledgement.mode``): the next :meth:`poll` (or
  :meth:`commit_sync`/:meth:`commit_async`/:meth:`close`) accepts every record the previous poll returned;
- ``"explicit"``: call :meth:`acknowledge` for each record; the acknowledgements go with the next poll
  (piggybacked on ShareFetch) or with :meth:`commit_sync`/:meth:`commit_async` (ShareAcknowledge). A poll with
  records of the previous poll still unacknowledged raises, as Kafka's ``IllegalStateException``.

Each record's ``delivery_count`` says how often it was delivered (1 the first time).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

from klog.protocol import ApiKey, Struct
from klog.protocol.error_codes import ErrorCode
from klog.records import decode_batches

from .cluster import ClusterClient
from .config import CONSUMER_CONFIG, resolve_config
from .errors import KafkaError, for_code
from .group import find_coordinator
from .loop_thread import BlockingClient, blocking
from .types import Header

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


class AsyncShareConsumer:
    """The asyncio share consumer (``klog.aio.ShareConsumer``)."""

    def __init__(self, *topics: str, bootstrap_servers: str | Sequence[str] | None = None,
                 group_id: str | None = None, acknowledgement_mode: str = "implicit", **config: Any) -> None:
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
        self.member_id = ""
        self.member_epoch = 0
        self._coordinator: int | None = None
        self._heartbeat_ms = 5000
        self._hb_task: asyncio.Task[None] | None = None
        #: (topic, partition) assigned, with topic ids
        self.assignment: dict[tuple[str, int], uuid.UUID] = {}
        self._ids: dict[uuid.UUID, str] = {}
        #: leader node -> the share session epoch of the next request (0: open one)
        self._epochs: dict[int, int] = {}
        #: (topic, partition) -> offset -> wire ack type, not sent yet
        self._pending: dict[tuple[str, int], dict[int, int]] = {}
        #: records delivered by the last poll and not acknowledged yet
        self._delivered: dict[tuple[str, int, int], ShareRecord] = {}
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self.cluster = ClusterClient(self._cfg)
        await self.cluster.start()
        self.cluster.track_topics(self._topics)
        await self.cluster.refresh_metadata(self._topics)
        await self._heartbeat()
        self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def __aenter__(self) -> AsyncShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Sends the outstanding acknowledgements (implicit mode: accepts what the last poll returned), closes
        the share sessions (records still held are released) and leaves the group."""
        if self._closed or self.cluster is None:
            return
        self._closed = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._hb_task
        with contextlib.suppress(Exception):
            self._implicit_accept()
            await self._acknowledge_all(close=True)
        with contextlib.suppress(Exception):
            self.member_epoch = -1
            await self._heartbeat()
        await self.cluster.close()

    # -- membership -------------------------------------------------------------------------------------------
    async def _heartbeat(self) -> None:
        assert self.cluster is not None
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self, self.group_id, timeout=30.0)
        body = Struct(group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
                      rack_id=None, subscribed_topic_names=self._topics if self.member_epoch == 0 else None)
        r = await self.cluster.request(self._coordinator, ApiKey.SHARE_GROUP_HEARTBEAT, body, version=1)
        if r.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self._coordinator = None
            return
        if r.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            self.member_epoch = 0   # rejoin at the next heartbeat
            return
        if r.error_code:
            raise for_code(r.error_code, f"ShareGroupHeartbeat: {r.error_message}")
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
            with contextlib.suppress(KafkaError, OSError):
                await self._heartbeat()

    # -- acknowledgement --------------------------------------------------------------------------------------
    def acknowledge(self, record: ShareRecord, type: str = AcknowledgeType.ACCEPT) -> None:
        """Acknowledges one record the last poll returned (sent with the next poll or commit)."""
        if type not in AcknowledgeType.IDS:
            raise ValueError(f"unknown acknowledge type {type!r}")
        key = (record.topic, record.partition, record.offset)
        if key not in self._delivered and type != AcknowledgeType.RENEW:
            raise KafkaError(f"record {key} was not delivered by the last poll or is acknowledged already")
        if type != AcknowledgeType.RENEW:
            del self._delivered[key]
        self._pending.setdefault((record.topic, record.partition), {})[record.offset] = AcknowledgeType.IDS[type]

    def _implicit_accept(self) -> None:
        for (topic, partition, offset) in self._delivered:
            self._pending.setdefault((topic, partition), {})[offset] = AcknowledgeType.IDS["accept"]
        self._delivered.clear()

    @staticmethod
    def _batches(acks: dict[int, int]) -> list[Struct]:
        out: list[Struct] = []
        for offset in sorted(acks):
            kind = acks[offset]
            if out and out[-1].last_offset == offset - 1 and out[-1].acknowledge_types[-1] == kind:
                out[-1].last_offset = offset
            else:
                out.append(Struct(first_offset=offset, last_offset=offset, acknowledge_types=[kind]))
        return out

    def _leader(self, tp: tuple[str, int]) -> int | None:
        assert self.cluster is not None
        return self.cluster.metadata.leader_for(*tp)

    def _pending_by_leader(self) -> dict[int, dict[tuple[str, int], dict[int, int]]]:
        out: dict[int, dict[tuple[str, int], dict[int, int]]] = {}
        for tp, acks in self._pending.items():
            leader = self._leader(tp)
            if acks and leader is not None:
                out.setdefault(leader, {})[tp] = acks
        return out

    async def commit_sync(self, timeout: float | None = 30.0) -> dict[tuple[str, int], Exception | None]:
        """Sends the acknowledgements now (ShareAcknowledge) and waits; returns each partition's outcome."""
        if not self.explicit:
            self._implicit_accept()
        return await asyncio.wait_for(self._acknowledge_all(close=False), timeout)

    def commit_async(self) -> asyncio.Task[dict[tuple[str, int], Exception | None]]:
        """Sends the acknowledgements without waiting (the returned task has each partition's outcome)."""
        if not self.explicit:
            self._implicit_accept()
        return asyncio.get_running_loop().create_task(self._acknowledge_all(close=False))

    async def _acknowledge_all(self, *, close: bool) -> dict[tuple[str, int], Exception | None]:
        assert self.cluster is not None
        results: dict[tuple[str, int], Exception | None] = {}
        pending, self._pending = self._pending_by_leader(), {}
        nodes = set(pending) | (set(self._epochs) if close else set())
        for node in nodes:
            acks = pending.get(node, {})
            epoch = self._epochs.get(node, 0)
            if epoch == 0:   # no session with this leader yet: acknowledgements need one
                continue
            topics: dict[uuid.UUID, list[Struct]] = {}
            for (topic, partition), by_offset in acks.items():
                tid = self.assignment.get((topic, partition)) or self.cluster.metadata.topics[topic].topic_id
                topics.setdefault(tid, []).append(Struct(partition_index=partition,
                                                         acknowledgement_batches=self._batches(by_offset)))
            body = Struct(group_id=self.group_id, member_id=self.member_id,
                          share_session_epoch=-1 if close else epoch, is_renew_ack=False,
                          topics=[Struct(topic_id=t, partitions=ps) for t, ps in topics.items()])
            r = await self.cluster.request(node, ApiKey.SHARE_ACKNOWLEDGE, body)
            self._epochs[node] = 0 if close or r.error_code else epoch + 1
            for t in r.responses:
                name = self._ids.get(t.topic_id, "")
                for p in t.partitions:
                    results[(name, p.partition_index)] = for_code(p.error_code) if p.error_code else None
        return results

    # -- poll -------------------------------------------------------------------------------------------------
    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareRecord]:
        """Acquires records (at most ``max_records``, default ``max.poll.records``) from the assigned partitions,
        waiting up to ``timeout`` seconds; sends the pending acknowledgements with the request."""
        assert self.cluster is not None
        if self.explicit and self._delivered:
            raise KafkaError("explicit acknowledgement: acknowledge every record of the last poll before polling")
        self._implicit_accept()
        max_records = max_records or int(self._cfg["max.poll.records"])
        deadline = time.monotonic() + timeout
        while True:
            out = await self._fetch_once(max(0.0, deadline - time.monotonic()), max_records)
            if out or time.monotonic() >= deadline:
                return out
            if not self.assignment:
                await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    async def _fetch_once(self, wait_s: float, max_records: int) -> list[ShareRecord]:
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
        results = await asyncio.gather(*(self._share_fetch(node, tps, pending.get(node, {}), wait_ms, max_records)
                                         for node, tps in by_leader.items()), return_exceptions=True)
        out: list[ShareRecord] = []
        for res in results:
            if isinstance(res, BaseException):
                self.cluster.request_update()
                continue
            out.extend(res)
        return out

    async def _share_fetch(self, node: int, tps: list[tuple[str, int]], acks: dict[tuple[str, int], dict[int, int]],
                           wait_ms: int, max_records: int) -> list[ShareRecord]:
        assert self.cluster is not None
        epoch = self._epochs.get(node, 0)
        topics: dict[uuid.UUID, list[Struct]] = {}
        for tp in set(tps) | set(acks):
            tid = self.assignment.get(tp) or self.cluster.metadata.topics[tp[0]].topic_id
            batches = self._batches(acks[tp]) if tp in acks and epoch != 0 else []
            topics.setdefault(tid, []).append(Struct(partition_index=tp[1], partition_max_bytes=0,
                                                     acknowledgement_batches=batches))
        if epoch == 0:   # acknowledgements cannot open a session: keep them for the next request
            for tp, by_offset in acks.items():
                self._pending.setdefault(tp, {}).update(by_offset)
        else:
            for tp in acks:
                self._pending.pop(tp, None)
        body = Struct(group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch,
                      max_wait_ms=wait_ms, min_bytes=1, max_bytes=int(self._cfg["fetch.max.bytes"]),
                      max_records=max_records, batch_size=max_records, share_acquire_mode=0, is_renew_ack=False,
                      topics=[Struct(topic_id=t, partitions=ps) for t, ps in topics.items()], forgotten_topics_data=[])
        r = await self.cluster.request(node, ApiKey.SHARE_FETCH, body, timeout=wait_ms / 1000 + 30)
        if r.error_code:
            self._epochs[node] = 0
            if r.error_code in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH):
                return []
            raise for_code(r.error_code, f"ShareFetch: {r.error_message}")
        self._epochs[node] = epoch + 1 if epoch < 2**31 - 1 else 1
        out: list[ShareRecord] = []
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
                out.extend(self._records(name, p))
        return out

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
                rec = found.get(offset)
                if rec is None:   # no record there (compacted away, a control record): acknowledged as a gap
                    gaps[offset] = _GAP
                    continue
                sr = ShareRecord(topic, p.partition_index, offset, rec.timestamp, rec.key, rec.value,
                                 list(rec.headers or []), count)
                self._delivered[(topic, p.partition_index, offset)] = sr
                out.append(sr)
        if gaps:
            self._pending.setdefault((topic, p.partition_index), {}).update(gaps)
        return out

    # the cluster/retry facade find_coordinator expects
    @property
    def core(self) -> Any:
        return self

    @property
    def retry_backoff(self) -> Any:
        assert self.cluster is not None
        return self.cluster._retry


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
                 group_id: str | None = None, acknowledgement_mode: str = "implicit", **config: Any) -> None:
        self._aio = AsyncShareConsumer(*topics, bootstrap_servers=bootstrap_servers, group_id=group_id,
                                       acknowledgement_mode=acknowledgement_mode, **config)
        self._start_thread("klog-share-consumer", self._aio.start())

    poll = blocking(AsyncShareConsumer.poll)
    commit_sync = blocking(AsyncShareConsumer.commit_sync)

    def acknowledge(self, record: ShareRecord, type: str = AcknowledgeType.ACCEPT) -> None:
        self._run_on_loop(self._aio.acknowledge, record, type)

    def commit_async(self) -> None:
        async def send() -> None:
            self._aio.commit_async()

        self._run(send())

    @property
    def member_id(self) -> str:
        return self._aio.member_id

    def close(self) -> None:
        self._close_with(self._aio.close())
