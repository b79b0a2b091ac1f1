"""The active controller's side of the broker lifecycle, IO: BrokerRegistration (62) and BrokerHeartbeat (63)
served on the controller listener of a quorum member, decided by :class:`klog.controller.brokers.ClusterControlManager`
against the committed image and committed through Raft before they are answered (as Kafka's QuorumController).

- The controller listener is shared with the Raft peers: its Kafka connections are served by
  :class:`klog.controller.describe_quorum.ControllerListener`, which hands these two APIs to :meth:`handle`.
- Active means: this member leads the quorum and has applied its own LeaderChange (so the image holds every
  entry of earlier terms). Then :meth:`ClusterControlManager.activate` runs once per term; a member that is not
  active answers NOT_CONTROLLER, which makes the broker try the next controller.
- Decisions are pure manager functions of the committed image returning a ControllerResult, decided and committed
  by the node's one write path (:class:`klog.controller.writer.MetadataWriter`, its lock ``ControllerNode.decisions``
  shared with the node's ControllerApis): one at a time, each committed before the next is decided, so each sees
  the image with the previous one's records, whichever API asked for it. A commit is bounded by the session
  timeout; records not committed make this member resign (its sessions are rebuilt when it is next active). A
  periodic tick fences the brokers whose session expired (``broker.session.timeout.ms``).
- A broker epoch is the offset the registration record is expected at: one past the committed image's highest
  offset, never below one past the last offset handed out by this controller (records proposed by others may
  land first, so the record's actual offset can be higher; an epoch is unique and increasing all the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from klog.controller.writer import MetadataWriter, RaftQuorumWriter
from klog.controller.brokers import BROKER_SESSION_TIMEOUT_MS, ClusterControlManager
from klog.controller.elections import balance_partition_leaders
from klog.controller.node import ControllerNode
from klog.controller.partition_change import MIN_INSYNC_REPLICAS
from klog.controller.partitions_isr import alter_partition
from klog.controller.producer_ids import answer_allocate_producer_ids
from klog.controller.result import ControllerResult
from klog.metadata.image import MetadataImage
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AllocateProducerIdsRequest,
        AllocateProducerIdsResponse,
        AlterPartitionRequest,
        AssignReplicasToDirsRequest,
        AssignReplicasToDirsResponse,
        AlterPartitionResponse,
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
        UnregisterBrokerRequest,
        UnregisterBrokerResponse,
    )
    from klog.controller.describe_quorum import LifecycleRequest, LifecycleResponse

__all__ = ["BrokerLifecycleService", "SESSION_CHECK_INTERVAL_MS"]

log = logging.getLogger("klog.controller.brokers")

R = TypeVar("R")

#: How often the active controller looks for expired broker sessions.
SESSION_CHECK_INTERVAL_MS = 100


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class BrokerLifecycleService:
    """Attach to a :class:`ControllerNode` before ``start()``; ``start()`` / ``stop()`` with the node."""

    def __init__(self, node: ControllerNode, *, session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS,
                 unclean_leader_election: bool = False, min_insync_replicas: int = MIN_INSYNC_REPLICAS,
                 clock: Callable[[], int] = _monotonic_ms,
                 leader_imbalance_check_interval_ms: int | None = None) -> None:
        """``leader_imbalance_check_interval_ms``: run preferred elections that often (auto.leader.rebalance.enable;
        None: never)."""
        self.node = node
        self.leader_imbalance_check_interval_ms = leader_imbalance_check_interval_ms
        self._balancer: asyncio.Task[None] | None = None
        self.clock = clock
        self.manager = ClusterControlManager(node.cluster_id or "", session_timeout_ms=session_timeout_ms,
                                             unclean_leader_election=unclean_leader_election,
                                             min_insync_replicas=min_insync_replicas)
        #: the Raft term this controller activated in (None: not active)
        self.active_term: int | None = None
        self._next_offset = 0
        #: the node's write path (its lock shared with the node's ControllerApis); decides while :attr:`active`
        self.writer = MetadataWriter(RaftQuorumWriter(node, node.quorum.node_id, active=lambda: self.active),
                                     node.decisions)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._handlers: dict[int, Callable[[Any], Awaitable[LifecycleResponse]]] = {
            ApiKey.BROKER_REGISTRATION: self._register, ApiKey.BROKER_HEARTBEAT: self._heartbeat,
            ApiKey.ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids,
            ApiKey.ALTER_PARTITION: self._alter_partition,
            ApiKey.ASSIGN_REPLICAS_TO_DIRS: self._assign_replicas_to_dirs,
            ApiKey.UNREGISTER_BROKER: self._unregister}
        node.driver.add_committed_listener(self._on_committed)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._expire_sessions(), name=f"controller-{self.node.quorum.node_id}-sessions")
        if self.leader_imbalance_check_interval_ms is not None:
            self._balancer = loop.create_task(self._balance_leaders(),
                                              name=f"controller-{self.node.quorum.node_id}-leader-balance")

    async def stop(self) -> None:
        self._stopped = True   # no decision after this: requests until the listener closes get NOT_CONTROLLER
        self.active_term = None
        for task in (self._task, self._balancer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def handle(self, api_key: int, request: LifecycleRequest) -> Awaitable[LifecycleResponse]:
        """A BrokerRegistration, BrokerHeartbeat or AllocateProducerIds request: its answer once its records are
        committed."""
        return self._handlers[api_key](request)

    # ---- activation -------------------------------------------------------------------------------------

    def _on_committed(self, index: int, term: int, kind: str, data: bytes, base: int, nxt: int) -> None:
        # the driver's soft state, not the raft node's getters: those take the node's lock, held through a ready
        # cycle's fsync, with the GIL held (the event loop would stop for the fsync)
        driver = self.node.driver
        if kind == "leader_change" and driver.node is not None and driver.role == "leader" and term == driver.term:
            self.active_term = term
            self.manager.activate(self.node.image, self.clock())
            log.info("controller %d: active in term %d; %d registered broker(s), each heard from now",
                     self.node.quorum.node_id, term, len(self.node.image.brokers))

    @property
    def active(self) -> bool:
        driver = self.node.driver   # (its soft state: see _on_committed)
        return (not self._stopped and self.active_term is not None and driver.node is not None
                and driver.role == "leader" and driver.term == self.active_term and self.node.applier.bootstrapped)

    def _resign(self, why: str) -> None:
        """A decision changed the sessions and its records were not committed: the sessions no longer match the
        image. Called once the records' fate is known (MetadataWriter.decide holds its lock until then)."""
        driver = self.node.driver
        if not self._stopped and self.active_term is not None and driver.node is not None and driver.role == "leader" \
                and driver.term == self.active_term:
            # still the leader of this term: no LeaderChange will activate it again before a new term (a quorum
            # of one voter never has one), and until then every broker would be answered NOT_CONTROLLER. Rebuilt
            # from the image now, as at activation (each broker heard from now).
            self.manager.activate(self.node.image, self.clock())
            log.warning("controller %d: broker sessions rebuilt from the metadata image (%s)",
                        self.node.quorum.node_id, why)
            return
        log.warning("controller %d: broker sessions dropped (%s); rebuilt when it is next active",
                    self.node.quorum.node_id, why)
        self.active_term = None

    async def _decide(self, operation: Callable[[MetadataImage, int], ControllerResult[R]]) -> R | None:
        """Decide ``operation(image, record_offset)`` (a pure manager function returning a ControllerResult) through
        the node's write path (:class:`klog.controller.writer.MetadataWriter`, serialized with the node's
        ControllerApis) and return its response once its records are committed; None when this member is not (or
        stopped being) the active controller, or its records were not committed (then it resigns: the decision
        changed the sessions, which are rebuilt when it is next active)."""
        def decide(image: MetadataImage) -> ControllerResult[R | None]:
            if not self.active:   # refused by the write path: the sessions are left as they are
                return ControllerResult((), None)
            self.manager.cluster_id = self.node.cluster_id or ""
            offset = max(image.highest_offset + 1, self._next_offset)
            result = operation(image, offset)
            if result.records:
                self._next_offset = offset + len(result.records)
            return ControllerResult(result.records, result.response)

        # bounded: past a session timeout the broker has retried elsewhere
        decision = await self.writer.decide(decide, timeout_s=self.manager.session_timeout_ms / 1000,
                                            on_uncommitted=self._resign)
        return None if decision.refusal is not None else decision.response

    # ---- requests ---------------------------------------------------------------------------------------

    async def _register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        # a refusal's reason is logged by the manager (Kafka's response has no error message)
        response = await self._decide(lambda image, offset: self.manager.register_broker(
            request, image, self.clock(), record_offset=offset))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "broker_epoch": -1}
        return response

    async def _heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        if self.active:   # heard from now, whatever decisions this one waits behind (the session expiry's too)
            self.manager.note_contact(request.broker_id, request.broker_epoch, self.clock())
        response = await self._decide(lambda image, offset: self.manager.process_heartbeat(
            request, image, self.clock(), record_offset=offset))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "is_caught_up": False,
                    "is_fenced": True, "should_shut_down": False}
        return response

    async def _alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """AlterPartition from a partition leader: its ISR change, committed before it is answered."""
        # the listener hands over the decoded body only: v3 carries NewIsrWithEpochs, v2 NewIsr (never both empty
        # in a valid request)
        version = 3 if any(getattr(p, "new_isr_with_epochs", None) for t in request.topics for p in t.partitions) \
            else 2
        min_isr = self.manager.min_insync_replicas
        response = await self._decide(lambda image, _offset: alter_partition(request, version, image,
                                                                              min_insync_replicas=min_isr))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
        return response

    async def _assign_replicas_to_dirs(self, request: AssignReplicasToDirsRequest) -> AssignReplicasToDirsResponse:
        """AssignReplicasToDirs (73): which log dir holds each listed replica of the broker (JBOD)."""
        response = await self._decide(lambda image, _offset: self.manager.assign_replicas_to_dirs(request, image))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "directories": []}
        return response

    async def _unregister(self, request: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
        """UnregisterBroker (64, ``kafka-cluster unregister``): decided with the sessions, which it changes."""
        broker_id = int(request.broker_id)
        response = await self._decide(lambda image, _offset: self.manager.unregister_broker(broker_id, image))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None}
        return response

    async def _allocate_producer_ids(self, request: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
        """AllocateProducerIds (67): decided with the other broker decisions, so no two blocks overlap."""
        response = await self._decide(lambda image, _offset: answer_allocate_producer_ids(request, image))
        if response is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "producer_id_start": -1,
                    "producer_id_len": 0}
        return response

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL_MS / 1000)
            if not self.active:
                continue
            # one expired session per decision, as Kafka's controller, until none is left
            while await self._decide(lambda image, _offset: self.manager.fence_stale_broker(image,
                                                                                             self.clock())) is not None:
                pass

    async def _balance_leaders(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, move leaderships back to
        preferred replicas that can lead (at most MAX_ELECTIONS_PER_IMBALANCE per commit, again at once if more)."""
        assert self.leader_imbalance_check_interval_ms is not None
        while True:
            await asyncio.sleep(self.leader_imbalance_check_interval_ms / 1000)
            while self.active:
                elected = 0

                def balance(image: MetadataImage, _offset: int) -> ControllerResult[bool]:
                    nonlocal elected
                    result = balance_partition_leaders(image)
                    elected = len(result.records)
                    return result

                more = await self._decide(balance)
                if elected:
                    log.info("controller %d: moved the leadership of %d partition(s) back to their preferred replica "
                             "(auto.leader.rebalance.enable)", self.node.quorum.node_id, elected)
                if not more:
                    break
