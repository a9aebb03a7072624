"""The send plan (Producer._send_planned / _oneway_planned): a warm send written through it is the
existing path's send byte for byte (the frame on the wire but for its opaque, the message's
properties after, the queue, the outcome), for any message, plain or not; and the plan is made
again when the route or the configuration it was made from changes."""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any

from fake_cluster import World
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.message import Message
from rmqwire.client.producer import Producer

_t = SynchronousTestCase()
_OPAQUE = re.compile(rb'"opaque":-?\d+')


def started(w: World, **options: Any) -> Producer:
    """A started producer whose topic T's route is cached and whose brokers are connected."""
    options.setdefault("client_ip", "10.0.0.1")
    p = Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr, **options)
    d = p.start()
    w.run()
    _t.successResultOf(d)
    for _ in range(8 * len(w.brokers)):
        d = p.send(Message("T", b"warm"))
        w.run()
        _t.successResultOf(d)
        if all(b.sends for b in w.brokers.values()):
            break
    return p


class FixedIds:
    """The client's id generator, giving one id: both paths' sends then carry the same UNIQ_KEY."""

    def __init__(self, uid: str) -> None:
        self.uid = uid

    def next_id(self) -> str:
        return self.uid

    def next_ids(self, n: int) -> list[str]:
        return [self.uid] * n

    def next_id_run(self, n: int) -> tuple[list[str], str, int]:
        return [self.uid] * n, "", -1


def record_writes(w: World, p: Producer) -> list[bytes]:
    """Every byte the producer's broker connections write, one entry per write."""
    out: list[bytes] = []
    for b in w.brokers.values():
        proto = p.instance.remoting.open_channel(b.addr)
        assert proto is not None
        transport = proto.transport
        write = transport.write

        def spy(data: bytes, write: Any = write) -> None:
            out.append(bytes(data))
            write(data)

        transport.write = spy
    return out


