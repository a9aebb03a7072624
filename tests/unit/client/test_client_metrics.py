"""Client metrics (rmqwire.client.metrics): a producer, a push consumer and a lite pull consumer
with ``metrics=`` a registry, against an in-process broker; the counters equal what was sent and
consumed, the histograms count every send, pull and listener call, failures are labelled, the
cached gauges follow the process queues; off (the default) nothing is recorded."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from rmqwire import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rmqwire.client.metrics import ClientMetrics, metrics_for
from rmqwire.testing import RmqwireCluster, start_cluster


def wait_until(cond: object, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.05)


def total(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(s.value for fam in registry.collect() for s in fam.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqwireCluster]:
    c = start_cluster(tmp_path_factory.mktemp("client-metrics") / "store")
    try:
        yield c
    finally:
        c.stop()


def test_metrics_option() -> None:
    assert metrics_for(None) is None and metrics_for(False) is None
    registry = CollectorRegistry()
    m = metrics_for(registry)
    assert isinstance(m, ClientMetrics) and metrics_for(registry) is m  # one per registry
    assert metrics_for(True) is metrics_for(REGISTRY)
    with pytest.raises(TypeError, match="metrics must be True"):
        metrics_for("yes")


def test_producer_and_push_consumer_record(cluster: RmqwireCluster) -> None:
    topic, group = "ClientMetricsTopic", "client_metrics_cg"
    cluster.create_topic(topic, 2)
    registry = CollectorRegistry()
    with Producer("client_metrics_pg", namesrv_addr=cluster.namesrv_addr, metrics=registry) as p:
        for i in range(6):
            p.send(Message(topic, b"0123456789"))
        p.send([Message(topic, b"ab"), Message(topic, b"cd")])
        client_id = p._core.instance.client_id
    sent = 8
    assert total(registry, "rocketmq_send_messages_total", topic=topic, invocation_status="success") == sent
    assert total(registry, "rocketmq_send_cost_time_count", topic=topic, invocation_status="success") == 7
    assert total(registry, "rocketmq_send_bytes_total", topic=topic) > 60
    assert total(registry, "rocketmq_send_messages_total", client_id=client_id) == sent

    seen: list[bytes] = []
    lock = threading.Lock()
    fail_once = {"left": 1}

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            if fail_once["left"]:
                fail_once["left"] -= 1
                raise RuntimeError("the first call fails")
            seen.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer(group, namesrv_addr=cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                     metrics=registry)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    c.start()
    try:
        wait_until(lambda: total(registry, "rocketmq_receive_messages_total", topic=topic) >= sent,
                   timeout=60, what="every message was received")
        wait_until(lambda: total(registry, "rocketmq_consume_messages_total", topic=topic,
                                 invocation_status="success") >= sent - 1,
                   timeout=60, what="the listener consumed what it did not fail")
        assert total(registry, "rocketmq_receive_messages_total", topic=topic, consumer_group=group) == sent
        assert total(registry, "rocketmq_receive_bytes_total", topic=topic) == 6 * 10 + 2 + 2
        assert total(registry, "rocketmq_pull_cost_time_count", topic=topic) >= 1
        assert total(registry, "rocketmq_delivery_latency_count", topic=topic) == sent
        assert total(registry, "rocketmq_consume_messages_total", topic=topic, invocation_status="failure") == 1
        assert total(registry, "rocketmq_process_time_count", topic=topic, invocation_status="failure") == 1
        calls = total(registry, "rocketmq_process_time_count", topic=topic)
        assert total(registry, "rocketmq_await_time_count", topic=topic, consumer_group=group) == calls
        assert total(registry, "rocketmq_consumer_rebalance_total", topic=topic, consumer_group=group) >= 1
        queues = {s.labels["queue_id"] for fam in registry.collect() for s in fam.samples
                  if s.name == "rocketmq_consumer_cached_messages" and s.labels["topic"] == topic}
        assert queues == {"0", "1"}
        # the failed message (broker without send-back yet: retried locally or redelivered) leaves
        # at most one message cached
        assert total(registry, "rocketmq_consumer_cached_messages", topic=topic) <= 1
    finally:
        c.shutdown()


def test_lite_pull_consumer_records(cluster: RmqwireCluster) -> None:
    topic, group = "ClientMetricsLiteTopic", "client_metrics_lite_cg"
    cluster.create_topic(topic, 2)
    registry = CollectorRegistry()
    with Producer("client_metrics_lite_pg", namesrv_addr=cluster.namesrv_addr) as p:
        for i in range(5):
            p.send(Message(topic, b"0123456789"))
        p.send(Message(topic, b"abc"))
    sent = 6
    c = PullConsumer(group, namesrv_addr=cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                     metrics=registry)
    c.subscribe(topic, "*")
    c.start()
    try:
        # every message pulled into the cache, none polled yet: the cached gauges hold them all
        wait_until(lambda: total(registry, "rocketmq_receive_messages_total", topic=topic) >= sent,
                   timeout=60, what="every message was pulled")
        client_id = c.core.instance.client_id
        assert total(registry, "rocketmq_receive_messages_total", topic=topic, consumer_group=group,
                     client_id=client_id) == sent
        assert total(registry, "rocketmq_receive_bytes_total", topic=topic) == 5 * 10 + 3
        assert total(registry, "rocketmq_delivery_latency_count", topic=topic) == sent
        assert 1 <= total(registry, "rocketmq_pull_cost_time_count", topic=topic, consumer_group=group) <= sent
        assert total(registry, "rocketmq_consumer_rebalance_total", topic=topic, consumer_group=group) >= 1
        queues = {s.labels["queue_id"] for fam in registry.collect() for s in fam.samples
                  if s.name == "rocketmq_consumer_cached_messages" and s.labels["topic"] == topic}
        assert queues == {"0", "1"}
        assert total(registry, "rocketmq_consumer_cached_messages", topic=topic) == sent
        assert total(registry, "rocketmq_consumer_cached_bytes", topic=topic) == 5 * 10 + 3
        got = 0
        deadline = time.monotonic() + 60
        while got < sent and time.monotonic() < deadline:
            got += len(c.poll(timeout=1.0))
        assert got == sent
        # polled (the reactor hears of it asynchronously): nothing cached any more; a lite pull
        # consumer has no listener to time
        wait_until(lambda: total(registry, "rocketmq_consumer_cached_messages", topic=topic) == 0,
                   timeout=60, what="the polled messages left the cached gauges")
        assert total(registry, "rocketmq_consumer_cached_bytes", topic=topic) == 0
        assert total(registry, "rocketmq_process_time_count", topic=topic) == 0
    finally:
        c.shutdown()


def test_off_by_default_records_nothing(cluster: RmqwireCluster) -> None:
    before = {fam.name for fam in REGISTRY.collect()}
    with Producer("client_metrics_off_pg", namesrv_addr=cluster.namesrv_addr) as p:
        p.send(Message("ClientMetricsOff", b"x"))
        assert p._core.metrics is None
    assert {fam.name for fam in REGISTRY.collect()} == before
