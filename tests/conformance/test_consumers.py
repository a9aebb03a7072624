"""rmqwire's consumers against the official RocketMQ: what the official Java producer sends is
consumed once each with the same fields the Java consumer sees; rmqwire consumers join a group
beside a Java consumer and get exactly the queues Java's allocation gives them; retries, DLQ,
orderly, broadcasting, tag/SQL92 filters, the official mqadmin's consumer commands and
request/reply behave as with Java clients.

The shared 5.3.3 cluster (``reference_cluster``) serves every test but the ``slow`` one against
4.9.7. JVM peers are few (each costs seconds on the shared 2-core machine): the Java producer for
the field-by-field test, one Java consumer for the mixed group and as the reference view,
mqadmin for the admin commands; other messages come from rmqwire's producer.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqwire import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MessageSelector,
    Producer,
    PullConsumer,
    PushConsumer,
    create_reply_message,
)
from rmqwire.client.consumer.allocate import AllocateMessageQueueAveragely
from rmqwire.codec.commands.admin import (
    SubscriptionGroupConfig,
    UpdateAndCreateSubscriptionGroup,
    UpdateBrokerConfig,
)
from rmqwire.codec.commands.consumer import (
    GetConsumerListByGroup,
    GetConsumerRunningInfo,
)
from rmqwire.codec.commands.offset import GetMaxOffset, QueryConsumerOffset, UpdateConsumerOffset
from rmqwire.codec.java import java_string_sort_key
from tools.peers.java_consumer import JavaConsumerTool
from tools.peers.java_peer import JavaPeer
from tools.peers.records import ReceivedRecord
from tools.peers.topics import create_topic
from tools.reference import wire
from tools.reference.mqadmin import parse_topic_status, run_mqadmin

pytestmark = pytest.mark.conformance

FIRST = ConsumeFromWhere.FIRST_OFFSET
#: properties that depend on when / by whom a message was consumed
LOCAL_PROPERTIES = {"CONSUME_START_TIME"}


def uid(tag: str) -> str:
    return f"rmqwire_{tag}_{uuid.uuid4().hex[:8]}"


def wait_until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while True:
        result = cond()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


class Collector:
    """A push listener recording every delivery (thread-safe), with optional behaviour."""

    def __init__(self, result: Callable[[MessageExt, Any], ConsumeResult] | None = None) -> None:
        self.lock = threading.Lock()
        self.msgs: list[MessageExt] = []
        self.result = result

    def __call__(self, msgs: list[MessageExt], context: Any) -> ConsumeResult:
        with self.lock:
            self.msgs.extend(msgs)
        if self.result is not None:
            return self.result(msgs[0], context)
        return ConsumeResult.SUCCESS

    def __len__(self) -> int:
        with self.lock:
            return len(self.msgs)

    def snapshot(self) -> list[MessageExt]:
        with self.lock:
            return list(self.msgs)


@pytest.fixture(scope="module")
def java_peer(reference_cluster: Any) -> Iterator[JavaPeer]:
    with JavaPeer(reference_cluster.namesrv_addr, version=reference_cluster.version) as peer:
        yield peer


@pytest.fixture(scope="module")
def producer(reference_cluster: Any) -> Iterator[Producer]:
    with Producer(uid("pg"), namesrv_addr=reference_cluster.namesrv_addr) as p:
        yield p


@pytest.fixture
def new_topic(reference_cluster: Any) -> Callable[..., str]:
    def make(queues: int = 4) -> str:
        name = uid("ctopic")
        create_topic(reference_cluster.broker_addr, name, queues=queues,
                     namesrv_addr=reference_cluster.namesrv_addr)
        return name

    return make


@pytest.fixture
def push_consumers(reference_cluster: Any) -> Iterator[Callable[..., PushConsumer]]:
    """Started push consumers, all shut down at the end of the test."""
    started: list[PushConsumer] = []

    def make(group: str, topic: str, listener: Any, expression: Any = "*", *, orderly: bool = False,
             **options: Any) -> PushConsumer:
        options.setdefault("consume_from_where", FIRST)
        c = PushConsumer(group, namesrv_addr=reference_cluster.namesrv_addr, **options)
        c.subscribe(topic, expression)
        c.register_listener(listener, orderly=orderly)
        c.start()
        started.append(c)
        return c

    yield make
    for c in started:
        c.shutdown()


def assert_same_fields(ours: MessageExt, java: ReceivedRecord) -> None:
    """Everything Java's MessageExt shows, compared with what the Java consumer saw."""
    assert ours.body == java.body
    assert ours.topic == java.topic
    assert ours.tags == java.tags and ours.keys == java.keys
    assert ours.msg_id == java.msg_id and ours.offset_msg_id == java.offset_msg_id
    assert (ours.broker_name, ours.queue_id, ours.queue_offset) == (
        java.queue.broker_name, java.queue.queue_id, java.queue_offset)
    assert ours.commit_log_offset == java.commit_log_offset
    assert (ours.born_timestamp, ours.store_timestamp) == (java.born_timestamp, java.store_timestamp)
    assert "%s:%d" % ours.store_host == java.store_host
    assert ours.born_host[1] == int(java.born_host.rsplit(":", 1)[1])
    assert ours.reconsume_times == java.reconsume_times
    assert ours.sys_flag == java.sys_flag and ours.store_size == java.store_size
    mine = {k: v for k, v in ours.properties.items() if k not in LOCAL_PROPERTIES}
    theirs = {k: v for k, v in java.properties.items() if k not in LOCAL_PROPERTIES}
    assert mine == theirs


