"""RemotingProtocol on in-memory transports with a fake clock (no real I/O, no global reactor)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.codec import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    SerializeType,
    encode_frame,
)
from rmqwire.codec.acl import verify_command
from rmqwire.codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, ResponseCode
from rmqwire.codec.frame import PreparedRequest, json_request_template
from rmqwire.codec.header_scan import scanned_code, scanned_ext_fields, scanned_remark
from rmqwire.errors import (
    ConnectionLostError,
    LocalProtocolError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from rmqwire.remoting.config import (
    DEFAULT_CLOSE_GRACE,
    JAVA_SERVER_CONFIG,
    RemotingConfig,
)
from rmqwire.remoting.connection import PendingCall
from rmqwire.remoting.dispatcher import Dispatcher, HeldResponse, RequestContext
from rmqwire.remoting.hooks import AclClientRPCHook
from rmqwire.remoting.protocol import RemotingProtocol, drain

_sync = SynchronousTestCase()
PEER = IPv4Address("TCP", "10.0.0.1", 10911)
ROUTE = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})


class Harness:
    """A protocol on a StringTransport with a Clock; keyword arguments are RemotingConfig fields."""

    def __init__(
        self,
        dispatcher: Dispatcher | None = None,
        config: RemotingConfig | None = None,
        *,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        self.clock = clock if clock is not None else Clock()
        self.config = (config or RemotingConfig()).replace(**kwargs)
        self.proto = RemotingProtocol(self.clock, dispatcher, self.config)
        self.tr = StringTransport(peerAddress=PEER)
        self.proto.makeConnection(self.tr)

    def sent(self) -> list[RemotingCommand]:
        data = self.tr.value()
        self.tr.clear()
        return FrameDecoder().feed(data)

    def feed(self, cmd: RemotingCommand, stype: SerializeType = SerializeType.JSON) -> None:
        self.proto.dataReceived(encode_frame(cmd, stype))

    def lose(self) -> None:
        self.proto.connectionLost(Failure(ConnectionDone("closed by test")))


def pair(
    server_dispatcher: Dispatcher | None = None,
    client_dispatcher: Dispatcher | None = None,
    **kwargs: Any,
) -> tuple[RemotingProtocol, RemotingProtocol, iosim.IOPump, Clock]:
    clock = Clock()
    config = RemotingConfig(**kwargs)
    server = RemotingProtocol(clock, server_dispatcher, config)
    client = RemotingProtocol(clock, client_dispatcher, config)
    pump = iosim.connect(
        server, iosim.makeFakeServer(server), client, iosim.makeFakeClient(client), greet=False, clock=clock
    )
    return server, client, pump, clock


def echo(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
    return cmd.response_to(0, remark=f"echo {cmd.code} from {ctx.peer}", body=cmd.body)


# ---- request / response ---------------------------------------------------------------------------


def test_invoke_writes_request_and_fires_with_response() -> None:
    h = Harness()
    d = h.proto.invoke(ROUTE, timeout=3.0)
    (req,) = h.sent()
    assert req == ROUTE.with_opaque(0)
    _sync.assertNoResult(d)
    h.feed(req.response_to(0, body=b"route"))
    resp = _sync.successResultOf(d)
    assert (resp.opaque, resp.body, resp.is_response) == (0, b"route", True)
    assert h.proto.pending_count == 0
    # the deadline timer is left armed (no cancel per call); at its time it fails nothing and
    # ends, leaving only the idle timer
    assert_deadline_timer_ends_quietly(h, at=3.0)


def assert_deadline_timer_ends_quietly(h: Harness, at: float) -> None:
    """The deadline timer left after the last call ended runs at ``at`` (no later than that call's
    deadline), fails nothing and is not re-armed."""
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == at
    h.clock.advance(at - h.clock.seconds())
    assert deadline_timers(h.clock) == [] and h.proto.pending_count == 0 and h.proto.is_open
    assert [c.func.__name__ for c in h.clock.getDelayedCalls()] == ["_check_idle"]


def test_responses_out_of_order_match_by_opaque() -> None:
    h = Harness()
    d1, d2 = h.proto.invoke(ROUTE, 3), h.proto.invoke(ROUTE, 3)
    r1, r2 = h.sent()
    h.feed(r2.response_to(0, remark="two"))
    h.feed(r1.response_to(0, remark="one"))
    assert (_sync.successResultOf(d1).remark, _sync.successResultOf(d2).remark) == ("one", "two")


def test_pair_request_response() -> None:
    _server, client, pump, _ = pair(Dispatcher({105: echo}))
    d = client.invoke(RemotingCommand.request(105, {"topic": "T"}, b"payload"), 3.0)
    pump.flush()
    resp = _sync.successResultOf(d)
    assert resp.code == 0 and resp.body == b"payload" and resp.remark.startswith("echo 105 from ")
    assert resp.language == LanguageCode.JAVA and resp.version == 479


# ---- timeouts --------------------------------------------------------------------------------------


def test_timeout_fails_with_clear_message_and_late_response_is_dropped(log_events) -> None:
    h = Harness()
    d = h.proto.invoke(ROUTE, timeout=3.0)
    (req,) = h.sent()
    h.clock.advance(2.999)
    _sync.assertNoResult(d)
    h.clock.advance(0.001)
    err = _sync.failureResultOf(d, RemotingTimeoutError).value
    assert str(err) == (
        "request GET_ROUTEINFO_BY_TOPIC(105) opaque 0 to 10.0.0.1:10911 timed out after 3 s"
    )
    assert h.proto.pending_count == 0 and h.proto.connection.pending == {}
    h.feed(req.response_to(0))  # late: logged and dropped, no exception
    warnings = log_events.at(LogLevel.warn)
    assert len(warnings) == 1 and warnings[0]["opaque"] == 0
    assert "no pending request" in warnings[0]["log_format"]
    assert h.proto.is_open


def test_each_call_has_its_own_timeout() -> None:
    h = Harness()
    short, long_ = h.proto.invoke(ROUTE, 1.0), h.proto.invoke(ROUTE, 5.0)
    h.clock.advance(1.0)
    _sync.failureResultOf(short, RemotingTimeoutError)
    _sync.assertNoResult(long_)
    h.clock.advance(4.0)
    _sync.failureResultOf(long_, RemotingTimeoutError)


def test_cancel_forgets_the_call() -> None:
    h = Harness()
    d = h.proto.invoke(ROUTE, 3.0)
    (_req,) = h.sent()
    d.cancel()
    _sync.failureResultOf(d, CancelledError)
    assert h.proto.pending_count == 0 and h.proto.connection.pending == {}
    assert_deadline_timer_ends_quietly(h, at=3.0)


class Receiver:
    """An ``invoke_direct`` receiver recording what reached it."""

    def __init__(self, raises: bool = False) -> None:
        self.request: RemotingCommand | None = None
        self.outcomes: list[Any] = []
        self.raises = raises

    def answered(self, response: RemotingCommand) -> None:
        self.outcomes.append(response)
        if self.raises:
            raise RuntimeError("receiver bug")

    def failed(self, error: Exception) -> None:
        self.outcomes.append(error)
        if self.raises:
            raise RuntimeError("receiver bug")


def test_invoke_direct_hands_the_response_to_the_receiver() -> None:
    h = Harness()
    r1, r2 = Receiver(), Receiver()
    assert (h.proto.invoke_direct(ROUTE, 3.0, r1), h.proto.invoke_direct(ROUTE, 3.0, r2)) == (0, 1)
    req1, req2 = h.sent()
    assert req1 == ROUTE.with_opaque(0) and req2 == ROUTE.with_opaque(1)
    assert r1.outcomes == [] and h.proto.pending_count == 2
    h.feed(req2.response_to(0, remark="two"))
    h.feed(req1.response_to(0, remark="one"))
    assert [r.remark for r in r1.outcomes + r2.outcomes] == ["one", "two"]
    assert h.proto.pending_count == 0 and r1.request is None  # no hooks: the request not kept
    assert_deadline_timer_ends_quietly(h, at=3.0)
    assert [len(r.outcomes) for r in (r1, r2)] == [1, 1]  # no timeout after the answer


def test_invoke_direct_timeout_loss_and_forget() -> None:
    h = Harness()
    late, lost, forgotten = Receiver(), Receiver(), Receiver()
    h.proto.invoke_direct(ROUTE, 1.0, late)
    h.proto.invoke_direct(ROUTE, 5.0, lost)
    opaque = h.proto.invoke_direct(ROUTE, 5.0, forgotten)
    h.clock.advance(1.0)
    (err,) = late.outcomes
    assert isinstance(err, RemotingTimeoutError) and "opaque 0" in str(err) and lost.outcomes == []
    h.proto.forget(opaque)
    assert h.proto.pending_count == 1
    h.lose()
    assert [type(e) for e in lost.outcomes] == [ConnectionLostError] and forgotten.outcomes == []
    assert late.outcomes == [err]  # each outcome once


def test_invoke_direct_refusals_raise_before_anything_is_written() -> None:
    h = Harness(max_inflight=1)
    with pytest.raises(RemotingTimeoutError):
        h.proto.invoke_direct(ROUTE, 0, Receiver())
    with pytest.raises(LocalProtocolError):
        h.proto.invoke_direct(dataclasses.replace(ROUTE, flag=FLAG_ONEWAY), 3.0, Receiver())
    h.proto.invoke_direct(ROUTE, 3.0, Receiver())
    h.tr.clear()
    with pytest.raises(RemotingTooManyRequestsError):
        h.proto.invoke_direct(ROUTE, 3.0, Receiver())
    h.lose()
    with pytest.raises(ConnectionLostError):
        h.proto.invoke_direct(ROUTE, 3.0, Receiver())
    assert h.tr.value() == b""


def test_invoke_direct_runs_hooks_and_survives_a_failing_receiver(log_events) -> None:
    hook = RecordingHook("1")
    h = Harness(rpc_hooks=(hook,))
    bad, good = Receiver(raises=True), Receiver()
    h.proto.invoke_direct(ROUTE, 3.0, bad)
    h.proto.invoke_direct(ROUTE, 3.0, good)
    first, second = h.sent()
    assert first.ext_fields["hooks"] == "1" and bad.request.ext_fields == first.ext_fields
    h.feed(first.response_to(0))  # the receiver raises: logged, the next frame still handled
    h.feed(second.response_to(0))
    assert len(bad.outcomes) == 1 and len(good.outcomes) == 1
    assert [req.ext_fields["hooks"] for _, req, _ in hook.responses] == ["1", "1"]
    assert any("response handler" in f for f in log_events.formats(LogLevel.critical))


def _every_invoke(h: Harness, timeout: float) -> list[BaseException]:
    """What each two-way entry point (Deferred or raising) gives for ``timeout``."""
    errors: list[BaseException] = [
        _sync.failureResultOf(h.proto.invoke(ROUTE, timeout)).value,
        _sync.failureResultOf(h.proto.invoke_prepared(_prepared(), timeout)).value,
    ]
    for call in (lambda: h.proto.invoke_direct(ROUTE, timeout, Receiver()),
                 lambda: h.proto.invoke_direct_prepared(_prepared(), timeout, Receiver(), True)):
        with pytest.raises(Exception) as caught:
            call()
        errors.append(caught.value)
    return errors


@pytest.mark.parametrize("timeout", [0, 0.0, -0.001, -1.0])
def test_a_spent_budget_times_out_without_writing(timeout: float) -> None:
    # Java's invokeSync with nothing left (left <= 0): a RemotingTimeoutException, no write
    h = Harness()
    errors = _every_invoke(h, timeout)
    assert [type(e) for e in errors] == [RemotingTimeoutError] * 4
    assert all("GET_ROUTEINFO_BY_TOPIC" in str(e) and "10.0.0.1:10911" in str(e) for e in errors)
    assert h.tr.value() == b"" and h.proto.pending_count == 0
    assert h.proto._deadline_call is None  # no deadline armed for a call never made
    d = h.proto.invoke(ROUTE, 1.0)  # the connection is as it was: the next call goes out
    (sent,) = h.sent()
    h.feed(sent.response_to(0))
    assert _sync.successResultOf(d).opaque == sent.opaque


def test_a_timeout_that_is_no_number_is_refused() -> None:
    h = Harness()
    assert [type(e) for e in _every_invoke(h, float("nan"))] == [ValueError] * 4
    assert h.tr.value() == b""


@pytest.mark.parametrize("field", ["call_timeout", "connect_timeout"])
@pytest.mark.parametrize("value", [0, -1.0, float("nan")])
def test_a_bad_configured_timeout_is_refused_with_the_config(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RemotingConfig(**{field: value})


# ---- oneway ---------------------------------------------------------------------------------------


def test_invoke_oneway_sets_flag_and_keeps_nothing_pending() -> None:
    h = Harness()
    d = h.proto.invoke_oneway(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"q": "1"}))
    assert _sync.successResultOf(d) is None
    (sent,) = h.sent()
    assert sent.flag == FLAG_ONEWAY and sent.code == 15
    assert h.proto.pending_count == 0


def test_invoke_refuses_oneway_command() -> None:
    h = Harness()
    oneway = RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True)
    _sync.failureResultOf(h.proto.invoke(oneway, 3), LocalProtocolError)


def test_oneway_request_from_peer_gets_no_reply_even_for_unknown_code_or_error() -> None:
    handled: list[int] = []

    def boom(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        handled.append(cmd.code)
        raise RuntimeError("boom")

    h = Harness(Dispatcher({39: boom, 40: lambda c, x: handled.append(c.code) or c.response_to(0)}))
    for code in (39, 40, 9999):
        h.feed(RemotingCommand.request(code, oneway=True, opaque=5))
    assert handled == [39, 40]
    assert h.tr.value() == b""


# ---- errors -----------------------------------------------------------------------------------------


def test_unknown_code_answered_with_exact_java_remark() -> None:
    h = Harness()
    h.feed(RemotingCommand.request(9999, opaque=12))
    (resp,) = h.sent()
    assert (resp.code, resp.opaque, resp.flag) == (3, 12, FLAG_RESPONSE)
    assert resp.remark == " request type 9999 not supported"


def test_unknown_code_remark_on_the_wire_json() -> None:
    h = Harness(config=JAVA_SERVER_CONFIG)  # answers as the Java servers do
    h.feed(RemotingCommand.request(9999, opaque=12))
    assert h.tr.value()[8:] == (
        b'{"code":3,"flag":1,"language":"JAVA","opaque":12,'
        b'"remark":" request type 9999 not supported","serializeTypeCurrentRPC":"JSON","version":479}'
    )


def test_handler_error_answered_with_system_error() -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        raise ZeroDivisionError("division by zero")

    h = Harness(Dispatcher({105: handler}))
    h.feed(ROUTE.with_opaque(3))
    (resp,) = h.sent()
    assert resp.code == 1 and resp.opaque == 3
    assert resp.remark.startswith("ZeroDivisionError: division by zero, handler(test_remoting_protocol.py:")


def test_framing_error_closes_without_reply(log_events) -> None:
    h = Harness(Dispatcher({105: echo}))
    pending = h.proto.invoke(ROUTE, 3.0)
    h.tr.clear()
    # a frame whose header word names serialize type 7: Java's NettyDecoder closes the channel
    h.proto.dataReceived(b"\x00\x00\x00\x08\x07\x00\x00\x00\x00\x00\x00\x00")
    assert h.tr.disconnecting
    assert h.tr.value() == b""
    h.feed(ROUTE)  # ignored after the error
    assert h.tr.value() == b""
    assert any("closing connection" in f for f in log_events.formats(LogLevel.warn))
    _sync.assertNoResult(pending)
    h.lose()
    _sync.failureResultOf(pending, ConnectionLostError)


def test_good_frame_before_garbage_in_one_read_is_still_answered() -> None:
    # Netty hands every decoded frame to the pipeline before the decode error closes the channel.
    h = Harness(Dispatcher({105: echo}))
    h.proto.dataReceived(encode_frame(ROUTE.with_opaque(5)) + b"\x00\x00\x00\x08\x07\x00\x00\x00\x00\x00\x00\x00")
    (reply,) = h.sent()
    assert reply.is_response and reply.opaque == 5 and reply.code == 0
    assert h.tr.disconnecting


def test_oversize_frame_closes_connection() -> None:
    h = Harness(max_frame_length=1024)
    h.proto.dataReceived(b"\x00\x01\x00\x00")
    assert h.tr.disconnecting and h.tr.value() == b""


# ---- connection loss --------------------------------------------------------------------------------


def test_connection_lost_fails_all_pending_and_cancels_timers() -> None:
    h = Harness()
    calls = [h.proto.invoke(ROUTE, 3.0) for _ in range(3)]
    closed = h.proto.when_closed()
    h.lose()
    for i, d in enumerate(calls):
        err = _sync.failureResultOf(d, ConnectionLostError).value
        assert f"opaque {i} was pending" in str(err) and "10.0.0.1:10911" in str(err)
        assert "GET_ROUTEINFO_BY_TOPIC(105)" in str(err)
    assert h.clock.getDelayedCalls() == []
    assert _sync.successResultOf(closed) is None
    assert _sync.successResultOf(h.proto.when_closed()) is None
    # no sends after loss
    _sync.failureResultOf(h.proto.invoke(ROUTE, 3.0), ConnectionLostError)
    _sync.failureResultOf(h.proto.invoke_oneway(ROUTE), ConnectionLostError)


def test_response_from_slow_handler_after_loss_is_dropped(log_events) -> None:
    later: Deferred[RemotingCommand] = Deferred()
    h = Harness(Dispatcher({105: lambda c, x: later}))
    h.feed(ROUTE.with_opaque(1))
    h.lose()
    later.callback(ROUTE.with_opaque(1).response_to(0))
    assert h.tr.value() == b""
    assert any("dropping response" in f for f in log_events.formats(LogLevel.warn))


def test_pair_connection_loss_reaches_both_sides() -> None:
    server, client, pump, _ = pair(Dispatcher({105: lambda c, x: Deferred()}))
    d = client.invoke(ROUTE, 3.0)
    pump.flush()
    server.close()
    pump.flush()
    _sync.failureResultOf(d, ConnectionLostError)
    assert not client.is_open and not server.is_open


def test_close_aborts_a_connection_that_does_not_go_away(log_events) -> None:
    # loseConnection waits for buffered writes; a peer that stopped reading must not hold the socket
    h = Harness(idle_timeout=None)
    pending = h.proto.invoke(ROUTE, 60.0)
    h.proto.close()
    assert h.tr.disconnecting and not h.tr.disconnected
    h.clock.advance(DEFAULT_CLOSE_GRACE - 0.001)
    assert not h.tr.disconnected
    h.clock.advance(0.001)
    assert h.tr.disconnected  # StringTransport's mark of abortConnection()
    assert any("aborting connection" in f for f in log_events.formats(LogLevel.warn))
    h.lose()
    _sync.failureResultOf(pending, ConnectionLostError)
    assert h.clock.getDelayedCalls() == []


def test_prompt_close_cancels_the_abort_timer() -> None:
    h = Harness(idle_timeout=None)
    h.proto.close()
    h.proto.close()  # a second close schedules no second timer
    assert [c.func.__name__ for c in h.clock.getDelayedCalls()] == ["_abort"]
    h.lose()
    assert h.clock.getDelayedCalls() == []
    assert not h.tr.disconnected


# ---- idle timeout -----------------------------------------------------------------------------------


def test_idle_timeout_closes_after_120s_of_silence() -> None:
    h = Harness()
    h.clock.advance(119.9)
    assert not h.tr.disconnecting
    h.clock.advance(0.1)
    assert h.tr.disconnecting
    h.lose()
    assert h.clock.getDelayedCalls() == []


def test_reads_and_writes_both_reset_idle_timer() -> None:
    h = Harness(Dispatcher({105: echo}), idle_timeout=10.0)
    h.clock.advance(8)
    h.feed(ROUTE)  # read (and the write of the reply) at t=8
    h.clock.advance(9)  # t=17
    assert not h.tr.disconnecting
    h.proto.invoke_oneway(ROUTE)  # write only, at t=17
    h.clock.advance(9.9)  # t=26.9
    assert not h.tr.disconnecting
    h.clock.advance(0.1)  # t=27: 10 s after the last write
    assert h.tr.disconnecting


def test_idle_timeout_can_be_disabled() -> None:
    h = Harness(idle_timeout=None)
    assert h.clock.getDelayedCalls() == []
    with pytest.raises(ValueError):
        RemotingConfig(idle_timeout=0)


def test_idle_close_fails_pending_calls_before_their_timeout() -> None:
    h = Harness(idle_timeout=5.0)
    d = h.proto.invoke(ROUTE, 60.0)
    h.clock.advance(5.0)
    assert h.tr.disconnecting
    h.lose()
    _sync.failureResultOf(d, ConnectionLostError)


# ---- both directions ------------------------------------------------------------------------------


def test_peer_initiated_request_answered_on_client_connection() -> None:
    """A broker calls GET_CONSUMER_RUNNING_INFO (307) on the client's own connection."""

    def running_info(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        return cmd.response_to(0, body=b'{"properties":{}}')

    client_table = Dispatcher({RequestCode.GET_CONSUMER_RUNNING_INFO: running_info}, language=LanguageCode.PYTHON)
    broker, client, pump, _ = pair(Dispatcher({105: lambda c, x: Deferred()}), client_table)
    # both sides have a call in flight with the same opaque 0: flags keep them apart
    client_call = client.invoke(ROUTE, 3.0)
    broker_call = broker.invoke(RemotingCommand.request(307, {"consumerGroup": "g", "clientId": "c"}), 3.0)
    pump.flush()
    resp = _sync.successResultOf(broker_call)
    assert (resp.code, resp.body, resp.language, resp.opaque) == (0, b'{"properties":{}}', LanguageCode.PYTHON, 0)
    _sync.assertNoResult(client_call)


def test_handler_can_call_back_through_its_channel() -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> Deferred[RemotingCommand]:
        assert ctx.channel is not None
        back = ctx.channel.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 3.0)
        return back.addCallback(lambda r: cmd.response_to(0, remark=f"client said {r.remark}"))

    client_table = Dispatcher({307: lambda c, x: c.response_to(0, remark="hi")})
    _server, client, pump, _ = pair(Dispatcher({105: handler}), client_table)
    d = client.invoke(ROUTE, 3.0)
    pump.flush()
    assert _sync.successResultOf(d).remark == "client said hi"


