"""Broker-level message counters (Java ``BrokerStats`` and the put/get totals of
``BrokerStatsManager``), read by GET_BROKER_RUNTIME_INFO and ``mqadmin brokerStatus``."""

from __future__ import annotations

import datetime
from collections.abc import Callable

__all__ = ["BrokerStats"]


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