def frames(written: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The frames written, as (header with its opaque zeroed, body): the opaque is the
    connection's counter, the one thing two sends of the same message may not share."""
    data = b"".join(written)
    out = []
    while data:
        total, hlen = struct.unpack_from(">II", data)
        hlen &= 0xFFFFFF
        header, body = data[8 : 8 + hlen], data[8 + hlen : 4 + total]
        out.append((_OPAQUE.sub(b'"opaque":0', header), body))
        data = data[4 + total :]
    return out


def send_once(w: World, p: Producer, mode: str, msg: Message) -> Any:
    if mode == "async":
        d = p.send_async(msg)
    elif mode == "sync":
        d = p.send(msg)
    else:
        d = p.send_oneway(msg)
    w.run()
    return _t.successResultOf(d)


def send_by_path(w: World, p: Producer, mode: str, payload: Any,
                 planned: bool) -> tuple[Any, list[tuple[bytes, bytes]], bool]:
    """One send of ``payload`` by the send plan, or (``planned`` false) by the general path: its
    outcome (the exception, if any: both paths must fail alike), the frames written and whether
    the general path's ``_first_request`` was called."""
    if not planned:
        p._plan_of = lambda topic: None  # type: ignore[method-assign]
    typed_calls = []
    first_request = p._first_request
    p._first_request = lambda *a, **k: typed_calls.append(a) or first_request(*a, **k)  # type: ignore[method-assign]
    try:
        written = record_writes(w, p)
        try:
            outcome = send_once(w, p, mode, payload)
        except Exception as e:  # noqa: BLE001
            outcome = e
    finally:
        del p._first_request
        if not planned:
            del p._plan_of
    return outcome, frames(written), bool(typed_calls)


def assert_same_outcome(got: Any, ref: Any) -> None:
    """The two paths failed alike, or both gave the same result (None for a oneway send)."""
    if isinstance(ref, Exception):
        assert type(got) is type(ref)
        assert re.sub(r"0x[0-9a-f]+", "", str(got)) == re.sub(r"0x[0-9a-f]+", "", str(ref))
    elif ref is None:
        assert got is None
    else:  # the broker's offsets move on between the two sends
        assert dataclasses.replace(got, offset_msg_id=None, queue_offset=0) == dataclasses.replace(
            ref, offset_msg_id=None, queue_offset=0)


text = st.text(st.sampled_from('ab"\\\x00\x01\x02\x7f\u00e9 '), max_size=4)
#: a map encode_properties writes (most sends), or any map (separators, empty keys: refused)
user_props = st.one_of(st.dictionaries(st.text('ab"\\\x00\x7f\u00e9 ', min_size=1, max_size=4),
                                       st.text('ab"\\\x00\x7f\u00e9 ', max_size=4), max_size=3),
                       st.dictionaries(text, text, max_size=3))
special = st.sampled_from([{}, {"MSG_TYPE": "reply"}, {"MSG_TYPE": "other"}, {"TRAN_MSG": "true"},
                           {"TRAN_MSG": "false"}, {"UNIQ_KEY": "0A0000010000000000000000000000FF"},
                           {"DELAY": "3"}, {"INNER_MULTI_DISPATCH": "a"}])


@settings(max_examples=200, deadline=None)
@given(mode=st.sampled_from(["async", "sync", "oneway"]),
       tags=st.one_of(st.none(), text), keys=st.lists(text, max_size=2),
       props=user_props, extra=special,
       flag=st.sampled_from([0, 7, -1, 2**31 - 1, 2**31, -(2**31) - 1]),
       body_size=st.sampled_from([1, 8, 15, 16, 40]), start=st.integers(-(2**31), 2**31 - 1))
def test_a_planned_send_is_the_existing_paths_send_byte_for_byte(mode, tags, keys, props, extra, flag,
                                                                  body_size, start) -> None:
    w = World(brokers=("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, compress_msg_body_over_howmuch=16)
    p.instance.unique_ids = FixedIds("0A000001000000000000000000001234")
    info = p.publish_info["T"]

    def one(planned: bool) -> tuple[Any, list[tuple[bytes, bytes]], dict[str, str], bool]:
        def message() -> Message:
            m = Message("T", bytes(range(body_size)), tags=tags or None, keys=keys or None)
            m.properties.update(props)  # any text, system names too: the paths decide
            m.properties.update(extra)
            m.flag = flag
            return m

        msg = message()
        info.index._value = start  # the same round-robin position for both
        outcome, written, general = send_by_path(w, p, mode, msg, planned)
        return outcome, written, dict(msg.properties), general

    ref, ref_frames, ref_props, _ = one(planned=False)
    got, got_frames, got_props, general = one(planned=True)
    assert got_frames == ref_frames
    assert list(got_props.items()) == list(ref_props.items())
    assert_same_outcome(got, ref)
    plain = (not extra and -(2**31) <= flag < 2**31 and body_size < 16
             and not any(k in {"MSG_TYPE", "TRAN_MSG"} for k in props))
    if plain and not isinstance(ref, Exception):
        assert len(got_frames) == 1
        assert not general, "a plain message takes the plan, not _first_request"
        assert p._plans["T"].ok


def test_the_plan_follows_a_route_change() -> None:
    w = World(brokers=("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w)
    send_once(w, p, "async", Message("T", b"x"))
    plan = p._plans["T"]
    assert plan.ok and plan.n == 8
    # the route now has two queues on broker-b only: the plan is made again from it
    w.add_topic("T", queues=2, brokers=("broker-b",))
    d = p.instance.update_topic_route("T")
    w.run()
    assert _t.successResultOf(d)
    w.sends.clear()
    for mode in ("async", "sync", "oneway"):
        send_once(w, p, mode, Message("T", b"x"))
    assert p._plans["T"] is not plan and p._plans["T"].n == 2
    assert {(s.header.n, s.header.e) for s in w.sends} <= {("broker-b", 0), ("broker-b", 1)}
    assert len(w.sends) == 3


def test_the_plan_follows_the_configuration() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    send_once(w, p, "async", Message("T", b"x"))
    plan = p._plans["T"]
    # a new producer configuration: a new plan, with its compression threshold
    p.config = dataclasses.replace(p.config, compress_msg_body_over_howmuch=2)
    w.sends.clear()
    send_once(w, p, "async", Message("T", b"xyz"))
    assert p._plans["T"] is not plan and p._plans["T"].compress_over == 2
    assert w.sends[-1].header.f & 0x1  # compressed: the existing path took it
    # the latency fault strategy turned on: no plan, the strategy picks
    p.fault_strategy.send_latency_fault_enable = True
    assert p._plan_of("T") is None
    p.fault_strategy.send_latency_fault_enable = False
    assert p._plan_of("T").ok
    # RPC hooks on the remoting client: no plan (the typed request)
    rc = p.instance.remoting.config
    p.instance.remoting.config = dataclasses.replace(rc, rpc_hooks=(object(),))
    assert p._plan_of("T") is None
    p.instance.remoting.config = rc
    assert p._plan_of("T").ok


def test_a_moved_broker_address_takes_the_general_path() -> None:
    w = World()
    w.add_topic("T")
    p = started(w)
    send_once(w, p, "async", Message("T", b"x"))
    assert p._plans["T"].ok
    calls = []
    first_attempt = p._first_attempt
    p._first_attempt = lambda *a: calls.append(a[5]) or first_attempt(*a)  # type: ignore[method-assign]
    addrs = p.instance.routes.broker_addrs["broker-a"]
    addrs[0] = "127.0.0.1:1"  # nobody listens: the general path tries it and fails over
    d = p.send_async(Message("T", b"x"))
    w.run()
    assert calls == ["127.0.0.1:1"]
    _t.failureResultOf(d)


wait_values = st.sampled_from([None, "true", "false", "TRUE", "no"])


@settings(max_examples=150, deadline=None)
@given(mode=st.sampled_from(["async", "sync", "oneway"]),
       batch=st.lists(st.tuples(st.one_of(st.none(), text), st.lists(text, max_size=2), user_props,
                                st.sampled_from([1, 8, 16, 40]), st.sampled_from([0, 7, -1])),
                      min_size=1, max_size=4),
       wait=wait_values, start=st.integers(-(2**31), 2**31 - 1))
def test_a_planned_batch_is_the_existing_paths_batch_byte_for_byte(mode, batch, wait, start) -> None:
    w = World(brokers=("broker-a", "broker-b"))
    w.add_topic("T")
    p = started(w, compress_msg_body_over_howmuch=16)  # a batch is never compressed
    p.instance.unique_ids = FixedIds("0A000001000000000000000000001234")
    info = p.publish_info["T"]

    def one(planned: bool) -> tuple[Any, list[tuple[bytes, bytes]], list[list[tuple[str, str]]], bool]:
        msgs = []
        for tags, keys, props, body_size, flag in batch:
            m = Message("T", bytes(range(body_size)), tags=tags or None, keys=keys or None)
            m.properties.update(props)  # any text, system names too: the paths decide
            if wait is not None:
                m.properties["WAIT"] = wait
            m.flag = flag
            msgs.append(m)
        info.index._value = start  # the same round-robin position for both
        outcome, written, general = send_by_path(w, p, mode, msgs, planned)
        return outcome, written, [list(m.properties.items()) for m in msgs], general

    ref, ref_frames, ref_props, _ = one(planned=False)
    got, got_frames, got_props, general = one(planned=True)
    assert got_frames == ref_frames
    assert got_props == ref_props
    assert_same_outcome(got, ref)
    if mode != "oneway" and not isinstance(ref, Exception):
        assert len(got_frames) == 1 and b'"code":320' in got_frames[0][0]
        assert not general, "a batch takes the plan, not _first_request"


def test_a_batch_map_the_plan_does_not_frame_takes_the_general_path() -> None:
    from rmqwire.client.producer.producer import _planned_batch_text

    uid = "0A000001000000000000000000001234"
    assert _planned_batch_text({"WAIT": "true", "UNIQ_KEY": uid}) == (
        f"WAIT\x01true\x02UNIQ_KEY\x01{uid}\x02",
        f'"WAIT\\u0001true\\u0002UNIQ_KEY\\u0001{uid}\\u0002"'.encode())
    for props in ({"WAIT": "true"}, {"WAIT": "true", "UNIQ_KEY": uid, "INSTANCE_ID": "ns"},
                  {"WAIT": "TRUE", "UNIQ_KEY": uid}, {"WAIT": "true", "UNIQ_KEY": "a\"b"},
                  {"WAIT": "true", "UNIQ_KEY": "\u00e9"}, {"WAIT": "true", "KEYS": uid}):
        assert _planned_batch_text(props) is None, props
