"""The public message and result types of the client API.

``Message`` is the codec's ``Message`` (topic, body, flag, the whole properties map, as Java's)
with the constructor users call: ``Message("TopicTest", b"hello", tags="TagA", keys=["k1"],
properties={"a": "1"})``. User properties follow Java's ``putUserProperty`` rules: a name the
client reserves for itself (``RESERVED_PROPERTY_NAMES``) is refused.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping

from rmqwire.codec import message as _codec
from rmqwire.codec.message import PropertyKey
from rmqwire.errors import MQClientError
from rmqwire.model import MessageQueue

#: Java ``MessageConst.STRING_HASH_SET`` (5.3.3): names a user property may not take.
RESERVED_PROPERTY_NAMES: frozenset[str] = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "RECONSUME_TIME", "UNIQ_KEY",
    "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID",
    "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
    "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP",
    "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
})

_TAGS = PropertyKey.TAGS
_KEYS = PropertyKey.KEYS
_DELAY = PropertyKey.DELAY_TIME_LEVEL
_WAIT = PropertyKey.WAIT_STORE_MSG_OK

#: Java ``MixAll.REPLY_MESSAGE_FLAG``: MSG_TYPE of reply messages.
REPLY_MESSAGE_FLAG = "reply"
#: Java ``MixAll.REPLY_TOPIC_POSTFIX``: reply messages go to ``<cluster>_REPLY_TOPIC``.
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"


def check_user_property(name: str, value: str) -> None:
    """Java ``Message.putUserProperty``: no reserved name, no blank name or value."""
    if name in RESERVED_PROPERTY_NAMES:
        raise MQClientError(f"The Property<{name}> is used by system, input another please")
    if not isinstance(name, str) or not isinstance(value, str) or not name.strip() or not value.strip():
        raise MQClientError("The name or value of property can not be null or blank string!")


class Message(_codec.Message):
    """A message to send (Java ``Message``).

    ``keys`` is a string (space-separated keys) or an iterable of keys; ``properties`` are user
    properties; ``delay_level`` is a delay level 1..18 (0: none); ``deliver_time_ms`` is the 5.x
    absolute delivery time (TIMER_DELIVER_MS); ``delay_time_sec`` the 5.x relative delay. The
    ``properties`` attribute holds the whole map, system keys (TAGS, KEYS, WAIT, ...) included.
    """

    __slots__ = ()

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview | str = b"",
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        deliver_time_ms: int | None = None,
        *,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
        delay_time_sec: int | None = None,
    ) -> None:
        if type(body) is not bytes:
            if isinstance(body, str):
                body = body.encode("utf-8")
            elif isinstance(body, (bytearray, memoryview)):
                body = bytes(body)
        # the fields set directly (not through the dataclass __init__ and the property setters):
        # every send builds a Message, a batch one per message
        props: dict[str, str] = {}
        if tags:
            props[_TAGS] = tags
        if keys:
            props[_KEYS] = keys if isinstance(keys, str) else PropertyKey.KEY_SEPARATOR.join(keys)
        if delay_level:
            props[_DELAY] = str(int(delay_level))
        props[_WAIT] = "true" if wait_store_msg_ok else "false"
        if properties:
            for name, value in properties.items():
                check_user_property(name, value)
                props[name] = value
        if deliver_time_ms is not None:
            props[PropertyKey.TIMER_DELIVER_MS] = str(int(deliver_time_ms))
        if delay_time_sec is not None:
            props[PropertyKey.TIMER_DELAY_SEC] = str(int(delay_time_sec))
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = props

    @classmethod
    def of(cls, msg: _codec.Message) -> Message:
        """A public Message sharing nothing with ``msg`` (any codec message, e.g. a MessageExt)."""
        out = cls(msg.topic, msg.body, flag=msg.flag)
        out.properties.clear()
        out.properties.update(msg.properties)
        return out

    @property
    def user_properties(self) -> dict[str, str]:
        """The properties the application set (reserved names left out)."""
        return {k: v for k, v in self.properties.items() if k not in RESERVED_PROPERTY_NAMES}

    def put_user_property(self, name: str, value: str) -> None:
        check_user_property(name, value)
        self.properties[name] = value

    @property
    def delay_level(self) -> int:
        return self.delay_time_level

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self.delay_time_level = level

    @property
    def deliver_time_ms(self) -> int | None:
        v = self.properties.get(PropertyKey.TIMER_DELIVER_MS)
        return int(v) if v is not None else None

    @deliver_time_ms.setter
    def deliver_time_ms(self, ms: int | None) -> None:
        if ms is None:
            self.properties.pop(PropertyKey.TIMER_DELIVER_MS, None)
        else:
            self.properties[PropertyKey.TIMER_DELIVER_MS] = str(int(ms))

    def copy(self) -> Message:
        return Message.of(self)


class SendStatus(enum.Enum):
    """Java ``SendStatus``: a send that reached the broker; anything else is an exception."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class LocalTransactionState(enum.Enum):
    """Java ``LocalTransactionState`` (``UNKNOW`` is Java's spelling; ``UNKNOWN`` is an alias)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"


@dataclasses.dataclass(frozen=True, slots=True)
class SendResult:
    """Java ``SendResult``.

    ``msg_id`` is the client's UNIQ_KEY (for a batch: every message's, comma-joined);
    ``offset_msg_id`` the broker's offset id (batch: comma-joined); ``queue_offset`` the offset of
    the (first) message in its queue.
    """

    status: SendStatus
    msg_id: str | None
    offset_msg_id: str | None
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    recall_handle: str | None = None

    @property
    def send_status(self) -> SendStatus:  # Java's getter name
        return self.status


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[object, ...]:
    return tuple(getattr(cls, name).__set__ for name in names)


_SR_SETTERS = _slot_setters(SendResult, tuple(f.name for f in dataclasses.fields(SendResult)))


def new_send_result(status: SendStatus, msg_id: str | None, offset_msg_id: str | None,
                    message_queue: MessageQueue, queue_offset: int, transaction_id: str | None,
                    region_id: str, trace_on: bool, recall_handle: str | None) -> SendResult:
    """``SendResult(...)`` with every field given, its slots set directly: the frozen dataclass's
    ``__init__`` sets each through ``object.__setattr__`` (half the cost of a send's result)."""
    r = object.__new__(SendResult)
    s0, s1, s2, s3, s4, s5, s6, s7, s8 = _SR_SETTERS
    s0(r, status)  # type: ignore[operator]
    s1(r, msg_id)  # type: ignore[operator]
    s2(r, offset_msg_id)  # type: ignore[operator]
    s3(r, message_queue)  # type: ignore[operator]
    s4(r, queue_offset)  # type: ignore[operator]
    s5(r, transaction_id)  # type: ignore[operator]
    s6(r, region_id)  # type: ignore[operator]
    s7(r, trace_on)  # type: ignore[operator]
    s8(r, recall_handle)  # type: ignore[operator]
    return r


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """Java ``TransactionSendResult``: the half message's send result and the local outcome."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW
