"""Admin client: topics, partitions, configs, consumer groups, group offsets, record deletion, ACLs, client
quotas and SCRAM credentials.

:class:`AsyncAdminClient` (``klog.aio.AdminClient``) does the work on the caller's event loop;
:class:`AdminClient` (``klog.AdminClient``) is its blocking twin on a private loop thread. Calls that act on
several items raise the first item's error (a :class:`KafkaError` subclass carrying the Kafka error code) after
all items were attempted; the exception's message lists every failed item.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from klog.protocol import ApiKey, Struct
from klog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from klog.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, SALT_BYTES, mechanism_name, mechanism_type
from klog.security.scram import salted_password as _salted_password

from .cluster import ClusterClient
from .config import ADMIN_CONFIG, resolve_config
from .list_offsets import list_offsets
from .consumer_protocol import decode_assignment
from .errors import (
    ClientClosedError,
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedFeatureError,
    for_code,
)
from .loop_thread import BlockingClient, blocking
from .types import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AdminClient",
    "AsyncAdminClient",
    "NewTopic",
    "ConfigResource",
    "ConfigEntry",
    "TopicDescription",
    "PartitionDescription",
    "GroupListing",
    "GroupDescription",
    "MemberDescription",
    "LogDirDescription",
    "ScramCredentialInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]

_CONFIG_SOURCES = {-1: "unknown", 0: "unknown", 1: "dynamic_topic", 2: "dynamic_broker", 3: "dynamic_default_broker",
                   4: "static_broker", 5: "default", 6: "dynamic_broker_logger", 7: "dynamic_client_metrics",
                   8: "dynamic_group"}
_RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8, "group": 32}
#: what a broker puts in an authorized-operations field it was not asked for (Kafka's Integer.MIN_VALUE)
_OPERATIONS_OMITTED = -2147483648


def authorized_operations(bits: int | None) -> frozenset[str] | None:
    """An authorized-operations bit field (bit i: AclOperation i) as lower-case operation names; None when the
    broker left it out."""
    if bits is None or bits == _OPERATIONS_OMITTED:
        return None
    return frozenset(op.name.lower() for op in AclOperation if bits & (1 << int(op)))
_OP_SET, _OP_DELETE = 0, 1


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 partitions/replication factor take the broker's defaults (CreateTopics v4+)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class ConfigResource:
    """A configurable resource: ``type`` is "topic", "broker", "broker_logger" or "group"."""

    type: str
    name: str

    def type_id(self) -> int:
        t = _RESOURCE_TYPES.get(self.type.lower())
        if t is None:
            raise ValueError(f"unknown config resource type {self.type!r}; use one of {', '.join(_RESOURCE_TYPES)}")
        return t


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool
    is_default: bool


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: Any
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]
    #: the operations the caller may do on the topic (lower-case AclOperation names, e.g. ``"write"``), when
    #: asked for (``describe_topics(..., include_authorized_operations=True)``) and the broker said; else None
    authorized_operations: frozenset[str] | None = None


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    #: the operations the caller may do on the group (lower-case AclOperation names, e.g. ``"read"``), when asked
    #: for (``include_authorized_operations=True``) and the broker said; else None
    authorized_operations: frozenset[str] | None = None


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory of one broker (DescribeLogDirs): partition sizes in bytes, the disk's total and usable
    bytes (None when the broker does not say, before DescribeLogDirs v4), or the directory's error."""

    path: str
    error: KafkaError | None
    sizes: Mapping[TopicPartition, int]
    total_bytes: int | None = None
    usable_bytes: int | None = None


def _code(enum: Any, value: str | int, what: str) -> int:
    """An ACL enum's code from its Kafka name in any case (``read``, ``Prefixed``, ``TRANSACTIONAL_ID``) or
    its number."""
    if isinstance(value, int):
        return int(enum(value))
    key = value.strip().upper().replace("-", "_")
    key = {"TRANSACTIONALID": "TRANSACTIONAL_ID", "DELEGATIONTOKEN": "DELEGATION_TOKEN",
           "CLUSTERACTION": "CLUSTER_ACTION", "DESCRIBECONFIGS": "DESCRIBE_CONFIGS",
           "ALTERCONFIGS": "ALTER_CONFIGS", "IDEMPOTENTWRITE": "IDEMPOTENT_WRITE"}.get(key, key)
    try:
        return int(enum[key])
    except KeyError:
        names = ", ".join(m.name.lower() for m in enum if m.name != "UNKNOWN")
        raise ValueError(f"{what} {value!r} is not one of {names}") from None


