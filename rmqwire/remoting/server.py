"""RemotingServer: accepts remoting connections and answers them through a Dispatcher.

The reactor is given to ``listen`` (entry points resolve it). Open connections are tracked so that
``close()`` can end them; ``connections`` also lets a server call its clients (a broker sending
NOTIFY_CONSUMER_IDS_CHANGED over a client's connection).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import ServerFactory
from twisted.logger import Logger

from rmqwire.codec.codes import SerializeType
from rmqwire.codec.frame import DEFAULT_MAX_FRAME_LENGTH
from rmqwire.remoting.dispatcher import Dispatcher
from rmqwire.remoting.protocol import DEFAULT_IDLE_TIMEOUT, RemotingProtocol


class _ServerFactory(ServerFactory):
    def __init__(self, server: RemotingServer, reactor: Any) -> None:
        self.server = server
        self.reactor = reactor

    def buildProtocol(self, addr: object) -> RemotingProtocol:
        return self.server.build_protocol(self.reactor)


class RemotingServer:
    """A remoting server.

    ``response_serialize_type``: None answers in each request's serialize type (4.x behaviour);
    a SerializeType answers always in that type (5.x: its own configured type, normally JSON).
    ``serialize_type`` is used for requests the server itself sends to clients.
    """

    log = Logger()

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        response_serialize_type: SerializeType | None = None,
        serialize_type: SerializeType = SerializeType.JSON,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
    ) -> None:
        self.dispatcher = dispatcher
        self.response_serialize_type = response_serialize_type
        self.serialize_type = serialize_type
        self.idle_timeout = idle_timeout
        self.max_frame_length = max_frame_length
        self._connections: set[RemotingProtocol] = set()
        self._ports: list[IListeningPort] = []

    @property
    def connections(self) -> frozenset[RemotingProtocol]:
        return frozenset(p for p in self._connections if p.is_open)

    def build_protocol(self, reactor: Any) -> RemotingProtocol:
        """A server-side protocol for one connection (also handy for in-memory tests)."""
        proto = RemotingProtocol(
            reactor,
            self.dispatcher,
            serialize_type=self.serialize_type,
            response_serialize_type=self.response_serialize_type,
            idle_timeout=self.idle_timeout,
            max_frame_length=self.max_frame_length,
        )
        self._connections.add(proto)
        proto.when_closed().addCallback(lambda _: self._connections.discard(proto))
        return proto

    def listen(self, reactor: Any, port: int, interface: str = "127.0.0.1") -> IListeningPort:
        """Listen on ``interface:port`` (port 0 picks a free port: see ``getHost().port``)."""
        listening: IListeningPort = reactor.listenTCP(
            port, _ServerFactory(self, reactor), interface=interface
        )
        self._ports.append(listening)
        self.log.info("listening on {host}", host=listening.getHost())
        return listening

    def close(self) -> Deferred[None]:
        """Stop listening and close every connection; fire when all are gone."""
        waits: list[Deferred[Any]] = []
        for port in self._ports:
            waits.append(defer.maybeDeferred(port.stopListening))
        self._ports.clear()
        for proto in list(self._connections):
            if proto.transport is None:  # built but never connected: nothing to wait for
                self._connections.discard(proto)
                continue
            waits.append(proto.when_closed())
            proto.close()
        return defer.gatherResults(waits, consumeErrors=True).addCallback(lambda _: None)
