"""``RMQMetricsCollector``: the latest value of every series, rendered at scrape time.

The collection cycle writes values in (reactor thread); a scrape renders what is there (a
prometheus-client ``Collector``, called from the HTTP thread). As in the Java exporter, where each
family is a Guava cache with ``expireAfterWrite(outOfTimeSeconds)``, a series not written for
``expire_after`` seconds is gone: topics, groups and clients that vanished stop being exported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from rmqwire.metrics.exporter.families import FAMILIES, Family

Labels = tuple[str, ...]


class RMQMetricsCollector(Collector):
    """Series by family and label values; ``put`` writes one, ``collect`` renders the live ones."""

    def __init__(self, expire_after: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.expire_after = expire_after
        self.clock = clock
        self._lock = threading.Lock()
        # family name -> label values -> (value, written at)
        self._series: dict[str, dict[Labels, tuple[float, float]]] = {n: {} for n in FAMILIES}

    def put(self, family: str, labels: Sequence[str], value: float,
            identity: Sequence[int] | None = None) -> None:
        """Write one series. ``identity`` (label positions) names what the series is about when
        other labels are mere attributes: a series with the same identity and other attributes
        is replaced rather than kept until it expires (``rocketmq_group_diff`` of a group whose
        ``countOfOnlineConsumers`` changed must not be summed twice)."""
        spec = FAMILIES[family]
        if len(labels) != len(spec.labels):
            raise ValueError(f"{family} takes labels {spec.labels}, got {tuple(labels)}")
        key = tuple(labels)
        now = self.clock()
        with self._lock:
            series = self._series[family]
            if identity is not None and key not in series:
                ident = [key[i] for i in identity]
                for old in [k for k in series if [k[i] for i in identity] == ident]:
                    del series[old]
            series[key] = (float(value), now)

    def get(self, family: str, labels: Sequence[str]) -> float | None:
        """The live value of one series (None when absent or expired)."""
        entry = self._series[family].get(tuple(labels))
        if entry is None or self.clock() - entry[1] > self.expire_after:
            return None
        return entry[0]

    def expire(self) -> int:
        """Drop expired series (bounds memory between scrapes); returns how many are left."""
        cutoff = self.clock() - self.expire_after
        left = 0
        with self._lock:
            for name, series in self._series.items():
                live = {k: v for k, v in series.items() if v[1] >= cutoff}
                if len(live) != len(series):
                    self._series[name] = live
                left += len(live)
        return left

    def series_count(self) -> int:
        return sum(len(s) for s in self._series.values())

    def snapshot(self) -> dict[str, dict[Labels, float]]:
        """The live values of every family (what a scrape renders)."""
        cutoff = self.clock() - self.expire_after
        with self._lock:
            items = [(name, list(series.items())) for name, series in self._series.items()]
        return {name: {k: v for k, (v, t) in series if t >= cutoff} for name, series in items}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, series in self.snapshot().items():
            yield _gauge(FAMILIES[name], series)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for spec in FAMILIES.values():
            yield _gauge(spec, {})


def _gauge(spec: Family, series: dict[Labels, float]) -> GaugeMetricFamily:
    g = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
    for labels, value in series.items():
        g.add_metric(labels, value)
    return g
