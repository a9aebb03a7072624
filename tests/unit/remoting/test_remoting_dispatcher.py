"""Dispatcher: the processor table and Java's error fallbacks (wire-format.md section 7)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import LogLevel
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.codec import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.codes import FLAG_RESPONSE
from rmqwire.codec.commands import (
    BrokerData,
    GetMaxOffset,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffset,
    GetMinOffsetResponseHeader,
    GetRouteInfo,
    GetRouteInfoRequestHeader,
    NotifyConsumerIdsChanged,
    NotifyConsumerIdsChangedRequestHeader,
    PullMessage,
    QueryConsumerOffset,
    QueryConsumerOffsetResponseHeader,
    QueueData,
    Response,
    TopicRouteData,
)
from rmqwire.codec.java import java_str
from rmqwire.errors import (
    BrokerResponseError,
    MissingHeaderFieldError,
    NoPermissionError,
    TopicNotExistError,
)
from rmqwire.remoting.config import JAVA_SERVER_CONFIG, RemotingConfig
from rmqwire.remoting.dispatcher import (
    Dispatcher,
    Processor,
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
    assert exception_simple_desc(BrokerResponseError(1)) == "rmqwire.errors.BrokerResponseError: SYSTEM_ERROR (1)"
    assert exception_simple_desc(BrokerResponseError(999)) == "rmqwire.errors.BrokerResponseError: response code 999"


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


# ---- typed processors -----------------------------------------------------------------------------

ROUTE_T = TopicRouteData(
    queue_datas=[QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6)],
    broker_datas=[BrokerData(cluster="DefaultCluster", broker_name="broker-a", broker_addrs={0: "10.0.0.2:10911"})],
)


class RouteProcessor(Processor):
    """A NameServer's route lookup answered from a dict."""

    def __init__(self, routes: dict[str, TopicRouteData]) -> None:
        self.routes = routes
        self.seen: list[tuple[Any, Any, RequestContext]] = []

    @GetRouteInfo.responder
    def get_route_info(self, header: GetRouteInfoRequestHeader, body: None, context: RequestContext) -> TopicRouteData:
        self.seen.append((header, body, context))
        route = self.routes.get(header.topic)
        if route is None:
            raise TopicNotExistError(
                remark=f"No topic route info in name server for the topic: {java_str(header.topic)}"
            )
        return route


def typed_dispatcher(*processors: Processor, config: RemotingConfig = JAVA_SERVER_CONFIG) -> Dispatcher:
    return Dispatcher.for_config(config, *processors)


def test_processor_answers_route_from_a_dict() -> None:
    proc = RouteProcessor({"T": ROUTE_T})
    request = GetRouteInfo.request(topic="T").with_opaque(31)
    resp = result_of(typed_dispatcher(proc).dispatch(request, CTX))
    assert (resp.code, resp.opaque, resp.flag, resp.remark) == (0, 31, FLAG_RESPONSE, None)
    assert (resp.language, resp.version) == (LanguageCode.JAVA, 479)
    assert TopicRouteData.decode(resp.body) == ROUTE_T
    ((header, body, context),) = proc.seen
    assert header == GetRouteInfoRequestHeader(topic="T") and body is None
    assert context.peer == CTX.peer and context.request == request  # the raw frame rides along


def test_processor_typed_error_becomes_its_code_and_remark() -> None:
    resp = result_of(typed_dispatcher(RouteProcessor({})).dispatch(GetRouteInfo.request(topic="Nope"), CTX))
    assert (resp.code, resp.remark) == (17, "No topic route info in name server for the topic: Nope")
    assert resp.body is None and resp.is_response


def test_missing_required_field_reaches_the_responder_as_none(log_events) -> None:
    # Java's header decoder only logs a missing @CFNotNull field and hands the processor a null:
    # the official NameServer answers TOPIC_NOT_EXIST for the topic "null" (conformance:
    # test_typed_processor); the typed responder gets None and does the same.
    proc = RouteProcessor({"T": ROUTE_T})
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}, opaque=4)
    resp = result_of(typed_dispatcher(proc).dispatch(request, CTX))
    assert (resp.code, resp.remark, resp.opaque) == (
        ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name server for the topic: null", 4
    )
    # no extFields at all is the same case
    bare = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=5)
    assert result_of(typed_dispatcher(proc).dispatch(bare, CTX)).code == ResponseCode.TOPIC_NOT_EXIST
    assert [h.topic for h, _, _ in proc.seen] == [None, None]
    assert not [e for e in log_events.at(LogLevel.critical) if "log_failure" in e]  # not a crash


