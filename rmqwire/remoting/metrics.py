"""Metric pieces shared by rmqwire's servers and clients (Java keeps its RPC latency in remoting
too: ``RemotingMetricsManager``): histograms kept as plain int lists per label tuple, and the
``rocketmq_rpc_latency`` histogram a Dispatcher observer fills.

Recording is a dict lookup and int additions in the reactor thread; prometheus-client families
are built from the lists only when a registry is collected.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Mapping, Sequence

from prometheus_client.metrics_core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from rmqwire.codec.codes import RequestCode, ResponseCode
from rmqwire.codec.frame import RemotingCommand

__all__ = ["RPC_LATENCY_BUCKETS", "Histograms", "RpcLatency", "histogram_buckets"]

#: Java ``RemotingMetricsManager.getMetricsView``: rpc latency bucket bounds (ms).
RPC_LATENCY_BUCKETS: tuple[int, ...] = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_PULL_CODES = frozenset({int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE)})


def code_descriptions(codes: type[enum.IntEnum]) -> dict[int, str]:
    """Java ``RemotingHelper.getRequestCodeDesc`` / ``getResponseCodeDesc``: the lower-case name."""
    return {int(c): c.name.lower() for c in codes}


_REQUEST_DESC = code_descriptions(RequestCode)
_RESPONSE_DESC = code_descriptions(ResponseCode)


def histogram_buckets(bounds: Sequence[int], counts: Sequence[int]) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs from per-bucket counts (the last one is +Inf)."""
    out: list[tuple[str, float]] = []
    total = 0
    for bound, n in zip(bounds, counts, strict=False):
        total += n
        out.append((floatToGoString(bound), total))
    total += counts[len(bounds)]
    out.append(("+Inf", total))
    return out


class Histograms:
    """One histogram family's series: label tuple -> [count per bucket..., +Inf, sum]."""

    __slots__ = ("bounds", "series")

    def __init__(self, bounds: Sequence[int]) -> None:
        self.bounds = tuple(bounds)
        self.series: dict[tuple[str, ...], list[int]] = {}

    def observe(self, key: tuple[object, ...], value: int) -> None:
        s = self.series.get(key)  # type: ignore[arg-type]
        if s is None:
            s = self.series[key] = [0] * (len(self.bounds) + 2)  # type: ignore[index]
        s[bisect_left(self.bounds, value)] += 1
        s[-1] += value

    def family(self, name: str, doc: str, labels: list[str], base: Sequence[str] = ()) -> HistogramMetricFamily:
        """The family, each series' labels ``base`` + its key."""
        fam = HistogramMetricFamily(name, doc, labels=labels)
        for key, s in list(self.series.items()):
            fam.add_metric([*base, *key], histogram_buckets(self.bounds, s), s[-1])
        return fam


class RpcLatency:
    """``rocketmq_rpc_latency`` (histogram, ms) by request code, response code, long polling and
    result: a Dispatcher observer. Per answered request: one clock read, one dict lookup and
    two int additions."""

    name = "rocketmq_rpc_latency_milliseconds"

    def __init__(self) -> None:
        # key: (request code, response code, long polling, oneway)
        self.histograms = Histograms(RPC_LATENCY_BUCKETS)
        self._series = self.histograms.series

    def record(self, request: RemotingCommand, response: RemotingCommand, elapsed_s: float,
               pending: bool) -> None:
        # Histograms.observe inlined: this runs once per request
        code = request.code
        key = (code, response.code, pending and code in _PULL_CODES, request.is_oneway)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0] * (len(RPC_LATENCY_BUCKETS) + 2)
        ms = int(elapsed_s * 1000)
        series[bisect_left(RPC_LATENCY_BUCKETS, ms)] += 1
        series[-1] += ms

    def family(self, common: Mapping[str, str]) -> HistogramMetricFamily:
        names = [*common, "protocol_type", "request_code", "response_code", "is_long_polling", "result"]
        fam = HistogramMetricFamily(self.name, "Rpc latency", labels=names)
        base = list(common.values())
        for (req, resp, polling, oneway), s in list(self.histograms.series.items()):
            fam.add_metric(
                [*base, "remoting", _REQUEST_DESC.get(req, str(req)), _RESPONSE_DESC.get(resp, str(resp)),
                 "true" if polling else "false", "oneway" if oneway else "success"],
                histogram_buckets(RPC_LATENCY_BUCKETS, s), s[-1])
        return fam
