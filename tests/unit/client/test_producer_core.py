"""The Twisted producer core against an in-memory NameServer and brokers (fake_cluster)."""

from __future__ import annotations

import zlib
from typing import Any

import lz4.frame
import pytest
import zstandard
from fake_cluster import World
from twisted.internet.defer import CancelledError
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.instance import ClientManager
from rmqwire.client.message import Message, SendResult, SendStatus
from rmqwire.client.producer import Producer
from rmqwire.codec.codes import SerializeType
from rmqwire.codec.message import decode_batch, decode_properties
from rmqwire.errors import (
    MessageIllegalError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from rmqwire.model import MessageQueue

_t = SynchronousTestCase()


def started(w: World, group: str = "pg", *, warm: bool = False, **options: Any) -> Producer:
    """A started producer; ``warm``: the topic T's route cached and every broker connected first,
    so sends take the first-attempt fast path (``Producer._send_default``), forgotten after."""
    options.setdefault("client_ip", "10.0.0.1")
    p = Producer(w.reactor, group, namesrv_addr=w.namesrv_addr, **options)
    d = p.start()
    w.run()
    _t.successResultOf(d)
    if warm:
        for _ in range(8 * len(w.brokers)):
            send(w, p.send(Message("T", b"warm")))
            if all(b.sends for b in w.brokers.values()):
                break
        assert all(b.sends for b in w.brokers.values())
        for addr in (b.addr for b in w.brokers.values()):
            assert p.instance.open_broker_channel(addr) is not None
        w.sends.clear()
        for b in w.brokers.values():
            b.sends.clear()
    return p


def send(w: World, d: Any) -> Any:
    w.run()
    return _t.successResultOf(d)


def fail(w: World, d: Any, *errors: type[BaseException]) -> BaseException:
    w.run()
    return _t.failureResultOf(d, *errors).value


def all_sends(w: World) -> list[Any]:
    return [s for b in w.brokers.values() for s in b.sends]


# ---- happy paths -------------------------------------------------------------------------------


def test_send_v2_carries_java_header_and_properties() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    m = Message("T", b"hello", tags="TagA", keys=["k1", "k2"], properties={"a": "1"})
    r = send(w, p.send(m))
    (s,) = all_sends(w)
    h = s.header
    assert s.code == 310 and s.body == b"hello"
    assert (h.a, h.b, h.c, h.d, h.f, h.h, h.j, h.k, h.m, h.n) == (
        "pg", "T", "TBW102", 4, 0, 0, 0, False, False, "broker-a")
    props = decode_properties(h.i)
    assert props == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true", "a": "1",
                     "UNIQ_KEY": m.unique_key}
    assert len(m.unique_key) == 32 and m.unique_key.startswith("0A000001")  # ip 10.0.0.1
    assert r.status is SendStatus.SEND_OK and r.msg_id == m.unique_key
    assert r.message_queue == MessageQueue("T", "broker-a", h.e)
    assert r.offset_msg_id.startswith("7F00000100002A9F") and r.queue_offset == 0
    assert r.region_id == "DefaultRegion" and r.trace_on


@pytest.mark.parametrize("options", [{"serialize_type": SerializeType.ROCKETMQ}, {"access_key": "ak", "secret_key": "sk"}])
def test_warm_sends_without_a_json_template_are_typed_and_the_same(options: dict[str, Any]) -> None:
    # a ROCKETMQ header or an RPC hook: the first attempt (and a oneway) is the typed request,
    # sent as a JSON template's would be
    w = World()
    w.add_topic("T")
    p = started(w, warm=True, **options)
    m = Message("T", b"typed", tags="TagA", properties={"a": "1"})
    r = send(w, p.send_async(m))
    send(w, p.send_oneway(Message("T", b"oneway")))
    first, oneway = all_sends(w)
    assert first.code == 310 and first.body == b"typed" and oneway.body == b"oneway"
    assert decode_properties(first.header.i) == {"TAGS": "TagA", "WAIT": "true", "a": "1",
                                                 "UNIQ_KEY": m.unique_key}
    assert r.status is SendStatus.SEND_OK and r.msg_id == m.unique_key
    assert r.message_queue == MessageQueue("T", first.header.n, first.header.e)


