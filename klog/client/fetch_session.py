"""A fetcher's side of one KIP-227 fetch session with one broker: Kafka's ``FetchSessionHandler``, pure.

Each round the fetcher says which partitions it wants and with what parameters (any hashable value: the fetch
offset, epochs, byte limit...). The first request is full and opens a session; later ones are incremental: they
name only the partitions that are new or whose parameters changed, and forget those no longer wanted (a partition
backing off or throttled this round leaves the session and comes back in full later). The answer to an
incremental request holds only the partitions with news, so a partition absent from it simply has none.

Any failure (a top-level error, a session id the broker did not keep, no answer at all) makes the next request
full again; it names the old session with epoch 0, which closes it on the broker, unless the broker said it does
not know that id.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from klog.protocol.errors import ErrorCode

__all__ = ["FETCH_SESSION_ERRORS", "FETCH_SESSION_VERSION", "FINAL_EPOCH", "INITIAL_EPOCH", "INT32_MAX",
           "INVALID_SESSION_ID", "FetchSessionHandler", "SessionRequest", "next_epoch"]

INVALID_SESSION_ID = 0
#: ``session_epoch`` of a full fetch that opens a session
INITIAL_EPOCH = 0
#: ``session_epoch`` of a sessionless full fetch (and of one that closes a session)
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
#: top-level errors that end a fetch session: the next request, a full one, can go at once (Kafka's fetchers)
FETCH_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                                  ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})
#: the first Fetch version with sessions
FETCH_SESSION_VERSION = 7


def next_epoch(epoch: int) -> int:
    """The epoch a session's fetch after one at ``epoch`` carries (Kafka's ``FetchMetadata.nextEpoch``)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


#: how the fetcher names a partition
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class SessionRequest(Generic[K]):
    """What one Fetch carries for the session: its id and epoch, the partitions to name, those to forget."""

    session_id: int
    session_epoch: int
    to_send: list[K]
    to_forget: list[K]

    @property
    def full(self) -> bool:
        return self.session_epoch == INITIAL_EPOCH


class FetchSessionHandler(Generic[K]):
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        #: the epoch of the next request (0: a full one)
        self.epoch = INITIAL_EPOCH
        #: each partition in the session -> the parameters the broker holds for it
        self.partitions: dict[K, Hashable] = {}
        self._pending: dict[K, Hashable] | None = None

    def build(self, wanted: Mapping[K, Hashable]) -> SessionRequest[K]:
        """The next request for ``wanted`` (partition -> its fetch parameters, in the order to send them)."""
        self._pending = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, list(wanted), [])
        held = self.partitions
        to_send = [key for key, params in wanted.items() if held.get(key) != params]
        to_forget = [key for key in held if key not in wanted]
        return SessionRequest(self.session_id, self.epoch, to_send, to_forget)

    def on_response(self, request: SessionRequest[K], error_code: int, session_id: int) -> bool:
        """The broker's answer to ``request``: False when it was a failure (nothing in it is an answer to the
        partitions; the next request is full)."""
        pending, self._pending = self._pending, None
        if error_code:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self._restart()
            return False
        if request.full:
            if session_id == INVALID_SESSION_ID:   # the broker keeps no session for us: full requests go on
                self._restart()
                self.session_id = INVALID_SESSION_ID
                return True
        elif session_id != request.session_id:
            # the session ended (it was left empty, or the broker answered sessionless): start a new one
            self.session_id = INVALID_SESSION_ID
            self._restart()
            return True
        assert pending is not None
        self.session_id = session_id
        self.epoch = next_epoch(request.session_epoch)
        self.partitions = pending
        return True

    def on_failure(self) -> None:
        """No answer (a lost connection, a timeout): the broker may or may not have taken the request."""
        self._pending = None
        self._restart()

    def _restart(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
