"""Requests any broker accepts and the active controller decides (Kafka 4's ``ForwardingManager``).

A KRaft broker does not answer CreateTopics, DeleteTopics, CreatePartitions, CreateAcls, DeleteAcls, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, UnregisterBroker,
AddRaftVoter or RemoveRaftVoter itself: it sends them to the active controller over the controller
listener and relays the answer. klog's combined nodes do the same: the node that leads the quorum decides locally
(authorized as the client by this broker), any other sends the request, at the client's version, to the controller
listener of the leader its Raft member knows, wrapped in an EnvelopeRequest (API 58, KIP-590) naming the client's
principal and address: the controller authorizes it as that client with its own authorizer (this broker's
``authorizer.class.name`` plays no part, as on Kafka), and needs ClusterAction of the broker itself for the envelope.
An envelope the controller refuses is relayed as UNKNOWN_SERVER_ERROR on every item, as Kafka's brokers do. A
controller that lost its leadership meanwhile answers NOT_CONTROLLER on every item; the broker then tries again
(the next leader, or the same once one is elected) until the request's own ``timeout_ms`` (or
:data:`DEFAULT_FORWARD_TIMEOUT_MS` for requests without one) has passed, and only then relays NOT_CONTROLLER.

Pure part: :func:`item_error_codes`, :func:`controller_moved`, :func:`forward_timeout_ms`. IO part:
:class:`ControllerForwarder`.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from klog.broker.controller_channel import controller_security
from klog.client.stream_login import open_logged_in
from klog.broker.handlers import Handler, authz
from klog.controller.authorize import refusal
from klog.protocol import ProtocolError, decode_response, encode_request
from klog.protocol.errors import ErrorCode
from klog.protocol.struct import field_of
from klog.security.principal import KafkaPrincipal, serialize_principal

log = logging.getLogger("klog.broker.forwarding")

__all__ = ["FORWARDED_APIS", "ControllerForwarder", "controller_moved", "forward_timeout_ms", "forwarding_handlers",
           "item_error_codes"]

#: api key -> (name, the path to the response's per-item results, a nested list per step): what Kafka's brokers
#: forward and klog serves.
FORWARDED_APIS: dict[int, tuple[str, tuple[str, ...]]] = {
    19: ("CreateTopics", ("topics",)),
    20: ("DeleteTopics", ("responses",)),
    30: ("CreateAcls", ("results",)),
    31: ("DeleteAcls", ("filter_results",)),
    33: ("AlterConfigs", ("responses",)),
    37: ("CreatePartitions", ("results",)),
    43: ("ElectLeaders", ("replica_election_results", "partition_result")),
    44: ("IncrementalAlterConfigs", ("responses",)),
    45: ("AlterPartitionReassignments", ("responses", "partitions")),
    46: ("ListPartitionReassignments", ()),   # the top-level error code
    49: ("AlterClientQuotas", ("entries",)),
    51: ("AlterUserScramCredentials", ("results",)),
    57: ("UpdateFeatures", ()),   # the top-level error code
    38: ("CreateDelegationToken", ()),
    39: ("RenewDelegationToken", ()),
    40: ("ExpireDelegationToken", ()),
    64: ("UnregisterBroker", ()),   # decided by the active controller's broker lifecycle, not its ControllerApis
    80: ("AddRaftVoter", ()),       # decided by the quorum leader (klog.controller.voter_changes)
    81: ("RemoveRaftVoter", ()),
}
#: forwarded APIs whose handlers call the forwarder themselves (after Kafka's broker-side checks, with the
#: client's principal: klog.broker.handlers.tokens), not wrapped by :func:`forwarding_handlers`
SELF_FORWARDING_APIS = frozenset({38, 39, 40})
#: How long a forwarded request without a timeout_ms of its own is retried (Kafka's request.timeout.ms default).
DEFAULT_FORWARD_TIMEOUT_MS = 30_000
#: The longest a client's timeout_ms keeps a forwarded request retrying (a bound on a request's life here).
MAX_FORWARD_TIMEOUT_MS = 120_000
#: Pause between tries while no controller is known or the one tried moved.
FORWARD_RETRY_BACKOFF_MS = 100
#: The largest answer read back from a controller (forwarded answers list one small result per item).
MAX_FORWARDED_RESPONSE_BYTES = 16 << 20
NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER
#: what an answer that decided nothing, its sender not leading, carries: the quorum's voter changes are the Raft
#: leader's to decide (a voter that lost or gave up the lead, e.g. by removing itself, answers
#: NOT_LEADER_OR_FOLLOWER), the rest the active controller's
_NOT_LEADING = {80: frozenset({NOT_CONTROLLER, ErrorCode.NOT_LEADER_OR_FOLLOWER}),
                81: frozenset({NOT_CONTROLLER, ErrorCode.NOT_LEADER_OR_FOLLOWER})}
_NOT_ACTIVE_CONTROLLER = frozenset({NOT_CONTROLLER})
#: EnvelopeRequest (KIP-590): its api key and the version klog sends (Kafka's only one)
ENVELOPE_API_KEY, ENVELOPE_VERSION = 58, 0
_SIZE = struct.Struct(">i")


class EnvelopeRefused(Exception):
    """The controller answered an envelope with an error of its own (``code``): the request was not decided."""

    def __init__(self, code: int) -> None:
        super().__init__(f"the controller refused the envelope: {ErrorCode(code).name}")
        self.code = code


def envelope(api_key: int, version: int, correlation_id: int, client_id: str | None, request: Any,
             principal: KafkaPrincipal, client_host: str) -> dict[str, Any]:
    """The EnvelopeRequest of a client's request: the request as the client could have sent it (header and body,
    without the size prefix), its principal (Kafka's DefaultPrincipalData) and its address's bytes."""
    return {"request_data": encode_request(api_key, version, correlation_id, client_id, request)[_SIZE.size:],
            "request_principal": serialize_principal(principal),
            "client_host_address": _address_bytes(client_host)}


def _address_bytes(host: str) -> bytes:
    """A client address's 4 or 16 bytes (an IPv6 scope dropped; a host that is no address: 0.0.0.0's)."""
    try:
        return ipaddress.ip_address(host.partition("%")[0]).packed
    except ValueError:
        return bytes(4)


def item_error_codes(api_key: int, response: Any) -> list[int]:
    """The error code of each item of a forwarded API's response (dict or decoded Struct)."""
    items = [response]
    for step in FORWARDED_APIS[api_key][1]:
        items = [nested for item in items for nested in (field_of(item, step) or [])]
    return [int(field_of(item, "error_code")) for item in items]