def test_first_connection_to_a_broker_carries_a_heartbeat_first() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, "group-1")
    send(w, p.send(Message("T", b"x")))
    b = w.brokers["broker-a"]
    assert [hb.producer_data_set[0].group_name for hb in b.heartbeats] == ["group-1"]
    assert b.heartbeats[0].client_id == p.instance.client_id


def test_v1_when_send_smart_msg_is_off() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, send_smart_msg=False)
    send(w, p.send(Message("T", b"x")))
    (s,) = all_sends(w)
    assert s.code == 10 and s.header.producer_group == "pg" and s.header.bname == "broker-a"


@pytest.mark.parametrize("ctype,flag,inflate", [
    ("ZLIB", 0x301, zlib.decompress),
    ("LZ4", 0x101, lz4.frame.decompress),
    ("ZSTD", 0x201, lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)),
])
def test_bodies_over_the_threshold_are_compressed(ctype: str, flag: int, inflate: Any) -> None:
    w = World()
    w.add_topic("T")
    p = started(w, compress_type=ctype)
    body = b"0123456789" * 410
    m = Message("T", body)
    send(w, p.send(m))
    send(w, p.send(Message("T", b"y" * 4095)))
    big, small = all_sends(w)
    assert big.header.f == flag and inflate(big.body) == body and len(big.body) < len(body)
    assert small.header.f == 0 and small.body == b"y" * 4095
    assert m.body == body  # the caller's message is left alone


def test_batch_is_one_send_batch_message() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    msgs = [Message("T", b"a", tags="A"), Message("T", b"bb", keys="k")]
    r = send(w, p.send(msgs))
    (s,) = all_sends(w)
    assert s.code == 320 and s.header.m is True
    batch_props = decode_properties(s.header.i)
    assert set(batch_props) == {"WAIT", "UNIQ_KEY"}
    inner = decode_batch(s.body)
    assert [m.body for m in inner] == [b"a", b"bb"]
    assert [m.unique_key for m in inner] == [m.unique_key for m in msgs]
    assert batch_props["UNIQ_KEY"] not in r.msg_id
    assert r.msg_id == ",".join(m.unique_key for m in msgs)
    assert len(r.offset_msg_id.split(",")) == 2


@pytest.mark.parametrize("msgs,text", [
    ([], "empty"),
    ([Message("T", b"a"), Message("U", b"b")], "should be the same"),
    ([Message("T", b"a", delay_level=2)], "TimeDelayLevel is not supported"),
    ([Message("T", b"a"), Message("T", b"b", wait_store_msg_ok=False)], "waitStoreMsgOK"),
    ([Message("T", b"")], "body length is zero"),
])
def test_bad_batches_send_nothing(msgs: list[Message], text: str) -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    err = fail(w, p.send(msgs), MQClientError)
    assert text in str(err) and all_sends(w) == []


@pytest.mark.parametrize("topic,text", [
    ("T?", "contains illegal characters"),
    ("SCHEDULE_TOPIC_XXXX", "is forbidden"),
])
def test_batch_topic_is_checked_once_before_any_body(topic: str, text: str) -> None:
    # Java checks message 0's topic before any body: the topic error wins over an empty body later
    w = World()
    w.add_topic("T")
    p = started(w)
    msgs = [Message(topic, b"a"), Message(topic, b"")]
    err = fail(w, p.send(msgs), MQClientError)
    assert text in str(err) and all_sends(w) == []
    assert [m.unique_key for m in msgs] == [None, None]


def test_batch_messages_before_a_bad_body_get_their_id_as_in_java() -> None:
    # DefaultMQProducer.batch checks and tags each message in turn: the ones before the bad body
    # keep their UNIQ_KEY, the rest get none
    w = World()
    w.add_topic("T")
    p = started(w)
    msgs = [Message("T", b"a"), Message("T", b""), Message("T", b"c")]
    err = fail(w, p.send(msgs), MQClientError)
    assert "body length is zero" in str(err) and all_sends(w) == []
    assert msgs[0].unique_key is not None and [msgs[1].unique_key, msgs[2].unique_key] == [None, None]


def test_batch_structure_errors_come_before_body_errors() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    msgs = [Message("T", b""), Message("U", b"b")]
    err = fail(w, p.send(msgs), MQClientError)
    assert "should be the same" in str(err) and all(m.unique_key is None for m in msgs)