def test_sending_side_still_refuses_a_missing_required_field() -> None:
    with pytest.raises(MissingHeaderFieldError, match="topic"):
        GetRouteInfo.request()
    with pytest.raises(MissingHeaderFieldError):
        GetRouteInfo.parse_request(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}), strict=True)


def test_undecodable_header_answers_system_error() -> None:
    class Offsets(Processor):
        @GetMaxOffset.responder
        def max_offset(self, header: GetMaxOffsetRequestHeader, body: None, context: RequestContext) -> Any:
            raise AssertionError("not reached")

    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "one"})
    resp = result_of(typed_dispatcher(Offsets()).dispatch(request, CTX))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == (
        "org.apache.rocketmq.remoting.exception.RemotingCommandException: GetMaxOffsetRequestHeader "
        "field 'queueId': 'one' is not a valid Java Integer (not a decimal integer)"
    )


class Answers(Processor):
    """One responder per kind of return value."""

    gate: Deferred[Any]

    @QueryConsumerOffset.responder
    def header_only(self, header: Any, body: Any, context: RequestContext) -> QueryConsumerOffsetResponseHeader:
        return QueryConsumerOffsetResponseHeader(offset=42)

    @PullMessage.responder
    def a_response(self, header: Any, body: Any, context: RequestContext) -> Response[Any, Any]:
        return Response(code=ResponseCode.PULL_NOT_FOUND, remark="no new message")

    @GetMaxOffset.responder
    def raw_command(self, header: Any, body: Any, context: RequestContext) -> RemotingCommand:
        return context.request.response_to(0, header={"offset": "7"}, language=LanguageCode.GO)

    @GetMinOffset.responder
    def deferred(self, header: Any, body: Any, context: RequestContext) -> Deferred[Any]:
        self.gate = Deferred()
        return self.gate.addCallback(lambda n: GetMinOffsetResponseHeader(offset=n))

    @NotifyConsumerIdsChanged.responder
    def nothing(self, header: Any, body: Any, context: RequestContext) -> None:
        return None


def test_responder_returning_a_header() -> None:
    req = QueryConsumerOffset.request(consumer_group="g", topic="T", queue_id=0)
    resp = result_of(typed_dispatcher(Answers()).dispatch(req, CTX))
    assert (resp.code, resp.ext_fields, resp.body) == (0, {"offset": "42"}, None)
    assert QueryConsumerOffset.parse_response(resp).header == QueryConsumerOffsetResponseHeader(offset=42)


def test_responder_returning_a_response_with_a_status() -> None:
    req = PullMessage.request(
        consumer_group="g", topic="T", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=0,
        commit_offset=0, suspend_timeout_millis=0, sub_version=0,
    )
    resp = result_of(typed_dispatcher(Answers()).dispatch(req, CTX))
    assert (resp.code, resp.remark, resp.body) == (ResponseCode.PULL_NOT_FOUND, "no new message", None)


def test_responder_returning_a_remoting_command_is_sent_as_is_but_stamped() -> None:
    req = GetMaxOffset.request(topic="T", queue_id=1).with_opaque(9)
    resp = result_of(typed_dispatcher(Answers()).dispatch(req, CTX))
    assert (resp.code, resp.ext_fields, resp.opaque) == (0, {"offset": "7"}, 9)
    assert resp.language == LanguageCode.JAVA  # the dispatcher's stamp wins, as for raw handlers


def test_responder_returning_a_deferred() -> None:
    answers = Answers()
    d = typed_dispatcher(answers).dispatch(GetMinOffset.request(topic="T", queue_id=1), CTX)
    _sync.assertNoResult(d)
    answers.gate.callback(3)
    assert result_of(d).ext_fields == {"offset": "3"}


def test_responder_returning_none_sends_nothing() -> None:
    request = NotifyConsumerIdsChanged.request(consumer_group="g")
    assert request.is_oneway
    two_way = RemotingCommand.request(request.code, request.ext_fields)  # even when asked two-way
    assert result_of(typed_dispatcher(Answers()).dispatch(two_way, CTX)) is None


def test_async_def_responder() -> None:
    gate: Deferred[str] = Deferred()

    class Async(Processor):
        @GetRouteInfo.responder
        async def route(self, header: GetRouteInfoRequestHeader, body: None, context: RequestContext) -> Any:
            if await gate == "deny":
                raise NoPermissionError(remark=f"no permission for {header.topic}")
            return ROUTE_T

    dispatcher = typed_dispatcher(Async())
    d = dispatcher.dispatch(GetRouteInfo.request(topic="T"), CTX)
    _sync.assertNoResult(d)
    gate.callback("ok")
    assert TopicRouteData.decode(result_of(d).body) == ROUTE_T
    gate = Deferred()
    d = dispatcher.dispatch(GetRouteInfo.request(topic="T"), CTX)
    gate.callback("deny")
    resp = result_of(d)
    assert (resp.code, resp.remark) == (16, "no permission for T")


