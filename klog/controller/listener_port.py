"""Where the controller port's connections that are not Raft go.

The Raft driver (:class:`klog.controller.raft.RaftDriver`) accepts every connection on the controller port and hands
those of Kafka clients (to the :class:`klog.controller.describe_quorum.ControllerListener`) and of observers (to the
member's metadata feed, :mod:`klog.controller.observer`) to their servers through a :class:`ListenerPort`. The port
is made first and given to the driver's constructor and to each server's: the servers need the driver, so the
driver cannot be given them, and nothing is assigned into the driver after it exists. On a SASL controller listener
the port also holds the login (:class:`klog.controller.listener_login.ControllerLogin`) every connection goes
through before the driver reads its first bytes; on every listener it holds who a connection is and what it may do
(:class:`klog.controller.listener_access.ControllerAccess`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from klog.controller.listener_access import ControllerAccess
    from klog.controller.listener_login import ControllerLogin
    from klog.security.principal import KafkaPrincipal

__all__ = ["KafkaConnectionHandler", "ListenerPort", "ObserverConnectionHandler"]

#: Serves a non-raft connection of the controller listener: (reader, writer, the bytes already read, its principal:
#: the one it logged in as on a SASL listener, its certificate's on SSL, User:ANONYMOUS; None when the port has no
#: access control).
KafkaConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes, "KafkaPrincipal | None"],
                                  Awaitable[None]]

#: Serves an observer's connection: (reader, writer, its node id), the hello's preamble and id read already.
ObserverConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class ListenerPort:
    """The servers of the controller port's Kafka and observer connections; a connection of a kind nobody serves
    is refused, and each kind has one server (asserted)."""

    def __init__(self) -> None:
        #: serves a Kafka client's connection (None: refused)
        self.kafka: KafkaConnectionHandler | None = None
        #: serves an observer's connection, a broker-only node fetching the committed log (None: refused)
        self.observers: ObserverConnectionHandler | None = None
        #: logs in every connection of a SASL controller listener and checks its principal (None: no login; a
        #: SASL listener without one refuses every connection)
        self.login: ControllerLogin | None = None
        #: the principals and authorization of the listener's connections (None: nothing is authorized, as in
        #: tests of a bare Raft driver)
        self.access: ControllerAccess | None = None

    def serve_kafka(self, handler: KafkaConnectionHandler) -> None:
        assert self.kafka is None, "one server of the controller listener's Kafka connections"
        self.kafka = handler

    def serve_observers(self, handler: ObserverConnectionHandler) -> None:
        assert self.observers is None, "one server of the observers' connections"
        self.observers = handler

    def authenticate_with(self, login: ControllerLogin) -> None:
        assert self.login is None, "one login of the controller listener's connections"
        self.login = login

    def authorize_with(self, access: ControllerAccess) -> None:
        assert self.access is None, "one access control of the controller listener's connections"
        self.access = access
