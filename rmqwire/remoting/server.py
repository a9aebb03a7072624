"""RemotingServer: accepts remoting channels and answers them through typed processors.

A Twisted ``Service``: ``startService`` listens on ``interface:port`` (port 0 picks a free one:
see ``port``), ``stopService`` stops listening, waits up to ``config.close_grace`` for requests
being processed and calls in flight, then closes every channel. Open channels are tracked so a
server can call its clients back (a broker sending NOTIFY_CONSUMER_IDS_CHANGED).
"""

from __future__ import annotations

from typing import Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import ServerFactory
from twisted.logger import Logger

from rmqwire.remoting.config import JAVA_SERVER_CONFIG, RemotingConfig
from rmqwire.remoting.dispatcher import Dispatcher, Processor
from rmqwire.remoting.protocol import RemotingProtocol, drain


class _ServerFactory(ServerFactory):
    def __init__(self, server: RemotingServer) -> None:
        self.server = server

    def buildProtocol(self, addr: object) -> RemotingProtocol:
        return self.server.build_protocol()


class RemotingServer(Service):
    """A remoting server; the reactor is injected.

    ``config`` defaults to ``JAVA_SERVER_CONFIG`` (answers as the Java servers do: language
    JAVA). ``config.response_serialize_type`` None answers in each request's serialize type (4.x);
    a SerializeType always in that type (5.x). ``config.serialize_type`` is used for requests the
    server itself sends to clients.
    """

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        config: RemotingConfig | None = None,
        *,
        processors: tuple[Processor, ...] = (),
        dispatcher: Dispatcher | None = None,
        port: int = 0,
        interface: str = "127.0.0.1",
    ) -> None:
        self.reactor = reactor
        self.config = config if config is not None else JAVA_SERVER_CONFIG
        self.dispatcher = (
            dispatcher if dispatcher is not None else Dispatcher.for_config(self.config)
        )
        for p in processors:
            self.dispatcher.add_processor(p)
        self.requested_port = port
        self.interface = interface
        self._channels: set[RemotingProtocol] = set()
        self._listening: IListeningPort | None = None

    @property
    def channels(self) -> frozenset[RemotingProtocol]:
        return frozenset(p for p in self._channels if p.is_open)

    @property
    def port(self) -> int:
        """The port listened on (the real one when 0 was asked for)."""
        if self._listening is None:
            raise RuntimeError("the server is not listening")
        return int(self._listening.getHost().port)

    @property
    def address(self) -> str:
        return f"{self.interface}:{self.port}"

    def build_protocol(self) -> RemotingProtocol:
        """A server-side channel (also handy for in-memory tests)."""
        proto = RemotingProtocol(self.reactor, self.dispatcher, self.config)
        self._channels.add(proto)
        proto.when_closed().addCallback(lambda _: self._channels.discard(proto))
        return proto

    # ---- Service -------------------------------------------------------------------------------

    def startService(self) -> None:
        """Listen (synchronously: a port in use raises here)."""
        factory: Any = _ServerFactory(self)
        if self.config.tls is not None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            factory = TLSMemoryBIOFactory(self.config.tls, False, factory, self.reactor)
        self._listening = self.reactor.listenTCP(
            self.requested_port, factory, interface=self.interface
        )
        super().startService()
        self.log.info("listening on {host}", host=self._listening.getHost())

    def stopService(self) -> Deferred[None]:
        super().stopService()
        listening, self._listening = self._listening, None
        stopped: Deferred[Any] = (
            defer.maybeDeferred(listening.stopListening) if listening else defer.succeed(None)
        )
        stopped.addCallback(lambda _: drain(self.reactor, self._channels, self.config.close_grace))
        return stopped.addCallback(lambda _: self.close())

    def close(self) -> Deferred[None]:
        """Close every channel now; fire when all are gone."""
        waits: list[Deferred[Any]] = []
        for proto in list(self._channels):
            if proto.transport is None:  # built but never connected: nothing to wait for
                self._channels.discard(proto)
                continue
            waits.append(proto.when_closed())
            proto.close()
        return defer.gatherResults(waits, consumeErrors=True).addCallback(lambda _: None)