# ---- serialize types ----------------------------------------------------------------------------------


@pytest.mark.parametrize("request_type", list(SerializeType))
@pytest.mark.parametrize("response_type", [None, *SerializeType])
def test_response_serialize_type_modes(request_type: SerializeType, response_type: SerializeType | None) -> None:
    h = Harness(Dispatcher({105: echo}), response_serialize_type=response_type)
    h.feed(ROUTE, request_type)
    frame = h.tr.value()
    assert frame[4] == (request_type if response_type is None else response_type)
    (resp,) = h.sent()
    assert resp.code == 0 and resp.is_response


@pytest.mark.parametrize("stype", list(SerializeType))
def test_outgoing_serialize_type_and_pair(stype: SerializeType) -> None:
    seen: list[SerializeType] = []

    def handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
        seen.append(cmd.serialize_type)
        return echo(cmd, ctx)

    _server, client, pump, _ = pair(Dispatcher({105: handler}), serialize_type=stype)
    d = client.invoke(ROUTE, 3.0)
    pump.flush()
    assert seen == [stype]  # the request went out in the configured type
    assert _sync.successResultOf(d).serialize_type == stype  # 4.x mode: answered in kind


def test_client_default_language_is_python_on_requests() -> None:
    h = Harness()
    h.proto.invoke(ROUTE, 1.0).addErrback(lambda f: None)
    (req,) = h.sent()
    assert req.language == LanguageCode.PYTHON
    h.clock.advance(1.0)


