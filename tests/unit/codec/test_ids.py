"""Offset message ids, client unique ids (UNIQ_KEY) and client ids (wire-format.md 10.7)."""

from __future__ import annotations

import datetime
import socket
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec.ids import (
    OffsetMessageId,
    UniqueIdGenerator,
    _month_bounds_ms,
    build_client_id,
    create_offset_msg_id,
    instance_name_for_pid,
    ip_from_id,
    nearly_time_from_id,
    parse_offset_msg_id,
    parse_unique_id,
)
from rmqwire.errors import CodecError


def _local_ms(*args) -> int:
    return int(datetime.datetime(*args).timestamp()) * 1000


def test_spec_offset_msg_id():
    assert create_offset_msg_id(("192.168.0.20", 10911), 1234) == "C0A8001400002A9F00000000000004D2"
    assert parse_offset_msg_id("C0A8001400002A9F00000000000004D2") == OffsetMessageId(
        ("192.168.0.20", 10911), 1234
    )
    assert parse_offset_msg_id("c0a8001400002a9f00000000000004d2").commit_log_offset == 1234


def test_ipv6_offset_msg_id_is_56_chars():
    mid = create_offset_msg_id(("fe80::2", 10911), 1 << 33)
    assert mid == "FE80000000000000000000000000000200002A9F0000000200000000"  # as Java printed it
    assert parse_offset_msg_id(mid) == OffsetMessageId(("fe80::2", 10911), 1 << 33)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "XYZ",
        "C0A8",
        "C0A8001400002A9F00000000000004D2AB",
        "G" * 32,
        "C0A80014 00002A9F 00000000000004D2",  # bytes.fromhex would skip the spaces
        "C0A80014FFFFFFFF00000000000004D2",  # port -1: Java's InetSocketAddress refuses it
        "C0A800140001000000000000000004D2",  # port 65536
    ],
)
def test_bad_offset_msg_ids(bad):
    with pytest.raises(CodecError):
        parse_offset_msg_id(bad)


@pytest.mark.parametrize(
    "host,offset",
    [(("10.0.0.1", -1), 0), (("10.0.0.1", 65536), 0), (("10.0.0.1", 1), 2**63), ("10.0.0.1", 0),
     (("10.0.0.1", "x"), 0), (("nope", 1), 0)],
)
def test_bad_offset_msg_id_fields(host, offset):
    with pytest.raises(CodecError):
        create_offset_msg_id(host, offset)


ipv4 = st.binary(min_size=4, max_size=4).map(lambda b: socket.inet_ntop(socket.AF_INET, b))
ipv6 = st.binary(min_size=16, max_size=16).map(lambda b: socket.inet_ntop(socket.AF_INET6, b))


@settings(max_examples=200)
@given(st.one_of(ipv4, ipv6), st.integers(0, 65535), st.integers(-(2**63), 2**63 - 1))
def test_offset_msg_id_round_trip(ip, port, offset):
    mid = create_offset_msg_id((ip, port), offset)
    assert len(mid) == (56 if ":" in ip else 32) and mid == mid.upper()
    assert parse_offset_msg_id(mid) == OffsetMessageId((ip, port), offset)


def test_spec_uniq_key_parses():
    info = parse_unique_id("C0A8000A1F9018B4AAC2000000000000")
    assert (info.ip, info.pid, info.hash_code, info.span_ms, info.counter) == (
        "192.168.0.10", 0x1F90, 0x18B4AAC2, 0, 0
    )


def test_generator_layout_and_counter_wrap():
    now = _local_ms(2024, 3, 15, 12, 0, 0)
    gen = UniqueIdGenerator("10.1.2.3", pid=0x12345, hash_code=0xCAFEBABE, clock=lambda: now,
                            counter_start=0xFFFF)
    a, b = gen.next_id(), gen()
    span = now - _local_ms(2024, 3, 1)
    assert a == f"0A010203" f"2345" f"CAFEBABE" f"{span:08X}" "FFFF"
    assert b.endswith("0000") and len(b) == 32
    info = parse_unique_id(a)
    assert (info.ip, info.pid, info.hash_code, info.span_ms, info.counter) == (
        "10.1.2.3", 0x2345, 0xCAFEBABE, span, 0xFFFF
    )
    assert ip_from_id(a) == "10.1.2.3"


