"""DescribeCluster (60), DescribeQuorum (55), and the controller requests Kafka's brokers forward without deciding
anything themselves: UnregisterBroker (64, ``kafka-cluster unregister``), AddRaftVoter (80) and RemoveRaftVoter
(81) (``kafka-metadata-quorum --bootstrap-server add-controller / remove-controller``). A quorum member's broker
forwards these to the active controller (klog.broker.forwarding, in an envelope naming the client); the handlers
below are what the node that is the active controller answers itself."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.metadata import broker_entry

if TYPE_CHECKING:
    from klog.protocol import Struct
    from klog.protocol.message_types import (
        DescribeClusterRequest,
        DescribeClusterResponse,
        AddRaftVoterRequest,
        AddRaftVoterResponse,
        DescribeQuorumRequest,
        DescribeQuorumResponse,
        RemoveRaftVoterRequest,
        UnregisterBrokerRequest,
        UnregisterBrokerResponse,
    )


@handler(60, 0, 2)
def handle_describe_cluster(broker: HandlerBroker, ctx: RequestContext, request: DescribeClusterRequest
                            ) -> DescribeClusterResponse:
    from klog.controller.describe_quorum import BROKER_ENDPOINT, describe_cluster_refusal

    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    refused = describe_cluster_refusal(ctx.api_version, BROKER_ENDPOINT, endpoint_type)
    if refused is not None:   # a broker's listener describes the brokers only (Kafka's KafkaApis)
        return refused
    include_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    # v2 (KIP-1073): fenced brokers too when asked for, flagged is_fenced
    include_fenced = bool(getattr(request, "include_fenced_brokers", False))
    image = broker.metadata.image
    listed = [b for _, b in sorted(image.brokers.items()) if include_fenced or not b.fenced]
    return {
        "throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None, "endpoint_type": endpoint_type,
        "cluster_id": broker.cluster_id, "controller_id": broker.metadata.controller_id,
        "brokers": [{"broker_id": e["node_id"], "host": e["host"], "port": e["port"], "rack": e["rack"],
                     "is_fenced": b.fenced} for b in listed for e in (broker_entry(broker, ctx.listener, b.id),)],
        "cluster_authorized_operations": authz.cluster_operations(broker, ctx) if include_ops
        else errors.AUTHORIZED_OPERATIONS_OMITTED,
    }


@handler(55, 0, 2)
async def handle_describe_quorum(broker: HandlerBroker, ctx: RequestContext, request: DescribeQuorumRequest
                                 ) -> DescribeQuorumResponse | Struct:
    """A combined node of a multi-node quorum describes it (forwarded to the active controller, as Kafka's
    brokers do: then the answer is the leader's decoded response); the single-node ``klog-broker`` describes its
    quorum of one (its metadata log's single voter)."""
    from klog.controller.describe_quorum import (
        describe_quorum_response,
        forward_describe_quorum,
        single_voter_status,
    )
    from klog.protocol import ProtocolError

    if not authz.allowed_cluster(broker, ctx, authz.AclOperation.DESCRIBE):
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "error_message": "Cluster authorization failed.",
                "topics": [], "nodes": []}
    listener = broker.controller_listener
    if listener is not None:
        return await listener.describe_quorum_forwarded(request, ctx.api_version)
    observer = broker.metadata.controller
    if observer is not None:   # a broker-only node asks the active controller it follows
        leader = observer.driver.cfg.voters.get(observer.driver.leader_id)
        if leader is not None:
            try:
                return await forward_describe_quorum(leader, ctx.api_version, request,
                                                     security=observer.driver.cfg.client_security)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError):
                pass
        return describe_quorum_response(None, request)
    single = getattr(broker.metadata, "quorum", None)   # klog.controller.single_voter.SingleVoterQuorum
    if single is None:
        return describe_quorum_response(None, request)
    status = single_voter_status(broker.node_id, single.epoch, single.committed_end, single.log.log_end_offset)
    return describe_quorum_response(status, request)


def _cluster_alter_refusal(broker: HandlerBroker, ctx: RequestContext) -> dict[str, Any] | None:
    """Alter on the Cluster, which Kafka's controller checks for these three (its ControllerApis)."""
    from klog.controller.describe_quorum import cluster_authorization_failed

    if authz.allowed_cluster(broker, ctx, authz.AclOperation.ALTER):
        return None
    return cluster_authorization_failed()


@handler(64, 0, 0)
async def handle_unregister_broker(broker: HandlerBroker, ctx: RequestContext, request: UnregisterBrokerRequest
                                   ) -> UnregisterBrokerResponse | dict[str, Any]:
    """On the active controller's node: its controller decides (klog.controller.broker_service); on a single
    voter, its own metadata (klog.controller.apis.ControllerApis.unregister_broker)."""
    refused = _cluster_alter_refusal(broker, ctx)
    if refused is not None:
        return refused
    listener = broker.controller_listener
    if listener is not None:
        return cast("UnregisterBrokerResponse", await _answered(listener.handle(64, request, ctx.header)))
    return await broker.controller_apis.unregister_broker(int(request.broker_id))


@handler(80, 0, 1)
async def handle_add_raft_voter(broker: HandlerBroker, ctx: RequestContext, request: AddRaftVoterRequest
                                ) -> AddRaftVoterResponse | dict[str, Any]:
    return await _voter_change(broker, ctx, 80, request)


@handler(81, 0, 0)
async def handle_remove_raft_voter(broker: HandlerBroker, ctx: RequestContext, request: RemoveRaftVoterRequest
                                   ) -> AddRaftVoterResponse | dict[str, Any]:
    return await _voter_change(broker, ctx, 81, request)


async def _voter_change(broker: HandlerBroker, ctx: RequestContext, api_key: int,
                        request: AddRaftVoterRequest | RemoveRaftVoterRequest) -> dict[str, Any]:
    """The quorum leader's node decides (klog.controller.voter_changes); a single voter's quorum is static, as a
    Kafka quorum of ``controller.quorum.voters`` (kraft.version 0): UNSUPPORTED_VERSION."""
    from klog.controller.voter_changes import static_quorum_refusal

    refused = _cluster_alter_refusal(broker, ctx)
    if refused is not None:
        return refused
    listener = broker.controller_listener
    if listener is None:
        return dict(static_quorum_refusal())
    return dict(await _answered(listener.handle(api_key, request, ctx.header)))


async def _answered(answer: Any) -> Any:
    return answer if isinstance(answer, Mapping) else await answer
