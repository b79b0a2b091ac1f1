"""The one write path of a node's metadata: :class:`MetadataWriter` decides every write on the committed image and
commits it through the node's :class:`QuorumWriter`, one decision at a time (a quorum member's lock,
``ControllerNode.decisions``), and :class:`RaftAppends` is the only code that appends to a quorum member's Raft log
(``RaftDriver.propose``; tests/test_controller_write_path.py scans ``klog/`` for any other caller).

Below :mod:`klog.controller.node` (which owns one of each) and :mod:`klog.controller.apis` (whose ControllerApis
decide through one); :class:`RaftQuorumWriter` is typed against :class:`RaftMember`, what it needs of a node.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from klog.controller.applier import noop_batch
from klog.controller.raft import RaftDriver, RaftError
from klog.controller.result import ControllerResult
from klog.controller.single_voter import MAX_RECORDS_PER_BATCH, atomic_batches
from klog.controller.topics import TopicError
from klog.metadata.delta import replay
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, encode_batch
from klog.protocol.errors import ErrorCode

#: how often a decision whose caller stopped waiting checks that this node still decides while its records commit
SETTLE_CHECK_S = 0.1

__all__ = ["HOLD_TRANSACTION_ENV", "Decision", "MetadataWriter", "QuorumWriter", "RaftAppends", "RaftMember", "RaftQuorumWriter",
           "not_controller_error"]

log = logging.getLogger("klog.controller")

R = TypeVar("R")
#: TEST-ONLY fault hook: when this environment variable names a file that exists, the active controller commits the
#: first batch of a metadata transaction and then waits while the file exists before writing the rest (so a test can
#: SIGKILL it with the transaction half written; tests/test_metadata_transactions_cluster.py). Never set in production.
HOLD_TRANSACTION_ENV = "KLOG_TEST_HOLD_METADATA_TRANSACTION_FILE"
NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER


class RaftAppends:
    """A quorum member's appends to its Raft log: the only caller of :meth:`RaftDriver.propose
    <klog.controller.raft.RaftDriver.propose>` in klog. Four ways in, each saying why it is one:

    - :meth:`commit`: the records of a decision. Only :meth:`RaftQuorumWriter.commit` calls it, i.e. only
      :meth:`MetadataWriter.decide` holding the member's ``decisions`` lock (asserted).
    - :meth:`propose_noop`: the leader's periodic NoOpRecord (``metadata.max.idle.interval.ms``), which Kafka's
      QuorumController also writes through its one event queue: proposed only while no decision holds the lock
      (a decision's own records move the log then), without an await between that check and the proposal, so it
      never lands between a decision and its records; not waited for.
    - :meth:`propose_bootstrap`: THE bypass of the lock. A new leader's bootstrap records (the cluster id,
      metadata.version, ``format --add-scram`` credentials) are proposed from the callback that applies its own
      LeaderChange, which runs synchronously in the Raft driver's apply loop and so cannot wait for a lock; and
      they must be the first records of a new quorum, which every decision after them needs (the brokers'
      lifecycle decides only once they are applied).
    - :meth:`propose_abort`: the same bypass, from the same callback, for a new leader's AbortTransactionRecord
      closing a metadata transaction (KIP-868) its predecessor left open; the member decides nothing until it is
      applied (``ControllerNode.may_decide``), so nothing lands inside the transaction it aborts.
    """

    def __init__(self, driver: RaftDriver, decisions: asyncio.Lock, node_id: int,
                 max_records_per_batch: int = MAX_RECORDS_PER_BATCH) -> None:
        self.driver = driver
        self.decisions = decisions
        self.node_id = node_id
        #: klog.controller.max.records.per.batch: a decision with more records is a KIP-868 metadata transaction
        self.max_records_per_batch = max_records_per_batch
        #: proposals nobody waits for (bootstrap, no-op): a no-op is proposed only when none is pending
        self.unawaited: set[asyncio.Future[int]] = set()

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Propose ``records`` as one change (a metadata transaction when they need several batches) and return
        once they are committed and applied to the member's image. Raises NotLeaderError on a member that is not
        the active controller, ProposalLostError when a new leader overwrote them (then nothing of them applies:
        an unfinished transaction is never applied)."""
        assert self.decisions.locked(), "a decision's records are committed by MetadataWriter.decide, under its lock"
        batches = atomic_batches(records, self.max_records_per_batch)
        hold = os.environ.get(HOLD_TRANSACTION_ENV) if len(batches) > 1 else None
        if hold and os.path.exists(hold):   # TEST-ONLY (HOLD_TRANSACTION_ENV): the first batch, then a pause
            await self.driver.propose(encode_batch(list(batches[0])))
            await self._hold_mid_transaction(len(batches[0]), hold)
            batches = batches[1:]
        futures = [self.driver.propose(encode_batch(list(batch))) for batch in batches]
        try:
            for fut in futures:
                await fut
        finally:
            for fut in futures:
                if not fut.done():
                    fut.cancel()

    async def _hold_mid_transaction(self, first_records: int, hold_file: str) -> None:
        """TEST-ONLY fault hook (:data:`HOLD_TRANSACTION_ENV`): the first batch of a metadata transaction is
        committed; wait while ``hold_file`` exists before the rest is proposed, so a test can SIGKILL the active
        controller with the transaction half written."""
        log.warning("controller %d: TEST HOOK %s: holding a metadata transaction after its first batch (%d records) "
                    "while %s exists", self.node_id, HOLD_TRANSACTION_ENV, first_records, hold_file)
        while os.path.exists(hold_file):
            await asyncio.sleep(0.05)

    def propose_noop(self) -> bool:
        """Propose a NoOpRecord unless a decision holds the lock or an earlier unawaited proposal is pending;
        whether it did."""
        if self.decisions.locked() or self.unawaited:
            return False
        self._unawaited(noop_batch(), "no-op record")
        return True

    def propose_bootstrap(self, batch: bytes) -> asyncio.Future[int]:
        """A new leader's bootstrap records (see the class: why they bypass the decisions lock)."""
        return self._unawaited(batch, "bootstrap records")

    def propose_abort(self, batch: bytes) -> asyncio.Future[int]:
        """A new leader's AbortTransactionRecord for a metadata transaction the previous leader left unfinished:
        proposed, like the bootstrap records, from the callback that applies its own LeaderChange, before any
        decision (the member decides nothing until it is applied: :attr:`ControllerNode.may_decide
        <klog.controller.node.ControllerNode.may_decide>`)."""
        return self._unawaited(batch, "abort of an unfinished metadata transaction")

    def _unawaited(self, batch: bytes, what: str) -> asyncio.Future[int]:
        fut = self.driver.propose(batch)
        self.unawaited.add(fut)

        def done(f: asyncio.Future[int]) -> None:
            self.unawaited.discard(f)
            if not f.cancelled() and f.exception() is not None:
                log.info("controller %d: %s not committed: %s", self.node_id, what, f.exception())

        fut.add_done_callback(done)
        return fut


class RaftMember(Protocol):
    """What a :class:`RaftQuorumWriter` needs of a quorum member (:class:`klog.controller.node.ControllerNode`)."""

    driver: RaftDriver
    appends: RaftAppends

    @property
    def image(self) -> MetadataImage:
        """The member's applied image."""

    @property
    def may_decide(self) -> bool:
        """Whether this member leads and has activated in its term: its own LeaderChange applied and no metadata
        transaction of a previous leader left open in its image (the abort it writes then is applied first)."""


class QuorumWriter(Protocol):
    """The controller's view of the metadata quorum: the committed image, and the commit of records."""

    @property
    def image(self) -> MetadataImage:
        """The committed image decisions are made on."""

    def not_controller(self) -> TopicError | None:
        """None while this node is the active controller, else the NOT_CONTROLLER error its answers carry."""

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Commit ``records`` atomically and return once the image holds them (a broker on this node: once it
        published them); raises TopicError when they were not committed."""


def not_controller_error(node_id: int, leader_id: int | None) -> TopicError:
    return TopicError(NOT_CONTROLLER, f"Node {node_id} is not the active controller (the active controller is node "
                                      f"{leader_id if leader_id else 'not known yet'})")


class RaftQuorumWriter:
    """A quorum member's writer: records are proposed through Raft (active controller only). ``active``: whether
    this member may decide (None: while it leads the quorum; the brokers' lifecycle also asks that it applied its
    own LeaderChange, see :class:`~klog.controller.broker_service.BrokerLifecycleService`)."""

    def __init__(self, node: RaftMember, node_id: int, *, active: Callable[[], bool] | None = None) -> None:
        self.node = node
        self.node_id = node_id
        self._active = active

    @property
    def image(self) -> MetadataImage:
        return self.node.image

    def not_controller(self) -> TopicError | None:
        driver = self.node.driver
        active = driver.is_leader if self._active is None else self._active()
        return None if active and self.node.may_decide else not_controller_error(self.node_id, driver.leader_id)

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        # A record that does not replay on the image must never reach the log: every member would fail on it.
        # The dry run raises MetadataReplayError (a controller bug) before anything is proposed.
        replay(self.image, list(records))
        try:
            await self.node.appends.commit(records)
        except RaftError as exc:   # leadership moved: the records were not (or not wholly) committed
            log.info("a metadata change was not committed: %s", exc)
            raise not_controller_error(self.node_id, self.node.driver.leader_id) from None


@dataclass(frozen=True)
class Decision(Generic[R]):
    """What :meth:`MetadataWriter.decide` made of an operation: its ``response`` (valid when ``refusal`` is None:
    its records, if any, are committed), the ``refusal`` (a TopicError: nothing was committed), and whether it is
    refused because this node is not the active controller (``not_active``) rather than because its records
    could not be committed."""

    response: R
    refusal: TopicError | None
    not_active: bool


class MetadataWriter:
    """The one place where metadata records are decided against the committed image and committed (Kafka's
    QuorumController event queue): every write of the controller goes through :meth:`decide`, those of
    :class:`ControllerApis` and those of the brokers' lifecycle on a quorum
    (:class:`~klog.controller.broker_service.BrokerLifecycleService`: registrations, heartbeats and fencing,
    controlled shutdown, AlterPartition, AllocateProducerIds, leader balancing) and the member's own
    (:meth:`ControllerNode.register_controller <klog.controller.node.ControllerNode.register_controller>`: KIP-853).

    ``decisions``: the lock that serializes them, shared by every writer of a node (a quorum member's
    :attr:`ControllerNode.decisions <klog.controller.node.ControllerNode.decisions>`), so each decision is made on
    the image with the previous one's records, whichever API asked for it."""

    def __init__(self, quorum: QuorumWriter, decisions: asyncio.Lock | None = None) -> None:
        self.quorum = quorum
        self.decisions = decisions if decisions is not None else asyncio.Lock()

    async def write(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """``operation``'s response once its records are committed; raises the refusal (a TopicError) otherwise."""
        decision = await self.decide(operation)
        if decision.refusal is not None:
            raise decision.refusal
        return decision.response

    async def decide(self, operation: Callable[[MetadataImage], ControllerResult[R]], *,
                     timeout_s: float | None = None,
                     on_uncommitted: Callable[[str], None] | None = None) -> Decision[R]:
        """Decide ``operation`` on the committed image and commit its records. A node that is not the active
        controller (the quorum's ``not_controller()``) commits nothing and answers NOT_CONTROLLER (the operation is
        still decided, so a per-item answer says it on every item). ``timeout_s``: how long the commit may take
        (None: as long as the quorum takes), past it the decision is refused with REQUEST_TIMED_OUT;
        ``on_uncommitted(why)``: called when records were decided but not committed (refused, timed out, or the
        wait cancelled), before the refusal is answered (or the cancellation goes on)."""
        async with self.decisions:
            result = operation(self.quorum.image)
            refusal = self.quorum.not_controller()
            if refusal is not None:   # as a Kafka controller that is not active: validate_only and invalid items too
                if result.records and on_uncommitted is not None:
                    on_uncommitted(f"records not committed: {refusal.message}")
                return Decision(result.response, refusal, True)
            if not result.records:
                return Decision(result.response, None, False)
            # The commit runs on its own task: a caller that stops waiting (its client gone, its timeout over)
            # leaves the records proposed, and the lock is held until they are committed or lost (or this node
            # stops deciding). Released earlier, the next decision would be made on an image without them: a
            # second RemoveTopicRecord of the same topic, which every member then fails to replay, for ever.
            commit = asyncio.ensure_future(self.quorum.commit(result.records))
            cancelled = False
            try:
                await asyncio.wait_for(asyncio.shield(commit), timeout_s)
            except asyncio.CancelledError:
                cancelled = True
            except Exception:  # noqa: BLE001 - timed out, or the commit's own error: read from the task below
                pass
            if not commit.done():
                cancelled |= await self._until_settled(commit)
            error: BaseException | None
            if not commit.done():   # timed out, then this node stopped deciding: their outcome is the log's
                within = f" within {timeout_s:g} s" if timeout_s is not None else ""
                error = TopicError(ErrorCode.REQUEST_TIMED_OUT, f"The metadata change was not committed{within}")
            elif commit.cancelled():
                error = TopicError(ErrorCode.REQUEST_TIMED_OUT, "The metadata change's commit was cancelled")
            else:
                error = commit.exception()
            if error is None:
                if cancelled:
                    raise asyncio.CancelledError()   # committed; nobody waits for the answer
                return Decision(result.response, None, False)
            if on_uncommitted is not None:
                on_uncommitted("the wait for the records' commit was cancelled" if cancelled
                               else f"records not committed: {getattr(error, 'message', repr(error))}")
            if not isinstance(error, TopicError):
                raise error   # a controller bug (a record that does not replay): nothing was proposed
            if cancelled:
                raise asyncio.CancelledError()
            return Decision(result.response, error, False)

    async def _until_settled(self, commit: asyncio.Future[None]) -> bool:
        """Wait, holding the decision lock, until ``commit`` ends or this node no longer decides (a node that leads
        again first applies every entry of earlier terms, these among them); whether this task was cancelled
        meanwhile (it is let go only after: the lock must not be released with the records in flight)."""
        cancelled = False
        while not commit.done() and self.quorum.not_controller() is None:
            try:
                await asyncio.wait({commit}, timeout=SETTLE_CHECK_S)
            except asyncio.CancelledError:
                cancelled = True
        if not commit.done():   # left to end on its own: its outcome is the log's
            commit.add_done_callback(lambda f: f.cancelled() or f.exception())
        return cancelled