def test_ipv6_unique_id_is_56_chars():
    gen = UniqueIdGenerator("2001:db8::1", pid=1, hash_code=2, clock=lambda: _local_ms(2024, 1, 2))
    uid = gen()
    assert len(uid) == 56 and parse_unique_id(uid).ip == "2001:db8::1"
    # Java's getIPStrFromID spells IPv6 uncompressed (UtilAll.ipToIPv6Str)
    assert ip_from_id(uid) == "2001:0db8:0000:0000:0000:0000:0000:0001"


def test_generator_without_ip_uses_javas_fake_ip():
    now = 0x0123456789AB
    uid = UniqueIdGenerator(pid=1, hash_code=2, clock=lambda: now)()
    assert uid.startswith("456789AB")


def test_month_rollover_resets_the_span():
    t = [_local_ms(2024, 1, 31, 23, 59, 59)]
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: t[0])
    first = parse_unique_id(gen()).span_ms
    t[0] = _local_ms(2024, 2, 1, 0, 0, 1)
    second = parse_unique_id(gen()).span_ms
    assert first == 30 * 86400_000 + 86399_000 and second == 1000


def test_clock_step_back_is_clamped_like_java():
    t = [_local_ms(2024, 5, 1, 0, 0, 10)]
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: t[0])
    t[0] -= 20_000  # 10 s before the month's start
    assert parse_unique_id(gen()).span_ms == 0


def test_nearly_time_like_java():
    made = _local_ms(2024, 3, 15, 12, 0, 0)
    uid = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: made)()
    assert nearly_time_from_id(uid, now_ms=made + 5000) == made
    # read back in the next month: still this month's time
    assert nearly_time_from_id(uid, now_ms=_local_ms(2024, 4, 2)) == made
    # read "before" it was made in the same month: Java assumes the previous month
    assert nearly_time_from_id(uid, now_ms=_local_ms(2024, 3, 10)) == _local_ms(2024, 2, 15, 12, 0, 0)


def test_generator_is_thread_safe():
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2)
    seen: list[str] = []
    lock = threading.Lock()

    def work():
        ids = [gen() for _ in range(2000)]
        with lock:
            seen.extend(ids)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    counters = sorted(parse_unique_id(u).counter for u in seen)
    assert counters == list(range(8000))


def test_ids_stay_unique_with_threads_switching_between_any_two_bytecodes():
    # single ids and batches from eight threads, the interpreter switching threads as often as it
    # can: every counter value is taken exactly once (the counter takes no lock), and a batch's
    # ids are consecutive (its counters are taken in one C call)
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, counter_start=0xFF00)
    got: list[list[str]] = []
    start = threading.Barrier(8)

    def work(k: int) -> None:
        mine = []
        start.wait()
        for i in range(300):
            if (i + k) % 3:
                mine.append([gen.next_id()])
            else:
                mine.append(gen.next_ids(1 + (i * 7 + k) % 40))
        got.extend(mine)  # list.extend is atomic

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    total = sum(map(len, got))
    counters = [parse_unique_id(u).counter for ids in got for u in ids]
    assert total > 0xFFFF - 0xFF00  # the 16-bit counter wrapped during the run
    # values 0xFF00 .. 0xFF00 + total - 1, each once, seen through the id's 16 bits
    assert sorted((c - 0xFF00) & 0xFFFF for c in counters) == list(range(total))
    for ids in got:
        cs = [parse_unique_id(u).counter for u in ids]
        assert cs == [(cs[0] + i) & 0xFFFF for i in range(len(cs))]


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**20), 2**20), st.integers(0, 1500))
def test_next_ids_spelled_as_formatted_counters(counter, n):
    # the ids of a batch, whose counters may cross any number of high-byte runs and the 16-bit
    # wrap, end in the counter's 4 uppercase hex digits, as Java's writeShort writes them
    now = _local_ms(2024, 3, 15, 12, 0, 0)
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: now, counter_start=counter)
    head = f"{gen._prefix}{now - _local_ms(2024, 3, 1):08X}"
    assert gen.next_ids(n) == [f"{head}{c & 0xFFFF:04X}" for c in range(counter, counter + n)]
    assert gen.next_id() == f"{head}{(counter + n) & 0xFFFF:04X}"


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**17), 2**17), st.integers(0, 300))
def test_next_id_run_is_next_ids_and_their_shared_text(counter, n):
    # the ids are next_ids'; when no low byte wraps among them, each is the shared text and the
    # two hex digits of low, low + 1, ... (what encode_batch_run writes), else no run is given
    now = _local_ms(2024, 3, 15, 12, 0, 0)
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: now, counter_start=counter)
    ref = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: now, counter_start=counter)
    ids, text, low = gen.next_id_run(n)
    assert ids == ref.next_ids(n)
    if 0 < n and (counter & 0xFF) + n <= 256:
        assert low == counter & 0xFF
        assert ids == [f"{text}{low + i:02X}" for i in range(n)]
    else:
        assert (text, low) == ("", -1)
    assert gen.next_id() == ref.next_id()


