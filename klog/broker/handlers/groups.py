"""Routing of the consumer-group APIs to ``klog.broker.groups.GroupCoordinator`` (see groups/api.py).

The advertised versions are what the coordinator declares in ``SUPPORTED_APIS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Union

from klog.broker.groups import GroupCoordinator
from klog.broker.groups.api import GROUP_API_KEYS, BrokerContext
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.context import HandlerBroker

if TYPE_CHECKING:
    from klog.broker.cluster_metadata import ClusterMetadata
    from klog.protocol import Struct
    from klog.protocol.message_types import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupHeartbeatRequest,
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        FindCoordinatorRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        ListGroupsRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        SyncGroupRequest,
    )

    #: the requests of GROUP_API_KEYS
    GroupRequest = Union[
        OffsetCommitRequest, OffsetFetchRequest, FindCoordinatorRequest, JoinGroupRequest, HeartbeatRequest,
        LeaveGroupRequest, SyncGroupRequest, DescribeGroupsRequest, ListGroupsRequest, DeleteGroupsRequest,
        OffsetDeleteRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest,
    ]


class CoordinatorHost(BrokerContext, Protocol):
    """The broker state as the coordinator is made over it: what the coordinator reads, and the cluster
    metadata whose images it follows."""

    metadata: ClusterMetadata


def create_coordinator(context: CoordinatorHost) -> GroupCoordinator:
    coordinator = GroupCoordinator(context)
    # a quorum member coordinates the groups of the offsets partitions it leads, which change with each image
    context.metadata.publish_listeners.append(coordinator.on_metadata_published)
    return coordinator


async def route_to_coordinator(broker: HandlerBroker, ctx: RequestContext, request: GroupRequest) -> Struct:
    # the coordinator answers with the response Structs it builds
    response: Struct = await broker.coordinator.handle(ctx.header, request, client_host=ctx.client_host,
                                                       listener=ctx.listener)
    return response


for _api_key in GROUP_API_KEYS:
    # The range is capped by the coordinator's SUPPORTED_APIS and the codec when the table is built.
    handler(_api_key, 0, 2**15 - 1)(route_to_coordinator)