# ---- byte boundaries ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stype", list(SerializeType))
def test_request_split_at_every_byte_boundary(stype: SerializeType) -> None:
    data = encode_frame(RemotingCommand.request(105, {"topic": "T"}, b"body", opaque=4), stype)
    for cut in range(len(data) + 1):
        h = Harness(Dispatcher({105: echo}))
        h.proto.dataReceived(data[:cut])
        if cut < len(data):
            assert h.tr.value() == b""
        h.proto.dataReceived(data[cut:])
        (resp,) = h.sent()
        assert resp.opaque == 4 and resp.body == b"body", cut


def test_response_split_at_every_byte_boundary() -> None:
    resp_bytes = encode_frame(RemotingCommand(code=0, opaque=0, flag=FLAG_RESPONSE, body=b"xyz"))
    for cut in range(len(resp_bytes) + 1):
        h = Harness()
        d = h.proto.invoke(ROUTE, 3.0)
        h.proto.dataReceived(resp_bytes[:cut])
        if cut < len(resp_bytes):
            _sync.assertNoResult(d)
        h.proto.dataReceived(resp_bytes[cut:])
        assert _sync.successResultOf(d).body == b"xyz", cut


# ---- one deadline timer ---------------------------------------------------------------------------


def deadline_timers(clock: Clock) -> list[Any]:
    return [c for c in clock.getDelayedCalls() if c.func.__name__ == "_on_deadline"]