def consumer_ids(broker_addr: str, group: str) -> list[str]:
    try:
        r = wire.call(broker_addr, GetConsumerListByGroup, consumer_group=group)
    except Exception:
        return []
    return sorted(r.body.consumer_id_list or [], key=java_string_sort_key)


def queues_of(c: PushConsumer, topic: str) -> set[MessageQueue]:
    return {mq for mq in list(c.core.rebalance.process_queue_table) if mq.topic == topic}


def broker_offset(broker_addr: str, group: str, mq: MessageQueue) -> int:
    r = wire.call(broker_addr, QueryConsumerOffset, consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                  set_zero_if_not_found=False)
    return r.header.offset if r.code == 0 else -1


def max_offset(broker_addr: str, mq: MessageQueue) -> int:
    return wire.call(broker_addr, GetMaxOffset, topic=mq.topic, queue_id=mq.queue_id).header.offset


# ---- what the official Java producer sends ---------------------------------------------------


@pytest.fixture(scope="module")
def java_sent_topic(reference_cluster: Any, java_peer: JavaPeer) -> tuple[str, list[ReceivedRecord]]:
    """A topic holding every kind of message the Java producer sends, and the official Java
    consumer's view of it (the reference every rmqwire consumer is compared with)."""
    ns, version = reference_cluster.namesrv_addr, reference_cluster.version
    topic = uid("javasent")
    create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
    n = 0
    java_peer.produce(topic, 8, tag="TagA", keys="k{i} x{i}", props={"p": "v{i}", "u": "\u00e9t\u00e9{i}"},
                      body="plain-{i}-\u00e9")
    n += 8
    for ctype in ("ZLIB", "LZ4", "ZSTD"):
        with JavaPeer(ns, version=version, jvm_args=[f"-Drocketmq.message.compressType={ctype}"]) as p:
            p.produce(topic, 2, compress=True, body_size=6000, tag=ctype)
        n += 2
    java_peer.produce(topic, 8, mode="batch", tag="TagB", keys="b{i}", props={"batch": "{i}"})
    n += 8
    java_peer.produce(topic, 2, mode="delay", tag="Delayed")
    n += 2
    reference = java_peer.consume(topic, n, group=uid("javaview"))
    assert len({(r.queue.queue_id, r.queue_offset) for r in reference}) == n
    return topic, reference


