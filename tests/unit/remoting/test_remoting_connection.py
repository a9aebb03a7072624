"""Sans-IO RemotingConnection: framing, opaques, pending table, deadlines, errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec import RemotingCommand, RequestCode, SerializeType, encode_frame
from rmqwire.codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode
from rmqwire.errors import (
    CodecError,
    FrameTooLargeError,
    LocalProtocolError,
    RemoteProtocolError,
    UnknownSerializeTypeError,
)
from rmqwire.remoting.connection import (
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
    assert pair.client.pending == {got.opaque: 10.0}
    answer = got.response_to(0, body=b"route")
    events = pair.client.receive_data(pair.server.send_response(got, answer))
    assert len(events) == 1 and isinstance(events[0], ResponseReceived)
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


def test_late_response_after_expire_is_unmatched() -> None:
    pair = RemotingPair()
    got = pair.request(ROUTE, deadline=3.0)
    assert pair.client.expire(2.999) == []
    assert pair.client.expire(3.0) == [got.opaque]
    assert pair.client.pending == {}
    (event,) = pair.client.receive_data(pair.server.send_response(got, got.response_to(0)))
    assert isinstance(event, UnmatchedResponse)


def test_expire_reports_in_send_order_and_ignores_no_deadline() -> None:
    conn = RemotingConnection()
    a, _ = conn.send_request(ROUTE, 5.0)
    b, _ = conn.send_request(ROUTE, None)
    c, _ = conn.send_request(ROUTE, 1.0)
    assert conn.next_deadline() == 1.0
    assert conn.expire(10.0) == [a, c]
    assert conn.pending == {b: None}
    assert conn.next_deadline() is None


def test_cancel_and_close() -> None:
    conn = RemotingConnection()
    a, _ = conn.send_request(ROUTE, 5.0)
    b, _ = conn.send_request(ROUTE, 5.0)
    assert conn.cancel(a) is True
    assert conn.cancel(a) is False
    assert conn.close() == [b]
    assert conn.pending == {}


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
            conn = RemotingConnection()
            conn._pending[3] = None  # the response answers a pending request
            got = [e.command for part in (stream[:i], stream[i:j], stream[j:]) for e in conn.receive_data(part)]
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
    with pytest.raises(RemoteProtocolError) as info:
        conn.receive_data(data)
    assert isinstance(info.value.__cause__, cause)
    assert conn.failed
    # the stream is dead: further input is refused with the same error
    with pytest.raises(RemoteProtocolError):
        conn.receive_data(encode_frame(ROUTE))


def test_frames_before_the_bad_one_are_not_lost_on_separate_reads() -> None:
    conn = RemotingConnection()
    (event,) = conn.receive_data(encode_frame(ROUTE))
    assert isinstance(event, RequestReceived)
    with pytest.raises(RemoteProtocolError):
        conn.receive_data(struct.pack(">i", 2))


def test_max_frame_length_is_configurable() -> None:
    conn = RemotingConnection(max_frame_length=64)
    big = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"x" * 100)
    with pytest.raises(RemoteProtocolError, match="exceeds the maximum frame length"):
        conn.receive_data(encode_frame(big))


@pytest.mark.parametrize("request_type", list(SerializeType))
def test_response_follows_request_type_by_default(request_type: SerializeType) -> None:
    client = RemotingConnection(serialize_type=request_type)
    server = RemotingConnection()
    opaque, data = client.send_request(ROUTE)
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
