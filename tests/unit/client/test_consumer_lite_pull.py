"""The lite pull consumer core against the in-memory consumer broker: subscribe (group rebalance)
and assign, poll, seek, commit and auto-commit, LITE_PULL_MESSAGE headers, 4.x fallback."""

from __future__ import annotations

from typing import Any

import pytest
from consumer_broker import ConsumerWorld
from test_consumer_push import client_timers, settle
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.consumer.lite_pull_consumer import LitePullConsumer
from rmqwire.codec.message import MessageExt
from rmqwire.errors import MQClientError
from rmqwire.model import ConsumeFromWhere, ConsumeType, MessageQueue

_t = SynchronousTestCase()
MQ0 = MessageQueue("T", "broker-a", 0)


@pytest.fixture
def w() -> ConsumerWorld:
    world = ConsumerWorld()
    world.add_topic("T", 2)
    return world


def started(w: ConsumerWorld, **options: Any) -> LitePullConsumer:
    options.setdefault("client_ip", "10.0.0.1")
    options.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    subscribe = options.pop("subscribe", None)
    assign = options.pop("assign", None)
    c = LitePullConsumer(w.reactor, "lg", namesrv_addr=w.namesrv_addr, **options)
    if subscribe:
        c.subscribe(*subscribe)
    if assign:
        c.assign(assign)
    d = c.start()
    w.run()
    _t.successResultOf(d)
    return c


def poll(w: ConsumerWorld, c: LitePullConsumer, timeout: float = 1.0) -> list[MessageExt]:
    d = c.poll(timeout)
    for _ in range(int(timeout / 0.05) + 2):
        if d.called:
            break
        w.advance(0.05)
    return _t.successResultOf(d)


def drain(w: ConsumerWorld, c: LitePullConsumer, n: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    for _ in range(50):
        got.extend(poll(w, c))
        if len(got) >= n:
            break
    return got


def stop(w: ConsumerWorld, c: LitePullConsumer) -> None:
    d = c.shutdown()
    settle(w, 1)
    _t.successResultOf(d)
    assert not client_timers(w)


def test_subscribe_polls_batches_and_auto_commits(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    for q in (0, 1):
        b.put_many("T", q, [f"{q}-{i}".encode() for i in range(15)], tags="TagA")
    c = started(w, subscribe=("T", "TagA"))
    got = drain(w, c, 30)
    assert sorted(m.body for m in got) == sorted(f"{q}-{i}".encode() for q in (0, 1) for i in range(15))
    assert max(len(batch) for batch in [got]) and all(m.broker_name == "broker-a" for m in got)
    code, header = next((code, h) for code, h in b.pulls if h.topic == "T")
    assert code == 361 and header.max_msg_nums == 10 and header.suspend_timeout_millis == 20000
    assert header.sys_flag == 0x2 | 0x4 | 0x10 and header.subscription == "TagA" and header.sub_version == 0
    hb = b.heartbeats[-1]
    (cd,) = [cd for cd in hb.consumer_data_set if cd.group_name == "lg"]
    assert cd.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert [sd.topic for sd in cd.subscription_data_set] == ["T"]  # no retry topic for pull
    w.advance(6)  # the auto-commit interval passed: the next poll commits, the timer persists
    poll(w, c, 0.1)
    settle(w, 6)
    assert b.offsets[("lg", "T", 0)] == 15 and b.offsets[("lg", "T", 1)] == 15
    stop(w, c)


def test_assign_seek_and_manual_commit(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [f"m{i}".encode() for i in range(12)])
    c = started(w, assign=[MQ0], auto_commit=False)
    assert c.assignment() == {MQ0}
    got = drain(w, c, 12)
    assert [m.queue_offset for m in got] == list(range(12))
    d = c.seek(MQ0, 5)
    w.run()
    _t.successResultOf(d)
    again = drain(w, c, 7)
    assert [m.queue_offset for m in again] == list(range(5, 12))
    d = c.seek(MQ0, 99)
    w.run()
    assert "Seek offset illegal" in str(_t.failureResultOf(d).value)
    _t.failureResultOf(c.seek(MessageQueue("T", "broker-a", 1), 0), MQClientError)
    d = c.commit(persist=True)
    w.run()
    _t.successResultOf(d)
    assert b.offsets[("lg", "T", 0)] == 12
    d = c.commit({MQ0: 3}, persist=True)
    w.run()
    _t.successResultOf(d)
    assert b.offsets[("lg", "T", 0)] == 3
    d = c.committed(MQ0)
    w.run()
    assert _t.successResultOf(d) == 3
    d = c.offset_for_timestamp(MQ0, 0)
    w.run()
    assert _t.successResultOf(d) == 0
    with pytest.raises(MQClientError, match="mutually exclusive"):
        c.subscribe("T", "*")
    stop(w, c)


def test_pause_and_resume_and_empty_poll(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    c = started(w, assign=[MQ0])
    assert poll(w, c, 0.5) == []
    c.pause([MQ0])
    b.put("T", 0, b"in-flight")  # the pull already held by the broker still answers (as Java's)
    assert [m.body for m in drain(w, c, 1)] == [b"in-flight"]
    b.put("T", 0, b"while-paused")  # no new pull while paused
    settle(w, 2)
    assert poll(w, c, 0.2) == []
    c.resume([MQ0])
    assert [m.body for m in drain(w, c, 1)] == [b"while-paused"]
    stop(w, c)


def test_pulls_from_a_4x_broker_use_pull_message(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    server = w.servers[w.brokers["broker-a"].port]
    server.dispatcher.unregister(361)  # a 4.x broker has no LITE_PULL_MESSAGE
    b.put("T", 0, b"old-broker")
    c = started(w, assign=[MQ0])
    assert [m.body for m in drain(w, c, 1)] == [b"old-broker"]
    codes = [code for code, h in b.pulls]
    assert codes and set(codes) == {11}
    assert all(not h.sys_flag & 0x10 for _, h in b.pulls)
    stop(w, c)
