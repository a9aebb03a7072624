"""The hand-written frame path is byte-identical to the Construct schemas (the schema of record),
and arbitrary bytes never raise anything but CodecError."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqwire.codec import CodecError, FrameDecoder, LanguageCode, RemotingCommand, SerializeType, encode_frame
from rmqwire.codec.frame import FRAME, ROCKETMQ_HEADER, decode_frame

int32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(max_size=40)
nonempty_text = st.text(min_size=1, max_size=40)


@st.composite
def commands(draw, *, rocketmq: bool):
    # The ROCKETMQ header carries int16 codes/versions and cannot carry empty strings (0 = null).
    code = draw(st.integers(-(2**15), 2**15 - 1) if rocketmq else int32)
    version = draw(st.integers(-(2**15), 2**15 - 1) if rocketmq else int32)
    value_text = nonempty_text if rocketmq else text
    ext = draw(st.none() | st.dictionaries(nonempty_text, value_text, max_size=6))
    if rocketmq and ext == {}:
        ext = None
    return RemotingCommand(
        code=code,
        language=draw(st.sampled_from(LanguageCode)),
        version=version,
        opaque=draw(int32),
        flag=draw(st.integers(0, 3)),
        remark=draw(st.none() | value_text),
        ext_fields=ext,
        body=draw(st.none() | st.binary(min_size=1, max_size=64)),
    )


@settings(max_examples=300, deadline=None)
@given(commands(rocketmq=False))
def test_json_frames_round_trip(cmd):
    frame = encode_frame(cmd)
    assert decode_frame(frame) == cmd
    parsed = FRAME.parse(frame)
    assert parsed.header_word.serialize_type == "JSON"
    assert json.loads(parsed.header)["code"] == cmd.code


@settings(max_examples=300, deadline=None)
@given(commands(rocketmq=True))
def test_rocketmq_frames_match_construct_schema(cmd):
    frame = encode_frame(cmd, SerializeType.ROCKETMQ)
    assert decode_frame(frame) == cmd
    # Build the same frame from the Construct schemas and compare bytes.
    header = ROCKETMQ_HEADER.build(
        dict(
            code=cmd.code,
            language=int(cmd.language),
            version=cmd.version,
            opaque=cmd.opaque,
            flag=cmd.flag,
            remark=cmd.remark or "",
            ext_fields=[dict(key=k, value=v) for k, v in (cmd.ext_fields or {}).items()],
        )
    )
    built = FRAME.build(dict(serialize_type="ROCKETMQ", header=header, body=cmd.body or b""))
    assert built == frame
    # And parse our bytes with the schema.
    parsed = ROCKETMQ_HEADER.parse(FRAME.parse(frame).header)
    assert parsed.code == cmd.code and parsed.opaque == cmd.opaque
    assert {e.key: e.value for e in parsed.ext_fields} == (cmd.ext_fields or {})


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_codec_errors(data):
    dec = FrameDecoder(max_frame_length=4096)
    try:
        dec.feed(data)
    except CodecError:
        pass
    assert dec.buffered <= 4096


@settings(max_examples=500, deadline=None)
@given(commands(rocketmq=True), st.sampled_from(list(SerializeType)), st.data())
def test_mutated_frames_raise_only_codec_errors(cmd, stype, data):
    frame = bytearray(encode_frame(cmd, stype))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    try:
        FrameDecoder(max_frame_length=1 << 16).feed(bytes(frame))
    except CodecError:
        pass


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=12), st.text(max_size=24), max_size=8))
def test_fast_json_map_writer_matches_reference_escaper(d):
    # The C-encoder path with fix-ups must equal the plain table-driven fastjson escaper.
    from rmqwire.codec.frame import _json_object, _json_str

    reference = "{" + ",".join(f"{_json_str(k)}:{_json_str(v)}" for k, v in d.items()) + "}"
    assert _json_object(d) == reference
