"""RemotingClient: a pool of remoting connections keyed by ``host:port``.

Connections are opened on demand and reopened on demand after a drop (as Java's
``NettyRemotingClient.getAndCreateChannel``); calls pending on a dropped connection fail with
ConnectionLostError. Requests the peer sends on these connections (a broker calling a client)
go through the client's processor table.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IConnector
from twisted.internet.protocol import ClientFactory
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.codec.codes import LanguageCode, SerializeType
from rmqwire.codec.frame import DEFAULT_MAX_FRAME_LENGTH, RemotingCommand
from rmqwire.errors import RemotingConnectError, RemotingTimeoutError
from rmqwire.remoting.dispatcher import Dispatcher, Handler
from rmqwire.remoting.protocol import DEFAULT_IDLE_TIMEOUT, RemotingProtocol, code_name

#: Java's com.rocketmq.remoting.client.connect.timeout (3000 ms).
DEFAULT_CONNECT_TIMEOUT = 3.0


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


@dataclasses.dataclass(slots=True)
class _Connecting:
    connector: IConnector | None
    waiters: list[Deferred[RemotingProtocol]]


class _ClientProtocol(RemotingProtocol):
    """RemotingProtocol that tells its client when it is connected."""

    def __init__(self, client: RemotingClient, addr: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
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


class RemotingClient:
    """Calls to many peers over pooled connections; the reactor is injected.

    ``dispatcher`` answers requests peers send to us (default: an empty table that answers
    REQUEST_CODE_NOT_SUPPORTED, with language PYTHON).
    """

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        *,
        dispatcher: Dispatcher | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        serialize_type: SerializeType = SerializeType.JSON,
        response_serialize_type: SerializeType | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
    ) -> None:
        self.reactor = reactor
        self.dispatcher = (
            dispatcher if dispatcher is not None else Dispatcher(language=LanguageCode.PYTHON)
        )
        self.connect_timeout = connect_timeout
        self._protocol_options: dict[str, Any] = dict(
            serialize_type=serialize_type,
            response_serialize_type=response_serialize_type,
            idle_timeout=idle_timeout,
            max_frame_length=max_frame_length,
        )
        self._connections: dict[str, RemotingProtocol] = {}
        self._connecting: dict[str, _Connecting] = {}
        self._closed = False

    # ---- public API ----------------------------------------------------------------------------

    def register_processor(self, code: int, handler: Handler) -> None:
        self.dispatcher.register(code, handler)

    @property
    def connections(self) -> dict[str, RemotingProtocol]:
        """Open connections by address (a copy)."""
        return {a: p for a, p in self._connections.items() if p.is_open}

    def connection(self, addr: str) -> Deferred[RemotingProtocol]:
        """The open connection to ``addr``, connecting first if there is none."""
        if self._closed:
            return defer.fail(RemotingConnectError(f"cannot connect to {addr}: client is closed"))
        proto = self._connections.get(addr)
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
                pending.connector = self.reactor.connectTCP(
                    host, port, _ClientFactory(self, addr), timeout=self.connect_timeout
                )
            except Exception as e:
                del self._connecting[addr]
                return defer.fail(RemotingConnectError(f"connect to {addr} failed: {e}"))
        waiter: Deferred[RemotingProtocol] = Deferred(
            canceller=lambda d: pending.waiters.remove(d) if d in pending.waiters else None
        )
        pending.waiters.append(waiter)
        return waiter

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> Deferred[RemotingCommand]:
        """Send a request to ``addr``; fire with its response (whatever its code).

        ``timeout`` covers connecting and waiting; connecting is also bounded by connect_timeout.
        """
        start = self.reactor.seconds()

        def send(proto: RemotingProtocol) -> Deferred[RemotingCommand]:
            remaining = timeout - (self.reactor.seconds() - start)
            if remaining <= 0:
                raise RemotingTimeoutError(
                    f"request {code_name(cmd.code)} to {addr} timed out after {timeout:g} s "
                    "while connecting"
                )
            return proto.invoke(cmd, remaining)

        return self.connection(addr).addCallback(send)

    def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> Deferred[None]:
        """Send a oneway request to ``addr``; fire with None once written."""
        return self.connection(addr).addCallback(lambda proto: proto.invoke_oneway(cmd))

    def close_connection(self, addr: str) -> Deferred[None]:
        proto = self._connections.pop(addr, None)
        if proto is None:
            return defer.succeed(None)
        d = proto.when_closed()
        proto.close()
        return d

    def close(self) -> Deferred[None]:
        """Stop connecting, close every connection; fire when all are gone."""
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
        waits = [self.close_connection(addr) for addr in list(self._connections)]
        return defer.gatherResults(waits, consumeErrors=True).addCallback(lambda _: None)

    # ---- internals -----------------------------------------------------------------------------

    def _build_protocol(self, addr: str) -> RemotingProtocol:
        return _ClientProtocol(
            self, addr, reactor=self.reactor, dispatcher=self.dispatcher, **self._protocol_options
        )

    def _connected(self, addr: str, proto: RemotingProtocol) -> None:
        pending = self._connecting.pop(addr, None)
        self._connections[addr] = proto
        proto.when_closed().addCallback(lambda _: self._dropped(addr, proto))
        self.log.info("connected to {addr}", addr=addr)
        if self._closed:
            proto.close()
        for w in pending.waiters if pending else []:
            w.callback(proto)

    def _dropped(self, addr: str, proto: RemotingProtocol) -> None:
        if self._connections.get(addr) is proto:
            del self._connections[addr]
        self.log.info("connection to {addr} closed", addr=addr)

    def _connect_failed(self, addr: str, reason: Failure) -> None:
        pending = self._connecting.pop(addr, None)
        self.log.warn("connect to {addr} failed: {why}", addr=addr, why=reason.getErrorMessage())
        for w in pending.waiters if pending else []:
            w.errback(RemotingConnectError(f"connect to {addr} failed: {reason.getErrorMessage()}"))
