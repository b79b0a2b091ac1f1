"""Consumer group membership and offset storage.

- :class:`ClassicGroupMember`: the classic protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup) with client-side assignors (:mod:`klog.client.assignors`), eager or cooperative (KIP-429).
- :class:`ConsumerGroupMember`: the KIP-848 protocol (ConsumerGroupHeartbeat; the broker assigns), used with
  ``group.protocol=consumer`` when the coordinator offers it.
- :func:`commit_offsets` / :func:`fetch_committed`: OffsetCommit / OffsetFetch against the group coordinator.

Rebalance callbacks run where the user's poll runs: the group member only reports what was revoked, lost and
assigned (:class:`RebalanceStep`) and the consumer facade invokes the callbacks between protocol steps.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from klog.protocol import ApiKey, Struct

from .assignors import ASSIGNORS, COOPERATIVE, MemberSubscription, assign, rebalance_protocol
from .cluster import Backoff, ClusterClient
from .consumer_protocol import Assignment, Subscription, decode_assignment, decode_subscription, encode_assignment, \
    encode_subscription
from .errors import (
    CommitFailedError,
    ConfigError,
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedFeatureError,
    for_code,
)
from .types import OffsetAndMetadata, TopicPartition

__all__ = ["ClassicGroupMember", "ConsumerGroupMember", "RebalanceStep", "make_group_member", "commit_offsets",
           "fetch_committed", "find_coordinator"]

log = logging.getLogger("klog.client.group")

# Error codes.
_COORDINATOR_LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
_COORDINATOR_NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
_NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
_ILLEGAL_GENERATION = ErrorCode.ILLEGAL_GENERATION
_UNKNOWN_MEMBER_ID = ErrorCode.UNKNOWN_MEMBER_ID
_REBALANCE_IN_PROGRESS = ErrorCode.REBALANCE_IN_PROGRESS
_MEMBER_ID_REQUIRED = ErrorCode.MEMBER_ID_REQUIRED
_FENCED_INSTANCE_ID = ErrorCode.FENCED_INSTANCE_ID
_UNSTABLE_OFFSET_COMMIT = ErrorCode.UNSTABLE_OFFSET_COMMIT
_FENCED_MEMBER_EPOCH = ErrorCode.FENCED_MEMBER_EPOCH
_STALE_MEMBER_EPOCH = ErrorCode.STALE_MEMBER_EPOCH
_UNRELEASED_INSTANCE_ID = ErrorCode.UNRELEASED_INSTANCE_ID
_COORDINATOR_ERRORS = frozenset({_COORDINATOR_NOT_AVAILABLE, _NOT_COORDINATOR})
_RETRY_ERRORS = frozenset({_COORDINATOR_LOAD_IN_PROGRESS, _UNSTABLE_OFFSET_COMMIT, ErrorCode.REQUEST_TIMED_OUT})
_MEMBER_RESET_ERRORS = frozenset({_ILLEGAL_GENERATION, _UNKNOWN_MEMBER_ID, _FENCED_INSTANCE_ID,
                                  _FENCED_MEMBER_EPOCH})


@dataclass
class RebalanceStep:
    """What one protocol step changed; the facade runs the matching callbacks."""

    revoked: list[TopicPartition] = field(default_factory=list)
    lost: list[TopicPartition] = field(default_factory=list)
    assigned: list[TopicPartition] = field(default_factory=list)
    #: True once a join round completed (on_assign is called even with no partitions, like Java).
    joined: bool = False


class GroupHost(Protocol):
    """What group membership and offset storage use of the consumer they serve (:class:`ConsumerCore
    <klog.client.consumer.ConsumerCore>` implements it). Stated here so that this module, below the consumer,
    never imports it."""

    config: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    cluster: ClusterClient
    retry_backoff: Backoff
    default_timeout: float
    group_id: str | None
    #: The group member serving this consumer, once it subscribed with a group.id.
    group: Any
    manual_assignment: bool
    subscribed_topics: set[str]
    subscribed_pattern: re.Pattern[str] | None
    #: When the user last polled (monotonic seconds): max.poll.interval.ms is measured from it.
    _last_poll: float

    def matching_topics(self) -> list[str]: ...

    def _notify_data(self) -> None:
        """Wake a poll waiting for records (the assignment changed)."""


async def find_coordinator(core: Any, group_id: str, *, timeout: float, key_type: int = 0) -> int:
    """Node id of the group's coordinator (``key_type`` 1: of a transactional id's transaction coordinator);
    connection details are merged into the cluster metadata."""
    deadline = time.monotonic() + timeout
    attempt = 0
    backoff = core.retry_backoff
    while True:
        try:
            conn = await core.cluster.any_connection(max(0.0, deadline - time.monotonic()))
            v = conn.version(ApiKey.FIND_COORDINATOR)
            body = Struct(key=group_id, key_type=key_type, coordinator_keys=[group_id])
            r = await conn.request(ApiKey.FIND_COORDINATOR, body, version=v)
            if v >= 4:
                c = r.coordinators[0]
                code, node, host, port = c.error_code, c.node_id, c.host, c.port
            else:
                code, node, host, port = r.error_code, r.node_id, r.host, r.port
            if code == ErrorCode.NONE:
                from .cluster import BrokerInfo

                if node not in core.cluster.metadata.brokers:
                    core.cluster.metadata.brokers[node] = BrokerInfo(node, host, port)
                return int(node)
            err = for_code(code, f"FindCoordinator({group_id!r})")
            if not err.retriable:
                raise err
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            err = e
        if time.monotonic() >= deadline:
            what = "transactional id" if key_type == 1 else "group"
            raise KafkaTimeoutError(f"no coordinator for {what} {group_id!r}: {err}")
        await asyncio.sleep(backoff.delay(attempt))
        attempt += 1


class _CoordinatorMixin:
    core: GroupHost
    group_id: str
    coordinator: int | None
    #: An error the background heartbeats met that the user's next poll raises (Java's ``ErrorEvent``).
    _error: KafkaError | None = None

    def raise_error(self) -> None:
        """Raise (once) the error the heartbeats left for poll, if any."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _report(self, error: KafkaError) -> None:
        self._error = error
        self.core._notify_data()   # a poll waiting for records returns to raise it

    async def coordinator_request(self, api_key: int, body: Any, *, timeout: float, version: int | None = None,
                                  min_version: int = 0) -> Any:
        if self.coordinator is None:
            self.coordinator = await find_coordinator(self.core, self.group_id, timeout=timeout)
        try:
            conn = await self.core.cluster.connection(self.coordinator)
            v = version if version is not None else conn.version(api_key, minimum=min_version)
            return await conn.request(api_key, body, version=v, timeout=timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.coordinator = None
            raise


class _OffsetClient(_CoordinatorMixin):
    """OffsetCommit/OffsetFetch for a consumer without group membership (manual assignment with group.id)."""

    def __init__(self, core: GroupHost) -> None:
        self.core = core
        self.group_id = core.group_id or ""
        self.coordinator = None


def _client_for(core: GroupHost) -> Any:
    if core.group is not None:
        return core.group
    oc = getattr(core, "_offset_client", None)
    if oc is None:
        oc = core._offset_client = _OffsetClient(core)  # type: ignore[attr-defined]
    return oc


async def commit_offsets(core: GroupHost, offsets: dict[TopicPartition, OffsetAndMetadata], *,
                         timeout: float | None) -> None:
    """OffsetCommit to the coordinator, retrying coordinator moves; CommitFailedError after a rebalance."""
    client = _client_for(core)
    deadline = time.monotonic() + (core.default_timeout if timeout is None else timeout)
    attempt = 0
    # The identity is the member's when the commit is made: a retry after a rebalance must be refused as stale,
    # not write a partition this member may no longer own with the new generation (as Java builds it once).
    generation, member_id, instance_id = -1, "", None
    if isinstance(client, (ClassicGroupMember, ConsumerGroupMember)) and not core.manual_assignment:
        generation, member_id, instance_id = client.commit_identity()
    while True:
        topics: dict[str, list[Any]] = {}
        for tp, om in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(Struct(
                partition_index=tp.partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                commit_timestamp=-1, committed_metadata=om.metadata or ""))
        body = Struct(group_id=client.group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                      group_instance_id=instance_id, retention_time_ms=-1,
                      topics=[Struct(name=t, partitions=ps) for t, ps in topics.items()])
        retry_error: KafkaError | None = None
        try:
            r = await client.coordinator_request(ApiKey.OFFSET_COMMIT, body,
                                                 timeout=max(0.1, deadline - time.monotonic()), min_version=2)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            retry_error = e
        else:
            failed: KafkaError | None = None
            for t in r.topics:
                for p in t.partitions:
                    code = p.error_code
                    if not code:
                        continue
                    if code in _COORDINATOR_ERRORS:
                        client.coordinator = None
                        retry_error = for_code(code)
                    elif code in _RETRY_ERRORS:
                        retry_error = for_code(code)
                    elif code in _MEMBER_RESET_ERRORS or code in (_REBALANCE_IN_PROGRESS, _STALE_MEMBER_EPOCH):
                        if isinstance(client, (ClassicGroupMember, ConsumerGroupMember)):
                            client.on_commit_generation_error(code, generation)
                        failed = CommitFailedError(
                            f"commit failed: the group rebalanced ({for_code(code).name}); the partitions may "
                            f"now belong to another member")
                    else:
                        failed = for_code(code, f"OffsetCommit {t.name}-{p.partition_index}")
            if failed is not None:
                raise failed
            if retry_error is None:
                return
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(f"offset commit did not complete: {retry_error}")
        await asyncio.sleep(core.retry_backoff.delay(attempt))
        attempt += 1


async def fetch_committed(core: GroupHost, tps: list[TopicPartition], *, timeout: float | None
                          ) -> dict[TopicPartition, OffsetAndMetadata]:
    """OffsetFetch: committed offsets of ``tps`` (partitions without a commit are omitted)."""
    client = _client_for(core)
    deadline = time.monotonic() + (core.default_timeout if timeout is None else timeout)
    attempt = 0
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    while True:
        retry_error: KafkaError | None = None
        try:
            if client.coordinator is None:
                client.coordinator = await find_coordinator(core, client.group_id,
                                                            timeout=max(0.1, deadline - time.monotonic()))
            conn = await core.cluster.connection(client.coordinator)
            v = conn.version(ApiKey.OFFSET_FETCH, minimum=1)
            topics = [Struct(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(by_topic.items())]
            member_id, epoch = None, -1
            if isinstance(client, ConsumerGroupMember) and not core.manual_assignment:
                member_id, epoch = client.member_id or None, client.member_epoch
            body = Struct(group_id=client.group_id, topics=topics, require_stable=True,
                          groups=[Struct(group_id=client.group_id, member_id=member_id, member_epoch=epoch,
                                         topics=topics)])
            r = await conn.request(ApiKey.OFFSET_FETCH, body, version=v,
                                   timeout=max(0.1, deadline - time.monotonic()))
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            client.coordinator = None
            retry_error = e
        else:
            if v >= 8:
                g = r.groups[0]
                group_code, rtopics = g.error_code, g.topics
            else:
                group_code, rtopics = r.error_code, r.topics
            codes = [group_code] + [p.error_code for t in rtopics for p in t.partitions]
            bad = next((c for c in codes if c), 0)
            if bad in _COORDINATOR_ERRORS:
                client.coordinator = None
                retry_error = for_code(bad)
            elif bad in _RETRY_ERRORS:
                retry_error = for_code(bad)
            elif bad and bad != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # just no offset
                raise for_code(bad, f"OffsetFetch for group {client.group_id!r}")
            else:
                out: dict[TopicPartition, OffsetAndMetadata] = {}
                for t in rtopics:
                    for p in t.partitions:
                        if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                            out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                                p.committed_offset, p.metadata or "", p.committed_leader_epoch)
                return out
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(f"fetching committed offsets did not complete: {retry_error}")
        await asyncio.sleep(core.retry_backoff.delay(attempt))
        attempt += 1


def make_group_member(core: GroupHost) -> ClassicGroupMember | ConsumerGroupMember:
    if core.config["group.protocol"] == "consumer":
        return ConsumerGroupMember(core)
    return ClassicGroupMember(core)


class ClassicGroupMember(_CoordinatorMixin):
    """A member of a classic consumer group."""

    def __init__(self, core: GroupHost) -> None:
        cfg = core.config
        self.core = core
        self.group_id: str = core.group_id  # type: ignore[assignment]
        self.instance_id: str | None = cfg["group.instance.id"]
        self.session_timeout_ms: int = cfg["session.timeout.ms"]
        self.rebalance_timeout_ms: int = cfg["max.poll.interval.ms"]
        self.heartbeat_interval = cfg["heartbeat.interval.ms"] / 1000.0
        self.assignors: list[str] = [a.strip().lower() for a in cfg["partition.assignment.strategy"]]
        self.assignors = [_canonical_assignor(a) for a in self.assignors]
        if not self.assignors:
            raise ConfigError("partition.assignment.strategy must name at least one assignor")
        self.coordinator: int | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = False
        self.rejoin_needed = True
        self.joining = False
        self.owned: set[TopicPartition] = set()
        self._lost = False
        self._joined_topics: dict[str, int] = {}
        self._group_topics: set[str] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._backoff = Backoff(cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"])
        self._stopped = False

    # -- state queries used by the consumer
    def needs_join(self) -> bool:
        return self.rejoin_needed

    def commit_identity(self) -> tuple[int, str, str | None]:
        return self.generation, self.member_id, self.instance_id

    @property
    def cooperative(self) -> bool:
        proto = self.protocol or self.assignors[0]
        return rebalance_protocol(proto) == COOPERATIVE and all(
            rebalance_protocol(a) == COOPERATIVE for a in self.assignors)

    def subscription_changed(self) -> None:
        self.rejoin_needed = True
        self.core._notify_data()

    def metadata_updated(self, md: Any) -> None:
        if self.rejoin_needed or self.generation < 0:
            return
        relevant = set(self.core.matching_topics())
        if self.leader:
            relevant |= self._group_topics
        if self._partition_counts(relevant) != self._joined_topics:
            log.info("group %s: subscribed topics or partition counts changed; rejoining", self.group_id)
            self.rejoin_needed = True
            self.core._notify_data()

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        md = self.core.cluster.metadata
        return {t: len(md.topics[t].partitions) for t in topics if t in md.topics}

    def on_commit_generation_error(self, code: int, generation: int) -> None:
        if generation != self.generation or self.joining:
            return  # a commit from before the current (or ongoing) rebalance: only that commit failed
        if code in (_UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION, _FENCED_INSTANCE_ID):
            self._reset_member(code)
        self.rejoin_needed = True
        self.core._notify_data()

    def _reset_member(self, code: int) -> None:
        if code == _UNKNOWN_MEMBER_ID or code == _FENCED_INSTANCE_ID:
            self.member_id = ""
        self.generation = -1
        self._lost = True
        self.rejoin_needed = True
        self.core._notify_data()

    # -- rebalance steps (driven by poll)
    async def before_join(self) -> RebalanceStep:
        """Partitions to give up before (re)joining: all of them if lost or eager; none if cooperative."""
        self._stop_heartbeat()
        if self._lost:
            lost = sorted(self.owned)
            self.owned = set()
            self._lost = False
            return RebalanceStep(lost=lost)
        if not self.cooperative and self.owned:
            revoked = sorted(self.owned)
            self.owned = set()
            return RebalanceStep(revoked=revoked)
        return RebalanceStep()

    def reconciled(self, step: RebalanceStep) -> None:
        """The consumer ran ``step``'s callbacks; nothing to report (SyncGroup ended the classic round)."""

    async def join(self, timeout: float) -> RebalanceStep:
        """JoinGroup + SyncGroup until a stable generation; returns what was assigned (and, cooperatively,
        revoked)."""
        self.joining = True
        try:
            return await self._join(timeout)
        finally:
            self.joining = False

    async def _join(self, timeout: float) -> RebalanceStep:
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"joining group {self.group_id!r} did not complete in time")
            try:
                step = await self._join_once(deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("group %s: join attempt failed: %s", self.group_id, e)
                step = None
            if step is not None:
                return step
            await asyncio.sleep(self._backoff.delay(attempt))
            attempt += 1

    async def _join_once(self, deadline: float) -> RebalanceStep | None:
        core = self.core
        # Pattern subscriptions need fresh metadata to know which topics match.
        try:
            await core.cluster.refresh_metadata(timeout=max(0.1, deadline - time.monotonic()))
        except KafkaTimeoutError:
            pass
        topics = core.matching_topics()
        owned: dict[str, list[int]] = {}
        for tp in self.owned:
            owned.setdefault(tp.topic, []).append(tp.partition)
        protocols = []
        for name in self.assignors:
            sub = Subscription(topics, owned_partitions=owned if self.cooperative else {},
                               generation_id=self.generation, rack_id=core.config["client.rack"] or None)
            protocols.append(Struct(name=name, metadata=encode_subscription(sub)))
        body = Struct(group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                      rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                      group_instance_id=self.instance_id, protocol_type="consumer", protocols=protocols,
                      reason="rebalance" if self.generation >= 0 else "joining")
        # The coordinator holds JoinGroup until every member rejoined (up to the rebalance timeout).
        r = await self.coordinator_request(ApiKey.JOIN_GROUP, body, timeout=self.rebalance_timeout_ms / 1000.0 + 5,
                                           min_version=2)
        code = r.error_code
        if code == _MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            return None
        if code == _UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return None
        if code in _COORDINATOR_ERRORS:
            self.coordinator = None
            return None
        if code in (_COORDINATOR_LOAD_IN_PROGRESS, _REBALANCE_IN_PROGRESS, _ILLEGAL_GENERATION):
            return None
        if code:
            raise for_code(code, f"JoinGroup {self.group_id!r}")
        self.member_id = r.member_id
        generation = r.generation_id
        self.protocol = r.protocol_name
        self.leader = r.leader == r.member_id
        assignments: list[Any] = []
        if self.leader and not getattr(r, "skip_assignment", False):
            assignments = await self._assign(r.members, deadline)
        else:
            self._joined_topics = self._partition_counts(topics)
        sync = Struct(group_id=self.group_id, generation_id=generation, member_id=self.member_id,
                      group_instance_id=self.instance_id, protocol_type="consumer", protocol_name=self.protocol,
                      assignments=assignments)
        s = await self.coordinator_request(ApiKey.SYNC_GROUP, sync, timeout=self.rebalance_timeout_ms / 1000.0 + 5)
        code = s.error_code
        if code in _COORDINATOR_ERRORS:
            self.coordinator = None
            return None
        if code == _REBALANCE_IN_PROGRESS:
            return None
        if code in (_UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION):
            if code == _UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.generation = -1
            return None
        if code:
            raise for_code(code, f"SyncGroup {self.group_id!r}")
        self.generation = generation
        assignment = decode_assignment(s.assignment or b"")
        new = {TopicPartition(t, p) for t, ps in assignment.partitions.items() for p in ps}
        step = RebalanceStep(joined=True)
        if self.cooperative:
            step.revoked = sorted(self.owned - new)
            step.assigned = sorted(new - self.owned)
            # Revoked partitions go to other members in a follow-up rebalance.
            self.rejoin_needed = bool(step.revoked)
        else:
            step.assigned = sorted(new)
            self.rejoin_needed = False
        self.owned = new
        core.cluster.tracked_topics.update(t for t in assignment.partitions)
        self._start_heartbeat()
        log.info("group %s: generation %d, member %s%s, assigned %d partitions", self.group_id, generation,
                 self.member_id, " (leader)" if self.leader else "", len(new))
        return step

    async def _assign(self, members: list[Any], deadline: float) -> list[Any]:
        subs = [MemberSubscription(m.member_id, getattr(m, "group_instance_id", None),
                                   decode_subscription(m.metadata)) for m in members]
        topics = sorted({t for m in subs for t in m.subscription.topics})
        self._group_topics = set(topics)
        self.core.cluster.tracked_topics.update(topics)
        try:
            await self.core.cluster.refresh_metadata(topics, timeout=max(0.1, deadline - time.monotonic()))
        except KafkaTimeoutError:
            pass
        counts = self._partition_counts(topics)
        self._joined_topics = counts
        result = assign(self.protocol or self.assignors[0], subs, counts)
        return [Struct(member_id=mid, assignment=encode_assignment(Assignment(parts)))
                for mid, parts in result.items()]

    # -- heartbeats
    def _start_heartbeat(self) -> None:
        self._stop_heartbeat()
        if not self._stopped:
            self._heartbeat = self.core.loop.create_task(self._heartbeat_loop())

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    async def _heartbeat_loop(self) -> None:
        core = self.core
        max_poll = self.rebalance_timeout_ms / 1000.0
        while not self._stopped:
            await asyncio.sleep(self.heartbeat_interval)
            if time.monotonic() - core._last_poll > max_poll:
                log.warning("group %s: poll() not called for max.poll.interval.ms; leaving the group",
                            self.group_id)
                await self._send_leave("consumer poll timeout has expired")
                self._reset_member(_UNKNOWN_MEMBER_ID)
                return
            body = Struct(group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                          group_instance_id=self.instance_id)
            try:
                r = await self.coordinator_request(ApiKey.HEARTBEAT, body, timeout=self.heartbeat_interval + 5)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("group %s: heartbeat failed: %s", self.group_id, e)
                continue
            code = r.error_code
            if code == ErrorCode.NONE:
                continue
            if code == _REBALANCE_IN_PROGRESS:
                self.rejoin_needed = True
                core._notify_data()
                return
            if code in _MEMBER_RESET_ERRORS:
                log.info("group %s: member reset by coordinator (%s)", self.group_id, for_code(code).name)
                self._reset_member(code)
                if code == _FENCED_INSTANCE_ID:
                    # another consumer took this group.instance.id: Java's heartbeat thread fails with it, raised
                    # from the next poll (the member joins again only if poll is called again)
                    self._report(for_code(code, f"Heartbeat {self.group_id!r}: group.instance.id "
                                                f"{self.instance_id!r} was fenced by another member"))
                return
            if code in _COORDINATOR_ERRORS:
                self.coordinator = None
                continue
            log.warning("group %s: heartbeat error %s", self.group_id, for_code(code))

    async def _send_leave(self, reason: str) -> None:
        if not self.member_id or self.coordinator is None:
            return
        body = Struct(group_id=self.group_id, member_id=self.member_id,
                      members=[Struct(member_id=self.member_id, group_instance_id=self.instance_id, reason=reason)])
        try:
            await self.coordinator_request(ApiKey.LEAVE_GROUP, body, timeout=5.0)
        except KafkaError as e:
            log.debug("group %s: LeaveGroup failed: %s", self.group_id, e)

    async def leave(self, reason: str) -> None:
        """Leave the group (static members stay registered until their session expires, as in Java)."""
        self._stop_heartbeat()
        if self.instance_id is None and self.generation >= 0:
            await self._send_leave(reason)
        self.generation = -1
        self.rejoin_needed = True

    async def stop(self) -> None:
        self._stopped = True
        self._stop_heartbeat()


def _canonical_assignor(name: str) -> str:
    n = name.strip().lower()
    # Java class names are accepted too.
    aliases = {
        "org.apache.kafka.clients.consumer.rangeassignor": "range",
        "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
        "org.apache.kafka.clients.consumer.stickyassignor": "sticky",
        "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
    }
    n = aliases.get(n, n)
    if n not in ASSIGNORS:
        raise ConfigError(f"partition.assignment.strategy: unknown assignor {name!r}; use {', '.join(ASSIGNORS)}")
    return n


class ConsumerGroupMember(_CoordinatorMixin):
    """A member of a KIP-848 consumer group: the coordinator computes assignments; the member reconciles."""

    def __init__(self, core: GroupHost) -> None:
        cfg = core.config
        self.core = core
        self.group_id: str = core.group_id  # type: ignore[assignment]
        self.instance_id: str | None = cfg["group.instance.id"]
        self.rebalance_timeout_ms: int = cfg["max.poll.interval.ms"]
        self.server_assignor: str | None = cfg["group.remote.assignor"]
        self.coordinator: int | None = None
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval = cfg["heartbeat.interval.ms"] / 1000.0
        self.owned: set[TopicPartition] = set()
        self.target: set[TopicPartition] | None = None
        self.rejoin_needed = True
        self.joining = False
        self._lost = False
        self._send_subscription = True
        self._ack_needed = False
        #: Counts reconciliations: an answered heartbeat acknowledges the one it was sent after, not a later one.
        self._ack_seq = 0
        #: Set when an acknowledgement is due: the heartbeat loop sends it without waiting out its interval.
        self._ack_due = asyncio.Event()
        self._heartbeat: asyncio.Task[None] | None = None
        self._stopped = False
        self._backoff = Backoff(cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"])
        self._topic_names: dict[Any, str] = {}

    def needs_join(self) -> bool:
        return self.rejoin_needed or self._lost or (self.target is not None and self.target != self.owned)

    def commit_identity(self) -> tuple[int, str, str | None]:
        return self.member_epoch, self.member_id, self.instance_id

    def subscription_changed(self) -> None:
        self._send_subscription = True
        self.rejoin_needed = True
        self.core._notify_data()

    def metadata_updated(self, md: Any) -> None:
        for name, info in md.topics.items():
            if info.topic_id is not None:
                self._topic_names[info.topic_id] = name

    def on_commit_generation_error(self, code: int, generation: int) -> None:
        if generation != self.member_epoch or self.joining:
            return
        if code in (_FENCED_MEMBER_EPOCH, _UNKNOWN_MEMBER_ID):
            self._fenced()

    def _fenced(self) -> None:
        self.member_epoch = 0
        self._lost = True
        self._send_subscription = True
        self.core._notify_data()

    async def _heartbeat_request(self, *, leaving: bool = False) -> Any:
        core = self.core
        subscription = core.subscribed_topics
        pattern = core.subscribed_pattern
        full = self._send_subscription or self.member_epoch == 0
        owned = None
        if full or self._ack_needed:
            owned = self._owned_by_id()
        body = Struct(
            group_id=self.group_id, member_id=self.member_id,
            member_epoch=(-2 if self.instance_id else -1) if leaving else self.member_epoch,
            instance_id=self.instance_id, rack_id=core.config["client.rack"] or None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=sorted(subscription) if full and pattern is None else None,
            subscribed_topic_regex=pattern.pattern if full and pattern is not None else None,
            server_assignor=self.server_assignor if full else None,
            topic_partitions=owned,
        )
        if pattern is not None:
            if self.coordinator is None:
                self.coordinator = await find_coordinator(core, self.group_id, timeout=core.default_timeout)
            conn = await core.cluster.connection(self.coordinator)
            if conn.version(ApiKey.CONSUMER_GROUP_HEARTBEAT) < 1:
                raise UnsupportedFeatureError("regex subscriptions with group.protocol=consumer need "
                                              "ConsumerGroupHeartbeat v1 (Kafka 4.0+)")
        return await self.coordinator_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, timeout=core.default_timeout)

    def _owned_by_id(self) -> list[Any]:
        md = self.core.cluster.metadata
        by_topic: dict[str, list[int]] = {}
        for tp in self.owned:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out = []
        for t, ps in sorted(by_topic.items()):
            info = md.topics.get(t)
            if info is not None and info.topic_id is not None:
                out.append(Struct(topic_id=info.topic_id, partitions=sorted(ps)))
        return out

    def _apply_response(self, r: Any) -> None:
        code = r.error_code
        if code in (_FENCED_MEMBER_EPOCH, _UNKNOWN_MEMBER_ID):
            log.info("group %s: fenced (%s); rejoining", self.group_id, for_code(code).name)
            self._fenced()
            return
        if code in _COORDINATOR_ERRORS:
            self.coordinator = None
            raise KafkaConnectionError(for_code(code).name)
        if code in (_COORDINATOR_LOAD_IN_PROGRESS,):
            raise KafkaConnectionError(for_code(code).name)
        if code:
            raise for_code(code, r.error_message or f"ConsumerGroupHeartbeat {self.group_id!r}")
        if r.member_id:
            self.member_id = r.member_id
        self.member_epoch = r.member_epoch
        self._send_subscription = False
        if r.heartbeat_interval_ms > 0:
            self.heartbeat_interval = r.heartbeat_interval_ms / 1000.0
        if r.assignment is not None:
            target: set[TopicPartition] = set()
            unknown = False
            for tps in r.assignment.topic_partitions:
                name = self._topic_names.get(tps.topic_id)
                if name is None:
                    unknown = True
                    continue
                target.update(TopicPartition(name, p) for p in tps.partitions)
            self.target = target
            if unknown:
                self.core.cluster.request_update()
            if target != self.owned:
                self.core._notify_data()

    async def before_join(self) -> RebalanceStep:
        if self._lost:
            lost = sorted(self.owned)
            self.owned = set()
            self._lost = False
            self.target = None
            return RebalanceStep(lost=lost)
        return RebalanceStep()

    async def join(self, timeout: float) -> RebalanceStep:
        """Heartbeat until the coordinator gives a target assignment, then reconcile towards it."""
        self.joining = True
        try:
            return await self._join(timeout)
        finally:
            self.joining = False

    async def _join(self, timeout: float) -> RebalanceStep:
        """Returns what to revoke and assign; the owned partitions (what heartbeats report) change only in
        :meth:`reconciled`, once the consumer committed and ran the callbacks (as Java's member does)."""
        deadline = time.monotonic() + timeout
        attempt = 0
        core = self.core
        while self.member_epoch == 0 or self.target is None:
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"joining group {self.group_id!r} did not complete in time")
            try:
                await core.cluster.refresh_metadata(timeout=max(0.1, deadline - time.monotonic()))
                self.metadata_updated(core.cluster.metadata)
                r = await self._heartbeat_request()
                self._apply_response(r)
                if self.member_epoch > 0 and self.target is None and r.assignment is None:
                    # Joined, assignment pending: poll again after the heartbeat interval.
                    await asyncio.sleep(min(self.heartbeat_interval, max(0.0, deadline - time.monotonic())))
                    continue
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("group %s: heartbeat failed: %s", self.group_id, e)
                await asyncio.sleep(self._backoff.delay(attempt))
                attempt += 1
        target = self.target
        step = RebalanceStep(joined=True)
        step.revoked = sorted(self.owned - target)
        step.assigned = sorted(target - self.owned)
        self.rejoin_needed = False
        core.cluster.tracked_topics.update(tp.topic for tp in target)
        self._start_heartbeat()
        return step

    def reconciled(self, step: RebalanceStep) -> None:
        """The consumer committed and gave up ``step.revoked`` (on_revoke returned) and took ``step.assigned``:
        only now may the coordinator hear that the revoked partitions are free, else their new owner starts from
        the commit not yet made."""
        self.owned = (self.owned - set(step.revoked)) | set(step.assigned)
        self._ack_needed = True
        self._ack_seq += 1
        self._ack_due.set()

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            if not self._stopped:
                self._heartbeat = self.core.loop.create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        core = self.core
        max_poll = self.rebalance_timeout_ms / 1000.0
        failures = 0   # heartbeats failed in a row: a failed one is retried after Kafka's exponential backoff
        while not self._stopped:
            if not self._ack_needed and not failures:
                self._ack_due.clear()
                try:
                    await asyncio.wait_for(self._ack_due.wait(), self.heartbeat_interval)
                except asyncio.TimeoutError:
                    pass
            if time.monotonic() - core._last_poll > max_poll:
                log.warning("group %s: poll() not called for max.poll.interval.ms; leaving", self.group_id)
                try:
                    await self._heartbeat_request(leaving=True)
                except KafkaError:
                    pass
                self._fenced()
                return
            try:
                # Only a request that carried the owned partitions and was answered without an error acknowledged
                # them, and only the reconciliation they were sent after (another may end while it is under way).
                acking = self._ack_seq if self._ack_needed else None
                r = await self._heartbeat_request()
                self._apply_response(r)
                if acking is not None and acking == self._ack_seq:
                    self._ack_needed = False
                failures = 0
            except KafkaError as e:
                # Connection errors, and the retriable answers (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; the
                # coordinator is looked up again after the first): an acknowledgement stays due, and is sent again
                # after retry.backoff.ms growing to retry.backoff.max.ms, as Java's heartbeat manager does, not at
                # once (a loop hammering the coordinator). Any other error (GROUP_AUTHORIZATION_FAILED,
                # UNSUPPORTED_VERSION, INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED,
                # UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, an unexpected code) is fatal to the membership, as
                # Java's AbstractHeartbeatRequestManager.onErrorResponse: raised from the next poll, the partitions
                # lost, the heartbeats stopped (the next poll joins again); TOPIC_AUTHORIZATION_FAILED is raised
                # from poll and the member keeps heartbeating (the ACL may be added).
                if isinstance(e, (KafkaConnectionError, KafkaTimeoutError)):
                    log.debug("group %s: heartbeat failed: %s", self.group_id, e)
                elif getattr(e, "code", None) == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    log.error("group %s: heartbeat error: %s", self.group_id, e)
                    self._report(e)
                else:
                    log.error("group %s: heartbeat failed with a fatal error: %s", self.group_id, e)
                    self._report(e)
                    self._fenced()
                    return
                await asyncio.sleep(self._backoff.delay(failures))
                failures += 1
            if self._lost:
                return

    async def leave(self, reason: str) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self.member_epoch > 0:
            try:
                await self._heartbeat_request(leaving=True)
            except KafkaError as e:
                log.debug("group %s: leave failed: %s", self.group_id, e)
        self.member_epoch = 0
        self.rejoin_needed = True

    async def stop(self) -> None:
        self._stopped = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