def test_one_timer_for_many_calls_with_different_timeouts() -> None:
    h = Harness(idle_timeout=None)
    calls = [h.proto.invoke(ROUTE, t) for t in (5.0, 2.0, 9.0, 2.5, 7.0)]
    (timer,) = deadline_timers(h.clock)
    assert len(h.clock.getDelayedCalls()) == 1  # nothing else per call
    assert timer.getTime() == 2.0  # the earliest deadline
    # answering the earliest call leaves the timer where it is (it fires early and re-arms)
    (_, r2, *_rest) = h.sent()
    h.feed(r2.response_to(0))
    _sync.successResultOf(calls[1])
    assert len(deadline_timers(h.clock)) == 1
    h.clock.advance(2.0)
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == 2.5
    _sync.assertNoResult(calls[3])
    h.clock.advance(0.5)
    _sync.failureResultOf(calls[3], RemotingTimeoutError)
    for d in (calls[0], calls[2], calls[4]):
        _sync.assertNoResult(d)
    assert len(deadline_timers(h.clock)) == 1 and deadline_timers(h.clock)[0].getTime() == 5.0


def test_shorter_later_call_reschedules_the_timer_earlier() -> None:
    h = Harness(idle_timeout=None)
    long_ = h.proto.invoke(ROUTE, 10.0)
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == 10.0
    h.clock.advance(1.0)
    short = h.proto.invoke(ROUTE, 2.0)  # deadline 3.0, earlier than 10.0
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == 3.0
    h.clock.advance(2.0)
    _sync.failureResultOf(short, RemotingTimeoutError)
    _sync.assertNoResult(long_)
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == 10.0
    h.clock.advance(7.0)
    _sync.failureResultOf(long_, RemotingTimeoutError)
    assert h.clock.getDelayedCalls() == []


