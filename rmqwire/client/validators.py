"""Client-side checks before anything is sent (Java ``Validators`` and ``TopicValidator``).

Each check raises ``MQClientError`` with Java's message text; message checks carry Java's
response code 13 MESSAGE_ILLEGAL, as ``new MQClientException(ResponseCode.MESSAGE_ILLEGAL, ...)``
does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqwire.codec.codes import ResponseCode
from rmqwire.errors import MQClientError

if TYPE_CHECKING:
    from rmqwire.codec.message import Message

CHARACTER_MAX_LENGTH = 255
TOPIC_MAX_LENGTH = 127
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"
_VALID_CHARS = frozenset("%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: TopicValidator.SYSTEM_TOPIC_SET (5.3.3).
SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC",
})
#: TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET: the broker refuses sends to these (code 16).
NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
})
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


def is_topic_or_group_illegal(name: str) -> bool:
    """True when ``name`` has a character outside ``^[%|a-zA-Z0-9_-]+$``."""
    return not _VALID_CHARS.issuperset(name)


def _is_blank(s: str | None) -> bool:
    # Java UtilAll.isBlank: null, empty, or only whitespace
    return s is None or not s.strip()


def check_group(group: str | None) -> None:
    if _is_blank(group):
        raise MQClientError("the specified group is blank")
    assert group is not None
    if len(group) > CHARACTER_MAX_LENGTH:
        raise MQClientError("the specified group is longer than group max length 255.")
    if is_topic_or_group_illegal(group):
        raise MQClientError(
            f"the specified group[{group}] contains illegal characters, allowing only {VALID_PATTERN}"
        )


def check_topic(topic: str | None) -> None:
    if _is_blank(topic):
        raise MQClientError("The specified topic is blank")
    assert topic is not None
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(
            f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
        )
    if is_topic_or_group_illegal(topic):
        raise MQClientError(
            f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_PATTERN}"
        )


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def check_not_allowed_send_topic(topic: str) -> None:
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MQClientError(f"Sending message to topic[{topic}] is forbidden.")


def check_not_system_topic(topic: str) -> None:
    if is_system_topic(topic):
        raise MQClientError(f"The topic[{topic}] is conflict with system topic.")


def _illegal(text: str) -> MQClientError:
    # Java: "CODE: MESSAGE_ILLEGAL  DESC: <text>"
    return MQClientError(
        f"CODE: {ResponseCode.MESSAGE_ILLEGAL.name}  DESC: {text}",
        response_code=int(ResponseCode.MESSAGE_ILLEGAL),
    )


#: Topics that passed ``check_topic`` and ``check_not_allowed_send_topic``, which depend on the
#: name alone: a send to one of them skips the re-check (set operations are atomic; cleared when
#: it holds _SENDABLE_MAX names, so a stream of new topics cannot grow it).
_sendable_topics: set[str] = set()
_SENDABLE_MAX = 4096


def check_message(msg: Message | None, max_message_size: int) -> None:
    """Java ``Validators.checkMessage``: topic, forbidden topics, body present, non-empty, size."""
    if msg is None:
        raise _illegal("the message is null")
    topic = msg.topic
    if type(topic) is not str or topic not in _sendable_topics:
        check_topic(topic)
        check_not_allowed_send_topic(topic)
        if len(_sendable_topics) >= _SENDABLE_MAX:
            _sendable_topics.clear()
        _sendable_topics.add(topic)
    check_message_body(msg, max_message_size)


def check_message_body(msg: Message, max_message_size: int) -> None:
    """The part of ``check_message`` after the topic: body present, non-empty, size, LMQ names.

    A batch checks its one topic once and only this per message.
    """
    body = msg.body
    if body is None:
        raise _illegal("the message body is null")
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise MQClientError(f"the message body must be bytes, not {type(body).__name__}")
    if len(body) == 0:
        raise _illegal("the message body length is zero")
    if len(body) > max_message_size:
        raise _illegal(f"the message body size over max value, MAX: {max_message_size}")
    lmq = msg.properties.get("INNER_MULTI_DISPATCH")
    if lmq and "/" in lmq:
        raise _illegal(f"INNER_MULTI_DISPATCH {lmq} can not contains / character")


def check_producer_group(group: str | None) -> None:
    """``DefaultMQProducerImpl.checkConfig``."""
    check_group(group)
    if group == DEFAULT_PRODUCER_GROUP:
        raise MQClientError(
            f"producerGroup can not equal {DEFAULT_PRODUCER_GROUP}, please specify another one."
        )
