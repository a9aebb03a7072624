"""``rmqwire exporter``: apache/rocketmq-exporter's metrics of a RocketMQ cluster, without a JVM.

The 89 families of rocketmq-exporter (``families``) with its names, HELP, label sets and gauge
type, collected through the Admin API (``collect_task``) in a background cycle, kept with
per-series expiry (``collector``) and served over HTTP (``service``); its dashboards and
``example.rules`` work on ours unchanged.
"""

from __future__ import annotations

from rmqwire.metrics.exporter.collect_task import (
    CollectOptions,
    CycleReport,
    MetricsCollectTask,
)
from rmqwire.metrics.exporter.collector import RMQMetricsCollector
from rmqwire.metrics.exporter.families import BROKER_RUNTIME, FAMILIES, MAIN
from rmqwire.metrics.exporter.service import ExporterConfig, ExporterService

__all__ = [
    "BROKER_RUNTIME",
    "FAMILIES",
    "MAIN",
    "CollectOptions",
    "CycleReport",
    "ExporterConfig",
    "ExporterService",
    "MetricsCollectTask",
    "RMQMetricsCollector",
]
