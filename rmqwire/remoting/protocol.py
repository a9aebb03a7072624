"""The Twisted side of one remoting connection: Deferreds, timers and the processor table.

``RemotingProtocol`` wraps a sans-IO ``RemotingConnection``. Either side may call the other:
``invoke``/``invoke_oneway`` send requests; requests from the peer (a broker calling a client with
CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO, ...) go through the ``Dispatcher``.
The reactor is injected (only ``IReactorTime`` is used), so tests drive time with ``Clock``.
Spec: shared/spec/wire-format.md sections 1.2, 3, 4 and 7.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.codec.codes import FLAG_ONEWAY, RequestCode, ResponseCode, SerializeType
from rmqwire.codec.frame import DEFAULT_MAX_FRAME_LENGTH, RemotingCommand
from rmqwire.errors import (
    CodecError,
    ConnectionLostError,
    LocalProtocolError,
    RemoteProtocolError,
    RemotingTimeoutError,
)
from rmqwire.remoting.connection import (
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    UnmatchedResponse,
)
from rmqwire.remoting.dispatcher import Dispatcher, RequestContext, exception_simple_desc

#: Java's serverChannelMaxIdleTimeSeconds / client maxIdleTimeSeconds.
DEFAULT_IDLE_TIMEOUT = 120.0
#: After close(), buffered writes get this long to flush; then the socket is aborted. Netty's
#: channel.close() does not wait at all, and a peer that stopped reading must not keep it open.
CLOSE_GRACE = 5.0


def code_name(code: int) -> str:
    """``GET_ROUTEINFO_BY_TOPIC(105)`` for a known request code, else the number."""
    try:
        return f"{RequestCode(code).name}({code})"
    except ValueError:
        return str(code)


def format_address(addr: object) -> str:
    host, port = getattr(addr, "host", None), getattr(addr, "port", None)
    if host is None or port is None:
        return str(addr)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


@dataclasses.dataclass(slots=True)
class _Call:
    deferred: Deferred[RemotingCommand]
    timer: IDelayedCall
    code: int
    timeout: float


class RemotingProtocol(Protocol):
    """One remoting connection (client or server side; the protocol is symmetric).

    ``serialize_type``: header type of the requests we send (Java default JSON).
    ``response_serialize_type``: None answers in the request's type (4.x), a SerializeType
    always in that type (5.x). ``idle_timeout``: close after this many seconds with neither
    reads nor writes (None disables it).
    """

    log = Logger()

    def __init__(
        self,
        reactor: IReactorTime,
        dispatcher: Dispatcher | None = None,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        response_serialize_type: SerializeType | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        first_opaque: int = 0,
    ) -> None:
        if idle_timeout is not None and idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive or None, got {idle_timeout}")
        self.reactor = reactor
        self.dispatcher = dispatcher if dispatcher is not None else Dispatcher()
        self.connection = RemotingConnection(
            serialize_type=serialize_type,
            response_serialize_type=response_serialize_type,
            max_frame_length=max_frame_length,
            first_opaque=first_opaque,
        )
        self.idle_timeout = idle_timeout
        self.peer = "<not connected>"
        self._calls: dict[int, _Call] = {}
        self._closing = False
        self._lost = False
        self._lost_reason: Failure | None = None
        self._idle_call: IDelayedCall | None = None
        self._abort_call: IDelayedCall | None = None
        self._last_activity = 0.0
        self._close_waiters: list[Deferred[None]] = []

    # ---- Twisted callbacks ---------------------------------------------------------------------

    def connectionMade(self) -> None:
        self.peer = format_address(self.transport.getPeer())
        self._touch()
        if self.idle_timeout is not None:
            self._idle_call = self.reactor.callLater(self.idle_timeout, self._check_idle)
        self.log.debug("connected to {peer}", peer=self.peer)

    def dataReceived(self, data: bytes) -> None:
        if self._closing:
            return  # after a framing error or close() the rest of the stream is meaningless
        self._touch()
        try:
            events = self.connection.receive_data(data)
        except RemoteProtocolError as e:
            # Java's NettyDecoder closes the channel on any decode error, without replying; the
            # good frames before the bad bytes were already passed on, so handle them first.
            self._handle(e.events)
            self.log.warn("closing connection to {peer}: {error}", peer=self.peer, error=str(e))
            self.close()
            return
        self._handle(events)

    def _handle(self, events: list) -> None:
        for event in events:
            if isinstance(event, RequestReceived):
                self._dispatch(event.command)
            elif isinstance(event, ResponseReceived):
                self._complete(event.command)
            elif isinstance(event, UnmatchedResponse):
                cmd = event.command
                self.log.warn(
                    "dropping response code {code} opaque {opaque} from {peer}: no pending request "
                    "(late after a timeout?)",
                    code=cmd.code, opaque=cmd.opaque, peer=self.peer,
                )

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._lost:
            return
        if reason is None:
            reason = Failure(ConnectionLostError("connection closed"))
        self._closing = True
        self._lost = True
        self._lost_reason = reason
        self.connected = 0
        for timer in (self._idle_call, self._abort_call):
            if timer is not None and timer.active():
                timer.cancel()
        self._idle_call = self._abort_call = None
        why = reason.getErrorMessage()
        lost = self.connection.close()
        lost += [op for op in self._calls if op not in lost]
        self._fail_calls(
            lost,
            lambda op, call: ConnectionLostError(
                f"connection to {self.peer} lost while request {code_name(call.code)} "
                f"opaque {op} was pending: {why}"
            ),
        )
        self.log.debug("connection to {peer} lost: {why}", peer=self.peer, why=why)
        waiters, self._close_waiters = self._close_waiters, []
        for w in waiters:
            w.callback(None)

    # ---- public API ----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return bool(self.connected) and not self._closing

    @property
    def pending_count(self) -> int:
        return len(self._calls)

    def invoke(self, cmd: RemotingCommand, timeout: float) -> Deferred[RemotingCommand]:
        """Send a two-way request; fire with the response command (any response code).

        Fails with RemotingTimeoutError after ``timeout`` seconds, ConnectionLostError if the
        connection drops first. Cancelling the Deferred forgets the request.
        """
        if not timeout > 0:
            return defer.fail(ValueError(f"timeout must be positive, got {timeout}"))
        if cmd.is_oneway:
            return defer.fail(LocalProtocolError("invoke() got a oneway request; use invoke_oneway()"))
        if not self.is_open:
            return defer.fail(self._not_open_error(cmd))
        try:
            opaque, data = self.connection.send_request(cmd, self.reactor.seconds() + timeout)
        except (LocalProtocolError, CodecError) as e:
            return defer.fail(e)
        d: Deferred[RemotingCommand] = Deferred(canceller=lambda _: self._forget(opaque))
        timer = self.reactor.callLater(timeout, self._on_timeout, opaque)
        self._calls[opaque] = _Call(d, timer, cmd.code, timeout)
        self._write(data)
        return d

    def invoke_oneway(self, cmd: RemotingCommand) -> Deferred[None]:
        """Send a request with the ONEWAY flag; fire with None once written."""
        if not self.is_open:
            return defer.fail(self._not_open_error(cmd))
        try:
            _, data = self.connection.send_request(
                dataclasses.replace(cmd, flag=cmd.flag | FLAG_ONEWAY)
            )
        except (LocalProtocolError, CodecError) as e:
            return defer.fail(e)
        self._write(data)
        return defer.succeed(None)

    def close(self) -> None:
        """Close the connection (pending calls fail with ConnectionLostError once it is gone)."""
        self._closing = True
        if self.transport is not None and not self._lost:
            self.transport.loseConnection()
            if self._abort_call is None:
                self._abort_call = self.reactor.callLater(CLOSE_GRACE, self._abort)

    def when_closed(self) -> Deferred[None]:
        """A Deferred that fires (with None) once the connection is lost."""
        if self._lost:
            return defer.succeed(None)
        d: Deferred[None] = Deferred()
        self._close_waiters.append(d)
        return d

    # ---- internals -----------------------------------------------------------------------------

    def _not_open_error(self, cmd: RemotingCommand) -> ConnectionLostError:
        state = "closed" if self._closing else "not connected"
        return ConnectionLostError(
            f"cannot send request {code_name(cmd.code)} to {self.peer}: connection {state}"
        )

    def _touch(self) -> None:
        self._last_activity = self.reactor.seconds()

    def _write(self, data: bytes) -> None:
        self._touch()
        self.transport.write(data)

    def _abort(self) -> None:
        self._abort_call = None
        if not self._lost:
            self.log.warn("aborting connection to {peer}: not closed {grace:g} s after close()",
                          peer=self.peer, grace=CLOSE_GRACE)
            self.transport.abortConnection()

    def _check_idle(self) -> None:
        self._idle_call = None
        assert self.idle_timeout is not None
        idle_for = self.reactor.seconds() - self._last_activity
        if idle_for >= self.idle_timeout:
            self.log.info(
                "closing connection to {peer}: idle for {idle:.0f} s", peer=self.peer, idle=idle_for
            )
            self.close()
        elif not self._closing:
            self._idle_call = self.reactor.callLater(self.idle_timeout - idle_for, self._check_idle)

    def _complete(self, response: RemotingCommand) -> None:
        call = self._calls.pop(response.opaque, None)
        if call is None:  # pending in the sans-IO table but not here: cannot happen
            return
        if call.timer.active():
            call.timer.cancel()
        call.deferred.callback(response)

    def _forget(self, opaque: int) -> None:
        """Deferred canceller: the caller no longer wants the response."""
        call = self._calls.pop(opaque, None)
        self.connection.cancel(opaque)
        if call is not None and call.timer.active():
            call.timer.cancel()

    def _on_timeout(self, opaque: int) -> None:
        expired = self.connection.expire(self.reactor.seconds())
        if opaque not in expired and self.connection.cancel(opaque):
            expired.append(opaque)  # guard against clock rounding: our own timer fired
        self._fail_calls(
            expired,
            lambda op, call: RemotingTimeoutError(
                f"request {code_name(call.code)} opaque {op} to {self.peer} timed out after "
                f"{call.timeout:g} s"
            ),
        )

    def _fail_calls(self, opaques: list[int], error: Callable[[int, _Call], Exception]) -> None:
        """Forget these pending calls, stop their timers and fail their Deferreds."""
        for op in opaques:
            call = self._calls.pop(op, None)
            if call is None:
                continue
            if call.timer.active():
                call.timer.cancel()
            call.deferred.errback(error(op, call))

    def _dispatch(self, request: RemotingCommand) -> None:
        context = RequestContext(peer=self.peer, channel=self)
        d = self.dispatcher.dispatch(request, context)
        d.addCallback(self._respond, request)
        d.addErrback(
            lambda f: self.log.failure(
                "answering request {code} opaque {opaque} from {peer} failed",
                f, code=request.code, opaque=request.opaque, peer=self.peer,
            )
        )

    def _respond(self, response: RemotingCommand | None, request: RemotingCommand) -> None:
        if response is None or request.is_oneway:
            return
        if not self.is_open:
            self.log.warn(
                "dropping response to request {code} opaque {opaque}: connection to {peer} closed",
                code=request.code, opaque=request.opaque, peer=self.peer,
            )
            return
        try:
            data = self.connection.send_response(request, response)
        except CodecError as e:
            # e.g. a header too large to frame: answer like a failed processor instead
            self.log.failure("cannot encode response to {code}", Failure(), code=request.code)
            error = self.dispatcher.error_response(
                request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(e)
            )
            data = self.connection.send_response(request, error)
        self._write(data)
