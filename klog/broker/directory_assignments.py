"""The broker's side of JBOD on a quorum (KIP-858): which log dir holds each local replica, told to the active
controller with AssignReplicasToDirs (73), as Kafka's ``AssignmentsManager``.

The controller records a replica placed on a broker with several log dirs as UNASSIGNED; the broker makes the log
in one of its online dirs (the one AlterReplicaLogDirs named ahead, else the one the records name, else the one with
the fewest partitions: ``ClusterMetadata._log_dirs``) and sends the dir's ``directory.id`` (``meta.properties``). Whenever a published image names another dir for a local replica than the one holding its
log, the actual dir is sent. Assignments wait until the broker is registered, are batched (every one pending in one
request) and sent again after ``ASSIGNMENT_RETRY_MS`` when the controller cannot be reached or refuses the request
as a whole; a partition the controller answers with an error is dropped (the next image that touches it tries
again).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from klog.broker.controller_channel import ControllerChannel, ControllerUnreachable
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode

__all__ = ["ASSIGNMENT_RETRY_MS", "AssignmentSender"]

log = logging.getLogger("klog.broker.metadata")

#: Pause before assignments that could not be sent are sent again.
ASSIGNMENT_RETRY_MS = 500
#: How long one AssignReplicasToDirs waits for an active controller.
ASSIGNMENT_TIMEOUT_S = 10.0

Key = tuple[uuid.UUID, int]   # (topic id, partition)


class AssignmentSender:
    """``broker_epoch``: the broker's current registration epoch (-1: not registered yet)."""

    def __init__(self, node_id: int, broker_epoch: Callable[[], int], channel: ControllerChannel) -> None:
        self.node_id = node_id
        self.broker_epoch = broker_epoch
        self.channel = channel
        #: (topic id, partition) -> the directory id to assign
        self.pending: dict[Key, uuid.UUID] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def submit(self, topic_id: uuid.UUID, partition: int, directory: uuid.UUID) -> None:
        key = (topic_id, partition)
        if self.pending.get(key) == directory:
            return
        self.pending[key] = directory
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"broker-{self.node_id}-dir-assignments")

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.channel.close()

    async def _run(self) -> None:
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self.broker_epoch() < 0:   # not registered yet
                await asyncio.sleep(ASSIGNMENT_RETRY_MS / 1000)
                continue
            batch, self.pending = self.pending, {}
            if not await self._send(batch):
                for key, directory in batch.items():
                    self.pending.setdefault(key, directory)   # a newer assignment made meanwhile goes instead
                await asyncio.sleep(ASSIGNMENT_RETRY_MS / 1000)

    async def _send(self, batch: dict[Key, uuid.UUID]) -> bool:
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for (topic_id, partition), directory in sorted(batch.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(partition)
        body: dict[str, Any] = {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch(),
            "directories": [{"id": d, "topics": [{"topic_id": t, "partitions": [{"partition_index": p} for p in ps]}
                                                 for t, ps in topics.items()]}
                            for d, topics in by_dir.items()]}
        try:
            response = await self.channel.send(ApiKey.ASSIGN_REPLICAS_TO_DIRS, body, timeout_s=ASSIGNMENT_TIMEOUT_S)
        except (ControllerUnreachable, OSError) as exc:
            log.info("AssignReplicasToDirs to the controller failed: %s", exc)
            return False
        if response.error_code != ErrorCode.NONE:
            log.info("AssignReplicasToDirs answered %s", ErrorCode(response.error_code).name)
            return False
        for d in response.directories:
            for t in d.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.NONE:
                        log.info("AssignReplicasToDirs: partition %d of topic id %s answered %s", p.partition_index,
                                 t.topic_id, ErrorCode(p.error_code).name)
        log.info("assigned %d replica(s) to their log dirs", len(batch))
        return True