@dataclass(frozen=True)
class AclBinding:
    """An ACL (Kafka's ``AclBinding``): ``AclBinding("topic", "orders", "User:alice", "read")``; kinds by their
    Kafka names in any case, or codes. ``host`` ``*`` is every host; ``pattern_type`` literal or prefixed."""

    resource_type: str | int
    resource_name: str
    principal: str
    operation: str | int
    permission_type: str | int = "allow"
    host: str = "*"
    pattern_type: str | int = "literal"

    def to_creation(self) -> Struct:
        return Struct(resource_type=_code(ResourceType, self.resource_type, "resource type"),
                      resource_name=self.resource_name,
                      resource_pattern_type=_code(PatternType, self.pattern_type, "pattern type"),
                      principal=self.principal, host=self.host,
                      operation=_code(AclOperation, self.operation, "operation"),
                      permission_type=_code(AclPermissionType, self.permission_type, "permission type"))

    @classmethod
    def from_codes(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
                   operation: int, permission_type: int) -> AclBinding:
        def name(enum: Any, code: int) -> str:
            try:
                return str(enum(code).name.lower())
            except ValueError:
                return "unknown"
        return cls(name(ResourceType, resource_type), resource_name, principal, name(AclOperation, operation),
                   name(AclPermissionType, permission_type), host, name(PatternType, pattern_type))


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs to list or delete (Kafka's ``AclBindingFilter``): None or ``any`` matches everything; pattern
    type ``match`` selects the ACLs that apply to ``resource_name`` (literal, ``*`` and prefixes)."""

    resource_type: str | int = "any"
    resource_name: str | None = None
    principal: str | None = None
    operation: str | int = "any"
    permission_type: str | int = "any"
    host: str | None = None
    pattern_type: str | int = "any"

    def to_filter(self) -> Struct:
        return Struct(resource_type_filter=_code(ResourceType, self.resource_type, "resource type"),
                      resource_name_filter=self.resource_name,
                      pattern_type_filter=_code(PatternType, self.pattern_type, "pattern type"),
                      principal_filter=self.principal, host_filter=self.host,
                      operation=_code(AclOperation, self.operation, "operation"),
                      permission_type=_code(AclPermissionType, self.permission_type, "permission type"))


@dataclass(frozen=True)
class ScramCredentialInfo:
    """One SCRAM credential of a user, as DescribeUserScramCredentials shows it (Kafka's
    ``ScramCredentialInfo``): its mechanism (``SCRAM-SHA-256`` or ``SCRAM-SHA-512``) and iterations; never the
    password, salt or keys."""

    mechanism: str
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s password for ``mechanism`` (Kafka's ``UserScramCredentialUpsertion``). The client salts it
    (a random salt, PBKDF2-HMAC over ``iterations``, 4096 to 16384) and sends only the salt and salted password."""

    user: str
    mechanism: str
    password: str
    iterations: int = MIN_ITERATIONS


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Delete ``user``'s credential for ``mechanism`` (Kafka's ``UserScramCredentialDeletion``)."""

    user: str
    mechanism: str


def _scram_mechanism(name: str) -> int:
    try:
        return mechanism_type(name.strip().upper().replace("_", "-"))
    except (KeyError, ValueError):
        raise ValueError(f"SCRAM mechanism {name!r} is not one of SCRAM-SHA-256, SCRAM-SHA-512") from None


def _scram_mechanism_name(code: int) -> str:
    try:
        return mechanism_name(code)
    except KeyError:
        return "UNKNOWN"


def _raise_collected(errors: list[tuple[str, KafkaError]], what: str) -> None:
    if not errors:
        return
    first = errors[0][1]
    detail = "; ".join(f"{item}: {e.name} ({e})" for item, e in errors)
    err = type(first)(f"{what} failed for {len(errors)} item(s): {detail}")
    err.code = first.code
    raise err


_OFFSET_SPECS = {"earliest": -2, "latest": -1, "max-timestamp": -3}


def _offset_spec(q: int | str) -> int:
    if isinstance(q, str):
        if q not in _OFFSET_SPECS:
            raise ValueError(f"offset spec {q!r} is not one of {', '.join(_OFFSET_SPECS)} or a timestamp in ms")
        return _OFFSET_SPECS[q]
    if q < 0:
        raise ValueError(f"timestamp {q} is negative; use 'earliest', 'latest' or 'max-timestamp'")
    return int(q)


def _resource(r: ConfigResource | tuple[str, str]) -> ConfigResource:
    return r if isinstance(r, ConfigResource) else ConfigResource(*r)


class AsyncAdminClient:
    """Admin operations over the Kafka protocol, on the caller's event loop."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        if bootstrap_servers is not None:
            config = {**config, "bootstrap.servers": bootstrap_servers}
        self.config = resolve_config(ADMIN_CONFIG, config, kind="admin")
        self._cluster: ClusterClient | None = None
        self.timeout = self.config["default.api.timeout.ms"] / 1000.0

    async def start(self) -> None:
        if self._cluster is None:
            cluster = ClusterClient(self.config, allow_auto_create_topics=False)
            try:
                await cluster.start(timeout=self.timeout)
            except BaseException:
                await cluster.close()
                raise
            self._cluster = cluster

    @property
    def cluster(self) -> ClusterClient:
        if self._cluster is None:
            raise ClientClosedError("admin client not started: await admin.start() or use 'async with'")
        return self._cluster

    async def close(self) -> None:
        if self._cluster is not None:
            await self._cluster.close()
            self._cluster = None

    async def __aenter__(self) -> AsyncAdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ plumbing
    def _t(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    async def _controller_request(self, api_key: int, body: Any, timeout: float) -> Any:
        """Send to the controller (Metadata's controller_id), as Kafka's admin client does."""
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            node = self.cluster.metadata.controller_id
            try:
                if node < 0 or node not in self.cluster.metadata.brokers:
                    conn = await self.cluster.any_connection(max(0.1, deadline - time.monotonic()))
                else:
                    conn = await self.cluster.connection(node)
                return await conn.request(api_key, body, timeout=timeout)
            except (KafkaConnectionError, KafkaTimeoutError):
                if time.monotonic() >= deadline:
                    raise
                await self.cluster.refresh_metadata(timeout=max(0.1, deadline - time.monotonic()))
                await asyncio.sleep(self.cluster._retry.delay(attempt))
                attempt += 1

    async def _any_request(self, api_key: int, body: Any, timeout: float, min_version: int = 0) -> Any:
        conn = await self.cluster.any_connection(timeout)
        return await conn.request(api_key, body, version=conn.version(api_key, minimum=min_version),
                                  timeout=timeout)

    async def _coordinator(self, group_id: str, timeout: float) -> int:
        from .group import find_coordinator

        return await find_coordinator(_CoreShim(self), group_id, timeout=timeout)

    # ------------------------------------------------------------------ topics
    async def create_topics(self, topics: Iterable[NewTopic | str], *, num_partitions: int = -1,
                            replication_factor: int = -1, config: Mapping[str, str] | None = None,
                            validate_only: bool = False, timeout: float | None = None) -> None:
        """Create topics (names or :class:`NewTopic`); waits until the controller created them."""
        specs = [t if isinstance(t, NewTopic) else NewTopic(t, num_partitions, replication_factor, dict(config or {}))
                 for t in topics]
        timeout = self._t(timeout)
        body = Struct(
            topics=[Struct(
                name=s.name, num_partitions=-1 if s.replica_assignment else s.num_partitions,
                replication_factor=-1 if s.replica_assignment else s.replication_factor,
                assignments=[Struct(partition_index=p, broker_ids=list(b))
                             for p, b in sorted((s.replica_assignment or {}).items())],
                configs=[Struct(name=k, value=v) for k, v in s.config.items()]) for s in specs],
            timeout_ms=int(timeout * 1000), validate_only=validate_only)
        r = await self._controller_request(ApiKey.CREATE_TOPICS, body, timeout)
        errors = [(t.name, for_code(t.error_code, t.error_message)) for t in r.topics if t.error_code]
        _raise_collected(errors, "create_topics")
        if not validate_only:
            await self._wait_for_topics([s.name for s in specs], present=True, timeout=timeout)

    async def delete_topics(self, topics: Iterable[str], *, timeout: float | None = None) -> None:
        names = list(topics)
        timeout = self._t(timeout)
        body = Struct(topic_names=names, topics=[Struct(name=n) for n in names], timeout_ms=int(timeout * 1000))
        r = await self._controller_request(ApiKey.DELETE_TOPICS, body, timeout)
        errors = [(t.name, for_code(t.error_code, getattr(t, "error_message", None))) for t in r.responses
                  if t.error_code]
        _raise_collected(errors, "delete_topics")
        await self._wait_for_topics(names, present=False, timeout=timeout)

    async def _wait_for_topics(self, names: list[str], *, present: bool, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            r = await self.cluster.fetch_metadata(names, timeout=max(0.1, deadline - time.monotonic()))
            state = {t.name: (t.error_code == ErrorCode.NONE and len(t.partitions) > 0
                              and all(p.leader_id >= 0 for p in t.partitions)) for t in r.topics}
            if all(state.get(n, False) == present for n in names):
                return
            if time.monotonic() >= deadline:
                return  # the controller accepted the change; propagation is just slow
            await asyncio.sleep(0.05)

    async def list_topics(self, *, internal: bool = False, timeout: float | None = None) -> list[str]:
        r = await self.cluster.fetch_metadata(None, timeout=self._t(timeout))
        return sorted(t.name for t in r.topics if not t.error_code and (internal or not t.is_internal))

    async def describe_topics(self, topics: Iterable[str], *, timeout: float | None = None,
                              include_authorized_operations: bool = False) -> dict[str, TopicDescription]:
        """The topics' partitions (Metadata); ``include_authorized_operations``: with what the caller may do on
        each (:attr:`TopicDescription.authorized_operations`)."""
        names = list(topics)
        r = await self.cluster.fetch_metadata(names, timeout=self._t(timeout),
                                              authorized_operations=include_authorized_operations)
        out: dict[str, TopicDescription] = {}
        errors = []
        for t in r.topics:
            if t.error_code:
                errors.append((t.name, for_code(t.error_code)))
                continue
            parts = tuple(sorted((PartitionDescription(p.partition_index, p.leader_id, p.leader_epoch,
                                                       tuple(p.replica_nodes), tuple(p.isr_nodes))
                                  for p in t.partitions), key=lambda p: p.partition))
            ops = (authorized_operations(getattr(t, "topic_authorized_operations", None))
                   if include_authorized_operations else None)
            out[t.name] = TopicDescription(t.name, t.topic_id, t.is_internal, parts, ops)
        _raise_collected(errors, "describe_topics")
        return out

    async def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                                timeout: float | None = None) -> None:
        """Grow topics to ``new_counts[topic]`` partitions in total."""
        timeout = self._t(timeout)
        body = Struct(topics=[Struct(name=t, count=n, assignments=None) for t, n in new_counts.items()],
                      timeout_ms=int(timeout * 1000), validate_only=validate_only)
        r = await self._controller_request(ApiKey.CREATE_PARTITIONS, body, timeout)
        errors = [(t.name, for_code(t.error_code, t.error_message)) for t in r.results if t.error_code]
        _raise_collected(errors, "create_partitions")
        if not validate_only:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                md = await self.cluster.fetch_metadata(list(new_counts), timeout=timeout)
                if all(len(t.partitions) >= new_counts[t.name] for t in md.topics if t.name in new_counts):
                    break
                await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ configs
    async def describe_configs(self, resources: Iterable[ConfigResource | tuple[str, str]], *,
                               timeout: float | None = None) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        res = [_resource(r) for r in resources]
        timeout = self._t(timeout)
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        errors = []
        # Broker resources must go to that broker.
        groups: dict[int | None, list[ConfigResource]] = collections.defaultdict(list)
        for r in res:
            groups[int(r.name) if r.type.lower() == "broker" and r.name.isdigit() else None].append(r)
        for node, items in groups.items():
            body = Struct(resources=[Struct(resource_type=r.type_id(), resource_name=r.name,
                                            configuration_keys=None) for r in items],
                          include_synonyms=False, include_documentation=False)
            if node is None:
                resp = await self._any_request(ApiKey.DESCRIBE_CONFIGS, body, timeout)
            else:
                resp = await self.cluster.request(node, ApiKey.DESCRIBE_CONFIGS, body, timeout=timeout)
            for result, r in zip(resp.results, items):
                if result.error_code:
                    errors.append((f"{r.type}:{r.name}", for_code(result.error_code, result.error_message)))
                    continue
                entries = {}
                for c in result.configs:
                    source = _CONFIG_SOURCES.get(c.config_source, "unknown")
                    is_default = bool(c.is_default) if c.config_source == -1 else c.config_source == 5
                    entries[c.name] = ConfigEntry(c.name, c.value, "default" if is_default else source,
                                                  bool(c.read_only), bool(c.is_sensitive), is_default)
                out[r] = entries
        _raise_collected(errors, "describe_configs")
        return out

    async def alter_configs(self, changes: Mapping[ConfigResource | tuple[str, str], Mapping[str, str | None]], *,
                            incremental: bool = True, validate_only: bool = False,
                            timeout: float | None = None) -> None:
        """Change configs: ``{ConfigResource("topic", "t"): {"retention.ms": "1000", "cleanup.policy": None}}``.

        Incremental (default, IncrementalAlterConfigs): a value sets the key, None deletes it (back to the
        default). Non-incremental (AlterConfigs) replaces the resource's whole dynamic config.
        """
        timeout = self._t(timeout)
        # a broker's resource goes to that broker (which refuses another broker's id, as Kafka's brokers do)
        groups: dict[int | None, list[tuple[ConfigResource, dict[str, str | None]]]] = collections.defaultdict(list)
        for resource, configs in changes.items():
            r = _resource(resource)
            node = int(r.name) if r.type.lower() == "broker" and r.name.isdigit() else None
            groups[node].append((r, dict(configs)))
        errors = []
        for node, items in groups.items():
            if incremental:
                body = Struct(resources=[Struct(resource_type=r.type_id(), resource_name=r.name, configs=[
                    Struct(name=k, config_operation=_OP_DELETE if v is None else _OP_SET, value=v)
                    for k, v in c.items()]) for r, c in items], validate_only=validate_only)
                api = ApiKey.INCREMENTAL_ALTER_CONFIGS
            else:
                body = Struct(resources=[Struct(resource_type=r.type_id(), resource_name=r.name, configs=[
                    Struct(name=k, value=v) for k, v in c.items() if v is not None]) for r, c in items],
                    validate_only=validate_only)
                api = ApiKey.ALTER_CONFIGS
            if node is None:
                resp = await self._any_request(api, body, timeout)
            else:
                resp = await self.cluster.request(node, api, body, timeout=timeout)
            errors += [(f"{x.resource_type}:{x.resource_name}", for_code(x.error_code, x.error_message))
                       for x in resp.responses if x.error_code]
        _raise_collected(errors, "alter_configs")

    # ------------------------------------------------------------------ groups
    async def list_groups(self, *, timeout: float | None = None) -> list[GroupListing]:
        """Groups on every broker (each broker lists the groups it coordinates)."""
        timeout = self._t(timeout)
        await self.cluster.refresh_metadata(timeout=timeout)
        out: dict[str, GroupListing] = {}
        errors = []
        for node in sorted(self.cluster.metadata.brokers):
            r = await self.cluster.request(node, ApiKey.LIST_GROUPS, Struct(states_filter=[], types_filter=[]),
                                           timeout=timeout)
            if r.error_code:
                errors.append((f"broker {node}", for_code(r.error_code)))
                continue
            for g in r.groups:
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", None) or None,
                                               getattr(g, "group_type", None) or None)
        _raise_collected(errors, "list_groups")
        return sorted(out.values(), key=lambda g: g.group_id)

    async def describe_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                              include_authorized_operations: bool = False) -> dict[str, GroupDescription]:
        """Classic groups (DescribeGroups); ``include_authorized_operations``: with what the caller may do on each
        (:attr:`GroupDescription.authorized_operations`)."""
        timeout = self._t(timeout)
        out: dict[str, GroupDescription] = {}
        errors = []
        for gid in group_ids:
            node = await self._coordinator(gid, timeout)
            r = await self.cluster.request(node, ApiKey.DESCRIBE_GROUPS,
                                           Struct(groups=[gid], include_authorized_operations=include_authorized_operations),
                                           timeout=timeout)
            for g in r.groups:
                if g.error_code:
                    errors.append((g.group_id, for_code(g.error_code, getattr(g, "error_message", None))))
                    continue
                members = []
                for m in g.members:
                    assignment: tuple[TopicPartition, ...] = ()
                    if g.protocol_type == "consumer" and m.member_assignment:
                        try:
                            a = decode_assignment(m.member_assignment)
                            assignment = tuple(TopicPartition(t, p) for t, ps in sorted(a.partitions.items())
                                               for p in ps)
                        except ValueError:
                            pass
                    members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                     assignment))
                ops = (authorized_operations(getattr(g, "authorized_operations", None))
                       if include_authorized_operations else None)
                out[g.group_id] = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                                                   tuple(members), ops)
        _raise_collected(errors, "describe_groups")
        return out

    async def describe_consumer_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                                       include_authorized_operations: bool = False) -> dict[str, GroupDescription]:
        """KIP-848 (``group.protocol=consumer``) groups, with ConsumerGroupDescribe: state, assignor and each
        member's current assignment. Classic groups answer GROUP_ID_NOT_FOUND here: use describe_groups."""
        return await self._describe_assigned_groups(ApiKey.CONSUMER_GROUP_DESCRIBE, "consumer", group_ids, timeout,
                                                    "describe_consumer_groups", include_authorized_operations)

    async def describe_share_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                                    include_authorized_operations: bool = False) -> dict[str, GroupDescription]:
        """Share groups (KIP-932) with ShareGroupDescribe: state, assignor and each member's assignment."""
        return await self._describe_assigned_groups(ApiKey.SHARE_GROUP_DESCRIBE, "share", group_ids, timeout,
                                                    "describe_share_groups", include_authorized_operations)

    async def describe_streams_groups(self, group_ids: Iterable[str], *, timeout: float | None = None
                                      ) -> dict[str, GroupDescription]:
        """Streams groups (KIP-1071, Kafka Streams' ``group.protocol=streams``) with StreamsGroupDescribe: state and
        each member's active tasks as the topic partitions they read (their subtopology's source and repartition
        topics at the task's partition)."""
        timeout = self._t(timeout)
        out: dict[str, GroupDescription] = {}
        errors = []
        for gid in group_ids:
            node = await self._coordinator(gid, timeout)
            r = await self.cluster.request(node, ApiKey.STREAMS_GROUP_DESCRIBE,
                                           Struct(group_ids=[gid], include_authorized_operations=False),
                                           timeout=timeout)
            for g in r.groups:
                if g.error_code:
                    errors.append((g.group_id, for_code(g.error_code, g.error_message)))
                    continue
                inputs = {s.subtopology_id: [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
                          for s in (g.topology.subtopologies or [] if g.topology is not None else [])}
                members = tuple(MemberDescription(
                    m.member_id, m.instance_id, m.client_id, m.client_host,
                    tuple(sorted(TopicPartition(topic, p) for task in m.assignment.active_tasks
                                 for topic in inputs.get(task.subtopology_id, []) for p in task.partitions)))
                    for m in g.members)
                out[g.group_id] = GroupDescription(g.group_id, g.group_state, "streams", "", members)
        _raise_collected(errors, "describe_streams_groups")
        return out

    async def _describe_assigned_groups(self, api_key: ApiKey, protocol_type: str, group_ids: Iterable[str],
                                        timeout: float | None, what: str, include_authorized_operations: bool = False
                                        ) -> dict[str, GroupDescription]:
        """ConsumerGroupDescribe / ShareGroupDescribe (same shape: the coordinator assigns, each member's
        assignment is its topic partitions) for each group at its coordinator."""
        timeout = self._t(timeout)
        out: dict[str, GroupDescription] = {}
        errors = []
        for gid in group_ids:
            node = await self._coordinator(gid, timeout)
            r = await self.cluster.request(node, api_key, Struct(
                group_ids=[gid], include_authorized_operations=include_authorized_operations), timeout=timeout)
            for g in r.groups:
                if g.error_code:
                    errors.append((g.group_id, for_code(g.error_code, g.error_message)))
                    continue
                members = tuple(MemberDescription(
                    m.member_id, getattr(m, "instance_id", None), m.client_id, m.client_host,   # share: no instance id
                    tuple(TopicPartition(tp.topic_name, p) for tp in sorted(m.assignment.topic_partitions,
                                                                               key=lambda tp: tp.topic_name)
                          for p in sorted(tp.partitions))) for m in g.members)
                ops = (authorized_operations(getattr(g, "authorized_operations", None))
                       if include_authorized_operations else None)
                out[g.group_id] = GroupDescription(g.group_id, g.group_state, protocol_type, g.assignor_name, members,
                                                   ops)
        _raise_collected(errors, what)
        return out

    async def list_share_group_offsets(self, group_id: str, *, timeout: float | None = None
                                       ) -> dict[TopicPartition, tuple[int, int]]:
        """(start offset, lag) of each share-partition the share group has state for (DescribeShareGroupOffsets;
        -1 where unknown)."""
        timeout = self._t(timeout)
        node = await self._coordinator(group_id, timeout)
        r = await self.cluster.request(node, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                                       Struct(groups=[Struct(group_id=group_id, topics=None)]), timeout=timeout)
        out: dict[TopicPartition, tuple[int, int]] = {}
        errors = []
        for g in r.groups:
            if g.error_code:
                errors.append((g.group_id, for_code(g.error_code, g.error_message)))
                continue
            for t in g.topics:
                for p in t.partitions:
                    if p.error_code:
                        errors.append((f"{t.topic_name}-{p.partition_index}", for_code(p.error_code)))
                        continue
                    out[TopicPartition(t.topic_name, p.partition_index)] = (p.start_offset, p.lag)
        _raise_collected(errors, "list_share_group_offsets")
        return out

    async def delete_groups(self, group_ids: Iterable[str], *, timeout: float | None = None) -> None:
        timeout = self._t(timeout)
        errors = []
        for gid in group_ids:
            node = await self._coordinator(gid, timeout)
            r = await self.cluster.request(node, ApiKey.DELETE_GROUPS, Struct(groups_names=[gid]), timeout=timeout)
            for res in r.results:
                if res.error_code:
                    errors.append((res.group_id, for_code(res.error_code)))
        _raise_collected(errors, "delete_groups")

    async def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                                 timeout: float | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all its partitions, or just ``partitions``)."""
        timeout = self._t(timeout)
        node = await self._coordinator(group_id, timeout)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = collections.defaultdict(list)
            for tp in partitions:
                by_topic[tp[0]].append(tp[1])
            topics = [Struct(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(by_topic.items())]
        conn = await self.cluster.connection(node)
        v = conn.version(ApiKey.OFFSET_FETCH, minimum=2)
        body = Struct(group_id=group_id, topics=topics, require_stable=False,
                      groups=[Struct(group_id=group_id, member_id=None, member_epoch=-1, topics=topics)])
        r = await conn.request(ApiKey.OFFSET_FETCH, body, version=v, timeout=timeout)
        if v >= 8:
            g = r.groups[0]
            code, rtopics = g.error_code, g.topics
        else:
            code, rtopics = r.error_code, r.topics
        if code:
            raise for_code(code, f"list_group_offsets({group_id!r})")
        out = {}
        for t in rtopics:
            for p in t.partitions:
                if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "", p.committed_leader_epoch)
        return out

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                                  timeout: float | None = None) -> None:
        """Set a group's committed offsets (the group must have no active members)."""
        timeout = self._t(timeout)
        node = await self._coordinator(group_id, timeout)
        by_topic: dict[str, list[Any]] = collections.defaultdict(list)
        for tp, o in sorted(offsets.items()):
            om = o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            by_topic[tp[0]].append(Struct(partition_index=tp[1], committed_offset=om.offset,
                                          committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        body = Struct(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                      topics=[Struct(name=t, partitions=ps) for t, ps in by_topic.items()])
        conn = await self.cluster.connection(node)
        r = await conn.request(ApiKey.OFFSET_COMMIT, body, version=conn.version(ApiKey.OFFSET_COMMIT, minimum=2),
                               timeout=timeout)
        errors = [(f"{t.name}-{p.partition_index}", for_code(p.error_code)) for t in r.topics for p in t.partitions
                  if p.error_code]
        _raise_collected(errors, "alter_group_offsets")

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition | tuple[str, int]], *,
                                   timeout: float | None = None) -> None:
        """Delete a group's committed offsets of ``partitions`` (OffsetDelete; the group must not be consuming
        those topics). Raises the first partition's error after all were attempted."""
        timeout = self._t(timeout)
        node = await self._coordinator(group_id, timeout)
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for tp in partitions:
            by_topic[tp[0]].append(tp[1])
        body = Struct(group_id=group_id, topics=[Struct(name=t, partitions=[Struct(partition_index=p) for p in sorted(ps)])
                                                 for t, ps in sorted(by_topic.items())])
        r = await self.cluster.request(node, ApiKey.OFFSET_DELETE, body, timeout=timeout)
        if r.error_code:
            raise for_code(r.error_code, f"delete_group_offsets({group_id!r})")
        errors = [(f"{t.name}-{p.partition_index}", for_code(p.error_code)) for t in r.topics for p in t.partitions
                  if p.error_code]
        _raise_collected(errors, "delete_group_offsets")

    # ------------------------------------------------------------------ offsets
    async def list_offsets(self, query: Mapping[TopicPartition | tuple[str, int], int | str], *,
                           timeout: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by partition (ListOffsets, as Kafka's ``Admin.listOffsets``): each query is "earliest",
        "latest", "max-timestamp" or a timestamp in ms (the first offset at or after it). Partitions with no
        such offset (a timestamp past the last record) are left out of the result."""
        specs = {TopicPartition(*tp): _offset_spec(q) for tp, q in query.items()}
        found = await list_offsets(self.cluster, specs, isolation_level=0, retry_backoff=self.cluster._retry,
                                   timeout=self._t(timeout))
        return {tp: OffsetAndTimestamp(o, ts, epoch) for tp, (o, ts, epoch) in found.items()}

    # ------------------------------------------------------------------ records
    async def delete_records(self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
                             ) -> dict[TopicPartition, int]:
        """Delete records below ``before[tp]`` (-1: up to the high watermark); returns the new low watermarks."""
        timeout = self._t(timeout)
        tps = {TopicPartition(*tp): off for tp, off in before.items()}
        await self.cluster.refresh_metadata({tp.topic for tp in tps}, timeout=timeout)
        by_leader: dict[int, list[TopicPartition]] = collections.defaultdict(list)
        errors: list[tuple[str, KafkaError]] = []
        for tp in tps:
            leader = self.cluster.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                errors.append((f"{tp.topic}-{tp.partition}", for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            else:
                by_leader[leader].append(tp)
        out: dict[TopicPartition, int] = {}
        for node, items in by_leader.items():
            topics: dict[str, list[Any]] = collections.defaultdict(list)
            for tp in items:
                topics[tp.topic].append(Struct(partition_index=tp.partition, offset=tps[tp]))
            body = Struct(topics=[Struct(name=t, partitions=ps) for t, ps in topics.items()],
                          timeout_ms=int(timeout * 1000))
            r = await self.cluster.request(node, ApiKey.DELETE_RECORDS, body, timeout=timeout)
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code:
                        errors.append((f"{t.name}-{p.partition_index}", for_code(p.error_code)))
                    else:
                        out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
        _raise_collected(errors, "delete_records")
        return out

    async def describe_cluster(self, *, timeout: float | None = None, include_authorized_operations: bool = False
                               ) -> dict[str, Any]:
        """``{"cluster_id", "controller_id", "brokers": [(node_id, host, port, rack)], "authorized_operations"}``;
        the last, what the caller may do on the cluster (lower-case AclOperation names), only when
        ``include_authorized_operations`` and the broker said (else None)."""
        timeout = self._t(timeout)
        try:
            r = await self._any_request(
                ApiKey.DESCRIBE_CLUSTER, Struct(include_cluster_authorized_operations=include_authorized_operations),
                timeout)
            if r.error_code:
                raise for_code(r.error_code, r.error_message)
            ops = (authorized_operations(getattr(r, "cluster_authorized_operations", None))
                   if include_authorized_operations else None)
            return {"cluster_id": r.cluster_id, "controller_id": r.controller_id,
                    "brokers": [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers], "authorized_operations": ops}
        except UnsupportedFeatureError:
            md = await self.cluster.refresh_metadata(timeout=timeout)
            return {"cluster_id": md.cluster_id, "controller_id": md.controller_id,
                    "brokers": [(b.node_id, b.host, b.port, b.rack) for b in md.brokers.values()],
                    "authorized_operations": None}


    async def describe_metadata_quorum(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The controller quorum (Kafka's ``Admin.describeMetadataQuorum``): ``{"leader_id", "leader_epoch",
        "high_watermark", "voters": [...], "observers": [...]}``, each replica a dict with ``replica_id``,
        ``log_end_offset``, ``last_fetch_timestamp``, ``last_caught_up_timestamp`` (ms, -1: unknown)."""
        timeout = self._t(timeout)
        body = Struct(topics=[Struct(topic_name="__cluster_metadata", partitions=[Struct(partition_index=0)])])
        r = await self._any_request(ApiKey.DESCRIBE_QUORUM, body, timeout)
        if r.error_code:
            raise for_code(r.error_code, getattr(r, "error_message", None))
        p = r.topics[0].partitions[0]
        if p.error_code:
            raise for_code(p.error_code, getattr(p, "error_message", None))

        def replicas(states: Any) -> list[dict[str, Any]]:
            return [{"replica_id": s.replica_id, "log_end_offset": s.log_end_offset,
                     "last_fetch_timestamp": s.last_fetch_timestamp,
                     "last_caught_up_timestamp": s.last_caught_up_timestamp} for s in states]

        return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch, "high_watermark": p.high_watermark,
                "voters": replicas(p.current_voters), "observers": replicas(p.observers)}

    # ------------------------------------------------------------------ ACLs
    async def create_acls(self, acls: Iterable[AclBinding], *, timeout: float | None = None) -> None:
        """Create ACLs (CreateAcls; an ACL that exists already succeeds). Raises the first refusal, naming every
        refused ACL."""
        items = list(acls)
        if not items:
            return
        resp = await self._any_request(ApiKey.CREATE_ACLS, Struct(creations=[a.to_creation() for a in items]),
                                       self._t(timeout))
        errors = [(str(a), for_code(r.error_code, r.error_message)) for a, r in zip(items, resp.results)
                  if r.error_code]
        _raise_collected(errors, "create_acls")

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
                            ) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (all of them by default), by resource."""
        body = (acl_filter or AclBindingFilter()).to_filter()
        resp = await self._any_request(ApiKey.DESCRIBE_ACLS, body, self._t(timeout))
        if resp.error_code:
            raise for_code(resp.error_code, resp.error_message)
        return [AclBinding.from_codes(r.resource_type, r.resource_name, getattr(r, "pattern_type", 3), a.principal,
                                      a.host, a.operation, a.permission_type)
                for r in resp.resources for a in r.acls]

    async def delete_acls(self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
                          ) -> list[AclBinding]:
        """Delete every ACL a filter matches (DeleteAcls); the ACLs deleted."""
        items = list(filters)
        if not items:
            return []
        resp = await self._any_request(ApiKey.DELETE_ACLS, Struct(filters=[f.to_filter() for f in items]),
                                       self._t(timeout))
        deleted: list[AclBinding] = []
        errors = []
        for f, result in zip(items, resp.filter_results):
            if result.error_code:
                errors.append((str(f), for_code(result.error_code, result.error_message)))
                continue
            for m in result.matching_acls:
                if m.error_code:
                    errors.append((str(f), for_code(m.error_code, m.error_message)))
                    continue
                binding = AclBinding.from_codes(m.resource_type, m.resource_name, getattr(m, "pattern_type", 3),
                                                m.principal, m.host, m.operation, m.permission_type)
                if binding not in deleted:
                    deleted.append(binding)
        _raise_collected(errors, "delete_acls")
        return deleted

    # ------------------------------------------------------------------ client quotas
    async def describe_client_quotas(self, match: Mapping[str, str | None] | None = None, *,
                                     any_named: Iterable[str] = (), strict: bool = False,
                                     timeout: float | None = None
                                     ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """The client quotas (Kafka's ``Admin.describeClientQuotas``) of the entities matching: ``match`` maps
        an entity type (``user``, ``client-id``, ``ip``) to a name, or None for its default entity; ``any_named``
        entity types match any named entity; ``strict``: entities with no other parts. Entity (sorted (type,
        name) pairs, None the default) -> quota key -> value."""
        components = [Struct(entity_type=t, match_type=0 if n is not None else 1, match=n)
                      for t, n in (match or {}).items()]
        components += [Struct(entity_type=t, match_type=2, match=None) for t in any_named]
        resp = await self._any_request(ApiKey.DESCRIBE_CLIENT_QUOTAS,
                                       Struct(components=components, strict=strict), self._t(timeout))
        if resp.error_code:
            raise for_code(resp.error_code, resp.error_message)
        return {tuple(sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=lambda p: p[0])):
                {v.key: v.value for v in entry.values} for entry in resp.entries or []}

    async def alter_client_quotas(self, alterations: Iterable[tuple[Mapping[str, str | None],
                                                                    Mapping[str, float | None]]], *,
                                  validate_only: bool = False, timeout: float | None = None) -> None:
        """Set or remove client quotas (AlterClientQuotas, decided by the controller): each alteration is an
        entity (entity type -> name, None for the default entity) and its changes (quota key -> value, None to
        remove it). Raises the first refusal, naming every refused entity."""
        items = list(alterations)
        if not items:
            return
        entries = [Struct(entity=[Struct(entity_type=t, entity_name=n) for t, n in entity.items()],
                          ops=[Struct(key=k, value=0.0 if v is None else float(v), remove=v is None)
                               for k, v in ops.items()]) for entity, ops in items]
        resp = await self._any_request(ApiKey.ALTER_CLIENT_QUOTAS,
                                       Struct(entries=entries, validate_only=validate_only), self._t(timeout))
        # each result names its entity: Kafka answers in its own (hash map) order, not the request's
        errors = [(str({e.entity_type: e.entity_name for e in r.entity}), for_code(r.error_code, r.error_message))
                  for r in resp.entries if r.error_code]
        _raise_collected(errors, "alter_client_quotas")

    # ------------------------------------------------------------------ SCRAM credentials
    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                              timeout: float | None = None) -> dict[str, list[ScramCredentialInfo]]:
        """The SCRAM credentials (mechanism and iterations) of ``users``, or of every user who has one
        (DescribeUserScramCredentials, Kafka's ``Admin.describeUserScramCredentials``): user -> credentials.
        A user named but without credentials fails with Kafka's error, RESOURCE_NOT_FOUND (raised after all
        users were looked at, naming every failed user)."""
        names = None if users is None else list(dict.fromkeys(users))
        body = Struct(users=None if names is None else [Struct(name=n) for n in names])
        resp = await self._any_request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body, self._t(timeout))
        if resp.error_code:
            raise for_code(resp.error_code, resp.error_message)
        out: dict[str, list[ScramCredentialInfo]] = {}
        errors = []
        for r in resp.results:
            if r.error_code:
                errors.append((f"user {r.user!r}", for_code(r.error_code, r.error_message)))
                continue
            out[r.user] = [ScramCredentialInfo(_scram_mechanism_name(c.mechanism), c.iterations)
                           for c in r.credential_infos]
        _raise_collected(errors, "describe_user_scram_credentials")
        return out

    async def alter_user_scram_credentials(
            self, upsertions: Iterable[UserScramCredentialUpsertion] = (),
            deletions: Iterable[UserScramCredentialDeletion | tuple[str, str]] = (), *,
            timeout: float | None = None) -> None:
        """Set and delete SCRAM credentials (AlterUserScramCredentials, decided by the controller; Kafka's
        ``Admin.alterUserScramCredentials``). Each password is salted here, as Kafka's admin client does: a random
        salt and PBKDF2-HMAC-SHA256/512 over the iterations (4096 to 16384); the password itself is never sent.
        Raises the first refusal after all were attempted, naming every refused user and Kafka's error."""
        ups = list(upsertions)
        dels = [d if isinstance(d, UserScramCredentialDeletion) else UserScramCredentialDeletion(*d)
                for d in deletions]
        if not ups and not dels:
            return
        up_structs = []
        for u in ups:
            if not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
                raise ValueError(f"iterations {u.iterations} for user {u.user!r} is outside "
                                 f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
            mech = _scram_mechanism(u.mechanism)
            salt = os.urandom(SALT_BYTES)
            up_structs.append(Struct(name=u.user, mechanism=mech, iterations=u.iterations, salt=salt,
                                     salted_password=_salted_password(mechanism_name(mech), u.password, salt,
                                                                      u.iterations)))
        body = Struct(deletions=[Struct(name=d.user, mechanism=_scram_mechanism(d.mechanism)) for d in dels],
                      upsertions=up_structs)
        resp = await self._any_request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, self._t(timeout))
        errors = [(f"user {r.user!r}", for_code(r.error_code, r.error_message)) for r in resp.results
                  if r.error_code]
        _raise_collected(errors, "alter_user_scram_credentials")

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None, *,
                                topics: Mapping[str, Iterable[int]] | None = None, timeout: float | None = None
                                ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log directories with the size of every partition they hold (Kafka's
        ``Admin.describeLogDirs``): all brokers by default, every partition unless ``topics`` names some
        (topic -> partitions)."""
        timeout = self._t(timeout)
        if brokers is None:
            await self.cluster.refresh_metadata(timeout=timeout)
            brokers = sorted(self.cluster.metadata.brokers)
        body = Struct(topics=None if topics is None else [
            Struct(topic=t, partitions=sorted(ps)) for t, ps in sorted(topics.items())])
        out: dict[int, dict[str, LogDirDescription]] = {}
        for node in brokers:
            r = await self.cluster.request(node, ApiKey.DESCRIBE_LOG_DIRS, body, timeout=timeout)
            if getattr(r, "error_code", 0):
                raise for_code(r.error_code, f"describe_log_dirs(broker {node})")
            dirs = {}
            for result in r.results:
                total = getattr(result, "total_bytes", -1)
                usable = getattr(result, "usable_bytes", -1)
                dirs[result.log_dir] = LogDirDescription(
                    result.log_dir, for_code(result.error_code) if result.error_code else None,
                    {TopicPartition(t.name, p.partition_index): p.partition_size
                     for t in result.topics for p in t.partitions},
                    None if total < 0 else total, None if usable < 0 else usable)
            out[node] = dirs
        return out


class _CoreShim:
    """What :func:`klog.client.group.find_coordinator` needs from a consumer core."""

    def __init__(self, admin: AsyncAdminClient) -> None:
        self.cluster = admin.cluster
        self.retry_backoff = admin.cluster._retry


class AdminClient(BlockingClient):
    """The blocking admin client (``klog.AdminClient``): each operation is :class:`AsyncAdminClient`'s, run on a
    private event-loop thread while the caller waits."""

    _kind = "admin client"

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        self._aio = AsyncAdminClient(bootstrap_servers, **config)
        self._start_thread("klog-admin", self._aio.start())

    create_topics = blocking(AsyncAdminClient.create_topics)
    delete_topics = blocking(AsyncAdminClient.delete_topics)
    list_topics = blocking(AsyncAdminClient.list_topics)
    describe_topics = blocking(AsyncAdminClient.describe_topics)
    create_partitions = blocking(AsyncAdminClient.create_partitions)
    describe_configs = blocking(AsyncAdminClient.describe_configs)
    alter_configs = blocking(AsyncAdminClient.alter_configs)
    list_groups = blocking(AsyncAdminClient.list_groups)
    describe_groups = blocking(AsyncAdminClient.describe_groups)
    delete_groups = blocking(AsyncAdminClient.delete_groups)
    list_group_offsets = blocking(AsyncAdminClient.list_group_offsets)
    alter_group_offsets = blocking(AsyncAdminClient.alter_group_offsets)
    delete_group_offsets = blocking(AsyncAdminClient.delete_group_offsets)
    list_offsets = blocking(AsyncAdminClient.list_offsets)
    delete_records = blocking(AsyncAdminClient.delete_records)
    describe_cluster = blocking(AsyncAdminClient.describe_cluster)
    describe_metadata_quorum = blocking(AsyncAdminClient.describe_metadata_quorum)
    describe_consumer_groups = blocking(AsyncAdminClient.describe_consumer_groups)
    describe_share_groups = blocking(AsyncAdminClient.describe_share_groups)
    describe_streams_groups = blocking(AsyncAdminClient.describe_streams_groups)
    list_share_group_offsets = blocking(AsyncAdminClient.list_share_group_offsets)
    describe_log_dirs = blocking(AsyncAdminClient.describe_log_dirs)
    create_acls = blocking(AsyncAdminClient.create_acls)
    describe_acls = blocking(AsyncAdminClient.describe_acls)
    delete_acls = blocking(AsyncAdminClient.delete_acls)
    describe_client_quotas = blocking(AsyncAdminClient.describe_client_quotas)
    alter_client_quotas = blocking(AsyncAdminClient.alter_client_quotas)
    describe_user_scram_credentials = blocking(AsyncAdminClient.describe_user_scram_credentials)
    alter_user_scram_credentials = blocking(AsyncAdminClient.alter_user_scram_credentials)

    def close(self) -> None:
        """Close connections and the loop thread. Idempotent."""
        if not self._closed:
            self._close_with(self._aio.close())
