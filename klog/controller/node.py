"""The controller role of a ``klog-broker`` in a multi-node quorum: a Raft member over
``<metadata.log.dir>/__cluster_metadata-0`` whose committed log is applied to a metadata image.

IO only: the Raft driver (:mod:`klog.controller.raft`) owns the node and the peer connections, the decisions
(what to propose, when to snapshot, which cluster id) are in :mod:`klog.controller.applier`.

Cluster id: ``meta.properties`` (Kafka's file: version, node.id, cluster.id, directory.id) in the metadata log's
parent directory and in every log dir of a combined node. ``klog-broker format -t <id>`` writes it ahead; without
it, the first leader of a new quorum picks one and commits it with the bootstrap records, and each member writes
its ``meta.properties`` when it applies them. A member whose ``meta.properties`` names another cluster stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from klog.controller.applier import (
    ClusterIdMismatch,
    MetadataApplier,
    SnapshotPolicy,
    bootstrap_batch,
    new_cluster_id,
    noop_batch,
)
from klog.controller.quorum import QuorumConfig
from klog.controller.single_voter import atomic_batches
from klog.controller.raft import RaftDriver, RaftError
from klog.metadata import MetadataImage, MetadataRecord
from klog.metadata.records import encode_batch
from klog.metadata.storage import METADATA_PARTITION, METADATA_TOPIC, read_snapshot, snapshot_ids

__all__ = ["META_PROPERTIES", "ControllerNode", "read_meta_properties", "write_meta_properties"]

log = logging.getLogger("klog.controller")

META_PROPERTIES = "meta.properties"
#: How often the controller's housekeeping (no-op records, snapshots) looks at the clock.
DUTY_INTERVAL_MS = 100


def _now_ms() -> float:
    return time.monotonic() * 1000.0


def read_meta_properties(directory: str) -> dict[str, str] | None:
    import javaproperties

    try:
        with open(os.path.join(directory, META_PROPERTIES), encoding="utf-8") as handle:
            return dict(javaproperties.load(handle))
    except FileNotFoundError:
        return None


def write_meta_properties(directory: str, node_id: int, cluster_id: str) -> None:
    """Kafka's ``meta.properties`` v1 (written once: an existing file is left as it is)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, META_PROPERTIES)
    if os.path.exists(path):
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\nnode.id={node_id}\n"
                     f"directory.id={uuid.uuid4()}\nversion=1\ncluster.id={cluster_id}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def stored_cluster_id(directories: Iterable[str], node_id: int) -> str | None:
    """The cluster id the directories' ``meta.properties`` agree on (None: not formatted). A file of
    another node or two different cluster ids are errors naming the file."""
    found: tuple[str, str] | None = None
    for d in directories:
        props = read_meta_properties(d)
        if props is None:
            continue
        path = os.path.join(d, META_PROPERTIES)
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise RuntimeError(f"{path}: this log dir belongs to node.id {stored_node}, but the config says "
                               f"node.id {node_id}")
        cid = props.get("cluster.id")
        if cid and found is not None and found[0] != cid:
            raise RuntimeError(f"{path} says cluster.id {cid}, {found[1]} says {found[0]}")
        if cid:
            found = (cid, path)
    return found[0] if found else None


