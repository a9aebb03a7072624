"""The native metrics of rmqwire's Broker and NameServer: the collectors' arithmetic (histogram
buckets, message types, labels), and an in-process cluster with metricsExporterType=PROM scraped
over HTTP after rmqwire clients produced and consumed: counters equal what was sent and consumed,
lag gauges equal the broker's offsets, the RPC histogram counts the requests. Off by default:
nothing observed, nothing listening."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.commands import GetRouteInfo
from rmqwire.codec.message import PropertyKey
from rmqwire.errors import TopicNotExistError
from rmqwire.remoting import RemotingClient, RemotingConfig
from rmqwire.remoting.metrics import RpcLatency, histogram_buckets
from rmqwire.server.broker.metrics import message_type
from rmqwire.server.metrics import MetricsExporterType, parse_labels
from rmqwire.testing import TIMEOUT, RmqwireCluster, start_cluster

TOPIC = "MetricsTopic"


def wait_until(cond: object, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.1)


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """sample name -> [(labels, value)] of one scrape."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    """The sum over the series of ``name`` whose labels include ``labels``."""
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


# ---- pure parts ----------------------------------------------------------------------------------

def test_message_type_follows_java_precedence() -> None:
    assert message_type({}) == "normal"
    assert message_type({PropertyKey.TRANSACTION_PREPARED: "true", PropertyKey.SHARDING_KEY: "k"}) == "transaction"
    assert message_type({PropertyKey.SHARDING_KEY: "k", PropertyKey.DELAY_TIME_LEVEL: "3"}) == "fifo"
    assert message_type({PropertyKey.DELAY_TIME_LEVEL: "3"}) == "delay"
    assert message_type({"__STARTDELIVERTIME": "1"}) == "delay"
    assert message_type({PropertyKey.TIMER_DELAY_SEC: "5"}) == "delay"


def test_exporter_type_and_labels_parse_as_java() -> None:
    assert MetricsExporterType.parse("PROM") is MetricsExporterType.PROM
    assert MetricsExporterType.parse("2") is MetricsExporterType.PROM
    assert MetricsExporterType.parse("9") is MetricsExporterType.DISABLE  # Java's valueOf(int)
    with pytest.raises(ValueError, match="metricsExporterType must be one of"):
        MetricsExporterType.parse("prometheus")
    assert parse_labels("env:prod,bad,a:b:c,dc:x,") == {"env": "prod", "dc": "x"}


def test_rpc_latency_buckets_results_and_long_polling() -> None:
    rpc = RpcLatency()
    send = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2)
    ok = RemotingCommand(code=ResponseCode.SUCCESS)
    rpc.record(send, ok, 0.0004, False)    # 0 ms: le=1
    rpc.record(send, ok, 0.0042, False)    # 4 ms: le=5
    rpc.record(send, ok, 9.0, False)       # 9000 ms: +Inf only
    oneway = RemotingCommand(code=RequestCode.UPDATE_CONSUMER_OFFSET, flag=0x2)
    rpc.record(oneway, ok, 0.0, False)
    pull = RemotingCommand(code=RequestCode.PULL_MESSAGE)
    rpc.record(pull, RemotingCommand(code=ResponseCode.PULL_NOT_FOUND), 0.1, True)
    fam = rpc.family({"node_type": "broker"})
    got = {(s.labels["request_code"], s.labels["result"], s.labels["is_long_polling"], s.labels.get("le")): s.value
           for s in fam.samples if s.name.endswith("_bucket")}
    assert got[("send_message_v2", "success", "false", "1.0")] == 1
    assert got[("send_message_v2", "success", "false", "5.0")] == 2
    assert got[("send_message_v2", "success", "false", "3000.0")] == 2
    assert got[("send_message_v2", "success", "false", "+Inf")] == 3
    assert got[("update_consumer_offset", "oneway", "false", "+Inf")] == 1
    assert got[("pull_message", "success", "true", "100.0")] == 1
    sums = {s.labels["request_code"]: s.value for s in fam.samples if s.name.endswith("_sum")}
    assert sums["send_message_v2"] == 0 + 4 + 9000
    codes = {s.labels["response_code"] for s in fam.samples}
    assert codes == {"success", "pull_not_found"}


def test_histogram_buckets_are_cumulative() -> None:
    assert histogram_buckets((1, 10), [2, 0, 5]) == [("1.0", 2), ("10.0", 2), ("+Inf", 7)]


# ---- an in-process cluster, scraped over HTTP ----------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqwireCluster]:
    c = start_cluster(tmp_path_factory.mktemp("metrics") / "store", metricsExporterType="PROM",
                      metricsPromExporterPort="0", metricsPromExporterHost="127.0.0.1",
                      metricsLabel="env:unit")
    try:
        c.create_topic(TOPIC, 4)
        yield c
    finally:
        c.stop()


def test_counters_equal_what_was_sent_and_consumed(cluster: RmqwireCluster) -> None:
    from rmqwire import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

    broker = cluster.standalone.broker
    port = broker.metrics.port
    assert port
    with Producer("metrics_pg", namesrv_addr=cluster.namesrv_addr) as p:
        for i in range(7):
            p.send(Message(TOPIC, b"x" * (100 + i)))
        p.send([Message(TOPIC, b"b1"), Message(TOPIC, b"b2"), Message(TOPIC, b"b3")])
    sent = 10
    seen: list[int] = []
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            seen.extend(m.queue_offset for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer("metrics_cg", namesrv_addr=cluster.namesrv_addr,
                     consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    c.subscribe(TOPIC, "*")
    c.register_listener(listener)
    c.start()
    try:
        wait_until(lambda: len(seen) >= sent, timeout=60, what="the consumer got every message")
        s = scrape(port)
        common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a",
                  "otel_scope_name": "broker-meter", "env": "unit"}
        assert value(s, "rocketmq_messages_in_total", topic=TOPIC, message_type="normal", is_system="false",
                     **common) == sent
        stored = sum(len(r) for r in _stored_records(broker, TOPIC))
        assert value(s, "rocketmq_throughput_in_total", topic=TOPIC) == stored
        assert value(s, "rocketmq_message_size_count", topic=TOPIC) == 8  # one record per put (a batch: one)
        assert value(s, "rocketmq_messages_out_total", topic=TOPIC, consumer_group="metrics_cg",
                     is_system="false", **common) == sent
        assert value(s, "rocketmq_throughput_out_total", topic=TOPIC, consumer_group="metrics_cg") == stored
        assert value(s, "rocketmq_rpc_latency_milliseconds_count", request_code="send_message_v2",
                     response_code="success", result="success") == 7
        assert value(s, "rocketmq_rpc_latency_milliseconds_count", request_code="send_batch_message") == 1
        assert value(s, "rocketmq_consumer_connections", consumer_group="metrics_cg", language="python",
                     consume_mode="push", protocol_type="remoting") == 1
        assert value(s, "rocketmq_producer_connections") >= 1  # the consumer's own inner producer
        assert value(s, "rocketmq_topic_number") == len(broker.topic_config_manager.table)
        assert value(s, "rocketmq_consumer_group_number") == len(broker.subscription_group_manager.table)
        assert value(s, "rocketmq_broker_permission") == 6
        assert {lab["processor"] for lab, _ in s["rocketmq_processor_watermark"]} >= {"send", "pull", "admin"}
        assert s["rocketmq_storage_size_bytes"][0][0]["storage_type"] == "local"
        assert value(s, "rocketmq_storage_message_reserve_time_milliseconds") >= 0

        # Offsets committed: lag equals the broker's max offsets minus the committed ones.
        offsets = broker.consumer_offset_manager

        def lag_from_tables() -> int:
            return sum(max(broker.store.get_max_offset_in_queue(TOPIC, q)
                           - max(offsets.query_offset("metrics_cg", TOPIC, q), 0), 0) for q in range(4))

        wait_until(lambda: lag_from_tables() == 0, timeout=60, what="the consumer committed its offsets")
        s = scrape(port)
        assert value(s, "rocketmq_consumer_lag_messages", consumer_group="metrics_cg", topic=TOPIC,
                     is_retry="false", is_system="false") == 0
        assert value(s, "rocketmq_consumer_lag_latency_milliseconds", consumer_group="metrics_cg") == 0
        assert value(s, "rocketmq_consumer_ready_messages", consumer_group="metrics_cg", topic=TOPIC) == 0
    finally:
        c.shutdown()


def test_lag_gauges_with_a_stalled_consumer(cluster: RmqwireCluster) -> None:
    """A consumer online that consumed, then stalls in its listener: the lag is what was produced
    since (Java counts from the committed offset; a group that never committed has no lag)."""
    from rmqwire import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

    broker = cluster.standalone.broker
    topic, group, queues = "MetricsLagTopic", "metrics_lag_cg", 2
    cluster.create_topic(topic, queues)
    stall = threading.Event()
    release = threading.Event()
    stalled = threading.Event()

    def listener(msgs: list) -> ConsumeResult:
        if stall.is_set():
            stalled.set()
            release.wait(120)
        return ConsumeResult.SUCCESS

    def committed() -> int:
        return sum(max(broker.consumer_offset_manager.query_offset(group, topic, q), 0) for q in range(queues))

    c = PushConsumer(group, namesrv_addr=cluster.namesrv_addr, consume_thread_min=1, consume_thread_max=1,
                     consume_from_where=ConsumeFromWhere.FIRST_OFFSET, persist_consumer_offset_interval=200)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    c.start()
    try:
        with Producer("metrics_lag_pg", namesrv_addr=cluster.namesrv_addr) as p:
            for _ in range(4):
                p.send(Message(topic, b"before"))
            wait_until(lambda: committed() == 4, timeout=60, what="the first messages are committed")
            stall.set()
            for _ in range(6):
                p.send(Message(topic, b"lag"))
        assert stalled.wait(60), "the consumer never got the later messages"
        wait_until(lambda: sum(max(broker.consumer_offset_manager.query_pull_offset(group, topic, q), 0)
                               for q in range(queues)) == 10, timeout=60, what="every message is pulled")
        s = scrape(broker.metrics.port)
        assert value(s, "rocketmq_consumer_lag_messages", consumer_group=group, topic=topic) == 10 - committed()
        assert committed() == 4
        assert value(s, "rocketmq_consumer_lag_latency_milliseconds", consumer_group=group) > 0
        assert value(s, "rocketmq_consumer_inflight_messages", consumer_group=group, topic=topic) == 6
        assert value(s, "rocketmq_consumer_ready_messages", consumer_group=group, topic=topic) == 0
    finally:
        release.set()
        c.shutdown()


def test_transactions_counted_commit_rollback_and_half(cluster: RmqwireCluster) -> None:
    """Half messages are pending until END_TRANSACTION: +1 each prepared put, -1 at commit or
    rollback, which are counted per real topic."""
    from rmqwire import Message, TransactionProducer
    from rmqwire.client.message import LocalTransactionState

    broker = cluster.standalone.broker
    topic = "MetricsTxTopic"
    cluster.create_topic(topic, 2)
    with TransactionProducer("metrics_tx_pg", namesrv_addr=cluster.namesrv_addr) as p:
        for state in ([LocalTransactionState.COMMIT_MESSAGE] * 3 + [LocalTransactionState.ROLLBACK_MESSAGE] * 2
                      + [LocalTransactionState.UNKNOW]):
            p.send_message_in_transaction(Message(topic, b"tx"), lambda m, arg, state=state: state)
        wait_until(lambda: value(scrape(broker.metrics.port), "rocketmq_commit_messages_total", topic=topic) == 3,
                   timeout=60, what="the commits are counted")
        s = scrape(broker.metrics.port)
        assert value(s, "rocketmq_rollback_messages_total", topic=topic) == 2
        assert value(s, "rocketmq_half_messages", topic=topic) == 1  # the UNKNOW one
        assert value(s, "rocketmq_messages_in_total", topic="RMQ_SYS_TRANS_HALF_TOPIC", message_type="transaction",
                     is_system="true") == 6


def test_dlq_counted_when_the_retry_budget_is_spent(cluster: RmqwireCluster) -> None:
    """A consumer with no retry budget that fails a message: the broker moves it to %DLQ%group
    and counts it under the group and the message's original topic."""
    from rmqwire import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

    broker = cluster.standalone.broker
    topic, group = "MetricsDlqTopic", "metrics_dlq_cg"
    cluster.create_topic(topic, 1)
    c = PushConsumer(group, namesrv_addr=cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                     max_reconsume_times=0)
    c.subscribe(topic, "*")
    c.register_listener(lambda msgs: ConsumeResult.RECONSUME_LATER)
    c.start()
    try:
        with Producer("metrics_dlq_pg", namesrv_addr=cluster.namesrv_addr) as p:
            p.send(Message(topic, b"to the DLQ"))
        wait_until(lambda: value(scrape(broker.metrics.port), "rocketmq_send_to_dlq_messages_total",
                                 consumer_group=group) == 1, timeout=60, what="the message is counted in the DLQ")
        s = scrape(broker.metrics.port)
        assert value(s, "rocketmq_send_to_dlq_messages_total", consumer_group=group, topic=topic,
                     is_system="false") == 1
        assert broker.store.get_max_offset_in_queue(f"%DLQ%{group}", 0) == 1
    finally:
        c.shutdown()


