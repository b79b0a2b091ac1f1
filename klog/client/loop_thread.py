"""A private asyncio event loop running on a background thread (the engine behind the sync clients)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
import _thread
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from .errors import ClientClosedError, KafkaTimeoutError

T = TypeVar("T")
P = ParamSpec("P")
#: The asyncio twin a blocking client wraps (the ``self`` of the methods it exposes).
A = TypeVar("A")

__all__ = ["BlockingClient", "LoopThread", "new_event_loop", "call_in_loop", "blocking", "on_loop", "direct"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when installed (it is a klog dependency on POSIX), else asyncio's default."""
    try:
        import uvloop

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - Windows
        return asyncio.new_event_loop()


def call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
    """Call the plain function ``fn`` on ``loop``'s thread (from another thread) and wait for its result, or its
    exception raised again here; ``timeout``: TimeoutError after that many seconds."""
    fut: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                fut.set_exception(exc)

    loop.call_soon_threadsafe(run)
    return fut.result(timeout)


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

    def run_lean(self, coro: Coroutine[Any, Any, T]) -> T:
        """:meth:`run` without a timeout, for calls made once per record batch (a share consumer's poll): the task
        wakes the caller through a plain lock, where :meth:`run`'s concurrent future chains callbacks and a
        condition variable (about a third less CPU for the hand-off and back). Interrupted (KeyboardInterrupt),
        the call is cancelled."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("blocking call made from the client's own event-loop thread (e.g. in a callback)")
        done = _thread.allocate_lock()
        done.acquire()
        started: list[asyncio.Task[T]] = []

        def start() -> None:
            task = self.loop.create_task(coro)
            started.append(task)
            task.add_done_callback(lambda _: done.release())

        self.loop.call_soon_threadsafe(start)
        try:
            done.acquire()
        except BaseException:
            self.loop.call_soon_threadsafe(lambda: started[0].cancel() if started else None)   # start ran first
            raise
        return started[0].result()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call the plain function ``fn`` on the loop thread and wait for its result: :meth:`run` without a
        coroutine and a task around it (one callback, for calls made once per record batch)."""
        if threading.current_thread() is self.thread:
            raise RuntimeError("blocking call made from the client's own event-loop thread (e.g. in a callback)")
        return call_in_loop(self.loop, fn, *args)

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


_C = TypeVar("_C", bound="BlockingClient")


class BlockingClient:
    """Lifecycle shared by the blocking clients (:class:`~klog.Producer`, :class:`~klog.Consumer`,
    :class:`~klog.AdminClient`): an asyncio core driven on a private :class:`LoopThread`. Subclasses start with
    :meth:`_start_thread`, implement ``close()`` with :meth:`_close_with`, and expose their asyncio twin's
    methods (``_aio``) with :class:`blocking`, :class:`on_loop` and :class:`direct`."""

    _thread: LoopThread
    #: True until the constructor succeeded, and again once closed.
    _closed = True
    #: The asyncio client whose methods this one exposes.
    _aio: Any
    #: What the client is called in its errors ("consumer closed").
    _kind = "client"

    def _start_thread(self, name: str, start: Coroutine[Any, Any, T]) -> T:
        """Start the loop thread and run ``start`` (which builds the core) on it; the thread is stopped again if
        that fails."""
        self._thread = LoopThread(name)
        try:
            result = self._thread.run(start)
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        return result

    def _close_with(self, shutdown: Coroutine[Any, Any, Any]) -> None:
        """Run the core's ``shutdown`` on the loop, then stop the loop thread. Idempotent. The client counts as
        open while ``shutdown`` runs (rebalance callbacks may still use it)."""
        if self._closed:
            shutdown.close()
            return
        try:
            self._thread.run(shutdown)
        finally:
            self._closed = True
            self._thread.stop()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and wait for its result; ClientClosedError once closed."""
        if self._closed:
            coro.close()
            raise ClientClosedError(f"{self._kind} closed")
        try:
            return self._thread.run(coro, timeout)
        except concurrent.futures.TimeoutError:
            raise KafkaTimeoutError(f"{self._kind} operation timed out") from None

    def _run_on_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``fn`` on the loop thread (it changes state the loop owns) and wait for its result."""

        async def call() -> T:
            return fn(*args, **kwargs)

        return self._run(call())

    def _call_on_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """:meth:`_run_on_loop` for a call that needs no task of its own (:meth:`LoopThread.call`)."""
        if self._closed:
            raise ClientClosedError(f"{self._kind} closed")
        return self._thread.call(fn, *args)

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Never block in a finalizer: just stop the loop thread of a client that was not closed.
        if not self._closed:
            try:
                self._thread.stop(timeout=0)
            except Exception:
                pass