def test_batch_over_max_message_size_is_refused() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, max_message_size=100)
    err = fail(w, p.send([Message("T", b"x" * 60), Message("T", b"y" * 60)]), MQClientError)
    assert "over max value, MAX: 100" in str(err) and all_sends(w) == []


def test_send_to_a_given_queue_and_with_a_selector() -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w)
    r = send(w, p.send(Message("T", b"x"), queue=MessageQueue("T", "broker-b", 3)))
    assert r.message_queue == MessageQueue("T", "broker-b", 3)
    seen = []

    def pick(queues: Any, msg: Any, arg: Any) -> MessageQueue:
        seen.append((list(queues), msg.body, arg))
        return queues[arg % len(queues)]

    for order_id in (5, 5, 6):
        r = send(w, p.send(Message("T", b"o"), selector=pick, arg=order_id))
        assert r.message_queue == seen[0][0][order_id % 8]
    assert [q.broker_name for q in seen[0][0]] == ["broker-a"] * 4 + ["broker-b"] * 4
    err = fail(w, p.send(Message("U", b"x"), queue=MessageQueue("T", "broker-a", 0)), MQClientError)
    assert "message's topic not equal mq's topic" in str(err)


def test_selector_errors() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)

    def boom(queues: Any, msg: Any, arg: Any) -> Any:
        raise ValueError("no")

    err = fail(w, p.send(Message("T", b"x"), selector=boom), MQClientError)
    assert "select message queue threw exception." in str(err)
    assert isinstance(err.__cause__, ValueError)
    err = fail(w, p.send(Message("T", b"x"), selector=lambda q, m, a: None), MQClientError)
    assert "select message queue return null." in str(err)


def test_oneway_is_written_and_not_awaited() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    w.brokers["broker-a"].hold = True
    m = Message("T", b"x")
    assert send(w, p.send_oneway(m)) is None
    (s,) = all_sends(w)
    assert decode_properties(s.header.i)["UNIQ_KEY"] == m.unique_key


def test_warm_oneway_is_written_at_once_round_robin() -> None:
    # the direct oneway path: written in the call (None, no Deferred), the token back at once,
    # the route's queues taken in turn as the general path takes them
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=True, max_inflight_oneway=1)
    msgs = [Message("T", b"o%d" % i) for i in range(8)]
    written: list[Any] = []
    for addr in (b.addr for b in w.brokers.values()):
        channel = p.instance.open_broker_channel(addr)
        channel.write_oneway_prepared = (lambda write: lambda r: (written.append(r), write(r)))(
            channel.write_oneway_prepared)
    for m in msgs:
        assert p.send_oneway_written(m) is None
        assert p._oneway_tokens.tokens == 1
    assert len(written) == 8 and all(r.command().is_oneway for r in written)  # the oneway template
    w.run()
    got = [(s.header.n, s.header.e) for s in w.sends]
    assert sorted(got) == sorted((b, q) for b in ("broker-a", "broker-b") for q in range(4))
    # each broker's connection keeps the send order
    for b in w.brokers.values():
        mine = [m for m in msgs if m.unique_key in {decode_properties(s.header.i)["UNIQ_KEY"] for s in b.sends}]
        assert [s.body for s in b.sends] == [m.body for m in mine] and len(mine) == 4
    # the public API still fires a Deferred with None
    assert send(w, p.send_oneway(Message("T", b"x"))) is None


def test_warm_oneway_whose_write_fails_is_the_general_paths_failed_attempt() -> None:
    from rmqwire.errors import ConnectionLostError

    w = World()
    w.add_topic("T")
    p = started(w, warm=True)
    channel = p.instance.open_broker_channel(w.brokers["broker-a"].addr)

    def refuse(cmd: Any) -> None:
        raise ConnectionLostError("gone")

    channel.write_oneway = channel.write_oneway_prepared = refuse
    d = p.send_oneway_written(Message("T", b"o"))
    err = fail(w, d, MQClientError)
    assert "Send [1] times, still failed" in str(err) and "BrokersSent: [broker-a]" in str(err)
    assert isinstance(err.__cause__, ConnectionLostError)
    assert p._oneway_tokens.tokens == p.config.max_inflight_oneway and w.sends == []


