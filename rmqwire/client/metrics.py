"""Client metrics of rmqwire's producers, push consumers and lite pull consumers, recorded into a
prometheus-client registry (a lite pull consumer has no listener: no process/await/consume
families; with ``assign`` no rebalances). Opt-in with the client option ``metrics``: ``True``
(prometheus-client's default ``REGISTRY``) or a ``CollectorRegistry``; off (None, the default)
nothing is measured.

    p = Producer("g", namesrv_addr=addr, metrics=True)
    prometheus_client.start_http_server(8000)        # the application serves its registry

Families, named after the 5.x clients' metrics where those exist (rocketmq-clients'
``rocketmq_send_cost_time``, ``rocketmq_delivery_latency``, ``rocketmq_process_time``,
``rocketmq_await_time``,
``rocketmq_consumer_cached_messages`` / ``_bytes``, in ms, with their buckets):

- ``rocketmq_send_cost_time`` (histogram; topic, client_id, invocation_status success/failure),
  ``rocketmq_send_messages_total`` / ``rocketmq_send_bytes_total`` (counters, same labels);
- ``rocketmq_pull_cost_time`` (histogram; topic, consumer_group, client_id),
  ``rocketmq_delivery_latency`` (histogram: receipt time - store time, per message),
  ``rocketmq_receive_messages_total`` / ``rocketmq_receive_bytes_total``;
- ``rocketmq_process_time`` (histogram; + invocation_status) per listener call,
  ``rocketmq_await_time`` (histogram: queued for a consume thread, concurrent consumers),
  ``rocketmq_consume_messages_total`` (counter; + invocation_status: failures are ``failure``);
- ``rocketmq_consumer_cached_messages`` / ``rocketmq_consumer_cached_bytes`` (gauges per queue:
  + broker_name, queue_id; summed by topic they are the 5.x gauges);
- ``rocketmq_consumer_rebalance_total`` (counter; consumer_group, client_id, topic): allocation changes.

Recording happens in the reactor thread (plain int additions in dicts keyed by label tuples); the
families are built when the registry is collected.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from rmqwire.remoting.metrics import Histograms

__all__ = ["ClientMetrics", "metrics_for"]

#: rocketmq-clients' bucket bounds (ms).
SEND_BUCKETS = (1, 5, 10, 20, 50, 200, 500)
PROCESS_BUCKETS = (1, 5, 10, 100, 10_000, 60_000)
AWAIT_BUCKETS = (1, 5, 20, 100, 1000, 5000, 10_000)

_by_registry: weakref.WeakKeyDictionary[Any, ClientMetrics] = weakref.WeakKeyDictionary()


def metrics_for(option: Any) -> ClientMetrics | None:
    """The ClientMetrics of the ``metrics`` option: None (off), True (default registry), a
    CollectorRegistry, or a ClientMetrics. One per registry, shared by its clients."""
    if option is None or option is False:
        return None
    if isinstance(option, ClientMetrics):
        return option
    registry = REGISTRY if option is True else option
    if not isinstance(registry, CollectorRegistry):
        raise TypeError(f"metrics must be True, a prometheus_client CollectorRegistry or None, not {option!r}")
    found = _by_registry.get(registry)
    if found is None:
        found = _by_registry[registry] = ClientMetrics(registry)
    return found


def _add(table: dict[tuple[str, ...], int], key: tuple[str, ...], n: int) -> None:
    table[key] = table.get(key, 0) + n


def _counter(name: str, doc: str, labels: list[str], table: dict[tuple[str, ...], int]) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=labels)
    for key, n in list(table.items()):
        fam.add_metric(list(key), n)
    return fam


class ClientMetrics:
    """The client families of one registry (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.send_cost = Histograms(SEND_BUCKETS)
        self.send_messages: dict[tuple[str, ...], int] = {}
        self.send_bytes: dict[tuple[str, ...], int] = {}
        self.pull_cost = Histograms(SEND_BUCKETS)
        self.delivery = Histograms(SEND_BUCKETS)
        self.receive_messages: dict[tuple[str, ...], int] = {}
        self.receive_bytes: dict[tuple[str, ...], int] = {}
        self.process = Histograms(PROCESS_BUCKETS)
        self.await_time = Histograms(AWAIT_BUCKETS)
        self.consumed: dict[tuple[str, ...], int] = {}
        self.rebalances: dict[tuple[str, ...], int] = {}
        self._consumers: weakref.WeakSet[Any] = weakref.WeakSet()
        registry.register(self)

    # ---- recording (reactor thread) --------------------------------------------------------------

    def on_send(self, topic: str, client_id: str, ok: bool, elapsed_ms: int, messages: int, size: int) -> None:
        key = (topic, client_id, "success" if ok else "failure")
        self.send_cost.observe(key, max(elapsed_ms, 0))
        _add(self.send_messages, key, messages)
        _add(self.send_bytes, key, size)

    def on_pull(self, topic: str, group: str, client_id: str, elapsed_ms: int, msgs: Iterable[Any],
                now_ms: int) -> None:
        key = (topic, group, client_id)
        self.pull_cost.observe(key, max(elapsed_ms, 0))
        count = size = 0
        delivery = self.delivery
        for m in msgs:
            count += 1
            size += len(m.body or b"")
            delivery.observe(key, max(now_ms - m.store_timestamp, 0))
        _add(self.receive_messages, key, count)
        _add(self.receive_bytes, key, size)

    def on_consume(self, topic: str, group: str, client_id: str, ok: bool, elapsed_ms: int, messages: int,
                   waited_ms: int | None = None) -> None:
        key = (topic, group, client_id, "success" if ok else "failure")
        self.process.observe(key, max(elapsed_ms, 0))
        _add(self.consumed, key, messages)
        if waited_ms is not None:
            self.await_time.observe(key[:3], max(waited_ms, 0))

    def on_rebalance(self, topic: str, group: str, client_id: str) -> None:
        _add(self.rebalances, (topic, group, client_id), 1)

    def watch_consumer(self, consumer: Any) -> None:
        """A consumer whose process queues (its ``cached_queues()``) the cached gauges report."""
        self._consumers.add(consumer)

    # ---- collection ------------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        send = ["topic", "client_id", "invocation_status"]
        yield self.send_cost.family("rocketmq_send_cost_time", "Send latency (ms)", send)
        yield _counter("rocketmq_send_messages", "Messages sent", send, self.send_messages)
        yield _counter("rocketmq_send_bytes", "Bytes of message bodies sent", send, self.send_bytes)
        consumer = ["topic", "consumer_group", "client_id"]
        yield self.pull_cost.family("rocketmq_pull_cost_time", "Pull latency (ms)", consumer)
        yield self.delivery.family("rocketmq_delivery_latency", "Store to receipt latency (ms)", consumer)
        yield _counter("rocketmq_receive_messages", "Messages received", consumer, self.receive_messages)
        yield _counter("rocketmq_receive_bytes", "Bytes of message bodies received", consumer, self.receive_bytes)
        status = [*consumer, "invocation_status"]
        yield self.process.family("rocketmq_process_time", "Listener processing time (ms)", status)
        yield self.await_time.family("rocketmq_await_time", "Time queued for a consume thread (ms)", consumer)
        yield _counter("rocketmq_consume_messages", "Messages consumed", status, self.consumed)
        yield _counter("rocketmq_consumer_rebalance", "Queue allocation changes", consumer, self.rebalances)
        queue = [*consumer, "broker_name", "queue_id"]
        cached = GaugeMetricFamily("rocketmq_consumer_cached_messages", "Messages cached", labels=queue)
        cached_bytes = GaugeMetricFamily("rocketmq_consumer_cached_bytes", "Bytes cached", labels=queue)
        for c in list(self._consumers):
            instance = c.instance
            if instance is None:
                continue
            for mq, pq in c.cached_queues():
                values = [mq.topic, c.group, instance.client_id, mq.broker_name, str(mq.queue_id)]
                cached.add_metric(values, pq.msg_count)
                cached_bytes.add_metric(values, pq.msg_size)
        yield cached
        yield cached_bytes

    def describe(self) -> Iterable[Metric]:
        return ()
