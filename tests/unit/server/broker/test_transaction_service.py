"""Broker transactions, queue locks and replies over a real store on a fake clock (no sockets):
half messages, END_TRANSACTION commit / rollback / refusals, op messages in batches, the
check-back walk (who is asked, what is skipped, TRANS_CHECK_MAX_TIME_TOPIC after the check
limit, waiting for op messages on the clock instead of blocking), RebalanceLockManager's 60 s
lifetime, and SEND_REPLY_MESSAGE pushed to the requesting client."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_broker_processors import FakeChannel, Harness, h, result_of  # noqa: F401 - h is a fixture
from twisted.internet import defer
from twisted.internet.defer import Deferred

from rmqwire.codec import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.commands.consumer import (
    LockBatchMq,
    LockBatchRequestBody,
    UnlockBatchMq,
    UnlockBatchRequestBody,
)
from rmqwire.codec.commands.heartbeat import HeartBeat, HeartbeatData, ProducerData
from rmqwire.codec.commands.send import (
    SendMessageRequestHeader,
    SendMessageV2,
    SendReplyMessageV2,
)
from rmqwire.codec.commands.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransaction,
)
from rmqwire.codec.message import decode_message, decode_messages, encode_properties
from rmqwire.model import MessageQueue
from rmqwire.remoting.config import JAVA_SERVER_CONFIG
from rmqwire.remoting.dispatcher import Dispatcher
from rmqwire.server.broker.rebalance_lock import RebalanceLockManager
from rmqwire.server.broker.topic_config import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rmqwire.server.broker.transaction.util import (
    CHECK_GROUP,
    check_immunity_time,
    end_immunity_time,
)

PGROUP = "txpg"


class ReplyingChannel(FakeChannel):
    """A producer connection that answers the broker's two-way calls with ``code``."""

    def __init__(self, peer: str = "127.0.0.1:50001", code: int = ResponseCode.SUCCESS) -> None:
        super().__init__(peer)
        self.code = code
        self.calls: list[RemotingCommand] = []

    def invoke(self, cmd: RemotingCommand, timeout: float) -> Deferred[RemotingCommand]:
        self.calls.append(cmd)
        return defer.succeed(cmd.response_to(self.code))


@dataclasses.dataclass
class Tx:
    h: Harness
    producer: FakeChannel
    offset_ms: list[int]

    @property
    def broker(self) -> Any:
        return self.h.broker

    def later(self, ms: int) -> None:
        """Move the broker's idea of now (the check compares it with born/store times)."""
        self.offset_ms[0] += ms

    def send_half(self, body: bytes, *, topic: str = "TT", props: dict[str, str] | None = None) -> RemotingCommand:
        properties = {"WAIT": "true", "TAGS": "TagT", "TRAN_MSG": "true", "PGROUP": PGROUP, **(props or {})}
        header = SendMessageRequestHeader(
            producer_group=PGROUP, topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
            sys_flag=0x4, born_timestamp=int(time.time() * 1000), flag=0, properties=encode_properties(properties),
            reconsume_times=0, unit_mode=False, batch=False)
        r = self.h.answer(SendMessageV2, header.to_v2(), body=body, channel=self.producer)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return r

    def end(self, sent: RemotingCommand, state: int, *, group: str = PGROUP, from_check: bool = False,
            commit_log_offset: int | None = None, queue_offset: int | None = None) -> Any:
        ext = sent.ext_fields
        cl = commit_log_offset if commit_log_offset is not None else int(ext["msgId"][-16:], 16)
        req = EndTransaction.request(
            language=LanguageCode.JAVA, producer_group=group, tran_state_table_offset=(
                queue_offset if queue_offset is not None else int(ext["queueOffset"])),
            commit_log_offset=cl, commit_or_rollback=state, from_transaction_check=from_check,
            msg_id=ext.get("transactionId", ""), transaction_id=ext.get("transactionId"), topic="TT")
        # as a two-way request, so the test sees the answer the Java processor gives
        req = dataclasses.replace(req, flag=0)
        results: list[Any] = []
        self.h.raw(req, self.producer).addBoth(results.append)
        return results[0] if results else None

    def messages(self, topic: str, queue_id: int = 0) -> list[Any]:
        got = self.broker.store.get_message("probe", topic, queue_id, 0, 64)
        return [decode_message(b, decompress=False) for b in got.message_buffers] if got else []

    def check(self, *, timeout: int = 6000, check_max: int = 15) -> Deferred[None]:
        svc = self.broker.transaction_check_service
        return self.broker.transactional_message_service.check(timeout, check_max, svc.listener)

    def checks(self) -> list[RemotingCommand]:
        return [c for c in self.producer.oneway if c.code == RequestCode.CHECK_TRANSACTION_STATE]