# ---- routes ------------------------------------------------------------------------------------


def test_routes_are_cached() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    for _ in range(3):
        send(w, p.send(Message("T", b"x")))
    assert w.namesrv.lookups == ["T"]


def test_unknown_topic_uses_the_tbw102_route_for_auto_creation() -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("TBW102", queues=8, perm=7)
    p = started(w, default_topic_queue_nums=3)
    r = send(w, p.send(Message("NewTopic", b"x")))
    assert w.namesrv.lookups[:2] == ["NewTopic", "TBW102"]
    (s,) = all_sends(w)
    assert s.header.b == "NewTopic" and s.header.c == "TBW102" and s.header.e < 3
    assert [q.queue_id for q in p.publish_info["NewTopic"].message_queues] == [0, 1, 2, 0, 1, 2]
    assert r.message_queue.topic == "NewTopic"


def test_unknown_topic_without_auto_creation_is_a_clear_error() -> None:
    w = World()
    p = started(w)
    err = fail(w, p.send(Message("Nope", b"x")), MQClientError)
    assert str(err).startswith("No route info of this topic: Nope")
    assert err.response_code == 10005 and all_sends(w) == []


def test_name_server_failover() -> None:
    w = World()
    w.add_topic("T")
    p = Producer(w.reactor, "pg", namesrv_addr="127.0.0.1:9999;127.0.0.1:9876", client_ip="10.0.0.1")
    d = p.start()
    p.instance._namesrv_index = 0  # start with the dead one
    w.run()
    _t.successResultOf(d)
    send(w, p.send(Message("T", b"x")))
    assert 9999 in w.refused and w.namesrv.lookups == ["T"]
    assert p.instance.namesrv_addrs[p.instance._namesrv_index] == "127.0.0.1:9876"


def test_no_name_server() -> None:
    w = World()
    p = Producer(w.reactor, "pg", client_ip="10.0.0.1")
    _t.successResultOf(p.start())
    err = fail(w, p.send(Message("T", b"x")), MQClientError)
    assert "No name server address" in str(err) and err.response_code == 10004


# ---- retries and errors ------------------------------------------------------------------------


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_retriable_code_retries_on_another_broker(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm)
    for b in w.brokers.values():
        b.fail_next = [2]  # SYSTEM_BUSY once each
    r = send(w, p.send(Message("T", b"x")))
    brokers = [s.header.n for s in w.sends]
    assert len(brokers) == 3 and brokers[0] != brokers[1] and brokers[2] == brokers[0]
    assert r.status is SendStatus.SEND_OK and r.message_queue.broker_name == brokers[2]
    assert len({decode_properties(s.header.i)["UNIQ_KEY"] for s in w.sends}) == 1


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_non_retriable_code_raises_at_once(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm)
    for b in w.brokers.values():
        b.fail_next = [13]
    err = fail(w, p.send(Message("T", b"x")), MessageIllegalError)
    assert err.code == 13 and len(all_sends(w)) == 1


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_flush_statuses_are_results(warm: bool) -> None:
    w = World()
    w.add_topic("T")
    p = started(w, warm=warm)
    w.brokers["broker-a"].fail_next = [10]
    assert send(w, p.send(Message("T", b"x"))).status is SendStatus.FLUSH_DISK_TIMEOUT


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_retry_another_broker_when_not_store_ok(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, retry_another_broker_when_not_store_ok=True, warm=warm)
    for b in w.brokers.values():
        b.fail_next = [12]
    r = send(w, p.send(Message("T", b"x")))  # not stored OK twice, then OK on the third try
    assert len(w.sends) == 3 and r.status is SendStatus.SEND_OK
    for b in w.brokers.values():
        b.fail_next = [12, 12]
    r = send(w, p.send(Message("T", b"x")))  # never OK: the last result is returned
    assert len(w.sends) == 6 and r.status is SendStatus.FLUSH_SLAVE_TIMEOUT


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_every_attempt_failing_gives_java_message_and_the_last_cause(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm)
    for b in w.brokers.values():
        b.fail_next = [17, 17, 17]
    err = fail(w, p.send(Message("T", b"x")), MQClientError)
    assert str(err).startswith("Send [3] times, still failed, cost [")
    assert "Topic: T, BrokersSent: [" in str(err) and err.response_code == 17
    assert err.__cause__ is not None and err.__cause__.code == 17
    sent_to = [s.header.n for s in w.sends]
    assert len(sent_to) == 3 and sent_to[0] != sent_to[1] and sent_to[1] != sent_to[2]


