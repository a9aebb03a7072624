"""Client-side checks with Java's messages (rmqwire.client.validators, rmqwire.client.message)."""

from __future__ import annotations

import pytest

from rmqwire.client.config import with_namespace, without_namespace
from rmqwire.client.message import Message
from rmqwire.client.validators import (
    check_group,
    check_message,
    check_producer_group,
    check_topic,
)
from rmqwire.errors import MQClientError


@pytest.mark.parametrize("topic,text", [
    ("", "The specified topic is blank"),
    ("  ", "The specified topic is blank"),
    ("a" * 128, "The specified topic is longer than topic max length 127."),
    ("bad topic", "The specified topic[bad topic] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("été", "contains illegal characters"),
])
def test_bad_topics(topic: str, text: str) -> None:
    with pytest.raises(MQClientError, match=None) as e:
        check_topic(topic)
    assert text in str(e.value)


def test_good_topics_and_groups() -> None:
    check_topic("a" * 127)
    check_topic("%RETRY%g|x_-1")
    check_group("g" * 255)
    with pytest.raises(MQClientError, match="longer than group max length 255"):
        check_group("g" * 256)
    with pytest.raises(MQClientError, match="can not equal DEFAULT_PRODUCER"):
        check_producer_group("DEFAULT_PRODUCER")


@pytest.mark.parametrize("msg,text", [
    (Message("T", b""), "the message body length is zero"),
    (Message("T", b"x" * 11), "the message body size over max value, MAX: 10"),
    (Message("SCHEDULE_TOPIC_XXXX", b"x"), "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."),
    (Message("a b", b"x"), "contains illegal characters"),
])
def test_bad_messages(msg: Message, text: str) -> None:
    with pytest.raises(MQClientError) as e:
        check_message(msg, 10)
    assert text in str(e.value)
    if "body" in text:
        assert e.value.response_code == 13  # MESSAGE_ILLEGAL, as Java


def test_message_constructor_sets_java_properties() -> None:
    m = Message("T", "héllo", tags="TagA", keys=["k1", "k2"], properties={"a": "1"}, delay_level=3,
                deliver_time_ms=123)
    assert m.body == "héllo".encode()
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "true", "a": "1",
                            "TIMER_DELIVER_MS": "123"}
    assert m.user_properties == {"a": "1"} and m.key_list == ["k1", "k2"]
    with pytest.raises(MQClientError, match="The Property<UNIQ_KEY> is used by system"):
        Message("T", b"x", properties={"UNIQ_KEY": "x"})
    with pytest.raises(MQClientError, match="can not be null or blank"):
        Message("T", b"x", properties={"a": " "})


def test_namespace_wrapping_as_java() -> None:
    assert with_namespace("ns", "T") == "ns%T"
    assert with_namespace("ns", "ns%T") == "ns%T"
    assert with_namespace("ns", "%RETRY%g") == "%RETRY%ns%g"
    assert with_namespace("ns", "TBW102") == "TBW102"
    assert with_namespace(None, "T") == "T"
    assert without_namespace("ns%T", "ns") == "T"
    assert without_namespace("%RETRY%ns%g", "ns") == "%RETRY%g"
    assert without_namespace("other%T", "ns") == "other%T"


def test_checked_topics_are_remembered_bad_ones_never() -> None:
    # a topic that passed is not re-checked; a bad or forbidden one fails on every send, and the
    # remembered set stays bounded
    from rmqwire.client import validators

    check_message(Message("ok_topic", b"x"), 10)
    assert "ok_topic" in validators._sendable_topics
    for _ in range(2):
        with pytest.raises(MQClientError, match="forbidden"):
            check_message(Message("SCHEDULE_TOPIC_XXXX", b"x"), 10)
        with pytest.raises(MQClientError, match="illegal characters"):
            check_message(Message("a b", b"x"), 10)
    assert not {"SCHEDULE_TOPIC_XXXX", "a b"} & validators._sendable_topics
    with pytest.raises(MQClientError, match="body length is zero"):
        check_message(Message("ok_topic", b""), 10)  # the body is still checked every time
    for i in range(validators._SENDABLE_MAX + 10):
        check_message(Message(f"t{i}", b"x"), 10)
    assert len(validators._sendable_topics) <= validators._SENDABLE_MAX
