"""RemotingClient: a pool of remoting channels keyed by ``host:port``, and typed calls.

Channels (``RemotingProtocol``s) are opened on demand and reopened on demand after a drop (as
Java's ``NettyRemotingClient.getAndCreateChannel``); calls pending on a dropped channel fail with
ConnectionLostError. Requests the peer sends on these channels (a broker calling a client) go
through the client's processor table. ``call``/``oneway`` take a ``Command`` declaration and
return its typed ``Response`` or fail with the typed error of the response code.

The client is a Twisted ``Service``: ``stopService`` waits up to ``config.close_grace`` for
calls in flight, then closes every channel.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IConnector
from twisted.internet.posixbase import PosixReactorBase
from twisted.internet.protocol import ClientFactory
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.codec.codes import code_name
from rmqwire.codec.commands import Command, Response
from rmqwire.codec.frame import PreparedRequest, RemotingCommand
from rmqwire.errors import (
    LocalProtocolError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from rmqwire.remoting.config import RemotingConfig
from rmqwire.remoting.dispatcher import Dispatcher, Handler, Processor
from rmqwire.remoting.flushing import FlushingConnector
from rmqwire.remoting.protocol import RemotingProtocol, drain


def parse_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port); ValueError when malformed."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"address {addr!r} has port {port} out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def connect_tcp(reactor: Any, host: str, port: int, factory: ClientFactory, timeout: float) -> IConnector:
    """``reactor.connectTCP`` with ``FlushingClient`` connections on the posix reactors (any other
    reactor, e.g. a test's MemoryReactor, connects as usual)."""
    if isinstance(reactor, PosixReactorBase):
        connector = FlushingConnector(host, port, factory, timeout, None, reactor)
        connector.connect()
        return connector
    return reactor.connectTCP(host, port, factory, timeout=timeout)


@dataclasses.dataclass(slots=True)
class _Connecting:
    connector: IConnector | None
    waiters: list[Deferred[RemotingProtocol]]


class _ClientProtocol(RemotingProtocol):
    """RemotingProtocol that tells its client when it is connected."""

    def __init__(self, client: RemotingClient, addr: str, *args: Any) -> None:
        super().__init__(*args)
        self._client = client
        self._addr = addr

    def connectionMade(self) -> None:
        super().connectionMade()
        self.peer = self._addr  # name the peer as the caller did (errors quote it)
        self._client._connected(self._addr, self)


class _ClientFactory(ClientFactory):
    def __init__(self, client: RemotingClient, addr: str) -> None:
        self.client = client
        self.addr = addr

    def buildProtocol(self, addr: object) -> RemotingProtocol:
        return self.client._build_protocol(self.addr)

    def clientConnectionFailed(self, connector: IConnector, reason: Failure) -> None:
        self.client._connect_failed(self.addr, reason)


class RemotingClient(Service):
    """Calls to many peers over pooled channels; the reactor is injected.

    ``processors`` answer requests peers send to us (by default an empty table that answers
    REQUEST_CODE_NOT_SUPPORTED, with the config's language).
    """

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        config: RemotingConfig | None = None,
        *,
        processors: tuple[Processor, ...] = (),
        dispatcher: Dispatcher | None = None,
    ) -> None:
        self.reactor = reactor
        self.config = config if config is not None else RemotingConfig()
        self.dispatcher = (
            dispatcher if dispatcher is not None else Dispatcher.for_config(self.config)
        )
        for p in processors:
            self.dispatcher.add_processor(p)
        self._channels: dict[str, RemotingProtocol] = {}
        self._connecting: dict[str, _Connecting] = {}
        self._closed = False

    # ---- Service -------------------------------------------------------------------------------

    def startService(self) -> None:
        self._closed = False
        super().startService()

    def stopService(self) -> Deferred[None]:
        """Refuse new calls, wait up to ``config.close_grace`` for calls in flight, close all."""
        super().stopService()
        self._closed = True
        wait = drain(self.reactor, self._channels.values(), self.config.close_grace)
        return wait.addCallback(lambda _: self.close())

    # ---- public API ----------------------------------------------------------------------------

    def register_processor(self, code: int, handler: Handler) -> None:
        self.dispatcher.register(code, handler)

    @property
    def channels(self) -> dict[str, RemotingProtocol]:
        """Open channels by address (a copy)."""
        return {a: p for a, p in self._channels.items() if p.is_open}

    def flush_writes(self) -> None:
        """Write what the channels hold for the end of this reactor pass now (see
        ``flushing.FlushingWrites``): for a request whose answer is wanted while the rest of the
        pass runs."""
        for proto in self._channels.values():
            flush = getattr(proto.transport, "flush", None)
            if flush is not None and getattr(proto.transport, "_pending", None):
                flush()

    def channel(self, addr: str) -> Deferred[RemotingProtocol]:
        """The open channel to ``addr``, connecting first if there is none."""
        if self._closed:
            return defer.fail(RemotingConnectError(f"cannot connect to {addr}: client is closed"))
        proto = self._channels.get(addr)
        if proto is not None and proto.is_open:
            return defer.succeed(proto)
        pending = self._connecting.get(addr)
        if pending is None:
            try:
                host, port = parse_address(addr)
            except ValueError as e:
                return defer.fail(RemotingConnectError(f"cannot connect: {e}"))
            pending = self._connecting[addr] = _Connecting(None, [])
            self.log.debug("connecting to {addr}", addr=addr)
            try:
                factory: Any = _ClientFactory(self, addr)
                if self.config.tls is not None:
                    from twisted.protocols.tls import TLSMemoryBIOFactory

                    factory = TLSMemoryBIOFactory(self.config.tls, True, factory, self.reactor)
                pending.connector = connect_tcp(
                    self.reactor, host, port, factory, self.config.connect_timeout
                )
            except Exception as e:
                del self._connecting[addr]
                return defer.fail(RemotingConnectError(f"connect to {addr} failed: {e}"))
        waiter: Deferred[RemotingProtocol] = Deferred(
            canceller=lambda d: pending.waiters.remove(d) if d in pending.waiters else None
        )
        pending.waiters.append(waiter)
        return waiter

    def open_channel(self, addr: str) -> RemotingProtocol | None:
        """The open channel to ``addr`` if there is one and the client takes calls, else None."""
        if self._closed:
            return None
        proto = self._channels.get(addr)
        return proto if proto is not None and proto.is_open else None

    def call(
        self,
        addr: str,
        command: type[Command],
        header: Any = None,
        *,
        body: Any = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Deferred[Response[Any, Any]]:
        """Send ``command`` to ``addr``; fire with its typed Response (SUCCESS or a declared
        status), or fail with the typed error of any other response code (``errors.for_code``).

        ``header`` is a header object or a mapping of its fields; ``fields`` are header fields as
        keyword arguments. ``timeout`` defaults to ``config.call_timeout``.
        """
        if command.oneway:
            return defer.fail(LocalProtocolError(f"{command.describe()} is oneway: use oneway()"))
        try:
            request = self._request(command, header, body, fields)
        except Exception as e:
            return defer.fail(e)
        return self.invoke(addr, request, timeout).addCallback(command.parse_response)

    def call_prepared(
        self, addr: str, command: type[Command], request: PreparedRequest, *, timeout: float | None = None
    ) -> Deferred[Response[Any, Any]]:
        """``call`` with a request of ``command`` framed but for its opaque: on an open channel
        it is written as it is (see ``RemotingProtocol.invoke_prepared``); else it waits for the
        channel as its command."""
        if timeout is None:
            timeout = self.config.call_timeout
        if not self._closed:
            proto = self._channels.get(addr)
            if proto is not None and proto.is_open:
                return proto.invoke_prepared(request, timeout).addCallback(command.parse_response)
        try:
            cmd = request.command()
        except Exception as e:
            return defer.fail(e)
        return self.invoke(addr, cmd, timeout).addCallback(command.parse_response)

    def oneway(
        self, addr: str, command: type[Command], header: Any = None, *, body: Any = None, **fields: Any
    ) -> Deferred[None]:
        """Send ``command`` to ``addr`` with the ONEWAY flag; fire with None once written."""
        try:
            request = self._request(command, header, body, fields)
        except Exception as e:
            return defer.fail(e)
        return self.invoke_oneway(addr, request)

    def _request(
        self, command: type[Command], header: Any, body: Any, fields: dict[str, Any]
    ) -> RemotingCommand:
        return command.request(
            header, body, language=self.config.language, version=self.config.version, **fields
        )

    def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float | None = None
    ) -> Deferred[RemotingCommand]:
        """Send a request to ``addr``; fire with its response (whatever its code).

        ``timeout`` (default ``config.call_timeout``) covers connecting and waiting; connecting
        is also bounded by ``config.connect_timeout``.
        """
        if timeout is None:
            timeout = self.config.call_timeout
        if not self._closed:
            proto = self._channels.get(addr)
            if proto is not None and proto.is_open:  # connected: no Deferred for the channel
                return proto.invoke(cmd, timeout)
        start = self.reactor.seconds()

        def send(proto: RemotingProtocol) -> Deferred[RemotingCommand]:
            remaining = timeout - (self.reactor.seconds() - start)
            if remaining <= 0:
                raise RemotingTimeoutError(
                    f"request {code_name(cmd.code)} to {addr} timed out after {timeout:g} s "
                    "while connecting"
                )
            return proto.invoke(cmd, remaining)

        return self.channel(addr).addCallback(send)

    def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> Deferred[None]:
        """Send a oneway request to ``addr``; fire with None once written."""
        return self.channel(addr).addCallback(lambda proto: proto.invoke_oneway(cmd))

    def close_channel(self, addr: str) -> Deferred[None]:
        proto = self._channels.pop(addr, None)
        if proto is None:
            return defer.succeed(None)
        d = proto.when_closed()
        proto.close()
        return d

    def close(self) -> Deferred[None]:
        """Stop connecting, close every channel now; fire when all are gone."""
        self._closed = True
        for addr, pending in list(self._connecting.items()):
            if pending.connector is not None:
                try:
                    pending.connector.stopConnecting()
                except Exception:  # already connected or failed: nothing to stop
                    pass
            # the reactor may report the stopped attempt later, or never: fail the waiters now
            if self._connecting.get(addr) is pending:
                del self._connecting[addr]
                for w in pending.waiters:
                    w.errback(RemotingConnectError(f"connect to {addr} abandoned: client closed"))
        waits = [self.close_channel(addr) for addr in list(self._channels)]
        return defer.gatherResults(waits, consumeErrors=True).addCallback(lambda _: None)

    # ---- internals -----------------------------------------------------------------------------

    def _build_protocol(self, addr: str) -> RemotingProtocol:
        return _ClientProtocol(self, addr, self.reactor, self.dispatcher, self.config)

    def _connected(self, addr: str, proto: RemotingProtocol) -> None:
        pending = self._connecting.pop(addr, None)
        self._channels[addr] = proto
        proto.when_closed().addCallback(lambda _: self._dropped(addr, proto))
        self.log.info("connected to {addr}", addr=addr)
        if self._closed:
            proto.close()
        for w in pending.waiters if pending else []:
            w.callback(proto)

    def _dropped(self, addr: str, proto: RemotingProtocol) -> None:
        if self._channels.get(addr) is proto:
            del self._channels[addr]
        self.log.info("connection to {addr} closed", addr=addr)

    def _connect_failed(self, addr: str, reason: Failure) -> None:
        pending = self._connecting.pop(addr, None)
        self.log.warn("connect to {addr} failed: {why}", addr=addr, why=reason.getErrorMessage())
        for w in pending.waiters if pending else []:
            w.errback(RemotingConnectError(f"connect to {addr} failed: {reason.getErrorMessage()}"))
