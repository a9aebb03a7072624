"""The producer's send response fast path (``Producer.send_result_of``) either declines or gives
exactly the SendResult of the typed path (``parse_response`` + ``process_send_response``), for
any response frame: JSON or ROCKETMQ headers, any code, any fields and values."""

from __future__ import annotations

import dataclasses
import json
import re
import struct
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.python.failure import Failure

from rmqwire.client.message import SendResult, SendStatus, new_send_result
from rmqwire.client.producer.producer import (
    CommunicationMode,
    Producer,
    _Batch,
    _FirstAttempt,
)
from rmqwire.codec import encode_frame
from rmqwire.codec.codes import FLAG_RESPONSE, LanguageCode, ResponseCode, SerializeType
from rmqwire.codec.commands.send import SendBatchMessage, SendMessageV2, SendReplyMessageV2
from rmqwire.codec.frame import RemotingCommand, decode_frame, decode_json_header, encode_json_header
from rmqwire.codec.header_scan import EXT_FIELDS, SEND_OK_EXT, scan_json_header
from rmqwire.codec.message import Message, PropertyKey
from rmqwire.model import MessageQueue

#: the usual send-OK extFields alone, as the header scan reads them in its pass
_USUAL_SEND_OK = re.compile(SEND_OK_EXT).fullmatch

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
    p = SimpleNamespace(_namespace=namespace)
    p.send_result_from = lambda *args: Producer.send_result_from(p, *args)
    p.send_ok_from = lambda *args: Producer.send_ok_from(p, *args)
    return p


def _message(batch: bool, uniq: str | None, namespace: str | None) -> Message:
    topic = f"{namespace}%T" if namespace else "T"
    if not batch:
        props = {} if uniq is None else {PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq}
        return Message(topic=topic, body=b"x", properties=props)
    inner = [Message(topic=topic, properties={PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"U{i}"})
             for i in range(3)]
    return _Batch(topic, b"batch", {}, inner)


def _both(response: RemotingCommand, command, msg: Message, namespace: str | None,
          sent_to: MessageQueue | None = None):
    p = _producer(namespace)
    try:
        fast = Producer.send_result_of(p, response, msg, "b0")
    except Exception:  # as _FirstAttempt.answered: the typed path then judges it
        fast = None
    try:  # as _FirstAttempt.answered_scan: with the queue the request went to
        kept = Producer.send_result_from(p, response.code, response.ext_fields, msg, "b0", sent_to)
    except Exception:
        kept = None
    assert kept == fast
    if kept is not None and sent_to is not None:
        assert (kept.message_queue is sent_to) is (kept.message_queue == sent_to)
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
       namespace=st.none() | st.sampled_from(["ns"]),
       sent_to=st.none() | st.builds(MessageQueue, st.sampled_from(["T", "ns%T", "U"]),
                                     st.sampled_from(["b0", "b1"]), st.integers(0, 3)))
def test_fast_path_declines_or_equals_the_typed_path(code, ext, drop, json_ext, remark, stype, command, batch,
                                                      uniq, namespace, sent_to):
    msg = _message(batch, uniq, namespace)
    ext = {k: v for k, v in ext.items() if k not in drop}
    frames = [encode_frame(RemotingCommand(code, opaque=7, flag=FLAG_RESPONSE, remark=remark,
                                           ext_fields=ext or None), stype),
              _json_frame(code, remark, json_ext)]
    for frame in frames:
        fast, typed = _both(decode_frame(frame), command, msg, namespace, sent_to)
        if fast is not None:
            assert isinstance(typed, SendResult), (fast, typed)
            assert fast == typed


@given(st.tuples(
    st.sampled_from(SendStatus), st.none() | st.text(max_size=3), st.none() | st.text(max_size=3),
    st.builds(MessageQueue, st.text(max_size=3), st.text(max_size=3), st.integers(0, 7) | st.none()),
    st.integers(-1, 2**63) | st.none(), st.none() | st.text(max_size=3), st.text(max_size=3),
    st.booleans(), st.none() | st.text(max_size=3)))
def test_new_send_result_is_the_dataclass(fields):
    made = new_send_result(*fields)
    assert made == SendResult(*fields) and type(made) is SendResult
    assert [getattr(made, f.name) for f in dataclasses.fields(SendResult)] == list(fields)


