"""EnvelopeRequest (API 58, KIP-590) on the controller listener: a broker forwards a client's request wrapped in an
envelope naming the client's principal and address, and the controller decides it as that client.

:func:`open_envelope` unwraps one, as Kafka's ``EnvelopeUtils.handleEnvelopeRequest``: the principal (Kafka's
``DefaultPrincipalData``; unreadable: PRINCIPAL_DESERIALIZATION_FAILURE), the client's address (not 4 or 16 bytes:
INVALID_REQUEST), then the request (an API that is not forwarded, a version not served or a body that does not parse:
INVALID_REQUEST / UNSUPPORTED_VERSION on the envelope). The request's answer goes back inside the envelope's, with
the request's correlation id. Whether the sender may send envelopes at all (ClusterAction on the Cluster) is the
listener's question, asked before this.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from klog.protocol import ProtocolError, decode_request, decode_request_header, encode_response
from klog.protocol.errors import ErrorCode
from klog.security.principal import KafkaPrincipal, deserialize_principal

if TYPE_CHECKING:
    from klog.protocol.message_types import EnvelopeRequest, EnvelopeResponse
    from klog.protocol.messages import RequestHeader

__all__ = ["ENVELOPE_API_KEY", "ENVELOPE_VERSIONS", "EnvelopedDecider", "open_envelope"]

log = logging.getLogger("klog.controller.envelope")

ENVELOPE_API_KEY = 58
#: the versions served (Kafka's only one)
ENVELOPE_VERSIONS = (0, 0)
#: decide(header, request, principal, client host) -> the request's answer
EnvelopedDecider = Callable[["RequestHeader", Any, KafkaPrincipal, str], Awaitable[Any]]


def _refused(code: int) -> EnvelopeResponse:
    return {"error_code": code, "response_data": None}


async def open_envelope(envelope: EnvelopeRequest, forwarded: Mapping[int, tuple[int, int]],
                        decide: EnvelopedDecider) -> EnvelopeResponse:
    """The answer to ``envelope``: its request decided by ``decide`` as the principal it names (``forwarded``: the
    APIs brokers may forward, api key -> (min, max) version)."""
    try:
        principal = deserialize_principal(envelope.request_principal or b"")
    except ValueError as exc:
        log.warning("envelope refused: %s", exc)
        return _refused(ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE)
    address = bytes(envelope.client_host_address)
    if len(address) not in (4, 16):
        log.warning("envelope refused: a %d-byte client address", len(address))
        return _refused(ErrorCode.INVALID_REQUEST)
    host = str(ipaddress.ip_address(address))
    data = bytes(envelope.request_data)
    try:
        header, offset = decode_request_header(data)
        api_key, version = int(header.api_key), int(header.api_version)
        served = forwarded.get(api_key)
        if served is None:
            log.warning("envelope refused: api key %d is not forwarded to the controller", api_key)
            return _refused(ErrorCode.INVALID_REQUEST)
        if not served[0] <= version <= served[1]:
            return _refused(ErrorCode.UNSUPPORTED_VERSION)
        request = decode_request(header, data, offset)
    except ProtocolError as exc:
        log.warning("envelope refused: its request does not parse: %s", exc)
        return _refused(ErrorCode.INVALID_REQUEST)
    answer = await decide(header, request, principal, host)
    frame = b"".join(bytes(chunk) for chunk in encode_response(api_key, version, header.correlation_id, answer))
    return {"error_code": ErrorCode.NONE, "response_data": frame[4:]}   # without the size prefix
