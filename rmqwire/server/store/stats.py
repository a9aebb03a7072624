"""Store statistics behind the store keys of GET_BROKER_RUNTIME_INFO (Java ``StoreStatsService``).

Counters are bumped by the put/get paths; ``sample`` runs once a second (the store scheduler) and
keeps ten minutes of snapshots for the TPS values, which are Java ``Double.toString`` rates over the
last 10, 60 and 600 samples ("" until that many exist, as Java).
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Callable

from rmqwire.codec.java import java_double_str

__all__ = ["StoreStats"]

#: Java ``PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`` and the upper bounds (ms) of its buckets.
_DIST_LABELS = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
    "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)
_DIST_BOUNDS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
_SAMPLES_KEPT = 600
_DIST_WINDOW_S = 60


class StoreStats:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self.boot_timestamp = now_ms()
        self.put_message_times_total = 0
        self.put_message_size_total = 0
        self.put_message_failed_times = 0
        self.put_message_entire_time_max = 0
        self.get_message_times_total_found = 0
        self.get_message_times_total_miss = 0
        self.get_message_transferred_msg_count = 0
        self.get_message_entire_time_max = 0
        self._dist = [0] * len(_DIST_LABELS)
        self._last_dist: list[int] | None = None
        self._since_dist_reset = 0
        # (epoch ms, puts, gets found, gets miss, transferred), one per second
        self._samples: collections.deque[tuple[int, int, int, int, int]] = collections.deque(
            maxlen=_SAMPLES_KEPT + 1
        )

    def record_put(self, messages: int, size: int, elapsed_ms: int) -> None:
        self.put_message_times_total += messages
        self.put_message_size_total += size
        if elapsed_ms > self.put_message_entire_time_max:
            self.put_message_entire_time_max = elapsed_ms
        self._dist[bisect.bisect_left(_DIST_BOUNDS, elapsed_ms)] += 1

    def sample(self) -> None:
        self._samples.append(
            (
                self._now_ms(),
                self.put_message_times_total,
                self.get_message_times_total_found,
                self.get_message_times_total_miss,
                self.get_message_transferred_msg_count,
            )
        )
        self._since_dist_reset += 1
        if self._since_dist_reset >= _DIST_WINDOW_S:  # Java logs and resets its buckets each minute
            self._since_dist_reset = 0
            self._last_dist, self._dist = self._dist, [0] * len(_DIST_LABELS)

    def _tps(self, field: int, window: int, plus: int | None = None) -> str:
        samples = self._samples
        if len(samples) <= window:
            return ""
        first, last = samples[-(window + 1)], samples[-1]
        span = last[0] - first[0]
        if span <= 0:
            return ""
        total = last[field] - first[field]
        if plus is not None:
            total += last[plus] - first[plus]
        return java_double_str(total / span * 1000)

    def tps(self, field: int, plus: int | None = None) -> str:
        return " ".join(self._tps(field, w, plus) for w in (10, 60, 600))

    def _latency_px(self, fraction: float) -> float:
        dist = self._last_dist or self._dist
        total = sum(dist)
        if not total:
            return 0.0
        target, seen = total * fraction, 0
        for count, bound in zip(dist, (*_DIST_BOUNDS, _DIST_BOUNDS[-1] * 2), strict=True):
            seen += count
            if seen >= target:
                return float(bound)
        return float(_DIST_BOUNDS[-1])

    def runtime_info(self) -> dict[str, str]:
        total = self.put_message_times_total or 1
        run = max(0, self._now_ms() - self.boot_timestamp)
        days, run = divmod(run, 86_400_000)
        hours, run = divmod(run, 3_600_000)
        minutes, run = divmod(run, 60_000)
        dist = self._last_dist
        return {
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {run // 1000} seconds ]",
            "putMessageEntireTimeMax": str(self.put_message_entire_time_max),
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(self.put_message_failed_times),
            "putMessageSizeTotal": str(self.put_message_size_total),
            "putMessageDistributeTime": "null" if dist is None
            else "".join(f"{label}:{n} " for label, n in zip(_DIST_LABELS, dist, strict=True)),
            "putMessageAverageSize": java_double_str(self.put_message_size_total / total),
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": str(self.get_message_entire_time_max),
            "putTps": self.tps(1),
            "getFoundTps": self.tps(2),
            "getMissTps": self.tps(3),
            "getTotalTps": self.tps(2, plus=3),
            "getTransferredTps": self.tps(4),
            "putLatency99": f"{self._latency_px(0.99):.2f}",
            "putLatency999": f"{self._latency_px(0.999):.2f}",
        }
