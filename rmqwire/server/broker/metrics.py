"""The broker's native metrics (Java 5.x ``BrokerMetricsManager``, ``ConsumerLagCalculator``,
``DefaultStoreMetricsManager`` and the remoting ``rpc_latency``), served for Prometheus when
``metricsExporterType=PROM`` on ``metricsPromExporterHost:metricsPromExporterPort``.

Names, types and labels are those a 5.3.3 broker exposes through its OpenTelemetry Prometheus
exporter (``rocketmq_messages_in_total``, ``rocketmq_rpc_latency_milliseconds_bucket``,
``rocketmq_consumer_lag_latency_milliseconds``, ...), each series with the common labels
``cluster``, ``node_type`` (broker), ``node_id`` (brokerName), ``otel_scope_name`` (broker-meter)
and the ``metricsLabel`` pairs.

Counters are plain ints in dicts updated once per request (a put, a pull, an RPC answer); gauges
(lag, connections, storage, tables) are computed when Prometheus scrapes. Other parts of the
broker record through ``record_dlq``, ``record_commit``, ``record_rollback`` and ``record_half``.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from rmqwire.codec.codes import LanguageCode, version_name
from rmqwire.codec.java import now_ms
from rmqwire.codec.message import PropertyKey
from rmqwire.model import ConsumeType, PermName
from rmqwire.remoting.metrics import histogram_buckets
from rmqwire.server.broker.topic_config import DLQ_PREFIX, RETRY_PREFIX
from rmqwire.server.metrics import (
    ServerMetrics,
    parse_labels,
)

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["BrokerMetrics", "message_type"]

#: Java ``BrokerMetricsManager.registerMetricsView``: message size bucket bounds (bytes).
MESSAGE_SIZE_BUCKETS: tuple[int, ...] = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024,
                                         4 * 1024 * 1024)
#: The processors Java reports a thread-pool queue length for (rmqwire answers in the reactor:
#: no queue, 0 as GET_BROKER_RUNTIME_INFO's ``*ThreadPoolQueueSize``).
PROCESSORS = ("send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat",
              "lite_pull", "transaction", "consumer_manager", "admin", "reply")
_SYS_GROUP_PREFIX = "cid_rmq_sys_"
_CONSUME_MODE = {ConsumeType.CONSUME_ACTIVELY: "pull", ConsumeType.CONSUME_PASSIVELY: "push",
                 ConsumeType.CONSUME_POP: "pop"}
# module constants: the put path looks them up per message
_TRAN, _SHARDING = PropertyKey.TRANSACTION_PREPARED, PropertyKey.SHARDING_KEY
_DELAY_KEYS = ("__STARTDELIVERTIME", PropertyKey.DELAY_TIME_LEVEL, PropertyKey.TIMER_DELIVER_MS,
               PropertyKey.TIMER_DELAY_SEC, PropertyKey.TIMER_DELAY_MS)
_TYPE_KEYS = frozenset((_TRAN, _SHARDING, *_DELAY_KEYS))
_METER = "broker-meter"


def message_type(properties: Mapping[str, str]) -> str:
    """Java ``BrokerMetricsManager.getMessageType`` (the ``message_type`` label)."""
    if _TYPE_KEYS.isdisjoint(properties):  # the usual case: one C-level pass
        return "normal"
    if properties.get(_TRAN, "").lower() == "true":
        return "transaction"
    if _SHARDING in properties:
        return "fifo"
    for key in _DELAY_KEYS:
        if properties.get(key) is not None:
            return "delay"
    return "normal"


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX)


def is_system_group(group: str) -> bool:
    return group.lower().startswith(_SYS_GROUP_PREFIX)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _language(language: Any) -> str:
    try:
        return LanguageCode(int(language)).name.lower()
    except (ValueError, TypeError):
        return str(language).lower()


def _version(ordinal: int) -> str:
    try:
        return version_name(ordinal).lower()
    except ValueError:
        return str(ordinal)


class BrokerMetrics(ServerMetrics):
    """The broker's metrics. ``enabled`` is false unless ``metricsExporterType`` asks for them;
    then nothing is measured on the hot path and nothing is served."""

    what = "broker"

    def __init__(self, broker: Broker, *, clock: Callable[[], int] = now_ms) -> None:
        self.broker = broker
        self._clock = clock
        b = broker.settings.broker
        labels = parse_labels(b.metrics_label)
        if b.metrics_in_delta:
            labels["aggregation"] = "delta"
        labels.update(node_type="broker", cluster=b.broker_cluster_name, node_id=b.broker_name)
        #: Labels of every series (Java's LABEL_MAP, plus the exporter's scope label).
        self.common: dict[str, str] = {"otel_scope_name": _METER, **labels}
        # (topic, message type) -> [messages, bytes, size histogram counts..., +Inf, size sum]
        self._in: dict[tuple[str, str], list[int]] = {}
        # (topic, group) -> [messages, bytes]
        self._out: dict[tuple[str, str], list[int]] = {}
        self._dlq: dict[tuple[str, str], int] = {}
        self._commit: dict[str, int] = {}
        self._rollback: dict[str, int] = {}
        self._half: dict[str, int] = {}
        super().__init__(broker.reactor, b.metrics_exporter_type)

    # ---- lifecycle -------------------------------------------------------------------------------

    def dispatchers(self) -> list[Any]:
        return [s.dispatcher for s in (self.broker.server, self.broker.fast_server) if s is not None]

    def endpoint(self) -> tuple[str, int]:
        b = self.broker.settings.broker
        return b.metrics_prom_exporter_host or b.broker_ip1, b.metrics_prom_exporter_port

    # ---- recording (reactor thread) --------------------------------------------------------------

    def on_put(self, topic: str, msg_type: str, messages: int, size: int) -> None:
        """A put of ``messages`` (a batch counts them all) and ``size`` bytes stored."""
        key = (topic, msg_type)
        series = self._in.get(key)
        if series is None:  # retry and DLQ topics are never stored, so checked only here
            if is_retry_or_dlq(topic) or messages <= 0:
                return
            series = self._in[key] = [0] * (len(MESSAGE_SIZE_BUCKETS) + 4)
        series[0] += messages
        series[1] += size
        average = size // messages  # Java records the batch's average size once
        series[2 + bisect_left(MESSAGE_SIZE_BUCKETS, average)] += 1
        series[-1] += average

    def on_get(self, topic: str, group: str, messages: int, size: int) -> None:
        """A pull that returned ``messages`` records of ``size`` bytes to ``group``."""
        key = (topic, group)
        series = self._out.get(key)
        if series is None:
            if is_retry_or_dlq(topic):
                return
            series = self._out[key] = [0, 0]
        series[0] += messages
        series[1] += size

    def record_dlq(self, group: str, topic: str, messages: int = 1) -> None:
        """Messages of ``group`` (from its original ``topic``) moved to ``%DLQ%group``."""
        key = (group, topic)
        self._dlq[key] = self._dlq.get(key, 0) + messages

    def record_commit(self, topic: str, messages: int = 1) -> None:
        """Transactional messages of ``topic`` committed (END_TRANSACTION commit)."""
        self._commit[topic] = self._commit.get(topic, 0) + messages

    def record_rollback(self, topic: str, messages: int = 1) -> None:
        """Transactional messages of ``topic`` rolled back."""
        self._rollback[topic] = self._rollback.get(topic, 0) + messages

    def record_half(self, topic: str, delta: int) -> None:
        """Half (prepared) messages of ``topic`` pending: +1 stored, -1 committed, rolled back or
        discarded (Java's ``TransactionMetrics``; counted whether metrics are on or not, and not
        kept across a restart)."""
        self._half[topic] = self._half.get(topic, 0) + delta

    # ---- families (at scrape time) ---------------------------------------------------------------

    def _is_system_topic(self, topic: str) -> bool:
        return self.broker.topic_config_manager.is_system_topic(topic)

    def families(self) -> Iterator[Metric]:
        names = list(self.common)
        base = list(self.common.values())
        yield from self._stats_families(names, base)
        yield from self._request_families(names, base)
        yield from self._connection_families(names, base)
        yield from self._lag_families(names, base)
        yield from self._transaction_families(names, base)
        yield self.rpc.family(self.common)
        yield from self._store_families(names, base)

    def _gauge(self, name: str, doc: str, names: list[str], base: list[str], value: float) -> GaugeMetricFamily:
        fam = GaugeMetricFamily(name, doc, labels=names)
        fam.add_metric(base, value)
        return fam

    def _stats_families(self, names: list[str], base: list[str]) -> Iterator[Metric]:
        b = self.broker
        watermark = GaugeMetricFamily("rocketmq_processor_watermark", "Request processor watermark",
                                      labels=[*names, "processor"])
        for processor in PROCESSORS:
            watermark.add_metric([*base, processor], 0)
        yield watermark
        yield self._gauge("rocketmq_broker_permission", "Broker permission", names, base,
                          b.settings.broker.broker_permission)
        yield self._gauge("rocketmq_topic_number", "Active topic number", names, base,
                          len(b.topic_config_manager.table))
        yield self._gauge("rocketmq_consumer_group_number", "Active subscription group number", names, base,
                          len(b.subscription_group_manager.table))

    def _request_families(self, names: list[str], base: list[str]) -> Iterator[Metric]:
        in_labels = [*names, "topic", "message_type", "is_system"]
        messages_in = CounterMetricFamily("rocketmq_messages_in_total", "Total number of incoming messages",
                                          labels=in_labels)
        bytes_in = CounterMetricFamily("rocketmq_throughput_in_total", "Total traffic of incoming messages",
                                       labels=in_labels)
        size = HistogramMetricFamily("rocketmq_message_size", "Incoming messages size", labels=in_labels)
        for (topic, mtype), s in list(self._in.items()):
            values = [*base, topic, mtype, _bool(self._is_system_topic(topic))]
            messages_in.add_metric(values, s[0])
            bytes_in.add_metric(values, s[1])
            size.add_metric(values, histogram_buckets(MESSAGE_SIZE_BUCKETS, s[2:-1]), s[-1])
        out_labels = [*names, "topic", "consumer_group", "is_system"]
        messages_out = CounterMetricFamily("rocketmq_messages_out_total", "Total number of outgoing messages",
                                           labels=out_labels)
        bytes_out = CounterMetricFamily("rocketmq_throughput_out_total", "Total traffic of outgoing messages",
                                        labels=out_labels)
        for (topic, group), s in list(self._out.items()):
            values = [*base, topic, group,
                      _bool(self._is_system_topic(topic) or group.startswith("CID_RMQ_SYS_"))]
            messages_out.add_metric(values, s[0])
            bytes_out.add_metric(values, s[1])
        yield from (messages_in, bytes_in, size, messages_out, bytes_out)

    def _connection_families(self, names: list[str], base: list[str]) -> Iterator[Metric]:
        b = self.broker
        producers: dict[tuple[str, str], int] = {}
        for channels in list(b.producer_manager.group_channel_table.values()):
            for info in list(channels.values()):
                key = (_language(info.language), _version(info.version))
                producers[key] = producers.get(key, 0) + 1
        fam = GaugeMetricFamily("rocketmq_producer_connections", "Producer connections",
                                labels=[*names, "language", "version", "protocol_type"])
        for (language, version), n in producers.items():
            fam.add_metric([*base, language, version, "remoting"], n)
        yield fam
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, group_info in list(b.consumer_manager.consumer_table.items()):
            mode = _CONSUME_MODE.get(group_info.consume_type, "")  # type: ignore[arg-type]
            for info in list(group_info.channel_info_table.values()):
                key = (group, _language(info.language), _version(info.version), mode)
                consumers[key] = consumers.get(key, 0) + 1
        fam = GaugeMetricFamily("rocketmq_consumer_connections", "Consumer connections",
                                labels=[*names, "consumer_group", "language", "version", "consume_mode",
                                        "protocol_type", "is_system"])
        for (group, language, version, mode), n in consumers.items():
            fam.add_metric([*base, group, language, version, mode, "remoting", _bool(is_system_group(group))], n)
        yield fam

    def _lag_families(self, names: list[str], base: list[str]) -> Iterator[Metric]:
        """Java ``ConsumerLagCalculator`` for non-pop groups: every subscription group with a
        consumer online, per topic it subscribes (retry topics left out)."""
        labels = [*names, "consumer_group", "topic", "is_retry", "is_system"]
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages", "Consumer lag messages", labels=labels)
        lag_latency = GaugeMetricFamily("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time",
                                        labels=labels)
        inflight = GaugeMetricFamily("rocketmq_consumer_inflight_messages", "Consumer inflight messages",
                                     labels=labels)
        queueing = GaugeMetricFamily("rocketmq_consumer_queueing_latency_milliseconds",
                                     "Consumer queueing time", labels=labels)
        ready = GaugeMetricFamily("rocketmq_consumer_ready_messages", "Consumer ready messages", labels=labels)
        now = self._clock()
        for group, topic in self._lag_targets():
            s = self._lag_of(group, topic)
            values = [*base, group, topic, "false", _bool(self._is_system_topic(topic) or is_system_group(group))]
            lag.add_metric(values, s.lag)
            lag_latency.add_metric(values, now - s.earliest_unconsumed if s.earliest_unconsumed else 0)
            inflight.add_metric(values, s.inflight)
            queueing.add_metric(values, now - s.earliest_unpulled if s.earliest_unpulled else 0)
            ready.add_metric(values, s.ready)
        yield from (lag, lag_latency, inflight, queueing, ready)

    def _lag_targets(self) -> Iterator[tuple[str, str]]:
        b = self.broker
        bperm = b.settings.broker.broker_permission
        for group in list(b.subscription_group_manager.table):
            info = b.consumer_manager.get(group)
            if info is None:
                continue
            for topic in list(info.subscription_table):
                if topic.startswith(RETRY_PREFIX):
                    continue
                cfg = b.topic_config_manager.select(topic)
                if cfg is None:
                    continue
                perm = cfg.perm & bperm
                if not perm & (PermName.PERM_READ | PermName.PERM_WRITE):
                    continue
                yield group, topic

    def _lag_of(self, group: str, topic: str) -> _LagStats:
        b = self.broker
        store = b.store
        offsets = b.consumer_offset_manager
        cfg = b.topic_config_manager.select(topic)
        stats = _LagStats()
        if cfg is None:
            return stats
        unconsumed: list[int] = []
        unpulled: list[int] = []
        for queue_id in range(cfg.write_queue_nums):
            max_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            committed = offsets.query_offset(group, topic, queue_id)
            consumer_offset = committed if committed >= 0 else max_offset
            stats.lag += max(max_offset - consumer_offset, 0)
            unconsumed.append(self._store_time(topic, queue_id, consumer_offset))
            pulled = offsets.query_pull_offset(group, topic, queue_id)
            pull_offset = max(pulled, 0)
            commit_offset = committed if committed >= 0 else pull_offset
            stats.inflight += max(pull_offset - commit_offset, 0)
            unpulled.append(self._store_time(topic, queue_id, pull_offset))
            stats.ready += max(max_offset - (pulled if pulled >= 0 else max_offset), 0)
        stats.earliest_unconsumed = min((t for t in unconsumed if t > 0), default=0)
        stats.earliest_unpulled = min((t for t in unpulled if t > 0), default=0)
        return stats

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        if offset < 0:
            return 0
        return max(self.broker.store.get_message_store_timestamp(topic, queue_id, offset), 0)

    def _transaction_families(self, names: list[str], base: list[str]) -> Iterator[Metric]:
        dlq = CounterMetricFamily("rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages",
                                  labels=[*names, "consumer_group", "topic", "is_system"])
        for (group, topic), n in list(self._dlq.items()):
            dlq.add_metric([*base, group, topic, _bool(self._is_system_topic(topic) or is_system_group(group))], n)
        yield dlq
        for name, doc, table in (
                ("rocketmq_commit_messages_total", "Total number of commit messages", self._commit),
                ("rocketmq_rollback_messages_total", "Total number of rollback messages", self._rollback)):
            fam = CounterMetricFamily(name, doc, labels=[*names, "topic"])
            for topic, n in list(table.items()):
                fam.add_metric([*base, topic], n)
            yield fam
        half = GaugeMetricFamily("rocketmq_half_messages", "Half messages of all topics", labels=[*names, "topic"])
        for topic, n in list(self._half.items()):
            half.add_metric([*base, topic], n)
        yield half

    def _store_families(self, names: list[str], base: list[str]) -> Iterator[Metric]:
        """Java ``DefaultStoreMetricsManager``: storage labels on top of the common ones."""
        store = self.broker.store
        names = [*names, "storage_type", "storage_medium"]
        base = [*base, "local", "disk"]
        root = self.broker.settings.store.store_path_root_dir
        try:
            st = os.statvfs(root)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            if st.f_blocks > 0:
                yield self._gauge("rocketmq_storage_size_bytes", "Broker storage size", names, base, used)
        except OSError:
            pass
        yield self._gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", names, base,
                          max(0, store.max_phy_offset - store.commit_log.flushed_where))
        yield self._gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", names, base,
                          store.dispatch_behind_bytes)
        earliest = store.get_earliest_message_time_in_store()
        if earliest > 0:
            yield self._gauge("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time",
                              names, base, self._clock() - earliest)


class _LagStats:
    __slots__ = ("lag", "earliest_unconsumed", "inflight", "earliest_unpulled", "ready")

    def __init__(self) -> None:
        self.lag = 0
        self.earliest_unconsumed = 0
        self.inflight = 0
        self.earliest_unpulled = 0
        self.ready = 0
