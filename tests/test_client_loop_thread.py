"""The blocking clients written once over their asyncio twins (klog/client/loop_thread.py): what the
``blocking``/``on_loop``/``direct`` descriptors run where, and that every asyncio operation has its blocking
twin with the same signature. No broker needed."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Generator
from typing import Any

import pytest

from klog.client import AdminClient, AsyncAdminClient, AsyncConsumer, AsyncProducer, Consumer, Producer
from klog.client.consumer_api import _advance
from klog.client.errors import ClientClosedError, KafkaError
from klog.client.loop_thread import BlockingClient, blocking, direct, on_loop


class _AsyncTwin:
    def __init__(self) -> None:
        self.threads: list[str] = []

    async def add(self, a: int, *, b: int = 1) -> int:
        """The sum of ``a`` and ``b``."""
        self.threads.append(threading.current_thread().name)
        return a + b

    def remember(self, what: str) -> None:
        self.threads.append(f"{what}@{threading.current_thread().name}")

    def thread_name(self) -> str:
        return threading.current_thread().name


class _Blocking(BlockingClient):
    _kind = "twin client"

    def __init__(self) -> None:
        self._aio = _AsyncTwin()

        async def start() -> None:
            pass

        self._start_thread("twin-loop", start())

    add = blocking(_AsyncTwin.add)
    remember = on_loop(_AsyncTwin.remember)
    thread_name = direct(_AsyncTwin.thread_name)

    def close(self) -> None:
        async def stop() -> None:
            pass

        self._close_with(stop())


@pytest.fixture
def client() -> Generator[_Blocking, None, None]:
    with _Blocking() as c:
        yield c


def test_blocking_runs_the_twins_coroutine_on_the_loop_thread_and_returns_its_result(client: _Blocking) -> None:
    assert client.add(2, b=3) == 5
    assert _Blocking.add(client, 4) == 5  # called on the class, the client comes first as for a method
    assert client._aio.threads == ["twin-loop", "twin-loop"]


def test_on_loop_calls_the_twin_on_the_loop_thread_and_direct_on_the_callers(client: _Blocking) -> None:
    client.remember("x")
    assert client._aio.threads == ["x@twin-loop"]
    assert client.thread_name() == threading.current_thread().name


def test_a_twin_method_shows_the_asyncio_methods_signature_and_docstring(client: _Blocking) -> None:
    assert str(inspect.signature(client.add)) == "(a: 'int', *, b: 'int' = 1) -> 'int'"
    assert client.add.__doc__ == _Blocking.add.__doc__ == "The sum of ``a`` and ``b``."
    assert _Blocking.add.__qualname__ == "_Blocking.add"


def test_a_closed_client_refuses_every_loop_call_with_client_closed_error() -> None:
    c = _Blocking()
    c.close()
    with pytest.raises(ClientClosedError, match="twin client closed"):
        c.add(1)
    with pytest.raises(ClientClosedError, match="twin client closed"):
        c.remember("y")
    assert c._aio.threads == []


def test_an_error_of_the_twin_reaches_the_caller_as_raised(client: _Blocking) -> None:
    with pytest.raises(TypeError):
        client.add("a")  # type: ignore[arg-type]


def test_call_on_loop_runs_a_plain_function_on_the_loop_thread_without_a_task_and_raises_its_error() -> None:
    """_call_on_loop (the share consumer's acknowledge_batch): the function runs on the loop thread, outside any
    task, its result or error reaches the caller; refused from the loop thread itself and once closed."""
    import asyncio

    def where(x: int) -> tuple[str, int, bool]:
        return threading.current_thread().name, x * 2, asyncio.current_task() is None

    def fails() -> None:
        raise ValueError("from the loop")

    c = _Blocking()
    try:
        assert c._call_on_loop(where, 21) == ("twin-loop", 42, True)
        with pytest.raises(ValueError, match="from the loop"):
            c._call_on_loop(fails)

        async def nested() -> None:
            c._thread.call(where, 1)

        with pytest.raises(RuntimeError, match="own event-loop thread"):
            c._thread.run(nested())
    finally:
        c.close()
    with pytest.raises(ClientClosedError, match="twin client closed"):
        c._call_on_loop(where, 1)


def _public(cls: type) -> dict[str, Any]:
    return {name: member for name, member in vars(cls).items()
            if not name.startswith("_") and inspect.iscoroutinefunction(member)}


@pytest.mark.parametrize("sync_cls, async_cls, own", [
    (AdminClient, AsyncAdminClient, {"close", "start"}),
    # The consumer's commit has the blocking-only ``asynchronous`` flag; poll/poll_batch drive the asyncio
    # consumer's steps on the caller's thread.
    (Consumer, AsyncConsumer, {"close", "start", "stop", "commit", "poll", "poll_batch", "getmany", "getone"}),
    # send_batch shares its steps; send is written per API (its per-record cost); flush does nothing once closed.
    (Producer, AsyncProducer, {"close", "start", "stop", "send", "send_batch", "send_and_wait", "flush"}),
])
def test_every_asyncio_operation_has_a_blocking_twin_with_its_signature(sync_cls: type, async_cls: type,
                                                                         own: set[str]) -> None:
    for name, method in _public(async_cls).items():
        if name in own:
            continue
        twin = inspect.getattr_static(sync_cls, name, None)
        assert isinstance(twin, blocking), f"{sync_cls.__name__}.{name} is not blocking({async_cls.__name__}.{name})"
        assert inspect.signature(twin) == inspect.signature(method)


def _steps(log: list[Any]) -> Generator[str, Any, str]:
    log.append((yield "first"))
    try:
        yield "fails"
    except KafkaError as e:
        log.append(f"caught {e}")
    return "done"


def test_a_failed_step_raises_inside_the_steps_where_it_was_yielded() -> None:
    log: list[Any] = []
    steps = _steps(log)
    assert _advance(steps, None, None) == (False, "first")
    assert _advance(steps, 42, None) == (False, "fails")
    assert _advance(steps, None, KafkaError("boom")) == (True, "done")
    assert log == [42, "caught boom"]