def test_a_sent_queue_is_the_result_queue_when_the_broker_names_it():
    ext = {"msgId": "M", "queueId": "3", "queueOffset": "41"}
    msg = _message(False, "UNIQ", None)
    p = _producer(None)
    sent = MessageQueue("T", "b0", 3)
    assert Producer.send_result_from(p, 0, ext, msg, "b0", sent).message_queue is sent
    other = Producer.send_result_from(p, 0, ext, msg, "b0", MessageQueue("T", "b0", 2)).message_queue
    assert other == MessageQueue("T", "b0", 3)
    ns = _producer("ns")
    kept = Producer.send_result_from(ns, 0, ext, _message(False, "U", "ns"), "b0", MessageQueue("ns%T", "b0", 3))
    assert kept.message_queue == MessageQueue("T", "b0", 3)  # the caller's topic, not the wire's


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


# ---- the first attempt's scanned response (_FirstAttempt.answered_scan) ---------------------------


class _Attempt(_FirstAttempt):
    """A first attempt whose outcomes are recorded instead of settling a send."""

    __slots__ = ("outcomes",)

    def settle(self, outcome):
        self.outcomes.append(("settle", _plain(outcome)))

    def fall_back(self, failure):
        self.outcomes.append(("fall_back", _plain(failure)))

    def _resume(self, step):
        self.outcomes.append(("resume", step()))

    def _loop(self):
        return SimpleNamespace(_sent=lambda result: ("sent", result))


def _plain(outcome):
    if isinstance(outcome, Failure):
        return type(outcome.value), str(outcome.value)
    return outcome


def _attempt(p, msg, command, mode) -> _Attempt:
    a = _Attempt(p, msg, mode, None, MessageQueue(msg.topic, "b0", 0), "addr", 0, 3000, 0, None, None)
    a.command = command
    a.outcomes = []
    return a


def _bend(header: bytes, how: str) -> bytes:
    if how == "escape":  # still JSON, no longer plain: the scan declines
        return header.replace(b'"queueId"', b'"\\u0071ueueId"', 1)
    if how == "order":
        return header.replace(b'"flag":1,"language":"JAVA"', b'"language":"JAVA","flag":1', 1)
    return header


ascii_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8)
#: what a broker puts, in plain ASCII (the scan takes it), or anything as above
scan_fields = fields | st.fixed_dictionaries(
    {"msgId": ascii_values, "queueId": ints, "queueOffset": ints},
    optional={k: ascii_values | odd for k in KEYS[3:]},
)
status_codes = st.sampled_from([ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                                ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE])


def _typed_and_fast(msg: Any, command: Any, mode: CommunicationMode, namespace: str | None,
                    retry_another: bool) -> tuple[Any, Any]:
    """Two attempts of one producer sending ``msg``: one to settle the typed way, one the fast way."""
    p = _producer(namespace)
    p.send_result_of = lambda *args: Producer.send_result_of(p, *args)
    p.process_send_response = lambda *args: Producer.process_send_response(p, *args)
    p.config = SimpleNamespace(retry_another_broker_when_not_store_ok=retry_another)
    return _attempt(p, msg, command, mode), _attempt(p, msg, command, mode)


@settings(max_examples=400)
@given(code=status_codes | codes, ext=scan_fields, drop=st.sets(st.sampled_from(KEYS), max_size=2),
       remark=st.none() | st.text(max_size=5) | st.sampled_from(["plain remark"]),
       command=st.sampled_from([SendMessageV2, SendBatchMessage, SendReplyMessageV2]),
       batch=st.booleans(), uniq=st.none() | st.text(max_size=4), namespace=st.none() | st.just("ns"),
       mode=st.sampled_from([CommunicationMode.ASYNC, CommunicationMode.SYNC]), retry_another=st.booleans(),
       body=st.none() | st.just(b"B"), bend=st.sampled_from(["none", "none", "escape", "order"]))
def test_a_scanned_response_settles_the_attempt_as_its_decoded_command(
        code, ext, drop, remark, command, batch, uniq, namespace, mode, retry_another, body, bend):
    msg = _message(batch, uniq, namespace)
    ext = {k: v for k, v in ext.items() if k not in drop}
    header = _bend(encode_json_header(RemotingCommand(code, LanguageCode.JAVA, 479, 7, FLAG_RESPONSE, remark,
                                                      ext or None)), bend)
    scan = scan_json_header(header.decode("latin-1"))
    if scan is None:
        return  # the channel decodes it and calls answered, as before
    typed, fast = _typed_and_fast(msg, command, mode, namespace, retry_another)
    typed.answered(decode_json_header(header, body))
    fast.answered_scan(scan, body)
    assert fast.outcomes == typed.outcomes and len(fast.outcomes) == 1


