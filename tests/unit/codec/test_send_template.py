"""A topic's cached V2 send frame (``SendRequestTemplate``) is byte for byte the frame of the
typed request (``SendMessageV2.request`` + ``encode_frame``) for any header, per-send values,
properties, body and opaque, and its ``command()`` is that typed request."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqwire.codec import CodecError, LanguageCode, encode_frame
from rmqwire.codec.codes import FLAG_ONEWAY
from rmqwire.codec.commands.send import (
    SendBatchMessage,
    SendMessageRequestHeaderV2,
    SendMessageV2,
    SendReplyMessageV2,
    SendRequestTemplate,
)
from rmqwire.codec.message import encode_properties

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
# what fastjson escapes differently from the C encoder (controls, DEL, U+2028/9), '%' (the
# template's own escape), quotes, backslashes and the properties' own separators
tricky = st.text(alphabet=st.sampled_from('ab%"\\\x00\x01\x02\x1b\x1f\x7f\u2028\u2029é中 '), max_size=12)
names = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=16) | tricky
prop_keys = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x01\x02"),
                    min_size=1, max_size=10)
prop_values = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x02"),
                      max_size=20)


@st.composite
def headers(draw):
    return SendMessageRequestHeaderV2(
        a=draw(names), b=draw(names), c=draw(names), d=draw(int32), e=0, f=0, g=0, h=0, i="",
        j=draw(st.none() | int32), k=draw(st.none() | st.booleans()), l=draw(st.none() | int32),
        m=draw(st.none() | st.booleans()), n=draw(st.none() | names),
        # extFields the header does not declare (an open field among them is refused, below)
        extra=draw(st.dictionaries((st.sampled_from(["%s", "bname", "a", "n"]) | names).filter(
            lambda k: k not in ("e", "f", "g", "h", "i")), names, max_size=3)),
    )


@given(header=headers(), command=st.sampled_from([SendMessageV2, SendBatchMessage, SendReplyMessageV2]),
       language=st.sampled_from(LanguageCode), version=int32, oneway=st.booleans(),
       sends=st.lists(st.tuples(int32, int32, int64, int32,
                                st.dictionaries(prop_keys, prop_values, max_size=4),
                                st.none() | st.binary(max_size=64), int32), min_size=1, max_size=3))
def test_template_frames_equal_the_typed_request_frames(header, command, language, version, oneway, sends):
    template = SendRequestTemplate(command, header, language=language, version=version, oneway=oneway)
    for queue_id, sys_flag, born, flag, props, body, opaque in sends:
        properties = encode_properties(props)
        typed = command.request(
            dataclasses.replace(header, e=queue_id, f=sys_flag, g=born, h=flag, i=properties), body,
            language=language, version=version)
        if oneway:
            typed = dataclasses.replace(typed, flag=typed.flag | FLAG_ONEWAY)
        prepared = template.request(queue_id, sys_flag, born, flag, properties, body)
        assert prepared.code == command.code
        assert prepared.frame(opaque) == encode_frame(typed.with_opaque(opaque))
        assert prepared.command() == typed


def test_values_the_typed_header_refuses_are_refused() -> None:
    header = SendMessageRequestHeaderV2(a="g", b="T", c="TBW102", d=4, e=0, f=0, g=0, h=0, i="")
    template = SendRequestTemplate(SendMessageV2, header)
    for bad in [(2**31, 0, 0, 0), (0, True, 0, 0), (0, 0, 2**63, 0), (0, 0, 0, -(2**31) - 1), (0, 0, 0, "1")]:
        with pytest.raises(ValueError):
            template.request(*bad, "", b"x")


def test_extra_keys_before_the_open_fields_are_refused() -> None:
    header = SendMessageRequestHeaderV2(a="g", b="T", c="TBW102", d=4, e=0, f=0, g=0, h=0, i="",
                                        extra={"i": "x"})
    with pytest.raises(CodecError):
        SendRequestTemplate(SendMessageV2, header)
