"""The interop peers themselves work against the official RocketMQ cluster.

Later conformance tests trust these peers (the official Java client, ali-ons, the C++ client) to
judge rmqwire's servers and clients, so here each peer's output is checked against another peer's
through the official NameServer and Broker: what one side reports as sent, the other must report
as received, with the same ids, bodies, tags, keys and properties.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

import pytest

from tools.peers.cpp_peer import CppPeer, CppPeerUnavailable
from tools.peers.java_peer import JavaPeer
from tools.peers.node_peer import NodePeer, NodePeerUnavailable
from tools.peers.records import ReceivedRecord, SentRecord
from tools.peers.topics import create_topic

pytestmark = pytest.mark.conformance

USER_PROPS = {"color": "c{i}", "lang": "\u00e9t\u00e9-{i}"}


@pytest.fixture(scope="module")
def java_peer(reference_cluster):
    with JavaPeer(reference_cluster.namesrv_addr, version=reference_cluster.version) as peer:
        yield peer


@pytest.fixture(scope="module")
def node_peer(reference_cluster, reference_unavailable):
    try:
        peer = NodePeer(reference_cluster.namesrv_addr)
    except NodePeerUnavailable as e:
        reference_unavailable(f"ali-ons peer unavailable: {e}")  # fails under CI=true
    with peer:
        yield peer


@pytest.fixture(scope="module")
def cpp_peer(reference_cluster, reference_unavailable):
    try:
        peer = CppPeer(reference_cluster.namesrv_addr)
    except CppPeerUnavailable as e:
        reference_unavailable(f"C++ client peer unavailable: {e}")  # fails under CI=true
    with peer:
        yield peer


@pytest.fixture
def new_topic(reference_cluster, request) -> Callable[..., str]:
    """Create a fresh topic (4 queues) for this test and return its name."""

    def make(queues: int = 4) -> str:
        name = f"peers_{request.node.name[:40]}_{uuid.uuid4().hex[:8]}"
        name = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
        create_topic(reference_cluster.broker_addr, name, queues=queues,
                     namesrv_addr=reference_cluster.namesrv_addr)
        return name

    return make


def group(tag: str) -> str:
    return f"rmqwire_{tag}_{uuid.uuid4().hex[:8]}"


def expand(props: dict[str, str], i: int) -> dict[str, str]:
    return {k: v.replace("{i}", str(i)) for k, v in props.items()}


def by(records: Iterable, key: Callable) -> dict:
    out: dict = {}
    for r in records:
        k = key(r)
        assert k not in out, f"duplicate key {k!r}"
        out[k] = r
    return out


def assert_delivered(sent: list[SentRecord], got: list[ReceivedRecord], *,
                     key: Callable = lambda r: r.msg_id, check_queue: bool = True) -> None:
    """Every sent message arrived exactly once, with identical content."""
    assert len(got) == len(sent)
    s, g = by(sent, key), by(got, key)
    assert set(s) == set(g)
    for k, snt in s.items():
        rcv = g[k]
        assert rcv.body_sha256 == snt.body_sha256, k
        assert len(rcv.body) == snt.body_size, k
        assert rcv.tags == snt.tags, k
        assert rcv.keys == snt.keys, k
        assert rcv.user_properties == snt.user_properties, k
        assert rcv.topic == snt.topic
        if check_queue and snt.queue is not None:
            assert rcv.queue is not None and rcv.queue.queue_id == snt.queue.queue_id, k
            assert rcv.queue_offset == snt.queue_offset, k


# ---------------------------------------------------------------- Java -> Java


def test_java_sync_roundtrip(java_peer, new_topic, reference_cluster):
    topic = new_topic()
    sent = java_peer.produce(topic, 20, tag="TagA", keys="key-{i} other-{i}", props=USER_PROPS)
    assert [r.index for r in sent] == list(range(20))
    assert {r.status for r in sent} == {"SEND_OK"}
    assert len({r.msg_id for r in sent}) == 20
    for r in sent:
        assert r.queue is not None and r.queue.broker_name == reference_cluster.broker_name
        assert r.user_properties == expand(USER_PROPS, r.index)
    got = java_peer.consume(topic, 20, group=group("java_sync"), timeout_ms=60000)
    assert_delivered(sent, got)
    for r in got:
        assert r.offset_msg_id == by(sent, lambda x: x.msg_id)[r.msg_id].offset_msg_id
        assert r.queue is not None and r.queue.broker_name == reference_cluster.broker_name
        assert r.store_host == reference_cluster.broker_addr
        assert r.reconsume_times == 0
        assert r.body == f"hello-{int(r.user_properties['color'][1:])}".encode()


def test_java_batch_roundtrip_litepull(java_peer, new_topic):
    topic = new_topic()
    sent = java_peer.produce(topic, 20, mode="batch", tag="TagB", keys="bk-{i}", props=USER_PROPS,
                             body_size=300)
    assert {r.status for r in sent} == {"SEND_OK"}
    # One batch lands in one queue at consecutive offsets.
    assert len({r.queue for r in sent}) == 1
    first = min(r.queue_offset for r in sent)
    assert sorted(r.queue_offset for r in sent) == list(range(first, first + 20))
    got = java_peer.consume(topic, 20, mode="litepull", group=group("java_batch"))
    # The broker appends the batch's own properties (its UNIQ_KEY among them) to every stored
    # message, so consumers see one msgId for the whole batch while the SendResult listed 20
    # distinct ids. Match by offset message id, which stays unique.
    assert_delivered(sent, got, key=lambda r: r.offset_msg_id)
    assert len({r.msg_id for r in sent}) == 20
    received_ids = {r.msg_id for r in got}
    assert len(received_ids) == 1 and received_ids.isdisjoint({r.msg_id for r in sent})


@pytest.mark.parametrize(
    "mode, kwargs",
    [
        ("async", {}),
        ("oneway", {}),
        ("ordered", {"extra": ["--queue", "2"]}),
        ("delay", {"extra": ["--delay-level", "1"]}),
        ("transactional", {}),
        ("sync", {"compress": True, "body_size": 6000}),
    ],
)
def test_java_produce_modes(java_peer, new_topic, mode, kwargs):
    topic = new_topic()
    sent = java_peer.produce(topic, 5, mode=mode, tag="TagM", keys="mk-{i}", props=USER_PROPS, **kwargs)
    assert len(sent) == 5
    assert all(r.msg_id for r in sent)
    got = java_peer.consume(topic, 5, group=group(f"java_{mode}"), orderly=(mode == "ordered"))
    # Delayed and transactional messages are first stored in a system topic (SCHEDULE_TOPIC_XXXX,
    # RMQ_SYS_TRANS_HALF_TOPIC; the send result's offset is from there), then re-stored into the
    # real topic at a new queue offset.
    assert_delivered(sent, got, check_queue=mode not in ("delay", "transactional"))
    if mode == "oneway":
        assert {r.status for r in sent} == {"ONEWAY"}
    else:
        assert {r.status for r in sent} == {"SEND_OK"}
    if mode == "ordered":
        assert {r.queue.queue_id for r in got} == {2}
        # Orderly consumption of one queue delivers in send order.
        assert [r.queue_offset for r in got] == sorted(r.queue_offset for r in got)
    if mode == "delay":
        for r in got:
            assert r.store_timestamp - r.born_timestamp >= 900
            assert r.properties.get("DELAY") == "1"
    if mode == "transactional":
        assert all(r.transaction_id for r in sent)
        assert all(r.properties.get("TRAN_MSG") == "true" for r in got)
    if "compress" in kwargs:
        # The Java consumer inflates the body and clears the COMPRESSED flag, so the evidence that
        # the broker stored deflated bytes is the stored size (the pattern body deflates well).
        assert all(len(r.body) == 6000 and r.store_size < 3000 for r in got)


# ---------------------------------------------------------------- ali-ons <-> Java


def test_node_to_java_streaming(java_peer, node_peer, new_topic):
    topic = new_topic()
    with java_peer.start_consumer(topic, 10, group=group("node2java"), timeout_ms=60000) as consumer:
        consumer.wait_started(timeout=60)
        sent = node_peer.produce(topic, 10, tag="TagN", keys="nk-{i}", props=USER_PROPS)
        consumer.wait_for(10, timeout=60)
        got = consumer.finish()
    assert {r.status for r in sent} == {"SEND_OK"}
    # ali-ons sends no UNIQ_KEY and reports the broker's offset message id as msgId; the 5.x
    # broker then stamps a UNIQ_KEY of its own, which the Java consumer reports as msgId.
    assert all(r.msg_id == r.offset_msg_id for r in sent)
    assert all("UNIQ_KEY" not in r.properties for r in sent)
    assert_delivered(sent, got, key=lambda r: r.offset_msg_id)
    assert all(r.msg_id == r.properties["UNIQ_KEY"] != r.offset_msg_id for r in got)


def test_node_compressed_to_java(java_peer, node_peer, new_topic):
    topic = new_topic()
    sent = node_peer.produce(topic, 3, body_size=6000, compress=True, tag="TagZ")
    got = java_peer.consume(topic, 3, group=group("nodez2java"))
    assert_delivered(sent, got, key=lambda r: r.offset_msg_id)
    # Inflated by the Java consumer (which clears the flag); stored deflated.
    assert all(len(r.body) == 6000 and r.store_size < 3000 for r in got)


def test_java_to_node(java_peer, node_peer, new_topic):
    topic = new_topic()
    sent = java_peer.produce(topic, 10, tag="TagJ", keys="jk-{i}", props=USER_PROPS)
    got = node_peer.consume(topic, 10, group=group("java2node"), timeout_ms=60000)
    assert_delivered(sent, got)
    for r in got:
        assert r.offset_msg_id == by(sent, lambda x: x.msg_id)[r.msg_id].offset_msg_id


# ---------------------------------------------------------------- C++ client <-> Java


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "ordered"])
def test_cpp_to_java(java_peer, cpp_peer, new_topic, mode):
    topic = new_topic()
    extra = ["--queue", "1"] if mode == "ordered" else []
    sent = cpp_peer.produce(topic, 10, mode=mode, tag="TagC", keys="ck-{i}", props=USER_PROPS,
                            extra=extra)
    assert {r.status for r in sent} == ({"ONEWAY"} if mode == "oneway" else {"SEND_OK"})
    got = java_peer.consume(topic, 10, group=group(f"cpp2java_{mode}"))
    # The C API reports no queue in its send result, only the queue offset.
    assert_delivered(sent, got, check_queue=False)
    if mode != "oneway":
        assert sorted(r.queue_offset for r in got) == sorted(r.queue_offset for r in sent)
    if mode == "ordered":
        assert {r.queue.queue_id for r in got} == {1}


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
def test_java_to_cpp(java_peer, cpp_peer, new_topic, orderly):
    topic = new_topic()
    sent = java_peer.produce(topic, 10, tag="TagK", keys="kk-{i}", props=USER_PROPS)
    # The C API cannot list properties, so the consumer is told which ones to read back.
    got = cpp_peer.consume(topic, 10, group=group("java2cpp"), orderly=orderly, timeout_ms=60000,
                           extra=["--prop-names", ",".join(USER_PROPS)])
    assert_delivered(sent, got)
    if orderly:
        for q in {r.queue.queue_id for r in got}:
            offsets = [r.queue_offset for r in got if r.queue.queue_id == q]
            assert offsets == sorted(offsets)
