"""What the native metrics of rmqwire's Broker and NameServer share: the 5.x switch key, the
``metricsLabel`` pairs, a collector over a family builder and the HTTP page a Prometheus scrapes.

The RPC latency histogram and the histogram helpers are in ``rmqwire.remoting.metrics``.

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
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import Site

from rmqwire.remoting.metrics import RpcLatency

__all__ = [
    "FamiliesCollector",
    "MetricsExporterType",
    "MetricsHttpServer",
    "ServerMetrics",
    "parse_labels",
]

log = Logger()


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


class ServerMetrics:
    """The part of a server's native metrics the Broker and the NameServer share: the switch, the
    RPC latency observed on the server's dispatchers, the registry over ``families()`` and, for
    PROM, the scrape endpoint. Subclasses name the dispatchers and the endpoint."""

    log = Logger()
    #: Who serves them, for the log line.
    what = "server"

    def __init__(self, reactor: Any, exporter_type: str | int | None) -> None:
        self.reactor = reactor
        self.exporter_type = MetricsExporterType.parse(exporter_type)
        self.enabled = self.exporter_type is not MetricsExporterType.DISABLE
        self.rpc = RpcLatency()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(FamiliesCollector(self.families))
        self.http: MetricsHttpServer | None = None

    def families(self) -> Iterator[Metric]:
        raise NotImplementedError

    def dispatchers(self) -> list[Any]:
        """The dispatchers whose RPCs are observed."""
        raise NotImplementedError

    def endpoint(self) -> tuple[str, int]:
        """Host and port of the scrape endpoint."""
        raise NotImplementedError

    def start(self) -> None:
        """Observe the RPCs and, for PROM, listen for scrapes (a port in use raises)."""
        if not self.enabled:
            return
        for dispatcher in self.dispatchers():
            dispatcher.observer = self.rpc
        if self.exporter_type is not MetricsExporterType.PROM:
            self.log.warn("metricsExporterType={t}: rmqwire exports only PROM; metrics are recorded, "
                          "not exported", t=self.exporter_type.name)
            return
        host, port = self.endpoint()
        self.http = MetricsHttpServer(self.reactor, self.registry, host, port)
        self.http.start()
        self.log.info("{what} metrics served for Prometheus on {host}:{port}", what=self.what, host=host,
                      port=self.http.port)

    def stop(self) -> Any:
        http, self.http = self.http, None
        return http.stop() if http is not None else None

    @property
    def port(self) -> int | None:
        return self.http.port if self.http is not None else None
