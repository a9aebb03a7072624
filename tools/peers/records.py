"""What the interop peers report: one JSON object per line, parsed into typed records.

Every peer CLI (Java, ali-ons, C++) prints the same shape, so tests can compare peers field by
field. Lines carrying an ``"event"`` key are lifecycle milestones (started, done, timeout, error);
all other lines are message records. Fields a peer cannot know (the C++ client reports no broker
name, ali-ons no unique client id) come back as None.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

# Property names the Java client reserves for itself (MessageConst.STRING_HASH_SET in 5.3.3):
# whatever else a received message carries was put there by the producing application.
RESERVED_PROPERTY_NAMES: frozenset[str] = frozenset(
    {
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
    }
)


class PeerOutputError(ValueError):
    """A peer printed a line that is not a record we understand."""


@dataclass(frozen=True, slots=True)
class MessageQueueRef:
    topic: str
    broker_name: str | None
    queue_id: int

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> MessageQueueRef | None:
        if obj is None:
            return None
        return cls(topic=obj["topic"], broker_name=obj.get("brokerName"), queue_id=int(obj["queueId"]))


def _user_properties(props: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k not in RESERVED_PROPERTY_NAMES}


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


@dataclass(frozen=True, slots=True)
class SentRecord:
    """One message as the producing peer saw it after the send call returned."""

    index: int
    msg_id: str | None
    offset_msg_id: str | None
    queue: MessageQueueRef | None
    queue_offset: int | None
    status: str
    topic: str
    body_sha256: str
    body_size: int
    tags: str | None
    keys: str | None
    properties: dict[str, str] = field(default_factory=dict)
    transaction_id: str | None = None

    @property
    def user_properties(self) -> dict[str, str]:
        return _user_properties(self.properties)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SentRecord:
        try:
            return cls(
                index=int(obj["index"]),
                msg_id=obj.get("msgId"),
                offset_msg_id=obj.get("offsetMsgId"),
                queue=MessageQueueRef.from_json(obj.get("queue")),
                queue_offset=_opt_int(obj.get("queueOffset")),
                status=str(obj["status"]),
                topic=obj["topic"],
                body_sha256=obj["bodySha256"],
                body_size=int(obj["bodySize"]),
                tags=obj.get("tags") or None,
                keys=obj.get("keys") or None,
                properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
                transaction_id=obj.get("transactionId"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PeerOutputError(f"bad sent record {obj!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class ReceivedRecord:
    """One delivery as the consuming peer's listener saw it (redeliveries appear again)."""

    msg_id: str | None
    offset_msg_id: str | None
    topic: str
    queue: MessageQueueRef | None
    queue_offset: int | None
    body_sha256: str
    body: bytes
    tags: str | None
    keys: str | None
    properties: dict[str, str]
    reconsume_times: int
    born_host: str | None = None
    store_host: str | None = None
    commit_log_offset: int | None = None
    born_timestamp: int | None = None
    store_timestamp: int | None = None
    sys_flag: int | None = None
    store_size: int | None = None

    @property
    def user_properties(self) -> dict[str, str]:
        return _user_properties(self.properties)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ReceivedRecord:
        try:
            enc = obj.get("bodyEncoding", "utf8")
            raw = obj.get("body") or ""
            body = base64.b64decode(raw) if enc == "base64" else raw.encode("utf-8")
            return cls(
                msg_id=obj.get("msgId"),
                offset_msg_id=obj.get("offsetMsgId"),
                topic=obj["topic"],
                queue=MessageQueueRef.from_json(obj.get("queue")),
                queue_offset=_opt_int(obj.get("queueOffset")),
                body_sha256=obj["bodySha256"],
                body=body,
                tags=obj.get("tags") or None,
                keys=obj.get("keys") or None,
                properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
                reconsume_times=int(obj.get("reconsumeTimes") or 0),
                born_host=obj.get("bornHost"),
                store_host=obj.get("storeHost"),
                commit_log_offset=_opt_int(obj.get("commitLogOffset")),
                born_timestamp=_opt_int(obj.get("bornTimestamp")),
                store_timestamp=_opt_int(obj.get("storeTimestamp")),
                sys_flag=_opt_int(obj.get("sysFlag")),
                store_size=_opt_int(obj.get("storeSize")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PeerOutputError(f"bad received record {obj!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class PeerEvent:
    """A lifecycle line such as {"event": "started", "startMs": 331}."""

    name: str
    data: dict[str, Any]


def parse_line(line: str) -> dict[str, Any] | None:
    """Decode one stdout line; blank lines give None, anything else must be a JSON object."""
    line = line.strip()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise PeerOutputError(f"peer printed a non-JSON line: {line[:200]!r}") from e
    if not isinstance(obj, dict):
        raise PeerOutputError(f"peer printed a non-object line: {line[:200]!r}")
    return obj
