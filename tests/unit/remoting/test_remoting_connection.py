"""Sans-IO RemotingConnection: framing, opaques, pending table, deadlines, errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rmqwire.codec import RemotingCommand, RequestCode, SerializeType, encode_frame
from rmqwire.codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode
from rmqwire.errors import (
    CodecError,
    FrameTooLargeError,
    LocalProtocolError,
    RemoteProtocolError,
    RemotingTooManyRequestsError,
    UnknownSerializeTypeError,
)
from rmqwire.remoting.connection import (
    ConnectionState,
    PendingCall,
    ProtocolFailed,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    UnmatchedResponse,
)

ROUTE = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})


class RemotingPair:
    """Two connections wired back to back (cf. h11's ConnectionPair)."""

    def __init__(self, **server_kwargs: object) -> None:
        self.client = RemotingConnection()
        self.server = RemotingConnection(**server_kwargs)  # type: ignore[arg-type]

    def request(self, cmd: RemotingCommand, deadline: float | None = None) -> RemotingCommand:
        opaque, data = self.client.send_request(cmd, deadline)
        (event,) = self.server.receive_data(data)
        assert isinstance(event, RequestReceived)
        assert event.command.opaque == opaque
        return event.command


def test_request_response_round_trip() -> None:
    pair = RemotingPair()
    got = pair.request(ROUTE, deadline=10.0)
    assert got == ROUTE.with_opaque(got.opaque)
    (call,) = pair.client.pending.values()
    assert (call.opaque, call.code, call.deadline) == (got.opaque, 105, 10.0)
    answer = got.response_to(0, body=b"route")
    events = pair.client.receive_data(pair.server.send_response(got, answer))
    assert len(events) == 1 and isinstance(events[0], ResponseReceived)
    assert events[0].call is call  # the event hands back the caller's pending call
    resp = events[0].command
    assert resp.opaque == got.opaque and resp.is_response and resp.body == b"route"
    assert pair.client.pending == {}


def test_opaques_are_per_connection_and_sequential() -> None:
    a, b = RemotingConnection(), RemotingConnection()
    assert [a.send_request(ROUTE)[0] for _ in range(3)] == [0, 1, 2]
    assert b.send_request(ROUTE)[0] == 0


def test_opaque_wraps_as_int32_and_skips_pending() -> None:
    conn = RemotingConnection(first_opaque=2**31 - 2)
    ops = [conn.send_request(ROUTE)[0] for _ in range(3)]
    assert ops == [2**31 - 2, 2**31 - 1, -(2**31)]
    # the wire carries them as int32 (decodable by the peer)
    peer = RemotingConnection()
    wrapped = RemotingConnection(first_opaque=2**31 - 1)
    wrapped.send_request(ROUTE)  # 2**31-1 stays pending
    _, data = wrapped.send_request(ROUTE)
    assert peer.receive_data(data)[0].command.opaque == -(2**31)


def test_opaque_allocation_skips_values_still_pending() -> None:
    conn = RemotingConnection(first_opaque=5)
    first, _ = conn.send_request(ROUTE)
    conn._next_opaque = first  # simulate a full int32 wrap back onto a pending opaque
    second, _ = conn.send_request(ROUTE)
    assert first == 5 and second == 6


def test_first_opaque_must_be_int32() -> None:
    with pytest.raises(ValueError):
        RemotingConnection(first_opaque=2**31)


def test_oneway_is_not_pending() -> None:
    conn = RemotingConnection()
    oneway = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"a": "b"}, oneway=True)
    opaque, data = conn.send_request(oneway, deadline=5.0)
    assert conn.pending == {}
    cmd = RemotingConnection().receive_data(data)[0].command
    assert cmd.flag == FLAG_ONEWAY and cmd.opaque == opaque


def test_answering_a_oneway_request_is_local_misuse() -> None:
    pair = RemotingPair()
    got = pair.request(RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True))
    with pytest.raises(LocalProtocolError, match="oneway"):
        pair.server.send_response(got, got.response_to(0))


def test_sending_a_response_as_request_is_local_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        RemotingConnection().send_request(ROUTE.response_to(0))


def test_send_response_sets_opaque_and_flag() -> None:
    pair = RemotingPair()
    got = pair.request(ROUTE)
    # a handler that forgot to copy opaque/flag still produces a proper response
    sloppy = RemotingCommand(code=0, opaque=999, flag=FLAG_ONEWAY, language=LanguageCode.JAVA)
    (event,) = pair.client.receive_data(pair.server.send_response(got, sloppy))
    assert isinstance(event, ResponseReceived)
    assert event.command.opaque == got.opaque and event.command.flag == FLAG_RESPONSE


def test_unmatched_response_is_reported_not_raised() -> None:
    conn = RemotingConnection()
    stray = RemotingCommand(code=0, opaque=42, flag=FLAG_RESPONSE)
    events = conn.receive_data(encode_frame(stray))
    assert events == [UnmatchedResponse(stray)]


def opaques(calls: list[PendingCall]) -> list[int]:
    return [c.opaque for c in calls]


def test_late_response_after_expire_is_unmatched() -> None:
    pair = RemotingPair()
    got = pair.request(ROUTE, deadline=3.0)
    assert pair.client.expire(2.999) == []
    assert opaques(pair.client.expire(3.0)) == [got.opaque]
    assert pair.client.pending == {}
    (event,) = pair.client.receive_data(pair.server.send_response(got, got.response_to(0)))
    assert isinstance(event, UnmatchedResponse)


def test_expire_reports_in_deadline_order_and_ignores_no_deadline() -> None:
    conn = RemotingConnection()
    a, _ = conn.send_request(ROUTE, 5.0)
    b, _ = conn.send_request(ROUTE, None)
    c, _ = conn.send_request(ROUTE, 1.0)
    assert conn.next_deadline() == 1.0
    assert opaques(conn.expire(10.0)) == [c, a]  # earliest deadline first
    assert list(conn.pending) == [b] and conn.pending[b].deadline is None
    assert conn.next_deadline() is None


def test_equal_deadlines_expire_in_send_order() -> None:
    conn = RemotingConnection()
    sent = [conn.send_request(ROUTE, 2.0)[0] for _ in range(5)]
    assert opaques(conn.expire(2.0)) == sent


def test_cancel_and_close() -> None:
    conn = RemotingConnection()
    a, _ = conn.send_request(ROUTE, 5.0, timeout=5.0, token="tok-a")
    b, _ = conn.send_request(ROUTE, 5.0, token="tok-b")
    cancelled = conn.cancel(a)
    assert cancelled is not None and (cancelled.opaque, cancelled.token, cancelled.timeout) == (a, "tok-a", 5.0)
    assert conn.cancel(a) is None
    (lost,) = conn.close()
    assert (lost.opaque, lost.token) == (b, "tok-b")
    assert conn.pending == {} and conn.next_deadline() is None
    assert conn.close() == []  # closing twice is harmless


def test_pending_is_a_copy_and_len_counts_calls() -> None:
    conn = RemotingConnection()
    a, _ = conn.send_request(ROUTE, 1.0)
    conn.send_request(RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True))
    snapshot = conn.pending
    snapshot.clear()
    assert list(conn.pending) == [a] and len(conn) == 1


# ---- deadlines ------------------------------------------------------------------------------------


def test_next_deadline_with_many_calls() -> None:
    conn = RemotingConnection()
    deadlines = [7.0, 3.0, 9.0, 3.5, 1.25, 8.0, 4.0]
    ops = {d: conn.send_request(ROUTE, d)[0] for d in deadlines}
    assert conn.next_deadline() == 1.25
    remaining = sorted(deadlines)
    while remaining:
        assert conn.next_deadline() == remaining[0]
        (expired,) = conn.expire(remaining[0])
        assert expired.opaque == ops[remaining[0]] and expired.deadline == remaining[0]
        remaining.pop(0)
    assert conn.next_deadline() is None


def test_answered_and_cancelled_calls_are_not_reported() -> None:
    pair = RemotingPair()
    first = pair.request(ROUTE, deadline=1.0)
    second = pair.request(ROUTE, deadline=2.0)
    third = pair.request(ROUTE, deadline=3.0)
    fourth = pair.request(ROUTE, deadline=4.0)
    pair.client.receive_data(pair.server.send_response(first, first.response_to(0)))
    assert pair.client.cancel(third.opaque) is not None
    assert pair.client.next_deadline() == 2.0  # the answered call's deadline is gone
    assert opaques(pair.client.expire(3.5)) == [second.opaque]  # nothing for 1.0 or 3.0
    assert pair.client.next_deadline() == 4.0
    assert opaques(pair.client.expire(100.0)) == [fourth.opaque]
    assert pair.client.expire(100.0) == []


