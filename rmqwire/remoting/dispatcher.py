"""The processor table: request code -> handler, with the Java fallbacks for errors.

Typed: a ``Processor`` subclass marks methods with ``@SomeCommand.responder``; each is called as
``method(header, body, context)`` with the decoded request header and body, and returns what
``Command.as_response`` accepts (a body, a header, a ``Response``, a RemotingCommand or None), a
Deferred of it, or a coroutine. As in Java, a missing required header field reaches the responder
as None (Java's decoder logs it and passes null); a value that does not parse answers 1
SYSTEM_ERROR with a ``RemotingCommandException`` remark.

Raw: a handler is ``handler(request, context)`` returning a RemotingCommand (the response), a
Deferred of one, or None (no response, as a Java processor returning null); ``async def``
handlers work too. The fallbacks follow ``NettyRemotingAbstract.processRequestCommand``
(shared/spec/wire-format.md section 7):

- no handler for the code -> 3 REQUEST_CODE_NOT_SUPPORTED, remark ``" request type <code> not supported"``;
- BrokerResponseError raised -> a response with its code and remark;
- any other exception -> 1 SYSTEM_ERROR, remark like Java's ``UtilAll.exceptionSimpleDesc``;
- a oneway request never gets a response, not even an error.

Server-side RPC hooks (Java's ``registerRPCHook`` on a remoting server, e.g. the broker's ACL
validator) see every request that has a handler before it runs: ``before_request(peer, request)``
returns the request to process or raises (a BrokerResponseError becomes that answer, before any
processor has seen the request); ``after_response`` sees each response built.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.codec.codes import (
    DEFAULT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    ResponseCode,
)
from rmqwire.codec.commands import RESPONDS_TO, Command
from rmqwire.codec.frame import RemotingCommand
from rmqwire.errors import BrokerResponseError, CodecError

if TYPE_CHECKING:
    from rmqwire.remoting.config import RemotingConfig, RPCHook


class RpcObserver(Protocol):
    """Told of every answer a Dispatcher built (oneway ones too, before they are dropped), with
    the time since the request reached it and whether the handler's answer was not ready when it
    returned (a held pull). Used by the servers' native metrics."""

    def record(self, request: RemotingCommand, response: RemotingCommand, elapsed_s: float,
               pending: bool) -> None: ...


class Channel(Protocol):
    """What a handler may do with the connection a request came in on (e.g. call the peer back)."""

    @property
    def peer(self) -> str: ...

    def invoke(self, cmd: RemotingCommand, timeout: float) -> Deferred[RemotingCommand]: ...

    def invoke_oneway(self, cmd: RemotingCommand) -> Deferred[None]: ...

    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class RequestContext:
    """Where a request came from: the peer's ``host:port``, its channel (to call the peer back,
    e.g. a broker's CHECK_TRANSACTION_STATE) and the raw request frame."""

    peer: str
    channel: Channel | None = None
    request: RemotingCommand | None = None


class HeldResponse:
    """An answer known now but sent later, without a Deferred chain: a SYNC_FLUSH send's response is
    built from the append result, then waits for the disk. A handler returns it (a typed responder
    with its value, e.g. a ``Response``); the channel frames it at once and keeps it. ``release()``
    on the reactor writes that frame; ``release(code, remark)`` the same response with another code
    and remark instead (e.g. FLUSH_DISK_TIMEOUT). Only the first release counts."""

    __slots__ = ("response", "released", "_code", "_remark", "_channel", "_request", "_frame",
                 "_observer", "_started")

    def __init__(self, response: Any) -> None:
        self.response = response
        self.released = False
        self._code: int | None = None
        self._remark: str | None = None
        self._channel: Any = None
        self._request: RemotingCommand | None = None
        self._frame: bytes | None = None
        self._observer: RpcObserver | None = None
        self._started = 0.0

    def release(self, code: int | None = None, remark: str | None = None) -> None:
        if self.released:
            return
        self.released = True
        self._code, self._remark = code, remark
        if self._channel is not None:   # else not bound yet (it is sent when bound) or never sent
            self._channel._send_held(self)

    def bind(self, channel: Any, request: RemotingCommand, frame: bytes) -> None:
        """The channel that will write ``frame`` (the framed response) on release."""
        self._channel, self._request, self._frame = channel, request, frame
        if self.released:
            channel._send_held(self)

    def final_response(self) -> RemotingCommand:
        """The response as released (the prepared one, or it with the release's code)."""
        response: RemotingCommand = self.response
        if self._code is not None:
            response = dataclasses.replace(response, code=self._code, remark=self._remark)
        return response

    def observe(self) -> None:
        """Tell the Dispatcher's observer, with the time from the request to the release."""
        observer = self._observer
        if observer is not None and self._request is not None:
            try:
                observer.record(self._request, self.final_response(),
                                time.perf_counter() - self._started, True)
            except Exception:
                Dispatcher.log.failure("recording the rpc latency failed")


