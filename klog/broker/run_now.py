"""Running a coroutine at once, in the caller's turn of the event loop, and finishing it in a task only when it has to
wait: what a request answered in the read callback (``klog.broker.handlers.answer_now``) and a transaction's marker
writes (``klog.broker.transactions.coordinator``) do instead of starting a task for work that usually waits for
nothing (a task costs its creation, its registration and a loop turn per step)."""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_now(coroutine: Coroutine[Any, Any, T]) -> tuple[bool, Any, contextvars.Context]:
    """Runs ``coroutine``'s first step in a context of its own, as a task would (context variables it sets are its
    own from its first step to its last, wherever it resumes): (True, its result, context) when it finished, else
    (False, what it waits for, context) for :func:`finish_in`."""
    context = contextvars.copy_context()
    try:
        waiting = context.run(coroutine.send, None)
    except StopIteration as done:
        return True, done.value, context
    return False, waiting, context


async def finish_in(context: contextvars.Context, coroutine: Coroutine[Any, Any, T], waiting: Any) -> T:
    """Goes on with a coroutine :func:`start_now` left at ``waiting``, each step in ``context``."""
    answer: T = await _Resumed(context, coroutine, waiting)
    return answer


class _Resumed:
    """Awaiting it goes on with a coroutine stopped at ``waiting`` (what it yielded: the future it waits for, or
    None for a bare yield), each step in ``context``; what the awaiting task is sent or thrown goes to it."""

    __slots__ = ("context", "coroutine", "waiting")

    def __init__(self, context: contextvars.Context, coroutine: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self.context = context
        self.coroutine = coroutine
        self.waiting = waiting

    def __await__(self) -> Generator[Any, Any, Any]:
        run, coroutine, waiting = self.context.run, self.coroutine, self.waiting
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # noqa: BLE001 - a cancellation (or any error) goes to the coroutine
                try:
                    waiting = run(coroutine.throw, exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting = run(coroutine.send, sent)
                except StopIteration as done:
                    return done.value