def test_expired_call_is_reported_once() -> None:
    conn = RemotingConnection()
    conn.send_request(ROUTE, 1.0)
    assert len(conn.expire(1.0)) == 1
    assert conn.expire(1.0) == [] and conn.expire(50.0) == []
    assert conn.cancel(0) is None


def test_heap_compaction_keeps_deadlines_right() -> None:
    conn = RemotingConnection()
    survivor, _ = conn.send_request(ROUTE, 1000.0)
    # many short calls answered (cancelled) long before their deadlines: the lazy heap must not
    # grow without bound, and the survivor's deadline must still be found
    for i in range(1000):
        opaque, _ = conn.send_request(ROUTE, 500.0 + i)
        assert conn.cancel(opaque) is not None
    assert len(conn._deadlines) <= 2 * len(conn) + 65  # compacted (internal, but the point)
    assert conn.next_deadline() == 1000.0
    assert opaques(conn.expire(999.0)) == []
    assert opaques(conn.expire(1000.0)) == [survivor]


def test_calls_due_in_send_order_keep_no_heap_and_expire_exactly() -> None:
    # one timeout, each budget a millisecond or so short of the last: no heap, and each call
    # still expires at its own deadline, earliest first
    conn = RemotingConnection()
    deadlines = [3.000, 3.001, 2.999, 3.004, 3.003, 3.010]  # within ORDER_SLACK of the latest
    ops = [conn.send_request(ROUTE, d)[0] for d in deadlines]
    assert conn._deadlines == [] and conn._ordered
    assert conn.next_deadline() == 2.999
    assert opaques(conn.expire(2.9995)) == [ops[2]]
    assert conn.next_deadline() == 3.000
    assert opaques(conn.expire(3.003)) == [ops[0], ops[1], ops[4]]
    assert conn.next_deadline() == 3.004
    assert opaques(conn.expire(3.010)) == [ops[3], ops[5]]
    assert conn.next_deadline() is None


def test_a_call_due_well_before_an_earlier_one_turns_the_heap_on_until_none_is_pending() -> None:
    conn = RemotingConnection()
    late = [conn.send_request(ROUTE, 3.0 + i / 1000)[0] for i in range(3)]
    soon, _ = conn.send_request(ROUTE, 1.0)  # a shorter timeout: out of order
    assert not conn._ordered and len(conn._deadlines) == 4
    assert conn.next_deadline() == 1.0
    assert opaques(conn.expire(1.0)) == [soon]
    assert opaques(conn.expire(5.0)) == late
    conn.send_request(ROUTE, 9.0)  # nothing was pending: in order again
    assert conn._ordered and conn._deadlines == []
    assert conn.next_deadline() == 9.0


def test_the_heap_made_with_calls_without_deadline_keeps_distinct_tie_breakers() -> None:
    # calls with no deadline are not in the heap: the sends after it must not reuse a
    # tie-breaker (equal deadlines would then compare their calls)
    conn = RemotingConnection()
    a, _ = conn.send_request(ROUTE, 3.0)
    conn.send_request(ROUTE, None)
    conn.send_request(ROUTE, None)
    b, _ = conn.send_request(ROUTE, 1.0)  # the heap: one entry per call with a deadline
    c, _ = conn.send_request(ROUTE, 1.0)
    d, _ = conn.send_request(ROUTE, 3.0)
    assert opaques(conn.expire(3.0)) == [b, c, a, d]


def test_opaque_reused_after_wrap_does_not_revive_a_stale_deadline() -> None:
    conn = RemotingConnection(first_opaque=2**31 - 1)
    old, _ = conn.send_request(ROUTE, 1.0)
    assert conn.cancel(old) is not None
    conn._next_opaque = old  # a full int32 wrap later, the same opaque is handed out again
    new, _ = conn.send_request(ROUTE, 10.0)
    assert new == old
    assert conn.next_deadline() == 10.0
    assert conn.expire(5.0) == []  # the cancelled call's heap entry must not expire the new one
    assert opaques(conn.expire(10.0)) == [new]


