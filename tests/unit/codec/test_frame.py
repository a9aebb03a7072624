"""Frame codec: the verified examples of wire-format.md sections 1-3, lenient JSON reading, bad input."""

from __future__ import annotations

import json

import pytest

from rmqwire.codec import (
    CodecError,
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_frame,
)
from rmqwire.codec.frame import decode_frame, decode_json_header, encode_json_header
from rmqwire.errors import (
    FrameTooLargeError,
    HeaderDecodeError,
    HeaderLengthError,
    UnknownSerializeTypeError,
)

ROUTE_REQ = RemotingCommand(
    code=RequestCode.GET_ROUTEINFO_BY_TOPIC,
    language=LanguageCode.JAVA,
    version=479,
    opaque=7,
    ext_fields={"topic": "TopicTest"},
)
ROUTE_REQ_JSON_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
ROUTE_REQ_ROCKETMQ_HEX = (
    "0000002d 01000029 0069 00 01df 00000007 00000000 00000000 00000014 0005 746f706963"
    " 00000009 546f70696354657374"
)


def test_verified_json_frame_example():
    frame = encode_frame(ROUTE_REQ)
    assert frame[:8] == bytes.fromhex("00000087 00000083")
    assert frame[8:] == ROUTE_REQ_JSON_HEADER
    assert decode_frame(frame) == ROUTE_REQ


def test_verified_rocketmq_frame_example():
    expected = bytes.fromhex(ROUTE_REQ_ROCKETMQ_HEX)
    assert encode_frame(ROUTE_REQ, SerializeType.ROCKETMQ) == expected
    decoded = decode_frame(expected)
    assert decoded == ROUTE_REQ
    assert decoded.serialize_type is SerializeType.ROCKETMQ


def test_verified_error_response_header():
    text = (
        '{"code":17,"flag":1,"language":"JAVA","opaque":7,'
        '"remark":"No topic route info in name server for the topic: X",'
        '"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    cmd = decode_json_header(text.encode())
    assert cmd.code == ResponseCode.TOPIC_NOT_EXIST and cmd.is_response and not cmd.is_oneway
    assert cmd.ext_fields is None
    assert encode_json_header(cmd) == text.encode()


def test_verified_oneway_header_without_ext_fields():
    text = '{"code":34,"flag":2,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}'
    cmd = decode_json_header(text.encode())
    assert cmd.is_oneway and cmd.ext_fields is None
    assert encode_json_header(cmd) == text.encode()


def test_empty_ext_fields_object_is_kept():
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"{}")
    assert b'"extFields":{}' in encode_frame(cmd)
    assert decode_frame(encode_frame(cmd)).ext_fields == {}


def test_request_and_response_constructors():
    req = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"queueId": "1"}, opaque=9, oneway=True)
    assert req.is_oneway and not req.is_response and req.language is LanguageCode.PYTHON
    resp = req.response_to(ResponseCode.SYSTEM_ERROR, "boom")
    assert resp.opaque == 9 and resp.is_response and resp.remark == "boom"
    # One default language on every constructor; a server posing as Java says so.
    assert resp.language is LanguageCode.PYTHON
    assert RemotingCommand(code=0).language is LanguageCode.PYTHON
    assert req.response_to(0, language=LanguageCode.JAVA).language is LanguageCode.JAVA


def test_json_escaping_matches_fastjson():
    cmd = RemotingCommand(code=10, remark='a"b\\c/d\x01\x1f\n\t中', ext_fields={"i": "WAIT\x01true\x02"})
    header = encode_json_header(cmd)
    assert b'"remark":"a\\"b\\\\c/d\\u0001\\u001F\\n\\t\xe4\xb8\xad"' in header
    assert b'"i":"WAIT\\u0001true\\u0002"' in header
    assert decode_json_header(header) == cmd


class TestLenientJsonHeader:
    def test_missing_keys_take_java_defaults(self):
        cmd = decode_json_header(b'{"code":105}')
        assert cmd.language is LanguageCode.JAVA and cmd.version == 0 and cmd.flag == 0
        assert cmd.ext_fields is None and cmd.remark is None

    def test_numbers_as_strings_are_coerced(self):
        assert decode_json_header(b'{"code":"105","opaque":"3"}').code == 105

    def test_language_name_is_case_insensitive_or_ordinal(self):
        assert decode_json_header(b'{"code":1,"language":"python"}').language is LanguageCode.PYTHON
        assert decode_json_header(b'{"code":1,"language":3}').language is LanguageCode.PYTHON

    def test_unknown_language_name_reads_as_null(self):
        assert decode_json_header(b'{"code":1,"language":"COBOL"}').language is None

    def test_out_of_range_language_ordinal_is_an_error(self):
        with pytest.raises(HeaderDecodeError, match="language ordinal 99"):
            decode_json_header(b'{"code":1,"language":99}')

    def test_non_string_ext_values_become_java_strings(self):
        cmd = decode_json_header(b'{"code":1,"extFields":{"queueId":3,"unitMode":false}}')
        assert cmd.ext_fields == {"queueId": "3", "unitMode": "false"}

    def test_unknown_keys_are_ignored(self):
        assert decode_json_header(b'{"code":1,"whatever":[1,2]}').code == 1

    @pytest.mark.parametrize(
        "raw, message",
        [
            (b"{", "not valid JSON"),
            (b"[1,2]", "expected an object"),
            (b'{"opaque":1}', "no 'code'"),
            (b'{"code":"abc"}', "not a number"),
            (b'{"code":1,"extFields":[1]}', "expected an object"),
            (b'{"code":1,"remark":"\xff"}', "not valid UTF-8"),
        ],
    )
    def test_bad_headers_raise_header_decode_error(self, raw, message):
        with pytest.raises(HeaderDecodeError, match=message):
            decode_json_header(raw)


