"""The in-order response pipeline (produce pipelining, ``klog.produce.pipeline.depth``).

Kafka answers a connection's requests one at a time, so an acks=all producer gets one request's worth of records
replicated per ISR round trip per connection, whatever its max.in.flight. klog appends the next produce requests
of the connection while earlier ones wait for the ISR: appends and answers keep request order, and any other
request is processed only once every earlier answer is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

#: awaits a handler's answer and sends it: (answer, request header, perf_counter at the start, request)
Finish = Callable[[Coroutine[Any, Any, Any], Any, float, Any], Coroutine[Any, Any, None]]


class ResponsePipeline:
    """A connection's produce answers that wait (acks=all), oldest first: each task sends its answer after the
    one before it."""

    __slots__ = ("loop", "depth", "answers", "finish", "flush", "fail")

    def __init__(self, loop: asyncio.AbstractEventLoop, depth: int, *, finish: Finish, flush: Callable[[], None],
                 fail: Callable[[Exception], None]) -> None:
        self.loop = loop
        #: klog.produce.pipeline.depth: answers that may wait before the connection stops taking requests
        self.depth = depth
        #: the waiting answers, oldest first (at most ``depth``: a list, which unlike a deque holds no block of its
        #: own while empty, as on every connection without acks=all produce requests)
        self.answers: list[asyncio.Task[None]] = []
        #: sends an answer (the connection's dispatch)
        self.finish = finish
        #: writes the responses the connection coalesced
        self.flush = flush
        #: closes the connection over an exception from sending an answer
        self.fail = fail

    def answer_in_turn(self, answer: Coroutine[Any, Any, Any], header: Any,
                       started: float) -> Coroutine[Any, Any, None] | None:
        """Send ``answer``'s response after those of earlier produce requests. Returns what the connection
        awaits before taking its next request: nothing while fewer than ``depth`` answers wait, else the oldest
        answer. The request itself is not kept: its bytes count as released once the next request is taken
        (request memory), so nothing may hold views of them meanwhile."""
        answers = self.answers
        previous = answers[-1] if answers else None
        task = self.loop.create_task(self._send_in_turn(previous, answer, header, started))
        answers.append(task)
        if len(answers) >= self.depth:
            return _answer_sent(answers[0])
        return None

    async def _send_in_turn(self, previous: asyncio.Task[None] | None, answer: Coroutine[Any, Any, Any],
                            header: Any, started: float) -> None:
        this = asyncio.current_task()
        try:
            if previous is not None:
                await previous
            await self.finish(answer, header, started, None)
            self.flush()
        except asyncio.CancelledError:
            pass   # the connection closed
        except Exception as exc:
            self.fail(exc)
        finally:
            answer.close()   # no-op once it ran; a coroutine never started must not be left unawaited
            answers = self.answers
            if answers and answers[0] is this:
                del answers[0]
            elif this is not None and this in answers:   # cancelled out of turn: the connection closed
                answers.remove(this)

    async def when_answered(self, then: Coroutine[Any, Any, None]) -> None:
        """Await ``then`` once every waiting produce answer is sent."""
        try:
            while self.answers:
                await self.answers[-1]
        except BaseException:
            then.close()
            raise
        await then

    def cancel(self) -> None:
        """The connection is lost: its waiting answers will never be sent."""
        for answer in self.answers:
            answer.cancel()


async def _answer_sent(answer: asyncio.Task[None]) -> None:
    await answer
