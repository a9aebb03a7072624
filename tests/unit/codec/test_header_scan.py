"""The fast JSON header scan (rmqwire.codec.header_scan) declines or reads exactly what
``decode_json_header`` reads, for any header: fastjson's quirks (escapes, unicode, field order,
extFields absent / null / empty, numbers as strings, extra fields, whitespace, leading zeros)."""

from __future__ import annotations

import json
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rmqwire.codec.codes import FLAG_RESPONSE, LanguageCode
from rmqwire.codec.frame import RemotingCommand, decode_json_header, encode_json_header
from rmqwire.codec.header_scan import (
    EXT_FIELDS,
    FLAG,
    OPAQUE,
    SEND_OK_EXT,
    SEND_OK_FIELDS,
    SEND_OK_QUEUE_ID,
    scan_json_header,
    scanned_code,
    scanned_command,
    scanned_ext_fields,
    scanned_remark,
)
from rmqwire.errors import CodecError

#: SEND responses as the official brokers write them (captured from 5.3.3 and 4.9.7)
BROKER_HEADERS = [
    b'{"code":0,"extFields":{"queueId":"3","transactionId":"C00002024E83A5DE05717C7AF3340001",'
    b'"msgId":"7F00000100006B3800000000000004D1","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
    b'"queueOffset":"0"},"flag":1,"language":"JAVA","opaque":2,"serializeTypeCurrentRPC":"JSON",'
    b'"version":479}',
    b'{"code":0,"extFields":{"queueId":"2","TRACE_ON":"true","MSG_REGION":"DefaultRegion","msgId":'
    b'"7F0000010000620200000000000009DE,7F000001000062020000000000000ABC","queueOffset":"0"},"flag":1,'
    b'"language":"JAVA","opaque":4,"serializeTypeCurrentRPC":"JSON","version":407}',
    b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON",'
    b'"version":407}',
]

KEYS = ["queueId", "queueOffset", "msgId", "transactionId", "MSG_REGION", "TRACE_ON", "batchUniqId", ""]
texts = st.text(max_size=6) | st.sampled_from(["", "0", "a b", "é", "\u2028", '"', "\\", "\x00", "/", "~\x7f"])
ints = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63), 10**19, 10**30])
numbers_as_text = ints.map(str) | st.sampled_from(["007", " 1", "+1", "-0", "1e3", "1.0", ""])
#: any JSON value fastjson could meet where a number or a string is expected
values = ints | numbers_as_text | texts | st.none() | st.booleans() | st.floats(allow_nan=False, width=32)
ext_values = texts | numbers_as_text | ints | st.none() | st.booleans() | st.just({"a": "b"}) | st.just([1])
ext_fields = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), ext_values, max_size=8)
plain_ext = st.dictionaries(st.sampled_from(KEYS), ints.map(str) | st.sampled_from(["true", "DefaultRegion"]),
                            max_size=7)
#: a send's SUCCESS extFields in the brokers' order (SEND_OK_EXT's shape, or near it)
USUAL_KEYS = ["queueId", "transactionId", "msgId", "TRACE_ON", "MSG_REGION", "queueOffset"]
usual_values = (ints.map(str) | numbers_as_text | texts
                | st.sampled_from(["DefaultRegion", "true", "7F0000010000545F00000000245ED142,7F00"]))
