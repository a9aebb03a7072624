"""rmqwire's Broker and NameServer with their native metrics on (metricsExporterType=PROM), scraped
by a real Prometheus while the official Java producer and consumer (tools/peers) and rmqwire's own
clients produce and consume:

- the in/out counters equal the messages sent and consumed, per topic and group;
- the transaction counters and half-message gauge follow the Java transactional producer;
- the lag gauges equal what the official ``mqadmin consumerProgress`` reports against our broker
  (Diff and Inflight summed over the topic's queues) while a consumer is stalled;
- a client's own registry (rmqwire's producer and consumer, ``metrics=``) is scraped too;
- the official 5.3.3 broker in PROM mode exposes no sample name or label name that ours lacks;
- the RPC histogram and the NameServer's gauges (live brokers, topics);
- ``promtool check metrics`` accepts the broker's, the NameServer's and the client's expositions.
"""

from __future__ import annotations

import re
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from rmqwire import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rmqwire.client.blocking import call, ensure_reactor
from rmqwire.server.standalone import Standalone, StandaloneOptions
from tests.conformance.prometheus_helpers import (
    Prometheus,
    ScrapeTarget,
    promtool,
    wait_for,
)
from tools.peers.java_peer import JavaPeer
from tools.peers.topics import create_topic
from tools.reference.cluster import pick_ports
from tools.reference.mqadmin import run_mqadmin

pytestmark = pytest.mark.conformance

PROM_PROPS = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0",
              "metricsPromExporterHost": "127.0.0.1", "metricsLabel": "env:conformance"}
WAIT = 120.0
#: The Java producer's send timeout covers its route lookup; a loaded machine needs more than 5 s.
SLOW_OK = ["--send-timeout-ms", "30000"]


def uid(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class Cluster:
    """rmqwire's NameServer + Broker in this process, both exporting metrics."""

    def __init__(self, store: Path) -> None:
        reactor = ensure_reactor()
        options = StandaloneOptions(namesrv_port=0, broker_port=0, store_dir=store,
                                    broker_properties=dict(PROM_PROPS), namesrv_properties=dict(PROM_PROPS))
        self.standalone = call(Standalone, reactor, options, timeout=60)
        call(self.standalone.startService, timeout=60)
        call(self.standalone.when_registered, timeout=60)
        self.version = "5.3.3"

    @property
    def namesrv_addr(self) -> str:
        return str(self.standalone.namesrv_addr)

    @property
    def broker(self) -> Any:
        return self.standalone.broker

    @property
    def broker_metrics(self) -> str:
        return f"127.0.0.1:{self.broker.metrics.port}"

    @property
    def namesrv_metrics(self) -> str:
        return f"127.0.0.1:{self.standalone.namesrv.metrics.port}"

    def create_topic(self, topic: str, queues: int) -> None:
        from rmqwire.codec.commands.topic import TopicConfig

        cfg = TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6)

        def create() -> Any:
            self.broker.topic_config_manager.update(cfg)
            return self.broker.register_incremental([cfg])

        call(create, timeout=60)

    def stop(self) -> None:
        if self.standalone.running:
            call(self.standalone.stopService, timeout=60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("native-metrics") / "store")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def client_registry() -> Iterator[tuple[CollectorRegistry, str]]:
    """A registry for rmqwire's clients, served as an application would (prometheus-client's
    own HTTP server)."""
    registry = CollectorRegistry()
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield registry, f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


@pytest.fixture(scope="module")
def prom(cluster: Cluster, client_registry: tuple[CollectorRegistry, str], prometheus_module: Any) -> Prometheus:
    p = prometheus_module([ScrapeTarget(cluster.broker_metrics, job="broker"),
                           ScrapeTarget(cluster.namesrv_metrics, job="namesrv"),
                           ScrapeTarget(client_registry[1], job="client")])
    p.wait_targets_up()
    return p


def prom_value(prom: Prometheus, expr: str, expected: float) -> float:
    """Wait until Prometheus' last scrape gives ``expected`` for ``expr`` (one series or a sum)."""
    def probe() -> bool:
        result = prom.query(expr)
        return bool(result) and float(result[0]["value"][1]) == expected
    try:
        wait_for(probe, f"{expr} == {expected}", WAIT)
    except AssertionError as e:
        raise AssertionError(f"{e}\nPrometheus has: {prom.query(expr)}") from None
    return expected


# ---- in / out counters ----------------------------------------------------------------------------

