"""rmqwire's Broker judged by the official RocketMQ 5.3.3 clients and tools.

Against an rmqwire Broker registered with the official NameServer, and with rmqwire's NameServer:

- the official Java producer's sync, async, oneway, batch and ordered sends succeed; official push
  and lite-pull consumers receive everything with equal bodies, tags, keys, properties and ids;
- a topic unknown to the broker is created from TBW102 on the first send;
- long polling: a Java consumer whose pull the broker holds gets a new message at once (the
  pull is woken by the arrival, not answered at its 15 s suspend timeout);
- ali-ons and the C++ client produce and consume;
- mixed cluster: an official Broker and an rmqwire Broker serve one topic under one NameServer; a
  Java producer spreads messages over both and one Java consumer group reads all of them;
- official mqadmin updateTopic, topicList, topicRoute, topicStatus, brokerStatus,
  getBrokerConfig and clusterList work against it;
- the official benchmark Producer sends with no failure and the benchmark Consumer drains it;
- crashes: ``rmqwire broker`` (a process) killed with SIGKILL during a send loop loses no
  acknowledged message (SYNC_FLUSH and ASYNC_FLUSH), none is corrupt, a torn tail is recovered.

The rmqwire brokers of the first groups run in this process (the blocking facade's reactor
thread, so tests can look at the held pulls); the crash tests run ``rmqwire broker`` processes.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rmqwire.client.blocking import call, ensure_reactor
from rmqwire.codec import RequestCode, ResponseCode
from rmqwire.model import MessageQueue
from rmqwire.server.broker import Broker, BrokerSettings
from rmqwire.server.namesrv import NameServer, NamesrvSettings
from tools.bench.broker.bench import parse_reports
from tools.peers.cpp_peer import CppPeer, CppPeerUnavailable
from tools.peers.java_peer import JavaPeer
from tools.peers.node_peer import NodePeer, NodePeerUnavailable
from tools.peers.records import ReceivedRecord, SentRecord
from tools.peers.topics import create_topic, wait_for_route
from tools.reference import jars
from tools.reference.benchmark import (
    ensure_benchmark_jars,
    parse_consumer_reports,
    run_producer,
    start_consumer,
)
from tools.reference.cluster import ReferenceCluster, _live
from tools.reference.jars import ReferenceUnavailable
from tools.reference.mqadmin import (
    parse_cluster_list,
    parse_topic_list,
    parse_topic_route,
    parse_topic_status,
    parse_update_topic,
    run_mqadmin,
)
from tools.reference.wire import request
from tools.rmqwire_broker import RmqwireBroker

pytestmark = pytest.mark.conformance

USER_PROPS = {"color": "c{i}", "lang": "\u00e9t\u00e9-{i}"}
SIZES = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(30_000 * 20)}


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- clusters


class OfficialNamesrv(ReferenceCluster):
    """The official NameServer alone (brokers are added with ``add_broker``)."""

    def start(self) -> OfficialNamesrv:
        jars.ensure_jars(self.version)
        jars.java_bin()
        _live.add(self)
        try:
            self._prepare_dirs()
            self._start_namesrv()
        except BaseException:
            self.stop()
            raise
        return self


@dataclass
class InProcessBroker:
    """An rmqwire Broker in the blocking facade's reactor thread."""

    broker: Broker
    namesrv_addr: str
    workdir: Path

    @property
    def broker_addr(self) -> str:
        return self.broker.address

    @property
    def broker_name(self) -> str:
        return self.broker.settings.broker.broker_name

    def stop(self) -> None:
        if self.broker.running:
            call(self.broker.stopService, timeout=60)


def start_broker(namesrv_addr: str, workdir: Path, name: str = "rmqwire-a",
                 props: dict[str, str] | None = None) -> InProcessBroker:
    ensure_reactor()
    from twisted.internet import reactor

    settings = BrokerSettings.from_properties({
        "brokerName": name, "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1", "listenPort": "0",
        "namesrvAddr": namesrv_addr, "storePathRootDir": str(workdir / name),
        "storePathCommitLog": str(workdir / name / "commitlog"), **SIZES, **(props or {}),
    })
    broker = Broker(reactor, settings)
    call(broker.startService, timeout=60)
    call(lambda: broker.registered, timeout=60)
    return InProcessBroker(broker, namesrv_addr, workdir)


