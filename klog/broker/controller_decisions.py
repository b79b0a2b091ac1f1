"""The requests brokers forward, decided on a controller-only node (``process.roles=controller``).

A combined node decides CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs and
ElectLeaders with its broker's own handlers (:meth:`klog.broker.server.BrokerServer.decide_forwarded`). A
controller-only node has no broker, so it runs the same handlers over a headless broker state: the same
:class:`~klog.broker.cluster_metadata.ClusterMetadata` over its Raft member's image (one implementation of each
decision), with a partition manager that never holds a partition (a controller-only node is never a replica), no
client listener, no registration.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable
from typing import Any

from klog.broker.cluster_metadata import ClusterMetadata
from klog.broker.config import BrokerConfig
from klog.broker.forwarding import FORWARDED_APIS
from klog.broker.handlers import RequestContext, load_all
from klog.broker.partitions import PartitionManager
from klog.protocol import versions

__all__ = ["ControllerOnlyDecisions"]


class ControllerOnlyDecisions:
    def __init__(self, config: BrokerConfig, controller: Any, loop: asyncio.AbstractEventLoop) -> None:
        assert controller.cluster_id is not None, "the cluster id is known before decisions are served"
        self.config = config
        self.partitions = PartitionManager(config, loop)
        self.metadata = ClusterMetadata(config, controller.cluster_id, self.partitions, {}, controller=controller)
        #: what the handlers read of a broker state
        self.state = types.SimpleNamespace(config=config, node_id=config.node_id, cluster_id=controller.cluster_id,
                                           metadata=self.metadata, partitions=self.partitions, metrics=None)
        self._handlers = load_all()
        self.listener = config.controller_listeners[0].name

    def versions(self) -> dict[int, tuple[int, int]]:
        return {k: versions(k) for k in FORWARDED_APIS}

    def decide(self, header: Any, request: Any, peer: Any) -> Awaitable[Any]:
        host, port = (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else ("", -1)
        ctx = RequestContext(header, host, port, -1, zero_copy=False, listener=self.listener)
        return self._handlers[header.api_key].func(self.state, ctx, request)

    def close(self) -> None:
        self.metadata.close()
        self.partitions.close()