def test_timeouts_fire_in_deadline_order() -> None:
    h = Harness(idle_timeout=None)
    order: list[float] = []
    timeouts = [4.0, 1.0, 3.0, 2.0, 3.0]
    for t in timeouts:
        h.proto.invoke(ROUTE, t).addErrback(lambda f, t=t: f.trap(RemotingTimeoutError) and order.append(t))
    h.clock.advance(10.0)  # one big step: the timer still fails them earliest first
    assert order == sorted(timeouts)
    assert h.proto.pending_count == 0 and h.clock.getDelayedCalls() == []


def test_cancelling_every_call_leaves_a_timer_that_ends_itself() -> None:
    h = Harness(idle_timeout=None)
    calls = [h.proto.invoke(ROUTE, t) for t in (1.0, 2.0)]
    for d in calls:
        d.cancel()
        _sync.failureResultOf(d, CancelledError)
    # left at the first deadline (no cancel, no heap work per call); it fires once, finds
    # nothing and is not re-armed
    assert [t.getTime() for t in deadline_timers(h.clock)] == [1.0]
    h.clock.advance(1.0)
    assert h.clock.getDelayedCalls() == []


def test_sync_calls_one_after_another_arm_no_timer_per_call() -> None:
    """A sync caller's calls (each answered before the next) create no timer after the first and
    cancel none; a call still times out at its own deadline, also after the timer ran early."""
    h = Harness(idle_timeout=None)
    for i in range(5):
        d = h.proto.invoke(ROUTE, 3.0)
        (req,) = h.sent()
        h.clock.advance(0.5)
        h.feed(req.response_to(0))
        _sync.successResultOf(d)
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == 3.0  # the first call's deadline: not moved, not replaced
    h.clock.advance(0.25)  # now 2.75
    d = h.proto.invoke(ROUTE, 3.0)  # due at 5.75
    assert deadline_timers(h.clock) == [timer]
    h.clock.advance(0.25)  # the timer runs early at 3.0 and re-arms for the pending call
    _sync.assertNoResult(d)
    (timer,) = deadline_timers(h.clock)
    assert timer.getTime() == 5.75
    h.clock.advance(2.749)
    _sync.assertNoResult(d)
    h.clock.advance(0.001)
    _sync.failureResultOf(d, RemotingTimeoutError)
    assert h.clock.getDelayedCalls() == [] and h.proto.pending_count == 0


def test_a_timeout_handler_that_sends_again_is_timed_and_so_are_the_others() -> None:
    """A timeout handler that sends a shorter call arms the timer inside _on_deadline; the calls
    still pending are timed after it (the timer re-armed once more when it fires)."""
    h = Harness(idle_timeout=None)
    later = h.proto.invoke(ROUTE, 10.0)
    retried: list[Deferred[Any]] = []
    first = h.proto.invoke(ROUTE, 1.0)
    first.addErrback(lambda f: f.trap(RemotingTimeoutError) and retried.append(h.proto.invoke(ROUTE, 0.5)))
    h.clock.advance(1.0)
    (retry,) = retried
    assert [t.getTime() for t in deadline_timers(h.clock)] == [1.5]
    h.clock.advance(0.5)
    _sync.failureResultOf(retry, RemotingTimeoutError)
    _sync.assertNoResult(later)
    assert [t.getTime() for t in deadline_timers(h.clock)] == [10.0]


def test_max_inflight_fails_the_extra_call_at_once() -> None:
    h = Harness(max_inflight=2)
    first, second = h.proto.invoke(ROUTE, 3.0), h.proto.invoke(ROUTE, 3.0)
    h.tr.clear()
    _sync.failureResultOf(h.proto.invoke(ROUTE, 3.0), RemotingTooManyRequestsError)
    assert h.tr.value() == b""  # nothing written for the refused call
    _sync.assertNoResult(first)
    _sync.assertNoResult(second)
    # oneway requests are not limited (Java has a separate semaphore for them)
    _sync.successResultOf(h.proto.invoke_oneway(ROUTE))


# ---- RPC hooks ------------------------------------------------------------------------------------


class RecordingHook:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.requests: list[tuple[str, RemotingCommand]] = []
        self.responses: list[tuple[str, RemotingCommand, RemotingCommand]] = []

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        self.requests.append((addr, request))
        ext = dict(request.ext_fields or {})
        ext["hooks"] = ext.get("hooks", "") + self.tag
        return RemotingCommand.request(request.code, ext, request.body, oneway=request.is_oneway)

    def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
        self.responses.append((addr, request, response))


def test_hooks_run_in_order_and_change_what_is_written() -> None:
    first, second = RecordingHook("1"), RecordingHook("2")
    h = Harness(rpc_hooks=(first, second))
    d = h.proto.invoke(ROUTE, 3.0)
    (sent,) = h.sent()
    assert sent.ext_fields == {"topic": "TopicTest", "hooks": "12"}
    assert [a for a, _ in first.requests] == ["10.0.0.1:10911"]
    assert second.requests[0][1].ext_fields["hooks"] == "1"  # the second sees the first's output
    h.feed(sent.response_to(0, remark="seen"))
    resp = _sync.successResultOf(d)
    for hook in (first, second):
        ((addr, request, response),) = hook.responses
        assert addr == "10.0.0.1:10911" and response == resp and response.remark == "seen"
        assert request.ext_fields == {"topic": "TopicTest", "hooks": "12"}  # what was sent


def test_acl_hook_signs_requests_and_oneways() -> None:
    h = Harness(rpc_hooks=(AclClientRPCHook("rocketmq2", "12345678"),))
    body_cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "T"}, b"hello")
    h.proto.invoke(body_cmd, 3.0)
    h.proto.invoke_oneway(RemotingCommand.request(RequestCode.HEART_BEAT, {"x": "y"}))
    signed, oneway = h.sent()
    for cmd in (signed, oneway):
        assert cmd.ext_fields["AccessKey"] == "rocketmq2" and "Signature" in cmd.ext_fields
        assert verify_command(cmd, "12345678", strip_unique_key_query=False)
        assert not verify_command(cmd, "wrong-secret", strip_unique_key_query=False)
    assert signed.body == b"hello" and signed.opaque == 0
    assert oneway.is_oneway
    tampered = RemotingCommand.request(signed.code, signed.ext_fields, b"hellO")
    assert not verify_command(tampered, "12345678", strip_unique_key_query=False)


def test_hook_failure_fails_the_call_before_anything_is_written(log_events) -> None:
    class Refuse:
        def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
            raise LocalProtocolError("refused by hook")

        def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
            raise AssertionError("not reached")

    h = Harness(rpc_hooks=(Refuse(),))
    _sync.failureResultOf(h.proto.invoke(ROUTE, 3.0), LocalProtocolError)
    _sync.failureResultOf(h.proto.invoke_oneway(ROUTE), LocalProtocolError)
    assert h.tr.value() == b"" and h.proto.pending_count == 0
    assert deadline_timers(h.clock) == []