@pytest.fixture
def tx(h: Harness) -> Iterator[Tx]:  # noqa: F811 - the imported fixture
    broker = h.broker
    dispatcher = Dispatcher.for_config(
        JAVA_SERVER_CONFIG, broker.admin_processor, broker.send_processor, broker.pull_processor,
        broker.consumer_manage_processor, broker.client_manage_processor, broker.end_transaction_processor,
        broker.reply_processor)
    h = dataclasses.replace(h, dispatcher=dispatcher)
    offset = [0]
    broker.now_ms = lambda: int(time.time() * 1000) + offset[0]
    broker.store._now_ms = broker.now_ms  # store timestamps on the same moved clock
    producer = ReplyingChannel()
    r = h.answer(HeartBeat, body=HeartbeatData(client_id="127.0.0.1@tx", producer_data_set=[
        ProducerData(group_name=PGROUP)]), channel=producer)
    assert r.code == ResponseCode.SUCCESS
    h.create_topic("TT")
    yield Tx(h, producer, offset)
    broker.transactional_message_service.shutdown()


# --------------------------------------------------------------------------- half / commit / rollback


def test_half_message_is_parked_then_committed(tx: Tx) -> None:
    sent = tx.send_half(b"one", props={"color": "red"})
    (half,) = tx.messages(TRANS_HALF_TOPIC)
    assert half.properties["REAL_TOPIC"] == "TT" and half.properties["REAL_QID"] == "1"
    assert half.properties["__transactionId__"] == half.properties["UNIQ_KEY"]
    assert half.sys_flag & 0xC == 0 and tx.messages("TT", 1) == []
    r = tx.end(sent, 8)
    assert r.code == ResponseCode.SUCCESS, r.remark
    (done,) = tx.messages("TT", 1)
    assert done.body == b"one" and done.sys_flag & 0xC == 0x8 and done.tags == "TagT"
    assert done.prepared_transaction_offset == half.commit_log_offset
    # the official broker keeps the half message's properties string (REAL_TOPIC and TRAN_MSG too)
    assert done.properties["TRAN_MSG"] == "true" and done.properties["REAL_TOPIC"] == "TT"
    assert done.properties["color"] == "red" and done.unique_key == half.unique_key
    # the op message follows after transactionOpBatchInterval (3 s), on the reactor's clock
    assert tx.messages(TRANS_OP_HALF_TOPIC) == []
    tx.h.clock.advance(3.1)
    (op,) = tx.messages(TRANS_OP_HALF_TOPIC)
    assert (op.tags, op.body, op.queue_id) == ("d", b"0,", 0)


def test_rollback_writes_only_the_op_message(tx: Tx) -> None:
    a, b = tx.send_half(b"a"), tx.send_half(b"b")
    assert tx.end(a, 12).code == ResponseCode.SUCCESS
    assert tx.end(b, 12).code == ResponseCode.SUCCESS
    tx.h.clock.advance(3.1)
    assert tx.messages("TT", 1) == []
    (op,) = tx.messages(TRANS_OP_HALF_TOPIC)  # both offsets in one batch
    assert op.body == b"0,1,"


def test_unknown_state_changes_nothing_and_is_not_answered(tx: Tx) -> None:
    sent = tx.send_half(b"u")
    assert tx.end(sent, 0) is None
    tx.h.clock.advance(3.1)
    assert tx.messages("TT", 1) == [] and tx.messages(TRANS_OP_HALF_TOPIC) == []


