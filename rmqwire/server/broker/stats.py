"""Broker statistics: the day totals of GET_BROKER_RUNTIME_INFO (Java ``BrokerStats``) and the
named, keyed counters of Java's ``BrokerStatsManager`` (``StatsItemSet`` / ``StatsItem``) behind
VIEW_BROKER_STATS_DATA, the consume TPS of GET_CONSUME_STATS and GET_BROKER_CONSUME_STATS, and so
``mqadmin statsAll`` / ``brokerConsumeStats``.

A ``StatsItem`` counts a value and a number of calls; snapshots of both are taken every 10 s
(the last 7 kept: one minute), every 10 min (7: one hour) and every hour (25: one day), as Java
does, and a window's sum, TPS and average per call are computed from its first and last
snapshots. The first snapshot of an item is preceded by a zero one a period earlier, so a new
item shows its count in every window from its first sampling on. All runs in the reactor thread.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from rmqwire.codec.commands.admin import BrokerStatsName
from rmqwire.codec.java import now_ms

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_LATENCY",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "STATS_NAMES",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStats",
    "BrokerStatsManager",
    "StatsItem",
    "StatsItemSet",
    "StatsSnapshot",
]

# Java ``Stats`` names (what VIEW_BROKER_STATS_DATA's statsName takes); those an admin asks for
# are declared once, in the codec (the exporter reads them there).
TOPIC_PUT_NUMS, TOPIC_PUT_SIZE = BrokerStatsName.TOPIC_PUT_NUMS, BrokerStatsName.TOPIC_PUT_SIZE
GROUP_GET_NUMS, GROUP_GET_SIZE = BrokerStatsName.GROUP_GET_NUMS, BrokerStatsName.GROUP_GET_SIZE
SNDBCK_PUT_NUMS = BrokerStatsName.SNDBCK_PUT_NUMS
BROKER_PUT_NUMS, BROKER_GET_NUMS = BrokerStatsName.BROKER_PUT_NUMS, BrokerStatsName.BROKER_GET_NUMS
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
QUEUE_PUT_NUMS = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE = "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE = "QUEUE_GET_SIZE"
DLQ_PUT_NUMS = "DLQ_PUT_NUMS"
SNDBCK2DLQ_TIMES = "SNDBCK2DLQ_TIMES"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
               BROKER_PUT_NUMS, BROKER_GET_NUMS, GROUP_GET_LATENCY, QUEUE_PUT_NUMS, QUEUE_PUT_SIZE,
               QUEUE_GET_NUMS, QUEUE_GET_SIZE, DLQ_PUT_NUMS, SNDBCK2DLQ_TIMES)

#: (period s, snapshots kept) of the minute, hour and day windows (Java's sampling tasks).
MINUTE = (10, 7)
HOUR = (600, 7)
DAY = (3600, 25)


@dataclasses.dataclass(frozen=True, slots=True)
class StatsSnapshot:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


class StatsItem:
    __slots__ = ("key", "last_update_ms", "name", "times", "value", "_windows")

    def __init__(self, name: str, key: str, now: int) -> None:
        self.name = name
        self.key = key
        self.value = 0
        self.times = 0
        self.last_update_ms = now
        # per window: snapshots of (epoch ms, times, value)
        self._windows: tuple[collections.deque[tuple[int, int, int]], ...] = tuple(
            collections.deque(maxlen=kept) for _, kept in (MINUTE, HOUR, DAY))

    def add(self, value: int, times: int, now: int) -> None:
        self.value += value
        self.times += times
        self.last_update_ms = now

    def sample(self, window: int, now: int) -> None:
        snaps = self._windows[window]
        if not snaps:
            period = (MINUTE, HOUR, DAY)[window][0]
            snaps.append((now - period * 1000, 0, 0))
        snaps.append((now, self.times, self.value))

    def _compute(self, window: int) -> StatsSnapshot:
        snaps = self._windows[window]
        if not snaps:
            return StatsSnapshot()
        (t0, times0, v0), (t1, times1, v1) = snaps[0], snaps[-1]
        total = v1 - v0
        span = t1 - t0
        tps = total * 1000.0 / span if span > 0 else 0.0
        times = times1 - times0
        return StatsSnapshot(total, tps, total / times if times > 0 else 0.0, times)

    def in_minute(self) -> StatsSnapshot:
        return self._compute(0)

    def in_hour(self) -> StatsSnapshot:
        return self._compute(1)

    def in_day(self) -> StatsSnapshot:
        return self._compute(2)


class StatsItemSet:
    """One statistic (``name``) per key."""

    def __init__(self, name: str, clock: Callable[[], int] = now_ms) -> None:
        self.name = name
        self._clock = clock
        self.items: dict[str, StatsItem] = {}

    def add_value(self, key: str, value: int, times: int = 1) -> None:
        now = self._clock()
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem(self.name, key, now)
        item.add(value, times, now)

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def sample(self, window: int) -> None:
        now = self._clock()
        for item in list(self.items.values()):
            item.sample(window, now)

    def in_minute(self, key: str) -> StatsSnapshot:
        item = self.items.get(key)
        return item.in_minute() if item is not None else StatsSnapshot()

    def remove_idle(self, max_idle_ms: int) -> None:
        now = self._clock()
        for key, item in list(self.items.items()):
            if now - item.last_update_ms > max_idle_ms:
                del self.items[key]


def stats_key(*parts: Any) -> str:
    """Java ``buildStatsKey``: the parts joined by '@' (topic@group, topic@queueId@group)."""
    return "@".join(str(p) for p in parts)


class BrokerStatsManager:
    """Java ``BrokerStatsManager``: the sets by name, the counting calls of the send and pull
    paths, and the samplers (``start``/``stop`` on the injected reactor)."""

    log = Logger()

    def __init__(self, cluster_name: str, clock: Callable[[], int] = now_ms,
                 enable_queue_stat: bool = True) -> None:
        self.cluster_name = cluster_name
        self.enable_queue_stat = enable_queue_stat
        self.sets = {name: StatsItemSet(name, clock) for name in STATS_NAMES}
        self._loops: list[LoopingCall] = []

    def start(self, reactor: Any) -> None:
        """Sample every window now and then at its period (Java starts its samplers at 0 delay)."""
        for window, (period, _) in enumerate((MINUTE, HOUR, DAY)):
            loop = LoopingCall(self.sample, window)
            loop.clock = reactor
            loop.start(period, now=True).addErrback(
                lambda f: self.log.failure("broker stats sampling stopped", f))
            self._loops.append(loop)

    def stop(self) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()

    def sample(self, window: int) -> None:
        for s in self.sets.values():
            s.sample(window)

    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        s = self.sets.get(name)
        return s.get(key) if s is not None else None

    # ---- the send path ---------------------------------------------------------------------------

    def on_put(self, topic: str, queue_id: int, messages: int, size: int, *, times: int = 1) -> None:
        """A stored send (a batch counts its messages, with ``times`` 1)."""
        self.sets[TOPIC_PUT_NUMS].add_value(topic, messages, times)
        self.sets[TOPIC_PUT_SIZE].add_value(topic, size, 1)
        self.sets[BROKER_PUT_NUMS].add_value(self.cluster_name, messages, 1)
        if self.enable_queue_stat:
            key = stats_key(topic, queue_id)
            self.sets[QUEUE_PUT_NUMS].add_value(key, messages, times)
            self.sets[QUEUE_PUT_SIZE].add_value(key, size, 1)

    def on_send_back(self, group: str, topic: str) -> None:
        self.sets[SNDBCK_PUT_NUMS].add_value(stats_key(topic, group), 1, 1)

    def on_dlq_put(self, group: str) -> None:
        self.sets[DLQ_PUT_NUMS].add_value(group, 1, 1)

    # ---- the pull path ---------------------------------------------------------------------------

    def on_get(self, group: str, topic: str, queue_id: int, messages: int, size: int) -> None:
        """Messages found by a pull (Java counts them when the pull answers FOUND)."""
        key = stats_key(topic, group)
        self.sets[GROUP_GET_NUMS].add_value(key, messages, 1)
        self.sets[GROUP_GET_SIZE].add_value(key, size, 1)
        self.sets[BROKER_GET_NUMS].add_value(self.cluster_name, messages, 1)
        if self.enable_queue_stat:
            qkey = stats_key(topic, queue_id, group)
            self.sets[QUEUE_GET_NUMS].add_value(qkey, messages, 1)
            self.sets[QUEUE_GET_SIZE].add_value(qkey, size, 1)

    def on_get_latency(self, group: str, topic: str, queue_id: int, latency_ms: int) -> None:
        self.sets[GROUP_GET_LATENCY].add_value(stats_key(queue_id, topic, group), latency_ms, 1)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Java ``tpsGroupGetNums``: the consume TPS of a group on a topic over the last minute."""
        return self.sets[GROUP_GET_NUMS].in_minute(stats_key(topic, group)).tps


