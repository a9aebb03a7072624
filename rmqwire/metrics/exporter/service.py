"""The exporter process: collection cycles on a timer, the last values served over HTTP.

``ExporterService`` (a Twisted Service) owns an ``AdminCore``, runs ``MetricsCollectTask`` every
``interval`` seconds (a cycle that outlasts the interval delays the next one, never overlaps it)
and serves ``path`` on ``port`` from its own registry: rocketmq-exporter's families, the exporter's
health, and the process metrics of prometheus-client (resident memory, CPU). A scrape only renders
what the last cycles wrote; it never asks the cluster.

Health families (``rmqwire_exporter_*``): ``cycle_duration_seconds`` (last cycle),
``cycles_total``, ``cycles_late_total`` (intervals a slow cycle made the timer skip),
``errors_total{task,kind}`` (failed requests: timeout, connect, response, decode, ...),
``last_success_timestamp_seconds`` (end of the last cycle without errors),
``last_cycle_timestamp_seconds``, ``requests`` (requests of the last cycle), ``series``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    make_wsgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from twisted.application.service import MultiService
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import Site
from twisted.web.wsgi import WSGIResource

from rmqwire.admin.core import DEFAULT_TIMEOUT, AdminCore
from rmqwire.metrics.exporter.collect_task import (
    CollectOptions,
    CycleReport,
    MetricsCollectTask,
)
from rmqwire.metrics.exporter.collector import RMQMetricsCollector
from rmqwire.remoting.config import RemotingConfig

#: rocketmq-exporter's defaults: server.port, webTelemetryPath, outOfTimeSeconds.
DEFAULT_PORT = 5557
DEFAULT_PATH = "/metrics"
DEFAULT_INTERVAL = 60.0
DEFAULT_EXPIRE = 60.0


@dataclass(slots=True)
class ExporterConfig:
    namesrv_addr: str
    port: int = DEFAULT_PORT
    host: str = "0.0.0.0"
    path: str = DEFAULT_PATH
    interval: float = DEFAULT_INTERVAL
    #: a series not refreshed for this long is dropped (never less than two intervals, so one
    #: late cycle does not blank the dashboards)
    expire_after: float = DEFAULT_EXPIRE
    timeout: float = DEFAULT_TIMEOUT
    options: CollectOptions = field(default_factory=CollectOptions)

    @property
    def effective_expiry(self) -> float:
        return max(self.expire_after, 2 * self.interval)


class ExporterHealth(Collector):
    """The exporter's own metrics, from the cycle reports."""

    def __init__(self, collector: RMQMetricsCollector) -> None:
        self.collector = collector
        self.cycles = 0
        self.late = 0
        self.errors: Counter[tuple[str, str]] = Counter()
        self.last: CycleReport | None = None
        self.last_end = 0.0
        self.last_success = 0.0

    def record(self, report: CycleReport, end: float) -> None:
        self.cycles += 1
        self.errors.update(report.errors)
        self.last = report
        self.last_end = end
        if report.ok:
            self.last_success = end

    def collect(self) -> Iterator[Any]:
        p = "rmqwire_exporter_"
        yield GaugeMetricFamily(p + "cycle_duration_seconds", "Duration of the last collection cycle",
                                value=self.last.duration if self.last else 0.0)
        yield CounterMetricFamily(p + "cycles", "Collection cycles run", value=self.cycles)
        yield CounterMetricFamily(p + "cycles_late", "Intervals skipped because a cycle outlasted "
                                  "the interval", value=self.late)
        errors = CounterMetricFamily(p + "errors", "Failed requests of the collection, by task "
                                     "and kind", labels=("task", "kind"))
        for (t, kind), n in sorted(self.errors.items()):
            errors.add_metric((t, kind), n)
        yield errors
        yield GaugeMetricFamily(p + "last_success_timestamp_seconds",
                                "End of the last cycle that had no error", value=self.last_success)
        yield GaugeMetricFamily(p + "last_cycle_timestamp_seconds", "End of the last cycle",
                                value=self.last_end)
        yield GaugeMetricFamily(p + "requests", "Requests of the last cycle",
                                value=self.last.requests if self.last else 0)
        yield GaugeMetricFamily(p + "series", "rocketmq_* series held",
                                value=self.collector.series_count())


class _QuietSite(Site):
    def log(self, request: Any) -> None:   # no access-log line per scrape
        pass


class ExporterService(MultiService):
    log = Logger()

    def __init__(self, reactor: Any, config: ExporterConfig,
                 remoting_config: RemotingConfig | None = None,
                 admin: AdminCore | None = None) -> None:
        super().__init__()
        self.reactor = reactor
        self.config = config
        self.admin = admin or AdminCore(reactor, config.namesrv_addr, config=remoting_config,
                                        timeout=config.timeout)
        self.collector = RMQMetricsCollector(config.effective_expiry)
        self.task = MetricsCollectTask(self.admin, self.collector, config.options)
        self.health = ExporterHealth(self.collector)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.registry.register(self.health)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._loop = task.LoopingCall.withCount(self._tick)
        self._loop.clock = reactor
        self._loop_done: Deferred[Any] | None = None
        self.port: Any = None

    # ---- lifecycle -----------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        self.admin.startService()
        self.port = self.reactor.listenTCP(self.config.port, _QuietSite(self.resource()),
                                           interface=self.config.host)
        self._loop_done = self._loop.start(self.config.interval, now=True)
        self._loop_done.addErrback(lambda f: self.log.failure("collection loop stopped", f))

    def stopService(self) -> Deferred[Any]:
        super().stopService()
        if self._loop.running:
            self._loop.stop()
        d = self.port.stopListening() if self.port is not None else Deferred()
        if self.port is None:
            d.callback(None)
        d.addBoth(lambda _: self.admin.stopService())
        return d

    def resource(self) -> Resource:
        """A tree serving the registry at ``config.path`` (e.g. /metrics, /prometheus/metrics)."""
        root = Resource()
        parts = [p for p in self.config.path.strip("/").split("/") if p]
        node = root
        for part in parts[:-1]:
            child = Resource()
            node.putChild(part.encode(), child)
            node = child
        metrics = WSGIResource(self.reactor, self.reactor.getThreadPool(),
                               make_wsgi_app(self.registry))
        if parts:
            node.putChild(parts[-1].encode(), metrics)
            return root
        return metrics

    @property
    def listening_port(self) -> int:
        return self.port.getHost().port

    # ---- cycles --------------------------------------------------------------------------------

    def _tick(self, count: int) -> Deferred[CycleReport]:
        if count > 1:
            self.health.late += count - 1
        d = Deferred.fromCoroutine(self.task.run_cycle())
        d.addCallback(self._cycle_done)
        return d

    def _cycle_done(self, report: CycleReport) -> CycleReport:
        self.health.record(report, time.time())
        if report.errors:
            self.log.info("collection cycle: {d:.2f} s, {n} requests, errors {e}",
                          d=report.duration, n=report.requests, e=dict(report.errors))
        return report
