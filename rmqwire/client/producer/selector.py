"""Queue choice: round robin that avoids the last broker, and broker latency fault tolerance.

Java ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl``. Without ``send_latency_fault_enable``
a send takes the next queue round-robin, skipping the broker of the previous attempt; with it,
brokers that were slow or failed are avoided for a while: a latency at or above
``latency_max[i]`` makes the broker unavailable for ``not_available_duration[i]`` ms, and a failed
send counts as 10 s of latency. Time comes from an injected clock (epoch ms), so tests drive it.

Also the selectors users pass for ordered sends (Java ``SelectMessageQueueByHash`` / ``ByRandom``):
``fn(queues, message, arg) -> MessageQueue``.
"""

from __future__ import annotations

import dataclasses
import random as _random
from collections.abc import Callable, Sequence
from typing import Any

from rmqwire.client.route import TopicPublishInfo
from rmqwire.codec.java import java_string_hash, now_ms
from rmqwire.model import MessageQueue

#: Java's tables (ms): a latency >= LATENCY_MAX[i] isolates the broker NOT_AVAILABLE_DURATION[i].
LATENCY_MAX: tuple[int, ...] = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION: tuple[int, ...] = (0, 0, 2000, 5000, 6000, 10000, 30000)
#: What a failed send (isolation) counts as.
ISOLATION_LATENCY = 10_000

MessageQueueSelector = Callable[[Sequence[MessageQueue], Any, Any], MessageQueue]


@dataclasses.dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: int = 0
    start_timestamp: int = 0  # available again from this time (ms)
    reachable: bool = True

    def is_available(self, now: int) -> bool:
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """Java ``LatencyFaultToleranceImpl``: per broker name, when it is usable again."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}

    def update_fault_item(
        self, name: str, current_latency: int, not_available_duration: int, reachable: bool
    ) -> None:
        item = self.items.get(name)
        if item is None:
            item = self.items[name] = FaultItem(name)
        item.current_latency = current_latency
        now = self.clock()
        # only ever extends the isolation (Java updateNotAvailableDuration)
        if not_available_duration > 0 and now + not_available_duration > item.start_timestamp:
            item.start_timestamp = now + not_available_duration
        item.reachable = reachable

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self.clock())

    def is_reachable(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.reachable

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self, rng: _random.Random | None = None) -> str | None:
        items = list(self.items.values())
        (rng or _random).shuffle(items)
        return next((i.name for i in items if i.reachable), None)


class MQFaultStrategy:
    """Java ``MQFaultStrategy``: picks the queue of each send attempt."""

    def __init__(
        self,
        *,
        send_latency_fault_enable: bool = False,
        latency_max: Sequence[int] = LATENCY_MAX,
        not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError("latency_max and not_available_duration must have the same length")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.tolerance = LatencyFaultTolerance(clock)

    def select_one_message_queue(
        self, info: TopicPublishInfo, last_broker_name: str | None, reset_index: bool = False
    ) -> MessageQueue | None:
        def other_broker(mq: MessageQueue) -> bool:
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            if reset_index:
                info.reset_index()
            tol = self.tolerance
            mq = info.select_one(lambda q: tol.is_available(q.broker_name), other_broker)
            if mq is not None:
                return mq
            mq = info.select_one(lambda q: tol.is_reachable(q.broker_name), other_broker)
            if mq is not None:
                return mq
            return info.select_one()
        if last_broker_name is None:
            return info.select_one()  # the common first attempt: no filter to apply
        mq = info.select_one(other_broker)
        return mq if mq is not None else info.select_one()

    def update_fault_item(
        self, broker_name: str, current_latency: int, isolation: bool, reachable: bool = True
    ) -> None:
        if self.send_latency_fault_enable:
            duration = self.compute_not_available_duration(
                ISOLATION_LATENCY if isolation else current_latency
            )
            self.tolerance.update_fault_item(broker_name, current_latency, duration, reachable)

    def compute_not_available_duration(self, current_latency: int) -> int:
        for bound, duration in zip(reversed(self.latency_max), reversed(self.not_available_duration)):
            if current_latency >= bound:
                return duration
        return 0


# ---- selectors for ordered sends -------------------------------------------------------------


def select_by_hash(queues: Sequence[MessageQueue], msg: Any, arg: Any) -> MessageQueue:
    """Java ``SelectMessageQueueByHash``: ``abs(arg.hashCode()) % len(queues)``.

    Strings hash as Java's ``String.hashCode``, ints as ``Integer.hashCode`` (the value), so the
    same order key picks the same queue as a Java producer does.
    """
    if isinstance(arg, str):
        h = java_string_hash(arg)
    elif isinstance(arg, int) and not isinstance(arg, bool):
        h = ((arg + 2**31) % 2**32) - 2**31 if -(2**31) <= arg < 2**31 else (arg ^ (arg >> 32))
        h = ((h + 2**31) % 2**32) - 2**31
    else:
        h = hash(arg)
    return queues[abs(h) % len(queues)]


def select_by_random(
    queues: Sequence[MessageQueue], msg: Any, arg: Any, rng: _random.Random | None = None
) -> MessageQueue:
    """Java ``SelectMessageQueueByRandom``."""
    return queues[(rng or _random).randrange(len(queues))]
