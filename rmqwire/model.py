"""Value types shared by every layer (stdlib only).

Names follow the Java classes (``org.apache.rocketmq.common.message.MessageQueue``,
``...remoting.protocol.heartbeat.ConsumeType`` ...) so the Java source stays easy to cross-read.
The enums' values are the Java ordinals: fastjson writes enums by name and reads a name or an
ordinal (shared/spec/wire-format.md section 9.1).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import total_ordering

__all__ = [
    "ConsumeFromWhere",
    "ConsumeType",
    "ExpressionType",
    "MessageModel",
    "MessageQueue",
    "PermName",
    "TopicFilterType",
    "java_string_compare",
]


def java_string_compare(a: str, b: str) -> int:
    """``String.compareTo``: Java compares UTF-16 code units, Python compares code points.

    The two orders differ only when a supplementary character (> U+FFFF) meets a BMP character
    >= U+E000, so the UTF-16 encoding is only computed for non-ASCII strings. Same order as
    ``rmqwire.codec.java.java_string_sort_key``, which this module, below codec, cannot import.
    """
    if a == b:
        return 0
    if not (a.isascii() and b.isascii()):
        ea, eb = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
        return -1 if ea < eb else 1
    return -1 if a < b else 1


@total_ordering
@dataclass(frozen=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker group; ordered like Java's ``compareTo``.

    Order is topic, then broker name, then queue id (all ascending), as in
    ``MessageQueue.compareTo``; the client sorts queues with it before allocating them.
    """

    topic: str
    broker_name: str
    queue_id: int

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageQueue):
            return NotImplemented
        c = java_string_compare(self.topic, other.topic)
        if c == 0:
            c = java_string_compare(self.broker_name, other.broker_name)
        if c == 0:
            return self.queue_id < other.queue_id
        return c < 0

    def __str__(self) -> str:
        # Same text as Java's toString, which shows up in logs and admin tool output.
        return (
            f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
            f"queueId={self.queue_id}]"
        )


class ConsumeType(enum.Enum):
    """``heartbeat.ConsumeType``: pull (ACTIVELY), push (PASSIVELY), pop (5.x)."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2


class MessageModel(enum.Enum):
    """``heartbeat.MessageModel``."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.Enum):
    """``common.consumer.ConsumeFromWhere``; values are the Java ordinals."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5
    # Short aliases for the public consumer API (``ConsumeFromWhere.FIRST_OFFSET``); the wire
    # keeps the Java names above.
    LAST_OFFSET = 0
    FIRST_OFFSET = 4
    TIMESTAMP = 5


class TopicFilterType(enum.Enum):
    """``common.TopicFilterType``."""

    SINGLE_TAG = 0
    MULTI_TAG = 1


class ExpressionType:
    """``filter.ExpressionType``: plain string constants in Java, kept as strings on the wire."""

    TAG = "TAG"
    SQL92 = "SQL92"


class PermName(enum.IntFlag):
    """``constant.PermName`` bits of a topic's / broker's ``perm``."""

    PERM_INHERIT = 0x1
    PERM_WRITE = 0x2
    PERM_READ = 0x4
    PERM_PRIORITY = 0x8