HandlerResult: TypeAlias = "RemotingCommand | HeldResponse | Deferred[RemotingCommand | None] | None"
Handler: TypeAlias = Callable[[RemotingCommand, RequestContext], HandlerResult]


def unsupported_remark(code: int) -> str:
    """Java's remark for a request code without a processor (the leading space is Java's)."""
    return f" request type {code} not supported"


def exception_simple_desc(failure: Failure | BaseException) -> str:
    """Python analogue of Java's ``UtilAll.exceptionSimpleDesc``: ``"<Type>: <msg>, <func>(<file>:<line>)"``.

    The frame is the innermost one (where the exception was raised), as Java's stackTrace[0].
    """
    exc = failure.value if isinstance(failure, Failure) else failure
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    msg = str(exc)
    desc = f"{name}: {msg}" if msg else name
    frame = _innermost_frame(failure)
    return f"{desc}, {frame}" if frame else desc


def _innermost_frame(failure: Failure | BaseException) -> str | None:
    if isinstance(failure, Failure) and failure.frames:
        func, filename, line = failure.frames[-1][:3]
        return f"{func}({os.path.basename(filename)}:{line})"
    exc = failure.value if isinstance(failure, Failure) else failure
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f"{code.co_name}({os.path.basename(code.co_filename)}:{tb.tb_lineno})"


#: Java's exception class for header decoding failures (its remark names it).
_REMOTING_COMMAND_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"


class RequestHeaderError(BrokerResponseError):
    """A request header value does not parse as its Java type: SYSTEM_ERROR with Java's
    exception name for header decoding failures in the remark."""

    def __init__(self, error: CodecError) -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, f"{_REMOTING_COMMAND_EXCEPTION}: {error}")