def test_a_broker_success_is_read_from_the_scan() -> None:
    header = (b'{"code":0,"extFields":{"queueId":"3","msgId":"7F00000100006B3800000000000004D1",'
              b'"TRACE_ON":"true","MSG_REGION":"DefaultRegion","queueOffset":"41"},"flag":1,'
              b'"language":"JAVA","opaque":2,"serializeTypeCurrentRPC":"JSON","version":479}')
    p = _producer(None)
    p.config = SimpleNamespace(retry_another_broker_when_not_store_ok=False)
    a = _attempt(p, _message(False, "UNIQ", None), SendMessageV2, CommunicationMode.ASYNC)
    a.answered_scan(scan_json_header(header.decode()), None)
    ((how, result),) = a.outcomes
    assert how == "settle" and result.queue_offset == 41 and result.msg_id == "UNIQ"


#: the extFields of a SUCCESS answer as a 5.3.3 broker writes them (captured), in their order
USUAL_KEYS = ["queueId", "transactionId", "msgId", "TRACE_ON", "MSG_REGION", "queueOffset"]
usual_ext = st.fixed_dictionaries({
    "queueId": ints, "transactionId": ascii_values | odd, "msgId": ascii_values | odd,
    "TRACE_ON": st.sampled_from(["true", "false", "False", ""]) | ascii_values,
    "MSG_REGION": st.sampled_from(["DefaultRegion", ""]) | ascii_values | odd, "queueOffset": ints,
})


@settings(max_examples=400)
@given(code=st.sampled_from([ResponseCode.SUCCESS] * 3 + [ResponseCode.FLUSH_DISK_TIMEOUT]) | codes,
       ext=usual_ext, drop=st.sets(st.sampled_from(USUAL_KEYS), max_size=1),
       command=st.sampled_from([SendMessageV2, SendBatchMessage, SendReplyMessageV2]),
       batch=st.booleans(), uniq=st.none() | st.text(max_size=4), namespace=st.none() | st.just("ns"),
       mode=st.sampled_from([CommunicationMode.ASYNC, CommunicationMode.SYNC]), retry_another=st.booleans(),
       queue_id=st.integers(0, 3))
def test_a_usual_send_ok_answer_settles_the_attempt_as_its_decoded_command(
        code, ext, drop, command, batch, uniq, namespace, mode, retry_another, queue_id):
    # the usual answer's extFields read by _USUAL_SEND_OK (send_ok_from) give what the typed path
    # gives, whatever the values; a key dropped (another shape) goes the general way
    msg = _message(batch, uniq, namespace)
    ext = {k: ext[k] for k in USUAL_KEYS if k not in drop}
    header = encode_json_header(RemotingCommand(code, LanguageCode.JAVA, 479, 7, FLAG_RESPONSE, None, ext))
    scan = scan_json_header(header.decode("latin-1"))
    if scan is None:
        return  # the channel decodes it and calls answered, as before
    typed, fast = _typed_and_fast(msg, command, mode, namespace, retry_another)
    typed.mq = fast.mq = MessageQueue(msg.topic.removeprefix("ns%"), "b0", queue_id)
    typed.answered(decode_json_header(header, None))
    fast.answered_scan(scan, None)
    assert fast.outcomes == typed.outcomes and len(fast.outcomes) == 1
    (how, result), = fast.outcomes
    if how == "settle" and isinstance(result, SendResult) and _USUAL_SEND_OK(scan[EXT_FIELDS]):
        # read by the usual match: the result's queue is the one the request went to when the
        # broker names it
        assert (result.message_queue is fast.mq) is (result.message_queue == fast.mq)


def test_a_5_3_3_brokers_send_ok_answer_is_read_by_the_usual_match() -> None:
    header = ('{"code":0,"extFields":{"queueId":"7","transactionId":"C000020271E34D5BD81F7E72E00A0001",'
              '"msgId":"7F0000010000545F00000000245ED142","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
              '"queueOffset":"60971"},"flag":1,"language":"JAVA","opaque":2,'
              '"serializeTypeCurrentRPC":"JSON","version":479}')
    scan = scan_json_header(header)
    assert _USUAL_SEND_OK(scan[EXT_FIELDS]) is not None
    p = _producer(None)
    p.config = SimpleNamespace(retry_another_broker_when_not_store_ok=False)
    p.send_result_from = None  # not called: the usual match reads it
    a = _attempt(p, _message(False, "UNIQ", None), SendMessageV2, CommunicationMode.ASYNC)
    a.mq = MessageQueue("T", "b0", 7)
    a.answered_scan(scan, None)
    ((how, result),) = a.outcomes
    assert how == "settle" and result == SendResult(
        SendStatus.SEND_OK, "UNIQ", "7F0000010000545F00000000245ED142", a.mq, 60971,
        "C000020271E34D5BD81F7E72E00A0001", "DefaultRegion", True, None)
    assert result.message_queue is a.mq


