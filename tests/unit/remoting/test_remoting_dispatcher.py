"""Dispatcher: the processor table and Java's error fallbacks (wire-format.md section 7)."""

from __future__ import annotations

import re

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import LogLevel
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.codec import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.codes import FLAG_RESPONSE
from rmqwire.errors import BrokerResponseError
from rmqwire.remoting.dispatcher import (
    Dispatcher,
    RequestContext,
    exception_simple_desc,
    unsupported_remark,
)

CTX = RequestContext(peer="10.0.0.7:51000")
_sync = SynchronousTestCase()
result_of = _sync.successResultOf


def request(code: int = RequestCode.GET_ROUTEINFO_BY_TOPIC, oneway: bool = False) -> RemotingCommand:
    return RemotingCommand.request(code, {"topic": "T"}, opaque=77, oneway=oneway)


class DomainError(Exception):
    pass


def test_unknown_code_gets_request_code_not_supported_with_java_remark() -> None:
    resp = result_of(Dispatcher().dispatch(request(9999), CTX))
    assert resp == RemotingCommand(
        code=ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        language=LanguageCode.JAVA,
        version=479,
        opaque=77,
        flag=FLAG_RESPONSE,
        remark=" request type 9999 not supported",
    )
    assert unsupported_remark(105) == " request type 105 not supported"


def test_unknown_oneway_code_gets_nothing() -> None:
    assert result_of(Dispatcher().dispatch(request(9999, oneway=True), CTX)) is None


def test_handler_response_is_stamped() -> None:
    seen: list[tuple[RemotingCommand, RequestContext]] = []

    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        seen.append((cmd, ctx))
        return RemotingCommand(code=0, body=b"ok", opaque=1, language=LanguageCode.GO, version=1)

    d = Dispatcher({RequestCode.GET_ROUTEINFO_BY_TOPIC: handler}, language=LanguageCode.PYTHON, version=401)
    resp = result_of(d.dispatch(request(), CTX))
    assert seen == [(request(), CTX)]
    assert (resp.code, resp.body, resp.opaque, resp.flag) == (0, b"ok", 77, FLAG_RESPONSE)
    assert (resp.language, resp.version) == (LanguageCode.PYTHON, 401)


def test_deferred_handler_fires_later() -> None:
    pending: Deferred[RemotingCommand] = Deferred()
    d = Dispatcher({105: lambda cmd, ctx: pending}).dispatch(request(), CTX)
    _sync.assertNoResult(d)
    pending.callback(request().response_to(0, remark="late"))
    assert result_of(d).remark == "late"


def test_handler_returning_none_sends_nothing() -> None:
    assert result_of(Dispatcher({105: lambda cmd, ctx: None}).dispatch(request(), CTX)) is None


def test_handler_exception_becomes_system_error(log_events) -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        raise DomainError("boom")

    resp = result_of(Dispatcher({105: handler}).dispatch(request(), CTX))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.opaque == 77 and resp.is_response
    # Java: e.toString() + ", " + stackTrace[0]; here "<module>.<Type>: <msg>, <func>(<file>:<line>)"
    assert re.fullmatch(
        r"test_remoting_dispatcher\.DomainError: boom, handler\(test_remoting_dispatcher\.py:\d+\)",
        resp.remark,
    ), resp.remark
    failures = [e for e in log_events.at(LogLevel.critical) if "log_failure" in e]
    assert len(failures) == 1 and failures[0]["code"] == 105 and failures[0]["peer"] == CTX.peer


def test_builtin_exception_remark_and_no_message() -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        raise RuntimeError

    resp = result_of(Dispatcher({105: handler}).dispatch(request(), CTX))
    assert re.fullmatch(r"RuntimeError, handler\(test_remoting_dispatcher\.py:\d+\)", resp.remark)


def test_failed_deferred_becomes_system_error() -> None:
    resp = result_of(Dispatcher({105: lambda c, x: fail(KeyError("k"))}).dispatch(request(), CTX))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark.startswith("KeyError: 'k'")


def test_bad_return_type_becomes_system_error() -> None:
    resp = result_of(Dispatcher({105: lambda c, x: {"code": 0}}).dispatch(request(), CTX))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark.startswith("TypeError: handler for request code 105 returned dict")


def test_broker_response_error_maps_to_its_code_and_remark() -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        raise BrokerResponseError(ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name server for the topic: T")

    resp = result_of(Dispatcher({105: handler}).dispatch(request(), CTX))
    assert (resp.code, resp.remark, resp.opaque) == (17, "No topic route info in name server for the topic: T", 77)
    # also when it arrives through a Deferred, and with no remark
    resp = result_of(Dispatcher({105: lambda c, x: fail(BrokerResponseError(2))}).dispatch(request(), CTX))
    assert (resp.code, resp.remark) == (2, None)


def test_oneway_never_answered_even_on_error(log_events) -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        raise DomainError("boom")

    calls: list[int] = []
    table = {
        RequestCode.CHECK_TRANSACTION_STATE: handler,
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: lambda c, x: calls.append(c.code) or c.response_to(0),
        RequestCode.HEART_BEAT: lambda c, x: fail(BrokerResponseError(1, "x")),
    }
    d = Dispatcher(table)
    for code in table:
        assert result_of(d.dispatch(request(code, oneway=True), CTX)) is None
    assert calls == [40]
    assert len([e for e in log_events.at(LogLevel.critical) if "log_failure" in e]) == 1


def test_default_processor_and_register() -> None:
    d = Dispatcher(default=lambda c, x: c.response_to(0, remark="default"))
    assert result_of(d.dispatch(request(1234), CTX)).remark == "default"
    d.register(1234, lambda c, x: c.response_to(0, remark="specific"))
    assert result_of(d.dispatch(request(1234), CTX)).remark == "specific"
    d.unregister(1234)
    d.default = None
    assert result_of(d.dispatch(request(1234), CTX)).code == 3


def test_exception_simple_desc_without_traceback() -> None:
    assert exception_simple_desc(ValueError("v")) == "ValueError: v"
    assert exception_simple_desc(BrokerResponseError(1)) == "rmqwire.errors.BrokerResponseError: response code 1"


def test_dispatch_of_succeeded_deferred_passes_through() -> None:
    resp = result_of(Dispatcher({105: lambda c, x: succeed(c.response_to(5))}).dispatch(request(), CTX))
    assert resp.code == 5


def test_async_def_handler() -> None:
    gate: Deferred[str] = Deferred()

    async def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        remark = await gate
        if remark == "fail":
            raise BrokerResponseError(ResponseCode.NO_PERMISSION, "denied")
        return cmd.response_to(0, remark=remark)

    d = Dispatcher({105: handler})
    first = d.dispatch(request(), CTX)
    _sync.assertNoResult(first)
    gate.callback("async ok")
    assert result_of(first).remark == "async ok"
    gate2: Deferred[str] = Deferred()
    gate = gate2
    second = d.dispatch(request(), CTX)
    gate2.callback("fail")
    resp = result_of(second)
    assert (resp.code, resp.remark) == (16, "denied")
