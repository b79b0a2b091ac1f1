"""Request handlers, one module per API family, registered by api key with the versions they implement.

A handler is ``handler(broker, request_context, request) -> response`` (sync or async; ``broker`` is typed as
:class:`klog.broker.handlers.context.HandlerBroker`, what handlers read of the broker state); it returns the
response Struct/dict, or None when no response is sent (acks=0 produce). Handlers speak in topics,
partitions and offsets; the partition manager owns logs and watermarks. :func:`klog.broker.handlers.catalog.load_all`
imports every handler module (this package imports none of them, so they may import it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from klog.broker.run_now import finish_in, start_now
from klog.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from klog.broker.handlers.context import HandlerBroker
    from klog.protocol.messages import RequestHeader


class CloseConnection(Exception):
    """Raised by a handler to close the client's connection after answers to earlier requests are sent
    (Kafka closes an acks=0 producer's connection when a partition failed, so the client notices)."""


class AnswerWhenReplicated:
    """What a handler returns when every effect of the request is applied and only its answer waits (acks=all
    produce: the batches are appended, the ISR is still fetching them). The connection may then process the
    next produce request while this one waits: appends keep request order and so do answers (see
    ``klog.produce.pipeline.depth``). ``answer`` is awaited for the response; it must hold no view of the request's
    bytes (they count as released once the next request is taken)."""

    __slots__ = ("answer",)

    def __init__(self, answer: Coroutine[Any, Any, Any]) -> None:
        self.answer = answer


T = TypeVar("T")


def answer_now(coroutine: Coroutine[Any, Any, T]) -> T | Coroutine[Any, Any, T]:
    """Runs an asynchronous handler's ``coroutine`` at once, in the caller's turn of the event loop, as a synchronous
    handler: its answer when it finishes without waiting, else a coroutine that finishes it (a synchronous
    handler's slow path, which the connection awaits). A request answered so is answered in the read callback
    instead of waking the connection's task for it (a transactional producer's AddPartitionsToTxn and EndTxn, which
    wait for nothing when their ``__transaction_state`` partition is not replicated). It runs in a context of its
    own, as a task would (``klog.broker.run_now``)."""
    finished, value, context = start_now(coroutine)
    if finished:
        return value  # type: ignore[no-any-return]
    return finish_in(context, coroutine, value)


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    #: ``func(broker, request_context, request)``: the broker is the broker state (see handlers.context)
    func: Callable[[HandlerBroker, RequestContext, Any], Any]
    is_async: bool


REGISTRY: dict[int, Handler] = {}


def handler(api_key: int, min_version: int, max_version: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``func`` for ``api_key`` at versions ``min_version..max_version`` (what klog implements and
    tests; the advertised range is further capped by what klog.protocol encodes)."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        REGISTRY[api_key] = Handler(api_key, min_version, max_version, func, inspect.iscoroutinefunction(func))
        return func

    return register


@dataclass
class RequestContext:
    """Per-request facts a handler may need besides the body."""

    header: RequestHeader
    client_host: str
    client_port: int
    connection_id: int
    #: fetched records may be answered as file regions (sendfile on plaintext; on TLS the writer reads and encrypts
    #: them a slice at a time); False with sendfile off on plaintext: as bytes
    zero_copy: bool = True
    #: the listener the request came through (Metadata answers with that listener's advertised address)
    listener: str = "PLAINTEXT"
    #: who sent the request (User:ANONYMOUS until the listener authenticates its connections)
    principal: KafkaPrincipal = ANONYMOUS
    #: the connection's SASL login state on a SASL listener (klog.broker.handlers.sasl.ConnectionAuth), else None
    session: Any = None
    #: (name, version) the connection's client gave in ApiVersions v3+ (KIP-511), empty until then
    client_software: tuple[str, str] = ("", "")

    @property
    def api_version(self) -> int:
        return int(self.header.api_version)
