"""The Twisted push consumer core against an in-memory NameServer and broker (consumer_broker on
fake_cluster's World): rebalance, pull loop, offsets, retries, orderly locks, broadcast offsets,
the broker's requests to the client, shutdown. Time is the World's MemoryReactorClock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from consumer_broker import ConsumerWorld
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.consumer.consume_service import ReactorRunner, ThreadRunner
from rmqwire.client.consumer.listener import ConsumeResult
from rmqwire.client.consumer.processor import ConsumerClientProcessor
from rmqwire.client.consumer.push_consumer import PushConsumer
from rmqwire.client.instance import ClientManager
from rmqwire.codec.commands.consumer import (
    ConsumeMessageDirectlyResult,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusBody,
    GetConsumerStatusRequestHeader,
    ResetOffsetBodyForClient,
)
from rmqwire.codec.commands.offset import ResetOffsetRequestHeader
from rmqwire.codec.commands.pull import PullSysFlag
from rmqwire.codec.message import MessageExt, encode_message
from rmqwire.errors import BrokerResponseError
from rmqwire.model import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue
from rmqwire.remoting.dispatcher import RequestContext

_t = SynchronousTestCase()
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def settle(w: ConsumerWorld, seconds: float, step: float = 0.05) -> None:
    """Let the world run for ``seconds`` of its clock."""
    w.run()
    for _ in range(int(seconds / step)):
        w.advance(step)


class Recorder:
    def __init__(self, result: Any = ConsumeResult.SUCCESS) -> None:
        self.msgs: list[MessageExt] = []
        self.calls = 0
        self.result = result

    def __call__(self, msgs: list[MessageExt], context: Any) -> Any:
        self.calls += 1
        self.msgs.extend(msgs)
        r = self.result
        return r(msgs, context) if callable(r) else r


def consumer(w: ConsumerWorld, group: str = "cg", topic: str = "T", listener: Any = None, *,
             orderly: bool = False, manager: ClientManager | None = None, expression: Any = "*",
             **options: Any) -> PushConsumer:
    options.setdefault("client_ip", "10.0.0.1")
    options.setdefault("consume_from_where", FIRST)
    c = PushConsumer(w.reactor, group, namesrv_addr=w.namesrv_addr, manager=manager, **options)
    c.subscribe(topic, expression)
    c.register_listener(listener or Recorder(), orderly=orderly)
    d = c.start()
    w.run()
    _t.successResultOf(d)
    return c


def client_timers(w: ConsumerWorld) -> list[Any]:
    """Delayed calls of rmqwire's client code (not of the fake broker's held pulls)."""
    def module(f: Any) -> str:
        return getattr(getattr(f, "__func__", f), "__module__", "") or ""

    return [c for c in w.reactor.getDelayedCalls() if c.active() and module(c.func).startswith("rmqwire.client")]


def stop(w: ConsumerWorld, c: PushConsumer) -> None:
    d = c.shutdown()
    settle(w, 1)
    _t.successResultOf(d)


@pytest.fixture
def w() -> ConsumerWorld:
    world = ConsumerWorld()
    world.add_topic("T", 4)
    return world


def test_consumes_every_message_once_and_commits_the_offsets(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    sent = [b.put("T", q, f"m{q}-{i}".encode(), tags="TagA") for q in range(4) for i in range(5)]
    rec = Recorder()
    c = consumer(w, listener=rec)
    settle(w, 3)
    assert sorted(m.body for m in rec.msgs) == sorted(m.body for m in sent)
    got = rec.msgs[0]
    assert got.broker_name == "broker-a" and got.properties["MAX_OFFSET"] == "5"
    assert got.properties["MIN_OFFSET"] == "0" and "CONSUME_START_TIME" in got.properties
    # every queue's offset reaches the broker (oneway persist every 5 s, after the first 10 s)
    settle(w, 11)
    assert {k: v for k, v in b.offsets.items() if k[1] == "T"} == {("cg", "T", q): 5 for q in range(4)}
    stop(w, c)
    assert any(u.consumer_group == "cg" for u in b.unregisters)
    assert not client_timers(w), "client timers left after shutdown"


def test_heartbeat_carries_the_subscriptions_and_the_retry_topic(w: ConsumerWorld) -> None:
    c = consumer(w, expression="TagA || TagB")
    settle(w, 2)
    hb = w.cb["broker-a"].heartbeats[-1]
    (cd,) = [cd for cd in hb.consumer_data_set if cd.group_name == "cg"]
    assert cd.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert cd.message_model is MessageModel.CLUSTERING and cd.consume_from_where is FIRST
    subs = {sd.topic: sd for sd in cd.subscription_data_set}
    assert subs["T"].tags_set == ["TagA", "TagB"] and subs["T"].code_set == [2598919, 2598920]
    assert subs["%RETRY%cg"].sub_string == "*"
    assert [p.group_name for p in hb.producer_data_set] == ["CLIENT_INNER_PRODUCER"]
    stop(w, c)


def test_pull_header_sysflag_and_long_polling(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    w.add_topic("%RETRY%cg", 1)
    rec = Recorder()
    c = consumer(w, listener=rec)
    settle(w, 3)
    pulls = [h for code, h in b.pulls if h.topic == "T"]
    first = pulls[0]
    assert first.max_msg_nums == 32 and first.suspend_timeout_millis == 15000
    assert first.sys_flag & 0x2 and not first.sys_flag & 0x4  # SUSPEND, no SUBSCRIPTION
    assert first.max_msg_bytes == 256 * 1024 and first.bname == "broker-a"
    held = len(b.held)
    assert held == 5  # four queues and the retry queue wait at the broker
    b.put("T", 2, b"late")
    w.run()
    settle(w, 0.2)
    assert [m.body for m in rec.msgs] == [b"late"]
    # the next pull carries the consumed offset (COMMIT_OFFSET)
    w.advance(6)
    later = [h for code, h in b.pulls if h.topic == "T" and h.queue_id == 2][-1]
    assert later.sys_flag & 0x1 and later.commit_offset == 1
    stop(w, c)


def test_tags_filtered_again_on_the_client(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA"]):
        b.put("T", 0, f"t{i}".encode(), tags=tag)
    rec = Recorder()
    c = consumer(w, listener=rec, expression="TagA")
    settle(w, 3)
    assert [m.body for m in rec.msgs] == [b"t0", b"t3"]
    stop(w, c)


def test_flow_control_stops_pulling_over_the_queue_threshold(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [b"x"] * 40)
    blocked: list[Any] = []

    def slow(msgs: list[MessageExt], context: Any) -> Any:
        from twisted.internet.defer import Deferred

        d: Deferred[Any] = Deferred()
        blocked.append(d)
        return d

    c = consumer(w, listener=Recorder(slow), pull_threshold_for_queue=10, pull_batch_size=16)
    settle(w, 3)
    pulls_q0 = [h for code, h in b.pulls if h.topic == "T" and h.queue_id == 0]
    # 16 cached > 10: no second pull while the listener holds them (re-checked every 50 ms)
    assert len(pulls_q0) == 1 and c.queue_flow_control_times > 10
    for d in blocked:
        d.callback(ConsumeResult.SUCCESS)
    settle(w, 1)
    assert len([h for code, h in b.pulls if h.topic == "T" and h.queue_id == 0]) > 1
    stop(w, c)


class HeldRunner(ReactorRunner):
    """Listener calls handed off as the thread runner hands them, run when the test says."""

    runs_in_reactor = False

    def __init__(self, reactor: Any) -> None:
        super().__init__(reactor)
        self.held: list[tuple[Any, ...]] = []

    def submit_many(self, fn: Any, calls: Any, keys: Any, settle: Any) -> None:
        self.held.append((fn, calls, keys, settle))

    def release(self) -> None:
        held, self.held = self.held, []
        for fn, calls, keys, settle in held:
            ReactorRunner.submit_many(self, fn, calls, keys, settle)


def test_the_next_pull_goes_out_before_the_batch_is_consumed(w: ConsumerWorld) -> None:
    """Listeners off the reactor: a found batch's next pull is sent on its arrival, before its
    messages are decoded and handed off (the flow control limits hold with them all put)."""
    b = w.cb["broker-a"]
    b.put_many("T", 0, [b"x%d" % i for i in range(40)])
    runner = HeldRunner(w.reactor)
    rec = Recorder()
    c = consumer(w, listener=rec, runner=runner, pull_batch_size=16)
    issued: list[int] = []  # queue 0's pull offsets, as sent
    decoded: list[tuple[int, list[int]]] = []  # (first offset of a batch, pulls sent before its decode)
    pull_kernel, process = c.pull_api.pull_kernel, c.pull_api.process_pull_result

    def spy_pull(mq: MessageQueue, *args: Any) -> Any:
        if mq.topic == "T" and mq.queue_id == 0:
            issued.append(args[3])
        return pull_kernel(mq, *args)

    def spy_process(mq: MessageQueue, result: Any, sd: Any) -> Any:
        out = process(mq, result, sd)
        if mq.topic == "T" and mq.queue_id == 0 and out.messages:
            decoded.append((out.messages[0].queue_offset, list(issued)))
        return out

    c.pull_api.pull_kernel, c.pull_api.process_pull_result = spy_pull, spy_process  # type: ignore[method-assign]
    c.rebalance_immediately()
    settle(w, 3)
    q0 = [h.queue_offset for code, h in b.pulls if h.topic == "T" and h.queue_id == 0]
    # nothing consumed yet, and every batch pulled: 0, 16, 32, then 40 waits at the broker
    assert rec.msgs == [] and q0 == [0, 16, 32, 40]
    # each batch's next pull was out before the batch was decoded
    assert [(first, sent[-1]) for first, sent in decoded if first == 16] == [(16, 32)]
    assert [(first, sent[-1]) for first, sent in decoded if first == 32] == [(32, 40)]
    runner.release()
    settle(w, 6)
    assert [m.body for m in rec.msgs] == [b"x%d" % i for i in range(40)]
    stop(w, c)  # persists the offsets
    assert b.offsets[("cg", "T", 0)] == 40


@pytest.mark.parametrize("timers", ["between reads", "late"])
def test_answers_read_together_send_their_next_pulls_before_any_decode(w: ConsumerWorld, timers: str) -> None:
    """Two queues' answers in one read: both next pulls are out before either batch is decoded
    (an answer's next pull does not wait for the decodes of the answers read before it), and
    both batches are handed to the consume threads together. Should the decode not have run
    before a queue's next answer ("late" timers), that answer decodes the pending ones first."""
    b = w.cb["broker-a"]
    runner = HeldRunner(w.reactor)
    c = consumer(w, runner=runner, pull_batch_size=16)
    settle(w, 3)
    assert {h.queue_id for _, h in b.pulls if h.topic == "T"} == {0, 1, 2, 3}  # all held
    events: list[tuple[str, int]] = []
    pull_kernel, process = c.pull_api.pull_kernel, c.pull_api.process_pull_result

    def spy_pull(mq: MessageQueue, *args: Any) -> Any:
        if mq.topic == "T":
            events.append(("pull", mq.queue_id))
        return pull_kernel(mq, *args)

    def spy_process(mq: MessageQueue, result: Any, sd: Any) -> Any:
        events.append(("decode", mq.queue_id))
        return process(mq, result, sd)

    c.pull_api.pull_kernel, c.pull_api.process_pull_result = spy_pull, spy_process  # type: ignore[method-assign]
    held_timers: list[Any] = []
    if timers == "late":
        c._later = lambda ms, fn, *args: held_timers.append((fn, args))  # type: ignore[method-assign]
    # the first put of each answers its queue's held pull: both answers come in one read; the
    # next pulls are answered at once with the other 3 messages, again in one read
    b.put_many("T", 0, [b"a"] * 4)
    b.put_many("T", 1, [b"b"] * 4)
    w.run()
    round_ = [("pull", 0), ("pull", 1), ("decode", 0), ("decode", 1)]
    if timers == "late":
        assert events == round_ + round_[:2]
        for fn, args in held_timers:
            fn(*args)
    assert events == round_ * 2
    # each read's batches went to the consume threads in one hand-off
    assert [len(calls) for _, calls, _, _ in runner.held] == [2, 6]
    runner.release()
    settle(w, 2)
    table = c.rebalance.process_queue_table
    assert [table[MessageQueue("T", "broker-a", q)].msg_count for q in (0, 1)] == [0, 0]
    stop(w, c)
    assert (b.offsets[("cg", "T", 0)], b.offsets[("cg", "T", 1)]) == (4, 4)


def test_pull_frames_follow_the_subscription_version(w: ConsumerWorld) -> None:
    """The queue's cached pull frame is rebuilt when the subscription version changes (a
    rebalance sets it); offsets and the commit offset are each pull's own."""
    b = w.cb["broker-a"]
    b.put_many("T", 0, [b"x"] * 3)
    c = consumer(w, pull_batch_size=2)
    settle(w, 3)
    sd = c.rebalance.subscription_inner["T"]
    q0 = [h for _, h in b.pulls if h.topic == "T" and h.queue_id == 0]
    assert [h.queue_offset for h in q0] == [0, 2, 3] and {h.sub_version for h in q0} == {sd.sub_version}
    sd.sub_version += 1000
    b.put("T", 0, b"y")
    w.run()
    last = [h for _, h in b.pulls if h.topic == "T" and h.queue_id == 0][-1]
    assert (last.queue_offset, last.sub_version) == (4, sd.sub_version)
    # what was consumed goes with the pull (COMMIT_OFFSET set)
    assert last.commit_offset == c.offset_store.memory_offset(MessageQueue("T", "broker-a", 0))
    assert last.sys_flag & 1 and last.commit_offset >= 3
    assert last.consumer_group == "cg" and last.bname == "broker-a" and last.max_msg_nums == 2
    stop(w, c)


def test_no_early_pull_when_the_batch_would_pass_a_threshold(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [b"x"] * 40)
    b.put_many("T", 1, [b"y"] * 40)
    runner = HeldRunner(w.reactor)
    c = consumer(w, runner=runner, pull_threshold_for_queue=20, pull_batch_size=16,
                 consume_concurrently_max_span=2000)
    settle(w, 3)
    q0 = [h.queue_offset for code, h in b.pulls if h.topic == "T" and h.queue_id == 0]
    # 16 held, 16 more would pass 20: the second batch is put first, then flow control holds it
    assert q0 == [0, 16] and c.queue_flow_control_times > 0
    runner.release()
    settle(w, 2)
    c.shutdown()
    settle(w, 1)
    # span: a held batch [0, 16) and offsets up to 31 span 31 > 20 -> no early pull either
    w2 = ConsumerWorld()
    w2.add_topic("T", 4)
    b2 = w2.cb["broker-a"]
    b2.put_many("T", 0, [b"x"] * 40)
    runner2 = HeldRunner(w2.reactor)
    c2 = consumer(w2, runner=runner2, pull_batch_size=16, consume_concurrently_max_span=20)
    settle(w2, 3)
    q0 = [h.queue_offset for code, h in b2.pulls if h.topic == "T" and h.queue_id == 0]
    assert q0 == [0, 16] and c2.queue_max_span_flow_control_times > 0
    runner2.release()
    settle(w2, 2)
    stop(w2, c2)


def test_reconsume_later_sends_back_and_the_retry_comes_back(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    w.add_topic("%RETRY%cg", 1)
    orig = b.put("T", 1, b"fail-once")

    def once(msgs: list[MessageExt], context: Any) -> ConsumeResult:
        return ConsumeResult.SUCCESS if msgs[0].reconsume_times else ConsumeResult.RECONSUME_LATER

    rec = Recorder(once)
    c = consumer(w, listener=rec)
    settle(w, 4)
    (back,) = b.send_backs
    assert (back.offset, back.group, back.delay_level, back.max_reconsume_times) == (
        orig.commit_log_offset, "cg", 0, 16)
    assert back.origin_msg_id == orig.unique_key and back.origin_topic == "T"
    assert [m.reconsume_times for m in rec.msgs] == [0, 1]
    assert rec.msgs[1].topic == "T"  # %RETRY%cg hidden behind RETRY_TOPIC
    # the failed message's offset moved on (it lives in the retry topic now)
    settle(w, 11)
    assert b.offsets[("cg", "T", 1)] == 1
    stop(w, c)


def test_failed_send_back_falls_back_to_a_retry_topic_send(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    w.add_topic("%RETRY%cg", 1)
    b.fail_send_back = True
    b.put("T", 0, b"poison", properties={"k": "v"})
    rec = Recorder(lambda msgs, ctx: ConsumeResult.RECONSUME_LATER if not msgs[0].reconsume_times
                   else ConsumeResult.SUCCESS)
    c = consumer(w, listener=rec)
    settle(w, 4)
    (sent,) = [m for m in b.retry_sends if m.topic == "%RETRY%cg"]
    p = sent.properties
    assert (p["RETRY_TOPIC"], p["RECONSUME_TIME"], p["MAX_RECONSUME_TIMES"], p["DELAY"], p["k"]) == (
        "T", "1", "16", "3", "v")
    assert p["ORIGIN_MESSAGE_ID"] == rec.msgs[0].unique_key
    stop(w, c)


def test_ack_index_acks_a_prefix_of_the_batch(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    w.add_topic("%RETRY%cg", 1)
    b.put_many("T", 0, [b"a", b"b", b"c"])

    def partial(msgs: list[MessageExt], context: Any) -> ConsumeResult:
        if len(msgs) == 3:
            context.ack_index = 0
        return ConsumeResult.SUCCESS

    c = consumer(w, listener=Recorder(partial), consume_message_batch_max_size=3)
    settle(w, 3)
    assert [w.cb["broker-a"].by_offset(s.offset).body for s in b.send_backs] == [b"b", b"c"]
    stop(w, c)


def test_offset_moved_pins_the_broker_offset_and_recreates_the_queue(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 3, [b"x"] * 3)
    b.offsets[("cg", "T", 3)] = 50  # beyond the queue's end
    rec = Recorder()
    c = consumer(w, listener=rec)
    settle(w, 4)
    moved = [u for u in b.offset_updates if (u.topic, u.queue_id) == ("T", 3)]
    assert moved and moved[0].commit_offset == 3  # the broker's next offset, persisted at once
    pq = c.rebalance.process_queue_table[MessageQueue("T", "broker-a", 3)]
    assert not pq.dropped
    b.put("T", 3, b"after")
    settle(w, 1)
    assert [m.body for m in rec.msgs if m.queue_id == 3] == [b"after"]
    stop(w, c)


def test_consume_from_where_decides_where_a_new_queue_starts(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [b"old"] * 4)
    last = Recorder()
    c1 = consumer(w, "g-last", listener=last, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    settle(w, 3)
    b.put("T", 0, b"new")
    settle(w, 1)
    assert [m.body for m in last.msgs] == [b"new"]
    stop(w, c1)
    ts = Recorder()
    w.advance(5)
    cut = int(w.reactor.seconds() * 1000)
    w.advance(5)
    b.put("T", 0, b"after-cut")
    c2 = consumer(w, "g-ts", listener=ts, consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
                  consume_timestamp=cut)
    settle(w, 3)
    assert [m.body for m in ts.msgs] == [b"after-cut"]
    stop(w, c2)


def test_two_consumers_split_the_queues_and_take_over_when_one_leaves(w: ConsumerWorld) -> None:
    manager = ClientManager(w.reactor)
    a = consumer(w, instance_name="a", manager=manager)
    bb = consumer(w, instance_name="b", manager=manager)
    settle(w, 3)
    qa = {mq.queue_id for mq in a.rebalance.process_queue_table if mq.topic == "T"}
    qb = {mq.queue_id for mq in bb.rebalance.process_queue_table if mq.topic == "T"}
    assert (qa, qb) == ({0, 1}, {2, 3})  # 10.0.0.1@a < 10.0.0.1@b: Java's averagely split
    stop(w, a)
    settle(w, 2)  # NOTIFY_CONSUMER_IDS_CHANGED: b rebalances at once
    assert {mq.queue_id for mq in bb.rebalance.process_queue_table if mq.topic == "T"} == {0, 1, 2, 3}
    stop(w, bb)


def test_orderly_locks_queues_consumes_in_order_and_retries_locally(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [f"{i}".encode() for i in range(6)])
    seen: list[tuple[bytes, int]] = []

    def flaky(msgs: list[MessageExt], context: Any) -> ConsumeResult:
        m = msgs[0]
        seen.append((m.body, m.reconsume_times))
        if m.body == b"2" and m.reconsume_times < 2:
            return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeResult.SUCCESS

    c = consumer(w, listener=Recorder(flaky), orderly=True)
    settle(w, 6)
    assert all(b.locks.get(("cg", MessageQueue("T", "broker-a", q))) == c.instance.client_id for q in range(4))
    assert [s for s, _ in seen] == [b"0", b"1", b"2", b"2", b"2", b"3", b"4", b"5"]
    assert [r for body, r in seen if body == b"2"] == [0, 1, 2]
    assert not b.send_backs  # orderly retries stay local
    stop(w, c)
    assert b.unlock_requests and not [k for k in b.locks if k[0] == "cg"]


def test_orderly_does_not_consume_a_queue_it_could_not_lock(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.refuse_locks = True
    b.put("T", 0, b"x")
    rec = Recorder()
    c = consumer(w, listener=rec, orderly=True)
    settle(w, 5)
    assert rec.msgs == [] and not c.rebalance.process_queue_table
    b.refuse_locks = False
    settle(w, 3)
    assert [m.body for m in rec.msgs] == [b"x"]
    stop(w, c)


def test_broadcasting_keeps_offsets_in_a_local_file(w: ConsumerWorld, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", str(tmp_path))
    b = w.cb["broker-a"]
    b.put_many("T", 1, [b"x"] * 3)
    c = consumer(w, message_model=MessageModel.BROADCASTING)
    settle(w, 3)
    assert "%RETRY%cg" not in c.rebalance.subscription_inner
    stop(w, c)
    text = (tmp_path / "10.0.0.1@DEFAULT" / "cg" / "offsets.json").read_text()
    assert '{"brokerName":"broker-a","queueId":1,"topic":"T"}:3' in text
    assert not [k for k in b.offsets if k[0] == "cg"]
    # a restarted broadcasting consumer goes on from the file
    rec = Recorder()
    c2 = consumer(w, message_model=MessageModel.BROADCASTING, listener=rec)
    b.put("T", 1, b"y")
    settle(w, 3)
    assert [m.body for m in rec.msgs] == [b"y"]
    stop(w, c2)


# ---- the broker's requests ---------------------------------------------------------------------


def _processor(c: PushConsumer) -> ConsumerClientProcessor:
    assert c.instance is not None
    return ConsumerClientProcessor(c.instance)


def test_running_info_status_and_unknown_group(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [b"x"] * 2)
    c = consumer(w)
    settle(w, 3)
    p = _processor(c)
    ctx = RequestContext("127.0.0.1:10911")
    r = p.get_consumer_running_info(
        GetConsumerRunningInfoRequestHeader(consumer_group="cg", client_id=c.instance.client_id,
                                            jstack_enable=True), None, ctx)
    info = r.body
    props = info.properties
    assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
    assert props["PROP_CLIENT_VERSION"] == "V5_3_3" and props["PROP_NAMESERVER_ADDR"] == "127.0.0.1:9876;"
    assert props["consumeThreadMin"] == "20" and props["messageModel"] == "CLUSTERING"
    assert info.mq_table[MessageQueue("T", "broker-a", 0)].commit_offset == 2
    assert {sd.topic for sd in info.subscription_set} == {"T", "%RETRY%cg"}
    assert "Thread:" in info.jstack
    decoded = type(info).decode(info.encode())
    assert decoded.mq_table.keys() == info.mq_table.keys()
    with pytest.raises(BrokerResponseError, match="The Consumer Group <nope> not exist in this consumer"):
        p.get_consumer_running_info(GetConsumerRunningInfoRequestHeader(
            consumer_group="nope", client_id="x", jstack_enable=False), None, ctx)
    status = GetConsumerStatusBody.decode(p.get_consumer_status(
        GetConsumerStatusRequestHeader(topic="T", group="cg"), None, ctx))
    assert status.message_queue_table[MessageQueue("T", "broker-a", 0)] == 2
    stop(w, c)


def test_consume_message_directly_runs_the_listener(w: ConsumerWorld) -> None:
    rec = Recorder(ConsumeResult.RECONSUME_LATER)
    c = consumer(w, listener=rec)
    settle(w, 2)
    msg = w.cb["broker-a"].put("Other", 0, b"direct")
    d = _processor(c).consume_message_directly(
        ConsumeMessageDirectlyResultRequestHeader(consumer_group="cg", broker_name="broker-a"),
        encode_message(msg), RequestContext("x"))
    result = ConsumeMessageDirectlyResult.decode(_t.successResultOf(d))
    assert (result.consume_result, result.order, result.auto_commit) == ("CR_LATER", False, True)
    assert rec.msgs[-1].body == b"direct"
    stop(w, c)


def test_reset_offset_moves_a_running_consumer(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 0, [f"{i}".encode() for i in range(5)])
    rec = Recorder()
    c = consumer(w, listener=rec)
    settle(w, 3)
    assert len(rec.msgs) == 5
    body = ResetOffsetBodyForClient(offset_table={MessageQueue("T", "broker-a", 0): 2}).encode()
    d = _processor(c).reset_offset(ResetOffsetRequestHeader(group="cg", topic="T", timestamp=0, is_force=True),
                                   body, RequestContext("x"))
    settle(w, 3)
    _t.successResultOf(d)
    assert [m.body for m in rec.msgs[5:]] == [b"2", b"3", b"4"]
    stop(w, c)


def test_start_failures_are_reported(w: ConsumerWorld) -> None:
    c = PushConsumer(w.reactor, "cg", namesrv_addr=w.namesrv_addr)
    c.subscribe("T")
    _t.failureResultOf(c.start())  # no listener
    c2 = PushConsumer(w.reactor, "DEFAULT_CONSUMER", namesrv_addr=w.namesrv_addr)
    c2.register_listener(Recorder())
    _t.failureResultOf(c2.start())
    with pytest.raises(TypeError, match="unknown push consumer option"):
        PushConsumer(w.reactor, "cg", bogus=1)
    manager = ClientManager(w.reactor)
    first = consumer(w, instance_name="same", manager=manager)
    again = PushConsumer(w.reactor, "cg", namesrv_addr=w.namesrv_addr, manager=manager, instance_name="same",
                         client_ip="10.0.0.1")
    again.register_listener(Recorder())
    f = _t.failureResultOf(again.start())
    assert "has been created before" in str(f.value)
    stop(w, first)


def test_a_listener_stuck_past_consume_timeout_gets_its_message_sent_back(w: ConsumerWorld) -> None:
    from twisted.internet.defer import Deferred

    b = w.cb["broker-a"]
    w.add_topic("%RETRY%cg", 1)
    stuck = b.put("T", 0, b"stuck")
    c = consumer(w, listener=Recorder(lambda msgs, ctx: Deferred()), consume_timeout=1)
    settle(w, 3)
    assert not b.send_backs
    settle(w, 120, step=1)  # a minute past the start, the clean-up runs every minute
    (back,) = [s for s in b.send_backs if s.offset == stuck.commit_log_offset]
    assert back.delay_level == 3
    assert not c.rebalance.process_queue_table[MessageQueue("T", "broker-a", 0)].msg_tree
    stop(w, c)


def test_coroutine_listeners_work_in_the_twisted_core(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    b.put_many("T", 1, [b"a", b"b"])
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        seen.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    c = consumer(w, listener=listener)
    settle(w, 3)
    assert seen == [b"a", b"b"]
    settle(w, 11)
    assert b.offsets[("cg", "T", 1)] == 2
    stop(w, c)


def test_consumption_resumes_after_the_broker_comes_back(w: ConsumerWorld) -> None:
    b = w.cb["broker-a"]
    rec = Recorder()
    c = consumer(w, listener=rec)
    b.put("T", 0, b"before")
    settle(w, 3)
    port = w.brokers["broker-a"].port
    w.stop_broker("broker-a")
    for d, _h, call in b.held:
        call.cancel()
    b.held.clear()
    settle(w, 5)  # pulls fail and are retried every second (pull_time_delay_mills_when_exception)
    w.servers[port].startService()  # listening again
    b.put("T", 0, b"after")
    settle(w, 5)
    assert [m.body for m in rec.msgs] == [b"before", b"after"]
    stop(w, c)


def test_pulls_from_a_slave_go_out_without_the_commit_offset(w: ConsumerWorld) -> None:
    """A queue whose broker has only a slave: Java clears COMMIT_OFFSET before such a pull (the
    cleared flag must still reach the cached pull frame as a plain int)."""
    b = w.cb["broker-a"]
    route = w.add_topic("S", 1)
    route.broker_datas[0].broker_addrs = {1: w.brokers["broker-a"].addr}
    b.put_many("S", 0, [b"x"] * 3)
    rec = Recorder()
    c = consumer(w, topic="S", listener=rec, pull_batch_size=1)
    settle(w, 3)
    assert [m.queue_offset for m in rec.msgs] == [0, 1, 2]
    pulls = [h for _, h in b.pulls if h.topic == "S"]
    assert [h.queue_offset for h in pulls][:4] == [0, 1, 2, 3]
    assert not any(h.sys_flag & PullSysFlag.COMMIT_OFFSET for h in pulls)
    stop(w, c)


class InlineBatchRunner(ThreadRunner):
    """The consume threads' batch hand-off (``submit_batches``), run at once in the reactor."""

    # No call counts as slow: a slow call hands the rest of its task to a worker thread, which this
    # runner has none of, and on a busy machine a short call can take over a millisecond of wall time.
    SLOW_CALL = float("inf")

    def __init__(self, reactor: Any) -> None:
        super().__init__(reactor, 1)
        self.batches = 0

    def start(self) -> None:
        pass

    def submit_batches(self, fn: Any, entries: Any, ok: Any, settle: Any) -> None:
        self.batches += 1
        self._run_batches(settle, entries, fn, ok)

    def _wake(self) -> bool:
        self._deliver()
        return True


def test_batch_results_commit_successes_and_send_back_failed_calls(w: ConsumerWorld) -> None:
    """Without a context or metrics, short listener calls come back per batch: the successes
    are committed, a RECONSUME_LATER and an exception are sent back, each as one call."""
    b = w.cb["broker-a"]
    w.add_topic("%RETRY%cg", 1)
    b.put_many("T", 0, [b"m%d" % i for i in range(6)])
    seen: list[bytes] = []

    def listener(msgs: Any) -> ConsumeResult:
        (m,) = msgs
        seen.append(m.body)
        if m.reconsume_times == 0 and m.body == b"m2":
            return ConsumeResult.RECONSUME_LATER
        if m.reconsume_times == 0 and m.body == b"m4":
            raise ValueError("listener failed")
        return ConsumeResult.SUCCESS

    runner = InlineBatchRunner(w.reactor)
    c = consumer(w, listener=listener, runner=runner)
    settle(w, 4)
    assert runner.batches > 0
    assert sorted(b.by_offset(s.offset).body for s in b.send_backs) == [b"m2", b"m4"]
    assert sorted(seen) == sorted([b"m%d" % i for i in range(6)] + [b"m2", b"m4"])
    pq = next(pq for mq, pq in c.rebalance.process_queue_table.items() if mq.topic == "T" and mq.queue_id == 0)
    assert pq.msg_count == 0 and pq.consuming_tasks == 0
    settle(w, 11)
    assert b.offsets[("cg", "T", 0)] == 6
    stop(w, c)


def test_a_queue_given_up_in_a_rebalance_drops_its_pull_frame(w: ConsumerWorld) -> None:
    manager = ClientManager(w.reactor)
    a = consumer(w, instance_name="a", manager=manager)
    settle(w, 3)

    def framed(c: PushConsumer) -> set[int]:
        return {mq.queue_id for mq in c.pull_api._templates if mq.topic == "T"}

    assert framed(a) == {0, 1, 2, 3}
    bb = consumer(w, instance_name="b", manager=manager)
    settle(w, 3)
    assert framed(a) == {0, 1} and framed(bb) == {2, 3}  # no frame kept for a queue given up
    stop(w, bb)
    stop(w, a)