# ---- limits and the end of a connection -----------------------------------------------------------


def test_max_pending_refuses_one_more_two_way_call() -> None:
    conn = RemotingConnection(max_pending=2)
    a, _ = conn.send_request(ROUTE, 1.0)
    conn.send_request(ROUTE, 1.0)
    with pytest.raises(RemotingTooManyRequestsError, match="max_pending 2"):
        conn.send_request(ROUTE, 1.0)
    assert len(conn) == 2 and conn._next_opaque == 2  # the refused call took no opaque
    # oneway requests are not calls in flight
    conn.send_request(RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True))
    conn.cancel(a)
    conn.send_request(ROUTE, 1.0)  # room again
    assert len(conn) == 2


def test_sends_fail_fast_after_close() -> None:
    pair = RemotingPair()
    got = pair.request(ROUTE)
    pair.server.close()
    assert pair.server.state is ConnectionState.CLOSED and not pair.server.is_open
    with pytest.raises(LocalProtocolError, match="closed"):
        pair.server.send_request(ROUTE)
    with pytest.raises(LocalProtocolError, match="closed"):
        pair.server.send_response(got, got.response_to(0))
    assert pair.server.receive_data(encode_frame(ROUTE)) == []  # input after close is ignored


@pytest.mark.parametrize("stype", list(SerializeType))
def test_every_byte_split_of_two_frames(stype: SerializeType) -> None:
    """Each split point of a two-frame stream yields the same commands."""
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "TopicTest", "b": "g"}, b"hello")
    resp = RemotingCommand(code=17, opaque=3, flag=FLAG_RESPONSE, remark="No topic", body=b"\x00\x01")
    stream = encode_frame(req.with_opaque(9), stype) + encode_frame(resp, stype)
    expected = [req.with_opaque(9), resp]
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1):
            if j - i > 3 and j != len(stream):
                continue  # all first cuts x (short second chunks + the rest) keeps this quick
            conn = RemotingConnection(first_opaque=3)
            conn.send_request(ROUTE)  # the response answers this pending request (opaque 3)
            events = [e for part in (stream[:i], stream[i:j], stream[j:]) for e in conn.receive_data(part)]
            assert [type(e) for e in events] == [RequestReceived, ResponseReceived], (i, j)
            got = [e.command for e in events]
            assert got == expected, (i, j)
            assert [c.serialize_type for c in got] == [stype, stype]
            assert conn.buffered == 0


def test_single_byte_feeding() -> None:
    stream = b"".join(encode_frame(ROUTE.with_opaque(i)) for i in range(3))
    conn = RemotingConnection()
    events = [e for k in range(len(stream)) for e in conn.receive_data(stream[k : k + 1])]
    assert [e.command.opaque for e in events] == [0, 1, 2]


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (struct.pack(">ii", 8, 0x02000004) + b"\x00" * 4, UnknownSerializeTypeError),
        (struct.pack(">i", 16 * 1024 * 1024), FrameTooLargeError),
        (struct.pack(">ii", 6, 0x00000002) + b"{}", CodecError),  # JSON without "code"
    ],
)
def test_framing_error_is_remote_protocol_error_with_cause(data: bytes, cause: type) -> None:
    conn = RemotingConnection()
    call_opaque, _ = conn.send_request(ROUTE, 5.0)
    (event,) = conn.receive_data(data)
    assert isinstance(event, ProtocolFailed)
    assert isinstance(event.error, RemoteProtocolError)
    assert isinstance(event.error.__cause__, cause)
    assert conn.state is ConnectionState.FAILED and conn.error is event.error and not conn.is_open
    # the stream is dead: further input yields nothing, not even another ProtocolFailed
    assert conn.receive_data(encode_frame(ROUTE)) == []
    # the pending call is still there for the caller to fail when it closes the transport
    assert opaques(conn.close()) == [call_opaque]
    assert conn.state is ConnectionState.FAILED  # close() keeps the reason it failed