def test_push_consumer_gets_what_the_java_producer_sent_with_java_fields(
        java_sent_topic: tuple[str, list[ReceivedRecord]], push_consumers: Any) -> None:
    topic, reference = java_sent_topic
    got = Collector()
    push_consumers(uid("push"), topic, got)
    wait_until(lambda: len(got) >= len(reference), 60, "every message")
    mine = {(m.queue_id, m.queue_offset): m for m in got.snapshot()}
    assert len(mine) == len(got) == len(reference)  # once each
    for rec in reference:
        assert_same_fields(mine[(rec.queue.queue_id, rec.queue_offset)], rec)
    compressed = [m for m in mine.values() if m.tags in ("ZLIB", "LZ4", "ZSTD")]
    assert len(compressed) == 6 and all(m.store_size < len(m.body) // 2 for m in compressed)


def test_pull_consumer_gets_what_the_java_producer_sent_with_java_fields(
        reference_cluster: Any, java_sent_topic: tuple[str, list[ReceivedRecord]]) -> None:
    topic, reference = java_sent_topic
    got: list[MessageExt] = []
    with PullConsumer(uid("lite"), namesrv_addr=reference_cluster.namesrv_addr, consume_from_where=FIRST) as pc:
        pc.subscribe(topic, "*")
        deadline = time.monotonic() + 60
        while len(got) < len(reference) and time.monotonic() < deadline:
            got.extend(pc.poll(timeout=1.0))
    mine = {(m.queue_id, m.queue_offset): m for m in got}
    assert len(mine) == len(got) == len(reference)
    for rec in reference:
        assert_same_fields(mine[(rec.queue.queue_id, rec.queue_offset)], rec)


def test_pull_consumer_assign_seek_commit(reference_cluster: Any, producer: Producer,
                                          new_topic: Callable[..., str]) -> None:
    topic = new_topic(queues=2)
    mq = MessageQueue(topic, reference_cluster.broker_name, 1)
    before = int(time.time() * 1000)
    for i in range(10):
        producer.send(Message(topic, f"m{i}".encode()), queue=mq)
    group = uid("assign")
    with PullConsumer(group, namesrv_addr=reference_cluster.namesrv_addr, consume_from_where=FIRST) as pc:
        pc.assign([mq])
        got: list[MessageExt] = []
        wait_until(lambda: got.extend(pc.poll(timeout=0.5)) or len(got) >= 10, 60, "ten messages")
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(10)]
        pc.seek(mq, 4)
        again: list[MessageExt] = []
        wait_until(lambda: again.extend(pc.poll(timeout=0.5)) or len(again) >= 6, 60, "six messages")
        assert [m.queue_offset for m in again] == list(range(4, 10))
        pc.seek_to_begin(mq)
        first = wait_until(lambda: pc.poll(timeout=0.5), 60, "the first message again")
        assert first[0].queue_offset == 0
        assert pc.offset_for_timestamp(mq, before) == 0
        pc.commit({mq: 7}, persist=True)
        wait_until(lambda: broker_offset(reference_cluster.broker_addr, group, mq) == 7, 30,
                   "the committed offset at the broker")
        assert pc.committed(mq) == 7


# ---- a group shared with a Java consumer -----------------------------------------------------


def test_mixed_group_splits_queues_as_java_and_survives_a_leaving_member(
        reference_cluster: Any, java_peer: JavaPeer, producer: Producer, new_topic: Callable[..., str],
        push_consumers: Any) -> None:
    broker = reference_cluster.broker_addr
    topic, group = new_topic(queues=8), uid("mixed")
    all_mqs = [MessageQueue(topic, reference_cluster.broker_name, i) for i in range(8)]
    with java_peer.start_consumer(topic, 10**6, group=group, timeout_ms=240_000) as java:
        java.wait_started()
        ours = [push_consumers(group, topic, Collector()) for _ in range(2)]
        everyone = list(ours)
        cids = {c.client_id: c for c in ours}

        def allocation_matches() -> bool:
            ids = consumer_ids(broker, group)
            if len(ids) != len(cids) + 1:
                return False
            (java_id,) = set(ids) - set(cids)
            info = wire.call(broker, GetConsumerRunningInfo, consumer_group=group, client_id=java_id,
                             jstack_enable=False, timeout=10).body
            held = {java_id: {mq for mq in info.mq_table if mq.topic == topic}}
            held.update({cid: queues_of(c, topic) for cid, c in cids.items()})
            expected = {cid: set(AllocateMessageQueueAveragely().allocate(group, cid, all_mqs, ids))
                        for cid in ids}
            return held == expected

        wait_until(allocation_matches, 90, "the queues split as Java's AllocateMessageQueueAveragely says")
        sent = [producer.send(Message(topic, f"a{i}".encode())).msg_id for i in range(40)]

        def delivered() -> collections.Counter[str]:
            ids = [m.msg_id for c in everyone for m in c.core.consume_service.listener.snapshot()]
            ids += [r.msg_id for r in java.records]
            return collections.Counter(ids)

        wait_until(lambda: set(sent) <= set(delivered()), 60, "the first batch in the group")
        leaving = ours.pop(0)
        leaving.shutdown()
        cids.pop(leaving.client_id)
        wait_until(allocation_matches, 90, "the leaving member's queues taken over")
        sent2 = [producer.send(Message(topic, f"b{i}".encode())).msg_id for i in range(40)]
        wait_until(lambda: set(sent + sent2) <= set(delivered()), 60, "the second batch in the group")
        counts = delivered()
        duplicates = {k: v for k, v in counts.items() if v > 1}
        # at-least-once: a duplicate may only come from a commit interval around the handover
        assert sum(duplicates.values()) - len(duplicates) <= 40, duplicates
        print(f"mixed group: {len(counts)} messages, {len(duplicates)} delivered twice")


