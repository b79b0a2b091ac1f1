"""The listeners and the connections they accepted: connection limits, socket options, idle connections.

A new connection is refused (closed at once, one log line a second at most) above ``max.connections``,
``max.connections.per.ip`` (``max.connections.per.ip.overrides``) or what the descriptor budget leaves for
connections (klog.broker.descriptors); the connection creation rates are klog.broker.network.connection_quotas'. A
connection idle for ``connections.max.idle.ms`` is closed; one idle for ``POOL_RELEASE_IDLE_S`` gives back its
pooled receive buffers.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from klog.broker.config import BrokerConfig
from klog.broker.descriptors import DESCRIPTORS_PER_CONNECTION
from klog.broker.log_limit import RateLimitedLog
from klog.broker.metrics import BrokerMetrics
from klog.broker.network.connection_quotas import ConnectionQuotas
from klog.broker.network.frame_reader import RequestReader
from klog.broker.network.limits import Limits
from klog.broker.network.native_tls import NativeTlsProtocol
from klog.broker.network.request_memory import ConnectionMemory
from klog.broker.security import ListenerSecurity, listener_securities
from klog.metadata.config_security import dynamic_ssl_settings
from klog.metadata.image import ConfigResourceType

if TYPE_CHECKING:
    from klog.broker.partitions import PartitionManager

#: the logger the network front has always used (operators filter on it)
log = logging.getLogger("klog.broker.server")

#: descriptors asked for beyond max.connections' own when raising the open-files limit (segment files, partitions)
FD_RESERVE = 4096
#: a connection idle this long gives back its pooled large-frame receive buffers (up to
#: framing.POOLED_BUFFERS x POOLED_BUFFER_MAX_BYTES each): a busy producer reuses them request after request, but
#: thousands of idle connections must not each pin megabytes
POOL_RELEASE_IDLE_S = 10.0
#: a TLS client that has not finished its handshake this long after connecting is dropped
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class AcceptedConnection(Protocol):
    """What the acceptor reads of the connections it accepted (klog.broker.network.connection.Connection)."""

    id: int
    client_host: str
    last_active: float
    #: complete requests not yet processed
    frames: Any
    memory: ConnectionMemory
    requests: RequestReader

    def close(self, reason: str | None = None, *, graceful: bool = False) -> None: ...

    def waiting_for_requests(self) -> bool: ...

    def note_front_activity(self, now: float) -> None: ...


class Acceptor:
    """The broker's listening sockets and every connection they accepted."""

    def __init__(self, config: BrokerConfig, limits: Limits, metrics: BrokerMetrics | None) -> None:
        self.config = config
        self.limits = limits
        self.metrics = metrics
        self.connections: set[AcceptedConnection] = set()
        #: each listener's TLS context, SASL mechanisms and users (a ConfigError names an unusable setting)
        self.security: dict[str, ListenerSecurity] = listener_securities(config)
        #: max.connections.per.ip(.overrides), max.connection.creation.rate, the ip connection_creation_rate quota
        self.connection_quotas = ConnectionQuotas(config)
        self.servers: list[asyncio.base_events.Server] = []
        #: the address each listener is bound to, in config.listeners' order
        self.bound: list[tuple[str, int]] = []
        self.refused_connections = 0
        self._refusal_log = RateLimitedLog(log, "refused connections")
        self._connection_ids = itertools.count(1)
        self._pools_released_at = 0.0
        #: called with a connection's id once it closed (may be called twice for one connection)
        self.on_closed: list[Callable[[int], None]] = []

    async def bind(self, loop: asyncio.AbstractEventLoop,
                   new_connection: Callable[[str], asyncio.BaseProtocol]) -> None:
        """Bind every listener (serving starts with :meth:`start_serving`): a port in use fails here."""
        for listener in self.config.listeners:
            security = self.security[listener.name]
            tls = security.ssl_context
            factory: Callable[[], asyncio.BaseProtocol]
            if tls is not None and security.native is not None:   # TLS in klog's native session, plain TCP below
                def factory(name: str = listener.name, security: ListenerSecurity = security) -> asyncio.BaseProtocol:
                    return NativeTlsProtocol(cast(asyncio.BufferedProtocol, new_connection(name)),
                                             security.native_config(), loop, TLS_HANDSHAKE_TIMEOUT_S)
                tls = None
                log.info("listener %s: TLS served by klog's native TLS session (klog.tls.engine=native)",
                         listener.name)
            else:
                if security.fallback is not None:   # klog.tls.engine left at its default: said once, as it binds
                    log.warning("listener %s: TLS served by Python's ssl module, not klog's native TLS session, "
                                "which cannot serve its settings (%s)", listener.name, security.fallback)

                def factory(name: str = listener.name) -> asyncio.BaseProtocol:
                    return new_connection(name)
            server = await loop.create_server(
                factory, host=listener.host or None, port=listener.port,
                backlog=self.config["socket.listen.backlog.size"], reuse_address=True, start_serving=False,
                ssl=tls, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None)
            self.servers.append(server)
            sockname = server.sockets[0].getsockname()
            self.bound.append((sockname[0], sockname[1]))

    def follow_dynamic_ssl(self, node_id: int, image_configs: Callable[[], Mapping[Any, Mapping[str, str]]]) -> None:
        """Serve new TLS connections with this broker's dynamic ``listener.name.<l>.ssl.*`` configs (ConfigRecords
        on its resource in ``image_configs()``, the metadata image's configs) as they change."""
        resource = (ConfigResourceType.BROKER, str(node_id))

        def dynamic_of(listener: str) -> Callable[[], Mapping[str, str]]:
            return lambda: dynamic_ssl_settings(image_configs().get(resource, {}), listener)

        for name, security in self.security.items():
            if security.ssl_context is not None:
                security.follow_dynamic_ssl(dynamic_of(name))

    async def start_serving(self) -> None:
        for server in self.servers:
            await server.start_serving()

    def stop_accepting(self) -> None:
        for server in self.servers:
            server.close()

    def close_connections(self) -> None:
        for conn in list(self.connections):
            conn.close()

    async def wait_closed(self) -> None:
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):
                pass

    def raise_fd_limit(self) -> None:
        """Each connection needs two descriptors and each partition and open segment one: raise the soft limit
        toward the hard one so max.connections is reachable (a 1024 soft limit is common)."""
        try:
            import resource
        except ImportError:  # not on this platform
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = DESCRIPTORS_PER_CONNECTION * self.limits.max_connections + FD_RESERVE
        if hard != resource.RLIM_INFINITY:
            wanted = min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            except (ValueError, OSError) as exc:
                log.warning("could not raise the open-files limit from %d to %d: %s", soft, wanted, exc)
                return
        # what fits in the limit is logged with the descriptor budget (klog.broker.descriptors); connections
        # beyond it are refused, not failed with EMFILE

    # ---- accepting ----------------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._connection_ids)

    def refusal_reason(self, client_host: str, partitions: PartitionManager) -> str | None:
        """Why a new connection from ``client_host`` must be refused (None: it may be served)."""
        quotas = self.connection_quotas
        max_connections = int(quotas.setting("max.connections"))
        count = len(self.connections)
        if count >= max_connections:
            return f"max.connections={max_connections} reached"
        room = partitions.descriptors.max_connections(partitions.partitions_total)
        if room is not None and count >= room:
            return (f"descriptor budget reached: {count} connections and {partitions.partitions_total} partitions "
                    f"({partitions.descriptors.describe()})")
        per_ip = quotas.max_per_ip(client_host)
        if per_ip < max_connections:
            same_ip = sum(1 for c in self.connections if c.client_host == client_host)
            if same_ip >= per_ip:
                key = "max.connections.per.ip" + (
                    ".overrides" if client_host in quotas.per_ip_overrides else "")
                return f"{key}={per_ip} reached"
        return None

    def refuse(self, peer: str, reason: str) -> None:
        """Count a refused connection; log it, at most one line a second (a flood of connects must not become a
        flood of log lines)."""
        self.refused_connections += 1
        self._refusal_log.warning(f"refusing connection from {peer}: {reason}")

    def accepted(self, conn: AcceptedConnection, sock: socket.socket | None) -> None:
        """Count ``conn`` in, and size its socket's buffers when configured."""
        self.connections.add(conn)
        if self.metrics is not None:
            self.metrics.connections_created += 1
        if sock is not None:
            config = self.config
            for key, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                                ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
                # Only when set explicitly: fixed buffers disable the kernel's autotuning, which is faster.
                if config.is_set(key) and config[key] > 0:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, option, config[key])
                    except OSError:
                        pass

    def closed(self, conn: AcceptedConnection) -> None:
        self.connections.discard(conn)
        for hook in self.on_closed:
            hook(conn.id)

    # ---- idle connections ---------------------------------------------------------------------------

    def release_idle_buffers(self) -> None:
        """A large request did not fit queued.max.request.bytes: drop the idle connections' pooled receive
        buffers now (at most once a second) rather than after POOL_RELEASE_IDLE_S, so they do not add to the
        broker's memory while requests wait."""
        now = time.monotonic()
        if now - self._pools_released_at < 1.0:
            return
        self._pools_released_at = now
        for conn in self.connections:
            if not conn.frames and not conn.memory.held:
                conn.requests.release_pooled_buffers()

    def sweep(self, now: float) -> None:
        """The maintenance pass's look at connections: pooled buffers of idle ones, connections.max.idle.ms."""
        self._refusal_log.flush()
        for conn in self.connections:
            conn.note_front_activity(now)
            if now - conn.last_active > POOL_RELEASE_IDLE_S and not conn.frames:
                conn.requests.release_pooled_buffers()
        idle = self.limits.idle_timeout_s
        if idle is not None:
            for conn in [c for c in self.connections if now - c.last_active > idle and c.waiting_for_requests()]:
                conn.close(f"idle for more than {idle:.0f}s (connections.max.idle.ms)")