def test_protocol_failed_comes_after_the_good_frames_events() -> None:
    conn = RemotingConnection(first_opaque=7)
    conn.send_request(ROUTE, 5.0)
    stream = (
        encode_frame(ROUTE.with_opaque(1))
        + encode_frame(RemotingCommand(code=0, opaque=7, flag=FLAG_RESPONSE, remark="answer"))
        + encode_frame(RemotingCommand(code=0, opaque=99, flag=FLAG_RESPONSE))
        + struct.pack(">ii", 8, 0x02000004) + b"\x00" * 4
        + encode_frame(ROUTE.with_opaque(2))  # after the bad frame: never decoded
    )
    events = conn.receive_data(stream)
    assert [type(e) for e in events] == [RequestReceived, ResponseReceived, UnmatchedResponse, ProtocolFailed]
    assert events[0].command.opaque == 1
    assert events[1].command.remark == "answer" and events[1].call.opaque == 7
    assert isinstance(events[3].error.__cause__, UnknownSerializeTypeError)
    assert conn.pending == {}  # the good response was matched before the failure


def test_frames_before_the_bad_one_are_not_lost_on_separate_reads() -> None:
    conn = RemotingConnection()
    (event,) = conn.receive_data(encode_frame(ROUTE))
    assert isinstance(event, RequestReceived)
    (failed,) = conn.receive_data(struct.pack(">i", 2))
    assert isinstance(failed, ProtocolFailed) and isinstance(failed.error, RemoteProtocolError)


def test_requests_fail_fast_after_protocol_failed() -> None:
    conn = RemotingConnection()
    (got,) = conn.receive_data(encode_frame(ROUTE.with_opaque(4)))
    (failed,) = conn.receive_data(struct.pack(">i", 16 * 1024 * 1024))
    assert isinstance(failed, ProtocolFailed)
    with pytest.raises(LocalProtocolError, match="failed"):
        conn.send_request(ROUTE)
    with pytest.raises(LocalProtocolError, match="failed"):
        conn.send_request(RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True))
    assert conn.pending == {}
    # a request that arrived before the bad bytes may still be answered until close() (h11 lets
    # a server answer after a RemoteProtocolError): the protocol answers good frames of the
    # failing read before it closes the transport
    answer = RemotingConnection().receive_data(
        conn.send_response(got.command, got.command.response_to(0, remark="late"))
    )
    assert isinstance(answer[0], UnmatchedResponse) and answer[0].command.opaque == 4
    conn.close()
    with pytest.raises(LocalProtocolError, match="closed"):
        conn.send_response(got.command, got.command.response_to(0))


def test_max_frame_length_is_configurable() -> None:
    conn = RemotingConnection(max_frame_length=64)
    big = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"x" * 100)
    (event,) = conn.receive_data(encode_frame(big))
    assert isinstance(event, ProtocolFailed)
    assert "exceeds the maximum frame length" in str(event.error)
    assert isinstance(event.error.__cause__, FrameTooLargeError)


@pytest.mark.parametrize("request_type", list(SerializeType))
def test_response_follows_request_type_by_default(request_type: SerializeType) -> None:
    client = RemotingConnection(serialize_type=request_type)
    server = RemotingConnection()
    _opaque, data = client.send_request(ROUTE)
    assert data[4] == request_type  # high byte of the header word
    (event,) = server.receive_data(data)
    out = server.send_response(event.command, event.command.response_to(0, remark="ok"))
    assert out[4] == request_type
    assert client.receive_data(out)[0].command.serialize_type == request_type


@pytest.mark.parametrize("request_type", list(SerializeType))
@pytest.mark.parametrize("fixed", list(SerializeType))
def test_response_in_fixed_configured_type(request_type: SerializeType, fixed: SerializeType) -> None:
    client = RemotingConnection(serialize_type=request_type)
    server = RemotingConnection(response_serialize_type=fixed)
    _, data = client.send_request(ROUTE)
    (event,) = server.receive_data(data)
    out = server.send_response(event.command, event.command.response_to(0))
    assert out[4] == fixed
    (reply,) = client.receive_data(out)
    assert isinstance(reply, ResponseReceived) and reply.command.serialize_type == fixed


def test_events_are_frozen_value_objects() -> None:
    a = RequestReceived(ROUTE)
    assert a == RequestReceived(ROUTE)
    with pytest.raises(AttributeError):
        a.command = ROUTE  # type: ignore[misc]


# ---- property: any chunking of any frame sequence ---------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(0, 612),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.sampled_from([0, FLAG_ONEWAY]),
    remark=st.none() | _text.filter(bool),
    # non-empty: the ROCKETMQ header reads an empty extFields block as null
    ext_fields=st.none() | st.dictionaries(_text.filter(bool), _text.filter(bool), min_size=1, max_size=3),
    body=st.none() | st.binary(min_size=1, max_size=40),
)