def held_send(warm: bool, **config: Any) -> tuple[World, Any]:
    """A send to two brokers that hold every request (no answer): the world and its Deferred."""
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm, **config)
    for b in w.brokers.values():
        b.hold = True
    d = p.send(Message("T", b"x"))
    w.run()
    return w, d


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_timeout_budget_spans_attempts(warm: bool) -> None:
    w, d = held_send(warm, send_msg_timeout=3000)
    assert len(all_sends(w)) == 1
    w.advance(3.001)  # the first attempt used the whole budget
    err = _t.failureResultOf(d, RemotingTimeoutError).value
    assert "sendDefaultImpl call timeout" in str(err) and len(all_sends(w)) == 1


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_retry_with_no_budget_left_is_not_written(warm: bool) -> None:
    # The first attempt times out with exactly the whole budget spent (cost == timeout): Java's
    # loop still retries, but its invokeSync refuses to write with nothing left, so the broker
    # never sees the message twice (a reply message would be pushed to its requester twice).
    w, d = held_send(warm, send_msg_timeout=3000)
    w.advance(3.0)
    err = _t.failureResultOf(d, MQClientError).value
    assert str(err).startswith("Send [3] times") and err.response_code == 10002
    assert isinstance(err.__cause__, RemotingTimeoutError)
    assert len(all_sends(w)) == 1


@pytest.mark.parametrize("value", [0, -1])
def test_a_bad_send_msg_timeout_is_refused_when_configured(value: int) -> None:
    # a configured budget that could never send is the caller's mistake, said at once
    w = World()
    with pytest.raises(ValueError, match="send_msg_timeout must be positive"):
        Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr, send_msg_timeout=value)


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_per_request_cap_leaves_budget_for_retries(warm: bool) -> None:
    w, d = held_send(warm, send_msg_timeout=3000, send_msg_max_timeout_per_request=1000)
    for _ in range(3):
        w.advance(1.0)
    err = _t.failureResultOf(d, MQClientError).value
    assert str(err).startswith("Send [3] times") and err.response_code == 10002
    assert len(all_sends(w)) == 3


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_broker_down_retries_elsewhere_and_reports_connect_errors(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm)
    w.stop_broker("broker-a")
    for _ in range(6):
        r = send(w, p.send(Message("T", b"x")))
        assert r.message_queue.broker_name == "broker-b"
    w.stop_broker("broker-b")
    err = fail(w, p.send(Message("T", b"x")), MQClientError)
    assert isinstance(err.__cause__, RemotingConnectError) and err.response_code == 10001


def test_not_started_and_shut_down() -> None:
    w = World()
    p = Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr)
    err = fail(w, p.send(Message("T", b"x")), MQClientError)
    assert "The producer service state not OK, CREATE_JUST" in str(err)
    _t.successResultOf(p.start())
    w.add_topic("T")
    send(w, p.send(Message("T", b"x")))
    d = p.shutdown()
    w.run()
    _t.successResultOf(d)
    assert [u.producer_group for u in w.brokers["broker-a"].unregisters] == ["pg"]
    assert "SHUTDOWN_ALREADY" in str(fail(w, p.send(Message("T", b"x")), MQClientError))
    assert not p.instance.running


def test_same_group_twice_in_one_instance_is_refused() -> None:
    w = World()
    m = ClientManager(w.reactor)
    started(w, "g", manager=m, instance_name="shared")
    p2 = Producer(w.reactor, "g", namesrv_addr=w.namesrv_addr, manager=m, instance_name="shared",
                  client_ip="10.0.0.1")
    err = _t.failureResultOf(p2.start(), MQClientError).value
    assert "has been created before" in str(err)


def test_producers_of_one_client_id_share_the_instance() -> None:
    w = World()
    w.add_topic("T")
    m = ClientManager(w.reactor)
    p1 = started(w, "g1", manager=m, instance_name="shared")
    p2 = started(w, "g2", manager=m, instance_name="shared")
    p3 = started(w, "g3", manager=m)
    assert p1.instance is p2.instance and p3.instance is not p1.instance
    _t.successResultOf(p1.shutdown())
    assert p2.instance.running
    d = p2.shutdown()
    w.run()
    _t.successResultOf(d)
    assert not p1.instance.running and m.instances.keys() == {p3.instance.client_id}