def test_after_response_failure_is_logged_and_the_call_still_succeeds(log_events) -> None:
    class Broken(RecordingHook):
        def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
            raise RuntimeError("hook bug")

    h = Harness(rpc_hooks=(Broken("b"),))
    d = h.proto.invoke(ROUTE, 3.0)
    (req,) = h.sent()
    h.feed(req.response_to(0))
    assert _sync.successResultOf(d).code == 0
    assert any("after_response" in f for f in log_events.formats(LogLevel.critical))


# ---- draining ---------------------------------------------------------------------------------------


def test_when_drained_waits_for_our_calls() -> None:
    h = Harness()
    assert h.proto.drained
    _sync.successResultOf(h.proto.when_drained())
    a, b = h.proto.invoke(ROUTE, 3.0), h.proto.invoke(ROUTE, 3.0)
    drained = h.proto.when_drained()
    r1, _r2 = h.sent()
    h.feed(r1.response_to(0))
    _sync.assertNoResult(drained)
    b.cancel()  # a cancelled call counts as done too
    _sync.failureResultOf(b, CancelledError)
    assert _sync.successResultOf(drained) is None
    _sync.successResultOf(a)
    # a timed-out call drains as well
    c = h.proto.invoke(ROUTE, 1.0)
    drained = h.proto.when_drained()
    h.clock.advance(1.0)
    _sync.failureResultOf(c, RemotingTimeoutError)
    assert _sync.successResultOf(drained) is None


def test_when_drained_waits_for_requests_being_processed() -> None:
    later: Deferred[RemotingCommand] = Deferred()
    h = Harness(Dispatcher({105: lambda c, x: later}))
    h.feed(ROUTE.with_opaque(8))
    assert not h.proto.drained
    drained = h.proto.when_drained()
    _sync.assertNoResult(drained)
    later.callback(ROUTE.with_opaque(8).response_to(0, remark="done"))
    assert _sync.successResultOf(drained) is None
    (reply,) = h.sent()
    assert reply.remark == "done"  # answered before the drain was reported


def test_when_drained_fires_on_connection_loss() -> None:
    h = Harness()
    d = h.proto.invoke(ROUTE, 3.0)
    drained = h.proto.when_drained()
    h.lose()
    _sync.failureResultOf(d, ConnectionLostError)
    assert _sync.successResultOf(drained) is None


def test_drain_gives_up_after_the_grace() -> None:
    clock = Clock()
    busy, idle = Harness(clock=clock), Harness(clock=clock)
    busy.proto.invoke(ROUTE, 60.0).addErrback(lambda f: None)
    d = drain(clock, [busy.proto, idle.proto], 2.0)
    _sync.assertNoResult(d)
    clock.advance(2.0)
    assert _sync.successResultOf(d) is None  # past the grace: fires anyway (the caller closes)
    assert busy.proto.pending_count == 1
    _sync.successResultOf(drain(clock, [idle.proto], 2.0))


# ---- held responses (answers built now, written on release) -------------------------------------


def _holding(held: list[HeldResponse]) -> Dispatcher:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> HeldResponse:
        h = HeldResponse(cmd.response_to(0, remark=f"held {cmd.opaque}"))
        held.append(h)
        return h

    return Dispatcher({105: handler})


def test_held_response_is_written_on_release_only() -> None:
    held: list[HeldResponse] = []
    h = Harness(_holding(held))
    h.feed(ROUTE.with_opaque(8))
    h.feed(ROUTE.with_opaque(9))
    assert h.sent() == [] and not h.proto.drained
    drained = h.proto.when_drained()
    held[1].release()
    held[1].release(ResponseCode.SYSTEM_ERROR, "too late: the first release counts")
    (second,) = h.sent()
    assert (second.opaque, second.code, second.remark, second.flag) == (9, 0, "held 9", FLAG_RESPONSE)
    _sync.assertNoResult(drained)
    held[0].release(ResponseCode.FLUSH_DISK_TIMEOUT)
    (first,) = h.sent()
    assert (first.opaque, first.code, first.remark) == (8, ResponseCode.FLUSH_DISK_TIMEOUT, None)
    assert _sync.successResultOf(drained) is None


def test_held_response_released_before_it_is_bound_is_written_when_bound() -> None:
    def handler(cmd: RemotingCommand, ctx: RequestContext) -> HeldResponse:
        h = HeldResponse(cmd.response_to(0, remark="early"))
        h.release()
        return h

    h = Harness(Dispatcher({105: handler}))
    h.feed(ROUTE.with_opaque(8))
    (reply,) = h.sent()
    assert (reply.opaque, reply.remark) == (8, "early") and h.proto.drained


def test_held_response_to_oneway_or_lost_connection_is_dropped(log_events) -> None:
    held: list[HeldResponse] = []
    h = Harness(_holding(held))
    h.feed(dataclasses.replace(ROUTE.with_opaque(8), flag=FLAG_ONEWAY))
    h.feed(ROUTE.with_opaque(9))
    held[0].release()
    h.lose()
    held[1].release()
    assert h.tr.value() == b""
    (warning,) = log_events.formats(LogLevel.warn)  # the lost one's; the oneway's was never kept
    assert warning.startswith("dropping response") and h.proto.drained


def test_held_response_through_server_hooks_and_observer() -> None:
    seen: list[tuple[str | None, bool]] = []

    class Observer:
        def record(self, req: RemotingCommand, resp: RemotingCommand, elapsed: float, pending: bool) -> None:
            seen.append((resp.remark, pending))

    class After:
        def __init__(self) -> None:
            self.responses: list[RemotingCommand] = []

        def before_request(self, peer: str, request: RemotingCommand) -> RemotingCommand:
            return request

        def after_response(self, peer: str, request: RemotingCommand, response: RemotingCommand) -> None:
            self.responses.append(response)

    held: list[HeldResponse] = []
    d = _holding(held)
    d.observer = Observer()
    hook = After()
    d.add_hook(hook)
    h = Harness(d)
    h.feed(ROUTE.with_opaque(8))
    assert [r.remark for r in hook.responses] == ["held 8"] and seen == [] and h.sent() == []
    held[0].release()
    (reply,) = h.sent()
    assert (reply.opaque, reply.remark) == (8, "held 8") and seen == [("held 8", True)]


def _prepared_pull() -> tuple[Any, RemotingCommand]:
    from rmqwire.codec.commands.pull import (
        PullMessage,
        PullMessageRequestHeader,
        PullRequestTemplate,
    )

    header = PullMessageRequestHeader(consumer_group="g", topic="T", queue_id=1, queue_offset=0,
                                      max_msg_nums=32, sys_flag=2, commit_offset=0,
                                      suspend_timeout_millis=15000, sub_version=7, bname="b")
    typed = PullMessage.request(dataclasses.replace(header, queue_offset=64, sys_flag=3, commit_offset=60))
    return PullRequestTemplate(PullMessage, header).request(64, 3, 60), typed


