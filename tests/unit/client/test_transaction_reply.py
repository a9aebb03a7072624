"""Transactions, the broker's transaction check, request-reply and write flow control, against the
in-memory cluster (fake_cluster)."""

from __future__ import annotations

from typing import Any

from fake_cluster import World
from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.message import LocalTransactionState, Message, SendStatus
from rmqwire.client.producer import Producer
from rmqwire.client.producer.transaction import TransactionProducer
from rmqwire.codec.commands.send import PushReplyMessageToClient
from rmqwire.codec.commands.transaction import CheckTransactionState
from rmqwire.codec.ids import create_offset_msg_id
from rmqwire.codec.message import (
    MessageExt,
    decode_properties,
    encode_message,
    encode_properties,
)
from rmqwire.errors import MQClientError, RequestTimeoutError

_t = SynchronousTestCase()


def started(w: World, cls: type = Producer, **kw: Any) -> Any:
    p = cls(w.reactor, "txg", namesrv_addr=w.namesrv_addr, client_ip="10.0.0.1", **kw)
    d = p.start()
    w.run()
    _t.successResultOf(d)
    return p


def broker_channel(w: World) -> Any:
    (proto,) = w.servers[w.brokers["broker-a"].port].channels
    return proto


def test_commit_rollback_unknown_and_the_local_exception() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, TransactionProducer)

    def boom(m: Message, arg: Any) -> Any:
        raise RuntimeError("db down")

    cases = [(lambda m, a: LocalTransactionState.COMMIT_MESSAGE, 8),
             (lambda m, a: LocalTransactionState.ROLLBACK_MESSAGE, 12),
             (lambda m, a: None, 0),
             (boom, 0)]
    for fn, code in cases:
        m = Message("T", b"x", delay_level=3)
        d = p.send_message_in_transaction(m, fn, arg=1)
        w.run()
        r = _t.successResultOf(d)
        half = w.sends[-1]
        props = decode_properties(half.header.i)
        assert half.header.f == 4  # PREPARED
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "txg" and "DELAY" not in props
        end = w.brokers["broker-a"].end_transactions[-1]
        h = end.header
        assert (h.commit_or_rollback, h.producer_group, h.msg_id, h.tran_state_table_offset) == (
            code, "txg", m.unique_key, r.queue_offset)
        assert h.commit_log_offset == 1000 + r.queue_offset and h.bname == "broker-a"
        assert h.from_transaction_check is False and h.topic == "T"
        assert r.status is SendStatus.SEND_OK
    assert "executeLocalTransactionBranch exception: RuntimeError: db down" in end.remark
    assert r.local_transaction_state is LocalTransactionState.UNKNOW


def test_flush_status_rolls_back_without_running_the_local_transaction() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, TransactionProducer)
    w.brokers["broker-a"].fail_next = [10]
    ran = []
    d = p.send_message_in_transaction(Message("T", b"x"), lambda m, a: ran.append(m))
    w.run()
    r = _t.successResultOf(d)
    assert ran == [] and r.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
    assert w.brokers["broker-a"].end_transactions[-1].header.commit_or_rollback == 12


def test_check_transaction_state_is_answered_on_the_asking_connection() -> None:
    w = World()
    w.add_topic("T")
    asked = []

    def check(msg: MessageExt) -> Any:
        asked.append(msg)
        return defer.succeed(LocalTransactionState.COMMIT_MESSAGE)

    p = started(w, TransactionProducer, check_listener=check)
    d = p.send(Message("T", b"warm"))  # opens the connection the broker will call back on
    w.run()
    _t.successResultOf(d)
    half = MessageExt(topic="T", body=b"half", properties={"PGROUP": "txg", "UNIQ_KEY": "U1",
                                                           "TRAN_MSG": "true"},
                      store_host=("127.0.0.1", 10911), commit_log_offset=77)
    req = CheckTransactionState.request(
        dict(topic="T", tran_state_table_offset=5, commit_log_offset=77, msg_id="U1",
             transaction_id="U1", offset_msg_id=create_offset_msg_id(("127.0.0.1", 10911), 77),
             bname="broker-a"),
        encode_message(half))
    broker_channel(w).invoke_oneway(req)
    w.run()
    (msg,) = asked
    assert (msg.body, msg.unique_key) == (b"half", "U1")
    (end,) = w.brokers["broker-a"].end_transactions
    h = end.header
    assert (h.commit_or_rollback, h.from_transaction_check, h.tran_state_table_offset,
            h.commit_log_offset, h.msg_id, h.transaction_id, h.producer_group) == (
        8, True, 5, 77, "U1", "U1", "txg")


