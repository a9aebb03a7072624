"""The Twisted side of one remoting connection: Deferreds, one deadline timer, the processor table.

``RemotingProtocol`` (a channel, in Netty's words) wraps a sans-IO ``RemotingConnection``, which
owns every pending call; the protocol keeps one timer due no later than the connection's next
deadline.
Either side may call the other: ``invoke``/``invoke_oneway`` send requests; requests from the peer
(a broker calling a client with CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO, ...) go
through the ``Dispatcher``. The reactor is injected (only ``IReactorTime`` is used), so tests
drive time with ``Clock``. Spec: shared/spec/wire-format.md sections 1.2, 3, 4 and 7.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.codec.codes import FLAG_ONEWAY, ResponseCode, SerializeType, code_name
from rmqwire.codec.frame import PreparedRequest, RemotingCommand
from rmqwire.errors import (
    CodecError,
    ConnectionLostError,
    LocalProtocolError,
    RemotingError,
    RemotingTimeoutError,
)
from rmqwire.remoting.config import RemotingConfig
from rmqwire.remoting.connection import (
    PendingCall,
    ProtocolFailed,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    ScannedResponseReceived,
    UnmatchedResponse,
)
from rmqwire.remoting.dispatcher import (
    Dispatcher,
    HeldResponse,
    RequestContext,
    exception_simple_desc,
)


def format_address(addr: object) -> str:
    host, port = getattr(addr, "host", None), getattr(addr, "port", None)
    if host is None or port is None:
        return str(addr)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def drain(reactor: IReactorTime, channels: Iterable[RemotingProtocol], grace: float) -> Deferred[None]:
    """Fire once every channel is drained, or after ``grace`` seconds, whichever comes first."""
    waits = [ch.when_drained() for ch in channels if not ch.drained]
    if not waits:
        return defer.succeed(None)
    d = defer.gatherResults(waits, consumeErrors=True)
    d.addTimeout(grace, reactor)
    return d.addBoth(lambda _: None)  # past the grace the caller closes anyway


class CallReceiver(typing.Protocol):
    """Where ``invoke_direct`` delivers a call's outcome (one of the two methods, once)."""

    request: RemotingCommand | None

    def answered(self, response: RemotingCommand) -> None: ...

    def failed(self, error: Exception) -> None: ...


class ScanReceiver(CallReceiver, typing.Protocol):
    """A ``CallReceiver`` that also takes a response as the fast scan of its JSON header
    (``rmqwire.codec.header_scan``) and its body, before anything else is decoded."""

    def answered_scan(self, scan: re.Match[str], body: bytes | None) -> None: ...