class ControllerNode:
    """``await start()``; ``image`` is the applied metadata; ``await stop()``. ``failed`` completes with the
    reason when the member stopped on its own (a storage error, another cluster's log)."""

    def __init__(self, quorum: QuorumConfig, metadata_log_dir: str, meta_dirs: list[str], *,
                 noop_interval_ms: int = 500, snapshot_policy: SnapshotPolicy | None = None) -> None:
        self.quorum = quorum
        self.partition_dir = os.path.join(metadata_log_dir, f"{METADATA_TOPIC}-{METADATA_PARTITION}")
        self.meta_dirs = list(dict.fromkeys([metadata_log_dir, *meta_dirs]))
        self.noop_interval_ms = noop_interval_ms
        cluster_id = stored_cluster_id(self.meta_dirs, quorum.node_id)
        self.applier = MetadataApplier(cluster_id, snapshot_policy or SnapshotPolicy(), _now_ms())
        self.driver = RaftDriver(quorum, self.partition_dir)
        self.driver.cluster_id = cluster_id
        self.driver.add_committed_listener(self._on_committed)
        self.driver.add_snapshot_listener(self._on_snapshot_installed)
        self.failed: asyncio.Future[str] | None = None
        self._cluster_id_known: asyncio.Event | None = None
        self._duties_task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Future[int]] = set()
        self._last_noop_ms = 0.0
        self._snapshotting = False

    @property
    def cluster_id(self) -> str | None:
        return self.applier.cluster_id

    @property
    def image(self) -> MetadataImage:
        return self.applier.image

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.failed = loop.create_future()
        self._cluster_id_known = asyncio.Event()
        if self.cluster_id is not None:
            self._cluster_id_known.set()
        await self.driver.start()
        self._duties_task = loop.create_task(self._duties(), name=f"controller-{self.quorum.node_id}")
        log.info("controller %d: quorum member on %s:%s, voters %s, metadata log %s, cluster %s",
                 self.quorum.node_id, self.quorum.bind_host, self.quorum.bind_port,
                 ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in self.quorum.voters.values()),
                 self.partition_dir, self.cluster_id or "(not yet established)")

    async def wait_cluster_id(self) -> str:
        """The cluster id, once formatted or committed by the quorum (raises if the member failed first)."""
        assert self._cluster_id_known is not None and self.failed is not None
        known: asyncio.Future[Any] = asyncio.ensure_future(self._cluster_id_known.wait())
        waits: list[asyncio.Future[Any]] = [known, self.failed]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            known.cancel()
        if self.cluster_id is None:
            raise RuntimeError(f"controller stopped before the cluster id was known: {self.failed.result()}")
        return self.cluster_id

    async def stop(self) -> None:
        if self._duties_task is not None:
            self._duties_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._duties_task
        await self.driver.stop()

    # -- committed log -> image ------------------------------------------------------------------
    def _fail(self, reason: str) -> None:
        log.error("controller %d: %s", self.quorum.node_id, reason)
        if self.failed is not None and not self.failed.done():
            self.failed.set_result(reason)

    def _on_committed(self, index: int, term: int, kind: str, data: bytes, base: int, nxt: int) -> None:
        try:
            learnt = self.applier.apply(index, kind, data)
        except ClusterIdMismatch as e:
            self._fail(str(e))
            raise
        if learnt is not None:
            self._learnt_cluster_id(learnt, f"committed at index {index}")
        node = self.driver.node
        if kind == "leader_change" and node is not None:
            is_leader = node.role == "leader"
            own = is_leader and term == node.term
            if self.applier.needs_bootstrap(is_leader=is_leader, own_leader_change_applied=own):
                cid = self.applier.cluster_id or new_cluster_id()
                log.info("controller %d: leader of a new quorum: proposing the bootstrap records (cluster %s)",
                         self.quorum.node_id, cid)
                self._propose(bootstrap_batch(cid), "bootstrap records")

    def _learnt_cluster_id(self, cluster_id: str, where: str) -> None:
        for d in self.meta_dirs:
            write_meta_properties(d, self.quorum.node_id, cluster_id)
        self.driver.cluster_id = cluster_id
        assert self._cluster_id_known is not None
        self._cluster_id_known.set()
        log.info("controller %d: cluster id %s established by the quorum (%s)", self.quorum.node_id, cluster_id,
                 where)

    def _on_snapshot_installed(self, index: int, term: int, data: bytes) -> None:
        self._load_latest_snapshot(index)

    def _load_latest_snapshot(self, index: int) -> None:
        ids = snapshot_ids(self.partition_dir)
        if not ids:
            return
        sid = ids[-1]
        snap = read_snapshot(os.path.join(self.partition_dir, sid.filename))
        try:
            learnt = self.applier.load_snapshot(index, snap.batches, sid.end_offset, sid.epoch,
                                                snap.last_contained_log_time_ms, _now_ms())
        except ClusterIdMismatch as e:
            self._fail(str(e))
            raise
        if learnt is not None:
            self._learnt_cluster_id(learnt, f"from the leader's snapshot at index {index}")

    def _propose(self, batch: bytes, what: str) -> asyncio.Future[int]:
        fut = self.driver.propose(batch)
        self._inflight.add(fut)

        def done(f: asyncio.Future[int]) -> None:
            self._inflight.discard(f)
            if not f.cancelled() and f.exception() is not None:
                log.info("controller %d: %s not committed: %s", self.quorum.node_id, what, f.exception())

        fut.add_done_callback(done)
        return fut

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Propose ``records`` as one change (a metadata transaction when they need several batches) and return
        once they are committed and applied to :attr:`image` here. Raises NotLeaderError on a member that is not
        the active controller, ProposalLostError when a new leader overwrote them (then nothing of them applies:
        an unfinished transaction is never applied)."""
        futures = [self.driver.propose(encode_batch(list(batch))) for batch in atomic_batches(records)]
        try:
            for fut in futures:
                await fut
        finally:
            for fut in futures:
                if not fut.done():
                    fut.cancel()

    # -- housekeeping ----------------------------------------------------------------------------
    async def _duties(self) -> None:
        run_task = self.driver._run_task
        while True:
            await asyncio.sleep(DUTY_INTERVAL_MS / 1000)
            if run_task is not None and run_task.done():
                exc = None if run_task.cancelled() else run_task.exception()
                self._fail(f"the raft member stopped: {exc!r}")
                return
            now = _now_ms()
            node = self.driver.node
            if node is None:
                continue
            if (self.noop_interval_ms > 0 and node.role == "leader" and self.applier.bootstrapped
                    and not self._inflight and now - self._last_noop_ms >= self.noop_interval_ms):
                self._last_noop_ms = now
                self._propose(noop_batch(), "no-op record")
            if not self._snapshotting and self.applier.snapshot_due(now):
                await self._snapshot(now)

    async def _snapshot(self, now: float) -> None:
        index = self.applier.applied_index
        self._snapshotting = True
        try:
            path = await self.driver.create_snapshot(index, self.applier.snapshot_content())
        except RaftError as e:
            log.warning("controller %d: snapshot at index %d failed: %s", self.quorum.node_id, index, e)
        else:
            self.applier.snapshot_taken(index, now)
            log.info("controller %d: snapshot of the metadata image at index %d: %s", self.quorum.node_id, index, path)
        finally:
            self._snapshotting = False