def test_request_gets_the_pushed_reply() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    req = Message("T", b"ping")
    d = p.request(req, timeout=3.0)
    w.run()
    sent = decode_properties(w.sends[-1].header.i)
    assert sent["REPLY_TO_CLIENT"] == p.instance.client_id and sent["TTL"] == "3000"
    cid = sent["CORRELATION_ID"]
    push = PushReplyMessageToClient.request(dict(
        producer_group="r", topic="DefaultCluster_REPLY_TOPIC", default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1, flag=0,
        properties=encode_properties({"CORRELATION_ID": cid, "MSG_TYPE": "reply"}),
        born_host="10.0.0.2:1234", store_host="127.0.0.1:10911", store_timestamp=2), b"pong")
    answered = broker_channel(w).invoke(push, 3.0)
    w.run()
    assert _t.successResultOf(answered).code == 0
    reply = _t.successResultOf(d)
    assert reply.body == b"pong" and reply.born_host == ("10.0.0.2", 1234)
    assert "ARRIVE_TIME" in reply.properties


def test_request_without_reply_times_out_and_failed_send_says_so() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    d = p.request(Message("T", b"ping"), timeout=2.0)
    w.run()
    w.advance(2.0)
    err = _t.failureResultOf(d, RequestTimeoutError).value
    assert "send request message to <T> OK, but wait reply message timeout, 2000 ms." in str(err)
    assert err.response_code == 10006
    w.brokers["broker-a"].fail_next = [13]
    d = p.request(Message("T", b"ping"), timeout=2.0)
    w.run()
    err = _t.failureResultOf(d, MQClientError).value
    assert "send request message to <T> fail" in str(err) and err.__cause__.code == 13


def _paused_after_a_send() -> tuple[World, Any, Any]:
    """A producer with one send done on its connection, whose write gate is then paused (what the
    transport does when its write buffer is full)."""
    w = World()
    w.add_topic("T")
    p = started(w)
    d = p.send(Message("T", b"warm"))
    w.run()
    _t.successResultOf(d)
    _proto, gate = p.instance._gates["127.0.0.1:10911"]
    gate.pauseProducing()
    return w, p, gate


def test_oneway_past_a_paused_connection_holds_its_token_until_it_resumes() -> None:
    w, p, gate = _paused_after_a_send()
    tokens = p._oneway_tokens.tokens
    d = p.send_oneway(Message("T", b"o"))
    w.run()
    # written at once (as Java's oneway, which checks no writability), but its in-flight token
    # is held until the connection takes writes again: memory stays bounded by the tokens
    assert len(w.sends) == 2 and w.sends[-1].body == b"o"
    _t.assertNoResult(d)
    assert p._oneway_tokens.tokens == tokens - 1
    gate.resumeProducing()
    assert _t.successResultOf(d) is None and p._oneway_tokens.tokens == tokens
    d = p.send_oneway(Message("T", b"open"))
    w.run()
    assert _t.successResultOf(d) is None and p._oneway_tokens.tokens == tokens


def test_oneway_waits_behind_a_send_waiting_for_the_paused_connection() -> None:
    w, p, gate = _paused_after_a_send()
    waiting = p.instance.when_writable("127.0.0.1:10911")  # a send of the general path, first
    d = p.send_oneway(Message("T", b"o"))
    w.run()
    _t.assertNoResult(d)
    assert len(w.sends) == 1  # not written past the one that waits: call order kept
    gate.resumeProducing()
    w.run()
    _t.successResultOf(waiting)
    assert _t.successResultOf(d) is None and len(w.sends) == 2
    gate.pauseProducing()
    p.instance.when_writable("127.0.0.1:10911")
    d = p.send_oneway(Message("T", b"never"))
    w.advance(3.0)  # stays full past the send timeout
    _t.failureResultOf(d, MQClientError)
