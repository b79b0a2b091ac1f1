"""Asyncio driver of one controller-quorum member (raft-rs's RawNode in the native core).

IO lives here; decisions are in ``quorum`` (tick mapping, proposal matching) and the native
node. The run loop owns the node: it ticks it, steps received messages, submits queued
proposals, then runs the ready cycle: the messages that may go before this node persists (a
leader's appends, so followers write them while it does) are taken and sent on the loop, the
rest runs on a dedicated thread (the native call persists with the GIL released); then it sends
the messages that needed persistence and hands committed entries to listeners.
Other tasks never call the node directly (they queue), so the loop never waits on an fsync.

Transport (klog-private; Kafka's KRaft wire is not a goal): each member listens on its
``controller.quorum.voters`` endpoint. A sender opens one TCP connection per peer, writes
``RAFT_PREAMBLE`` + its node id (int32 BE) + its cluster id (int16 BE length, UTF-8; length 0 while
it has none: a new quorum learns it from its first committed records), then frames ``[length int32 BE][raft-rs Message
protobuf]``. Connections are one-way (the receiver never writes). Each peer has a bounded send
queue (full: the message is dropped, raft retransmits) and reconnects with doubling backoff.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from klog._native import NotLeaderError, RaftError, RaftNode
from klog.client.stream_login import LoggedInStream, open_session
from klog.controller.listener_access import peer_host
from klog.controller.listener_port import ListenerPort
from klog.controller.meta_properties import stored_directory_id
from klog.controller.metadata_feed import OBSERVER_PREAMBLE
from klog.controller.quorum import (
    OBSERVER_SESSION_MS,
    RAFT_PREAMBLE,
    CommittedListener,
    ProposalTracker,
    QuorumConfig,
    TickClock,
    Voter,
    replaced_voter,
)
from klog.protocol import ProtocolError
from klog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_LEN = struct.Struct(">i")
_HELLO = struct.Struct(f">{len(RAFT_PREAMBLE)}si")
_CLUSTER_ID_LEN = struct.Struct(">h")
#: A connection that has not sent its whole hello within this many seconds is closed.
HELLO_TIMEOUT_S = 10.0
#: how long a stopping sender is given to end after each cancellation before it is cancelled again
STOP_RECANCEL_S = 1.0
#: Observers remembered at most (beyond it the longest silent are forgotten).
MAX_OBSERVERS_TRACKED = 1000
#: Longest cluster id accepted in a peer's hello (Kafka's are 22 characters).
MAX_CLUSTER_ID_BYTES = 255
#: A controller joining a running quorum (KIP-853) asks its bootstrap servers for the voters this long, every
#: JOIN_DISCOVERY_RETRY_S, before it stops naming controller.quorum.bootstrap.servers.
JOIN_DISCOVERY_TIMEOUT_S = 120.0
JOIN_DISCOVERY_RETRY_S = 1.0

ZERO_UUID = uuid.UUID(int=0)

__all__ = ["ListenerPort", "NotLeaderError", "ObserverState", "ProposalLostError", "RaftDriver", "RaftError",
           "ReplicaProgress"]



@dataclasses.dataclass(frozen=True)
class ObserverState:
    """What a member knows of one observer from its fetches."""

    applied_index: int      # the raft index it had at its last fetch
    fetched_ms: float       # wall-clock ms of that fetch
    caught_up_ms: float     # wall-clock ms it last had everything committed (-1: never)
    directory_id: uuid.UUID  # its metadata log directory's id (KIP-853 replica key; zero: not told)
    #: the Kafka end offset through ``applied_index`` (-1: not in the log; None: not read yet, done by the run loop)
    end_offset: int | None = None


@dataclasses.dataclass(frozen=True)
class ReplicaProgress:
    """A replica's raft progress as the leader knows it (the driver's soft state)."""

    node_id: int
    is_voter: bool
    matched: int            # the raft index it matched
    end_offset: int         # the Kafka end offset through it (0: nothing matched; -1: not in the log)


class ProposalLostError(RaftError):
    """A proposal was overwritten by a new leader (or its fate is unknown): propose again."""


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class PeerSender:
    """One peer's outgoing connection: a bounded queue drained by a task that reconnects with
    backoff. Messages that cannot be queued or sent are dropped and the peer reported
    unreachable, as raft-rs expects of a lossy transport."""

    def __init__(self, self_id: int, peer: Voter, cfg: QuorumConfig, on_unreachable: Callable[[int], None],
                 cluster_id: Callable[[], str | None] = lambda: None) -> None:
        self.self_id = self_id
        self.cluster_id = cluster_id
        self.peer = peer
        self.cfg = cfg
        self.on_unreachable = on_unreachable
        self.queue: collections.deque[bytes] = collections.deque()
        self.dropped = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-send-{self.peer.node_id}")

    async def stop(self) -> None:
        # Python 3.11's wait_for can swallow a cancellation that meets a completed wait (a connection attempt to a
        # peer that is stopping too): the sender then reconnected for ever and its node never exited. The flag
        # ends its loop at the next turn, and the cancellation is repeated until the task has ended.
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_RECANCEL_S)
        if not task.cancelled() and task.exception() is not None:
            log.warning("raft: the sender to node %d ended with %r", self.peer.node_id, task.exception())

    def send(self, message: bytes) -> None:
        if len(self.queue) >= self.cfg.max_send_queue_messages:
            self.dropped += 1
            return
        self.queue.append(message)
        self._wake.set()

    async def _open(self) -> LoggedInStream:
        return await open_session(self.peer.host, self.peer.port, self.cfg.client_security, HELLO_TIMEOUT_S,
                                  client_id=f"klog-raft-{self.self_id}")

    async def _run(self) -> None:
        backoff = self.cfg.reconnect_backoff_ms
        session: LoggedInStream | None = None
        while not self._stopping:
            if session is None:
                try:
                    session = await self._open()
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError):
                    self.queue.clear()
                    self.on_unreachable(self.peer.node_id)
                    await asyncio.sleep(backoff / 1000)
                    backoff = min(backoff * 2, self.cfg.reconnect_backoff_max_ms)
                    continue
            if self._stopping:
                session.writer.transport.abort()
                return
            opened = time.monotonic()
            session = await self._serve(session)
            if session is not None:   # the session was renewed on a new connection: go on there
                continue
            # a peer that keeps closing at once (refusing us) is retried with the same doubling backoff
            if (time.monotonic() - opened) * 1000 >= self.cfg.reconnect_backoff_max_ms:
                backoff = self.cfg.reconnect_backoff_ms
            else:
                await asyncio.sleep(backoff / 1000)
                backoff = min(backoff * 2, self.cfg.reconnect_backoff_max_ms)

    async def _serve(self, session: LoggedInStream) -> LoggedInStream | None:
        """Send the queue on ``session``'s connection until it is lost (None), or until its SASL session is near its
        end (KIP-368: the listener closes it then) and a new logged-in connection is open: that one, which the queue
        moves to (the messages written before go out on the old connection as it closes: none is lost)."""
        reader, writer, renew_at = session
        # The peer never writes on this connection, so a read returns only when the peer closed it (it
        # restarted, or refused us before it knew us as a voter). Without watching for that, the next
        # message (a vote, say) would be written into the dead socket and lost, costing an election timeout.
        peer_closed = asyncio.ensure_future(reader.read(1))
        renewal: asyncio.Future[LoggedInStream] | None = None
        try:
            cid = (self.cluster_id() or "").encode()
            writer.write(_HELLO.pack(RAFT_PREAMBLE, self.self_id) + _CLUSTER_ID_LEN.pack(len(cid)) + cid)
            while not self._stopping:
                now = time.monotonic()
                if renewal is None and renew_at is not None and now >= renew_at:
                    # log in on a new connection while this one keeps sending
                    renewal = asyncio.ensure_future(self._open())
                if renewal is not None and renewal.done():
                    try:
                        renewed = renewal.result()
                    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError) as e:
                        log.warning("raft: node %d could not renew its SASL session with node %d at %s:%d "
                                    "(connections.max.reauth.ms): %s; its raft connection ends", self.self_id,
                                    self.peer.node_id, self.peer.host, self.peer.port, e)
                        self.on_unreachable(self.peer.node_id)
                        return None
                    log.info("raft: node %d renewed its SASL session with node %d: raft messages move to a new "
                             "connection", self.self_id, self.peer.node_id)
                    renewal = None   # kept open: the caller goes on there
                    return renewed
                if self.queue:
                    while self.queue:
                        m = self.queue.popleft()
                        writer.write(_LEN.pack(len(m)) + m)
                    await writer.drain()
                    continue
                self._wake.clear()
                woken = asyncio.ensure_future(self._wake.wait())
                waits: set[asyncio.Future[Any]] = {woken, peer_closed}
                if renewal is not None:
                    waits.add(renewal)
                timeout = max(0.0, renew_at - now) if renewal is None and renew_at is not None else None
                try:
                    await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    woken.cancel()
                if peer_closed.done():
                    raise ConnectionError("closed by the peer")
        except (OSError, ConnectionError, RuntimeError) as e:
            # RuntimeError: uvloop refuses a write to a transport the peer's reset already closed
            # (the default loop drops it). Either way the connection is gone: reconnect.
            log.debug("raft: connection to node %d lost: %r", self.peer.node_id, e)
            self.on_unreachable(self.peer.node_id)
        except Exception:  # never let the sender die: the peer would be cut off for good
            log.exception("raft: connection to node %d failed; reconnecting", self.peer.node_id)
            self.on_unreachable(self.peer.node_id)
            await asyncio.sleep(self.cfg.reconnect_backoff_max_ms / 1000)
        finally:
            if peer_closed.done() and not peer_closed.cancelled():
                peer_closed.exception()   # retrieved: a reset is the expected way for it to end
            peer_closed.cancel()
            if renewal is not None:
                _discard_renewal(renewal)
            if self._stopping:
                # unsent messages do not matter any more, and a peer that stopped reading (stopping too, or
                # paused) would keep a graceful close waiting on its buffer for ever
                writer.transport.abort()
            else:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
        return None


def _peer_text(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def _discard_renewal(renewal: asyncio.Future[LoggedInStream]) -> None:
    """Close the connection of a renewal that is not used (the old one was lost first, or the sender stopped)."""
    if not renewal.done():
        renewal.add_done_callback(_discard_renewal)
        renewal.cancel()
    elif not renewal.cancelled() and renewal.exception() is None:
        renewal.result().writer.close()


class RaftDriver:
    """One controller-quorum member. ``start()``, then ``propose(batch)`` on the leader;
    committed entries go to listeners in log order."""

    def __init__(self, cfg: QuorumConfig, metadata_log_dir: str | Path, port: ListenerPort | None = None, *,
                 cluster_id: str | None = None) -> None:
        """``port``: where the controller port's Kafka and observer connections go (None: a port of its own, on
        which nothing is served until a server plugs in); ``cluster_id``: the one ``meta.properties`` names, if
        formatted."""
        self.cfg = cfg
        self.port = port if port is not None else ListenerPort()
        self.dir = Path(metadata_log_dir)
        self.node: RaftNode | None = None
        self._listeners: list[CommittedListener] = []
        self._snapshot_listeners: list[Callable[[int, int, bytes], None]] = []
        self._inbox: collections.deque[tuple[int, bytes]] = collections.deque()
        self._commands: collections.deque[Callable[[RaftNode], None]] = collections.deque()
        #: snapshots to write (index, data, the caller's future): on the raft executor, between ready cycles
        self._snapshots: collections.deque[tuple[int, bytes, asyncio.Future[str]]] = collections.deque()
        self._tracker: ProposalTracker[asyncio.Future[int]] = ProposalTracker(cfg.max_pending_proposals)
        self._wake = asyncio.Event()
        self._leader_changed = asyncio.Event()
        self._peers: dict[int, PeerSender] = {}
        #: every quorum member this one talks raft with: the configured voters and those voter changes added
        self.endpoints: dict[int, Voter] = dict(cfg.voters)
        #: KIP-853: the initial voters' directory ids (formatted, or learnt when joining a running quorum)
        self.initial_directory_ids: dict[int, uuid.UUID] = dict(cfg.initial_directory_ids)
        self._server: asyncio.Server | None = None
        self._run_task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"raft-{cfg.node_id}")
        self.leader_id = 0
        self.role = "follower"
        self.term = 0
        #: the commit index the leader of ``term`` sent this member in its appends (a follower's view of the high
        #: watermark, which the native node records as it steps them; None: not known), as of the last step
        self.leader_commit: int | None = None
        #: the quorum as the raft node last showed it, read between ready cycles with role and term (DescribeQuorum,
        #: the voter changes, observers' fetches and the member's duties read these, never the node's getters)
        self.voters: tuple[int, ...] = ()
        #: the voters after the log's last entry, uncommitted conf changes included (the native ``log_voters``)
        self.log_voters: tuple[int, ...] = ()
        self.commit_index = 0
        #: the Kafka end offset through the commit index (None: not in the log)
        self.committed_end_offset: int | None = None
        self.log_end_offset = 0
        #: on the leader, every replica's progress (itself included); empty on other members
        self.progress: tuple[ReplicaProgress, ...] = ()
        self.applied_index = 0
        self.dropped_inbound = 0
        #: the cluster this member belongs to (None until formatted or learnt from the log); peers that
        #: name another cluster in their hello are refused
        self.cluster_id: str | None = cluster_id
        self.refused_other_cluster = 0
        self._stopping = False
        #: wall-clock ms of the last raft message from each peer (DescribeQuorum's LastFetchTimestamp)
        self.last_heard_ms: dict[int, float] = {}
        #: wall-clock ms each peer was last heard from with the leader's whole log (LastCaughtUpTimestamp)
        self.last_caught_up_ms: dict[int, float] = {}
        #: observers (broker-only nodes, controllers waiting to be added as voters) that fetched from this member;
        #: DescribeQuorum lists them, AddRaftVoter admits only a caught-up one
        self.observers: dict[int, ObserverState] = {}
        self.commit_at_start = 0
        #: KIP-853: a joining controller (not a voter in its own log) refuses raft connections until its observer
        #: saw the voter set without its node id: while the set holds its node id under another directory id (its
        #: disk was replaced and reformatted), raft messages for that voter are not this empty log's to answer (it
        #: would vote, and acknowledge entries it never had)
        self.observing_only = False

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        voters = sorted(self.cfg.voters)
        if self.cfg.joining:   # KIP-853: not a voter until AddRaftVoter makes it one
            voters = list(self.cfg.joining_voters or await self._learn_voters())
        node = self.node = await loop.run_in_executor(
            self._executor,
            lambda: RaftNode(str(self.dir), self.cfg.node_id, voters, **self.cfg.raft_ticks(), **self.cfg.node_limits()),
        )
        # a joining controller answers raft messages once its observer saw a voter set without its node id
        self.observing_only = self.cfg.joining and self.cfg.node_id not in node.voters
        #: the commit index the log had when it opened: this member applied every entry up to it before this start
        self.commit_at_start = node.commit_index
        self._refresh_soft_state(node)   # no ready cycle runs yet
        self._refresh_quorum_view(node)
        # The image starts from the latest snapshot on disk; raft then delivers the entries after it.
        snap = await loop.run_in_executor(self._executor, node.latest_snapshot)
        if snap is not None:
            self.applied_index = snap[0]
            for s in self._snapshot_listeners:
                s(snap[0], 0, snap[1])
        me = self.cfg.voters[self.cfg.node_id]
        host = me.host if self.cfg.bind_host is None else self.cfg.bind_host
        port = me.port if self.cfg.bind_port is None else self.cfg.bind_port
        try:
            self._server = await asyncio.start_server(self._accept, host, port, reuse_address=True,
                                                      ssl=self.cfg.server_ssl)
        except OSError as e:
            await loop.run_in_executor(self._executor, node.close)
            raise OSError(e.errno, f"controller listener {host}:{port} (node.id {self.cfg.node_id} in "
                                   f"controller.quorum.voters): {e.strerror or e}; is this node.id already "
                                   "running?") from None
        for v in list(self.endpoints.values()):
            self.add_peer(v)
        self._run_task = loop.create_task(self._run(), name=f"raft-{self.cfg.node_id}")

    def add_peer(self, v: Voter) -> None:
        """Reach (and accept raft messages from) ``v``: a voter of the static or formatted set, or one a voter
        change added (its endpoint learnt from the AddRaftVoter request or the log's RegisterControllerRecord)."""
        if v.node_id == self.cfg.node_id:
            return
        known = self.endpoints.get(v.node_id)
        if v.node_id in self._peers and known == v:
            return
        self.endpoints[v.node_id] = v
        if self._run_task is None and self.node is None:
            return   # start() starts the senders
        old = self._peers.pop(v.node_id, None)
        if old is not None:
            asyncio.get_running_loop().create_task(old.stop())
        p = PeerSender(self.cfg.node_id, v, self.cfg, self._unreachable, lambda: self.cluster_id)
        p.start()
        self._peers[v.node_id] = p

    async def _learn_voters(self) -> tuple[int, ...]:
        """A controller joining a running quorum asks its bootstrap servers (DescribeQuorum) for the voters and their
        endpoints, and keeps them as its initial voter set (its raft log starts from it)."""
        from klog.controller.describe_quorum import forward_describe_quorum
        from klog.controller.quorum import InitialVoter, write_initial_voters
        from klog.protocol import ProtocolError

        request = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        me = self.cfg.voters[self.cfg.node_id]
        servers = [s for s in self.cfg.bootstrap_servers if s != (me.host, me.port)]
        if not servers:
            raise RaftError(f"controller.quorum.bootstrap.servers: node {self.cfg.node_id} joins a running quorum "
                            "but lists no other controller to learn the voters from")
        deadline = time.monotonic() + JOIN_DISCOVERY_TIMEOUT_S
        last = "no answer"
        while True:
            for host, port in servers:
                try:
                    answer = await forward_describe_quorum(Voter(-1, host, port), 2, request,
                                                           security=self.cfg.client_security)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError) as e:
                    last = f"{host}:{port}: {e}"
                    continue
                parts = [p for t in answer.topics for p in t.partitions]
                if answer.error_code != ErrorCode.NONE or not parts or parts[0].error_code != ErrorCode.NONE:
                    last = f"{host}:{port}: not the leader"   # only the leader describes the quorum
                    continue
                ids = tuple(sorted(v.replica_id for v in parts[0].current_voters))
                directories = {v.replica_id: v.replica_directory_id or ZERO_UUID for v in parts[0].current_voters}
                mine = stored_directory_id(str(self.dir.parent))
                if replaced_voter(self.cfg.node_id, ids, directories, mine):
                    # its disk was replaced and reformatted: the voter with its node id is another disk's; this
                    # controller is no voter in its own log (it joins as an observer)
                    log.warning("raft: node %d: the voter set holds node id %d under directory %s, not this disk's "
                                "%s: it joins as an observer (the old voter is to be removed)", self.cfg.node_id,
                                self.cfg.node_id, directories[self.cfg.node_id], mine)
                    ids = tuple(i for i in ids if i != self.cfg.node_id)
                endpoints = {}
                for n in answer.nodes or []:
                    for ep in n.listeners:
                        if ep.name == self.cfg.listener_name:
                            endpoints[n.node_id] = Voter(n.node_id, ep.host, ep.port)
                if set(ids) - set(endpoints):
                    last = f"{host}:{port}: no {self.cfg.listener_name} endpoint for voters {sorted(set(ids) - set(endpoints))}"
                    continue
                for i in ids:
                    self.endpoints[i] = endpoints[i]
                self.initial_directory_ids = directories
                write_initial_voters(str(self.dir.parent), [InitialVoter(i, directories[i], endpoints[i].host,
                                                                         endpoints[i].port) for i in ids],
                                     self.cfg.listener_name)
                log.info("raft: node %d joins the quorum of voters %s (learnt from %s:%d); it votes once added by "
                         "AddRaftVoter", self.cfg.node_id, list(ids), host, port)
                return ids
            if time.monotonic() > deadline:
                raise RaftError(f"controller.quorum.bootstrap.servers: no quorum leader answered DescribeQuorum in "
                                f"{JOIN_DISCOVERY_TIMEOUT_S:.0f}s ({last})")
            await asyncio.sleep(JOIN_DISCOVERY_RETRY_S)

    async def stop(self) -> None:
        # the flag too: Python 3.11's wait_for can swallow a cancellation that meets a completed wait
        self._stopping = True
        self._wake.set()
        if self._run_task is not None:
            # a run that already stopped on an error was reported then (logged, the node's ``failed``)
            reported = (RaftError,) if self._run_task.done() else ()
            self._run_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, *reported):
                await self._run_task
        for p in self._peers.values():
            await p.stop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for fut in self._tracker.drop_all():
            if not fut.done():
                fut.set_exception(RaftError("the raft driver stopped"))
        if self.node is not None:
            node = self.node
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, node.close)
            except RaftError as e:  # e.g. the disk is full: the next start recovers the log and its indexes
                log.warning("raft: node %d: closing the metadata log failed: %s", self.cfg.node_id, e)
        self._executor.shutdown(wait=True)

    # -- API for the controller ------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.role == "leader"

    def add_committed_listener(self, listener: CommittedListener) -> None:
        """``listener(index, term, kind, data, base_offset, next_offset)`` for every committed
        entry in order; kind is "data", "leader_change" or "conf_change"; data is the batch as
        stored in ``__cluster_metadata-0``."""
        self._listeners.append(listener)

    def add_snapshot_listener(self, listener: Callable[[int, int, bytes], None]) -> None:
        """``listener(index, term, batches)`` when a snapshot from the leader replaced the log."""
        self._snapshot_listeners.append(listener)

    async def wait_for_leader(self, timeout: float | None = None) -> int:
        async def wait() -> int:
            while self.leader_id == 0:
                self._leader_changed.clear()
                await self._leader_changed.wait()
            return self.leader_id

        return await asyncio.wait_for(wait(), timeout)

    def propose(self, batch: bytes) -> asyncio.Future[int]:
        """Propose one record batch of metadata records (base offset 0). The future resolves to
        the batch's base offset in the metadata log once committed; NotLeaderError if this node
        is not the leader, ProposalLostError if a new leader overwrote it."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._tracker.full():
            fut.set_exception(RaftError(f"too many pending proposals (max_pending_proposals={self.cfg.max_pending_proposals})"))
            return fut
        if not self.is_leader:
            fut.set_exception(NotLeaderError(f"node {self.cfg.node_id} is not the leader (leader: {self.leader_id})"))
            return fut

        def submit(node: RaftNode) -> None:
            if fut.done():
                return
            try:
                index = node.propose(batch)
            except RaftError as e:
                fut.set_exception(e)
                return
            self._tracker.add(index, node.term, fut)

        self._command(submit)
        return fut

    def _command(self, cmd: Callable[[RaftNode], None]) -> None:
        self._commands.append(cmd)
        self._wake.set()

    def transfer_leader(self, to: int) -> None:
        self._command(lambda n: n.transfer_leader(to))

    def campaign(self) -> None:
        self._command(lambda n: n.campaign())

    def change_voter(self, node_id: int, add: bool) -> asyncio.Future[int]:
        """Add or remove a voter (the peer's endpoint must be in the config to reach it)."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def submit(node: RaftNode) -> None:
            try:
                index = node.propose_voter_change(node_id, add)
            except RaftError as e:
                fut.set_exception(e)
                return
            self._tracker.add(index, node.term, fut)

        self._command(submit)
        return fut

    def create_snapshot(self, index: int, data: bytes) -> asyncio.Future[str]:
        """Snapshot the applied state after ``index`` (data: record batches); the log before it is dropped."""
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._snapshots.append((index, data, fut))
        self._wake.set()
        return fut

    async def _write_snapshots(self, node: RaftNode) -> None:
        """Write the snapshots asked for on the raft executor (the image's records written and fsynced: the event
        loop, which a combined node's requests share, would stop for that long), between two ready cycles as the
        node's other commands."""
        loop = asyncio.get_running_loop()
        while self._snapshots:
            index, data, fut = self._snapshots.popleft()
            try:
                path = await loop.run_in_executor(self._executor, node.create_snapshot, index, data)
            except asyncio.CancelledError:
                if not fut.done():
                    fut.set_exception(RaftError("the raft node stopped before its snapshot was written"))
                raise
            except RaftError as e:
                if not fut.done():
                    fut.set_exception(e)
                continue
            if not fut.done():   # the caller may have stopped waiting (a member shutting down)
                fut.set_result(str(path))

    def note_observer(self, node_id: int, applied_index: int, directory_id: uuid.UUID = ZERO_UUID) -> None:
        """An observer fetched after ``applied_index`` (forgotten after :data:`OBSERVER_SESSION_MS` of silence)."""
        now = time.time() * 1000.0
        before = self.observers.get(node_id)
        caught_up = now if self.node is not None and applied_index >= self.commit_index else \
            (before.caught_up_ms if before is not None and before.directory_id == directory_id else -1.0)
        # its end offset from the soft state when known there; else the run loop reads it between ready cycles
        end: int | None = None
        if before is not None and before.applied_index == applied_index:
            end = before.end_offset
        elif applied_index == self.commit_index:
            end = -1 if self.committed_end_offset is None else self.committed_end_offset
        self.observers[node_id] = ObserverState(applied_index, now, caught_up, directory_id, end)
        if end is None:
            self._wake.set()
        if len(self.observers) > MAX_OBSERVERS_TRACKED:
            for stale in [i for i, o in self.observers.items() if now - o.fetched_ms > OBSERVER_SESSION_MS]:
                del self.observers[stale]
            while len(self.observers) > MAX_OBSERVERS_TRACKED:   # still too many: the longest silent goes
                del self.observers[min(self.observers, key=lambda i: self.observers[i].fetched_ms)]

    # -- IO ----------------------------------------------------------------------------------
    def _unreachable(self, peer: int) -> None:
        self._command(lambda n: n.report_unreachable(peer))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        handed_over = False
        try:
            principal = None
            if self.cfg.server_login is not None:   # a SASL controller listener: every connection logs in first
                login = self.port.login
                if login is None:
                    log.warning("raft: refused connection from %s: the SASL controller listener serves no logins",
                                peer)
                    return
                principal = await login.login(reader, writer)
                if principal is None:
                    return
            access = self.port.access
            if principal is None and access is not None:   # PLAINTEXT: ANONYMOUS; SSL: the certificate's
                principal = access.principal_of(writer)
            hello = await asyncio.wait_for(reader.readexactly(_HELLO.size), HELLO_TIMEOUT_S)
            magic, sender = _HELLO.unpack(hello)
            if magic in (OBSERVER_PREAMBLE, RAFT_PREAMBLE) and principal is not None and access is not None \
                    and not access.may(principal, peer_host(peer)):
                # Kafka authorizes Vote, BeginQuorumEpoch, Fetch and FetchSnapshot with ClusterAction
                kind = "raft" if magic == RAFT_PREAMBLE else "observer"
                access.refuse_unauthorized(principal, peer, f"node {sender}'s {kind} connection")
                return
            if magic == OBSERVER_PREAMBLE and self.port.observers is not None:
                handed_over = True  # the observer side closes it
                await self.port.observers(reader, writer, sender)
                return
            if magic != RAFT_PREAMBLE and self.port.kafka is not None:
                handed_over = True  # the Kafka side closes it
                await self.port.kafka(reader, writer, hello, principal)
                return
            if magic == RAFT_PREAMBLE and self.observing_only:
                log.debug("raft: refused node %d's raft connection: this joining controller observes the quorum "
                          "until the voter set holds no other disk under its node id", sender)
                return
            if magic != RAFT_PREAMBLE or sender not in self.endpoints or sender == self.cfg.node_id:
                log.warning("raft: refused connection from %s: bad preamble or node id %s", peer, sender)
                return
            (cid_len,) = _CLUSTER_ID_LEN.unpack(await reader.readexactly(_CLUSTER_ID_LEN.size))
            if not 0 <= cid_len <= MAX_CLUSTER_ID_BYTES:
                log.warning("raft: refused connection from node %d: cluster id of %d bytes", sender, cid_len)
                return
            theirs = (await reader.readexactly(cid_len)).decode(errors="replace") if cid_len else None
            if theirs and self.cluster_id and theirs != self.cluster_id:
                self.refused_other_cluster += 1
                log.error("raft: refused node %d (%s): it belongs to cluster %s, this node to cluster %s",
                          sender, peer, theirs, self.cluster_id)
                return
            session_end = self.port.login.session_end(writer) if self.port.login is not None else None
            while True:
                (size,) = _LEN.unpack(await reader.readexactly(_LEN.size))
                if not 0 < size <= self.cfg.max_frame_bytes:
                    log.warning("raft: node %d sent a frame of %d bytes (max_frame_bytes=%d); closing",
                                sender, size, self.cfg.max_frame_bytes)
                    return
                body = await reader.readexactly(size)
                if session_end is not None and time.monotonic() >= session_end:
                    # KIP-368, as Kafka closes a connection whose session ended at its next request: the sender
                    # logs in on a new connection before the end, so a node still here has no valid login
                    log.warning("raft: closing node %d's connection from %s (%s): its SASL session ended "
                                "(connections.max.reauth.ms) and it did not log in again", sender,
                                _peer_text(peer), principal)
                    return
                if len(self._inbox) >= self.cfg.max_inbox_messages:
                    self.dropped_inbound += 1
                    continue
                self._inbox.append((sender, body))
                self.last_heard_ms[sender] = time.time() * 1000.0
                self._wake.set()
        except asyncio.TimeoutError:  # before OSError: TimeoutError is one
            log.warning("raft: refused connection from %s: no peer hello within %ss", peer, HELLO_TIMEOUT_S)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing: a leaf task, nothing waits for it
        finally:
            if not handed_over:
                writer.close()

    async def _run(self) -> None:
        node = self.node
        assert node is not None
        loop = asyncio.get_running_loop()
        clock = TickClock(self.cfg.tick_ms, _now_ms())
        while not self._stopping:
            timeout = clock.until_next(_now_ms()) / 1000
            if not self._wake.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            try:
                for _ in range(clock.due(_now_ms())):
                    node.tick()
                heard_from = bool(self._inbox)
                while self._inbox:
                    sender, m = self._inbox.popleft()
                    try:
                        node.step(m)
                    except RaftError as e:
                        log.warning("raft: dropped a message from node %d: %s", sender, e)
                        continue
                if heard_from and self.role == "leader":
                    self._note_caught_up(node)
                while self._commands:
                    self._commands.popleft()(node)
                await self._write_snapshots(node)
                if node.has_ready():
                    # A leader's appends go out first, so followers persist them while it does.
                    self._send(node.begin_ready())
                    msgs, committed, snap = await loop.run_in_executor(self._executor, node.ready)
                    self._send(msgs)
                    if snap is not None:
                        self._install_snapshot(*snap)
                    # a quorum of one commits its own LeaderChange in the ready that made it leader: listeners
                    # that propose at once must see it lead
                    self._refresh_soft_state(node)
                    for c in committed:
                        self._deliver(*c)
                self._refresh_soft_state(node)
                self._refresh_quorum_view(node)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A storage failure (disk full, IO error) must not be papered over: stop the loop
                # so the member goes silent (the quorum elects another) and fail waiters.
                log.exception("raft: node %d stopped on an error", self.cfg.node_id)
                for fut in self._tracker.drop_all():
                    if not fut.done():
                        fut.set_exception(RaftError("the raft node stopped on an error; see the log"))
                raise

    def _note_caught_up(self, node: RaftNode) -> None:
        """A follower whose matched index is the leader's last entry was caught up when last heard from
        (Kafka's LastCaughtUpTimestamp)."""
        last = node.last_index
        for peer, _, matched in node.replica_progress():
            if peer != self.cfg.node_id and matched >= last and peer in self.last_heard_ms:
                self.last_caught_up_ms[peer] = self.last_heard_ms[peer]

    def _send(self, messages: list[tuple[int, bytes]]) -> None:
        for to, m in messages:
            p = self._peers.get(to)
            if p is not None:
                p.send(m)

    def _refresh_soft_state(self, node: RaftNode) -> None:
        # read here, between ready cycles: a read during one would wait for its fsync (the node's lock)
        self.leader_commit = node.leader_commit
        leader, role, term = node.leader_id, node.role, node.term
        if (leader, role, term) != (self.leader_id, self.role, self.term):
            if role != "leader" and self.role == "leader":
                log.info("raft: node %d lost leadership in term %d", self.cfg.node_id, self.term)
            self.leader_id, self.role, self.term = leader, role, term
            self._leader_changed.set()

    def _refresh_quorum_view(self, node: RaftNode) -> None:
        """The rest of the soft state (between ready cycles, as ``_refresh_soft_state``): voters, commit index and
        the end offsets DescribeQuorum reports, the leader's view of each replica, observers' end offsets."""
        removed = set(self.voters) - set(node.voters)
        self.voters = tuple(node.voters)
        self.log_voters = tuple(node.log_voters)
        for gone in removed:   # its messages still queued were for the removed voter's log: none goes out later
            sender = self._peers.get(gone)
            if sender is not None:
                sender.queue.clear()
        self.commit_index = node.commit_index
        self.committed_end_offset = node.end_offset_through(self.commit_index)
        self.log_end_offset = node.log_end_offset
        progress = node.replica_progress() if self.role == "leader" else []
        self.progress = tuple(ReplicaProgress(peer, is_voter, matched, self._end_offset(node, matched))
                              for peer, is_voter, matched in progress)
        for node_id, o in list(self.observers.items()):
            if o.end_offset is None:
                self.observers[node_id] = dataclasses.replace(o, end_offset=self._end_offset(node, o.applied_index))

    @staticmethod
    def _end_offset(node: RaftNode, index: int) -> int:
        """The Kafka end offset through raft ``index`` (0 for none; -1: no longer in the log)."""
        if index <= 0:
            return 0
        end = node.end_offset_through(index)
        return -1 if end is None else end

    def _install_snapshot(self, index: int, term: int, data: bytes) -> None:
        for fut in self._tracker.drop_through(index):
            if not fut.done():
                fut.set_exception(ProposalLostError(f"a snapshot at index {index} replaced the log; outcome unknown"))
        self.applied_index = index
        for s in self._snapshot_listeners:
            s(index, term, data)

    def _deliver(self, index: int, term: int, kind: str, data: bytes, base: int, nxt: int) -> None:
        self.applied_index = index
        got = self._tracker.committed(index, term)
        if got is not None:
            fut, ok = got
            if not fut.done():
                if ok:
                    fut.set_result(base)
                else:
                    fut.set_exception(ProposalLostError(f"entry {index} was overwritten by a new leader (term {term})"))
        for listener in self._listeners:
            listener(index, term, kind, data, base, nxt)
