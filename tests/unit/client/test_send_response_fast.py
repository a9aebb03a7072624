"""The producer's send response fast path (``Producer.send_result_of``) either declines or gives
exactly the SendResult of the typed path (``parse_response`` + ``process_send_response``), for
any response frame: JSON or ROCKETMQ headers, any code, any fields and values."""

from __future__ import annotations

import json
import struct
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.client.message import SendResult, SendStatus
from rmqwire.client.producer.producer import Producer, _Batch
from rmqwire.codec import encode_frame
from rmqwire.codec.codes import FLAG_RESPONSE, ResponseCode, SerializeType
from rmqwire.codec.commands.send import SendBatchMessage, SendMessageV2, SendReplyMessageV2
from rmqwire.codec.frame import RemotingCommand, decode_frame
from rmqwire.codec.message import Message, PropertyKey

KEYS = ["msgId", "queueId", "queueOffset", "transactionId", "batchUniqId", "recallHandle",
        PropertyKey.MSG_REGION, PropertyKey.TRACE_SWITCH, "other", "queueid"]
numbers = st.integers(-(2**64), 2**64).map(str)
odd = st.sampled_from(["", "0", "007", " 1", "+1", "-0", "1_0", "١٢", "false", "true", "2147483647",
                       "2147483648", "9223372036854775807", "9223372036854775808", "é", "null"])
values = numbers | odd | st.text(max_size=8)
ints = st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63]).map(str) | st.integers(0, 2**64).map(str) | odd
#: mostly what a broker puts, then some keys dropped and any value in any field
fields = st.fixed_dictionaries(
    {"msgId": values, "queueId": ints, "queueOffset": ints},
    optional={k: values for k in KEYS[3:]},
)
json_values = values | st.integers(-(2**40), 2**40) | st.none() | st.booleans()
codes = st.sampled_from([ResponseCode.SUCCESS, ResponseCode.SUCCESS, ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                         ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
                         ResponseCode.TOPIC_NOT_EXIST, 1, 17]) | st.integers(-5, 300)


def _producer(namespace: str | None) -> SimpleNamespace:
    return SimpleNamespace(_namespace=namespace)


def _message(batch: bool, uniq: str | None, namespace: str | None) -> Message:
    topic = f"{namespace}%T" if namespace else "T"
    if not batch:
        props = {} if uniq is None else {PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq}
        return Message(topic=topic, body=b"x", properties=props)
    inner = [Message(topic=topic, properties={PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"U{i}"})
             for i in range(3)]
    return _Batch(topic, b"batch", {}, inner)


def _both(response: RemotingCommand, command, msg: Message, namespace: str | None):
    p = _producer(namespace)
    try:
        fast = Producer.send_result_of(p, response, msg, "b0")
    except Exception:  # as _FirstAttempt.answered: the typed path then judges it
        fast = None
    try:
        typed = Producer.process_send_response(p, command.parse_response(response), msg, "b0", "addr")
    except Exception as e:
        typed = e
    return fast, typed


def _json_frame(code: int, remark, ext) -> bytes:
    header = json.dumps({"code": code, "language": "JAVA", "version": 453, "opaque": 7,
                         "flag": FLAG_RESPONSE, "remark": remark, "extFields": ext,
                         "serializeTypeCurrentRPC": "JSON"}).encode()
    return struct.pack(">ii", 4 + len(header), len(header)) + header


@settings(max_examples=400)
@given(code=codes, ext=fields, drop=st.sets(st.sampled_from(KEYS), max_size=2),
       json_ext=st.none() | st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8),
       remark=st.none() | st.text(max_size=5), stype=st.sampled_from(SerializeType),
       command=st.sampled_from([SendMessageV2, SendBatchMessage, SendReplyMessageV2]),
       batch=st.booleans(), uniq=st.none() | st.text(max_size=4),
       namespace=st.none() | st.sampled_from(["ns"]))
def test_fast_path_declines_or_equals_the_typed_path(code, ext, drop, json_ext, remark, stype, command, batch,
                                                      uniq, namespace):
    msg = _message(batch, uniq, namespace)
    ext = {k: v for k, v in ext.items() if k not in drop}
    frames = [encode_frame(RemotingCommand(code, opaque=7, flag=FLAG_RESPONSE, remark=remark,
                                           ext_fields=ext or None), stype),
              _json_frame(code, remark, json_ext)]
    for frame in frames:
        fast, typed = _both(decode_frame(frame), command, msg, namespace)
        if fast is not None:
            assert isinstance(typed, SendResult), (fast, typed)
            assert fast == typed


def test_a_broker_success_takes_the_fast_path():
    ext = {"msgId": "0A00000100002A9F0000000000000010", "queueId": "3", "queueOffset": "41",
           PropertyKey.MSG_REGION: "DefaultRegion", PropertyKey.TRACE_SWITCH: "true"}
    msg = _message(False, "UNIQ", None)
    for stype in SerializeType:
        response = decode_frame(encode_frame(
            RemotingCommand(ResponseCode.SUCCESS, opaque=1, flag=FLAG_RESPONSE, ext_fields=ext), stype))
        fast, typed = _both(response, SendMessageV2, msg, None)
        assert fast is not None and fast == typed
        assert fast.status is SendStatus.SEND_OK and fast.queue_offset == 41


def test_a_flush_status_without_fields_takes_the_fast_path_and_a_missing_field_does_not():
    msg = _message(True, None, "ns")
    status = decode_frame(encode_frame(RemotingCommand(ResponseCode.FLUSH_DISK_TIMEOUT, flag=FLAG_RESPONSE,
                                                       ext_fields={"batchUniqId": "B"})))
    fast, typed = _both(status, SendBatchMessage, msg, "ns")
    assert fast is not None and fast == typed and fast.status is SendStatus.FLUSH_DISK_TIMEOUT
    missing = decode_frame(encode_frame(RemotingCommand(ResponseCode.SUCCESS, flag=FLAG_RESPONSE,
                                                        ext_fields={"queueId": "1", "queueOffset": "2"})))
    fast, typed = _both(missing, SendMessageV2, msg, "ns")
    assert fast is None and isinstance(typed, Exception)
