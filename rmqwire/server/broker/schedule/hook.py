"""The put hook that parks delayed and timer messages (Java ``HookUtils.handleScheduleMessage``).

Every single-message put of the store runs it (a send, a send-back, a committed transaction):

- a message with ``DELAY`` > 0 goes to ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` (the level
  clamped to the highest configured one), its topic and queue kept in ``REAL_TOPIC`` /
  ``REAL_QID``; the store writes the due time as the consume-queue tags code;
- a message with ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS`` (and no delay
  level) goes to ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` = the due time rounded
  down to ``timerPrecisionMs``; refused with WHEEL_TIMER_NOT_ENABLE when ``timerWheelEnable`` is
  false and WHEEL_TIMER_MSG_ILLEGAL when the time does not parse or is too far ahead.

Transactional half messages (prepared / rollback sysFlag) pass untouched, as in Java.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqwire.codec.java import now_ms
from rmqwire.codec.message import MessageExt, PropertyKey
from rmqwire.server.broker.processors.send import hashmap_ordered
from rmqwire.server.broker.topic_config import SCHEDULE_TOPIC, TIMER_TOPIC
from rmqwire.server.namesrv.config import parse_value
from rmqwire.server.store import PutMessageResult, PutMessageStatus

__all__ = ["ScheduleHook", "delay_level_to_queue_id", "queue_id_to_delay_level"]

_TRAN_MASK = 0xC
_TRAN_COMMIT = 0x8
_TIMER_KEYS = (PropertyKey.TIMER_DELIVER_MS, PropertyKey.TIMER_DELAY_SEC, PropertyKey.TIMER_DELAY_MS)


def _java_long(text: str) -> int:
    """``Long.parseLong``; ValueError where Java throws."""
    return int(parse_value("long", text))


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


class ScheduleHook:
    """Callable put hook; ``max_delay_level`` and the timer settings are read at each put so a
    config change applies at once."""

    def __init__(self, max_delay_level: Callable[[], int], extras: Any,
                 clock: Callable[[], int] = now_ms) -> None:
        self.max_delay_level = max_delay_level
        self.extras = extras  # StoreExtras: timerWheelEnable, timerPrecisionMs, timerMaxDelaySec
        self.clock = clock

    def __call__(self, msg: MessageExt) -> PutMessageResult | None:
        tran = msg.sys_flag & _TRAN_MASK
        if tran != 0 and tran != _TRAN_COMMIT:
            return None
        if msg.topic != TIMER_TOPIC and self._is_timer_message(msg):
            if not self.extras.timer_wheel_enable:
                return PutMessageResult(PutMessageStatus.WHEEL_TIMER_NOT_ENABLE)
            refused = self._to_timer_topic(msg)
            if refused is not None:
                return refused
        if msg.delay_time_level > 0:
            self._to_schedule_topic(msg)
        return None

    @staticmethod
    def _is_timer_message(msg: MessageExt) -> bool:
        props = msg.properties
        if msg.delay_time_level > 0:
            # A delay level wins: the timer properties are dropped (Java checkIfTimerMessage).
            for key in _TIMER_KEYS:
                props.pop(key, None)
            return False
        if PropertyKey.TIMER_OUT_MS in props:
            return False
        return any(key in props for key in _TIMER_KEYS)

    def _to_timer_topic(self, msg: MessageExt) -> PutMessageResult | None:
        props = msg.properties
        now = self.clock()
        try:
            if PropertyKey.TIMER_DELAY_SEC in props:
                deliver_ms = now + _java_long(props[PropertyKey.TIMER_DELAY_SEC]) * 1000
            elif PropertyKey.TIMER_DELAY_MS in props:
                deliver_ms = now + _java_long(props[PropertyKey.TIMER_DELAY_MS])
            else:
                deliver_ms = _java_long(props[PropertyKey.TIMER_DELIVER_MS])
        except ValueError:
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
        if deliver_ms > now:
            if deliver_ms - now > self.extras.timer_max_delay_sec * 1000:
                return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
            precision = max(1, self.extras.timer_precision_ms)
            # Rounded down to a slot; an exact slot boundary belongs to the slot before (Java).
            deliver_ms = deliver_ms - precision if deliver_ms % precision == 0 else deliver_ms // precision * precision
            props[PropertyKey.TIMER_OUT_MS] = str(deliver_ms)
            props[PropertyKey.REAL_TOPIC] = msg.topic
            props[PropertyKey.REAL_QUEUE_ID] = str(msg.queue_id)
            msg.properties = hashmap_ordered(props)
            msg.topic = TIMER_TOPIC
            msg.queue_id = 0
        elif PropertyKey.TIMER_DEL_UNIQKEY in props:
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
        # A time in the past: stored on its own topic, delivered at once.
        return None

    def _to_schedule_topic(self, msg: MessageExt) -> None:
        top = self.max_delay_level()
        if msg.delay_time_level > top:
            msg.delay_time_level = top
        props = msg.properties
        props[PropertyKey.REAL_TOPIC] = msg.topic
        props[PropertyKey.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = hashmap_ordered(props)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = delay_level_to_queue_id(msg.delay_time_level)