usual_ext = st.fixed_dictionaries({k: usual_values for k in USUAL_KEYS})
languages = st.sampled_from(["JAVA", "PYTHON", "java", "UNKNOWN", "CPP", "1", "-1", "99", "JAVA "]) | ints


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A header object in Java's own shape, then bent in one of fastjson's ways (or none)."""
    obj: dict[str, object] = {"code": draw(ints), "flag": draw(st.sampled_from([1, 0, 3, 2])),
                              "language": "JAVA", "opaque": draw(ints),
                              "serializeTypeCurrentRPC": "JSON", "version": draw(ints)}
    ext = draw(st.none() | plain_ext | plain_ext | ext_fields | usual_ext | usual_ext)
    if ext is not None or draw(st.booleans()):
        obj["extFields"] = ext  # absent, null, empty or not
    if draw(st.booleans()):
        obj["remark"] = draw(st.none() | texts)
    keys = sorted(obj)
    separators, ensure_ascii = (",", ":"), True
    bend = draw(st.sampled_from(["none", "none", "none", "value", "missing", "extra", "order", "spaces",
                                 "unicode", "zero", "escape", "tail", "dup"]))
    if bend == "value":  # any value where a field is expected
        obj[draw(st.sampled_from(keys))] = draw(values | languages)
    elif bend == "missing":
        keys.remove(draw(st.sampled_from(keys)))
    elif bend == "extra":
        key = draw(st.sampled_from(["body", "extfields", "Opaque", "x", "remark"]))
        obj[key] = draw(values)
        keys = sorted(obj)
    elif bend == "order":
        keys = draw(st.permutations(keys))
    elif bend == "spaces":
        separators = (", ", ": ")
    elif bend == "unicode":
        ensure_ascii = False
    text = "{" + separators[0].join(
        json.dumps(k, ensure_ascii=ensure_ascii) + separators[1]
        + json.dumps(obj[k], ensure_ascii=ensure_ascii, separators=(",", ":"))
        for k in keys) + "}"
    if bend == "zero":  # a leading zero: not JSON, fastjson's reader takes it
        key = draw(st.sampled_from(['"opaque":', '"flag":', '"code":']))
        text = text.replace(key, key + "0", 1)
    elif bend == "escape":  # an escaped letter in a key or value
        text = text.replace("queueId", "\\u0071ueueId", 1).replace("JAVA", "J\\u0041VA", 1)
    elif bend == "tail":
        text += draw(st.sampled_from([" ", "x", "}", "\n"]))
    elif bend == "dup":  # a duplicate key: the JSON parser keeps the last
        text = text.replace('"extFields":{', '"extFields":{"queueId":"1","queueId":"2",', 1)
    return text.encode("utf-8")


def _decoded(data: bytes, body: bytes | None) -> RemotingCommand | None:
    try:
        return decode_json_header(data, body)
    except CodecError:
        return None


def _agrees(data: bytes, body: bytes | None = None) -> bool:
    """The scan declines (False) or reads what decode_json_header reads (True; else it fails)."""
    scan = scan_json_header(data.decode("latin-1"))
    if scan is None:
        return False
    cmd = _decoded(data, body)
    assert cmd is not None, data
    assert scanned_code(scan) == cmd.code
    assert int(scan[FLAG]) == cmd.flag
    assert int(scan[OPAQUE]) == cmd.opaque
    assert scanned_remark(scan) == cmd.remark
    ext = scanned_ext_fields(scan)
    assert ext == cmd.ext_fields and (ext is None) == (cmd.ext_fields is None)
    assert scanned_command(scan, body) == cmd and scanned_command(scan, body).body == body
    # the send-OK values are read in the same pass exactly when the extFields alone are that shape
    usual = None if scan[EXT_FIELDS] is None else _SEND_OK_ALONE(scan[EXT_FIELDS])
    fields = scan.group(*SEND_OK_FIELDS)
    if usual is None:
        assert fields == (None,) * 6 and scan[SEND_OK_QUEUE_ID] is None
    else:
        assert fields == usual.groups() and None not in fields
        assert fields == tuple(cmd.ext_fields[k] for k in USUAL_KEYS)
    return True


_SEND_OK_ALONE = re.compile(SEND_OK_EXT).fullmatch


@settings(max_examples=1500)
@given(data=headers(), body=st.none() | st.binary(min_size=1, max_size=4))
@example(data=BROKER_HEADERS[0], body=None)
@example(data=BROKER_HEADERS[2].replace(b'"JAVA"', b'"99"'), body=None)  # no such language ordinal
def test_the_scan_declines_or_reads_what_decode_json_header_reads(data: bytes, body: bytes | None) -> None:
    _agrees(data, body)


int32s = st.integers(-(2**31), 2**31 - 1)  # Java's header fields are ints
plain = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters='"\\'), max_size=8)


@settings(max_examples=300)
@given(code=int32s, opaque=int32s, flag=st.integers(0, 2**31 - 1), version=int32s,
       language=st.sampled_from(list(LanguageCode)), remark=st.none() | plain,
       ext=st.none() | st.dictionaries(plain, plain, max_size=6))
def test_java_shaped_headers_of_plain_ascii_are_all_taken(code, opaque, flag, version, language, remark, ext):
    # what Java (and our own encoder) writes, with plain strings: the scan never declines it
    cmd = RemotingCommand(code, language, version, opaque, flag | FLAG_RESPONSE, remark, ext)
    assert _agrees(encode_json_header(cmd))


def test_the_official_brokers_send_responses_are_taken() -> None:
    for data in BROKER_HEADERS:
        assert _agrees(data)


def test_what_the_scan_declines() -> None:
    base = BROKER_HEADERS[2].decode()
    assert scan_json_header(base) is not None
    declined = [
        base.replace('"opaque":5', '"opaque":"5"'),  # a number as a string
        base.replace('"opaque":5', '"opaque":05'),  # a leading zero
        base.replace('"opaque":5', '"opaque":12345678901234567890'),  # 20 digits
        base.replace('"extFields":{}', '"extFields":null'),
        base.replace('"extFields":{}', '"extFields":{"a":1}'),
        base.replace('"extFields":{}', '"extFields":{"a":"\\u0041"}'),
        base.replace('"extFields":{}', '"extFields":{"a":"\u00e9"}'),
        base.replace('"language":"JAVA",', ""),
        base.replace(',"serializeTypeCurrentRPC":"JSON"', ""),
        base.replace('"flag":1,', "").replace('"code":0,', '"code":0,"flag":1,', 1) + " ",
        base + " ",
        base.replace('{"code":0,', '{"code":0, '),
    ]
    for text in declined:
        assert scan_json_header(text) is None, text


def test_a_send_ok_answer_is_read_in_the_one_pass() -> None:
    scan = scan_json_header(BROKER_HEADERS[0].decode())
    assert scan.group(*SEND_OK_FIELDS) == ("3", "C00002024E83A5DE05717C7AF3340001",
                                           "7F00000100006B3800000000000004D1", "true",
                                           "DefaultRegion", "0")
    # 4.9.7's batch answer lists its keys in another order, and a remark or an 11-digit queue id
    # is not the usual shape: the generic object, no send-OK values
    others = [BROKER_HEADERS[1].decode(), BROKER_HEADERS[2].decode(),
              BROKER_HEADERS[0].decode().replace('"queueId":"3"', '"queueId":"12345678901"'),
              BROKER_HEADERS[0].decode().replace('"queueOffset":"0"}', '"queueOffset":"0","x":"y"}')]
    for text in others:
        scan = scan_json_header(text)
        assert scan is not None and scan.group(*SEND_OK_FIELDS) == (None,) * 6, text
