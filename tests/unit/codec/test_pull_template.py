"""A queue's cached pull frame (``PullRequestTemplate``) is byte for byte the frame of the typed
request (``PullMessage.request`` + ``encode_frame``) for any header, offsets and opaque, and its
``command()`` is that typed request."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqwire.codec import CodecError, LanguageCode, RemotingCommand, encode_frame
from rmqwire.codec.commands.pull import (
    PULL_OPEN_FIELDS,
    LitePullMessage,
    PullMessage,
    PullMessageRequestHeader,
    PullRequestTemplate,
)
from rmqwire.codec.frame import json_request_template

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(0, 2**63 - 1)
# what fastjson escapes differently from the C encoder (controls, DEL, U+2028/9), '%' (the
# template's own escape), quotes and backslashes
tricky = st.text(alphabet=st.sampled_from('ab%"\\\x00\x1b\x7f\u2028\u2029é中 '), max_size=12)
names = st.text(max_size=16) | tricky


@st.composite
def headers(draw):
    extra_keys = st.sampled_from(["k", "%s", *PULL_OPEN_FIELDS, "topic", "bname"]) | names
    return PullMessageRequestHeader(
        consumer_group=draw(names), topic=draw(names), queue_id=draw(int32),
        queue_offset=draw(int64), max_msg_nums=draw(int32), sys_flag=draw(st.integers(0, 31)),
        commit_offset=draw(int64), suspend_timeout_millis=draw(int64),
        subscription=draw(st.none() | names), sub_version=draw(int64),
        expression_type=draw(st.none() | st.sampled_from(["TAG", "SQL92"])),
        max_msg_bytes=draw(st.none() | int32), request_source=draw(st.none() | int32),
        bname=draw(st.none() | names), lo=draw(st.none() | st.booleans()),
        extra=draw(st.dictionaries(extra_keys, names, max_size=3)),
    )


@given(header=headers(), command=st.sampled_from([PullMessage, LitePullMessage]),
       language=st.sampled_from(LanguageCode), version=int32,
       pulls=st.lists(st.tuples(int64, st.integers(0, 31), int64, int32), min_size=1, max_size=3))
def test_template_frames_equal_the_typed_request_frames(header, command, language, version, pulls):
    template = PullRequestTemplate(command, header, language=language, version=version)
    for queue_offset, sys_flag, commit_offset, opaque in pulls:
        typed = command.request(
            dataclasses.replace(header, queue_offset=queue_offset, sys_flag=sys_flag,
                                commit_offset=commit_offset),
            language=language, version=version)
        prepared = template.request(queue_offset, sys_flag, commit_offset)
        assert prepared.code == command.code
        assert prepared.frame(opaque) == encode_frame(typed.with_opaque(opaque))
        assert prepared.command() == typed


def test_open_fields_need_ints_and_an_ext_map():
    header = PullMessageRequestHeader(consumer_group="g", topic="t", queue_id=0, queue_offset=0,
                                      max_msg_nums=32, sys_flag=2, commit_offset=0,
                                      suspend_timeout_millis=15000, sub_version=0)
    template = PullRequestTemplate(PullMessage, header)
    with pytest.raises(TypeError):
        template.request(True, 2, 0)  # a bool would print as True, not as Java's number
    with pytest.raises(CodecError):
        json_request_template(RemotingCommand(code=11, ext_fields={"topic": "t"}), PULL_OPEN_FIELDS)
    with pytest.raises(CodecError):
        json_request_template(RemotingCommand(code=11, remark="r", ext_fields={"queueOffset": "1"}),
                              ("queueOffset",))