class Processor:
    """A set of typed responders (cf. Twisted AMP's ``CommandLocator``).

    Subclasses mark methods with ``@SomeCommand.responder``; ``handlers()`` gives the raw
    handler table a Dispatcher takes. The tags are collected per class when it is defined.
    """

    __responders__: dict[int, tuple[type[Command], str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[int, tuple[type[Command], str]] = {}
        for base in reversed(cls.__mro__[1:]):
            table.update(getattr(base, "__responders__", {}))
        for name, fn in vars(cls).items():
            for command in getattr(fn, RESPONDS_TO, ()):
                for code in command.codes:
                    table[code] = (command, name)
        cls.__responders__ = table

    def handlers(self) -> dict[int, Handler]:
        """Request code -> a raw handler that decodes, calls the responder and encodes."""
        return {
            code: _TypedHandler(command, getattr(self, name))
            for code, (command, name) in self.__responders__.items()
        }


@dataclasses.dataclass(frozen=True, slots=True)
class _TypedHandler:
    command: type[Command]
    method: Callable[..., Any]

    def __call__(self, request: RemotingCommand, context: RequestContext) -> Any:
        try:
            header, body = self.command.parse_request(request)
        except CodecError as e:
            raise RequestHeaderError(e) from e
        if context.request is not request:
            context = dataclasses.replace(context, request=request)
        # Called at once (errors propagate to the Dispatcher, which answers them); only a
        # Deferred or coroutine result costs a Deferred chain.
        result = self.method(header, body, context)
        if inspect.iscoroutine(result):
            result = Deferred.fromCoroutine(result)
        if isinstance(result, Deferred):
            result.addCallback(_await_coroutine)
            return result.addCallback(self._encode, request)
        return self._encode(result, request)

    def _encode(self, value: Any, request: RemotingCommand) -> RemotingCommand | HeldResponse | None:
        if type(value) is HeldResponse:
            value.response = self._encode(value.response, request)
            return value if value.response is not None else None
        result = self.command.as_response(value)
        if result is None or isinstance(result, RemotingCommand):
            return result
        return self.command.build_response(request, result)


class Dispatcher:
    """A processor table; ``language``/``version`` are stamped on every response it builds.

    A server mimicking Java keeps the defaults (JAVA, 479); a client answering broker-initiated
    requests uses PYTHON. ``default`` plays Java's default processor (used for codes not in the
    table); without it unknown codes get REQUEST_CODE_NOT_SUPPORTED.
    """

    log = Logger()

    def __init__(
        self,
        processors: Mapping[int, Handler] | None = None,
        *,
        default: Handler | None = None,
        language: LanguageCode = LanguageCode.JAVA,
        version: int = DEFAULT_VERSION,
    ) -> None:
        self._table: dict[int, Handler] = {int(k): v for k, v in (processors or {}).items()}
        self.default = default
        self.language = language
        self.version = version
        #: Native metrics (None: off, and nothing is measured).
        self.observer: RpcObserver | None = None
        self.hooks: tuple[RPCHook, ...] = ()

    @classmethod
    def for_config(cls, config: RemotingConfig, *processors: Processor) -> Dispatcher:
        """A table answering with the config's language and version, holding ``processors``."""
        d = cls(language=config.language, version=config.version)
        for p in processors:
            d.add_processor(p)
        return d

    def register(self, code: int, handler: Handler) -> None:
        self._table[int(code)] = handler

    def add_processor(self, processor: Processor) -> None:
        """Register every responder of ``processor`` (later registrations win per code)."""
        for code, handler in processor.handlers().items():
            self.register(code, handler)

    def add_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` on every request with a handler, after the hooks added before it."""
        self.hooks = (*self.hooks, hook)

    def unregister(self, code: int) -> None:
        self._table.pop(int(code), None)

    def handler_for(self, code: int) -> Handler | None:
        return self._table.get(code, self.default)

    def dispatch(
        self, request: RemotingCommand, context: RequestContext
    ) -> Deferred[RemotingCommand | None]:
        """Run the handler; fire with the response to send, or None when nothing must be sent.

        The Deferred never fails: every error becomes a response (or None for oneway).
        """
        result = self.answer(request, context)
        return result if isinstance(result, Deferred) else _succeed(result)

    def answer(
        self, request: RemotingCommand, context: RequestContext
    ) -> RemotingCommand | None | Deferred[RemotingCommand | None]:
        """``dispatch`` without a Deferred when the handler answers at once (most do, and a
        Deferred chain per request was most of a cached route lookup's cost): the response to
        send, None, or a Deferred of either that never fails."""
        observer = self.observer
        started = time.perf_counter() if observer is not None else 0.0
        handler = self._table.get(request.code, self.default)
        if handler is None:
            self.log.error(
                "{peer} request type {code} not supported", peer=context.peer, code=request.code
            )
            response = self.error_response(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(request.code))
            if observer is not None:
                observer.record(request, response, time.perf_counter() - started, False)
            return self._finish(request, response)
        try:
            result = (self._hooked(handler, request, context) if self.hooks
                      else handler(request, context))
            if inspect.iscoroutine(result):
                result = Deferred.fromCoroutine(result)
        except BaseException:  # as maybeDeferred: every error becomes an answer
            response = self._on_failure(request, context, Failure())
        else:
            if isinstance(result, Deferred):
                return self._chain(result, request, context, observer, started)
            try:
                response = self._check(request, result)
            except BaseException:
                response = self._on_failure(request, context, Failure())
        if observer is None:
            return self._finish(request, response)
        return self._observed(response, observer, request, started, False)

    def _chain(self, d: Deferred[Any], request: RemotingCommand, context: RequestContext,
               observer: RpcObserver | None, started: float) -> Deferred[RemotingCommand | None]:
        """The steps of ``answer`` for a handler that returned a Deferred."""
        pending = not d.called
        # separate steps so that a bad return value (TypeError in _check) also becomes SYSTEM_ERROR
        d.addCallback(_await_coroutine)
        d.addCallback(lambda result: self._check(request, result))
        d.addErrback(lambda failure: self._on_failure(request, context, failure))
        if observer is None:
            d.addCallback(lambda response: self._finish(request, response))
        else:
            d.addCallback(self._observed, observer, request, started, pending)
        return d

    def _hooked(self, handler: Handler, request: RemotingCommand, context: RequestContext) -> Any:
        for hook in self.hooks:
            request = hook.before_request(context.peer, request)
        d: Deferred[Any] = maybeDeferred(handler, request, context)
        d.addCallback(_await_coroutine)

        def after(response: Any) -> Any:
            built = response.response if type(response) is HeldResponse else response
            if isinstance(built, RemotingCommand):
                for hook in self.hooks:
                    hook.after_response(context.peer, request, built)
            return response

        return d.addCallback(after)

    def error_response(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        return request.response_to(code, remark, language=self.language, version=self.version)

    def _check(self, request: RemotingCommand, result: object) -> RemotingCommand | HeldResponse | None:
        if result is None or isinstance(result, RemotingCommand):
            return result
        if type(result) is HeldResponse and isinstance(result.response, RemotingCommand):
            return result
        raise TypeError(
            f"handler for request code {request.code} returned {type(result).__name__}, "
            "expected RemotingCommand or None"
        )

    def _on_failure(
        self, request: RemotingCommand, context: RequestContext, failure: Failure
    ) -> RemotingCommand:
        exc = failure.value
        if isinstance(exc, BrokerResponseError):
            # a deliberate error answer, not a bug: no stack trace in the log
            self.log.debug(
                "request {code} from {peer} answered with error {rcode}: {remark}",
                code=request.code, peer=context.peer, rcode=exc.code, remark=exc.remark,
            )
            return self.error_response(request, exc.code, exc.remark)
        self.log.failure(
            "process request {code} opaque {opaque} from {peer} failed",
            failure, code=request.code, opaque=request.opaque, peer=context.peer,
        )
        return self.error_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(failure))

    def _observed(self, response: RemotingCommand | None, observer: RpcObserver, request: RemotingCommand,
                  started: float, pending: bool) -> RemotingCommand | None:
        """``_finish`` after telling the observer (one callback for both: this is per request)."""
        if type(response) is HeldResponse:  # recorded when released
            response._observer, response._started = observer, started
        elif response is not None:  # None: nothing is answered (Java records nothing either)
            try:
                observer.record(request, response, time.perf_counter() - started, pending)
            except Exception:
                self.log.failure("recording the rpc latency failed")
        return self._finish(request, response)

    def _finish(self, request: RemotingCommand, response: Any) -> Any:
        if response is None or request.flag & FLAG_ONEWAY:
            return None  # Java's writeResponse drops responses to oneway requests
        if type(response) is HeldResponse:
            response.response = self._finish(request, response.response)
            return response
        if (response.opaque == request.opaque and response.flag == FLAG_RESPONSE
                and response.language is self.language and response.version == self.version):
            return response  # already so (a handler's response_to): no copy
        return dataclasses.replace(
            response,
            opaque=request.opaque,
            flag=FLAG_RESPONSE,
            language=self.language,
            version=self.version,
        )


def _await_coroutine(result: object) -> object:
    """Let handlers be ``async def`` too."""
    if inspect.iscoroutine(result):
        return Deferred.fromCoroutine(result)
    return result


def _succeed(value: RemotingCommand | None) -> Deferred[RemotingCommand | None]:
    d: Deferred[RemotingCommand | None] = Deferred()
    d.callback(value)
    return d