#: a batch message's UNIQ_KEY: absent, None, empty, or any text
_ABSENT = object()
batch_uniqs = st.lists(st.just(_ABSENT) | st.none() | st.just("") | st.text(max_size=4), min_size=1,
                       max_size=4)


def _batch_of(uniqs: list[Any], namespace: str | None) -> _Batch:
    topic = f"{namespace}%T" if namespace else "T"
    inner = [Message(topic=topic, properties={} if u is _ABSENT
                     else {PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: u}) for u in uniqs]
    return _Batch(topic, b"batch", {}, inner)


@settings(max_examples=300)
@given(ext=usual_ext, uniqs=batch_uniqs, namespace=st.none() | st.just("ns"),
       mode=st.sampled_from([CommunicationMode.ASYNC, CommunicationMode.SYNC]),
       queue_id=st.integers(0, 3))
def test_a_usual_answer_to_a_batch_settles_it_as_its_decoded_command(ext, uniqs, namespace, mode,
                                                                       queue_id):
    # a batch's usual answer (no batchUniqId) read by the usual match: msg_id is its messages'
    # ids joined, as the typed path joins them, whatever ids they hold (absent, None, empty)
    msg = _batch_of(uniqs, namespace)
    header = encode_json_header(RemotingCommand(ResponseCode.SUCCESS, LanguageCode.JAVA, 479, 7,
                                                FLAG_RESPONSE, None, ext))
    scan = scan_json_header(header.decode("latin-1"))
    if scan is None:
        return  # the channel decodes it and calls answered, as before
    typed, _ = _typed_and_fast(msg, SendBatchMessage, mode, namespace, False)
    _, fast = _typed_and_fast(msg, SendBatchMessage, mode, namespace, False)
    typed.p.send_result_of = lambda *args: None  # the reference: parse_response + process_send_response
    typed.mq = fast.mq = MessageQueue("T", "b0", queue_id)
    typed.answered(decode_json_header(header, None))
    fast.answered_scan(scan, None)
    assert fast.outcomes == typed.outcomes and len(fast.outcomes) == 1


def test_a_5_3_3_brokers_answer_to_a_batch_is_read_by_the_usual_match() -> None:
    ids = ["7F00000100005145000000009238F900", "7F00000100005145000000009238FE09"]
    header = ('{"code":0,"extFields":{"queueId":"3","transactionId":"C00002023FE63DBE64517F3106CC0021",'
              f'"msgId":"{",".join(ids)}","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
              '"queueOffset":"235536"},"flag":1,"language":"JAVA","opaque":2,'
              '"serializeTypeCurrentRPC":"JSON","version":479}')
    scan = scan_json_header(header)
    p = _producer(None)
    p.config = SimpleNamespace(retry_another_broker_when_not_store_ok=False)
    p.send_result_from = None  # not called: the usual match reads it
    a = _attempt(p, _batch_of(["U0", "U1"], None), SendBatchMessage, CommunicationMode.SYNC)
    a.mq = MessageQueue("T", "b0", 3)
    a.answered_scan(scan, None)
    ((how, result),) = a.outcomes
    assert how == "settle" and result == SendResult(
        SendStatus.SEND_OK, "U0,U1", ",".join(ids), a.mq, 235536,
        "C00002023FE63DBE64517F3106CC0021", "DefaultRegion", True, None)
    assert result.message_queue is a.mq


def test_a_batch_that_carries_its_ids_joined_answers_with_them() -> None:
    # _batch_alike's batch: the ids it joined as it tagged the messages, no read of each message
    header = ('{"code":0,"extFields":{"queueId":"3","transactionId":"C0","msgId":"M0,M1","TRACE_ON":"true",'
              '"MSG_REGION":"DefaultRegion","queueOffset":"5"},"flag":1,"language":"JAVA","opaque":2,'
              '"serializeTypeCurrentRPC":"JSON","version":479}')
    p = _producer(None)
    p.config = SimpleNamespace(retry_another_broker_when_not_store_ok=False)
    batch = _batch_of(["U0", "U1"], None)
    batch.ids = "U0,U1"
    batch.messages = None  # not read
    a = _attempt(p, batch, SendBatchMessage, CommunicationMode.SYNC)
    a.mq = MessageQueue("T", "b0", 3)
    a.answered_scan(scan_json_header(header), None)
    ((how, result),) = a.outcomes
    assert how == "settle" and result.msg_id == "U0,U1" and result.offset_msg_id == "M0,M1"
