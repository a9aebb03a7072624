"""RemotingServer: accepts remoting channels and answers them through typed processors.

A Twisted ``Service``: ``startService`` listens on ``interface:port`` (port 0 picks a free one:
see ``port``), ``stopService`` stops listening, waits up to ``config.close_grace`` for requests
being processed and calls in flight, then closes every channel. Open channels are tracked so a
server can call its clients back (a broker sending NOTIFY_CONSUMER_IDS_CHANGED).

TLS (``config.tls``: a server context factory) follows Java's ``tls.server.mode``
(``tls_mode``): ENFORCING accepts TLS only; PERMISSIVE accepts TLS and plain TCP on one port,
told apart by the first byte as Java's TlsModeHandler does (0x16, a TLS handshake record; a
remoting frame starts with its length's high byte, 0 for any frame under 16 MiB); DISABLED is plain
TCP only and closes connections that start a TLS handshake.
"""

from __future__ import annotations

import enum
from typing import Any

from twisted.application.service import Service
from twisted.internet import defer, tcp
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort
from twisted.internet.posixbase import PosixReactorBase
from twisted.internet.protocol import Protocol, ServerFactory
from twisted.logger import Logger

from rmqwire.remoting.config import JAVA_SERVER_CONFIG, RemotingConfig
from rmqwire.remoting.dispatcher import Dispatcher, Processor
from rmqwire.remoting.flushing import FlushingWrites
from rmqwire.remoting.protocol import RemotingProtocol, drain


class TlsMode(enum.Enum):
    """Java's ``TlsMode`` (``tls.server.mode``); an unknown name parses as PERMISSIVE, as in Java."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, name: str | None) -> TlsMode:
        for mode in cls:
            if mode.value == name:
                return mode
        return cls.PERMISSIVE


#: The first byte of a TLS handshake record (Java's HANDSHAKE_MAGIC_CODE).
_TLS_HANDSHAKE = 0x16


class _FlushingServer(FlushingWrites, tcp.Server):
    """A TCP server connection that sends what was written during one reactor pass right after
    it (``rmqwire.remoting.flushing``); sending inside the pass instead would wake the peer while
    other requests of the pass wait, and on a busy machine the woken peer takes the CPU. One flush
    call per pass serves all of a port's connections."""

    def _flush_later(self) -> None:
        self.server.flush_later(self)


class _FlushingPort(tcp.Port):
    transport = _FlushingServer
    _to_flush: list[_FlushingServer] | None = None

    def flush_later(self, conn: _FlushingServer) -> None:
        """Flush ``conn`` once this reactor pass is done (a zero delay call runs before the next
        poll)."""
        if self._to_flush is None:
            self._to_flush = []
            self.reactor.callLater(0, self._flush)
        self._to_flush.append(conn)

    def _flush(self) -> None:
        conns, self._to_flush = self._to_flush or [], None
        for conn in conns:
            try:
                conn.flush()
            except Exception:
                RemotingServer.log.failure("flushing {conn} failed", conn=conn)


def listen_tcp(reactor: Any, port: int, factory: ServerFactory, interface: str) -> IListeningPort:
    """``reactor.listenTCP`` with ``_FlushingServer`` connections on the posix reactors (any other
    reactor, e.g. a test's MemoryReactor, listens as usual)."""
    if isinstance(reactor, PosixReactorBase):
        listening = _FlushingPort(port, factory, interface=interface, reactor=reactor)
        listening.startListening()
        return listening
    return reactor.listenTCP(port, factory, interface=interface)


class _ServerFactory(ServerFactory):
    def __init__(self, server: RemotingServer) -> None:
        self.server = server

    def buildProtocol(self, addr: object) -> Protocol:
        if self.server.config.tls is None:
            return self.server.build_protocol()
        return _TlsModeDetector(self.server, addr)


class _TlsModeDetector(Protocol):
    """Waits for a connection's first byte, then hands the connection to a TLS channel or a
    plain one (or closes it), as the server's TLS mode says; forwards everything after."""

    def __init__(self, server: RemotingServer, addr: object) -> None:
        self.server = server
        self.addr = addr
        self.inner: Protocol | None = None
        self._idle: Any = None

    def connectionMade(self) -> None:  # noqa: N802 - Twisted's interface
        self.server._pending.add(self)
        idle = self.server.config.idle_timeout
        if idle is not None:   # a silent connection is closed as an idle channel would be
            self._idle = self.server.reactor.callLater(idle, self.transport.loseConnection)

    def _stop_idle(self) -> None:
        if self._idle is not None and self._idle.active():
            self._idle.cancel()
        self._idle = None

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self.inner is not None:
            self.inner.dataReceived(data)
            return
        if not data:
            return
        self._stop_idle()
        self.server._pending.discard(self)
        tls = data[0] == _TLS_HANDSHAKE
        mode = self.server.tls_mode
        if tls and mode is TlsMode.DISABLED:
            self.server.log.warn("{peer} starts TLS but TLS is disabled here: closed", peer=self.transport.getPeer())
            self.transport.loseConnection()
            return
        inner: Protocol = (self.server.tls_factory().buildProtocol(self.addr) if tls
                           else self.server.build_protocol())
        self.inner = inner
        # the real transport stays the channel's transport: it sees the real peer, pauses reads
        self.transport.protocol = inner
        inner.makeConnection(self.transport)
        inner.dataReceived(data)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._stop_idle()
        self.server._pending.discard(self)
        if self.inner is not None:
            self.inner.connectionLost(reason)


class _PlainFactory(ServerFactory):
    """What TLS wraps: the server's plain channels."""

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
        tls_mode: TlsMode = TlsMode.ENFORCING,
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
        self._pending: set[_TlsModeDetector] = set()   # connected, first byte not seen yet
        self._listening: IListeningPort | None = None
        #: with ``config.tls``: ENFORCING (TLS only) or PERMISSIVE (both); DISABLED ignores it
        self.tls_mode = tls_mode if self.config.tls is not None else TlsMode.DISABLED
        self._tls_factory: Any = None

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

    def tls_factory(self) -> Any:
        """Wraps new channels in TLS with ``config.tls`` (built once)."""
        if self._tls_factory is None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            self._tls_factory = TLSMemoryBIOFactory(self.config.tls, False, _PlainFactory(self), self.reactor)
        return self._tls_factory

    def startService(self) -> None:
        """Listen (synchronously: a port in use raises here)."""
        factory: Any = _ServerFactory(self)
        if self.config.tls is not None and self.tls_mode is TlsMode.ENFORCING:
            factory = self.tls_factory()
        self._listening = listen_tcp(self.reactor, self.requested_port, factory, self.interface)
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
        for pending in list(self._pending):
            if pending.transport is not None:
                pending.transport.abortConnection()
        self._pending.clear()
        waits: list[Deferred[Any]] = []
        for proto in list(self._channels):
            if proto.transport is None:  # built but never connected: nothing to wait for
                self._channels.discard(proto)
                continue
            waits.append(proto.when_closed())
            proto.close()
        return defer.gatherResults(waits, consumeErrors=True).addCallback(lambda _: None)