def test_one_responder_for_two_commands() -> None:
    class Offsets(Processor):
        @GetMaxOffset.responder
        @GetMinOffset.responder
        def offset(self, header: Any, body: None, context: RequestContext) -> Any:
            edge = {RequestCode.GET_MAX_OFFSET: 100, RequestCode.GET_MIN_OFFSET: 0}[context.request.code]
            return (GetMaxOffsetResponseHeader if edge else GetMinOffsetResponseHeader)(offset=edge)

    assert set(Offsets.__responders__) == {RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET}
    dispatcher = typed_dispatcher(Offsets())
    hi = result_of(dispatcher.dispatch(GetMaxOffset.request(topic="T", queue_id=0), CTX))
    lo = result_of(dispatcher.dispatch(GetMinOffset.request(topic="T", queue_id=0), CTX))
    assert (hi.ext_fields, lo.ext_fields) == ({"offset": "100"}, {"offset": "0"})


def test_subclass_inherits_and_overrides_responders() -> None:
    class Base(Processor):
        @GetMaxOffset.responder
        def max_offset(self, header: Any, body: None, context: RequestContext) -> Any:
            return GetMaxOffsetResponseHeader(offset=1)

        @GetMinOffset.responder
        def min_offset(self, header: Any, body: None, context: RequestContext) -> Any:
            return GetMinOffsetResponseHeader(offset=1)

    class Child(Base):
        def max_offset(self, header: Any, body: None, context: RequestContext) -> Any:  # plain override
            return GetMaxOffsetResponseHeader(offset=2)

        @GetRouteInfo.responder
        def route(self, header: Any, body: None, context: RequestContext) -> Any:
            return ROUTE_T

    assert set(Base.__responders__) == {RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET}
    assert set(Child.__responders__) == {*Base.__responders__, RequestCode.GET_ROUTEINFO_BY_TOPIC}
    dispatcher = typed_dispatcher(Child())
    hi = result_of(dispatcher.dispatch(GetMaxOffset.request(topic="T", queue_id=0), CTX))
    lo = result_of(dispatcher.dispatch(GetMinOffset.request(topic="T", queue_id=0), CTX))
    assert (hi.ext_fields, lo.ext_fields) == ({"offset": "2"}, {"offset": "1"})  # looked up by name
    assert result_of(dispatcher.dispatch(GetRouteInfo.request(topic="T"), CTX)).code == 0
    # the base class's table did not change
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC not in Base.__responders__


def test_oneway_typed_requests_get_no_reply_even_on_error(log_events) -> None:
    calls: list[NotifyConsumerIdsChangedRequestHeader] = []

    class Client(Processor):
        @NotifyConsumerIdsChanged.responder
        def notify(self, header: NotifyConsumerIdsChangedRequestHeader, body: None, context: RequestContext) -> Any:
            calls.append(header)
            raise RuntimeError("listener bug")

    class Raises(Processor):
        @GetRouteInfo.responder
        def route(self, header: Any, body: None, context: RequestContext) -> Any:
            raise TopicNotExistError(remark="none")

    dispatcher = typed_dispatcher(Client(), Raises())
    assert result_of(dispatcher.dispatch(NotifyConsumerIdsChanged.request(consumer_group="g"), CTX)) is None
    assert calls == [NotifyConsumerIdsChangedRequestHeader(consumer_group="g")]
    missing = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {}, oneway=True)
    assert result_of(dispatcher.dispatch(missing, CTX)) is None
    typed_error = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, oneway=True)
    assert result_of(dispatcher.dispatch(typed_error, CTX)) is None


def test_unencodable_return_value_becomes_system_error(log_events) -> None:
    class Bad(Processor):
        @GetRouteInfo.responder
        def route(self, header: Any, body: None, context: RequestContext) -> Any:
            return {"queueDatas": []}  # a dict is not a TopicRouteData

    resp = result_of(typed_dispatcher(Bad()).dispatch(GetRouteInfo.request(topic="T"), CTX))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark.startswith("rmqwire.errors.CodecError: cannot encode a dict as a body of type TopicRouteData")