def test_end_transaction_refusals(tx: Tx) -> None:
    sent = tx.send_half(b"x")
    r = tx.end(sent, 8, group="other")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    r = tx.end(sent, 8, queue_offset=5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
    r = tx.end(sent, 8, commit_log_offset=10**9)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    assert tx.messages("TT", 1) == []
    # past its own immunity time only a check answer may resolve it
    immune = tx.send_half(b"i", props={"CHECK_IMMUNITY_TIME_IN_SECONDS": "10"})
    tx.later(11_000)
    assert tx.end(immune, 8).code == ResponseCode.ILLEGAL_OPERATION
    assert tx.end(immune, 8, from_check=True).code == ResponseCode.SUCCESS


def test_slave_refuses_end_transaction(tx: Tx) -> None:
    sent = tx.send_half(b"s")
    tx.broker.settings.store_extras.broker_role = "SLAVE"
    assert tx.end(sent, 8).code == ResponseCode.SLAVE_NOT_AVAILABLE


# --------------------------------------------------------------------------- the check


def test_check_asks_the_producer_about_an_old_unresolved_half(tx: Tx) -> None:
    resolved = tx.send_half(b"resolved")
    tx.send_half(b"pending")
    tx.end(resolved, 8)
    tx.h.clock.advance(3.1)  # its op message is written
    tx.later(7000)  # both are older than transactionTimeOut (6 s)
    d = tx.check()
    tx.h.clock.advance(1.1)  # op messages older than the round: Java waits a second for newer ones
    result_of(d)
    (check,) = tx.checks()
    hdr = CheckTransactionStateRequestHeader.from_ext_fields(check.ext_fields)
    (msg,) = decode_messages(check.body)
    assert (msg.topic, msg.queue_id, msg.body) == ("TT", 1, b"pending")
    assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert hdr.msg_id == hdr.transaction_id == msg.unique_key and hdr.topic == TRANS_HALF_TOPIC
    # the question is about the copy re-stored at the end of the half queue
    halves = tx.messages(TRANS_HALF_TOPIC)
    assert len(halves) == 3 and halves[2].body == b"pending"
    assert (hdr.tran_state_table_offset, hdr.commit_log_offset) == (2, halves[2].commit_log_offset)
    assert hdr.offset_msg_id == halves[2].offset_msg_id
    om = tx.broker.consumer_offset_manager
    assert om.query_offset(CHECK_GROUP, TRANS_HALF_TOPIC, 0) == 2
    assert om.query_offset(CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0) == 1
    # the producer's answer (fromTransactionCheck) names the new copy and commits it
    r = tx.end(resolved, 8, from_check=True,
               commit_log_offset=hdr.commit_log_offset, queue_offset=hdr.tran_state_table_offset)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert [m.body for m in tx.messages("TT", 1)] == [b"resolved", b"pending"]
    tx.h.clock.advance(3.1)
    tx.later(7000)
    d = tx.check()
    tx.h.clock.advance(1.1)  # the walk waits a second for op messages, on the clock
    result_of(d)
    assert len(tx.checks()) == 1


def test_young_half_messages_wait(tx: Tx) -> None:
    tx.send_half(b"young")
    tx.later(1000)
    result_of(tx.check())
    assert tx.checks() == []
    assert tx.broker.consumer_offset_manager.query_offset(CHECK_GROUP, TRANS_HALF_TOPIC, 0) == -1


def test_check_limit_parks_the_half_in_trans_check_max_time_topic(tx: Tx) -> None:
    tx.send_half(b"never")
    for _ in range(3):
        tx.later(7000)
        d = tx.check(check_max=2)
        tx.h.clock.advance(1.1)
        result_of(d)
    assert len(tx.checks()) == 2
    (parked,) = tx.messages(TRANS_CHECK_MAX_TIME_TOPIC)
    assert parked.body == b"never" and parked.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert parked.properties["REAL_TOPIC"] == "TT"
    assert tx.broker.topic_config_manager.select(TRANS_CHECK_MAX_TIME_TOPIC).perm == 6


def test_check_waits_for_op_messages_without_blocking(tx: Tx) -> None:
    """A due half whose op messages are older than the round waits a second for newer ones: a
    timed wait on the reactor, so the check's Deferred is pending until the clock moves."""
    a, b = tx.send_half(b"a"), tx.send_half(b"b")
    tx.end(a, 12)
    tx.h.clock.advance(3.1)
    tx.later(7000)
    d = tx.check()
    assert not d.called and tx.checks() == []
    tx.h.clock.advance(1.1)
    result_of(d)
    assert [decode_messages(c.body)[0].body for c in tx.checks()] == [b"b"]
    assert b is not None


def test_no_producer_connection_no_check(tx: Tx) -> None:
    tx.send_half(b"orphan")
    tx.producer.close()
    tx.broker._channel_closed(tx.producer)
    tx.later(7000)
    result_of(tx.check())
    assert tx.checks() == []


def test_immunity_time_readings() -> None:
    assert end_immunity_time("10", 6000) == 10_000 and end_immunity_time("2", 6000) == 6000
    assert end_immunity_time("x", 6000) == 6000
    assert check_immunity_time("-1", 6000) == 6000 and check_immunity_time("2", 6000) == 2000
    assert check_immunity_time("bad", 6000) == 6000


def test_periodic_check_service_runs_on_the_interval(tx: Tx) -> None:
    broker = tx.broker
    broker.settings.broker.transaction_check_interval = 5000
    svc = broker.transaction_check_service
    svc.start()
    try:
        tx.send_half(b"late")
        tx.later(7000)
        tx.h.clock.advance(5.0)
        assert svc.rounds == 1 and len(tx.checks()) == 1
    finally:
        svc.stop()


# --------------------------------------------------------------------------- queue locks


def test_rebalance_locks_live_60_seconds() -> None:
    now = [0]
    locks = RebalanceLockManager(clock=lambda: now[0])
    q0, q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    assert locks.try_lock_batch("g", [q0, q1], "c1") == [q0, q1]
    assert locks.try_lock_batch("g", [q0, q1], "c2") == []
    assert not locks.is_lock_all_expired("g")
    now[0] = 59_000
    assert locks.try_lock_batch("g", [q0], "c1") == [q0]  # renewed
    now[0] = 60_001
    assert locks.try_lock_batch("g", [q0, q1], "c2") == [q1]  # q1 lapsed, q0 was renewed
    locks.unlock_batch("g", [q0], "c2")  # not c2's: stays
    assert locks.try_lock_batch("g", [q0], "c2") == []
    locks.unlock_batch("g", [q0], "c1")
    assert locks.try_lock_batch("g", [q0], "c2") == [q0]
    now[0] = 200_000
    assert locks.is_lock_all_expired("g") and locks.is_lock_all_expired("other")


# --------------------------------------------------------------------------- replies


def _reply(tx: Tx, props: dict[str, str], channel: FakeChannel | None = None) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="replier", topic="TT", default_topic="TBW102", default_topic_queue_nums=4, queue_id=-1,
        sys_flag=0, born_timestamp=1_700_000_000_000, flag=0,
        properties=encode_properties({"MSG_TYPE": "reply", "CORRELATION_ID": "c-1", **props}),
        reconsume_times=0, unit_mode=False, batch=False)
    return tx.h.answer(SendReplyMessageV2, header.to_v2(), body=b"answer", channel=channel or FakeChannel())


