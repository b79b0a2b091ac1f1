"""``klog.Broker``: the real broker, in-process, on its own thread and event loop.

    with klog.Broker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

By default it listens on a free 127.0.0.1 port and keeps its data in a temporary directory removed on stop.
``config`` takes Kafka broker property names, e.g. ``klog.Broker(config={"num.partitions": 3})``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from klog.client.loop_thread import call_in_loop
from klog.metadata.config import BrokerConfig

#: how long start() waits for the broker to come up (log recovery of a large data dir can take a while)
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
#: How long stats() waits for the broker's event loop to read its counters.
STATS_TIMEOUT_S = 30.0


class Broker:
    """An in-process klog broker. Use as a context manager, or call ``start()`` / ``stop()``."""

    def __init__(self, data_dir: str | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 config: Mapping[str, Any] | None = None) -> None:
        self._owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="klog-broker-")
        props: dict[str, Any] = {"listeners": f"PLAINTEXT://{host}:{port}", "log.dirs": self.data_dir,
                                 # an embedded broker serves tests: no rebalance delay for the first group
                                 "group.initial.rebalance.delay.ms": 0}
        props.update(config or {})
        try:
            self.config = BrokerConfig(props)
        except BaseException:
            self._remove_own_dir()
            raise
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()

    # ---- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Broker:
        if self._thread is not None:
            raise RuntimeError("broker already started")
        self._thread = threading.Thread(target=self._run, name="klog-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise TimeoutError(f"klog broker did not start within {START_TIMEOUT_S:.0f}s")
        if self._error is not None:
            self._thread.join(STOP_TIMEOUT_S)
            self._thread = None
            self._remove_own_dir()
            raise RuntimeError(f"klog broker failed to start: {self._error}") from self._error
        return self

    def _remove_own_dir(self) -> None:
        """The temporary data dir this broker made (none given): no start or stop leaves it behind."""
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _run(self) -> None:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        from klog.broker.server import BrokerServer

        self._stop = asyncio.Event()
        self._server = BrokerServer(self.config)
        try:
            await self._server.start()
        except BaseException as exc:  # report to start(), then unwind
            self._error = exc
            self._ready.set()
            await self._server.stop()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._server.stop()

    def stop(self) -> None:
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # loop already closed
                pass
        thread.join(STOP_TIMEOUT_S)
        self._thread = None
        self._ready.clear()
        self._remove_own_dir()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ---- where it is --------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return str(self._require().state.host)

    @property
    def port(self) -> int:
        return int(self._require().state.port)

    @property
    def bootstrap_servers(self) -> str:
        host = self.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def _require(self) -> Any:
        if self._server is None or not self._ready.is_set() or self._error is not None:
            raise RuntimeError("broker is not running; use start() or a with block")
        return self._server

    def stats(self) -> dict[str, int]:
        """Counters of the running broker's network front (connections, requests, fetch send paths), read on the
        broker's event loop (what its native front served and has not handed over yet is accounted first)."""
        server, loop = self._require(), self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("broker is not running; use start() or a with block")
        return dict(call_in_loop(loop, server.stats, timeout=STATS_TIMEOUT_S))

    def __repr__(self) -> str:
        state = "running" if self._thread is not None and self._error is None else "stopped"
        return f"<klog.Broker {state} data_dir={self.data_dir!r}>"