# ---- async -------------------------------------------------------------------------------------


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_async_retries_transport_failures_on_another_broker(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm)
    w.stop_broker("broker-a")
    results = [send(w, p.send_async(Message("T", b"x"))) for _ in range(6)]
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_async_does_not_retry_broker_errors(warm: bool) -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=warm)
    for b in w.brokers.values():
        b.fail_next = [2]
    fail(w, p.send_async(Message("T", b"x")), Exception)
    assert len(all_sends(w)) == 1


def test_async_in_flight_cap_waits_then_times_out() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, max_inflight_async=2, send_msg_timeout=1000)
    send(w, p.send(Message("T", b"warm")))  # route cached
    w.brokers["broker-a"].hold = True
    held = [p.send_async(Message("T", b"x"), timeout=10.0) for _ in range(2)]
    third = p.send_async(Message("T", b"y"), timeout=0.5)
    w.run()
    assert len(all_sends(w)) == 3  # the warm-up and the two in flight
    w.advance(0.5)
    assert isinstance(_t.failureResultOf(third).value, RemotingTooManyRequestsError)
    w.advance(10.0)
    for d in held:
        _t.failureResultOf(d, RemotingTimeoutError)
    assert p._async_tokens.tokens == 2  # every token came back


class Sink:
    def __init__(self) -> None:
        self.outcomes: list[Any] = []

    def ok(self, result: Any) -> None:
        self.outcomes.append(result)

    def fail(self, failure: Any) -> None:
        self.outcomes.append(failure.value)


def test_warm_async_send_settles_a_sink_from_the_response() -> None:
    w = World()
    w.add_topic("T")
    p = started(w, warm=True, max_inflight_async=4)
    sinks = [Sink() for _ in range(3)]
    assert [p.send_async_to(s, Message("T", b"x")) for s in sinks] == [None] * 3  # settled directly
    assert p._async_tokens.tokens == 1
    w.run()
    offsets = [r.queue_offset for (r,) in (s.outcomes for s in sinks)]  # one outcome each
    assert offsets == list(range(offsets[0], offsets[0] + 3)) and p._async_tokens.tokens == 4
    # a broker error: not retried, the sink fails with it and the token comes back
    w.brokers["broker-a"].fail_next = [2]
    s = Sink()
    assert p.send_async_to(s, Message("T", b"x")) is None
    w.run()
    assert len(s.outcomes) == 1 and isinstance(s.outcomes[0], Exception) and p._async_tokens.tokens == 4
    # a bad message fails before anything: a Deferred for the caller to hand on
    d = p.send_async_to(Sink(), Message("T", b""))
    assert "body length is zero" in str(_t.failureResultOf(d, MQClientError).value)


@pytest.mark.parametrize("mode", ["async", "sync", "oneway"])
def test_warm_direct_sends_read_the_clock_once_and_stamp_its_time(mode: str) -> None:
    # the send's begin is also its first attempt's clock (born timestamp, budget), one read
    w = World()
    w.add_topic("T")
    p = started(w, warm=True)
    w.reactor.advance(12.3456)
    reads: list[int] = []
    now_ms = p._now_ms
    p._now_ms = lambda: reads.append(now_ms()) or reads[-1]  # type: ignore[method-assign]
    m = Message("T", b"x")
    if mode == "async":
        assert p.send_async_to(Sink(), m) is None
    elif mode == "sync":
        assert p.send_to(Sink(), m) is None
    else:
        assert p.send_oneway_written(m) is None
    w.run()
    assert len(reads) == 1 and [s.header.g for s in w.sends] == reads


