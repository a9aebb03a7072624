"""What the native metrics of rmqwire's Broker and NameServer share: the 5.x switch keys, the
common labels, the RPC latency histogram and the HTTP page a Prometheus scrapes.

The official 5.x broker exports through OpenTelemetry's Prometheus exporter; its sample names
carry the instrument's unit (``rocketmq_rpc_latency_milliseconds_bucket``,
``rocketmq_storage_size_bytes``) and every series the label ``otel_scope_name`` of its meter.
rmqwire serves the same sample names and labels, so queries written for one work on the other.

Cost model: the hot path only adds ints to plain dicts keyed by label tuples (the reactor is the
only writer); the families are built when a scrape asks (a collector, in the reactor thread
as well, so nothing is read while it changes).
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import Site

from rmqwire.codec.codes import RequestCode, ResponseCode
from rmqwire.codec.frame import RemotingCommand

__all__ = [
    "MetricsExporterType",
    "MetricsHttpServer",
    "RpcLatency",
    "histogram_buckets",
    "parse_labels",
]

log = Logger()

#: Java ``RemotingMetricsManager.getMetricsView``: rpc latency bucket bounds (ms).
RPC_LATENCY_BUCKETS: tuple[int, ...] = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_PULL_CODES = frozenset({int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE)})


class MetricsExporterType(enum.IntEnum):
    """Java ``MetricsExporterType``; the config key takes the name or the number."""

    DISABLE = 0
    OTLP_GRPC = 1
    PROM = 2
    LOG = 3

    @classmethod
    def parse(cls, text: str | int | None) -> MetricsExporterType:
        if text is None:
            return cls.DISABLE
        s = str(text).strip()
        if s.lstrip("-").isdigit():
            try:
                return cls(int(s))
            except ValueError:
                return cls.DISABLE  # Java's valueOf(int): anything else is DISABLE
        try:
            return cls[s]
        except KeyError:
            raise ValueError(f"metricsExporterType must be one of {[m.name for m in cls]}, not {s!r}") from None


def parse_labels(text: str | None) -> dict[str, str]:
    """``metricsLabel``: ``k:v,k:v``; a pair without exactly one ``:`` is skipped, as Java does."""
    labels: dict[str, str] = {}
    for pair in (text or "").split(","):
        if not pair:
            continue
        parts = pair.split(":")
        if len(parts) != 2:
            log.warn("metricsLabel is not valid: {labels}", labels=text)
            continue
        labels[parts[0]] = parts[1]
    return labels


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


class RpcLatency:
    """``rocketmq_rpc_latency`` (histogram, ms) by request code, response code, long polling and
    result: a Dispatcher observer. Per answered request: one clock read, one dict lookup and
    three int additions."""

    name = "rocketmq_rpc_latency_milliseconds"

    def __init__(self) -> None:
        # (request code, response code, long polling, oneway) -> [count per bucket..., +Inf, sum]
        self._series: dict[tuple[int, int, bool, bool], list[int]] = {}

    def record(self, request: RemotingCommand, response: RemotingCommand, elapsed_s: float,
               pending: bool) -> None:
        ms = int(elapsed_s * 1000)
        code = request.code
        key = (code, response.code, pending and code in _PULL_CODES, request.is_oneway)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0] * (len(RPC_LATENCY_BUCKETS) + 2)
        series[bisect_left(RPC_LATENCY_BUCKETS, ms)] += 1
        series[-1] += ms

    def family(self, common: Mapping[str, str]) -> HistogramMetricFamily:
        names = [*common, "protocol_type", "request_code", "response_code", "is_long_polling", "result"]
        fam = HistogramMetricFamily(self.name, "Rpc latency", labels=names)
        base = list(common.values())
        for (req, resp, polling, oneway), series in list(self._series.items()):
            fam.add_metric(
                [*base, "remoting", _REQUEST_DESC.get(req, str(req)), _RESPONSE_DESC.get(resp, str(resp)),
                 "true" if polling else "false", "oneway" if oneway else "success"],
                histogram_buckets(RPC_LATENCY_BUCKETS, series), series[-1])
        return fam


class FamiliesCollector:
    """A prometheus-client collector over a function that builds the families at scrape time."""

    def __init__(self, build: Any) -> None:
        self._build = build

    def collect(self) -> Iterator[Metric]:
        try:
            yield from self._build()
        except Exception:
            log.failure("building the metrics failed")

    def describe(self) -> Iterable[Metric]:
        return ()  # no describe: registration must not call collect()


class _MetricsPage(Resource):
    isLeaf = True

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__()
        self.registry = registry

    def render_GET(self, request: Any) -> bytes:  # noqa: N802 - twisted.web's name
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return generate_latest(self.registry)


class MetricsHttpServer:
    """The scrape endpoint (Java's ``PrometheusHttpServer``: any path answers), in the reactor so
    that collectors read the broker's tables in the thread that writes them."""

    def __init__(self, reactor: Any, registry: CollectorRegistry, host: str, port: int) -> None:
        self.reactor = reactor
        self.registry = registry
        self.host = host
        self.requested_port = port
        self._listening: Any = None

    def start(self) -> None:
        site = Site(_MetricsPage(self.registry))
        site.noisy = False
        self._listening = self.reactor.listenTCP(self.requested_port, site, interface=self.host)

    @property
    def port(self) -> int:
        return int(self._listening.getHost().port) if self._listening is not None else self.requested_port

    def stop(self) -> Any:
        listening, self._listening = self._listening, None
        return listening.stopListening() if listening is not None else None