# ---- retries and the DLQ ---------------------------------------------------------------------


def test_retry_reconsume_times_and_broker_computed_delay(reference_cluster: Any, producer: Producer,
                                                         new_topic: Callable[..., str], push_consumers: Any) -> None:
    topic, group = new_topic(queues=1), uid("retry")
    quick = producer.send(Message(topic, b"fails-three-times", tags="quick")).msg_id
    default = producer.send(Message(topic, b"fails-once", tags="default")).msg_id

    def behave(m: MessageExt, context: Any) -> ConsumeResult:
        if m.tags == "quick":
            context.delay_level_when_next_consume = 1  # 1 s between tries keeps the test short
            return ConsumeResult.SUCCESS if m.reconsume_times >= 3 else ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS if m.reconsume_times >= 1 else ConsumeResult.RECONSUME_LATER

    got = Collector(behave)
    push_consumers(group, topic, got)
    # Both conditions: under load the quick message's three 1 s retries can outlast the default's
    # one 10 s retry (the broker's schedule and the resend are slower, not fewer).
    wait_until(lambda: sum(m.msg_id == default for m in got.snapshot()) >= 2
               and sum(m.msg_id == quick for m in got.snapshot()) >= 4, 90,
               "the default-delay message back once and the quick one three times")
    seen = got.snapshot()
    tries = [m.reconsume_times for m in seen if m.msg_id == quick]
    assert tries == [0, 1, 2, 3]
    retried = [m for m in seen if m.reconsume_times > 0]
    assert all(m.topic == topic for m in retried)  # the retry topic is hidden from the listener
    back = next(m for m in seen if m.msg_id == default and m.reconsume_times == 1)
    # delay level 0 sent back: the broker chose 3 + reconsume times (10 s) and stored it retried
    assert back.properties["DELAY"] == "3"
    assert back.properties["REAL_TOPIC"] == f"%RETRY%{group}"
    assert back.properties["RETRY_TOPIC"] == topic


def test_always_failing_message_lands_in_the_dlq(reference_cluster: Any, producer: Producer,
                                                 new_topic: Callable[..., str], push_consumers: Any) -> None:
    topic, group = new_topic(queues=1), uid("dlq")
    sent = {producer.send(Message(topic, f"poison-{i}".encode())).msg_id for i in range(3)}

    def fail(m: MessageExt, context: Any) -> ConsumeResult:
        context.delay_level_when_next_consume = 1
        return ConsumeResult.RECONSUME_LATER

    got = Collector(fail)
    push_consumers(group, topic, got, max_reconsume_times=2)
    dlq = f"%DLQ%{group}"

    def in_dlq() -> bool:
        rows = parse_topic_status(run_mqadmin(reference_cluster, "topicStatus", "-t", dlq).stdout)
        return sum(r.max_offset for r in rows) >= 3

    wait_until(lambda: len(got) >= 9, 90, "three tries of each message")
    wait_until(in_dlq, 60, "the messages in the DLQ (mqadmin topicStatus)")
    tries = collections.Counter(m.reconsume_times for m in got.snapshot())
    assert tries == {0: 3, 1: 3, 2: 3}
    with PullConsumer(uid("dlqreader"), namesrv_addr=reference_cluster.namesrv_addr, consume_from_where=FIRST) as pc:
        pc.assign([MessageQueue(dlq, reference_cluster.broker_name, 0)])
        dead: list[MessageExt] = []
        wait_until(lambda: dead.extend(pc.poll(timeout=0.5)) or len(dead) >= 3, 60, "the DLQ's messages")
    assert {m.msg_id for m in dead} == sent
    assert all(m.reconsume_times == 3 for m in dead)