@pytest.mark.parametrize("options", [{}, {"namespace": "ns"}, {"compress_msg_body_over_howmuch": 4}])
def test_warm_sends_are_framed_from_the_topics_template_as_the_typed_request(options: dict[str, Any]) -> None:
    # the first attempt's request comes from SendRequestTemplate: the typed request _send_request
    # builds for the same message, queue and clock, byte for byte
    from rmqwire.codec import encode_frame

    w = World()
    topic = "ns%T" if options.get("namespace") else "T"
    w.add_topic(topic)
    p = started(w, warm=True, **options)
    channel = p.instance.open_broker_channel(w.brokers["broker-a"].addr)
    seen: list[Any] = []
    invoke = channel.invoke_direct_prepared

    def spy(request: Any, timeout: float, receiver: Any, *scanned: bool) -> int:
        seen.append((request, receiver))
        return invoke(request, timeout, receiver, *scanned)

    channel.invoke_direct_prepared = spy
    msgs = [Message("T", b"plain"), Message("T", b"tagged", tags="A", keys=["k"], properties={"q": '"\\%'}),
            Message("T", b"flagged", flag=7)]
    tran = Message("T", b"half")
    tran.properties["TRAN_MSG"] = "true"
    for m in [*msgs, tran]:
        send(w, p.send_async(m))
    send(w, p.send([Message("T", b"b1"), Message("T", b"b2")]))
    assert len(seen) == 5 and len(w.sends) == 5
    rc = p.instance.remoting.config
    for (request, attempt), got in zip(seen, w.sends):
        command, header, body = p._send_request(attempt.msg, attempt.mq, attempt.now, p.instance)
        typed = command.request(header, body, language=rc.language, version=rc.version)
        assert request.command() == typed and got.code == typed.code
        assert request.frame(12345) == encode_frame(typed.with_opaque(12345))
        assert got.header == header and (got.body or b"") == body
    assert [s.header.f for s in w.sends][3] & 0x4  # TRANSACTION_PREPARED_TYPE


def test_warm_async_send_lost_in_flight_is_retried_elsewhere_into_its_sink() -> None:
    # the direct first attempt fails (connection lost with the call pending): the general async
    # path retries it on the other broker, and that outcome settles the sink, once
    w = World(("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, warm=True, max_inflight_async=2)
    for b in w.brokers.values():
        b.hold = True
    s = Sink()
    assert p.send_async_to(s, Message("T", b"x")) is None
    w.run()
    (first,) = w.sends
    lost = first.header.n
    for b in w.brokers.values():
        b.hold = False
    assert s.outcomes == [] and p._async_tokens.tokens == 1
    w.stop_broker(lost)
    (r,) = s.outcomes
    assert isinstance(r, SendResult) and r.status is SendStatus.SEND_OK
    assert r.message_queue.broker_name != lost and p._async_tokens.tokens == 2
    assert [x.header.n for x in w.sends] == [lost, r.message_queue.broker_name]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_cancelling_a_warm_send_forgets_its_call_and_gives_the_token_back(mode: str) -> None:
    w = World()
    w.add_topic("T")
    p = started(w, warm=True, max_inflight_async=2)
    w.brokers["broker-a"].hold = True
    d = (p.send if mode == "sync" else p.send_async)(Message("T", b"x"))
    w.run()
    channel = p.instance.open_broker_channel(w.brokers["broker-a"].addr)
    assert channel.pending_count == 1 and p._async_tokens.tokens == (2 if mode == "sync" else 1)
    d.cancel()
    _t.failureResultOf(d, CancelledError)
    assert channel.pending_count == 0 and p._async_tokens.tokens == 2
    w.brokers["broker-a"].hold = False
    assert send(w, p.send_async(Message("T", b"y"))).status is SendStatus.SEND_OK


def test_namespace_wraps_topic_and_group_as_java() -> None:
    w = World()
    w.add_topic("ns%T")
    p = started(w, "pg", namespace="ns")
    m = Message("T", b"x")
    r = send(w, p.send(m))
    assert m.topic == "T" and r.msg_id == m.unique_key  # the caller's message keeps its topic
    (s,) = all_sends(w)
    assert (s.header.a, s.header.b) == ("ns%pg", "ns%T")
    assert decode_properties(s.header.i)["INSTANCE_ID"] == "ns"
    assert r.message_queue.topic == "T" and w.namesrv.lookups == ["ns%T"]
    r = send(w, p.send(Message("T", b"y"), queue=MessageQueue("T", "broker-a", 1)))
    assert r.message_queue == MessageQueue("T", "broker-a", 1)
    assert [h.producer_data_set[0].group_name for h in w.brokers["broker-a"].heartbeats] == ["ns%pg"]