def test_namesrv_metrics(tmp_path: Path) -> None:
    from rmqwire.client.blocking import call, ensure_reactor
    from rmqwire.server.namesrv import NameServer, NamesrvSettings

    reactor = ensure_reactor()
    settings = NamesrvSettings()
    settings.apply({"metricsExporterType": "PROM", "metricsPromExporterPort": "0",
                    "metricsPromExporterHost": "127.0.0.1", "kvConfigPath": str(tmp_path / "kv.json")})
    ns = call(NameServer, reactor, settings, port=0, interface="127.0.0.1", timeout=30)
    call(ns.startService, timeout=30)
    try:
        # a route lookup of an unknown topic: one rpc with TOPIC_NOT_EXIST
        client = call(RemotingClient, reactor, RemotingConfig(), timeout=30)
        with pytest.raises(TopicNotExistError):
            call(lambda: client.call(ns.address, GetRouteInfo, topic="Nope"), timeout=TIMEOUT)
        call(client.stopService, timeout=30)
        s = scrape(ns.metrics.port)
        assert value(s, "rocketmq_rpc_latency_milliseconds_count", request_code="get_routeinfo_by_topic",
                     response_code="topic_not_exist", node_type="namesrv") == 1
        assert value(s, "rocketmq_topic_number", node_type="namesrv") == 0
        assert "rocketmq_namesrv_live_brokers" not in s or value(s, "rocketmq_namesrv_live_brokers") == 0
    finally:
        call(ns.stopService, timeout=30)


def test_off_by_default_nothing_observed(tmp_path: Path) -> None:
    from rmqwire import Message, Producer

    c = start_cluster(tmp_path / "store")
    try:
        broker = c.standalone.broker
        assert not broker.metrics.enabled and broker.metrics.port is None
        assert broker.server.dispatcher.observer is None
        assert c.standalone.namesrv.metrics.port is None
        with Producer("off_pg", namesrv_addr=c.namesrv_addr) as p:
            p.send(Message("OffTopic", b"x"))
        assert broker.metrics._in == {} and broker.metrics.rpc.histograms.series == {}
    finally:
        c.stop()


def test_bad_exporter_type_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="metricsExporterType must be one of"):
        start_cluster(tmp_path / "store", metricsExporterType="prometheus")


def _stored_records(broker: object, topic: str) -> list[bytes]:
    store = broker.store  # type: ignore[attr-defined]
    records: list[bytes] = []
    for q in range(4):
        got = store.get_message("probe", topic, q, 0, 1000)
        if got is not None:
            records.extend(got.message_buffers)
    return records
