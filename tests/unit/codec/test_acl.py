"""ACL signing (wire-format.md section 11)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec.acl import (
    calculate_signature,
    sign_command,
    signature_content,
    verifier_strips_unique_key_query,
    verify_command,
)
from rmqwire.codec.codes import RequestCode
from rmqwire.codec.frame import RemotingCommand, decode_frame, encode_frame
from rmqwire.codec.java import java_string_sort_key
from rmqwire.errors import CodecError

SPEC_EXT = {"AccessKey": "rocketmq2", "bname": "broker-a", "queueId": "0", "topic": "TopicTest"}


def test_spec_signature_with_body():
    content = signature_content(SPEC_EXT, b"hello")
    assert content == b"rocketmq2broker-a0TopicTesthello"
    assert calculate_signature(content, "12345678") == "RbMRm2c7h6bOVqKXK9dR1ROy/0U="


def test_spec_signature_without_body():
    content = signature_content(SPEC_EXT, None)
    assert calculate_signature(content, "12345678") == "WPAIt+EQ5xQ3p46AKvXuRIo75JA="
    assert signature_content(SPEC_EXT, b"") == b"rocketmq2broker-a0TopicTest"


def test_sign_command_adds_fields_and_verifies():
    cmd = RemotingCommand.request(
        RequestCode.PULL_MESSAGE, {"topic": "TopicTest", "queueId": "0", "bname": "broker-a"}, b"hello"
    )
    signed = sign_command(cmd, "rocketmq2", "12345678")
    assert signed.ext_fields["Signature"] == "RbMRm2c7h6bOVqKXK9dR1ROy/0U="
    assert signed.ext_fields["AccessKey"] == "rocketmq2"
    assert "SecurityToken" not in signed.ext_fields
    assert cmd.ext_fields == {"topic": "TopicTest", "queueId": "0", "bname": "broker-a"}  # untouched
    assert verify_command(signed, "12345678", strip_unique_key_query=False)
    assert not verify_command(signed, "wrong", strip_unique_key_query=False)
    # survives the wire
    assert verify_command(decode_frame(encode_frame(signed)), "12345678", strip_unique_key_query=False)


def test_security_token_is_signed():
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {"a": "1"})
    signed = sign_command(cmd, "ak", "sk", "tok")
    assert signed.ext_fields["SecurityToken"] == "tok"
    # sorted keys: AccessKey < SecurityToken < a (uppercase sorts first)
    expected = base64.b64encode(hmac.new(b"sk", b"aktok1", hashlib.sha1).digest()).decode()
    assert signed.ext_fields["Signature"] == expected


def test_tampering_breaks_verification():
    signed = sign_command(RemotingCommand.request(10, {"topic": "T"}, b"body"), "ak", "sk")
    for changed in (
        RemotingCommand(**{**_fields(signed), "body": b"bodx"}),
        RemotingCommand(**{**_fields(signed), "ext_fields": {**signed.ext_fields, "topic": "U"}}),
        RemotingCommand(**{**_fields(signed), "ext_fields": {**signed.ext_fields, "extra": "x"}}),
    ):
        assert not verify_command(changed, "sk", strip_unique_key_query=False)
    unsigned = RemotingCommand.request(10, {"topic": "T"})
    assert not verify_command(unsigned, "sk", strip_unique_key_query=False)
    no_ak = {k: v for k, v in signed.ext_fields.items() if k != "AccessKey"}
    assert not verify_command(RemotingCommand(**{**_fields(signed), "ext_fields": no_ak}), "sk",
                              strip_unique_key_query=False)


def _fields(cmd):
    return {f: getattr(cmd, f) for f in cmd.__dataclass_fields__}


def test_unique_key_query_handling():
    cmd = RemotingCommand.request(RequestCode.QUERY_MESSAGE, {"topic": "T", "_UNIQUE_KEY_QUERY": "true"})
    current = sign_command(cmd, "ak", "sk")
    assert verify_command(current, "sk", strip_unique_key_query=False)
    assert not verify_command(current, "sk", strip_unique_key_query=True)  # the 4.x broker bug
    for_4x = sign_command(cmd, "ak", "sk", drop_unique_key_query=True)
    assert for_4x.ext_fields["_UNIQUE_KEY_QUERY"] == "true"  # still sent
    assert verify_command(for_4x, "sk", strip_unique_key_query=True)
    assert verifier_strips_unique_key_query(399) and not verifier_strips_unique_key_query(400)
    assert verifier_strips_unique_key_query(479, broker_4x=True)


def test_java_string_compare_order():
    # U+FF61 sorts after U+1F600's high surrogate (0xD83D) in UTF-16, before it in code points.
    ext = {"\uff61": "b", "\U0001f600": "a", "Z": "0", "a": "1"}
    assert signature_content(ext, None) == "01ab".encode()


def test_other_algorithms_and_bad_input():
    c = b"content"
    assert calculate_signature(c, "k", "HmacSHA256") == base64.b64encode(
        hmac.new(b"k", c, hashlib.sha256).digest()).decode()
    md5 = base64.b64encode(hmac.new(b"k", c, hashlib.md5).digest()).decode()
    assert calculate_signature(c, "k", "HmacMD5") == md5
    with pytest.raises(CodecError):
        calculate_signature(c, "k", "HmacSHA3")
    with pytest.raises(CodecError):
        signature_content({"a": "\udc80"}, None)
    for bad_secret in ("\udc80", None):
        with pytest.raises(CodecError):
            calculate_signature(c, bad_secret)


_text = st.characters(blacklist_categories=("Cs",))


@settings(max_examples=200)
@given(
    st.dictionaries(st.text(_text, min_size=1, max_size=10).filter(lambda k: k != "Signature"),
                    st.text(_text, max_size=10), max_size=6),
    st.binary(max_size=40),
    st.text(_text, min_size=1, max_size=16),
)
def test_sign_then_verify(ext, body, secret):
    cmd = RemotingCommand.request(10, ext, body or None)
    signed = sign_command(cmd, "ak", secret)
    assert verify_command(signed, secret, strip_unique_key_query=False)
    # content excludes only Signature: keys sorted by UTF-16 code units
    ext = signed.ext_fields
    keys = sorted((k for k in ext if k != "Signature"), key=java_string_sort_key)
    assert signature_content(ext, body) == "".join(ext[k] for k in keys).encode() + body
