"""The IO edge of ISR changes: sends the leaders' proposals as AlterPartition (56) to the active controller (Kafka's
``AlterPartitionManager``) and hands each partition's answer back to the replica manager.

Proposals are batched per round (one request for every partition waiting, the newest proposal per partition) over
one klog client connection to a controller listener, rotating through ``controller.quorum.voters`` when one is
unreachable or answers NOT_CONTROLLER, as the broker lifecycle driver does. A request that failed as a whole is
sent again after ``ALTER_PARTITION_RETRY_MS``; the leader decides per partition what an error means
(:meth:`klog.broker.replication.leader.LeaderPartition.on_alter_partition_response`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any, Protocol

from klog.broker.controller_channel import ControllerConnection
from klog.client.errors import KafkaError
from klog.protocol import ApiKey, Struct
from klog.protocol.errors import ErrorCode

from .leader import IsrProposal
from .replica import Key

__all__ = ["ALTER_PARTITION_RETRY_MS", "AlterPartitionSender"]

log = logging.getLogger("klog.broker.replication")

#: Pause before a failed AlterPartition round is sent again.
ALTER_PARTITION_RETRY_MS = 200
#: The AlterPartition version sent when the controller has it (NewIsrWithEpochs, KIP-903).
ALTER_PARTITION_VERSION = 3


class IsrOwner(Protocol):
    """What the sender needs of the replica manager that made it (a Protocol: the manager imports this module)."""

    node_id: int

    def broker_epoch(self) -> int: ...

    def on_alter_partition_response(self, key: Key, proposal: IsrProposal, error: int, answer: Any) -> bool: ...


class AlterPartitionSender:
    """Made by the replica manager (``manager``), which submits its leaders' proposals and takes the answers, over
    ``controller``, a connection to the active controller."""

    def __init__(self, manager: IsrOwner, controller: ControllerConnection) -> None:
        self.manager = manager
        self.pending: dict[Key, IsrProposal] = {}
        self._controller = controller
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def submit(self, key: Key, proposal: IsrProposal) -> None:
        self.pending[key] = proposal
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="alter-partition-sender")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._controller.drop(rotate=False)

    async def run(self) -> None:
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch, self.pending = self.pending, {}
            retry = await self._send(batch)
            if retry:
                for key, proposal in retry.items():
                    self.pending.setdefault(key, proposal)   # a newer proposal made meanwhile goes instead
                await asyncio.sleep(ALTER_PARTITION_RETRY_MS / 1000)

    async def _send(self, batch: dict[Key, IsrProposal]) -> dict[Key, IsrProposal]:
        """One AlterPartition round; returns the proposals to send again."""
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for proposal in batch.values():
            topics.setdefault(proposal.topic_id, []).append(proposal.request_partition())
        body = Struct(broker_id=self.manager.node_id, broker_epoch=self.manager.broker_epoch(),
                      topics=[Struct(topic_id=tid, topic_name="", partitions=[Struct(**p) for p in parts])
                              for tid, parts in topics.items()])
        try:
            conn = await self._controller.get()
            version = min(ALTER_PARTITION_VERSION, conn.broker_versions.get(ApiKey.ALTER_PARTITION, (0, 0))[1])
            response = await conn.request(ApiKey.ALTER_PARTITION, body, version=version)
        except (KafkaError, OSError) as exc:
            log.info("AlterPartition to the controller failed: %s", exc)
            self._controller.drop(rotate=True)
            return batch
        if response.error_code:
            if response.error_code == ErrorCode.NOT_CONTROLLER:
                self._controller.drop(rotate=True)
            else:
                log.info("AlterPartition answered error %d", response.error_code)
            return batch
        by_partition = {(p.topic_id, p.partition): (key, p) for key, p in batch.items()}
        retry: dict[Key, IsrProposal] = {}
        for topic in response.topics:
            for answer in topic.partitions:
                found = by_partition.get((topic.topic_id, answer.partition_index))
                if found is None:
                    continue
                key, proposal = found
                if answer.error_code == ErrorCode.NOT_CONTROLLER:
                    self._controller.drop(rotate=True)
                if self.manager.on_alter_partition_response(key, proposal, answer.error_code, answer):
                    retry[key] = proposal
        return retry