class _TwinMethod(Generic[A, P, T]):
    """A method of a blocking client written once, on its asyncio twin: the descriptor hands out a function with
    the twin method's parameters, docstring and (for type checkers) signature, whose calls :meth:`_call` runs
    against the client's ``_aio``. Calling it on the class takes the client first, as a method does."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self._method = method
        functools.update_wrapper(self, method)  # __doc__, __name__, and __wrapped__ for inspect.signature
        # What inspect.signature shows for the bound method: the twin's parameters after its ``self``.
        unbound = inspect.signature(method)
        self._bound_signature = unbound.replace(parameters=list(unbound.parameters.values())[1:])

    def __set_name__(self, owner: type, name: str) -> None:
        self.__qualname__ = f"{owner.__qualname__}.{name}"

    def _call(self, client: BlockingClient, args: Any, kwargs: Any) -> T:
        raise NotImplementedError  # pragma: no cover - each kind of method defines it

    def __call__(self, client: BlockingClient, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(client, args, kwargs)

    @overload
    def __get__(self, client: None, owner: type) -> _TwinMethod[A, P, T]: ...

    @overload
    def __get__(self, client: BlockingClient, owner: type) -> Callable[P, T]: ...

    def __get__(self, client: BlockingClient | None, owner: type) -> Any:
        if client is None:
            return self

        def bound(*args: P.args, **kwargs: P.kwargs) -> T:
            return self._call(client, args, kwargs)

        functools.update_wrapper(bound, self._method)
        bound.__signature__ = self._bound_signature  # type: ignore[attr-defined]
        return bound


class blocking(_TwinMethod[A, P, T]):
    """``Consumer.committed = blocking(AsyncConsumer.committed)``: the twin's coroutine method, run on the loop
    thread while the caller waits (ClientClosedError once the client is closed)."""

    def __init__(self, method: Callable[Concatenate[A, P], Coroutine[Any, Any, T]]) -> None:
        super().__init__(method)

    def _call(self, client: BlockingClient, args: Any, kwargs: Any) -> T:
        return client._run(self._method(client._aio, *args, **kwargs))  # type: ignore[no-any-return]


class on_loop(_TwinMethod[A, P, T]):
    """``Consumer.seek = on_loop(AsyncConsumer.seek)``: the twin's plain method, which changes state the event
    loop owns, called on the loop thread while the caller waits."""

    def __init__(self, method: Callable[Concatenate[A, P], T]) -> None:
        super().__init__(method)

    def _call(self, client: BlockingClient, args: Any, kwargs: Any) -> T:
        return client._run_on_loop(self._method, client._aio, *args, **kwargs)  # type: ignore[no-any-return]


class direct(_TwinMethod[A, P, T]):
    """``Consumer.paused = direct(AsyncConsumer.paused)``: the twin's plain method that only reads thread-safe
    state, called on the caller's thread (so it also works inside callbacks running on the loop)."""

    def __init__(self, method: Callable[Concatenate[A, P], T]) -> None:
        super().__init__(method)

    def _call(self, client: BlockingClient, args: Any, kwargs: Any) -> T:
        return self._method(client._aio, *args, **kwargs)  # type: ignore[no-any-return]
