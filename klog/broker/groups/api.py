"""The contract between the broker and the consumer-group coordinator.

The broker owns the network, framing, the partition logs and the config; the coordinator owns group state
and the ``__consumer_offsets`` topic's contents. The broker:

1. constructs ``GroupCoordinator(context)`` once, with a :class:`BrokerContext` (below);
2. calls ``await coordinator.start()`` after the logs are open and before the listener accepts clients
   (load ``__consumer_offsets`` here);
3. routes every request whose api key is in ``coordinator.SUPPORTED_APIS`` to
   ``await coordinator.handle(header, request, client_host=...)`` and encodes the returned Struct as the
   response (same api key and version as the request);
4. calls ``await coordinator.stop()`` at shutdown, before the logs are closed.

Versions: the broker advertises, per api key, the intersection of ``SUPPORTED_APIS[key]`` with what
``klog.protocol`` can encode. List only versions the coordinator implements and tests; keys not listed are
not advertised (FindCoordinator included: without it clients simply do not use groups).

Threading: everything runs on the broker's event loop (``context.loop``); ``handle`` may await for a long
time (JoinGroup waiting for a rebalance, for instance): the broker processes one request at a time per
connection, as Kafka does, so a long wait only holds that client's connection. Never block the loop on I/O
for long: appends to ``__consumer_offsets`` are native and quick; ``flush`` only when the config asks for it.

Errors: return the response with Kafka error codes; an exception escaping ``handle`` closes that one client
connection (logged), it never stops the broker.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from klog.broker.coordinator.runtime import AppendRefused

if TYPE_CHECKING:  # pragma: no cover - typing only
    from klog.broker.config import BrokerConfig

#: The group API keys the broker routes to the coordinator.
GROUP_API_KEYS: frozenset[int] = frozenset({
    8,   # OffsetCommit
    9,   # OffsetFetch
    10,  # FindCoordinator
    11,  # JoinGroup
    12,  # Heartbeat
    13,  # LeaveGroup
    14,  # SyncGroup
    15,  # DescribeGroups
    16,  # ListGroups
    42,  # DeleteGroups
    47,  # OffsetDelete
    68,  # ConsumerGroupHeartbeat
    69,  # ConsumerGroupDescribe
    76,  # ShareGroupHeartbeat
    77,  # ShareGroupDescribe
    88,  # StreamsGroupHeartbeat
    89,  # StreamsGroupDescribe
    90,  # DescribeShareGroupOffsets
    91,  # AlterShareGroupOffsets
    92,  # DeleteShareGroupOffsets
})

#: Name of the internal offsets topic (Kafka's).
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


class BrokerContext(Protocol):
    """What the broker hands the coordinator. Implemented by ``klog.broker.context.BrokerState``."""

    #: This broker's node id (``node.id`` / ``broker.id``); FindCoordinator answers with it.
    node_id: int
    @property
    def host(self) -> str:
        """The advertised host of the listener clients use (FindCoordinator's host)."""
        ...

    @property
    def port(self) -> int:
        """The advertised port of the listener clients use (FindCoordinator's port)."""
        ...

    #: The broker config. ``config["group.initial.rebalance.delay.ms"]`` etc. return typed values
    #: (int/bool/str/list) for every Kafka ``group.*`` / ``offsets.*`` key klog knows; unknown keys were
    #: rejected at startup, so a KeyError here is a programming error.
    config: BrokerConfig
    @property
    def log_manager(self) -> Any:
        """The native ``klog._native.LogManager`` holding every partition log (read-only use: prefer the
        helpers below for creating topics and appending so high watermarks and waiting fetches stay right)."""
        ...

    #: The broker's event loop.
    loop: asyncio.AbstractEventLoop

    def ensure_internal_topic(self, topic: str, num_partitions: int, configs: dict[str, str]) -> None:
        """Check that ``topic`` exists (a write of the coordinator needs it); raises ``OSError`` while it does not
        (it is created by :meth:`ensure_internal_topic_async`)."""
        ...

    async def ensure_internal_topic_async(self, topic: str, num_partitions: int, configs: dict[str, str]) -> None:
        """Create ``topic`` (flagged internal in Metadata) if missing, through the controller: this node's own (a
        single node, or the active controller of a quorum) or the active controller of the quorum. ``configs``
        are Kafka topic configs, e.g. ``{"cleanup.policy": "compact", "segment.bytes": "104857600"}``.
        Idempotent; an existing topic keeps its partition count. Raises ``OSError`` when it was not created (yet),
        e.g. its log dir is offline."""
        ...

    def led_partitions(self, topic: str) -> set[int] | None:
        """The partitions of ``topic`` this broker leads and holds the log of, or None on a single node (it leads
        them all). The coordinator reads it at ``start`` and whenever the broker calls its
        ``on_metadata_published`` (after each metadata image), loading the groups of the ``__consumer_offsets``
        partitions it gained and forgetting those of the partitions it lost."""
        ...

    def partition_leader_endpoint(self, topic: str, partition: int, listener: str) -> tuple[int, str, int] | None:
        """(node id, host, port) on ``listener`` of the live leader of a partition, or None (FindCoordinator on
        a quorum answers the leader of the group's ``__consumer_offsets`` partition)."""
        ...

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions of ``topic``, or None when it does not exist (for UNKNOWN_TOPIC_OR_PARTITION
        checks in OffsetCommit and friends)."""
        ...

    def partition_log(self, topic: str, partition: int) -> Any:
        """The native ``PartitionLog`` of a partition (``read``, ``log_start_offset``, ``high_watermark``,
        ``log_end_offset``), or None when it does not exist."""
        ...

    def append(self, topic: str, partition: int, records: bytes) -> Any:
        """Append record batches (v2, e.g. built by ``klog.records.encode_batch``; base offsets are
        assigned here) to a partition as an acks=all write; returns the native ``AppendResult``
        (``base_offset``, ``last_offset``, ...). Raises ``KeyError`` for an unknown partition,
        :class:`AppendRefused` when this broker does not lead a replicated partition or its ISR is under
        ``min.insync.replicas`` (nothing is appended), and the storage errors (``CorruptRecordError``/``OSError``)
        unchanged. On a replicated partition the records are durable only once :meth:`wait_replicated` says so."""
        ...

    def wait_replicated(self, topic: str, partition: int, last_offset: int,
                        timeout_ms: int) -> asyncio.Future[int] | None:
        """After :meth:`append`: a future of the write's outcome, NONE once the whole ISR has ``last_offset``
        (the high watermark passed it), REQUEST_TIMED_OUT after ``timeout_ms``, NOT_LEADER_OR_FOLLOWER when
        leadership moves first. None when there is nothing to wait for (an unreplicated partition)."""
        ...


class GroupCoordinatorAPI(Protocol):
    """The coordinator's side. ``klog.broker.groups.GroupCoordinator`` implements this."""

    #: api key -> (min version, max version) the coordinator implements and has tested, as this instance's
    #: config enables them (read after construction).
    SUPPORTED_APIS: dict[int, tuple[int, int]]

    def __init__(self, context: BrokerContext) -> None: ...

    async def start(self) -> None: ...

    async def handle(self, header: Any, request: Any, *, client_host: str = "", listener: str | None = None,
                     verification: object | None = None) -> Any:
        """Answer one request. ``header`` is ``klog.protocol``'s RequestHeader (``api_key``, ``api_version``,
        ``correlation_id``, ``client_id``); ``request`` the decoded request Struct; ``client_host`` the
        client's IP address (DescribeGroups' ``client_host``); ``listener`` the listener the request came
        through (FindCoordinator answers addresses on it); ``verification`` a TxnOffsetCommit's verification
        guard on the group's ``__consumer_offsets`` partition (the broker context's ``append`` refuses its write
        once a marker of the producer ended it). Returns the response Struct."""
        ...

    async def ensure_log(self) -> None:
        """Before a first write: a single node creates ``__consumer_offsets`` (a quorum member has it made
        through FindCoordinator)."""
        ...

    async def stop(self) -> None: ...