class BrokerStats:
    """Totals since start, with the values at this and the previous local midnight (Java takes
    those snapshots with a timer at 00:00; here they are rolled over when the day has changed)."""

    def __init__(self, today: Callable[[], datetime.date] = datetime.date.today) -> None:
        self._today = today
        self.put_total = 0
        self.get_total = 0
        self.put_bytes_total = 0
        self.topic_put: dict[str, int] = {}
        self._day = today()
        self.put_today_morning = self.get_today_morning = 0
        self.put_yesterday_morning = self.get_yesterday_morning = 0

    def on_put(self, topic: str, messages: int, size: int) -> None:
        self.put_total += messages
        self.put_bytes_total += size
        self.topic_put[topic] = self.topic_put.get(topic, 0) + messages

    def on_get(self, topic: str, messages: int) -> None:
        self.get_total += messages

    def _roll(self) -> None:
        today = self._today()
        if today == self._day:
            return
        if (today - self._day).days == 1:
            self.put_yesterday_morning, self.get_yesterday_morning = (
                self.put_today_morning, self.get_today_morning)
        else:
            self.put_yesterday_morning, self.get_yesterday_morning = self.put_total, self.get_total
        self.put_today_morning, self.get_today_morning = self.put_total, self.get_total
        self._day = today

    def runtime_info(self) -> dict[str, str]:
        self._roll()
        return {
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgPutTotalTodayNow": str(self.put_total),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
            "msgGetTotalTodayNow": str(self.get_total),
        }
