"""What a push consumer's listener returns and may look at (Java ``consumer.listener``).

One ``ConsumeResult`` serves both listener kinds:

- concurrent listeners return ``SUCCESS`` (Java ``CONSUME_SUCCESS``) or ``RECONSUME_LATER``;
- orderly listeners return ``SUCCESS``, ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (retry the same
  messages after ``suspend_current_queue_time_millis``, locally), or with ``auto_commit=False``
  on the context ``COMMIT`` / ``ROLLBACK``.

A listener takes ``(msgs)`` or ``(msgs, context)``; the context of a concurrent listener carries
``ack_index`` (with SUCCESS, messages after it are retried) and ``delay_level_when_next_consume``
(0: the broker picks 3 + reconsume times; -1: straight to the DLQ); an orderly one carries
``auto_commit`` and ``suspend_current_queue_time_millis``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
from collections.abc import Callable
from typing import Any

from rmqwire.model import MessageQueue

__all__ = [
    "CMResult",
    "ConsumeConcurrentlyContext",
    "ConsumeOrderlyContext",
    "ConsumeResult",
    "ConsumeReturnType",
    "listener_takes_context",
]


class ConsumeResult(enum.Enum):
    SUCCESS = "SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    # Java's concurrent name for SUCCESS
    CONSUME_SUCCESS = "SUCCESS"

    @classmethod
    def of(cls, value: Any) -> ConsumeResult | None:
        """A listener's return value as a result (None stays None: Java's "return null")."""
        if value is None or isinstance(value, ConsumeResult):
            return value
        if isinstance(value, str):
            return cls(value if value != "CONSUME_SUCCESS" else "SUCCESS")
        if isinstance(value, bool):  # a convenience: True = success, False = retry
            return cls.SUCCESS if value else None
        raise TypeError(f"a listener must return a ConsumeResult, not {value!r}")


class ConsumeReturnType(enum.Enum):
    """Java ``ConsumeReturnType`` (consume hooks, stats)."""

    SUCCESS = "SUCCESS"
    TIME_OUT = "TIME_OUT"
    EXCEPTION = "EXCEPTION"
    RETURNNULL = "RETURNNULL"
    FAILED = "FAILED"


class CMResult(enum.Enum):
    """Java ``CMResult``: the outcome a CONSUME_MESSAGE_DIRECTLY reply reports."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclasses.dataclass(slots=True)
class ConsumeConcurrentlyContext:
    message_queue: MessageQueue
    #: 0: the broker decides (3 + reconsume times); -1: to the DLQ; > 0: that delay level
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclasses.dataclass(slots=True)
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    #: -1: the consumer's suspend_current_queue_time_millis
    suspend_current_queue_time_millis: int = -1


def listener_takes_context(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` accepts a second positional argument (the context)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = [p for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return True
    return len(positional) >= 2
