"""DescribeClientQuotas (48: what ClientQuotaRecords say), AlterClientQuotas (49, decided by the controller:
klog.controller.quotas) and
DescribeUserScramCredentials (50), answered from this broker's metadata image, and AlterUserScramCredentials
(51), decided by the controller (klog.controller.scram; a quorum member's broker forwards it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.apis import CONTROLLER_API_VERSIONS
from klog.controller.scram import describe_client_quotas, describe_user_scram_credentials

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    )


@handler(50, 0, 0)
def handle_describe_user_scram_credentials(broker: HandlerBroker, ctx: RequestContext,
                                           request: DescribeUserScramCredentialsRequest
                                           ) -> DescribeUserScramCredentialsResponse:
    if not authz.allowed_cluster(broker, ctx, authz.AclOperation.DESCRIBE):
        # Kafka's error response: one unnamed result per user asked for (a null list: none; Kafka 4.3 fails on
        # that one with a NullPointerException and never answers)
        code = errors.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None,
                "results": [{"user": "", "error_code": code, "error_message": None}
                            for _ in request.users or ()]}
    users = None if request.users is None else [u.name for u in request.users]
    return describe_user_scram_credentials(users, broker.metadata.image)


@handler(51, *CONTROLLER_API_VERSIONS[51])
async def handle_alter_user_scram_credentials(broker: HandlerBroker, ctx: RequestContext,
                                              request: AlterUserScramCredentialsRequest
                                              ) -> AlterUserScramCredentialsResponse:
    return await authz.guard(51, broker, ctx, request, broker.controller_apis.alter_user_scram_credentials)


@handler(48, 0, 1)
def handle_describe_client_quotas(broker: HandlerBroker, ctx: RequestContext, request: DescribeClientQuotasRequest
                                  ) -> DescribeClientQuotasResponse:
    if not authz.allowed_cluster(broker, ctx, authz.AclOperation.DESCRIBE_CONFIGS):   # as Kafka's KafkaApis
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "entries": None}
    return describe_client_quotas(list(request.components), bool(request.strict), broker.metadata.image)


@handler(49, *CONTROLLER_API_VERSIONS[49])
async def handle_alter_client_quotas(broker: HandlerBroker, ctx: RequestContext, request: AlterClientQuotasRequest
                                     ) -> AlterClientQuotasResponse:
    return await authz.guard(49, broker, ctx, request, broker.controller_apis.alter_client_quotas)