def controller_moved(api_key: int, response: Any) -> bool:
    """True when the answer says only that its sender is not the active controller (every item NOT_CONTROLLER; a
    voter change's also NOT_LEADER_OR_FOLLOWER): the request decided nothing and may be sent again to the new
    controller."""
    codes = item_error_codes(api_key, response)
    not_leading = _NOT_LEADING.get(api_key, _NOT_ACTIVE_CONTROLLER)
    return bool(codes) and all(code in not_leading for code in codes)


def forward_timeout_ms(request: Any) -> int:
    """How long to keep trying: the request's timeout_ms (CreateTopics, DeleteTopics, CreatePartitions; one of
    0 or less still gets one try per known controller), else :data:`DEFAULT_FORWARD_TIMEOUT_MS`."""
    timeout = field_of(request, "timeout_ms")
    if timeout is None:
        return DEFAULT_FORWARD_TIMEOUT_MS
    return max(0, min(int(timeout), MAX_FORWARD_TIMEOUT_MS))


class ControllerForwarder:
    """Forwards for the broker of a combined node. ``driver``: its Raft member's driver (``is_leader``,
    ``leader_id``, ``endpoints``: each quorum member's controller listener)."""

    def __init__(self, node_id: int, driver: Any, *, backoff_ms: int = FORWARD_RETRY_BACKOFF_MS) -> None:
        self.node_id = node_id
        self.driver = driver
        self.backoff_ms = backoff_ms
        self._correlation = 0
        #: forwarded requests answered by another node's controller (a figure for tests and metrics)
        self.forwarded = 0

    async def handle(self, api_key: int, version: int, client_id: str | None, request: Any,
                     decide_locally: Callable[[], Awaitable[Any]], *, principal: KafkaPrincipal | None = None,
                     client_host: str = "0.0.0.0") -> Any:
        """The answer of the active controller: ``decide_locally()`` while this node leads, else the leader's
        answer over its controller listener (in an envelope naming ``principal`` from ``client_host`` when one is
        given); retried while the controller moves, until the request's timeout."""
        deadline = time.monotonic() + forward_timeout_ms(request) / 1000
        last: Any = None
        while True:
            answer: Any = None
            if self.driver.is_leader:
                answer = await decide_locally()
            else:
                leader = self.driver.leader_id
                voter = self.driver.endpoints.get(leader) if leader else None
                if voter is not None:
                    try:
                        answer = await self._send(voter.host, voter.port, api_key, version, client_id, request,
                                                  max(deadline - time.monotonic(), 1.0), principal, client_host)
                        self.forwarded += 1
                    except EnvelopeRefused as refused:
                        if refused.code != NOT_CONTROLLER:
                            log.warning("forwarding %s to the controller %d at %s:%d: %s (does this broker's "
                                        "principal have ClusterAction on the controller?)",
                                        FORWARDED_APIS[api_key][0], leader, voter.host, voter.port, refused)
                            return refusal(api_key, version, request, ErrorCode.UNKNOWN_SERVER_ERROR,
                                           "The controller refused the forwarded request's envelope.")
                    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError) as exc:
                        log.info("forwarding %s to the controller %d at %s:%d failed: %s; retrying",
                                 FORWARDED_APIS[api_key][0], leader, voter.host, voter.port, exc)
            if answer is not None:
                if not controller_moved(api_key, answer):
                    return answer
                last = answer
            if time.monotonic() >= deadline:
                # no controller decided it in time: the last NOT_CONTROLLER answer, or this node's own
                return last if last is not None else await decide_locally()
            await asyncio.sleep(self.backoff_ms / 1000)

    async def _send(self, host: str, port: int, api_key: int, version: int, client_id: str | None, request: Any,
                    timeout_s: float, principal: KafkaPrincipal | None = None, client_host: str = "0.0.0.0") -> Any:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        own_client_id = f"klog-broker-{self.node_id}-forwarding"
        reader, writer = await open_logged_in(host, port, controller_security(self), timeout_s,
                                              client_id=own_client_id)
        try:
            if principal is None:
                writer.write(encode_request(api_key, version, correlation, client_id, request))
            else:
                writer.write(encode_request(ENVELOPE_API_KEY, ENVELOPE_VERSION, correlation, own_client_id, envelope(
                    api_key, version, correlation, client_id, request, principal, client_host)))
            await writer.drain()
            (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(_SIZE.size), timeout_s))
            if not 0 < size <= MAX_FORWARDED_RESPONSE_BYTES:
                raise ProtocolError(f"the controller answered a {size}-byte frame (limit "
                                    f"{MAX_FORWARDED_RESPONSE_BYTES})", field="size", offset=0)
            frame = await asyncio.wait_for(reader.readexactly(size), timeout_s)
            if principal is not None:
                frame = _opened(correlation, frame)
            got, response = decode_response(api_key, version, frame)
            if got != correlation:
                raise ProtocolError(f"the controller answered correlation id {got}, not {correlation}",
                                    field="correlation_id", offset=0)
            return response
        finally:
            writer.close()


