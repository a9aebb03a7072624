"""Constants and small rules of the broker's transactional messages (Java
``TransactionalMessageUtil``): the op-message tag and body format, the check group, and the two
readings of CHECK_IMMUNITY_TIME_IN_SECONDS."""

from __future__ import annotations

__all__ = [
    "CHECK_GROUP",
    "OFFSET_SEPARATOR",
    "REMOVE_TAG",
    "TCMT_QUEUE_NUMS",
    "check_immunity_time",
    "end_immunity_time",
    "op_body",
    "parse_op_body",
]

#: Tag of every op message: "these half offsets are resolved".
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","
#: MixAll.CID_SYS_RMQ_TRANS: the group whose offsets track the half and op queues.
CHECK_GROUP = "CID_RMQ_SYS_TRANS"
#: Queues of TRANS_CHECK_MAX_TIME_TOPIC.
TCMT_QUEUE_NUMS = 1


def _java_long(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def end_immunity_time(value: str | None, transaction_timeout: int) -> int:
    """``TransactionalMessageUtil.getImmunityTime`` (END_TRANSACTION's rule): the property in
    seconds as ms, never less than ``transactionTimeOut``."""
    seconds = _java_long(value)
    immunity = seconds * 1000 if seconds is not None else 0
    return max(immunity, transaction_timeout)


def check_immunity_time(value: str | None, transaction_timeout: int) -> int:
    """The check service's reading (``TransactionalMessageServiceImpl.getImmunityTime``): -1 or
    unparsable means ``transactionTimeOut``, anything else is seconds (even below the timeout)."""
    seconds = _java_long(value)
    if seconds is None or seconds == -1:
        return transaction_timeout
    return seconds * 1000


def op_body(half_offsets: list[int]) -> str:
    """Half-queue offsets in decimal, each followed by a comma."""
    return "".join(f"{o}{OFFSET_SEPARATOR}" for o in half_offsets)


def parse_op_body(body: str) -> list[int]:
    """The offsets of an op body; an unparsable entry reads as -1 (Java ``getLong``), which is
    below every half offset and so ignored."""
    out = []
    for part in body.split(OFFSET_SEPARATOR):
        if not part:
            continue  # Java's split drops the trailing empty string
        v = _java_long(part)
        out.append(v if v is not None else -1)
    return out
