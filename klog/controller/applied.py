"""What a broker reads of the node that applies the quorum's committed log: the base of a quorum member
(:class:`klog.controller.node.ControllerNode`) and of an observer
(:class:`klog.controller.observer.MetadataObserver`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from klog.controller.applier import MetadataApplier
from klog.metadata import MetadataImage

if TYPE_CHECKING:
    from klog.controller.quorum import Voter


class QuorumVoters(Protocol):
    """What a broker reads of the quorum's settings: the voters (a member's QuorumConfig, an observer's
    ObserverConfig)."""

    @property
    def voters(self) -> Mapping[int, Voter]: ...


class LeaderView(Protocol):
    """What a broker reads of a raft driver (a member's RaftDriver, or an observer itself): who leads, and
    where the voters' controller listeners are."""

    @property
    def leader_id(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def endpoints(self) -> Mapping[int, Voter]: ...

    @property
    def cfg(self) -> QuorumVoters: ...

__all__ = ["AppliedMetadata"]


class AppliedMetadata:
    """What a broker reads of the node that applies the quorum's committed log to its image: a quorum member
    (:class:`ControllerNode`) or an observer (:class:`klog.controller.observer.MetadataObserver`)."""

    #: names the node in messages
    role = "controller"
    applier: MetadataApplier
    #: completes with the reason when the node stopped on its own
    failed: asyncio.Future[str] | None = None
    #: set once the broker may start (the cluster id known)
    _cluster_id_known: asyncio.Event | None = None

    @property
    def cluster_id(self) -> str | None:
        return self.applier.cluster_id

    @property
    def image(self) -> MetadataImage:
        return self.applier.image

    quorum: QuorumVoters
    driver: LeaderView

    def high_watermark(self) -> int | None:
        """The quorum's high watermark as this node knows it, in raft indices, exclusive (the index after the
        leader's last committed entry); None while it does not know it (no leader heard from yet since it
        started). A starting broker publishes nothing until it applied everything before it
        (:class:`klog.metadata.loader.StartupCatchUp`)."""
        raise NotImplementedError

    def applied_before_start(self) -> int | None:
        """The last entry this node had applied (and its broker acted on) before it started: what its broker
        replays up to it, it saw before; None when it keeps no log of its own (an observer)."""
        return None

    def controller_addresses(self) -> list[tuple[str, int]]:
        """Where this node's broker finds the active controller: the quorum's controller listeners."""
        return [(v.host, v.port) for _, v in sorted(self.quorum.voters.items())]

    def leader_address(self) -> tuple[str, int] | None:
        """The active controller's listener as this node knows it (None: no leader known)."""
        leader = self.driver.endpoints.get(self.driver.leader_id)
        return None if leader is None else (leader.host, leader.port)

    async def wait_cluster_id(self) -> str:
        """The cluster id, once formatted or learnt from the quorum (raises if the node failed first)."""
        assert self._cluster_id_known is not None and self.failed is not None
        known: asyncio.Future[Any] = asyncio.ensure_future(self._cluster_id_known.wait())
        try:
            await asyncio.wait([known, self.failed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            known.cancel()
        if self.cluster_id is None:
            raise RuntimeError(f"{self.role} stopped before the cluster id was known: {self.failed.result()}")
        return self.cluster_id
