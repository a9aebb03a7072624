"""Consumer statistics reported in ConsumerRunningInfo (Java ``ConsumerStatsManager``): pull and
consume response times and rates over the last minute, failed messages over the last hour, per
(group, topic). Counted in per-second buckets from the injected clock (reactor thread only)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from rmqwire.codec.commands.consumer import ConsumeStatus

__all__ = ["ConsumerStats", "RollingCounter"]


class RollingCounter:
    """(count, sum) per second over the last ``window`` seconds."""

    __slots__ = ("_buckets", "_now", "window")

    def __init__(self, now: Callable[[], float], window: int = 60) -> None:
        self._now = now
        self.window = window
        self._buckets: deque[list[int]] = deque()  # [second, count, sum]

    def add(self, count: int = 1, value: int = 0) -> None:
        sec = int(self._now())
        b = self._buckets
        if b and b[-1][0] == sec:
            b[-1][1] += count
            b[-1][2] += value
        else:
            b.append([sec, count, value])
            self._trim(sec)

    def _trim(self, now: int) -> None:
        b = self._buckets
        while b and b[0][0] <= now - self.window:
            b.popleft()

    def totals(self) -> tuple[int, int]:
        self._trim(int(self._now()))
        return sum(x[1] for x in self._buckets), sum(x[2] for x in self._buckets)


class ConsumerStats:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._items: dict[tuple[str, str, str], RollingCounter] = {}

    def _item(self, kind: str, group: str, topic: str, window: int = 60) -> RollingCounter:
        key = (kind, group, topic)
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = RollingCounter(self._now, window)
        return item

    def inc_pull_rt(self, group: str, topic: str, rt_ms: int) -> None:
        self._item("PULL_RT", group, topic).add(1, rt_ms)

    def inc_pull_tps(self, group: str, topic: str, n: int) -> None:
        self._item("PULL_TPS", group, topic).add(n)

    def inc_consume_rt(self, group: str, topic: str, rt_ms: int) -> None:
        self._item("CONSUME_RT", group, topic).add(1, rt_ms)

    def inc_consume_rt_many(self, group: str, topic: str, count: int, rt_sum_ms: int) -> None:
        if count:
            self._item("CONSUME_RT", group, topic).add(count, rt_sum_ms)

    def inc_consume_ok_tps(self, group: str, topic: str, n: int) -> None:
        self._item("CONSUME_OK_TPS", group, topic).add(n)

    def inc_consume_failed_tps(self, group: str, topic: str, n: int) -> None:
        self._item("CONSUME_FAILED_TPS", group, topic).add(n)
        self._item("CONSUME_FAILED_HOUR", group, topic, 3600).add(n)

    def consume_status(self, group: str, topic: str) -> ConsumeStatus:
        def avg(kind: str) -> float:
            count, total = self._item(kind, group, topic).totals()
            return total / count if count else 0.0

        def tps(kind: str) -> float:
            return self._item(kind, group, topic).totals()[0] / 60.0

        return ConsumeStatus(
            pull_rt=avg("PULL_RT"),
            pull_tps=tps("PULL_TPS"),
            consume_rt=avg("CONSUME_RT"),
            consume_ok_tps=tps("CONSUME_OK_TPS"),
            consume_failed_tps=tps("CONSUME_FAILED_TPS"),
            consume_failed_msgs=self._item("CONSUME_FAILED_HOUR", group, topic, 3600).totals()[0],
        )
