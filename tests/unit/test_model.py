"""Value types: MessageQueue ordering like Java's compareTo, hashing, enum ordinals."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec.java import java_string_sort_key
from rmqwire.model import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    PermName,
    java_string_compare,
)


def test_message_queue_orders_by_topic_broker_queue():
    qs = [
        MessageQueue("T2", "a", 0),
        MessageQueue("T1", "b", 0),
        MessageQueue("T1", "a", 10),
        MessageQueue("T1", "a", 2),
    ]
    assert sorted(qs) == [
        MessageQueue("T1", "a", 2),
        MessageQueue("T1", "a", 10),
        MessageQueue("T1", "b", 0),
        MessageQueue("T2", "a", 0),
    ]
    assert MessageQueue("T", "a", 1) <= MessageQueue("T", "a", 1)
    assert MessageQueue("T", "b", 0) > MessageQueue("T", "a", 9)


def test_message_queue_is_frozen_and_hashable():
    mq = MessageQueue("T", "a", 1)
    assert {mq: 1}[MessageQueue("T", "a", 1)] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        mq.queue_id = 2  # type: ignore[misc]
    assert str(mq) == "MessageQueue [topic=T, brokerName=a, queueId=1]"


def test_java_string_order_is_utf16_code_unit_order():
    # U+FF21 (BMP, above the surrogates) sorts after U+1F600 in Java (its high surrogate is D83D).
    assert "\U0001F600" > "\uFF21"  # Python: code point order
    assert java_string_compare("\U0001F600", "\uFF21") < 0
    assert MessageQueue("\U0001F600", "a", 0) < MessageQueue("\uFF21", "a", 0)


@settings(deadline=None, max_examples=200)
@given(st.text(max_size=5), st.text(max_size=5))
def test_java_string_compare_is_antisymmetric_and_matches_the_codec_sort_key(a, b):
    # model keeps its own copy (it sits below codec and cannot import it); the two must agree.
    c = java_string_compare(a, b)
    assert c == -java_string_compare(b, a)
    ka, kb = java_string_sort_key(a), java_string_sort_key(b)
    assert (c < 0) == (ka < kb) and (c == 0) == (a == b)


def test_enum_values_are_java_ordinals():
    assert ConsumeType.CONSUME_PASSIVELY.value == 1
    assert MessageModel.CLUSTERING.value == 1
    assert ConsumeFromWhere.CONSUME_FROM_TIMESTAMP.value == 5
    assert PermName.PERM_READ | PermName.PERM_WRITE == 6
