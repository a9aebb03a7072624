"""rmqwire's Broker with the official Java client (5.3.3): transactions, orderly consumption and
request-reply.

- Java TransactionMQProducer: the committed message is delivered, the rolled-back one is not,
  the unknown one is resolved by the broker's check-back (CHECK_TRANSACTION_STATE to the live
  producer, answered with END_TRANSACTION); a half message answered "unknown" at every check is
  parked in TRANS_CHECK_MAX_TIME_TOPIC after ``transactionCheckMax`` checks;
- rmqwire's own TransactionProducer gets the same service;
- two Java orderly consumers of one group, one of them restarted midway: every queue is read in
  offset order by whoever holds its lock (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ), nothing is lost;
- Java ``request()`` gets its reply from a Java replier through the broker
  (SEND_REPLY_MESSAGE_V2 -> PUSH_REPLY_MESSAGE_TO_CLIENT), and so does rmqwire's Producer.

The broker runs in this process (checks every 2 s, transaction timeout 2 s) under rmqwire's
NameServer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_broker import (  # noqa: F401
    InProcessBroker,
    new_topic,
    rmqwire_namesrv,
    start_broker,
    unique,
    wait_until,
)

from rmqwire import (
    LocalTransactionState,
    Message,
    Producer,
    SendStatus,
    TransactionProducer,
)
from rmqwire.server.broker.topic_config import TRANS_CHECK_MAX_TIME_TOPIC
from tools.peers.java_consumer import JavaConsumerTool
from tools.peers.java_peer import JavaPeer
from tools.peers.java_producer import JavaProducerTool

pytestmark = pytest.mark.conformance

TX_PROPS = {
    "transactionCheckInterval": "2000",
    "transactionTimeOut": "2000",
    "transactionOpBatchInterval": "500",
    "transactionCheckMax": "3",
}
#: What JavaPeer runs with: a JVM that starts fast (its first connection comes in seconds sooner).
QUICK_JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


@pytest.fixture(scope="module")
def broker(rmqwire_namesrv: str, tmp_path_factory: Any) -> Iterator[InProcessBroker]:  # noqa: F811
    b = start_broker(rmqwire_namesrv, Path(tmp_path_factory.mktemp("txbroker")), name="rmqwire-tx",
                     props=TX_PROPS)
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def java_peer(broker: InProcessBroker) -> Iterator[JavaPeer]:
    with JavaPeer(broker.namesrv_addr) as peer:
        yield peer


@pytest.fixture(scope="module")
def producer_tool(broker: InProcessBroker) -> Iterator[JavaProducerTool]:
    with JavaProducerTool(broker.namesrv_addr, jvm_args=QUICK_JVM) as tool:
        yield tool


def stored_count(broker: InProcessBroker, topic: str) -> int:
    store = broker.broker.store
    return sum(store.get_max_offset_in_queue(topic, q) for q in store.queue_ids(topic))


# --------------------------------------------------------------------------- transactions


def test_java_transactions_commit_rollback_and_check_back(broker, java_peer, producer_tool):
    topic = new_topic(broker)
    with producer_tool.spawn_tool("transact", group=unique("txg"), topic=topic, states="commit,rollback,unknown",
                                  check_answer="commit", checks=1, timeout_ms=90_000) as proc:
        sent = proc.finish()
        checks = [e.data for e in proc.events if e.name == "check"]
    assert [(s["state"], s["status"], s["localState"]) for s in sent] == [
        ("commit", "SEND_OK", "COMMIT_MESSAGE"), ("rollback", "SEND_OK", "ROLLBACK_MESSAGE"),
        ("unknown", "SEND_OK", "UNKNOW")]
    # only the unknown one is asked about, once, with its real topic and the broker's count
    (check,) = checks
    assert check["body"] == "tx-2-unknown" and check["topic"] == topic and check["checkTimes"] == "1"
    assert check["transactionId"] == sent[2]["transactionId"]
    got = java_peer.consume(topic, 2, group=unique("txc"), timeout_ms=60_000)
    assert sorted(r.body for r in got) == [b"tx-0-commit", b"tx-2-unknown"]
    by_body = {r.body: r for r in got}
    assert by_body[b"tx-0-commit"].msg_id == sent[0]["msgId"]
    assert by_body[b"tx-2-unknown"].msg_id == sent[2]["msgId"]
    assert all(r.properties.get("TRAN_MSG") == "true" and r.keys for r in got)
    assert stored_count(broker, topic) == 2  # the rolled-back one never reached the topic


def test_java_half_message_parked_after_the_check_limit(broker, producer_tool):
    topic = new_topic(broker)
    store = broker.broker.store
    parked_before = store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0)
    with producer_tool.spawn_tool("transact", group=unique("txmax"), topic=topic, states="unknown",
                                  check_answer="unknown", checks=3, timeout_ms=90_000) as proc:
        proc.finish()
        checks = [e.data for e in proc.events if e.name == "check"]
        # transactionCheckMax = 3: three questions, then the broker gives up on it
        wait_until(lambda: store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) > parked_before, 60,
                   "the half message in TRANS_CHECK_MAX_TIME_TOPIC")
    assert [c["checkTimes"] for c in checks] == ["1", "2", "3"]
    assert stored_count(broker, topic) == 0


def test_rmqwire_transaction_producer_against_rmqwire_broker(broker, java_peer):
    topic = new_topic(broker)
    checked: list[Any] = []
    asked = threading.Event()

    def check(msg: Any) -> LocalTransactionState:
        checked.append(msg)
        asked.set()
        return LocalTransactionState.COMMIT_MESSAGE

    with TransactionProducer(unique("pytx"), namesrv_addr=broker.namesrv_addr, check_listener=check) as p:
        states = {b"commit": LocalTransactionState.COMMIT_MESSAGE,
                  b"rollback": LocalTransactionState.ROLLBACK_MESSAGE,
                  b"unknown": LocalTransactionState.UNKNOW}
        for body, state in states.items():
            r = p.send_message_in_transaction(Message(topic, body), lambda m, a, s=state: s)
            assert r.status is SendStatus.SEND_OK and r.local_transaction_state is state
        assert asked.wait(60), "no CHECK_TRANSACTION_STATE from the broker"
        got = java_peer.consume(topic, 2, group=unique("pytxc"), timeout_ms=60_000)
    assert [m.body for m in checked][:1] == [b"unknown"] and checked[0].topic == topic
    assert sorted(r.body for r in got) == [b"commit", b"unknown"]


# --------------------------------------------------------------------------- orderly


def _in_offset_order(records: list[Any]) -> bool:
    last: dict[int, int] = {}
    for r in records:
        q = r.queue.queue_id
        if r.queue_offset <= last.get(q, -1):
            return False
        last[q] = r.queue_offset
    return True


def _lock_holders(broker: InProcessBroker, group: str) -> set[str]:
    # list() copies the reactor thread's dict in one C call, so no "changed size during iteration"
    return {e.client_id for e in list(broker.broker.rebalance_lock_manager.table.get(group, {}).values())}


def test_java_orderly_consumers_keep_queue_order_across_a_restart(broker, java_peer):
    topic = new_topic(broker)
    group = unique("orderly")
    total = 80
    stay = java_peer.start_consumer(topic, total, group=group, orderly=True, timeout_ms=240_000)
    first = java_peer.start_consumer(topic, 8, group=group, orderly=True, timeout_ms=120_000)
    second = None
    try:
        stay.wait_started(120)
        first.wait_started(120)
        sent = java_peer.produce(topic, total // 2, body="m-{i}")
        # the first instance stops after 8 messages (unlocking its queues) and comes back
        first.finish(timeout=120)
        before = _lock_holders(broker, group)
        second = java_peer.start_consumer(topic, total, group=group, orderly=True, timeout_ms=240_000)
        second.wait_started(120)
        # a started consumer has not necessarily locked its share yet: until it has, the instance that
        # stayed may take every new message (seen once at CI load), so wait for the restarted one's lock
        wait_until(lambda: _lock_holders(broker, group) - before, 120, "the restarted instance locks a queue")
        sent += java_peer.produce(topic, total // 2, body="n-{i}")
        sent_ids = {s.msg_id for s in sent}
        everyone = (stay, first, second)
        wait_until(lambda: sent_ids <= {r.msg_id for p in everyone for r in p.records}, 180,
                   "every message consumed by one of the instances")
        # the restarted instance got queues back from the one that stayed: both hold locks now
        holders = _lock_holders(broker, group)
    finally:
        for p in (stay, first, second):
            if p is not None:
                p.stop()
    assert len(sent_ids) == total
    for p in everyone:
        assert _in_offset_order(p.records), [(r.queue.queue_id, r.queue_offset) for r in p.records]
    assert first.records and second.records and stay.records
    assert len(holders) == 2, holders


# --------------------------------------------------------------------------- request / reply


def test_java_request_gets_its_reply_from_a_java_replier(broker, producer_tool):
    topic = new_topic(broker, queues=2)
    with producer_tool.spawn_tool("reply", group=unique("replier"), topic=topic, count=3,
                                  timeout_ms=120_000) as replier:
        replier.wait_started(120)
        with JavaConsumerTool(broker.namesrv_addr, jvm_args=QUICK_JVM) as tool, \
                tool.spawn_tool("request", topic=topic, count=2, timeout_ms=60_000) as proc:
            replies = proc.finish()
        assert sorted(r["reply"] for r in replies) == ["reply:request-0", "reply:request-1"]
        # MessageUtil.createReplyMessage addresses the reply to <cluster>_REPLY_TOPIC
        assert {r["topic"] for r in replies} == {"DefaultCluster_REPLY_TOPIC"}
        # rmqwire's Producer.request through the same broker and Java replier
        with Producer(unique("pyreq"), namesrv_addr=broker.namesrv_addr) as p:
            answer = p.request(Message(topic, b"ping"), timeout=60.0)
        assert answer.body == b"reply:ping" and answer.properties.get("MSG_TYPE") == "reply"
        replier.finish()
    assert broker.broker.reply_processor.pushed >= 3
    # storeReplyMessageEnable: the replies are also in the reply topic
    reply_topic = f"{broker.broker.settings.broker.broker_cluster_name}_REPLY_TOPIC"
    assert stored_count(broker, reply_topic) >= 3
