"""The NameServer's native metrics (an rmqwire addition: a Java NameServer exports none), switched
on with the broker's 5.x keys (``metricsExporterType=PROM``, ``metricsPromExporterHost`` (default:
``bindAddress``), ``metricsPromExporterPort``, ``metricsLabel``).

Families, with the labels ``node_type`` (namesrv), ``node_id`` (the NameServer's address) and the
``metricsLabel`` pairs:

- ``rocketmq_rpc_latency_milliseconds`` (histogram): as the broker's, by request and response code;
- ``rocketmq_namesrv_live_brokers`` (gauge, ``cluster``): brokers registered and not expired;
- ``rocketmq_topic_number`` (gauge): topics in the route table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from twisted.logger import Logger

from rmqwire.remoting.metrics import RpcLatency
from rmqwire.server.metrics import (
    FamiliesCollector,
    MetricsExporterType,
    MetricsHttpServer,
    parse_labels,
)

if TYPE_CHECKING:
    from rmqwire.server.namesrv.controller import NameServer

__all__ = ["NamesrvMetrics"]


class NamesrvMetrics:
    log = Logger()

    def __init__(self, namesrv: NameServer) -> None:
        self.namesrv = namesrv
        cfg = namesrv.settings.namesrv
        self.exporter_type = MetricsExporterType.parse(cfg.metrics_exporter_type)
        self.enabled = self.exporter_type is not MetricsExporterType.DISABLE
        self.labels = parse_labels(cfg.metrics_label)
        self.rpc = RpcLatency()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(FamiliesCollector(self.families))
        self.http: MetricsHttpServer | None = None

    def start(self) -> None:
        if not self.enabled:
            return
        self.namesrv.server.dispatcher.observer = self.rpc
        if self.exporter_type is not MetricsExporterType.PROM:
            self.log.warn("metricsExporterType={t}: rmqwire exports only PROM; metrics are recorded, "
                          "not exported", t=self.exporter_type.name)
            return
        cfg = self.namesrv.settings
        host = cfg.namesrv.metrics_prom_exporter_host or cfg.server.bind_address
        self.http = MetricsHttpServer(self.namesrv.reactor, self.registry, host,
                                      cfg.namesrv.metrics_prom_exporter_port)
        self.http.start()
        self.log.info("NameServer metrics served for Prometheus on {host}:{port}", host=host, port=self.http.port)

    def stop(self) -> Any:
        http, self.http = self.http, None
        return http.stop() if http is not None else None

    @property
    def port(self) -> int | None:
        return self.http.port if self.http is not None else None

    def families(self) -> Iterator[Metric]:
        common = {**self.labels, "node_type": "namesrv", "node_id": self.namesrv.address}
        names, base = list(common), list(common.values())
        routes = self.namesrv.routes
        live: dict[str, int] = {}
        for addr in list(routes.broker_live_table):
            live[addr.cluster_name] = live.get(addr.cluster_name, 0) + 1
        brokers = GaugeMetricFamily("rocketmq_namesrv_live_brokers", "Brokers registered and alive",
                                    labels=[*names, "cluster"])
        for cluster, n in live.items():
            brokers.add_metric([*base, cluster], n)
        yield brokers
        topics = GaugeMetricFamily("rocketmq_topic_number", "Topics in the route table", labels=names)
        topics.add_metric(base, len(routes.topic_queue_table))
        yield topics
        yield self.rpc.family(common)
