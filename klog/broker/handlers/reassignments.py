"""Partition reassignment: AlterPartitionReassignments (45) and ListPartitionReassignments (46), decided by the
active controller (:class:`klog.controller.apis.ControllerApis`; other nodes forward them,
:mod:`klog.broker.forwarding`). The new replicas reach every broker as PartitionChangeRecords: brokers named in
``adding_replicas`` start following, and a broker no longer among a partition's replicas deletes its copy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.apis import CONTROLLER_API_VERSIONS

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )


@handler(45, *CONTROLLER_API_VERSIONS[45])
async def handle_alter_partition_reassignments(broker: HandlerBroker, ctx: RequestContext,
                                               request: AlterPartitionReassignmentsRequest
                                               ) -> AlterPartitionReassignmentsResponse:
    return await authz.guard(45, broker, ctx, request, lambda r: broker.controller_apis.alter_partition_reassignments(
        r, ctx.api_version))


@handler(46, *CONTROLLER_API_VERSIONS[46])
async def handle_list_partition_reassignments(broker: HandlerBroker, ctx: RequestContext,
                                              request: ListPartitionReassignmentsRequest
                                              ) -> ListPartitionReassignmentsResponse:
    return await authz.guard(46, broker, ctx, request, broker.controller_apis.list_partition_reassignments)
