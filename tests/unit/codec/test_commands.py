"""Command declarations (rmqwire.codec.commands): the derived tables, typed request/response round
trips and body codecs. No Twisted here, as in the codec itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from rmqwire.codec import commands as C
from rmqwire.codec.body import FastjsonBody
from rmqwire.codec.codes import (
    FLAG_ONEWAY,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rmqwire.codec.commands import (
    COMMANDS,
    REQUEST_HEADERS,
    RESPONDS_TO,
    RESPONSE_HEADERS,
    BodyCodec,
    Command,
    Response,
    decode_body,
    encode_body,
)
from rmqwire.codec.frame import FrameDecoder, RemotingCommand, encode_frame
from rmqwire.codec.header import CommandHeader
from rmqwire.errors import (
    CodecError,
    MissingHeaderFieldError,
    PullNotFoundError,
    TopicNotExistError,
    UnknownResponseCodeError,
)


def declarations() -> list[type[Command]]:
    """Every Command class declared in the commands package (walked, not read from COMMANDS)."""
    found, todo = [], list(Command.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("rmqwire.codec.commands."):
            found.append(cls)
    return found


def wire(cmd: RemotingCommand, stype: SerializeType = SerializeType.JSON) -> RemotingCommand:
    """Through the frame codec and back, as a peer would see it."""
    (out,) = FrameDecoder().feed(encode_frame(cmd, stype))
    return out


# ---- the derived tables ----------------------------------------------------------------------------


def test_no_request_code_is_declared_twice() -> None:
    codes = [code for cls in declarations() for code in cls.codes]
    assert len(codes) == len(set(codes))
    assert sorted(codes) == sorted(COMMANDS)  # and COMMANDS holds all of them
    for code, cls in COMMANDS.items():
        assert code in cls.codes and cls.code in cls.codes


def test_every_declared_code_is_a_request_code() -> None:
    for code in COMMANDS:
        assert RequestCode(code).value == code


@pytest.mark.parametrize("cls", sorted(declarations(), key=lambda c: c.code), ids=lambda c: c.__name__)
def test_declaration_types(cls: type[Command]) -> None:
    for header in (cls.header, cls.response_header):
        assert header is None or (isinstance(header, type) and issubclass(header, CommandHeader))
    for body in (cls.body, cls.response_body):
        assert (
            body is None
            or body is bytes
            or isinstance(body, BodyCodec)
            or (isinstance(body, type) and issubclass(body, FastjsonBody))
        ), body
    assert isinstance(cls.statuses, frozenset) and ResponseCode.SUCCESS not in cls.statuses
    for status in cls.statuses:
        assert ResponseCode(status).value == status
    assert isinstance(cls.oneway, bool)
    assert cls.describe().startswith(f"{cls.__name__}[")


def test_header_tables_are_derived_from_the_declarations() -> None:
    assert REQUEST_HEADERS == {c: cls.header for c, cls in COMMANDS.items() if cls.header is not None}
    assert RESPONSE_HEADERS == {
        c: cls.response_header for c, cls in COMMANDS.items() if cls.response_header is not None
    }
    # spot checks
    assert COMMANDS[RequestCode.GET_ROUTEINFO_BY_TOPIC] is C.GetRouteInfo
    assert REQUEST_HEADERS[RequestCode.GET_ROUTEINFO_BY_TOPIC] is C.GetRouteInfoRequestHeader
    assert COMMANDS[RequestCode.LITE_PULL_MESSAGE] is C.LitePullMessage
    assert REQUEST_HEADERS[RequestCode.LITE_PULL_MESSAGE] is C.PullMessageRequestHeader
    assert RESPONSE_HEADERS[RequestCode.PULL_MESSAGE] is C.PullMessageResponseHeader
    assert REQUEST_HEADERS[RequestCode.SEND_MESSAGE] is C.SendMessageRequestHeader
    for v2 in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
        assert REQUEST_HEADERS[v2] is C.SendMessageRequestHeaderV2
        assert RESPONSE_HEADERS[v2] is C.SendMessageResponseHeader
    assert RESPONSE_HEADERS[RequestCode.QUERY_CONSUMER_OFFSET] is C.QueryConsumerOffsetResponseHeader
    assert RequestCode.GET_BROKER_CLUSTER_INFO in COMMANDS
    assert RequestCode.GET_BROKER_CLUSTER_INFO not in REQUEST_HEADERS
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC not in RESPONSE_HEADERS
    assert C.command_for(RequestCode.HEART_BEAT) is C.HeartBeat and C.command_for(-5) is None


def test_outcome_statuses_of_sends_and_pulls() -> None:
    assert C.SendMessageV2.statuses == {
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
    assert C.PullMessage.statuses == C.LitePullMessage.statuses == {
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
    assert C.QueryConsumerOffset.statuses == {ResponseCode.QUERY_NOT_FOUND}
    assert C.GetRouteInfo.statuses == frozenset()


def test_oneway_declarations() -> None:
    oneway = {cls.code for cls in declarations() if cls.oneway}
    assert {
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        RequestCode.CHECK_TRANSACTION_STATE,
        RequestCode.END_TRANSACTION,
    } <= oneway
    assert RequestCode.SEND_MESSAGE_V2 not in oneway


# ---- declaring commands ------------------------------------------------------------------------------


def test_codes_default_to_the_code_and_subclasses_take_their_own() -> None:
    assert C.PullMessage.codes == (RequestCode.PULL_MESSAGE,)
    assert C.LitePullMessage.codes == (RequestCode.LITE_PULL_MESSAGE,)
    assert C.LitePullMessage.header is C.PullMessage.header  # the rest is inherited

    class Family(Command):
        code = 9001
        codes = (9001, 9002)

    assert Family.codes == (9001, 9002) and type(Family.code) is int


def test_bad_declarations_are_refused() -> None:
    with pytest.raises(TypeError, match="not among its codes"):

        class Stray(Command):
            code = 9003
            codes = (9004,)

    with pytest.raises(TypeError, match="SUCCESS"):

        class Odd(Command):
            code = 9005
            statuses = frozenset({ResponseCode.SUCCESS})


def test_responder_only_tags_the_function() -> None:
    def fn(self: Any, header: Any, body: Any, context: Any) -> None:
        return None

    assert C.GetMaxOffset.responder(fn) is fn
    assert C.GetMinOffset.responder(fn) is fn
    assert getattr(fn, RESPONDS_TO) == (C.GetMaxOffset, C.GetMinOffset)


# ---- the requesting side -------------------------------------------------------------------------------


def test_request_from_keywords_mapping_or_header() -> None:
    by_kw = C.GetRouteInfo.request(topic="T")
    assert by_kw == C.GetRouteInfo.request({"topic": "T"})
    assert by_kw == C.GetRouteInfo.request(C.GetRouteInfoRequestHeader(topic="T"))
    assert (by_kw.code, by_kw.ext_fields, by_kw.opaque, by_kw.flag, by_kw.body) == (105, {"topic": "T"}, 0, 0, None)
    assert (by_kw.language, by_kw.version) == (LanguageCode.PYTHON, 479)
    java = C.GetRouteInfo.request(topic="T", language=LanguageCode.JAVA, version=401)
    assert (java.language, java.version) == (LanguageCode.JAVA, 401)


def test_request_refusals() -> None:
    with pytest.raises(MissingHeaderFieldError) as info:
        C.PullMessage.request(consumer_group="g", topic="T")
    assert "queueId" in str(info.value)
    with pytest.raises(TypeError, match="not both"):
        C.GetRouteInfo.request({"topic": "A"}, topic="B")
    with pytest.raises(TypeError, match="takes a GetRouteInfoRequestHeader"):
        C.GetRouteInfo.request(C.GetMaxOffsetRequestHeader(topic="T", queue_id=1))
    with pytest.raises(TypeError, match="has no request header"):
        C.GetBrokerClusterInfo.request(topic="T")
    with pytest.raises(TypeError):
        C.GetRouteInfo.request(no_such_field="x")


def test_request_without_header_fields() -> None:
    cluster = C.GetBrokerClusterInfo.request()
    assert cluster.code == RequestCode.GET_BROKER_CLUSTER_INFO and cluster.ext_fields is None
    heartbeat = C.HeartBeat.request(body=C.HeartbeatData(client_id="c1"))
    assert heartbeat.ext_fields == {}  # a declared (empty) header still yields extFields, as Java
    assert C.HeartbeatData.decode(heartbeat.body).client_id == "c1"


def test_oneway_declaration_sets_the_flag() -> None:
    cmd = C.NotifyConsumerIdsChanged.request(consumer_group="g")
    assert cmd.flag == FLAG_ONEWAY and cmd.is_oneway
    assert not C.GetRouteInfo.request(topic="T").is_oneway


@pytest.mark.parametrize("stype", list(SerializeType))
def test_round_trip_route_lookup(stype: SerializeType) -> None:
    route = C.TopicRouteData(
        queue_datas=[C.QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6)],
        broker_datas=[C.BrokerData(cluster="c", broker_name="broker-a", broker_addrs={0: "10.0.0.2:10911"})],
    )
    request = wire(C.GetRouteInfo.request(topic="T").with_opaque(5), stype)
    header, body = C.GetRouteInfo.parse_request(request)
    assert header == C.GetRouteInfoRequestHeader(topic="T") and body is None
    answer = C.GetRouteInfo.build_response(request, Response(body=route), language=LanguageCode.JAVA)
    assert (answer.opaque, answer.is_response, answer.language) == (5, True, LanguageCode.JAVA)
    resp = C.GetRouteInfo.parse_response(wire(answer, stype))
    assert resp.ok and resp.body == route and resp.header is None and resp.remark is None
    assert resp.command is not None and resp.command.opaque == 5


@pytest.mark.parametrize("stype", list(SerializeType))
def test_round_trip_send_with_raw_body_and_response_header(stype: SerializeType) -> None:
    header = C.SendMessageRequestHeaderV2(
        a="pg", b="T", c="TBW102", d=4, e=1, f=0, g=1700000000000, h=0, i="KEYS\x01k\x02", j=0, k=False, m=False
    )
    request = wire(C.SendMessageV2.request(header, b"\x00payload\xff"), stype)
    got_header, got_body = C.SendMessageV2.parse_request(request)
    assert got_header == header and got_body == b"\x00payload\xff"
    ok = C.SendMessageResponseHeader(msg_id="0A000001000000000000000000000001", queue_id=1, queue_offset=7)
    resp = C.SendMessageV2.parse_response(wire(C.SendMessageV2.build_response(request, Response(ok)), stype))
    assert resp.header == ok and resp.body is None and resp.code == 0
    # a declared outcome status comes back as a Response with that code
    slow = C.SendMessageV2.build_response(request, Response(ok, code=ResponseCode.FLUSH_DISK_TIMEOUT, remark="slow"))
    resp = C.SendMessageV2.parse_response(wire(slow, stype))
    assert (resp.code, resp.remark, resp.header, resp.ok) == (ResponseCode.FLUSH_DISK_TIMEOUT, "slow", ok, False)


def test_round_trip_json_request_body() -> None:
    body = C.LockBatchRequestBody(consumer_group="g", client_id="c", only_this_broker=True)
    request = wire(C.LockBatchMq.request(body=body))
    assert C.LockBatchMq.parse_request(request) == (C.LockBatchMqRequestHeader(), body)


def test_parse_response_raises_the_typed_error() -> None:
    request = C.GetRouteInfo.request(topic="T")
    with pytest.raises(TopicNotExistError) as info:
        C.GetRouteInfo.parse_response(request.response_to(17, remark="No topic route info"))
    assert (info.value.code, info.value.remark) == (17, "No topic route info")
    # another command's status is an error here
    with pytest.raises(PullNotFoundError):
        C.GetRouteInfo.parse_response(request.response_to(ResponseCode.PULL_NOT_FOUND))
    with pytest.raises(UnknownResponseCodeError) as unknown:
        C.GetRouteInfo.parse_response(request.response_to(555))
    assert unknown.value.code == 555


def test_success_response_header_is_strict_statuses_are_lenient() -> None:
    request = C.QueryConsumerOffset.request(consumer_group="g", topic="T", queue_id=0)
    with pytest.raises(MissingHeaderFieldError):
        C.QueryConsumerOffset.parse_response(request.response_to(0))  # SUCCESS without "offset"
    resp = C.QueryConsumerOffset.parse_response(request.response_to(ResponseCode.QUERY_NOT_FOUND, "none"))
    assert resp.code == ResponseCode.QUERY_NOT_FOUND and resp.header.offset is None


def test_parse_request_leaves_missing_fields_none_unless_strict() -> None:
    bare = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"lo": "true"})
    header, _ = C.GetRouteInfo.parse_request(bare)
    assert header.topic is None and header.lo is True
    with pytest.raises(MissingHeaderFieldError):
        C.GetRouteInfo.parse_request(bare, strict=True)
    with pytest.raises(CodecError):  # a bad value always raises
        C.GetMaxOffset.parse_request(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"queueId": "x"}))


def test_as_response_forms() -> None:
    cmd = C.QueryConsumerOffset
    header = C.QueryConsumerOffsetResponseHeader(offset=1)
    raw = RemotingCommand(code=0)
    assert cmd.as_response(None) is None
    assert cmd.as_response(raw) is raw
    given = Response(header=header, code=ResponseCode.QUERY_NOT_FOUND)
    assert cmd.as_response(given) is given
    assert cmd.as_response(header) == Response(header=header)
    assert C.GetRouteInfo.as_response(C.TopicRouteData()) == Response(body=C.TopicRouteData())
    assert Response().ok and not Response(code=1).ok


def test_response_equality_ignores_the_frame() -> None:
    frame = RemotingCommand(code=0, opaque=3)
    assert Response(body=b"x", command=frame) == Response(body=b"x")


# ---- body codecs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    left: int
    right: int


PAIR_CODEC = BodyCodec(
    "pair",
    encode=lambda p: json.dumps([p.left, p.right]).encode(),
    decode=lambda data: Pair(*json.loads(data)),
)


def test_bytes_pass_through_for_every_body_type() -> None:
    for body_type in (None, bytes, C.TopicRouteData, PAIR_CODEC):
        assert encode_body(body_type, b"\x00raw") == b"\x00raw"
        assert encode_body(body_type, bytearray(b"ab")) == b"ab"
        assert encode_body(body_type, memoryview(b"cd")) == b"cd"
        assert encode_body(body_type, None) is None
    assert decode_body(bytes, b"\x01") == b"\x01"
    assert decode_body(None, b"ignored") is None  # a command without a body type decodes nothing
    for body_type in (bytes, C.TopicRouteData, PAIR_CODEC):
        assert decode_body(body_type, None) is None


def test_fastjson_body() -> None:
    table = C.KVTable(table={"k": "v"})
    data = encode_body(C.KVTable, table)
    assert data == table.encode()
    assert decode_body(C.KVTable, data) == table
    # fastjson's non-standard style (unquoted numeric keys) decodes too
    route = decode_body(C.TopicRouteData, b'{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b"}]}')
    assert route.broker_datas[0].broker_addrs == {0: "a:1"}


def test_body_codec() -> None:
    data = encode_body(PAIR_CODEC, Pair(1, 2))
    assert data == b"[1, 2]"
    assert decode_body(PAIR_CODEC, data) == Pair(1, 2)

    class Custom(Command):
        code = 9010
        body = PAIR_CODEC
        response_body = PAIR_CODEC

    request = wire(Custom.request(body=Pair(3, 4)))
    assert Custom.parse_request(request) == (None, Pair(3, 4))
    resp = Custom.parse_response(wire(Custom.build_response(request, Response(body=Pair(5, 6)))))
    assert resp.body == Pair(5, 6)


def test_unencodable_bodies_raise_codec_error() -> None:
    with pytest.raises(CodecError, match="cannot encode a dict as a body of type TopicRouteData"):
        encode_body(C.TopicRouteData, {"queueDatas": []})
    with pytest.raises(CodecError, match="type none"):
        encode_body(None, "text")
    with pytest.raises(CodecError, match="type bytes"):
        encode_body(bytes, 12)
