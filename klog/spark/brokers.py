"""How the Spark source and sink reach the brokers: klog's own client (:class:`klog.client.direct.DirectClient`)
set up from their options, with its errors surfacing as :class:`~klog.spark.errors.BrokerError`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator

from klog.client.cluster import Backoff
from klog.client.direct import DirectClient
from klog.client.errors import KafkaError
from klog.spark.errors import BrokerError

__all__ = ["MAX_ATTEMPTS", "back_off", "broker_errors", "connect"]

#: Requests answered with a retriable error (leader moved, election in progress, ...) are sent this many times,
#: with the metadata refreshed in between (Spark's fetchOffset.numRetries is 3; leader elections take longer).
MAX_ATTEMPTS = 8
#: Back-off between attempts: from 50 ms, doubling up to 1 s.
RETRY_BACKOFF_MS = 50
RETRY_BACKOFF_MAX_MS = 1000
#: Largest response frame accepted: fetch.max.bytes may be exceeded by one batch (KIP-74), and a batch is
#: bounded by an int32; a bigger frame means a broken peer.
MAX_RESPONSE_FRAME_BYTES = 1 << 30

_backoff = Backoff(RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS)


def connect(bootstrap_servers: Iterable[str], *, client_id: str, request_timeout_ms: int,
            security: Iterable[tuple[str, str]] = ()) -> DirectClient:
    """A client for one task (or the driver's planning); connects on first use. ``security``: the
    ``kafka.security.protocol``/``kafka.sasl.*``/``kafka.ssl.*`` options (without their prefix)."""
    with broker_errors():
        return DirectClient(list(bootstrap_servers), client_id=client_id, request_timeout_ms=request_timeout_ms,
                            retries=MAX_ATTEMPTS - 1, retry_backoff_ms=RETRY_BACKOFF_MS,
                            retry_backoff_max_ms=RETRY_BACKOFF_MAX_MS, max_response_bytes=MAX_RESPONSE_FRAME_BYTES,
                            **dict(security))


def back_off(attempt: int) -> None:
    """Sleep before retry number ``attempt`` (0 for the first)."""
    time.sleep(_backoff.delay(attempt))


@contextlib.contextmanager
def broker_errors() -> Iterator[None]:
    """Errors of klog's client surface as :class:`BrokerError` (what klog.spark documents), code kept."""
    try:
        yield
    except KafkaError as e:
        raise BrokerError(str(e) or e.name, e.code) from e