@pytest.fixture(scope="module")
def official_namesrv(reference_unavailable) -> Iterator[OfficialNamesrv]:
    try:
        ns = OfficialNamesrv().start()
    except ReferenceUnavailable as exc:
        reference_unavailable(str(exc))
    try:
        yield ns
    finally:
        ns.stop()


@pytest.fixture(scope="module")
def rmqwire_namesrv() -> Iterator[str]:
    ensure_reactor()
    from twisted.internet import reactor

    workdir = Path(tempfile.mkdtemp(prefix="rmqwire-ns-"))
    ns = NameServer(reactor, NamesrvSettings.from_properties({
        "listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(workdir / "kv.json")}))
    call(ns.startService, timeout=30)
    try:
        yield f"127.0.0.1:{ns.port}"
    finally:
        call(ns.stopService, timeout=30)


@pytest.fixture(scope="module", params=["official-namesrv", "rmqwire-namesrv"])
def cluster(request, tmp_path_factory) -> Iterator[InProcessBroker]:
    """An rmqwire Broker registered with the official NameServer, then with rmqwire's."""
    if request.param == "official-namesrv":
        addr = request.getfixturevalue("official_namesrv").namesrv_addr
    else:
        addr = request.getfixturevalue("rmqwire_namesrv")
    b = start_broker(addr, tmp_path_factory.mktemp("broker"))
    try:
        yield b
    finally:
        b.stop()


#: The official Java clients judged against the broker: 5.3.3 (every Java test) and 4.9.7 (the
#: producer modes and the consumers, through ``@CLIENTS``); 4.9.7 sends V1/V2 headers and
#: heartbeats of its own generation.
CLIENT_VERSIONS = [jars.DEFAULT_VERSION, jars.REFERENCE_4X]
CLIENTS = pytest.mark.parametrize("java_peer", CLIENT_VERSIONS, indirect=True)


@pytest.fixture(scope="module")
def java_peer(request, cluster) -> Iterator[JavaPeer]:
    with JavaPeer(cluster.namesrv_addr, version=getattr(request, "param", jars.DEFAULT_VERSION)) as peer:
        yield peer


def new_topic(cluster: InProcessBroker, queues: int = 4, prefix: str = "T") -> str:
    topic = unique(prefix)
    create_topic(cluster.broker_addr, topic, queues=queues, namesrv_addr=cluster.namesrv_addr)
    return topic


# --------------------------------------------------------------------------- comparisons


def _expand(props: dict[str, str], i: int) -> dict[str, str]:
    return {k: v.replace("{i}", str(i)) for k, v in props.items()}


def assert_delivered(sent: list[SentRecord], got: list[ReceivedRecord], *, broker_addr: str | None,
                     key: Callable[[Any], Any] = lambda r: r.msg_id, check_queue: bool = True) -> None:
    """Every sent message arrived once, with the same body, tags, keys, properties and ids."""
    assert len(got) == len(sent)
    by_sent = {key(r): r for r in sent}
    by_got = {key(r): r for r in got}
    assert len(by_sent) == len(sent) and len(by_got) == len(got), "duplicate ids"
    assert set(by_sent) == set(by_got)
    for k, s in by_sent.items():
        g = by_got[k]
        assert g.body_sha256 == s.body_sha256, k
        assert g.tags == s.tags and g.keys == s.keys, k
        assert g.user_properties == s.user_properties, k
        assert g.topic == s.topic
        if broker_addr is not None:
            assert g.store_host == broker_addr
        if s.offset_msg_id is not None:
            assert g.offset_msg_id == s.offset_msg_id, k
        if check_queue and s.queue is not None:
            assert g.queue is not None and g.queue.queue_id == s.queue.queue_id, k
            assert g.queue_offset == s.queue_offset, k


# --------------------------------------------------------------------------- Java producer / consumers


@CLIENTS
@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch", "ordered"])
def test_java_producer_modes_push_consumer(cluster, java_peer, mode):
    topic = new_topic(cluster)
    extra = ["--queue", "2"] if mode == "ordered" else []
    sent = java_peer.produce(topic, 10, mode=mode, tag="TagA", keys="key-{i} other-{i}",
                             props=USER_PROPS, extra=extra)
    assert len(sent) == 10
    assert {r.status for r in sent} == ({"ONEWAY"} if mode == "oneway" else {"SEND_OK"})
    for r in sent:
        assert r.user_properties == _expand(USER_PROPS, r.index)
        if mode != "oneway":
            assert r.queue is not None and r.queue.broker_name == cluster.broker_name
    got = java_peer.consume(topic, 10, group=unique(f"g_{mode}"), orderly=(mode == "ordered"),
                            timeout_ms=60_000)
    if mode == "batch":
        # As the official broker, the batch's own UNIQ_KEY is appended to every record: match by
        # offset message id, which stays unique.
        assert_delivered(sent, got, broker_addr=cluster.broker_addr, key=lambda r: r.offset_msg_id)
        if java_peer.version == jars.REFERENCE_4X:
            # A 4.x batch carries no UNIQ_KEY of its own: every record keeps the id it was sent with.
            sent_ids = {r.offset_msg_id: r.msg_id for r in sent}
            assert {r.offset_msg_id: r.msg_id for r in got} == sent_ids
            assert len(set(sent_ids.values())) == 10
        else:
            assert len({r.msg_id for r in got}) == 1
        first = min(r.queue_offset for r in sent)
        assert sorted(r.queue_offset for r in sent) == list(range(first, first + 10))
    elif mode == "oneway":
        assert_delivered(sent, got, broker_addr=cluster.broker_addr, check_queue=False)
    else:
        assert_delivered(sent, got, broker_addr=cluster.broker_addr)
    if mode == "ordered":
        assert {r.queue.queue_id for r in got} == {2}
        assert [r.queue_offset for r in got] == sorted(r.queue_offset for r in got)


@CLIENTS
def test_java_lite_pull_consumer(cluster, java_peer):
    topic = new_topic(cluster)
    sent = java_peer.produce(topic, 20, tag="TagL", keys="lk-{i}", props=USER_PROPS, body_size=600)
    got = java_peer.consume(topic, 20, mode="litepull", group=unique("g_lite"), timeout_ms=60_000)
    assert_delivered(sent, got, broker_addr=cluster.broker_addr)


def test_java_tag_filter_and_compressed_body(cluster, java_peer):
    """Tag filtering happens at the consume queue (only TagB arrives); a compressed body comes
    back inflated, with the stored (deflated) size smaller than the body."""
    topic = new_topic(cluster)
    java_peer.produce(topic, 5, tag="TagA")
    sent_b = java_peer.produce(topic, 5, tag="TagB", compress=True, body_size=6000)
    got = java_peer.consume(topic, 5, group=unique("g_tag"), sub="TagB", timeout_ms=60_000)
    assert_delivered(sent_b, got, broker_addr=cluster.broker_addr)
    assert all(len(r.body) == 6000 and r.store_size < 3000 for r in got)


def test_topic_auto_created_from_tbw102(cluster, java_peer):
    topic = unique("Auto")
    sent = java_peer.produce(topic, 5, tag="TagA")
    assert {r.status for r in sent} == {"SEND_OK"}
    cfg = cluster.broker.topic_config_manager.select(topic)
    assert cfg is not None and cfg.perm == 6 and cfg.write_queue_nums == 4  # min(4, TBW102's 8)
    route = wait_for_route(cluster.namesrv_addr, topic, queues=4)
    assert [q.broker_name for q in route.queue_datas] == [cluster.broker_name]
    got = java_peer.consume(topic, 5, group=unique("g_auto"), timeout_ms=60_000)
    assert_delivered(sent, got, broker_addr=cluster.broker_addr)


def test_long_polling_wakes_a_waiting_java_consumer(cluster, java_peer):
    """The consumer's pull is held by the broker (SUSPEND); a message sent then reaches it well
    before the pull's 15 s suspend timeout, because its arrival wakes the held pull."""
    topic = new_topic(cluster, queues=1)
    hold = cluster.broker.pull_hold_service
    with java_peer.start_consumer(topic, 1, group=unique("g_lp"), timeout_ms=90_000) as consumer:
        consumer.wait_started(timeout=60)
        wait_until(lambda: call(hold.held_for, topic, 0, timeout=10), 60, "a held pull on the queue")
        woken_before = hold.woken_by_arrival
        t0 = time.monotonic()
        sent = send_one(cluster, topic)
        consumer.wait_for(1, timeout=30)
        elapsed = time.monotonic() - t0
        got = consumer.finish()
    assert [g.msg_id for g in got] == [sent]
    # The arrival answered the held pull; unwoken it would only be answered at its 15 s suspend
    # timeout (the bound leaves room for a loaded machine).
    assert hold.woken_by_arrival > woken_before
    assert elapsed < 10.0, f"delivery took {elapsed:.1f}s"


def send_one(cluster: InProcessBroker, topic: str) -> str:
    """One message from rmqwire's producer (no JVM start between the hold and the send)."""
    from rmqwire import Message, Producer

    with Producer(unique("pg_lp"), namesrv_addr=cluster.namesrv_addr) as p:
        return p.send(Message(topic, b"wake up", tags="TagW")).msg_id


def test_heartbeat_tables_and_consumer_list(cluster, java_peer):
    """While a Java consumer runs, GET_CONSUMER_LIST_BY_GROUP lists it; the client table drops
    it once its connection is gone."""
    topic = new_topic(cluster, queues=2)
    group = unique("g_hb")
    with java_peer.start_consumer(topic, 1, group=group, timeout_ms=90_000) as consumer:
        consumer.wait_started(timeout=60)
        ids = wait_until(lambda: _consumer_ids(cluster.broker_addr, group), 30, "the consumer's id")
        assert len(ids) == 1 and "@" in ids[0]
        info = call(cluster.broker.consumer_manager.get, group, timeout=10)
        assert topic in info.subscription_table and f"%RETRY%{group}" in info.subscription_table
        assert call(cluster.broker.topic_config_manager.select, f"%RETRY%{group}", timeout=10) is not None
        consumer.stop()
    wait_until(lambda: not _consumer_ids(cluster.broker_addr, group), 30, "the consumer to leave")


def _consumer_ids(broker_addr: str, group: str) -> list[str]:
    from rmqwire.codec.commands.consumer import GetConsumerListByGroupResponseBody

    reply = request(broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if reply.code != ResponseCode.SUCCESS:
        return []
    return GetConsumerListByGroupResponseBody.decode(reply.body).consumer_id_list or []


# --------------------------------------------------------------------------- other clients


def test_ali_ons_produces_and_consumes(cluster, reference_unavailable):
    try:
        peer = NodePeer(cluster.namesrv_addr)
    except NodePeerUnavailable as e:
        reference_unavailable(f"ali-ons peer unavailable: {e}")
    topic = new_topic(cluster)
    with peer:
        with peer.start_consumer(topic, 10, group=unique("g_node"), timeout_ms=90_000) as consumer:
            consumer.wait_started(timeout=60)
            sent = peer.produce(topic, 10, tag="TagN", keys="nk-{i}", props=USER_PROPS)
            consumer.wait_for(10, timeout=90)
            got = consumer.finish()
    assert {r.status for r in sent} == {"SEND_OK"}
    # ali-ons sends no UNIQ_KEY and reports the offset message id: the broker stamps a UNIQ_KEY.
    assert_delivered(sent, got, broker_addr=cluster.broker_addr, key=lambda r: r.offset_msg_id)


def test_cpp_client_produces_and_consumes(cluster, reference_unavailable):
    try:
        peer = CppPeer(cluster.namesrv_addr)
    except CppPeerUnavailable as e:
        reference_unavailable(f"C++ client peer unavailable: {e}")
    topic = new_topic(cluster)
    with peer:
        with peer.start_consumer(topic, 10, group=unique("g_cpp"), timeout_ms=90_000,
                                 extra=["--prop-names", "color,lang"]) as consumer:
            consumer.wait_started(timeout=60)
            sent = peer.produce(topic, 10, tag="TagC", keys="ck-{i}", props=USER_PROPS)
            consumer.wait_for(10, timeout=90)
            got = consumer.finish()
    assert {r.status for r in sent} == {"SEND_OK"}
    assert_delivered(sent, got, broker_addr=None, check_queue=False)


# --------------------------------------------------------------------------- mixed cluster, mqadmin


@dataclass
class Mixed:
    namesrv: OfficialNamesrv
    rmqwire: InProcessBroker
    official_addr: str
    official_name: str


@pytest.fixture(scope="module")
def mixed(official_namesrv, tmp_path_factory) -> Iterator[Mixed]:
    """The official NameServer with an rmqwire Broker and an official Broker in one cluster."""
    ours = start_broker(official_namesrv.namesrv_addr, tmp_path_factory.mktemp("mixed"), name="rmqwire-m")
    try:
        info = official_namesrv.add_broker("official-m")
        yield Mixed(official_namesrv, ours, info.addr, info.name)
    finally:
        ours.stop()


def test_mixed_cluster_one_topic_on_both_brokers(mixed):
    ns = mixed.namesrv.namesrv_addr
    topic = unique("Mixed")
    create_topic(mixed.rmqwire.broker_addr, topic, queues=2)
    create_topic(mixed.official_addr, topic, queues=2)
    route = wait_until(lambda: _route_with(ns, topic, 2), 60, "a route over both brokers")
    assert {q.broker_name for q in route.queue_datas} == {"rmqwire-m", mixed.official_name}
    with JavaPeer(ns) as peer:
        sent = peer.produce(topic, 40, tag="TagX", keys="x-{i}", props=USER_PROPS)
        assert {r.queue.broker_name for r in sent} == {"rmqwire-m", mixed.official_name}
        got = peer.consume(topic, 40, group=unique("g_mixed"), timeout_ms=90_000)
    assert len(got) == 40
    assert {r.msg_id for r in got} == {r.msg_id for r in sent}
    by_id = {r.msg_id: r for r in sent}
    for g in got:
        s = by_id[g.msg_id]
        assert (g.queue.broker_name, g.queue.queue_id, g.queue_offset) == \
            (s.queue.broker_name, s.queue.queue_id, s.queue_offset)
        assert g.body_sha256 == s.body_sha256 and g.user_properties == s.user_properties
        expected_host = mixed.rmqwire.broker_addr if s.queue.broker_name == "rmqwire-m" else mixed.official_addr
        assert g.store_host == expected_host


def _route_with(ns: str, topic: str, brokers: int) -> Any:
    from tools.reference import wire

    route = wire.get_route_info(ns, topic)
    if route is None or len({q.broker_name for q in route.queue_datas}) < brokers:
        return None
    return route


def test_mqadmin_against_rmqwire_broker(mixed):
    ns = mixed.namesrv
    ours = mixed.rmqwire.broker_addr
    topic = unique("Adm")
    up = parse_update_topic(run_mqadmin(ns, "updateTopic", "-b", ours, "-t", topic, "-r", "3", "-w", "3")
                            .check().stdout)
    assert up.broker_addrs == (ours,)
    assert up.topic_config["readQueueNums"] == "3" and up.topic_config["perm"] == "RW-"
    cfg = call(mixed.rmqwire.broker.topic_config_manager.select, topic, timeout=10)
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (3, 3, 6)
    wait_for_route(ns.namesrv_addr, topic, queues=3)
    assert topic in parse_topic_list(run_mqadmin(ns, "topicList").check().stdout)

    route = parse_topic_route(run_mqadmin(ns, "topicRoute", "-t", topic).check().stdout)
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["rmqwire-m"]
    assert {str(k): v for k, v in route["brokerDatas"][0]["brokerAddrs"].items()} == {"0": ours}
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [(3, 3, 6)]

    from rmqwire import Message, Producer

    with Producer(unique("pg_adm"), namesrv_addr=ns.namesrv_addr) as p:
        for i in range(6):
            p.send(Message(topic, b"m%d" % i), queue=MessageQueue(topic, "rmqwire-m", i % 3))
    rows = parse_topic_status(run_mqadmin(ns, "topicStatus", "-t", topic).check().stdout)
    assert sorted((r.broker_name, r.queue_id, r.min_offset, r.max_offset) for r in rows) == \
        [("rmqwire-m", q, 0, 2) for q in range(3)]

    status = run_mqadmin(ns, "brokerStatus", "-b", ours).check().stdout
    kv = _colon_table(status)
    assert kv["brokerVersionDesc"] == "V5_3_3" and kv["brokerActive"] == "true"
    assert int(kv["msgPutTotalTodayNow"]) >= 6 and "putTps" in kv and "commitLogMaxOffset" in kv

    config = run_mqadmin(ns, "getBrokerConfig", "-b", ours).check().stdout
    assert re.search(r"^brokerName\s*=\s*rmqwire-m\s*$", config, re.MULTILINE), config[:2000]
    assert re.search(r"^listenPort\s*=\s*%d\s*$" % mixed.rmqwire.broker.port, config, re.MULTILINE)

    # The official NameServer is module-wide: ``cluster[official-namesrv]``'s broker may still be
    # registered there (pytest keeps that param alive to the module end), so only this cluster's two.
    rows = parse_cluster_list(run_mqadmin(ns, "clusterList").check().stdout)
    assert {(r.cluster_name, r.broker_name, r.broker_id, r.addr, r.version) for r in rows
            if r.broker_name in ("rmqwire-m", mixed.official_name)} == {
        ("DefaultCluster", "rmqwire-m", 0, ours, "V5_3_3"),
        ("DefaultCluster", mixed.official_name, 0, mixed.official_addr, "V5_3_3"),
    }


def _colon_table(text: str) -> dict[str, str]:
    """``brokerStatus`` prints ``key : value`` lines (Java's ``%-32s: %s``)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


# --------------------------------------------------------------------------- official benchmark

#: The issue's run: the official benchmark Producer sends for 60 s (then the
#: Consumer drains what it sent). tools/bench/broker runs it for any duration.
BENCH_SECONDS = 60
BENCH_QUEUES = 4


def test_official_benchmark_producer_and_consumer(mixed, reference_unavailable):
    """The official benchmark Producer (16 threads, 1 KiB) sends to the rmqwire broker for a fixed
    time with no failed send in any of its reports; the official benchmark Consumer then drains
    the topic (its committed offsets reach the queue ends)."""
    try:
        ensure_benchmark_jars()
    except ReferenceUnavailable as exc:
        reference_unavailable(str(exc))
    ns = mixed.namesrv.namesrv_addr
    broker = mixed.rmqwire.broker_addr
    topic = unique("Bench")
    group = f"G_{topic}"
    create_topic(broker, topic, queues=BENCH_QUEUES, namesrv_addr=ns)
    produced = run_producer(ns, "-t", topic, "-w", "16", "-s", "1024", "-ri", "1000", timeout=BENCH_SECONDS)
    assert produced.timed_out, "the Producer ended before its time (it runs until stopped)"
    reports = parse_reports(produced.output)
    assert len(reports) >= BENCH_SECONDS // 2, produced.output[-2000:]
    assert [(r[3], r[4]) for r in reports] == [(0, 0)] * len(reports), produced.output[-3000:]
    ends = [int(request(broker, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
                .ext_fields["offset"]) for q in range(BENCH_QUEUES)]
    assert sum(ends) >= 1000
    offsets = mixed.rmqwire.broker.consumer_offset_manager
    for q in range(BENCH_QUEUES):  # start the group at 0 (not at the queue ends)
        call(offsets.commit_offset, "test", group, topic, q, 0, timeout=10)
    call(mixed.rmqwire.broker.subscription_group_manager.find, group, timeout=10)
    with start_consumer(ns, "-t", topic, "-g", group, "-w", "4", "-ri", "1000") as consumer:
        def drained() -> bool:
            assert consumer.alive(), f"benchmark Consumer exited:\n{consumer.output()[-2000:]}"
            return [offsets.query_offset(group, topic, q) for q in range(BENCH_QUEUES)] == ends

        wait_until(drained, 600, f"group {group} to commit offsets {ends}", interval=0.5)
        output = consumer.output()
    assert "Consumer Started." in output
    assert all(r.consume_fail == 0 for r in parse_consumer_reports(output)), output[-2000:]


# --------------------------------------------------------------------------- crashes

#: SIGKILL cycles (each restarts a broker process and runs a send loop: about 1.5 s).
CRASH_CYCLES = 20
CRASH_QUEUES = 4


def crash_body(index: int) -> bytes:
    """A body that says what it must be: any corruption is detected on read."""
    head = b"crash-%06d-" % index
    return head + hashlib.sha256(head).hexdigest().encode() * 8


@dataclass
class Acked:
    index: int
    msg_id: str
    offset_msg_id: str


def send_until_killed(namesrv: str, topic: str, broker: RmqwireBroker, first: int, kill_after: int) -> list[Acked]:
    """Send messages one by one from a thread; SIGKILL the broker once ``kill_after`` were
    acknowledged; return the acknowledged ones (the loop ends at the first failed send)."""
    from rmqwire import Message, Producer
    from rmqwire.errors import RmqwireError

    acked: list[Acked] = []
    lock = threading.Lock()
    done = threading.Event()

    def loop() -> None:
        try:
            with Producer(unique("pg_crash"), namesrv_addr=namesrv, retry_times_when_send_failed=0,
                          send_msg_timeout=3000) as p:
                i = first
                while not done.is_set():
                    try:
                        r = p.send(Message(topic, crash_body(i), tags="TagK", keys=[f"k{i}"]))
                    except RmqwireError:
                        return
                    if r.status.name != "SEND_OK":
                        return
                    with lock:
                        acked.append(Acked(i, r.msg_id or "", r.offset_msg_id or ""))
                    i += 1
        finally:
            done.set()

    t = threading.Thread(target=loop, name="crash-sender", daemon=True)
    t.start()
    try:
        wait_until(lambda: len(acked) >= kill_after or done.is_set(), 120, f"{kill_after} acknowledged sends")
        broker.kill()
    finally:
        done.set()
        t.join(60)
    assert not t.is_alive()
    with lock:
        return list(acked)


def read_all(namesrv: str, topic: str, broker_name: str) -> dict[int, list[Any]]:
    """Every stored message of the topic, pulled through the broker: index -> messages."""
    from rmqwire import QueuePuller

    out: dict[int, list[Any]] = {}
    with QueuePuller(unique("g_read"), namesrv_addr=namesrv) as puller:
        for q in range(CRASH_QUEUES):
            mq = MessageQueue(topic, broker_name, q)
            offset, end = puller.min_offset(mq), puller.max_offset(mq)
            while offset < end:
                r = puller.pull(mq, offset, 32)
                assert r.status.name == "FOUND", (mq, offset, r.status)
                for m in r.messages:
                    index = int(m.body[6:12])
                    assert m.body == crash_body(index), f"corrupt body at {mq} offset {m.queue_offset}"
                    out.setdefault(index, []).append(m)
                offset = r.next_begin_offset
    return out


@pytest.fixture
def crash_broker(rmqwire_namesrv, tmp_path, request) -> Iterator[RmqwireBroker]:
    flush = request.param
    broker = RmqwireBroker(rmqwire_namesrv, {"flushDiskType": flush}, workdir=tmp_path, name=f"crash-{flush}")
    try:
        yield broker.start()
    finally:
        broker.stop()


@pytest.mark.parametrize(("crash_broker", "cycles"), [("SYNC_FLUSH", CRASH_CYCLES), ("ASYNC_FLUSH", 5)],
                         indirect=["crash_broker"])
def test_sigkill_during_send_loop_loses_no_acknowledged_message(crash_broker, rmqwire_namesrv, cycles):
    broker = crash_broker
    topic = unique("Crash")
    create_topic(broker.addr, topic, queues=CRASH_QUEUES, namesrv_addr=rmqwire_namesrv)
    acked: list[Acked] = []
    for cycle in range(cycles):
        if cycle:
            broker.start()
            wait_for_route(rmqwire_namesrv, topic, queues=CRASH_QUEUES)
        got = send_until_killed(rmqwire_namesrv, topic, broker, len(acked) + 10_000 * cycle, 30)
        assert len(got) >= 30
        acked += got
        assert (broker.store_dir / "abort").exists()  # it did not shut down cleanly
    broker.start()
    wait_for_route(rmqwire_namesrv, topic, queues=CRASH_QUEUES)
    stored = read_all(rmqwire_namesrv, topic, broker.name)
    missing = [a.index for a in acked if a.index not in stored]
    assert missing == [], f"{len(missing)} acknowledged messages lost"
    for a in acked:
        assert any(m.msg_id == a.msg_id and m.offset_msg_id == a.offset_msg_id for m in stored[a.index])
    assert broker.stop() == 0


def test_torn_tail_is_recovered(rmqwire_namesrv, tmp_path):
    """A killed broker whose commit log ends in half a record (a torn append) starts again: the
    half record is cut off, every acknowledged message is served, the next send goes there."""
    broker = RmqwireBroker(rmqwire_namesrv, {"flushDiskType": "SYNC_FLUSH"}, workdir=tmp_path, name="torn")
    try:
        broker.start()
        topic = unique("Torn")
        create_topic(broker.addr, topic, queues=CRASH_QUEUES, namesrv_addr=rmqwire_namesrv)
        from rmqwire import Message, Producer

        with Producer(unique("pg_torn"), namesrv_addr=rmqwire_namesrv) as p:
            acked = [p.send(Message(topic, crash_body(i))) for i in range(20)]
        info = _runtime_info(broker.addr)
        end = int(info["commitLogMaxOffset"])
        broker.kill()
        segment = 64 * 1024 * 1024
        path = broker.store_dir / "commitlog" / f"{end // segment * segment:020d}"
        torn = bytearray(40)
        torn[0:4] = (300).to_bytes(4, "big")           # TOTALSIZE of a record never finished
        torn[4:8] = bytes.fromhex("DAA320A7")          # MAGIC v1
        torn[8:40] = b"\xab" * 32
        with open(path, "r+b") as f:
            f.seek(end % segment)
            f.write(torn)
        broker.start()
        wait_for_route(rmqwire_namesrv, topic, queues=CRASH_QUEUES)
        stored = read_all(rmqwire_namesrv, topic, broker.name)
        assert sorted(stored) == list(range(20))
        assert {m.msg_id for ms in stored.values() for m in ms} == {r.msg_id for r in acked}
        with Producer(unique("pg_torn2"), namesrv_addr=rmqwire_namesrv) as p:
            r = p.send(Message(topic, crash_body(20)))
        from rmqwire.codec.ids import parse_offset_msg_id

        assert parse_offset_msg_id(r.offset_msg_id).commit_log_offset == end
        assert broker.stop() == 0
    finally:
        broker.stop()


def _runtime_info(broker_addr: str) -> dict[str, str]:
    from rmqwire.codec.commands.namesrv import KVTable

    reply = request(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert reply.code == ResponseCode.SUCCESS
    return KVTable.decode(reply.body).table or {}
