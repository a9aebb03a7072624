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

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from rmqwire.server.metrics import (
    ServerMetrics,
    parse_labels,
)

if TYPE_CHECKING:
    from rmqwire.server.namesrv.controller import NameServer

__all__ = ["NamesrvMetrics"]


class NamesrvMetrics(ServerMetrics):
    what = "NameServer"

    def __init__(self, namesrv: NameServer) -> None:
        self.namesrv = namesrv
        cfg = namesrv.settings.namesrv
        self.labels = parse_labels(cfg.metrics_label)
        super().__init__(namesrv.reactor, cfg.metrics_exporter_type)

    def dispatchers(self) -> list[Any]:
        return [self.namesrv.server.dispatcher]

    def endpoint(self) -> tuple[str, int]:
        cfg = self.namesrv.settings
        return (cfg.namesrv.metrics_prom_exporter_host or cfg.server.bind_address,
                cfg.namesrv.metrics_prom_exporter_port)

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
