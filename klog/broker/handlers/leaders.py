"""What a broker answers for a partition it does not lead (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch).

Kafka's ReplicaManager: a partition the cluster has but this broker holds no log of answers
NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and re-routes), one the cluster does not have
UNKNOWN_TOPIC_OR_PARTITION. KIP-951: Produce (v10+) and Fetch (v12+ per partition, v16+ endpoints) name the
current leader and epoch, and list the endpoints of the leaders named, so a client re-routes without a
Metadata round trip.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers.context import HandlerBroker

if TYPE_CHECKING:
    from klog.protocol.message_types import ProduceResponseLeaderIdAndEpoch, ProduceResponseNodeEndpoint

__all__ = ["current_leader", "leader_endpoints", "not_led"]


def not_led(broker: HandlerBroker, topic: str, partition: int) -> tuple[int, int, int]:
    """(error code, current leader id, leader epoch) for ``topic``-``partition`` when this broker has no log of
    it: NOT_LEADER_OR_FOLLOWER with the image's leader (-1 when it has none), or UNKNOWN_TOPIC_OR_PARTITION
    with -1, -1."""
    registration = broker.metadata.partition(topic, partition)
    if registration is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    return errors.NOT_LEADER_OR_FOLLOWER, registration.leader, registration.leader_epoch


def leader_endpoints(broker: HandlerBroker, listener: str, leader_ids: Iterable[int]
                     ) -> list[ProduceResponseNodeEndpoint]:
    """KIP-951's NodeEndpoints: the ``listener`` address of each live leader named (Produce's and Fetch's
    NodeEndpoint have the same fields)."""
    from klog.broker.handlers.metadata import broker_entry

    brokers = broker.metadata.image.brokers
    return [broker_entry(broker, listener, b) for b in sorted(set(leader_ids))
            if b == broker.node_id or (b in brokers and not brokers[b].fenced)]


def current_leader(broker: HandlerBroker, topic: str, partition: int,
                   leaders: set[int]) -> tuple[int, ProduceResponseLeaderIdAndEpoch | None]:
    """(error code, KIP-951 CurrentLeader or None) for a partition this broker does not lead; a live leader named
    joins ``leaders`` (whose endpoints the response lists)."""
    code, leader, leader_epoch = not_led(broker, topic, partition)
    if code != errors.NOT_LEADER_OR_FOLLOWER:
        return code, None
    if leader >= 0:
        leaders.add(leader)
    return code, {"leader_id": leader, "leader_epoch": leader_epoch}
