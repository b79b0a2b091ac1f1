"""A private asyncio event loop running on a background thread (the engine behind the sync clients)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["LoopThread", "new_event_loop"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when installed (it is a klog dependency on POSIX), else asyncio's default."""
    try:
        import uvloop

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - Windows
        return asyncio.new_event_loop()


class LoopThread:
    """Runs an event loop on a daemon thread; :meth:`run` executes a coroutine there and waits for it."""

    def __init__(self, name: str) -> None:
        self.loop = new_event_loop()
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._started.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for t in pending:
                    t.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; returns a concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (``timeout`` seconds; the coroutine is cancelled
        if it runs out)."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("blocking call made from the client's own event-loop thread (e.g. in a callback)")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise
        except BaseException:
            if not fut.done():
                fut.cancel()
            raise

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and join the thread (idempotent)."""
        if self.thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # already closed
                pass
            if threading.current_thread() is not self.thread:
                self.thread.join(timeout)