@settings(max_examples=150, deadline=None)
@given(
    cmds=st.lists(st.tuples(_commands, st.sampled_from(list(SerializeType))), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_any_chunking_yields_the_same_requests(
    cmds: list[tuple[RemotingCommand, SerializeType]], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(c, t) for c, t in cmds)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    conn = RemotingConnection()
    events = [
        e for a, b in zip(points, points[1:]) for e in conn.receive_data(stream[a:b])
    ]
    assert events == [RequestReceived(c) for c, _ in cmds]
    assert [e.command.serialize_type for e in events] == [t for _, t in cmds]
    assert conn.buffered == 0


# ---- property: the pending table against a model ---------------------------------------------------


class PendingCallsMachine(RuleBasedStateMachine):
    """Random sends, answers, cancels and expiries, checked against a plain dict of deadlines."""

    def __init__(self) -> None:
        super().__init__()
        self.client = RemotingConnection(first_opaque=2**31 - 3)  # crosses the int32 wrap too
        self.server = RemotingConnection()
        self.model: dict[int, float | None] = {}  # opaque -> deadline of every pending call
        self.requests: dict[int, RemotingCommand] = {}  # as the server received them
        self.now = 0.0

    @rule(delay=st.none() | st.integers(0, 20))
    def send(self, delay: int | None) -> None:
        deadline = None if delay is None else self.now + delay
        opaque, data = self.client.send_request(ROUTE, deadline, token=opaque_token(deadline))
        assert opaque not in self.model
        self.model[opaque] = deadline
        (event,) = self.server.receive_data(data)
        self.requests[opaque] = event.command

    @rule(jitter=st.integers(-25, 5))
    def send_near(self, jitter: int) -> None:
        # near the latest deadline pending: in send order within ORDER_SLACK (10 ms), or not
        latest = max((d for d in self.model.values() if d is not None), default=self.now + 5)
        deadline = max(self.now, latest + jitter / 1000)
        opaque, data = self.client.send_request(ROUTE, deadline, token=opaque_token(deadline))
        assert opaque not in self.model
        self.model[opaque] = deadline
        (event,) = self.server.receive_data(data)
        self.requests[opaque] = event.command

    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        # any request the server saw, pending or not: late answers must come back unmatched
        if not self.requests:
            return
        opaque = data.draw(st.sampled_from(sorted(self.requests)))
        request = self.requests.pop(opaque)
        (event,) = self.client.receive_data(self.server.send_response(request, request.response_to(0)))
        if opaque in self.model:
            assert isinstance(event, ResponseReceived) and event.call.opaque == opaque
            assert event.call.deadline == self.model.pop(opaque)
        else:
            assert isinstance(event, UnmatchedResponse)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        opaque = data.draw(st.sampled_from(sorted(self.model)))
        call = self.client.cancel(opaque)
        assert call is not None and call.deadline == self.model.pop(opaque)
        assert self.client.cancel(opaque) is None

    @rule(step=st.integers(0, 10))
    def expire(self, step: int) -> None:
        self.now += step
        expired = self.client.expire(self.now)
        due = sorted(
            (d, o) for o, d in self.model.items() if d is not None and d <= self.now
        )
        # earliest deadline first; equal deadlines in any order the model cannot know (opaques
        # wrap), so compare per deadline as sets
        assert [c.deadline for c in expired] == [d for d, _ in due]
        assert {c.opaque for c in expired} == {o for _, o in due}
        for call in expired:
            assert call.token == opaque_token(call.deadline)
            del self.model[call.opaque]

    @invariant()
    def tables_agree(self) -> None:
        pending = self.client.pending
        assert {o: c.deadline for o, c in pending.items()} == self.model
        deadlines = [d for d in self.model.values() if d is not None]
        assert self.client.next_deadline() == (min(deadlines) if deadlines else None)
        assert len(self.client._deadlines) <= 2 * len(self.client) + 65


def opaque_token(deadline: float | None) -> str:
    return f"deadline {deadline}"


PendingCallsMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)
TestPendingCallsAgainstAModel = PendingCallsMachine.TestCase