def test_invoke_prepared_writes_the_typed_request_and_matches_its_response() -> None:
    h = Harness()
    prepared, typed = _prepared_pull()
    h.proto.invoke(ROUTE, 3.0)
    d = h.proto.invoke_prepared(prepared, 3.0)
    raw = h.tr.value()
    (_, sent) = h.sent()
    assert raw.endswith(encode_frame(typed.with_opaque(1)))  # byte for byte, opaque 1
    assert sent == typed.with_opaque(1) and h.proto.pending_count == 2
    resp = sent.response_to(ResponseCode.PULL_NOT_FOUND)
    h.feed(resp)
    assert _sync.successResultOf(d) == resp
    # its deadline counts like any call's
    d2 = h.proto.invoke_prepared(prepared, 1.0)
    h.clock.advance(1.0)
    _sync.failureResultOf(d2, RemotingTimeoutError)


@pytest.mark.parametrize("how", ["acl hook", "rocketmq header"])
def test_invoke_prepared_sends_the_command_when_the_frame_would_differ(how: str) -> None:
    """RPC hooks (ACL signs every request) and a ROCKETMQ header need the command itself."""
    if how == "acl hook":
        h = Harness(rpc_hooks=(AclClientRPCHook("rocketmq2", "12345678"),))
    else:
        h = Harness(serialize_type=SerializeType.ROCKETMQ)
    prepared, typed = _prepared_pull()
    h.proto.invoke_prepared(prepared, 3.0)
    (sent,) = h.sent()
    if how == "acl hook":
        assert verify_command(sent, "12345678", strip_unique_key_query=False)
        assert {k: v for k, v in sent.ext_fields.items() if k in typed.ext_fields} == typed.ext_fields
    else:
        assert sent.serialize_type is SerializeType.ROCKETMQ and sent == typed


def test_invoke_prepared_refused_when_closed() -> None:
    h = Harness()
    h.lose()
    prepared, _ = _prepared_pull()
    f = _sync.failureResultOf(h.proto.invoke_prepared(prepared, 3.0), ConnectionLostError)
    assert "PULL_MESSAGE" in f.getErrorMessage()


# ---- scanned responses (invoke_direct_prepared(..., scanned=True)) -----------------------------


class ScanReceiver(Receiver):
    """A receiver that also takes scanned responses: recorded as (code, remark, extFields, body)."""

    def answered_scan(self, scan: Any, body: bytes | None) -> None:
        self.outcomes.append(("scan", scanned_code(scan), scanned_remark(scan), scanned_ext_fields(scan), body))


def _prepared(cmd: RemotingCommand = ROUTE) -> PreparedRequest:
    template, _ = json_request_template(cmd, ())
    return PreparedRequest(cmd.code, template, (), lambda: cmd)


def _response_frame(opaque: int, *, flag: int = FLAG_RESPONSE, remark: str | None = None,
                    ext: dict[str, str] | None = None, body: bytes | None = None,
                    stype: SerializeType = SerializeType.JSON) -> bytes:
    return encode_frame(RemotingCommand(0, LanguageCode.JAVA, 479, opaque, flag, remark, ext, body), stype)


def test_a_scanned_call_gets_its_response_undecoded_and_other_calls_their_commands() -> None:
    h = Harness()
    scanned, direct = ScanReceiver(), ScanReceiver()
    assert h.proto.invoke_direct_prepared(_prepared(), 3.0, scanned, True) == 0
    assert h.proto.invoke_direct_prepared(_prepared(), 3.0, direct) == 1  # not scanned
    d = h.proto.invoke(ROUTE, 3.0)
    h.proto.dataReceived(_response_frame(2, ext={"k": "v"}) + _response_frame(1, remark="r")
                         + _response_frame(0, remark="r", ext={"queueId": "1"}, body=b"B"))
    assert scanned.outcomes == [("scan", 0, "r", {"queueId": "1"}, b"B")]
    (cmd,) = direct.outcomes
    assert isinstance(cmd, RemotingCommand) and cmd.remark == "r"
    assert _sync.successResultOf(d).ext_fields == {"k": "v"}
    assert h.proto.pending_count == 0


class CallReceiver(PendingCall):
    """A scan receiver that is its own pending call (as the producer's first attempt)."""

    __slots__ = ("outcomes", "request")
    __repr__ = object.__repr__

    def __init__(self) -> None:  # no PendingCall fields: the connection fills them in
        self.outcomes: list[Any] = []
        self.request = None

    answered_scan = ScanReceiver.answered_scan
    answered = Receiver.answered
    failed = Receiver.failed
    raises = False


def test_a_receiver_that_is_a_pending_call_is_the_call_itself() -> None:
    h = Harness()
    answered, timed_out, forgotten = CallReceiver(), CallReceiver(), CallReceiver()
    for r, timeout in ((answered, 3.0), (timed_out, 1.0), (forgotten, 3.0)):
        h.proto.invoke_direct_prepared(_prepared(), timeout, r, True)
    pending = h.proto.connection.pending
    assert [pending[o] for o in (0, 1, 2)] == [answered, timed_out, forgotten]  # no call objects
    assert (timed_out.opaque, timed_out.code, timed_out.deadline, timed_out.timeout, timed_out.scanned) == (
        1, ROUTE.code, 1.0, 1.0, True)
    h.proto.dataReceived(_response_frame(0, remark="r"))
    assert answered.outcomes == [("scan", 0, "r", None, None)] and answered.token is None
    h.proto.forget(2)
    assert forgotten.token is None  # no cycle through itself left behind
    h.clock.advance(1.0)
    (err,) = timed_out.outcomes
    assert isinstance(err, RemotingTimeoutError) and "after 1 s" in str(err)
    assert timed_out.token is None and h.proto.pending_count == 0
    h.clock.advance(5.0)
    assert forgotten.outcomes == [] and len(answered.outcomes) == 1


def test_a_scanned_call_gets_a_header_the_scan_declines_as_its_command() -> None:
    h = Harness()
    receivers = [ScanReceiver() for _ in range(3)]
    for r in receivers:
        h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    h.proto.dataReceived(_response_frame(0, remark='a "quoted" remark') + _response_frame(1, ext={"k": "é"})
                         + _response_frame(2, ext={"k": "v"}, stype=SerializeType.ROCKETMQ))
    assert [type(r.outcomes[0]) for r in receivers] == [RemotingCommand] * 3
    assert [r.outcomes[0].remark for r in receivers] == ['a "quoted" remark', None, None]


def test_a_request_with_a_scanned_calls_opaque_is_a_request() -> None:
    # the RESPONSE flag is read before the call is looked up: the peer's own request is dispatched
    seen: list[RemotingCommand] = []

    def handle(request: RemotingCommand, context: RequestContext) -> RemotingCommand:
        seen.append(request)
        return request.response_to(0)

    dispatcher = Dispatcher()
    dispatcher.register(ROUTE.code, handle)
    h = Harness(dispatcher)
    r = ScanReceiver()
    h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    h.tr.clear()
    h.proto.dataReceived(encode_frame(RemotingCommand(ROUTE.code, opaque=0, ext_fields={"topic": "T"})))
    assert [c.opaque for c in seen] == [0] and r.outcomes == [] and h.proto.pending_count == 1
    h.proto.dataReceived(_response_frame(0))
    assert r.outcomes == [("scan", 0, None, None, None)]


