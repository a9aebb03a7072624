"""Typed custom headers (wire-format.md section 8): verified examples, round trips, Java rules."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec import commands as H
from rmqwire.codec.codes import RequestCode, SerializeType
from rmqwire.codec.commands import (
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    GetMaxOffsetRequestHeader,
    HeartbeatRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    RegisterBrokerRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    decode_request_header,
    decode_response_header,
)
from rmqwire.codec.frame import RemotingCommand, decode_frame, encode_frame
from rmqwire.codec.header import (
    JAVA_TYPES,
    BoundaryType,
    CommandHeader,
    HeaderField,
    jfield,
)
from rmqwire.errors import CodecError, HeaderDecodeError, MissingHeaderFieldError


#: Every header class the codec defines (the rpc bases included: they are headers too).
def _all_header_classes() -> set[type[CommandHeader]]:
    found: set[type[CommandHeader]] = set()
    todo = list(CommandHeader.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("rmqwire.codec.") and cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return found


ALL_HEADERS: list[type[CommandHeader]] = sorted(
    _all_header_classes(),
    key=lambda c: c.__name__,
)

PROPS = "WAIT\u0001true\u0002UNIQ_KEY\u0001AC\u0002"

# ---- verified examples (wire-format.md 8.3, 8.4, 8.5) --------------------------------------------

V1_JSON_EXT = json.loads(
    '{"queueId":"0","flag":"0","sysFlag":"0","reconsumeTimes":"0","batch":"false",'
    '"unitMode":"false",'
    '"defaultTopic":"TBW102","defaultTopicQueueNums":"4","producerGroup":"PG","bname":"broker-a",'
    '"topic":"TopicTest","bornTimestamp":"1700000000000",'
    '"properties":"WAIT\\u0001true\\u0002UNIQ_KEY\\u0001AC\\u0002"}'
)
V2_JSON_EXT = json.loads(
    '{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"0","f":"0","g":"1700000000000","h":"0",'
    '"i":"WAIT\\u0001true\\u0002UNIQ_KEY\\u0001AC\\u0002","j":"0","k":"false","m":"false",'
    '"n":"broker-a"}'
)
SEND_RESPONSE_EXT = {
    "queueId": "1",
    "transactionId": "AC110001",
    "msgId": "7F00000100002A9F0000000000000000",
    "TRACE_ON": "true",
    "MSG_REGION": "DefaultRegion",
    "queueOffset": "0",
}

V1 = SendMessageRequestHeader(
    producer_group="PG",
    topic="TopicTest",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=0,
    sys_flag=0,
    born_timestamp=1700000000000,
    flag=0,
    properties=PROPS,
    reconsume_times=0,
    unit_mode=False,
    batch=False,
    bname="broker-a",
)


def test_verified_v1_send_ext_fields():
    assert V1.to_ext_fields() == V1_JSON_EXT
    assert SendMessageRequestHeader.from_ext_fields(V1_JSON_EXT) == V1


def test_verified_v2_send_ext_fields():
    v2 = V1.to_v2()
    assert v2.to_ext_fields() == V2_JSON_EXT
    assert SendMessageRequestHeaderV2.from_ext_fields(V2_JSON_EXT) == v2
    assert v2.n == "broker-a" and v2.l is None and v2.extra == {}


def test_verified_send_response_keeps_broker_extras():
    h = SendMessageResponseHeader.from_ext_fields(SEND_RESPONSE_EXT)
    assert (h.msg_id, h.queue_id, h.queue_offset) == ("7F00000100002A9F0000000000000000", 1, 0)
    assert h.transaction_id == "AC110001"
    assert h.extra == {"TRACE_ON": "true", "MSG_REGION": "DefaultRegion"}
    assert h.to_ext_fields() == SEND_RESPONSE_EXT


def test_v2_to_v1_is_the_broker_mapping():
    v1 = SendMessageRequestHeaderV2.from_ext_fields(V2_JSON_EXT).to_v1()
    assert v1 == V1
    assert v1.to_ext_fields() == V1_JSON_EXT


def test_v2_decode_keeps_unknown_keys_including_rpc_ones():
    ext = dict(V2_JSON_EXT, bname="broker-b", AccessKey="ak", Signature="sig=", ns="x")
    v2 = SendMessageRequestHeaderV2.from_ext_fields(ext)
    assert v2.extra == {"bname": "broker-b", "AccessKey": "ak", "Signature": "sig=", "ns": "x"}
    assert v2.to_ext_fields() == ext
    # The V1 view takes the broker name from "n", as Java's converter does; ACL keys stay.
    v1 = v2.to_v1()
    assert v1.bname == "broker-a"
    assert v1.extra == {"AccessKey": "ak", "Signature": "sig="}


def test_batch_send_sets_m():
    v2 = dataclasses.replace(V1, batch=True).to_v2()
    assert v2.to_ext_fields()["m"] == "true"


def test_v2_always_carries_k_and_m_like_java():
    # Java's converter reads isUnitMode()/isBatch(), which turn a null Boolean into false.
    v2 = dataclasses.replace(V1, unit_mode=None, batch=None).to_v2()
    assert (v2.k, v2.m) == (False, False)
    assert v2.to_ext_fields() == V2_JSON_EXT


# ---- encoding rules (8.1) -----------------------------------------------------------------------


def test_heartbeat_header_has_no_own_fields():
    assert HeartbeatRequestHeader().to_ext_fields() == {}
    assert HeartbeatRequestHeader.from_ext_fields({}) == HeartbeatRequestHeader()
    assert HeartbeatRequestHeader.from_ext_fields(None) == HeartbeatRequestHeader()
    assert HeartbeatRequestHeader(bname="b").to_ext_fields() == {"bname": "b"}


def test_primitives_always_sent_boxed_none_omitted():
    h = GetMaxOffsetRequestHeader(topic="T", queue_id=3)
    assert h.to_ext_fields() == {"topic": "T", "queueId": "3", "committed": "true"}
    r = RegisterBrokerRequestHeader(
        broker_name="b",
        broker_addr="1.2.3.4:10911",
        cluster_name="c",
        ha_server_addr="h:10912",
        broker_id=0,
    )
    # compressed (boolean) and bodyCrc32 (Integer = 0 initializer) are always sent by Java.
    assert r.to_ext_fields() == {
        "brokerName": "b",
        "brokerAddr": "1.2.3.4:10911",
        "clusterName": "c",
        "haServerAddr": "h:10912",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": "0",
    }


def test_initializer_defaults_survive_absence():
    # Java leaves an absent key at the field initializer.
    h = GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": "0"})
    assert h.committed is True
    e = H.EndTransactionRequestHeader.from_ext_fields(
        {"producerGroup": "g", "tranStateTableOffset": "1", "commitLogOffset": "2",
         "commitOrRollback": "8", "msgId": "m"}
    )
    assert e.from_transaction_check is False
    assert H.ResetOffsetRequestHeader(group="g", topic="t").queue_id == -1


def test_wire_name_overrides():
    u = UnregisterClientRequestHeader(client_id="cid")
    assert u.to_ext_fields() == {"clientID": "cid"}
    p = PullMessageRequestHeader.from_ext_fields({"proxyFrowardClientId": "x"}, strict=False)
    assert p.proxy_forward_client_id == "x"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("True", True), ("tRuE", True), ("false", False),
     ("yes", False), ("1", False), ("", False), (" true", False), ("true ", False), ("t", False)],
)
def test_boolean_parse_semantics(text, expected):
    h = QueryConsumerOffsetRequestHeader.from_ext_fields(
        {"consumerGroup": "g", "topic": "t", "queueId": "0", "setZeroIfNotFound": text}
    )
    assert h.set_zero_if_not_found is expected


@pytest.mark.parametrize(
    ("field", "text"),
    [("queueId", "abc"), ("queueId", "1.0"), ("queueId", " 1"), ("queueId", "1 "), ("queueId", ""),
     ("queueId", "2147483648"), ("queueId", "-2147483649"), ("queueId", "1_0"), ("queueId", "0x10"),
     ("commitOffset", "9223372036854775808"), ("commitOffset", "12L"), ("commitOffset", "--1")],
)
def test_malformed_numbers_raise_naming_the_field(field, text):
    ext = {"consumerGroup": "g", "topic": "t", "queueId": "0", "commitOffset": "5"}
    ext[field] = text
    for strict in (True, False):
        match = f"UpdateConsumerOffsetRequestHeader field '{field}'"
        with pytest.raises(HeaderDecodeError, match=match):
            H.UpdateConsumerOffsetRequestHeader.from_ext_fields(ext, strict=strict)


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("+7", 7), ("-0", 0), ("007", 7), ("2147483647", 2**31 - 1),
     ("-2147483648", -(2**31)),
     ("\u0663", 3)],  # Java's Character.digit accepts non-ASCII decimal digits too
)
def test_java_integer_forms_accepted(text, value):
    h = GetMaxOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": text})
    assert h.queue_id == value


def test_missing_required_fields_strict_and_lenient():
    with pytest.raises(MissingHeaderFieldError) as ei:
        PullMessageRequestHeader.from_ext_fields({"consumerGroup": "g", "topic": "t"})
    msg = str(ei.value)
    assert "PullMessageRequestHeader" in msg and "queueId" in msg and "subVersion" in msg
    assert ei.value.header == "PullMessageRequestHeader"
    assert "queueOffset" in ei.value.fields
    assert isinstance(ei.value, CodecError)
    partial = {"consumerGroup": "g", "topic": "t"}
    lenient = PullMessageRequestHeader.from_ext_fields(partial, strict=False)
    assert lenient.queue_id is None and lenient.sub_version is None and lenient.topic == "t"
    assert lenient.missing_required()[:2] == ("queueId", "queueOffset")
    with pytest.raises(MissingHeaderFieldError, match="queueId"):
        lenient.validate()
    with pytest.raises(MissingHeaderFieldError, match="GetMaxOffsetRequestHeader"):
        GetMaxOffsetRequestHeader.from_ext_fields(None)


def test_extra_keys_round_trip():
    ext = {"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9",
           "_UNIQUE_KEY_QUERY": "true", "AccessKey": "ak", "Signature": "s"}
    q = QueryMessageRequestHeader.from_ext_fields(ext)
    assert q.extra == {"_UNIQUE_KEY_QUERY": "true", "AccessKey": "ak", "Signature": "s"}
    assert q.to_ext_fields() == ext


def test_declared_field_wins_over_extra():
    h = GetMaxOffsetRequestHeader(topic="T", queue_id=1, extra={"topic": "other", "X": "y"})
    assert h.to_ext_fields() == {"topic": "T", "queueId": "1", "committed": "true", "X": "y"}


@pytest.mark.parametrize(
    "header",
    [
        GetMaxOffsetRequestHeader(topic=1, queue_id=1),  # type: ignore[arg-type]
        GetMaxOffsetRequestHeader(topic="t", queue_id=True),
        GetMaxOffsetRequestHeader(topic="t", queue_id=2**31),
        GetMaxOffsetRequestHeader(topic="t", queue_id="1"),  # type: ignore[arg-type]
        GetMaxOffsetRequestHeader(topic="t", queue_id=1, committed=None),  # type: ignore[arg-type]
        GetMaxOffsetRequestHeader(topic="t", queue_id=1, committed=1),  # type: ignore[arg-type]
        SearchOffsetRequestHeader(
            topic="t", queue_id=1, timestamp=0, boundary_type="UPPER"  # type: ignore[arg-type]
        ),
        H.QueryConsumerOffsetResponseHeader(offset=2**63),
    ],
)
def test_bad_values_on_encode_raise_codec_error(header):
    with pytest.raises(CodecError, match=type(header).__name__):
        header.to_ext_fields()


def test_non_string_values_on_decode_raise():
    with pytest.raises(HeaderDecodeError, match="queueId"):
        bad = {"topic": "t", "queueId": 5}
        GetMaxOffsetRequestHeader.from_ext_fields(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("UPPER", BoundaryType.UPPER), ("upper", BoundaryType.UPPER), ("UpPeR", BoundaryType.UPPER),
     ("LOWER", BoundaryType.LOWER), ("", BoundaryType.LOWER), ("bogus", BoundaryType.LOWER)],
)
def test_boundary_type_parse(text, expected):
    h = SearchOffsetRequestHeader.from_ext_fields(
        {"topic": "t", "queueId": "0", "timestamp": "1", "boundaryType": text}
    )
    assert h.boundary_type is expected
    assert h.to_ext_fields()["boundaryType"] == expected.name


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (0.0, "0.0"), (-0.0, "-0.0"), (123.456, "123.456"), (1e7, "1.0E7"),
     (9999999.0, "9999999.0"), (0.001, "0.001"), (1e-4, "1.0E-4"), (-2.5e-10, "-2.5E-10"),
     (1.5e300, "1.5E300"), (math.inf, "Infinity"), (-math.inf, "-Infinity")],
)
def test_double_formats_like_java(value, text):
    jt = JAVA_TYPES["Double"]
    assert jt.format(value) == text
    assert jt.parse(text) == value


@pytest.mark.parametrize(
    ("text", "value"), [(" 1.5 ", 1.5), ("2d", 2.0), ("1e3", 1000.0), (".5", 0.5), ("3.", 3.0)]
)
def test_double_parse_java_forms(text, value):
    assert JAVA_TYPES["double"].parse(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1,5", "inf", "nan", "1_0.0"])
def test_double_parse_rejects(text):
    with pytest.raises(ValueError):
        JAVA_TYPES["Double"].parse(text)


def test_double_nan():
    assert JAVA_TYPES["Double"].format(math.nan) == "NaN"
    assert math.isnan(JAVA_TYPES["Double"].parse("NaN"))


def test_declaration_errors():
    with pytest.raises(TypeError, match="unsupported"):
        jfield("Short")
    with pytest.raises(TypeError, match="jfield"):

        class Bad(CommandHeader):  # noqa: F841
            x: int = 0

    with pytest.raises(TypeError, match="twice"):

        class Twice(CommandHeader):  # noqa: F841
            a_b: str | None = jfield("String")
            c: str | None = jfield("String", wire="aB")


def test_pull_sys_flag():
    assert PullSysFlag.build(commit_offset=True, suspend=True) == 0x03
    assert PullSysFlag.build(subscription=True, lite_pull=True) == 0x14
    assert PullSysFlag.build(class_filter=True) is PullSysFlag.CLASS_FILTER
    assert PullSysFlag.clear_commit_offset(0x07) == 0x06
    h = PullMessageRequestHeader(sys_flag=PullSysFlag.SUSPEND | PullSysFlag.COMMIT_OFFSET)
    assert h.to_ext_fields()["sysFlag"] == "3"


# ---- 4.9.x compatibility ------------------------------------------------------------------------


def test_4x_pull_and_responses_without_5x_fields():
    pull_ext = {"consumerGroup": "g", "topic": "t", "queueId": "1", "queueOffset": "0",
                "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
                "suspendTimeoutMillis": "15000", "subVersion": "1",
                "expressionType": "TAG", "subscription": "*"}
    p = PullMessageRequestHeader.from_ext_fields(pull_ext)
    assert p.max_msg_bytes is None and p.request_source is None and p.bname is None
    assert p.to_ext_fields() == pull_ext
    r = PullMessageResponseHeader.from_ext_fields(
        {"suggestWhichBrokerId": "0", "nextBeginOffset": "5", "minOffset": "0", "maxOffset": "5"}
    )
    assert r.offset_delta is None and r.next_begin_offset == 5
    s = SendMessageResponseHeader.from_ext_fields(
        {"msgId": "X", "queueId": "0", "queueOffset": "3"}
    )
    assert s.batch_uniq_id is None and s.recall_handle is None
    q = QueryConsumerOffsetRequestHeader.from_ext_fields(
        {"consumerGroup": "g", "topic": "t", "queueId": "0"}
    )
    assert q.set_zero_if_not_found is None
    # 4.x brokers omit enableActingMaster: that is how a NameServer spots an old broker.
    reg = RegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "haServerAddr": "h",
         "brokerId": "0",
         "compressed": "true", "bodyCrc32": "123"}
    )
    assert reg.enable_acting_master is None and reg.compressed is True and reg.body_crc32 == 123


def test_4x_v1_send_primitive_booleans():
    ext = dict(V1_JSON_EXT)
    del ext["bname"]
    h = SendMessageRequestHeader.from_ext_fields(ext)
    assert h.unit_mode is False and h.batch is False and h.bname is None


# ---- registry -----------------------------------------------------------------------------------


def test_registry_covers_spec_codes():
    expect = {
        RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
        RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
        RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
        RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
        RequestCode.LITE_PULL_MESSAGE: PullMessageRequestHeader,
        RequestCode.HEART_BEAT: HeartbeatRequestHeader,
        RequestCode.GET_ROUTEINFO_BY_TOPIC: H.GetRouteInfoRequestHeader,
        RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
        RequestCode.UNREGISTER_BROKER: H.UnRegisterBrokerRequestHeader,
        RequestCode.BROKER_HEARTBEAT: H.BrokerHeartbeatRequestHeader,
        RequestCode.QUERY_DATA_VERSION: H.QueryDataVersionRequestHeader,
        RequestCode.UPDATE_AND_CREATE_TOPIC: H.CreateTopicRequestHeader,
        RequestCode.DELETE_TOPIC_IN_NAMESRV: H.DeleteTopicFromNamesrvRequestHeader,
        RequestCode.END_TRANSACTION: H.EndTransactionRequestHeader,
        RequestCode.CHECK_TRANSACTION_STATE: H.CheckTransactionStateRequestHeader,
        RequestCode.GET_TOPICS_BY_CLUSTER: H.GetTopicsByClusterRequestHeader,
    }
    for code, cls in expect.items():
        assert REQUEST_HEADERS[code] is cls
    assert RESPONSE_HEADERS[RequestCode.SEND_MESSAGE_V2] is SendMessageResponseHeader
    assert RESPONSE_HEADERS[RequestCode.PULL_MESSAGE] is PullMessageResponseHeader
    assert RESPONSE_HEADERS[RequestCode.GET_KV_CONFIG] is H.GetKVConfigResponseHeader
    assert RequestCode.GET_BROKER_CLUSTER_INFO not in REQUEST_HEADERS
    for table in (REQUEST_HEADERS, RESPONSE_HEADERS):
        for code, cls in table.items():
            assert code in RequestCode.__members__.values() and issubclass(cls, CommandHeader)


def test_decode_helpers():
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, V1.to_v2(), body=b"hi")
    assert decode_request_header(cmd) == V1.to_v2()
    no_header = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert decode_request_header(no_header) is None
    ok = SendMessageResponseHeader(msg_id="M", queue_id=1, queue_offset=2)
    resp = cmd.response_to(0, header=ok)
    assert decode_response_header(RequestCode.SEND_MESSAGE_V2, resp) == SendMessageResponseHeader(
        msg_id="M", queue_id=1, queue_offset=2
    )
    err = cmd.response_to(17, remark="no topic")
    with pytest.raises(MissingHeaderFieldError):
        decode_response_header(RequestCode.SEND_MESSAGE_V2, err)
    assert decode_response_header(RequestCode.SEND_MESSAGE_V2, err, strict=False).msg_id is None
    assert decode_response_header(RequestCode.HEART_BEAT, err) is None


# ---- frame round trips --------------------------------------------------------------------------


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize(
    ("code", "header"),
    [
        (RequestCode.SEND_MESSAGE, V1),
        (RequestCode.SEND_MESSAGE_V2, dataclasses.replace(V1, extra={"AccessKey": "ak"}).to_v2()),
        (RequestCode.PULL_MESSAGE, PullMessageRequestHeader(
            consumer_group="g", topic="t", queue_id=1, queue_offset=2**40, max_msg_nums=32,
            sys_flag=PullSysFlag.build(suspend=True), commit_offset=0, suspend_timeout_millis=15000,
            sub_version=1700000000000, expression_type="TAG", max_msg_bytes=262144,
            bname="broker-a")),
        (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, SearchOffsetRequestHeader(
            topic="Tópico", queue_id=0, timestamp=-1, boundary_type=BoundaryType.UPPER, lo=True)),
        (RequestCode.HEART_BEAT, HeartbeatRequestHeader()),
    ],
)
def test_frame_round_trip(code, header, stype):
    cmd = RemotingCommand.request(code, header, body=b"body", opaque=9)
    back = decode_frame(encode_frame(cmd, stype))
    if stype is SerializeType.ROCKETMQ and not header.to_ext_fields():
        # The ROCKETMQ header cannot tell an empty map from none; Java reads it as null too.
        assert back.ext_fields is None
    else:
        assert back.ext_fields == header.to_ext_fields()
    assert decode_request_header(back) == header


def test_rocketmq_header_turns_empty_strings_into_absent_fields():
    # A zero-length value is null in the ROCKETMQ header (wire-format.md section 3), as in Java.
    h = dataclasses.replace(V1, properties="")
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, h)
    back = decode_frame(encode_frame(cmd, SerializeType.ROCKETMQ))
    assert SendMessageRequestHeader.from_ext_fields(back.ext_fields).properties is None
    back_json = decode_frame(encode_frame(cmd))
    assert SendMessageRequestHeader.from_ext_fields(back_json.ext_fields).properties == ""


# ---- hypothesis round trips over every class ----------------------------------------------------

_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_VALUES = {
    "String": st.text(max_size=12),
    "Integer": _INT32,
    "int": _INT32,
    "Long": _INT64,
    "long": _INT64,
    "Boolean": st.booleans(),
    "boolean": st.booleans(),
    "Double": st.floats(allow_nan=False),
    "double": st.floats(allow_nan=False),
    "BoundaryType": st.sampled_from(BoundaryType),
}


def _value_strategy(spec: HeaderField, *, allow_missing_required: bool):
    values = _VALUES[spec.java_type.name]
    # A None round-trips only where absence decodes back to None: boxed fields without an
    # initializer, and required ones only in lenient mode.
    nullable = not spec.java_type.primitive and spec.default is None
    if nullable and (allow_missing_required or not spec.required):
        return st.none() | values
    return values


def header_strategy(cls: type[CommandHeader], *, allow_missing_required: bool = False):
    fields = {
        s.attr: _value_strategy(s, allow_missing_required=allow_missing_required)
        for s in cls.header_fields()
    }
    extra_keys = st.text(min_size=1, max_size=10).filter(lambda k: k not in cls.__wire_names__)
    fields["extra"] = st.dictionaries(extra_keys, st.text(max_size=10), max_size=3)
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_round_trip_strict(cls, data):
    h = data.draw(header_strategy(cls))
    ext = h.to_ext_fields()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in ext.items())
    assert cls.from_ext_fields(ext) == h


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_round_trip_lenient(cls, data):
    h = data.draw(header_strategy(cls, allow_missing_required=True))
    assert cls.from_ext_fields(h.to_ext_fields(), strict=False) == h


def test_every_registered_class_is_covered():
    assert set(REQUEST_HEADERS.values()) | set(RESPONSE_HEADERS.values()) <= set(ALL_HEADERS)


@settings(max_examples=200, deadline=None)
@given(v1=header_strategy(SendMessageRequestHeader))
def test_v1_v2_conversion_round_trip(v1):
    v2 = v1.to_v2()
    assert SendMessageRequestHeaderV2.from_ext_fields(v2.to_ext_fields()) == v2
    # Java's converters carry bname <-> n and drop the other rpc fields.
    expected = dataclasses.replace(
        v1, ns=None, nsd=None, oway=None, lo=None,
        unit_mode=bool(v1.unit_mode), batch=bool(v1.batch),  # null -> false, as in Java
    )
    expected.extra = {k: v for k, v in v1.extra.items() if len(k) != 1 or k not in "abcdefghijklmn"}
    assert v2.to_v1() == expected


@settings(max_examples=100, deadline=None)
@given(
    ext=st.dictionaries(
        st.sampled_from(["topic", "queueId", "committed", "bname", "lo", "x"])
        | st.text(max_size=4),
        st.text(max_size=6),
        max_size=6,
    )
)
def test_arbitrary_ext_fields_decode_or_raise_codec_error(ext):
    try:
        h = GetMaxOffsetRequestHeader.from_ext_fields(ext, strict=False)
    except HeaderDecodeError:
        return
    ours = GetMaxOffsetRequestHeader.__wire_names__
    assert h.extra == {k: v for k, v in ext.items() if k not in ours}


# ---- cross-check with the Java sources (when the mirror is available) ---------------------------

_MIRROR = Path(os.environ.get("RMQWIRE_ROCKETMQ_MIRROR", "/work/.mirror/apache+rocketmq/repo"))
_HAVE_MIRROR = _MIRROR.is_dir() and shutil.which("git") is not None
_NO_MIRROR = "Apache RocketMQ git mirror (RMQWIRE_ROCKETMQ_MIRROR) not available here"
_JAVA_FIELD = re.compile(
    r"(?:private|protected|public)\s+(?!static)(?:transient\s+)?([\w<>]+)\s+(\w+)\s*(=\s*[^;]+)?;"
)
_JAVA_BASES = {
    "rocketmq-all-5.3.3": (
        "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/",
        "remoting/src/main/java/org/apache/rocketmq/remoting/rpc/",
    ),
    "rocketmq-all-4.9.8": (
        "common/src/main/java/org/apache/rocketmq/common/protocol/header/",
        "common/src/main/java/org/apache/rocketmq/common/rpc/",
    ),
}


def _git_show(tag: str, path: str) -> str | None:
    r = subprocess.run(
        ["git", "-C", str(_MIRROR), "show", f"{tag}:{path}"], capture_output=True, text=True
    )
    return r.stdout if r.returncode == 0 else None


def _java_fields(tag: str, name: str) -> dict[str, tuple[str, bool, str]] | None:
    """wire name -> (java type, @CFNotNull, initializer) of a Java header class and its bases."""
    header_dir, rpc_dir = _JAVA_BASES[tag]
    src = None
    for d in (header_dir, header_dir + "namesrv/", rpc_dir):
        src = _git_show(tag, f"{d}{name}.java")
        if src:
            break
    if src is None:
        return None
    out: dict[str, tuple[str, bool, str]] = {}
    sup = re.search(r"class\s+\w+\s+extends\s+(\w+)", src)
    if sup and sup.group(1).endswith("RequestHeader"):
        out.update(_java_fields(tag, sup.group(1)) or {})
    notnull = False
    for line in src.splitlines():
        s = line.strip()
        if s.startswith("@CFNotNull"):
            notnull = True
            continue
        if s.startswith("@") or not s or s.startswith(("//", "*", "/*")):
            continue
        m = _JAVA_FIELD.match(s)
        if m:
            out[m.group(2)] = (m.group(1), notnull, (m.group(3) or "").lstrip("= ").strip())
        notnull = False
    return out


_INITIALIZERS = {"true": True, "false": False, "Boolean.FALSE": False, "Boolean.TRUE": True}


def _initializer_value(text: str, java_type: str):
    if not text:
        return JAVA_TYPES[java_type].zero
    if text in _INITIALIZERS:
        return _INITIALIZERS[text]
    return int(text)


# V2's FastCodesHeader codec ignores the inherited rpc fields (see SendMessageRequestHeaderV2).
_RPC_WIRE = {"ns", "nsd", "bname", "oway", "lo"}


@pytest.mark.skipif(not _HAVE_MIRROR, reason=_NO_MIRROR)
def test_declarations_match_java_5_3_3():
    checked = 0
    for cls in ALL_HEADERS:
        java = _java_fields("rocketmq-all-5.3.3", cls.__name__)
        assert java is not None, f"{cls.__name__} has no Java class at 5.3.3"
        if cls is SendMessageRequestHeaderV2:
            java = {k: v for k, v in java.items() if k not in _RPC_WIRE}
        ours = {s.wire: (s.java_type.name, s.required, s.default) for s in cls.header_fields()}
        theirs = {w: (t, req, _initializer_value(init, t)) for w, (t, req, init) in java.items()}
        assert ours == theirs, cls.__name__
        checked += 1
    assert checked == len(ALL_HEADERS)


# 4.9.8 fields dropped in 5.x that we deliberately do not declare.
_DROPPED_4X = {("DeleteSubscriptionGroupRequestHeader", "removeOffset")}


@pytest.mark.skipif(not _HAVE_MIRROR, reason=_NO_MIRROR)
def test_declarations_cover_java_4_9_8_fields():
    kind = {"String": "s", "Integer": "i", "int": "i", "Long": "l", "long": "l", "Boolean": "b",
            "boolean": "b", "Double": "d", "double": "d", "BoundaryType": "e"}
    seen = 0
    for cls in ALL_HEADERS:
        java = _java_fields("rocketmq-all-4.9.8", cls.__name__)
        if java is None:
            continue  # 5.x-only class
        seen += 1
        ours = {s.wire: kind[s.java_type.name] for s in cls.header_fields()}
        for wire, (jtype, _req, _init) in java.items():
            v2_rpc = cls is SendMessageRequestHeaderV2 and wire in _RPC_WIRE
            if (cls.__name__, wire) in _DROPPED_4X or v2_rpc:
                continue
            assert ours.get(wire) == kind[jtype], f"{cls.__name__}.{wire} ({jtype}) at 4.9.8"
    assert seen > 40


@pytest.mark.parametrize("value", [5, b"x", ["a"]])  # None means absent: see the next test
def test_non_string_values_on_decode_raise_for_every_type(value):
    for wire in ("topic", "queueId", "committed"):
        ext = {"topic": "t", "queueId": "1", "committed": "true", wire: value}
        with pytest.raises(HeaderDecodeError, match=wire):
            GetMaxOffsetRequestHeader.from_ext_fields(ext)


def test_null_values_count_as_absent():
    h = GetMaxOffsetRequestHeader.from_ext_fields(
        {"topic": "t", "queueId": "1", "committed": None, "X": None}  # type: ignore[dict-item]
    )
    assert h.committed is True and h.extra == {}
    with pytest.raises(HeaderDecodeError, match="not a string pair"):
        bad = {"topic": "t", "queueId": "1", "X": 3}
        GetMaxOffsetRequestHeader.from_ext_fields(bad)  # type: ignore[arg-type]


# ---- the compiled codecs equal the declaration-driven reference loops -----------------------------

_ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=6),
    st.sampled_from(list(BoundaryType)), st.just(b"x"),
)
_ANY_RAW = st.one_of(
    st.none(), st.text(st.sampled_from("0123456789-+ .aeEfdDtrueTRUENaInfinity٣"), max_size=21),
    st.sampled_from(["9223372036854775808", "2147483648", "-2147483649", "007", "", "true"]),
    st.integers(), st.booleans(),
)


def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # the same error type and message
        return (type(e), str(e))


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_codecs_equal_the_reference(cls, data):
    specs = cls.header_fields()
    h = cls(**{s.attr: data.draw(_ANY_VALUE | _value_strategy(s, allow_missing_required=True))
               for s in specs})
    h.extra = data.draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2))
    assert _outcome(h.to_ext_fields) == _outcome(CommandHeader.to_ext_fields, h)
    assert _outcome(h.missing_required) == (
        "ok", tuple(s.wire for s in specs if s.required and getattr(h, s.attr) is None))
    wires = [s.wire for s in specs]
    ext = data.draw(st.dictionaries(st.sampled_from(wires) | st.text(max_size=4), _ANY_RAW, max_size=8)
                    if wires else st.dictionaries(st.text(max_size=4), _ANY_RAW, max_size=3))
    for strict in (True, False):
        assert _outcome(cls.from_ext_fields, ext, strict=strict) == \
            _outcome(CommandHeader.from_ext_fields.__func__, cls, ext, strict=strict)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_HEADERS), st.data())
def test_compiled_validate_raises_exactly_when_required_fields_are_missing(cls, data):
    # the generated validate (one `is None` test per required field) against missing_required
    header = cls()
    values = {attr: data.draw(st.sampled_from([None, "x"]), label=attr) for attr, _ in cls.__required__}
    header = dataclasses.replace(header, **values)
    missing = [wire for attr, wire in cls.__required__ if values[attr] is None]
    assert list(header.missing_required()) == missing
    if missing:
        with pytest.raises(MissingHeaderFieldError) as e:
            header.validate()
        assert e.value.fields == tuple(missing)
    else:
        assert header.validate() is None
