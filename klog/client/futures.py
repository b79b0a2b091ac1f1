"""Per-record futures that cost almost nothing until someone looks at them.

:class:`RecordFuture` is a real :class:`concurrent.futures.Future` (``result``, ``exception``, ``done``,
``add_done_callback`` and ``concurrent.futures.wait``/``as_completed`` all work), but it keeps no state of its
own: it points at its batch (:class:`BatchOutcome`) and its index in it. All futures of a batch share the
batch's condition variable and are completed together by one call, so the producer does no per-record work
when a batch is acknowledged; the :class:`RecordMetadata` of a record is built only when asked for.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .types import RecordMetadata

__all__ = ["BatchOutcome", "RecordFuture", "new_record_future"]

_PENDING = "PENDING"
_FINISHED = "FINISHED"


class BatchOutcome:
    """Completion state shared by all records of one produced batch.

    Completed exactly once (on the client's event loop) with :meth:`succeed` or :meth:`fail`.
    """

    __slots__ = ("topic", "partition", "condition", "state", "base_offset", "log_append_time", "timestamps",
                 "exception", "watched", "batch_callbacks")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.condition = threading.Condition()
        self.state = _PENDING
        self.base_offset = -1
        self.log_append_time = -1
        #: Record timestamps by index (a list, or the batch's RecordAppender), None under LogAppendTime.
        self.timestamps: Sequence[int] | None = None
        self.exception: BaseException | None = None
        #: Futures of this batch that have waiters or callbacks (the only ones needing per-record work).
        self.watched: list[RecordFuture] | None = None
        #: Callables run with this outcome once completed (flush bookkeeping).
        self.batch_callbacks: list[Callable[[BatchOutcome], None]] | None = None

    @property
    def done(self) -> bool:
        return self.state is _FINISHED

    def metadata(self, index: int) -> RecordMetadata:
        ts = self.log_append_time
        if ts == -1 and self.timestamps is not None:
            ts = self.timestamps[index]
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset, ts)

    def succeed(self, base_offset: int, log_append_time: int, timestamps: Sequence[int] | None) -> None:
        with self.condition:
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.timestamps = timestamps
            self.state = _FINISHED
            self.condition.notify_all()
        self._notify()

    def fail(self, exception: BaseException) -> None:
        with self.condition:
            self.exception = exception
            self.state = _FINISHED
            self.condition.notify_all()
        self._notify()

    def _notify(self) -> None:
        watched = self.watched
        if watched:
            for f in watched:
                f._finish()
        cbs = self.batch_callbacks
        if cbs:
            for cb in cbs:
                cb(self)

    def add_batch_callback(self, fn: Callable[[BatchOutcome], None]) -> None:
        """Run ``fn(self)`` on completion (immediately if already complete)."""
        with self.condition:
            if self.state is not _FINISHED:
                if self.batch_callbacks is None:
                    self.batch_callbacks = []
                self.batch_callbacks.append(fn)
                return
        fn(self)


class RecordFuture(tuple, concurrent.futures.Future):  # type: ignore[misc,type-arg]
    """The future returned by ``Producer.send``; resolves to :class:`RecordMetadata`.

    Records cannot be cancelled once sent: :meth:`cancel` returns False, as in Kafka's Java client.

    Implementation note: the producer creates one per record, so construction must be as cheap as possible:
    a RecordFuture is a ``(batch outcome, index)`` tuple underneath (built with ``tuple.__new__``, no Python
    ``__init__``) that is also a real :class:`concurrent.futures.Future`; equality and hashing are by identity.
    """

    __init__ = object.__init__  # type: ignore[assignment]
    __eq__ = object.__eq__  # type: ignore[assignment]
    __ne__ = object.__ne__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]
    __repr__ = concurrent.futures.Future.__repr__

    @property
    def _outcome(self) -> BatchOutcome:
        return self[0]  # type: ignore[no-any-return]

    @property
    def _index(self) -> int:
        return self[1]  # type: ignore[no-any-return]

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        return self._outcome.condition

    @property
    def _state(self) -> str:  # type: ignore[override]
        return self._outcome.state

    @_state.setter
    def _state(self, value: str) -> None:  # only reached through misuse of set_result/set_exception/cancel
        raise RuntimeError("a RecordFuture is completed by the producer, not by its user")

    @property
    def _result(self) -> RecordMetadata | None:  # type: ignore[override]
        o = self._outcome
        if o.state is not _FINISHED or o.exception is not None:
            return None
        return o.metadata(self._index)

    @property
    def _exception(self) -> BaseException | None:  # type: ignore[override]
        return self._outcome.exception

    def _watch(self) -> None:
        # Once per future (it may get both waiters and callbacks), in O(1): a batch holds thousands of records,
        # and scanning its watched list for each would make callbacks on every record quadratic.
        if self.__dict__.get("_watched"):
            return
        self.__dict__["_watched"] = True
        o = self._outcome
        if o.watched is None:
            o.watched = []
        o.watched.append(self)

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        # concurrent.futures.wait() appends to this list under our condition.
        w = self.__dict__.get("_w")
        if w is None:
            w = self.__dict__["_w"] = []
            self._watch()
        return w

    @property
    def _done_callbacks(self) -> list[Callable[[concurrent.futures.Future[Any]], Any]]:  # type: ignore[override]
        cbs = self.__dict__.get("_cbs")
        if cbs is None:
            cbs = self.__dict__["_cbs"] = []
            self._watch()
        return cbs

    def _finish(self) -> None:
        # Called once by the batch after it completed (outside its condition).
        waiters = self.__dict__.get("_w")
        if waiters:
            exc = self._outcome.exception
            for waiter in waiters:
                if exc is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
        if self.__dict__.get("_cbs"):
            self._invoke_callbacks()  # type: ignore[attr-defined]

    def cancel(self) -> bool:
        return False

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def set_result(self, result: Any) -> None:
        raise RuntimeError("a RecordFuture is completed by the producer, not by its user")

    def set_exception(self, exception: BaseException | None) -> None:
        raise RuntimeError("a RecordFuture is completed by the producer, not by its user")


_tuple_new = tuple.__new__


def new_record_future(outcome: BatchOutcome, index: int) -> RecordFuture:
    """The future of record ``index`` of the batch with ``outcome``."""
    return _tuple_new(RecordFuture, (outcome, index))  # type: ignore[no-any-return]