def test_bad_unique_ids():
    for bad in ("", "00", "Z" * 32, "0" * 40):
        with pytest.raises(CodecError):
            parse_unique_id(bad)
    with pytest.raises(CodecError):
        UniqueIdGenerator("not-an-ip")


def test_client_id():
    assert build_client_id("10.0.0.1", "inst") == "10.0.0.1@inst"
    assert build_client_id("10.0.0.1", "inst", "unit") == "10.0.0.1@inst@unit"
    assert build_client_id("10.0.0.1", "inst", "  ", stream=True) == "10.0.0.1@inst@STREAM"
    assert instance_name_for_pid("mine") == "mine"
    pid_name = instance_name_for_pid("DEFAULT", pid=4242)
    pid, nanos = pid_name.split("#")
    assert pid == "4242" and nanos.isdigit()


@settings(max_examples=200)
@given(
    st.one_of(ipv4, ipv6),
    st.integers(0, 2**31),
    st.integers(0, 2**32 - 1),
    st.integers(_local_ms(2001, 1, 1), _local_ms(2099, 12, 31)),
    st.integers(0, 2**20),
)
def test_unique_id_round_trip(ip, pid, hash_code, now, counter):
    uid = UniqueIdGenerator(ip, pid=pid, hash_code=hash_code, clock=lambda: now, counter_start=counter)()
    info = parse_unique_id(uid)
    assert uid == uid.upper() and len(uid) == (56 if ":" in ip else 32)
    assert (info.ip, info.pid, info.hash_code, info.counter) == (ip, pid & 0xFFFF, hash_code, counter & 0xFFFF)
    assert info.nearly_time_ms(now + 1) == now


@settings(max_examples=300, deadline=None)
@given(
    st.integers(_local_ms(2023, 12, 31, 23, 0, 0), _local_ms(2024, 1, 1, 1, 0, 0)),
    st.integers(-30_000, 30_000),
    st.integers(0, 0x1FFFF),
    st.integers(0, 40),
)
def test_next_ids_equal_next_id_calls_in_one_millisecond(t0, step, counter, n):
    # two generators in the same state (the second clock read may cross a month or step back)
    clock = [t0]
    a = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: clock[0], counter_start=counter)
    b = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: clock[0], counter_start=counter)
    clock[0] = t0 + step
    assert a.next_ids(n) == [b.next_id() for _ in range(n)]
    assert a.next_id() == b.next_id()  # the counter moved on by n in both


class _UncachedIds:
    """The id layout computed afresh on every call (the generator before it kept a head per ms)."""

    def __init__(self, prefix: str, now: int, counter: int) -> None:
        self.prefix = prefix
        self.counter = counter
        self.start, self.next_start = _month_bounds_ms(now)

    def next_id(self, now: int) -> str:
        if now >= self.next_start:
            self.start, self.next_start = _month_bounds_ms(now)
        diff = (now - self.start) & 0xFFFFFFFF
        signed = diff - 0x100000000 if diff & 0x80000000 else diff
        if -1_000_000 < signed < 0:
            diff = 0
        counter = self.counter & 0xFFFF
        self.counter += 1
        return f"{self.prefix}{diff:08X}{counter:04X}"


@settings(max_examples=300, deadline=None)
@given(
    st.integers(_local_ms(2024, 1, 31, 23, 59, 0), _local_ms(2024, 2, 1, 0, 1, 0)),
    st.lists(st.tuples(st.sampled_from([0, 0, 1, -1, 7, -2_000, 40_000, -1_100_000]),
                       st.integers(1, 3)), max_size=30),
    st.integers(0, 0x1FFFF),
)
def test_ids_with_the_per_ms_head_equal_ids_computed_afresh(t0, steps, counter):
    # the head kept for the last millisecond is what a fresh computation gives, across repeated
    # readings, steps back (clamped or not) and a month boundary crossed both ways
    clock = [t0]
    gen = UniqueIdGenerator("1.2.3.4", pid=1, hash_code=2, clock=lambda: clock[0], counter_start=counter)
    ref = _UncachedIds(gen._prefix, t0, counter)
    for step, n in steps:
        clock[0] += step
        if n == 1:
            assert gen.next_id() == ref.next_id(clock[0])
        else:
            assert gen.next_ids(n) == [ref.next_id(clock[0]) for _ in range(n)]