def test_reply_is_pushed_to_the_requester_and_stored(tx: Tx) -> None:
    r = _reply(tx, {"REPLY_TO_CLIENT": "127.0.0.1@tx"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    (push,) = tx.producer.calls
    assert push.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and push.body == b"answer"
    ext = push.ext_fields
    assert ext["topic"] == "TT" and ext["producerGroup"] == "replier" and ext["storeHost"] == "127.0.0.1:10911"
    assert "PUSH_REPLY_TIME" in ext["properties"] and "CORRELATION_ID\x01c-1" in ext["properties"]
    stored = [m for q in range(4) for m in tx.messages("TT", q)]
    (m,) = stored
    assert m.body == b"answer" and "PUSH_REPLY_TIME" not in m.properties and "UNIQ_KEY" not in m.properties
    assert r.ext_fields["queueOffset"] == "0" and r.ext_fields["msgId"] == m.offset_msg_id


def test_reply_without_requester(tx: Tx) -> None:
    r = _reply(tx, {})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")
    r = _reply(tx, {"REPLY_TO_CLIENT": "nobody"})
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == "push reply message fail, channel of <nobody> not found."
    tx.producer.code = ResponseCode.SYSTEM_ERROR
    r = _reply(tx, {"REPLY_TO_CLIENT": "127.0.0.1@tx"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "push reply message to 127.0.0.1@txfail.")
    tx.broker.settings.broker.store_reply_message_enable = False
    before = sum(len(tx.messages("TT", q)) for q in range(4))
    tx.producer.code = ResponseCode.SUCCESS
    assert _reply(tx, {"REPLY_TO_CLIENT": "127.0.0.1@tx"}).ext_fields["msgId"] == "0"
    assert sum(len(tx.messages("TT", q)) for q in range(4)) == before


def test_lock_batch_mq_on_the_wire(tx: Tx) -> None:
    q = [MessageQueue("TT", "broker-t", i) for i in range(3)]
    r = tx.h.answer(LockBatchMq, body=LockBatchRequestBody(consumer_group="og", client_id="c1", mq_set=q[:2]))
    assert sorted(m.queue_id for m in LockBatchMq.parse_response(r).body.lock_ok_mq_set) == [0, 1]
    r = tx.h.answer(LockBatchMq, body=LockBatchRequestBody(consumer_group="og", client_id="c2", mq_set=q))
    assert [m.queue_id for m in LockBatchMq.parse_response(r).body.lock_ok_mq_set] == [2]
    r = tx.h.answer(UnlockBatchMq, body=UnlockBatchRequestBody(consumer_group="og", client_id="c1", mq_set=q[:1]))
    assert r.code == ResponseCode.SUCCESS
    r = tx.h.answer(LockBatchMq, body=LockBatchRequestBody(consumer_group="og", client_id="c2", mq_set=q))
    assert sorted(m.queue_id for m in LockBatchMq.parse_response(r).body.lock_ok_mq_set) == [0, 2]


def test_pending_op_messages_are_written_at_shutdown(tx: Tx) -> None:
    tx.end(tx.send_half(b"last"), 12)
    assert tx.messages(TRANS_OP_HALF_TOPIC) == []
    tx.broker.transactional_message_service.shutdown()
    (op,) = tx.messages(TRANS_OP_HALF_TOPIC)
    assert op.body == b"0,"