# ---- orderly and broadcasting ----------------------------------------------------------------


def test_orderly_keeps_per_queue_order_across_restart_and_two_instances(
        reference_cluster: Any, producer: Producer, new_topic: Callable[..., str], push_consumers: Any) -> None:
    topic, group = new_topic(queues=4), uid("orderly")
    mqs = [MessageQueue(topic, reference_cluster.broker_name, i) for i in range(4)]
    per_queue = 30

    def send_round(start: int, stop: int) -> None:
        for seq in range(start, stop):
            for mq in mqs:
                producer.send(Message(topic, f"{mq.queue_id}:{seq}".encode()), queue=mq)

    log: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def listener(name: str) -> Callable[..., ConsumeResult]:
        def consume(msgs: list[MessageExt]) -> ConsumeResult:
            for m in msgs:
                qid, seq = map(int, m.body.decode().split(":"))
                with lock:
                    log.append((name, qid, seq))
            return ConsumeResult.SUCCESS
        return consume

    # The official broker creates a topic@group's offset table on its first commit without a lock
    # (ConsumerOffsetManager.commitOffset: get, null, put a new map), and UPDATE_CONSUMER_OFFSETs
    # run on a thread pool: first commits of several queues at once (the oneway persist at
    # shutdown, Java's or ours) may each put a map, and all but one queue's offset are lost
    # (seen at load 17-29: [15, -1, 15, 15]). A committed queue 0 makes the table exist first.
    wire.call(reference_cluster.broker_addr, UpdateAndCreateSubscriptionGroup,
              body=SubscriptionGroupConfig(group_name=group))
    wire.call(reference_cluster.broker_addr, UpdateConsumerOffset, consumer_group=group, topic=topic,
              queue_id=0, commit_offset=0)
    send_round(0, per_queue // 2)
    first = push_consumers(group, topic, listener("a"), orderly=True)
    wait_until(lambda: len(log) >= 4 * (per_queue // 2), 60, "the first half")
    # a listener's SUCCESS reaches the offset store after its call returns (as in Java): what the
    # shutdown persists is what was committed before it
    wait_until(lambda: all(first.core.offset_store.memory_offset(mq) == per_queue // 2 for mq in mqs),
               30, "the first half committed in memory")
    first.shutdown()  # offsets persisted, queues unlocked
    wait_until(lambda: all(broker_offset(reference_cluster.broker_addr, group, mq) == per_queue // 2
                           for mq in mqs), 30, "the offsets persisted at shutdown at the broker")
    send_round(per_queue // 2, per_queue)
    push_consumers(group, topic, listener("b"), orderly=True)
    push_consumers(group, topic, listener("c"), orderly=True)
    wait_until(lambda: {(q, s) for _, q, s in log} >= {(q, s) for q in range(4) for s in range(per_queue)},
               90, "every message")
    with lock:
        entries = list(log)
    for qid in range(4):
        seqs = [s for _, q, s in entries if q == qid]
        # in order; a restart may replay a suffix only from the committed offset on
        assert sorted(set(seqs)) == list(range(per_queue))
        for a, b in zip(seqs, seqs[1:]):
            assert b == a + 1 or b <= a, f"queue {qid} jumped from {a} to {b}: {seqs}"
        assert seqs == sorted(seqs), f"queue {qid} out of order: {seqs}"


def test_broadcasting_delivers_every_message_to_every_consumer_with_local_offsets(
        reference_cluster: Any, producer: Producer, new_topic: Callable[..., str], push_consumers: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", str(tmp_path))
    topic, group = new_topic(queues=4), uid("bcast")
    collectors = [Collector(), Collector()]
    consumers = [push_consumers(group, topic, col, message_model=MessageModel.BROADCASTING,
                                instance_name=f"bcast{i}", client_ip="127.0.0.1")
                 for i, col in enumerate(collectors)]
    wait_until(lambda: all(len(queues_of(c, topic)) == 4 for c in consumers), 60, "all queues on each")
    sent = {producer.send(Message(topic, f"b{i}".encode())).msg_id for i in range(20)}
    for col in collectors:
        wait_until(lambda col=col: {m.msg_id for m in col.snapshot()} >= sent, 60, "every message")
        assert len(col) == 20
    for c in consumers:
        c.shutdown()
    for i in range(2):
        path = tmp_path / f"127.0.0.1@bcast{i}" / group / "offsets.json"
        text = path.read_text()
        assert '"offsetTable":{{"brokerName"' in text and f'"topic":"{topic}"' in text
    # no group offsets at the broker: broadcasting keeps them locally
    assert broker_offset(reference_cluster.broker_addr, group, MessageQueue(topic, reference_cluster.broker_name, 0)) == -1


# ---- filters ---------------------------------------------------------------------------------


def test_tag_and_sql92_filters(reference_cluster: Any, producer: Producer, new_topic: Callable[..., str],
                               push_consumers: Any) -> None:
    wire.call(reference_cluster.broker_addr, UpdateBrokerConfig, body=b"enablePropertyFilter=true\n")
    topic = new_topic(queues=2)
    tagged, sql = Collector(), Collector()
    push_consumers(uid("tags"), topic, tagged, "TagA || TagB")
    push_consumers(uid("sql"), topic, sql, MessageSelector.by_sql("a > 5 AND TAGS <> 'TagC'"))
    msgs = [Message(topic, f"f{i}".encode(), tags=f"Tag{'ABC'[i % 3]}", properties={"a": str(i)})
            for i in range(12)]
    for m in msgs:
        producer.send(m)
    want_tags = {m.unique_key for m in msgs if m.tags in ("TagA", "TagB")}
    want_sql = {m.unique_key for m in msgs if int(m.properties["a"]) > 5 and m.tags != "TagC"}
    wait_until(lambda: {m.msg_id for m in tagged.snapshot()} >= want_tags, 60, "the tagged messages")
    wait_until(lambda: {m.msg_id for m in sql.snapshot()} >= want_sql, 60, "the SQL92-selected messages")
    # a later message proves nothing else is on its way (each queue is consumed in offset order)
    last = [producer.send(Message(topic, b"end", tags="TagA", properties={"a": "100"}),
                          queue=MessageQueue(topic, reference_cluster.broker_name, q)).msg_id for q in range(2)]
    wait_until(lambda: set(last) <= {m.msg_id for m in tagged.snapshot()}, 60, "the end markers (tags)")
    wait_until(lambda: set(last) <= {m.msg_id for m in sql.snapshot()}, 60, "the end markers (sql)")
    assert {m.msg_id for m in tagged.snapshot()} == want_tags | set(last)
    assert {m.msg_id for m in sql.snapshot()} == want_sql | set(last)


# ---- the official mqadmin --------------------------------------------------------------------


def test_mqadmin_consumer_commands_see_rmqwire_consumers(reference_cluster: Any, producer: Producer,
                                                         new_topic: Callable[..., str], push_consumers: Any) -> None:
    topic, group = new_topic(queues=2), uid("admin")
    start_ms = int(time.time() * 1000)
    first = [producer.send(Message(topic, f"old{i}".encode())).msg_id for i in range(6)]
    got = Collector()
    c = push_consumers(group, topic, got)
    wait_until(lambda: len(got) >= 6, 60, "the first messages")
    mqs = [MessageQueue(topic, reference_cluster.broker_name, q) for q in range(2)]
    wait_until(lambda: all(broker_offset(reference_cluster.broker_addr, group, mq) ==
                           max_offset(reference_cluster.broker_addr, mq) for mq in mqs), 30,
               "the consumed offsets committed")

    progress = run_mqadmin(reference_cluster, "consumerProgress", "-g", group).check().stdout
    rows = [line.split() for line in progress.splitlines() if line.startswith(topic)]
    assert len(rows) == 2 and all(r[3] == r[4] for r in rows)  # broker offset == consumer offset

    conn = run_mqadmin(reference_cluster, "consumerConnection", "-g", group).check().stdout
    assert c.client_id in conn and "PYTHON" in conn
    assert "CONSUME_PASSIVELY" in conn and "CLUSTERING" in conn

    # not .check(): the property pullTimeDelayMillsWhenException (Java's name, printed by Java
    # consumers too) trips mqadmin.py's failure pattern
    result = run_mqadmin(reference_cluster, "consumerStatus", "-g", group, "-i", c.client_id)
    status = result.stdout
    assert result.returncode == 0 and "at org.apache" not in status + result.stderr, status + result.stderr
    assert "#Consumer Properties#" in status
    assert "#Consumer Subscription#" in status and topic in status
    assert "PROP_CONSUME_TYPE" in status and "CONSUME_PASSIVELY" in status
    assert f"%RETRY%{group}" in status

    # resetOffsetByTime moves the running consumer back: the old messages come again
    run_mqadmin(reference_cluster, "resetOffsetByTime", "-g", group, "-t", topic, "-s", str(start_ms)).check()
    wait_until(lambda: sum(m.msg_id in first for m in got.snapshot()) >= 12, 90,
               "the old messages consumed again after the reset")


# ---- request / reply -------------------------------------------------------------------------


def test_request_reply_answered_by_an_rmqwire_consumer(reference_cluster: Any, producer: Producer,
                                                       new_topic: Callable[..., str], push_consumers: Any) -> None:
    topic = new_topic(queues=2)

    def reply(m: MessageExt, context: Any) -> ConsumeResult:
        producer.send(create_reply_message(m, b"reply:" + m.body))
        return ConsumeResult.SUCCESS

    push_consumers(uid("replier"), topic, Collector(reply))
    with Producer(uid("requester"), namesrv_addr=reference_cluster.namesrv_addr) as p:
        answer = p.request(Message(topic, b"ping"), timeout=30.0)
    assert answer.body == b"reply:ping" and answer.properties.get("MSG_TYPE") == "reply"
    tool = JavaConsumerTool(reference_cluster.namesrv_addr, version=reference_cluster.version)
    with tool, tool.spawn_tool("request", topic=topic, count=2, timeout_ms=30000) as proc:
        replies = proc.finish()
    assert [r["reply"] for r in replies] == ["reply:request-0", "reply:request-1"]


# ---- 4.9.7 -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_consumers_against_rocketmq_4(reference_cluster_v4: Any) -> None:
    cluster = reference_cluster_v4
    topic = uid("v4topic")
    create_topic(cluster.broker_addr, topic, queues=4, namesrv_addr=cluster.namesrv_addr)
    with JavaPeer(cluster.namesrv_addr) as peer:  # the 5.3.3 Java client (Peer.java builds on 5.x only)
        peer.produce(topic, 10, tag="TagA", keys="k{i}", props={"p": "v{i}"})
        peer.produce(topic, 2, compress=True, body_size=6000, tag="Z")
        reference = peer.consume(topic, 12, group=uid("v4java"))
    got = Collector()
    c = PushConsumer(uid("v4push"), namesrv_addr=cluster.namesrv_addr, consume_from_where=FIRST)
    c.subscribe(topic, "*")
    c.register_listener(got)
    c.start()
    try:
        wait_until(lambda: len(got) >= 12, 90, "every message (push, 4.9.7)")
    finally:
        c.shutdown()
    mine = {(m.queue_id, m.queue_offset): m for m in got.snapshot()}
    for rec in reference:
        assert_same_fields(mine[(rec.queue.queue_id, rec.queue_offset)], rec)
    pulled: list[MessageExt] = []
    with PullConsumer(uid("v4lite"), namesrv_addr=cluster.namesrv_addr, consume_from_where=FIRST) as pc:
        pc.subscribe(topic, "TagA")
        wait_until(lambda: pulled.extend(pc.poll(timeout=0.5)) or len(pulled) >= 10, 90,
                   "the TagA messages (lite pull, 4.9.7)")
    assert {m.msg_id for m in pulled} == {r.msg_id for r in reference if r.tags == "TagA"}