def test_a_second_response_to_a_scanned_call_in_one_read_is_unmatched(log_events) -> None:
    h = Harness()
    r = ScanReceiver()
    h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    # a ROCKETMQ answer (decoded) first, then a JSON one (scanned): the first in frame order wins
    h.proto.dataReceived(_response_frame(0, remark="first", stype=SerializeType.ROCKETMQ)
                         + _response_frame(0, remark="second") + _response_frame(0, remark="third"))
    assert [o.remark for o in r.outcomes] == ["first"]
    assert sum("no pending request" in f for f in log_events.formats(LogLevel.warn)) == 2


def test_a_header_longer_than_its_frame_is_a_framing_error_not_a_response() -> None:
    # the header word claims the next frame's first bytes: the scan must not read past its frame
    h = Harness()
    r = ScanReceiver()
    h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    header = _response_frame(0)[8:]
    short, rest = header[:-4], header[-4:]  # rest ('479}') becomes the next frame's length prefix
    data = struct.pack(">ii", 4 + len(short), len(header)) + short + rest
    h.proto.dataReceived(data)
    assert [type(o) for o in r.outcomes] == []  # nothing answered; the connection is closing
    assert h.tr.disconnecting
    h.lose()
    assert [type(o) for o in r.outcomes] == [ConnectionLostError]


def test_a_rocketmq_frame_is_not_scanned_even_when_its_bytes_read_as_json() -> None:
    # a ROCKETMQ header word is 16 MiB more than its header length: a frame that long whose bytes
    # are a JSON response from the header on must still be read as the ROCKETMQ frame it is
    h = Harness(max_frame_length=2**25)
    r = ScanReceiver()
    h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    head, tail = b'{"code":0,"flag":1,"language":"JAVA","opaque":0,"remark":"', b'","serializeTypeCurrentRPC":"JSON","version":1}'
    header_length = 20
    text = head + b"a" * (2**24 + header_length - len(head) - len(tail)) + tail
    h.proto.dataReceived(struct.pack(">ii", 4 + len(text), (1 << 24) | header_length) + text)
    assert r.outcomes == [] and h.tr.disconnecting  # not a ROCKETMQ header either


def test_hooks_see_the_command_of_a_scanned_call() -> None:
    hook = RecordingHook("1")
    h = Harness(rpc_hooks=(hook,))
    r = ScanReceiver()
    h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    (sent,) = h.sent()
    h.feed(dataclasses.replace(sent.response_to(0, remark="hooked"), language=LanguageCode.JAVA))
    assert [type(o) for o in r.outcomes] == [RemotingCommand] and hook.responses[0][2].remark == "hooked"


# ---- receive_whole: one whole answer read by a caller, as dataReceived would handle it -----------


def _whole_or_received(h: Harness, data: bytes) -> bool:
    """What a blocking caller's read does with ``data``: ``receive_whole`` of it at the start of a
    larger buffer (the rest stale bytes), else ``dataReceived``; True when taken whole."""
    buf = bytearray(data) + b"\xff" * 7
    if h.proto.receive_whole(buf, len(data)):
        return True
    h.proto.dataReceived(data)
    return False


def _record(h: Harness, receivers: list[Any]) -> Any:
    return ([r.outcomes for r in receivers], h.proto.pending_count, h.tr.value(), h.proto._closing,
            h.proto.connection.buffered, h.proto._last_activity)


_CHUNKS = st.lists(st.sampled_from([
    "answer 0", "answer 1", "answer 9", "answer 0 body", "answer 0 declined", "request 0", "bad length",
    "rocketmq 1"]), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(chunks=_CHUNKS, cut=st.integers(0, 400), scanned=st.booleans(), closing=st.booleans())
def test_receive_whole_takes_only_what_data_received_would_do_the_same_with(
        chunks: list[str], cut: int, scanned: bool, closing: bool) -> None:
    frames = {
        "answer 0": _response_frame(0, ext={"queueId": "1"}),
        "answer 1": _response_frame(1, remark="r"),
        "answer 9": _response_frame(9),  # no such call
        "answer 0 body": _response_frame(0, ext={"k": "v"}, body=b"B" * 30),
        "answer 0 declined": _response_frame(0, remark='"q"'),  # the scan declines it
        "request 0": encode_frame(RemotingCommand(ROUTE.code, opaque=0, ext_fields={"topic": "T"})),
        "bad length": struct.pack(">ii", 2, 0),
        "rocketmq 1": _response_frame(1, ext={"k": "v"}, stype=SerializeType.ROCKETMQ),
    }
    stream = b"".join(frames[c] for c in chunks)
    parts = [stream[:cut], stream[cut:]] if 0 < cut < len(stream) else [stream]
    results = []
    for whole in (True, False):
        h = Harness()
        h.clock.advance(5)
        receivers = [ScanReceiver(), ScanReceiver()]
        for r in receivers:
            h.proto.invoke_direct_prepared(_prepared(), 30.0, r, scanned)
        h.tr.clear()
        if closing:
            h.proto._closing = True
        taken = []
        for part in parts:
            h.clock.advance(1)
            if whole:
                taken.append(_whole_or_received(h, part))
            else:
                h.proto.dataReceived(part)
        results.append(_record(h, receivers))
        if whole:
            # taken whole exactly when the part is one whole answer to a pending scanned call
            usual = [scanned and not closing and p in (frames["answer 0"], frames["answer 1"],
                                                       frames["answer 0 body"]) for p in parts]
            assert taken[0] == usual[0]  # the first part: nothing before it
    assert results[0] == results[1]


def test_receive_whole_of_the_usual_answer_skips_the_decoder() -> None:
    h = Harness()
    r = ScanReceiver()
    h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
    decoder = h.proto.connection._decoder
    decoder.feed_peeking = None  # type: ignore[method-assign]  # not called on the way
    frame = _response_frame(0, ext={"queueId": "1"}, body=b"B")
    assert h.proto.receive_whole(bytearray(frame), len(frame))
    assert r.outcomes == [("scan", 0, None, {"queueId": "1"}, b"B")] and h.proto.pending_count == 0


def test_receive_whole_declines_after_a_partial_frame_or_a_framing_error() -> None:
    for before in (_response_frame(1)[:6], struct.pack(">ii", 2, 0)):
        h = Harness()
        receivers = [ScanReceiver(), ScanReceiver()]
        for r in receivers:
            h.proto.invoke_direct_prepared(_prepared(), 3.0, r, True)
        h.proto.dataReceived(before)  # a frame's head buffered, or the stream broken
        h.proto._closing = False  # only the connection's own state may decline it
        frame = _response_frame(0)
        assert not h.proto.receive_whole(bytearray(frame), len(frame))
        assert receivers[0].outcomes == [] and h.proto.connection.buffered in (6, 0)