class RemotingProtocol(Protocol):
    """One remoting connection (client or server side; the protocol is symmetric).

    ``config`` supplies serialize types, idle timeout, frame limit, in-flight limit and RPC hooks;
    ``dispatcher`` answers the peer's requests.
    """

    log = Logger()

    def __init__(
        self,
        reactor: IReactorTime,
        dispatcher: Dispatcher | None = None,
        config: RemotingConfig | None = None,
        *,
        first_opaque: int = 0,
    ) -> None:
        self.reactor = reactor
        self.config = config if config is not None else RemotingConfig()
        self.dispatcher = dispatcher if dispatcher is not None else Dispatcher.for_config(self.config)
        self.connection = RemotingConnection(
            serialize_type=self.config.serialize_type,
            response_serialize_type=self.config.response_serialize_type,
            max_frame_length=self.config.max_frame_length,
            max_pending=self.config.max_inflight,
            first_opaque=first_opaque,
        )
        self.idle_timeout = self.config.idle_timeout
        self.peer = "<not connected>"
        self._closing = False
        self._lost = False
        self._deadline_call: IDelayedCall | None = None
        self._idle_call: IDelayedCall | None = None
        self._abort_call: IDelayedCall | None = None
        self._last_activity = 0.0
        self._close_waiters: list[Deferred[None]] = []
        self._drain_waiters: list[Deferred[None]] = []
        self._dispatching = 0  # requests from the peer still being processed

    # ---- Twisted callbacks ---------------------------------------------------------------------

    def connectionMade(self) -> None:
        # As Java's Netty client and server (TCP_NODELAY): without it Nagle holds a small write
        # back until the peer's delayed ACK, tens of ms per request on a busy connection.
        set_no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if set_no_delay is not None:
            try:
                set_no_delay(True)
            except OSError:
                pass
        self.peer = format_address(self.transport.getPeer())
        self._touch()
        if self.idle_timeout is not None:
            self._idle_call = self.reactor.callLater(self.idle_timeout, self._check_idle)
        self.log.debug("connected to {peer}", peer=self.peer)

    def dataReceived(self, data: bytes) -> None:
        if self._closing:
            return  # after a framing error or close() the rest of the stream is meaningless
        self._last_activity = self.reactor.seconds()  # _touch
        for event in self.connection.receive_data(data):
            if type(event) is ScannedResponseReceived:  # first: one per response of a send
                self._complete_scanned(event)
            elif isinstance(event, RequestReceived):
                self._dispatch(event.command)
            elif isinstance(event, ResponseReceived):
                self._complete(event.call, event.command)
            elif isinstance(event, UnmatchedResponse):
                cmd = event.command
                self.log.warn(
                    "dropping response code {code} opaque {opaque} from {peer}: no pending request "
                    "(late after a timeout?)",
                    code=cmd.code, opaque=cmd.opaque, peer=self.peer,
                )
            elif isinstance(event, ProtocolFailed):
                # Java's NettyDecoder closes the channel on any decode error, without replying;
                # the good frames before the bad bytes came first and were handled above.
                self.log.warn(
                    "closing connection to {peer}: {error}", peer=self.peer, error=str(event.error)
                )
                self.close()
        # no timer work: an answer only takes a deadline away (the timer, if early, re-arms)

    def receive_whole(self, buf: bytearray, n: int) -> bool:
        """``dataReceived(bytes(buf[:n]))`` when those bytes are exactly one whole answer to a
        scanned call (``RemotingConnection.take_answer``): True once handled; False, with nothing
        done, for anything else, which then goes to ``dataReceived``. For a reader of the socket
        that skips Twisted's read step (a blocking caller reading its own answer)."""
        if self._closing:
            return False
        event = self.connection.take_answer(buf, n)
        if event is None:
            return False
        self._last_activity = self.reactor.seconds()
        self._complete_scanned(event)
        return True

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._lost:
            return
        if reason is None:
            reason = Failure(ConnectionLostError("connection closed"))
        self._closing = True
        self._lost = True
        self.connected = 0
        for timer in (self._idle_call, self._abort_call, self._deadline_call):
            if timer is not None and timer.active():
                timer.cancel()
        self._idle_call = self._abort_call = self._deadline_call = None
        why = reason.getErrorMessage()
        for call in self.connection.close():
            self._fail(call, ConnectionLostError(
                f"connection to {self.peer} lost while request {code_name(call.code)} "
                f"opaque {call.opaque} was pending: {why}"
            ))
        self.log.debug("connection to {peer} lost: {why}", peer=self.peer, why=why)
        self._notify_drained()
        waiters, self._close_waiters = self._close_waiters, []
        for w in waiters:
            w.callback(None)

    # ---- public API ----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return bool(self.connected) and not self._closing

    @property
    def pending_count(self) -> int:
        return len(self.connection)

    def invoke(self, cmd: RemotingCommand, timeout: float | None = None) -> Deferred[RemotingCommand]:
        """Send a two-way request; fire with the response command (any response code).

        ``timeout`` defaults to ``config.call_timeout``. Fails with RemotingTimeoutError after it,
        ConnectionLostError if the connection drops first, RemotingTooManyRequestsError when
        ``config.max_inflight`` calls are already pending. Cancelling the Deferred forgets the call.
        """
        if timeout is None:
            timeout = self.config.call_timeout
        if not timeout > 0:
            return defer.fail(self._no_time_left(timeout, cmd))
        if cmd.flag & FLAG_ONEWAY:
            return defer.fail(LocalProtocolError("invoke() got a oneway request; use invoke_oneway()"))
        if not self.connected or self._closing:  # not is_open
            return defer.fail(self._not_open_error(cmd))
        d: Deferred[RemotingCommand] = Deferred(canceller=self._forget)
        try:
            if self.config.rpc_hooks:
                cmd = self.config.before_request(self.peer, cmd)
            now = self.reactor.seconds()
            deadline = now + timeout
            opaque, data = self.connection.send_request(cmd, deadline, timeout=timeout, token=(d, cmd))
        except (LocalProtocolError, CodecError, RemotingError) as e:
            return defer.fail(e)
        d.opaque = opaque  # type: ignore[attr-defined]  # for the canceller
        self._call_written(data, now, deadline)
        return d

    def _call_written(self, data: bytes, now: float, deadline: float) -> None:
        """Write a two-way call's frame (``_write``, with the clock read when it was sent)."""
        self._last_activity = now
        self.transport.write(data)
        timer = self._deadline_call
        # The timer never runs later than the earliest pending deadline, so a call due no sooner
        # needs nothing: the common case (a later call of the same timeout), sync or pipelined.
        if timer is None or timer.getTime() > deadline:
            self._arm(deadline)

    def invoke_direct(self, cmd: RemotingCommand, timeout: float, receiver: CallReceiver) -> int:
        """``invoke`` without a Deferred: the response goes to ``receiver.answered(response)``, a
        timeout or a lost connection to ``receiver.failed(error)``; either is called once, in the
        reactor thread, and must not raise. Raises what ``invoke`` would fail with. Returns the
        call's opaque (``forget`` drops the call). With RPC hooks, ``receiver.request`` is set to
        the request as sent (after_response reads it)."""
        if not timeout > 0:
            raise self._no_time_left(timeout, cmd)
        if cmd.flag & FLAG_ONEWAY:
            raise LocalProtocolError("invoke_direct() got a oneway request; use invoke_oneway()")
        if not self.connected or self._closing:
            raise self._not_open_error(cmd)
        if self.config.rpc_hooks:
            cmd = self.config.before_request(self.peer, cmd)
            receiver.request = cmd
        now = self.reactor.seconds()
        deadline = now + timeout
        opaque, data = self.connection.send_request(cmd, deadline, timeout=timeout, token=receiver)
        self._call_written(data, now, deadline)
        return opaque

    def write_oneway_prepared(self, request: PreparedRequest) -> None:
        """``write_oneway`` for a oneway request framed but for its opaque: written as it is
        when the connection sends JSON headers and has no RPC hooks, else as its command."""
        conn = self.connection
        if self.config.rpc_hooks or conn.serialize_type is not SerializeType.JSON:
            self.write_oneway(request.command())
            return
        if not self.connected or self._closing:
            raise self._not_open_error(request)
        data = conn.send_prepared_oneway(request)
        self._last_activity = self.reactor.seconds()  # _write
        self.transport.write(data)

    def invoke_direct_prepared(self, request: PreparedRequest, timeout: float, receiver: CallReceiver,
                               scanned: bool = False) -> int:
        """``invoke_direct`` for a request framed but for its opaque: written as it is when the
        connection sends JSON headers and has no RPC hooks (as ``invoke_prepared``), else as its
        command. ``scanned`` (a ``ScanReceiver``): then a response whose JSON header the fast scan
        accepts goes to ``receiver.answered_scan`` undecoded (with hooks, never: after_response
        reads the command). A receiver that is a ``PendingCall`` is the pending call itself (no
        call object of its own per request)."""
        conn = self.connection
        if self.config.rpc_hooks or conn.serialize_type is not SerializeType.JSON:
            return self.invoke_direct(request.command(), timeout, receiver)
        if not timeout > 0:
            raise self._no_time_left(timeout, request)
        if not self.connected or self._closing:
            raise self._not_open_error(request)
        now = self.reactor.seconds()
        deadline = now + timeout
        opaque, data = conn.send_prepared(request, deadline, timeout=timeout, token=receiver,
                                          scanned=scanned,
                                          call=receiver if isinstance(receiver, PendingCall) else None)
        # _call_written, inline: every warm send's first attempt is written here
        self._last_activity = now
        self.transport.write(data)
        timer = self._deadline_call
        if timer is None or timer.getTime() > deadline:
            self._arm(deadline)
        return opaque

    def forget(self, opaque: int) -> None:
        """Drop the pending call ``opaque`` (its caller gave up): no outcome reaches it."""
        call = self.connection.cancel(opaque)
        if call is not None:
            call.token = None  # a receiver that is its own call refers to itself
        self._notify_drained()

    def invoke_prepared(self, request: PreparedRequest, timeout: float | None = None) -> Deferred[RemotingCommand]:
        """``invoke`` for a request framed but for its opaque (``PreparedRequest``): written as it
        is when the connection sends JSON headers and has no RPC hooks, else as its command."""
        conn = self.connection
        if self.config.rpc_hooks or conn.serialize_type is not SerializeType.JSON:
            try:
                cmd = request.command()
            except Exception as e:
                return defer.fail(e)
            return self.invoke(cmd, timeout)
        if timeout is None:
            timeout = self.config.call_timeout
        if not timeout > 0:
            return defer.fail(self._no_time_left(timeout, request))
        if not self.connected or self._closing:
            return defer.fail(self._not_open_error(request))
        d: Deferred[RemotingCommand] = Deferred(canceller=self._forget)
        try:
            now = self.reactor.seconds()
            deadline = now + timeout
            # no hooks: after_response never reads the request, so none is kept
            opaque, data = conn.send_prepared(request, deadline, timeout=timeout, token=(d, None))
        except (LocalProtocolError, CodecError, RemotingError) as e:
            return defer.fail(e)
        d.opaque = opaque  # type: ignore[attr-defined]
        self._call_written(data, now, deadline)
        return d

    def invoke_oneway(self, cmd: RemotingCommand) -> Deferred[None]:
        """Send a request with the ONEWAY flag; fire with None once written."""
        try:
            self.write_oneway(cmd)
        except (LocalProtocolError, CodecError, RemotingError) as e:
            return defer.fail(e)
        return defer.succeed(None)

    def write_oneway(self, cmd: RemotingCommand) -> None:
        """``invoke_oneway`` without a Deferred: raises what it would fail with."""
        if not self.connected or self._closing:  # not is_open
            raise self._not_open_error(cmd)
        if self.config.rpc_hooks:
            cmd = self.config.before_request(self.peer, cmd)
        flag = cmd.flag
        if not flag & FLAG_ONEWAY:  # positional: cheaper than dataclasses.replace, once per send
            cmd = RemotingCommand(cmd.code, cmd.language, cmd.version, cmd.opaque, flag | FLAG_ONEWAY,
                                  cmd.remark, cmd.ext_fields, cmd.body, cmd.serialize_type)
        _, data = self.connection.send_request(cmd)
        self._last_activity = self.reactor.seconds()  # _write
        self.transport.write(data)

    def close(self) -> None:
        """Close the connection (pending calls fail with ConnectionLostError once it is gone)."""
        self._closing = True
        if self.transport is not None and not self._lost:
            self.transport.loseConnection()
            if self._abort_call is None:
                self._abort_call = self.reactor.callLater(self.config.close_grace, self._abort)

    def when_closed(self) -> Deferred[None]:
        """A Deferred that fires (with None) once the connection is lost."""
        if self._lost:
            return defer.succeed(None)
        d: Deferred[None] = Deferred()
        self._close_waiters.append(d)
        return d

    @property
    def drained(self) -> bool:
        """No call of ours pending, no request of the peer's being processed (or gone)."""
        return self._lost or (not len(self.connection) and not self._dispatching)

    def when_drained(self) -> Deferred[None]:
        """A Deferred that fires once ``drained`` holds."""
        if self.drained:
            return defer.succeed(None)
        d: Deferred[None] = Deferred()
        self._drain_waiters.append(d)
        return d

    # ---- internals -----------------------------------------------------------------------------

    def _not_open_error(self, cmd: RemotingCommand | PreparedRequest) -> ConnectionLostError:
        state = "closed" if self._closing else "not connected"
        return ConnectionLostError(
            f"cannot send request {code_name(cmd.code)} to {self.peer}: connection {state}"
        )

    def _no_time_left(self, timeout: float, cmd: RemotingCommand | PreparedRequest) -> Exception:
        """The error of a two-way call given a ``timeout`` that is not positive: a budget spent
        (0 or less) is a timeout, as Java's ``invokeSync`` with nothing left (nothing is written,
        so the peer never sees a request its caller gave up on); anything else (NaN) is no timeout
        at all. A configured timeout is refused where it is configured (``RemotingConfig``,
        ``ProducerConfig``)."""
        if timeout <= 0:
            return RemotingTimeoutError(
                f"request {code_name(cmd.code)} to {self.peer} timed out before it was sent: "
                f"no time left ({timeout:g} s)")
        return ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")

    def _touch(self) -> None:
        self._last_activity = self.reactor.seconds()

    def _write(self, data: bytes) -> None:
        self._touch()
        self.transport.write(data)

    def _abort(self) -> None:
        self._abort_call = None
        if not self._lost:
            self.log.warn("aborting connection to {peer}: not closed {grace:g} s after close()",
                          peer=self.peer, grace=self.config.close_grace)
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

    def _arm(self, deadline: float) -> None:
        """Make the deadline timer run no later than ``deadline``.

        The one timer is re-aimed lazily: an answered or forgotten call leaves it where it is,
        even when no call is left (it then fires once, finds nothing due and stays off), so a
        sync caller's send arms no timer and cancels none (a callLater and a cancel per call,
        and the reactor's heap of cancelled calls, were a few us of each send)."""
        timer = self._deadline_call
        delay = deadline - self.reactor.seconds()
        if delay < 0.0:
            delay = 0.0
        if timer is None:
            self._deadline_call = self.reactor.callLater(delay, self._on_deadline)
        elif timer.getTime() > deadline:
            timer.reset(delay)

    def _on_deadline(self) -> None:
        self._deadline_call = None
        for call in self.connection.expire(self.reactor.seconds()):
            self._fail(call, RemotingTimeoutError(
                f"request {code_name(call.code)} opaque {call.opaque} to {self.peer} timed out "
                f"after {call.timeout:g} s"
            ))
        deadline = self.connection.next_deadline()
        if deadline is not None:
            self._arm(deadline)
        self._notify_drained()

    def _complete(self, call: PendingCall, response: RemotingCommand) -> None:
        token = call.token
        call.token = None  # the lazily pruned deadline heap may hold the call a while longer
        direct = type(token) is not tuple  # invoke_direct's receiver, else invoke's (d, request)
        if self.config.rpc_hooks:
            try:
                self.config.after_response(self.peer, token.request if direct else token[1], response)
            except Exception:
                self.log.failure("RPC hook after_response failed for {code}", code=call.code)
        if direct:
            try:
                token.answered(response)
            except Exception:
                self.log.failure("response handler for {code} failed", code=call.code)
        else:
            token[0].callback(response)
        if self._drain_waiters:
            self._notify_drained()

    def _complete_scanned(self, event: ScannedResponseReceived) -> None:
        """``_complete`` of a scanned response (its call has a ScanReceiver and no hooks)."""
        call = event.call
        token = call.token
        call.token = None
        try:
            token.answered_scan(event.scan, event.body)
        except Exception:
            self.log.failure("response handler for {code} failed", code=call.code)
        if self._drain_waiters:
            self._notify_drained()

    def _fail(self, call: PendingCall, error: Exception) -> None:
        token = call.token
        call.token = None
        if type(token) is tuple:
            token[0].errback(error)
            return
        try:
            token.failed(error)
        except Exception:
            self.log.failure("failure handler for {code} failed", code=call.code)

    def _forget(self, d: Deferred[RemotingCommand]) -> None:
        """Deferred canceller: the caller no longer wants the response."""
        # A canceller runs only while ``d`` is unfired, so its opaque is still ours.
        self.forget(d.opaque)  # type: ignore[attr-defined]

    def _notify_drained(self) -> None:
        if self._drain_waiters and self.drained:
            waiters, self._drain_waiters = self._drain_waiters, []
            for w in waiters:
                w.callback(None)

    def _dispatch(self, request: RemotingCommand) -> None:
        context = RequestContext(peer=self.peer, channel=self, request=request)
        answer = self.dispatcher.answer(request, context)
        if not isinstance(answer, Deferred):  # answered at once: no Deferred per request
            try:
                self._respond(answer, request)
            except Exception:
                self.log.failure("answering request {code} opaque {opaque} from {peer} failed",
                                 code=request.code, opaque=request.opaque, peer=self.peer)
            self._notify_drained()
            return
        self._dispatching += 1
        d = answer
        d.addCallback(self._respond, request)
        d.addBoth(self._dispatched)
        d.addErrback(
            lambda f: self.log.failure(
                "answering request {code} opaque {opaque} from {peer} failed",
                f, code=request.code, opaque=request.opaque, peer=self.peer,
            )
        )

    def _dispatched(self, result: object) -> object:
        self._dispatching -= 1
        self._notify_drained()
        return result

    def _respond(self, response: RemotingCommand | HeldResponse | None, request: RemotingCommand) -> None:
        if response is None or request.is_oneway:
            return
        if not self.is_open:
            self.log.warn(
                "dropping response to request {code} opaque {opaque}: connection to {peer} closed",
                code=request.code, opaque=request.opaque, peer=self.peer,
            )
            return
        if type(response) is HeldResponse:
            # framed now, written on release: nothing is left to do per answer then
            self._dispatching += 1
            response.bind(self, request, self._frame(request, response.response))
            return
        self._write(self._frame(request, response))

    def _frame(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        try:
            return self.connection.send_response(request, response)
        except CodecError as e:
            # e.g. a header too large to frame: answer like a failed processor instead
            self.log.failure("cannot encode response to {code}", Failure(), code=request.code)
            error = self.dispatcher.error_response(
                request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(e)
            )
            return self.connection.send_response(request, error)

    def _send_held(self, held: HeldResponse) -> None:
        """``held`` was released: write its frame (or the response with the release's code)."""
        request = held._request
        assert request is not None
        self._dispatching -= 1
        try:
            if held._observer is not None:
                held.observe()
            if not self.is_open:
                self.log.warn(
                    "dropping response to request {code} opaque {opaque}: connection to {peer} closed",
                    code=request.code, opaque=request.opaque, peer=self.peer,
                )
            elif held._code is None:
                self._write(held._frame)  # type: ignore[arg-type]
            else:
                self._write(self._frame(request, held.final_response()))
        finally:
            if self._drain_waiters:
                self._notify_drained()