def _opened(correlation: int, frame: bytes) -> bytes:
    """The enveloped response inside an EnvelopeResponse ``frame``; EnvelopeRefused for an envelope error."""
    got, answer = decode_response(ENVELOPE_API_KEY, ENVELOPE_VERSION, frame)
    if got != correlation:
        raise ProtocolError(f"the controller answered correlation id {got}, not {correlation}",
                            field="correlation_id", offset=0)
    if answer.error_code:
        raise EnvelopeRefused(int(answer.error_code))
    if answer.response_data is None:
        raise ProtocolError("the controller answered an envelope without its response", field="response_data",
                            offset=0)
    return bytes(answer.response_data)


def forwarding_handlers(handlers: Mapping[int, Handler], forwarder: ControllerForwarder) -> dict[int, Handler]:
    """``handlers`` with those of :data:`FORWARDED_APIS` answering through ``forwarder`` (a new table: the
    registry itself is shared by every broker of a process)."""
    out = dict(handlers)
    for api_key in FORWARDED_APIS:
        entry = handlers.get(api_key)
        if entry is None or api_key in SELF_FORWARDING_APIS:
            continue

        async def forward(broker: Any, ctx: Any, request: Any, entry: Handler = entry) -> Any:
            def send(allowed: Any) -> Any:
                """This node's decision while it leads (its handler authorizes the client), else the controller's
                (which authorizes the client the envelope names)."""
                async def decide_locally() -> Any:
                    answer = entry.func(broker, ctx, allowed)
                    return await answer if inspect.isawaitable(answer) else answer

                return forwarder.handle(entry.api_key, ctx.api_version, ctx.header.client_id, allowed,
                                        decide_locally, principal=ctx.principal, client_host=ctx.client_host)

            authz.refuse_unparsable(entry.api_key, ctx, request)
            if entry.api_key in (33, 44):   # Kafka's broker-side checks (its own TLS stores...), before the controller
                from klog.broker.handlers.configs import preprocessed

                return await authz.guard(entry.api_key, broker, ctx, request, lambda allowed: preprocessed(
                    broker, allowed, send, incremental=entry.api_key == 44))
            return await send(request)

        out[api_key] = Handler(entry.api_key, entry.min_version, entry.max_version, forward, True)
    return out