def test_for_config_and_add_processor() -> None:
    config = RemotingConfig(language=LanguageCode.PYTHON, version=401)
    dispatcher = Dispatcher.for_config(config)
    assert (dispatcher.language, dispatcher.version) == (LanguageCode.PYTHON, 401)
    assert result_of(dispatcher.dispatch(GetRouteInfo.request(topic="T"), CTX)).code == 3
    dispatcher.add_processor(RouteProcessor({"T": ROUTE_T}))
    resp = result_of(dispatcher.dispatch(GetRouteInfo.request(topic="T"), CTX))
    assert (resp.code, resp.language, resp.version) == (0, LanguageCode.PYTHON, 401)
    # a later processor wins for the codes it answers
    dispatcher.add_processor(RouteProcessor({}))
    assert result_of(dispatcher.dispatch(GetRouteInfo.request(topic="T"), CTX)).code == 17


@pytest.mark.parametrize("remark", [None, "busy"])
def test_typed_error_without_or_with_remark(remark: str | None) -> None:
    class Busy(Processor):
        @GetRouteInfo.responder
        def route(self, header: Any, body: None, context: RequestContext) -> Any:
            raise BrokerResponseError(ResponseCode.SYSTEM_BUSY, remark)

    resp = result_of(typed_dispatcher(Busy()).dispatch(GetRouteInfo.request(topic="T"), CTX))
    assert (resp.code, resp.remark) == (2, remark)


# ---- answer(): the same answers without a Deferred for handlers that answer at once ------------


def _raises(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
    raise DomainError("boom")


@pytest.mark.parametrize("handler", [
    lambda c, x: c.response_to(0, remark="ok", body=b"b", language=LanguageCode.JAVA),
    lambda c, x: RemotingCommand(code=0, body=b"ok", opaque=1, language=LanguageCode.GO, version=1),
    lambda c, x: None,
    _raises,
    lambda c, x: {"code": 0},
    lambda c, x: (_ for _ in ()).throw(NoPermissionError(remark="denied")),
])
@pytest.mark.parametrize("oneway", [False, True])
def test_answer_is_synchronous_and_equals_dispatch(handler: Any, oneway: bool, log_events) -> None:
    d = Dispatcher({105: handler}, language=LanguageCode.JAVA, version=401)
    now = d.answer(request(oneway=oneway), CTX)
    assert not isinstance(now, Deferred)
    later = result_of(d.dispatch(request(oneway=oneway), CTX))
    assert now == later
    if now is not None:
        assert (now.opaque, now.flag, now.language, now.version) == (77, FLAG_RESPONSE, LanguageCode.JAVA, 401)
        assert now.serialize_type == later.serialize_type


def test_answer_of_a_deferred_handler_is_that_deferred_chain() -> None:
    pending: Deferred[RemotingCommand] = Deferred()
    later = Dispatcher({105: lambda c, x: pending}).answer(request(), CTX)
    assert isinstance(later, Deferred)
    _sync.assertNoResult(later)
    pending.callback(request().response_to(0, remark="late"))
    assert result_of(later).remark == "late"


def test_answer_tells_the_observer_whether_the_answer_was_pending() -> None:
    seen: list[tuple[int, str | None, bool]] = []

    class Observer:
        def record(self, req: RemotingCommand, resp: RemotingCommand, elapsed: float, pending: bool) -> None:
            seen.append((req.code, resp.remark, pending))

    gate: Deferred[RemotingCommand] = Deferred()
    d = Dispatcher({105: lambda c, x: c.response_to(0, remark="now"), 106: lambda c, x: gate})
    d.observer = Observer()
    assert d.answer(request(105), CTX).remark == "now"
    later = d.answer(request(106), CTX)
    gate.callback(request(106).response_to(0, remark="held"))
    assert result_of(later).remark == "held"
    assert seen == [(105, "now", False), (106, "held", True)]


def test_typed_responder_answering_at_once_needs_no_deferred() -> None:
    class Routes(Processor):
        @GetRouteInfo.responder
        def route(self, header: GetRouteInfoRequestHeader, body: None, ctx: RequestContext) -> Any:
            if header.topic == "missing":
                raise TopicNotExistError(remark="no route")
            return TopicRouteData(queue_datas=[], broker_datas=[])

    d = Dispatcher.for_config(JAVA_SERVER_CONFIG, Routes())
    ok = d.answer(RemotingCommand.request(105, {"topic": "T"}, opaque=3), CTX)
    missing = d.answer(RemotingCommand.request(105, {"topic": "missing"}, opaque=4), CTX)
    assert isinstance(ok, RemotingCommand) and (ok.code, ok.opaque) == (0, 3) and ok.body
    assert isinstance(missing, RemotingCommand)
    assert (missing.code, missing.remark, missing.opaque) == (ResponseCode.TOPIC_NOT_EXIST, "no route", 4)
