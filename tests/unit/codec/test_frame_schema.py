"""The hand-written frame path agrees with the Construct schemas (the schema of record): byte for
byte on encode, value for value on decode, including empty strings (Java's null) and mutated or
truncated bytes, where both must give the same command or both raise CodecError."""

from __future__ import annotations

import dataclasses
import json
import struct

import construct as cs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqwire.codec import (
    CodecError,
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
)
from rmqwire.codec.frame import (
    FRAME,
    ROCKETMQ_HEADER,
    _json_header_object,
    _json_header_text,
    _json_object,
    decode_frame,
    decode_json_header,
    encode_json_header,
)
from rmqwire.codec.java import fastjson_quote

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
# Empty strings included: the ROCKETMQ header writes them as length 0, which reads back as null.
text = st.text(max_size=40)


@st.composite
def commands(draw, *, rocketmq: bool):
    # The ROCKETMQ header carries int16 codes and versions.
    return RemotingCommand(
        code=draw(int16 if rocketmq else int32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(int16 if rocketmq else int32),
        opaque=draw(int32),
        flag=draw(st.integers(0, 3)),
        remark=draw(st.none() | text),
        ext_fields=draw(st.none() | st.dictionaries(text, text, max_size=6)),
        body=draw(st.none() | st.binary(min_size=1, max_size=64)),
    )


def rocketmq_read_back(cmd: RemotingCommand) -> RemotingCommand:
    """What a ROCKETMQ header written from ``cmd`` decodes to, in Java and here: a zero-length
    remark is null, no extFields bytes is no map, and an entry with an empty key or value is
    null, so it is not readable."""
    ext = cmd.ext_fields
    return dataclasses.replace(
        cmd,
        remark=cmd.remark or None,
        ext_fields={k: v for k, v in ext.items() if k and v} if ext else None,
    )


def schema_decode_frame(data: bytes) -> RemotingCommand:
    """Decode exactly one whole frame with the Construct schemas alone (JSON headers have no
    Construct schema: both paths share ``decode_json_header``)."""
    try:
        frame = FRAME.parse(data)
        if 4 + frame.length != len(data):
            raise CodecError(f"frame length {frame.length} does not match {len(data)} bytes")
        stype = int(frame.header_word.serialize_type)
        body = frame.body or None
        if stype == SerializeType.JSON:
            return decode_json_header(frame.header, body)
        if stype != SerializeType.ROCKETMQ:
            raise CodecError(f"unknown serialize type {stype}")
        h = ROCKETMQ_HEADER.parse(frame.header)
    except cs.ConstructError as e:
        raise CodecError(str(e)) from None
    ext = None
    if h.ext_fields is not None:
        # A later null value hides an earlier one (Java's HashMap.put(k, null)).
        entries = {e.key: e.value for e in h.ext_fields}
        ext = {k: v for k, v in entries.items() if k is not None and v is not None}
    try:
        language = LanguageCode(h.language)
    except ValueError:
        language = None
    return RemotingCommand(
        code=h.code,
        language=language,
        version=h.version,
        opaque=h.opaque,
        flag=h.flag,
        remark=h.remark,
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


def outcome(decode, data: bytes):
    try:
        return decode(data)
    except CodecError:
        return CodecError


@settings(max_examples=300, deadline=None)
@given(commands(rocketmq=False))
def test_json_frames_round_trip(cmd):
    frame = encode_frame(cmd)
    assert decode_frame(frame) == cmd
    assert schema_decode_frame(frame) == cmd
    parsed = FRAME.parse(frame)
    assert parsed.header_word.serialize_type == "JSON"
    assert json.loads(parsed.header)["code"] == cmd.code


@settings(max_examples=300, deadline=None)
@given(commands(rocketmq=True))
def test_rocketmq_frames_match_construct_schema(cmd):
    frame = encode_frame(cmd, SerializeType.ROCKETMQ)
    expected = rocketmq_read_back(cmd)
    assert decode_frame(frame) == expected
    assert schema_decode_frame(frame) == expected
    # Build the same frame from the Construct schemas (None and "" both build as length 0).
    ext = cmd.ext_fields
    header = ROCKETMQ_HEADER.build(
        {
            "code": cmd.code,
            "language": int(cmd.language),
            "version": cmd.version,
            "opaque": cmd.opaque,
            "flag": cmd.flag,
            "remark": cmd.remark,
            "ext_fields": None if ext is None else [{"key": k, "value": v} for k, v in ext.items()],
        }
    )
    built = FRAME.build({"serialize_type": "ROCKETMQ", "header": header, "body": cmd.body or b""})
    assert built == frame


def test_schema_reads_zero_lengths_as_null():
    entry = struct.pack(">h", 0) + struct.pack(">i", 1) + b"v"  # null key
    entry += struct.pack(">h", 1) + b"k" + struct.pack(">i", 0)  # null value
    header = struct.pack(">hBhiii", 10, 0, 1, 2, 0, 0) + struct.pack(">i", len(entry)) + entry
    parsed = ROCKETMQ_HEADER.parse(header)
    assert parsed.remark is None
    assert [(e.key, e.value) for e in parsed.ext_fields] == [(None, "v"), ("k", None)]
    assert ROCKETMQ_HEADER.parse(header[:17] + struct.pack(">ii", 0, 0)).ext_fields is None
    frame = struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header
    assert decode_frame(frame) == schema_decode_frame(frame)
    assert decode_frame(frame).ext_fields == {} and decode_frame(frame).remark is None


def test_a_later_null_value_hides_an_earlier_one():
    entries = struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"v"
    entries += struct.pack(">h", 1) + b"k" + struct.pack(">i", 0)
    header = struct.pack(">hBhiii", 10, 0, 1, 2, 0, 0) + struct.pack(">i", len(entries)) + entries
    frame = struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header
    assert decode_frame(frame).ext_fields == {} == schema_decode_frame(frame).ext_fields


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_codec_errors(data):
    dec = FrameDecoder(max_frame_length=4096)
    try:
        dec.feed(data)
    except CodecError:
        pass
    assert dec.buffered <= 4096
    assert outcome(decode_frame, data) == outcome(schema_decode_frame, data)


def _fix_lengths(frame: bytearray, header_cut: int = 0) -> None:
    """Make the length prefix (and, after cutting the header, the header word) consistent again,
    so that the damage reaches the header parser instead of the framing checks."""
    if len(frame) < 8:
        return
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    if header_cut:
        (word,) = struct.unpack_from(">i", frame, 4)
        struct.pack_into(">i", frame, 4, (word & ~0xFFFFFF) | max(0, (word & 0xFFFFFF) - header_cut))


@st.composite
def mutated_frames(draw):
    cmd = draw(commands(rocketmq=True))
    frame = bytearray(encode_frame(cmd, draw(st.sampled_from(list(SerializeType)))))
    for _ in range(draw(st.integers(1, 4))):
        if not frame:
            break
        op = draw(st.sampled_from(["set", "flip", "truncate", "cut", "cut_header", "ext_len"]))
        i = draw(st.integers(0, len(frame) - 1))
        if op == "set":
            frame[i] = draw(st.integers(0, 255))
        elif op == "flip":
            frame[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del frame[i:]
        elif op == "cut":  # bytes removed from the middle, frame length fixed up
            del frame[i : i + draw(st.integers(1, 8))]
            _fix_lengths(frame)
        elif op == "ext_len":  # ROCKETMQ: a new extFields length, so the area ends anywhere
            if len(frame) >= 29 and frame[4] == SerializeType.ROCKETMQ:
                at = 8 + 17 + struct.unpack_from(">i", frame, 8 + 13)[0]
                if 8 + 17 <= at <= len(frame) - 4:
                    old = struct.unpack_from(">i", frame, at)[0]
                    struct.pack_into(">i", frame, at, draw(st.integers(-2, max(old, 0) + 2)))
        elif len(frame) >= 8:  # cut_header: the header's last bytes go, both lengths fixed up
            header_end = 8 + (struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF)
            n = draw(st.integers(1, 8))
            if header_end <= len(frame) and n <= header_end - 8:
                del frame[header_end - n : header_end]
                _fix_lengths(frame, header_cut=n)
    return bytes(frame)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_frames())
def test_mutated_frames_decode_alike_or_both_raise_codec_errors(frame):
    fast = outcome(decode_frame, frame)
    assert fast == outcome(schema_decode_frame, frame)
    try:
        FrameDecoder(max_frame_length=1 << 16).feed(frame)
    except CodecError:
        pass


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=12), st.text(max_size=24), max_size=8))
def test_fast_json_map_writer_matches_reference_escaper(d):
    # The C-encoder path with fix-ups must equal the plain table-driven fastjson escaper.
    reference = "{" + ",".join(f"{fastjson_quote(k)}:{fastjson_quote(v)}" for k, v in d.items()) + "}"
    assert _json_object(d) == reference


@settings(max_examples=300, deadline=None)
@given(commands(rocketmq=False), st.none() | st.sampled_from(LanguageCode))
def test_cached_json_header_of_plain_commands_is_the_full_writer(cmd, language):
    """Commands without a remark take a cached header (around the opaque; with extFields, around
    them too: every send request); it must be the general writer's bytes."""
    plain = dataclasses.replace(cmd, ext_fields=None, remark=None, language=language)
    assert encode_json_header(plain) == _json_header_text(plain)
    assert encode_json_header(cmd) == _json_header_text(cmd)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(text, json_values, max_size=6), st.sampled_from(["", " ", "\n\t ", "\r"]),
       st.sampled_from(["", " ", "\n"]), st.booleans())
def test_json_header_parse_is_the_standard_parse(obj, before, after, spaced):
    """The scanner-only read of a header gives what json.loads gives, whatever the whitespace."""
    sep = (", ", ": ") if spaced else (",", ":")
    raw = before + json.dumps(obj, separators=sep, ensure_ascii=False) + after
    assert _json_header_object(raw) == json.loads(raw)