class TestRocketmqHeader:
    def test_zero_lengths_decode_as_null(self):
        cmd = RemotingCommand(code=10, remark="", ext_fields={"a": "", "b": "x"})
        decoded = decode_frame(encode_frame(cmd, SerializeType.ROCKETMQ))
        assert decoded.remark is None
        assert decoded.ext_fields == {"b": "x"}

    def test_codes_above_int16_are_mangled_like_java(self):
        cmd = RemotingCommand(code=200050)
        assert decode_frame(encode_frame(cmd, SerializeType.ROCKETMQ)).code == 3442

    def test_remark_length_beyond_header_is_rejected(self):
        frame = bytearray(encode_frame(RemotingCommand(code=1, remark="abc"), SerializeType.ROCKETMQ))
        frame[8 + 13 : 8 + 17] = (1000).to_bytes(4, "big")
        with pytest.raises(HeaderDecodeError, match="remark length 1000"):
            decode_frame(bytes(frame))

    def test_unknown_language_byte_reads_as_null(self):
        frame = bytearray(encode_frame(RemotingCommand(code=1), SerializeType.ROCKETMQ))
        frame[8 + 2] = 200
        assert decode_frame(bytes(frame)).language is None


class TestFrameDecoder:
    def test_every_split_point_reassembles(self):
        frames = [
            encode_frame(ROUTE_REQ),
            encode_frame(RemotingCommand(code=0, flag=1, opaque=7, body=b"x" * 300), SerializeType.ROCKETMQ),
        ]
        data = b"".join(frames)
        for cut in range(len(data) + 1):
            dec = FrameDecoder()
            got = dec.feed(data[:cut]) + dec.feed(data[cut:])
            assert [c.code for c in got] == [105, 0]
            assert dec.buffered == 0

    def test_empty_body_decodes_as_none(self):
        assert decode_frame(encode_frame(RemotingCommand(code=1, body=b""))).body is None

    def test_oversize_length_rejected_before_buffering(self):
        dec = FrameDecoder(max_frame_length=1024)
        with pytest.raises(FrameTooLargeError, match="exceeds the maximum frame length 1024"):
            dec.feed((5000).to_bytes(4, "big"))
        assert dec.buffered == 0
        with pytest.raises(FrameTooLargeError):
            dec.feed(b"more")  # a failed stream stays failed

    def test_java_limit_boundary(self):
        dec = FrameDecoder()
        dec.feed((16 * 1024 * 1024 - 4).to_bytes(4, "big"))  # largest accepted length: no error
        with pytest.raises(FrameTooLargeError):
            FrameDecoder().feed((16 * 1024 * 1024 - 3).to_bytes(4, "big"))

    def test_header_length_beyond_frame(self):
        with pytest.raises(HeaderLengthError, match="header length 100 exceeds"):
            FrameDecoder().feed(bytes.fromhex("00000008 00000064 00000000"))

    def test_length_smaller_than_header_word(self):
        with pytest.raises(HeaderLengthError):
            FrameDecoder().feed(bytes.fromhex("00000002 0000"))

    def test_unknown_serialize_type(self):
        with pytest.raises(UnknownSerializeTypeError, match="unknown serialize type 7"):
            FrameDecoder().feed(bytes.fromhex("00000006 07000002 7b7d"))

    def test_errors_are_codec_errors(self):
        for cls in (FrameTooLargeError, HeaderLengthError, UnknownSerializeTypeError, HeaderDecodeError):
            assert issubclass(cls, CodecError)

    def test_json_header_round_trips_through_stdlib_json(self):
        cmd = RemotingCommand(code=310, ext_fields={"a": "PG", "b": "TopicTest"}, body=b"\x00\x01")
        header = encode_frame(cmd)[8:-2]
        assert json.loads(header)["extFields"] == {"a": "PG", "b": "TopicTest"}


def test_good_frames_before_a_bad_one_are_kept_on_the_error():
    good = encode_frame(ROUTE_REQ)
    with pytest.raises(UnknownSerializeTypeError) as info:
        FrameDecoder().feed(good + bytes.fromhex("00000006 07000002 7b7d"))
    assert info.value.frames == [ROUTE_REQ]


@pytest.mark.parametrize("header", [
    b'{"code":' + b"1" * 5000 + b"}",
    b'{"code":0,"extFields":{"a":' + b"1" * 5000 + b"}}",
    b"{code:" + b"1" * 5000 + b"}",  # the lenient path
])
def test_numbers_past_pythons_digit_limit_are_header_errors(header):
    # int() refuses more than 4300 digits with a bare ValueError: the reader says what is wrong instead
    with pytest.raises(HeaderDecodeError, match="number out of range"):
        decode_json_header(header)
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    with pytest.raises(CodecError):
        decode_frame(frame)