def test_in_out_counters_equal_messages_sent_and_consumed(cluster: Cluster, prom: Prometheus) -> None:
    topic, java_group, py_group = uid("NmTopic"), uid("nm_java"), uid("nm_py")
    cluster.create_topic(topic, 4)
    peer = JavaPeer(cluster.namesrv_addr)
    java_sent = peer.produce(topic, 20, mode="sync", extra=SLOW_OK)
    assert len(java_sent) == 20
    with Producer(uid("nm_pg"), namesrv_addr=cluster.namesrv_addr) as p:
        for i in range(10):
            p.send(Message(topic, f"py{i}".encode()))
        p.send([Message(topic, f"batch{i}".encode()) for i in range(5)])
    sent = 35

    got = peer.consume(topic, sent, group=java_group)
    assert len(got) == sent
    seen: list[str] = []
    lock = threading.Lock()

    def listener(msgs: list[Any]) -> ConsumeResult:
        with lock:
            seen.extend(m.msg_id for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer(py_group, namesrv_addr=cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    c.start()
    try:
        wait_for(lambda: len(seen) >= sent, "rmqwire's consumer got every message", WAIT)
    finally:
        c.shutdown()

    common = 'cluster="DefaultCluster",node_type="broker",node_id="broker-a",env="conformance"'
    prom_value(prom, f'sum(rocketmq_messages_in_total{{topic="{topic}",message_type="normal",'
                     f'is_system="false",{common}}})', sent)
    prom_value(prom, f'sum(rocketmq_messages_out_total{{topic="{topic}",consumer_group="{java_group}",{common}}})',
               sent)
    prom_value(prom, f'sum(rocketmq_messages_out_total{{topic="{topic}",consumer_group="{py_group}",{common}}})',
               sent)
    # bytes: what came in went out, to each group
    bytes_in = float(prom.query(f'sum(rocketmq_throughput_in_total{{topic="{topic}"}})')[0]["value"][1])
    assert bytes_in > 0
    prom_value(prom, f'sum(rocketmq_throughput_out_total{{topic="{topic}",consumer_group="{java_group}"}})', bytes_in)
    # one size observation per put: 20 + 10 single sends and one batch
    prom_value(prom, f'sum(rocketmq_message_size_count{{topic="{topic}"}})', 31)
    sends = prom.query('sum(rocketmq_rpc_latency_milliseconds_count{request_code="send_message_v2",'
                       'response_code="success",result="success",protocol_type="remoting"})')
    assert float(sends[0]["value"][1]) >= 30


def test_transaction_counters_with_the_java_transactional_producer(cluster: Cluster, prom: Prometheus) -> None:
    topic = uid("NmTx")
    cluster.create_topic(topic, 2)
    peer = JavaPeer(cluster.namesrv_addr)
    assert len(peer.produce(topic, 3, mode="transactional", extra=SLOW_OK)) == 3
    assert len(peer.produce(topic, 2, mode="transactional", extra=[*SLOW_OK, "--tx-state", "rollback"])) == 2
    prom_value(prom, f'sum(rocketmq_commit_messages_total{{topic="{topic}"}})', 3)
    prom_value(prom, f'sum(rocketmq_rollback_messages_total{{topic="{topic}"}})', 2)
    prom_value(prom, f'sum(rocketmq_half_messages{{topic="{topic}"}})', 0)


# ---- lag gauges against mqadmin consumerProgress --------------------------------------------------

def consumer_progress(cluster: Cluster, group: str, topic: str) -> tuple[int, int]:
    """(sum of Diff, sum of Inflight) over ``topic``'s rows of the official consumerProgress."""
    out = run_mqadmin(cluster, "consumerProgress", "-g", group).check().stdout
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == [topic]]
    assert rows, out
    # #Topic #Broker Name #QID #Broker Offset #Consumer Offset #Diff #Inflight #LastTime
    return sum(int(r[5]) for r in rows), sum(int(r[6]) for r in rows)


def test_lag_gauges_equal_mqadmin_consumer_progress(cluster: Cluster, prom: Prometheus) -> None:
    topic, group = uid("NmLag"), uid("nm_lag")
    queues = 2
    cluster.create_topic(topic, queues)
    stall, release, stalled = threading.Event(), threading.Event(), threading.Event()
    broker = cluster.broker

    def listener(msgs: list[Any]) -> ConsumeResult:
        if stall.is_set():
            stalled.set()
            release.wait(300)
        return ConsumeResult.SUCCESS

    def committed() -> int:
        return sum(max(broker.consumer_offset_manager.query_offset(group, topic, q), 0) for q in range(queues))

    c = PushConsumer(group, namesrv_addr=cluster.namesrv_addr, consume_thread_min=1, consume_thread_max=1,
                     consume_from_where=ConsumeFromWhere.FIRST_OFFSET, persist_consumer_offset_interval=500)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    c.start()
    try:
        with Producer(uid("nm_lag_pg"), namesrv_addr=cluster.namesrv_addr, send_msg_timeout=30_000) as p:
            for i in range(4):
                p.send(Message(topic, f"before{i}".encode()))
            wait_for(lambda: committed() == 4, "the first messages consumed and committed", WAIT)
            stall.set()
            for i in range(9):
                p.send(Message(topic, f"lag{i}".encode()))
        assert stalled.wait(WAIT), "the consumer never got the later messages"
        wait_for(lambda: sum(max(broker.consumer_offset_manager.query_pull_offset(group, topic, q), 0)
                             for q in range(queues)) == 13, "every message pulled", WAIT)

        diff, inflight = consumer_progress(cluster, group, topic)
        assert diff == 13 - committed() and diff > 0
        labels = f'consumer_group="{group}",topic="{topic}",is_retry="false",is_system="false"'
        prom_value(prom, f"rocketmq_consumer_lag_messages{{{labels}}}", diff)
        prom_value(prom, f"rocketmq_consumer_inflight_messages{{{labels}}}", inflight)
        prom_value(prom, f"rocketmq_consumer_ready_messages{{{labels}}}", 0)
        latency = prom.query(f"rocketmq_consumer_lag_latency_milliseconds{{{labels}}}")
        assert float(latency[0]["value"][1]) > 0
        # the stalled consumer is online: one connection of language python, push
        prom_value(prom, f'rocketmq_consumer_connections{{consumer_group="{group}",language="python",'
                         f'consume_mode="push",protocol_type="remoting"}}', 1)
    finally:
        release.set()
        c.shutdown()


# ---- client metrics ------------------------------------------------------------------------------

def test_client_metrics_scraped(cluster: Cluster, prom: Prometheus,
                                client_registry: tuple[CollectorRegistry, str]) -> None:
    """rmqwire's producer, push consumer and lite pull consumer with metrics on: what Prometheus
    scrapes from the application equals what was sent and what the broker counted in and out."""
    registry = client_registry[0]
    topic, group = uid("NmClient"), uid("nm_client")
    cluster.create_topic(topic, 2)
    with Producer(uid("nm_client_pg"), namesrv_addr=cluster.namesrv_addr, metrics=registry) as p:
        for i in range(12):
            p.send(Message(topic, f"client{i}".encode()))
    seen: list[str] = []
    lock = threading.Lock()

    def listener(msgs: list[Any]) -> ConsumeResult:
        with lock:
            seen.extend(m.msg_id for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer(group, namesrv_addr=cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                     metrics=registry)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    c.start()
    try:
        wait_for(lambda: len(seen) >= 12, "the consumer got every message", WAIT)
        prom_value(prom, f'sum(rocketmq_send_messages_total{{topic="{topic}",'
                         f'invocation_status="success"}})', 12)
        prom_value(prom, f'sum(rocketmq_send_cost_time_count{{topic="{topic}"}})', 12)
        prom_value(prom, f'sum(rocketmq_receive_messages_total{{topic="{topic}",'
                         f'consumer_group="{group}"}})', 12)
        prom_value(prom, f'sum(rocketmq_consume_messages_total{{topic="{topic}",'
                         f'invocation_status="success"}})', 12)
        prom_value(prom, f'count(rocketmq_consumer_cached_messages{{topic="{topic}"}})', 2)
        # the broker saw the same messages in and out
        prom_value(prom, f'sum(rocketmq_messages_in_total{{topic="{topic}"}})', 12)
        prom_value(prom, f'sum(rocketmq_messages_out_total{{topic="{topic}",'
                         f'consumer_group="{group}"}})', 12)
    finally:
        c.shutdown()
    pull_group = uid("nm_client_lite")
    pc = PullConsumer(pull_group, namesrv_addr=cluster.namesrv_addr,
                      consume_from_where=ConsumeFromWhere.FIRST_OFFSET, metrics=registry)
    pc.subscribe(topic, "*")
    pc.start()
    try:
        polled: list[Any] = []

        def poll_all() -> bool:
            polled.extend(pc.poll(timeout=1.0))
            return len(polled) >= 12

        wait_for(poll_all, "the pull consumer polled every message", WAIT)
        prom_value(prom, f'sum(rocketmq_receive_messages_total{{topic="{topic}",'
                         f'consumer_group="{pull_group}"}})', 12)
        prom_value(prom, f'sum(rocketmq_delivery_latency_count{{topic="{topic}",'
                         f'consumer_group="{pull_group}"}})', 12)
        prom_value(prom, f'count(rocketmq_consumer_cached_messages{{topic="{topic}",'
                         f'consumer_group="{pull_group}"}})', 2)
        prom_value(prom, f'sum(rocketmq_consumer_cached_messages{{topic="{topic}",'
                         f'consumer_group="{pull_group}"}})', 0)
        prom_value(prom, f'sum(rocketmq_messages_out_total{{topic="{topic}",'
                         f'consumer_group="{pull_group}"}})', 12)
    finally:
        pc.shutdown()


# ---- the official broker's families ----------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')
#: Families of the official broker outside this scope (POP, timer wheel, create timings).
_NOT_COMPARED = ("rocketmq_pop_", "rocketmq_timer_", "rocketmq_topic_create_", "rocketmq_consumer_group_create_")


def sample_label_keys(text: str) -> dict[str, frozenset[str]]:
    """sample name -> its label names (``le`` left out) of a Prometheus text exposition; parsed by
    hand: the official exporter's ``info`` types and unit-suffixed samples trip strict parsers."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or not m.group(1).startswith("rocketmq_") or m.group(1).startswith(_NOT_COMPARED):
            continue
        found.setdefault(m.group(1), set()).update(k for k in _LABEL.findall(m.group(2) or "") if k != "le")
    return {name: frozenset(keys) for name, keys in found.items()}


def exposition_with_traffic(namesrv: str, broker_addr: str, metrics_addr: str) -> dict[str, frozenset[str]]:
    """Java producer and consumer traffic on a new topic, scraped while the consumer is online."""
    topic, group = uid("NmSame"), uid("nm_same")
    create_topic(broker_addr, topic, queues=2, namesrv_addr=namesrv)
    peer = JavaPeer(namesrv)
    peer.produce(topic, 5, mode="sync", extra=SLOW_OK)
    with peer.start_consumer(topic, 1000, group=group, timeout_ms=120_000) as c:
        c.wait_started(timeout=WAIT)
        c.wait_for(5, timeout=WAIT)

        def scraped() -> dict[str, frozenset[str]] | None:
            text = urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=30).read().decode()
            keys = sample_label_keys(text)
            # the lag and connection gauges appear once the consumer's heartbeat is in
            return keys if "rocketmq_consumer_lag_messages" in keys and "rocketmq_consumer_connections" in keys \
                else None

        keys = wait_for(scraped, "the consumer's gauges in the exposition", WAIT)
        c.stop()
    return keys


def test_same_samples_and_labels_as_the_official_broker(cluster: Cluster,
                                                         reference_cluster_factory: Any) -> None:
    """The official 5.3.3 broker with metricsExporterType=PROM and rmqwire's under the same
    traffic: every sample name the official one exposes (outside POP and the timer wheel) is
    exposed by rmqwire's with the same label names."""
    port = pick_ports()
    official = reference_cluster_factory(broker_conf={**PROM_PROPS, "metricsPromExporterPort": str(port)})
    theirs = exposition_with_traffic(official.namesrv_addr, official.broker_addr, f"127.0.0.1:{port}")
    ours = exposition_with_traffic(cluster.namesrv_addr, cluster.broker.address, cluster.broker_metrics)
    assert len(theirs) >= 20, sorted(theirs)
    missing = sorted(set(theirs) - set(ours))
    assert not missing, f"rmqwire lacks {missing}"
    differ = {name: (sorted(theirs[name]), sorted(ours[name])) for name in theirs if theirs[name] != ours[name]}
    assert not differ, differ


# ---- NameServer, exposition format ---------------------------------------------------------------

def test_namesrv_gauges_and_rpc(cluster: Cluster, prom: Prometheus) -> None:
    prom_value(prom, 'rocketmq_namesrv_live_brokers{cluster="DefaultCluster",node_type="namesrv"}', 1)
    topics = len(cluster.standalone.namesrv.routes.topic_queue_table)
    assert topics > 0
    wait_for(lambda: prom.query('rocketmq_topic_number{node_type="namesrv"}'), "the namesrv topic gauge", WAIT)
    registers = prom.query('sum(rocketmq_rpc_latency_milliseconds_count{node_type="namesrv",'
                           'request_code="register_broker",response_code="success"})')
    assert float(registers[0]["value"][1]) >= 1


@pytest.mark.parametrize("which", ["broker", "namesrv", "client"])
def test_promtool_accepts_the_exposition(cluster: Cluster, client_registry: tuple[CollectorRegistry, str],
                                         which: str) -> None:
    addr = {"broker": cluster.broker_metrics, "namesrv": cluster.namesrv_metrics, "client": client_registry[1]}[which]
    text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=30).read().decode()
    assert "rocketmq_" in text
    result = promtool("check", "metrics", input=text)
    # Exit 1 is a malformed exposition; 3 is lint advice, which may only be about the
    # millisecond units the official broker's names carry (rocketmq_rpc_latency_milliseconds).
    assert result.returncode in (0, 3), result.stdout + result.stderr
    advice = [line for line in result.stdout.splitlines() if line.strip()]
    assert all('use base unit "seconds" instead of "milliseconds"' in line for line in advice), result.stdout
