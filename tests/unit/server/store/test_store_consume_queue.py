"""Consume queues and the pull path: entries, files, offsets, statuses, filters, time search."""

from __future__ import annotations

import struct

from store_helpers import make_msg, small_config

from rmqwire.codec.java import java_string_hash
from rmqwire.codec.message import decode_messages
from rmqwire.server.store import BoundaryType, GetMessageStatus, TagsMessageFilter
from rmqwire.server.store.config import file_name


def test_entries_are_20_bytes_offset_size_tags(store, tmp_path):
    rs = [store.put_message(make_msg(queue_id=3, tags=t)) for t in ("TagA", None, "TagB")]
    path = tmp_path / "store" / "consumequeue" / "TopicTest" / "3" / file_name(0)
    assert path.stat().st_size == 50 * 20
    data = path.read_bytes()
    for i, (r, t) in enumerate(zip(rs, ("TagA", None, "TagB"), strict=True)):
        offset, size, tags = struct.unpack_from(">qiq", data, i * 20)
        assert offset == r.commit_log_offset
        assert size == r.append_result.wrote_bytes
        assert tags == (java_string_hash(t) if t else 0)
    assert data[60:80] == bytes(20)


def test_queue_files_roll_and_offsets_continue(store, tmp_path):
    for _ in range(120):
        assert store.put_message(make_msg(queue_id=0)).is_ok
    qdir = tmp_path / "store" / "consumequeue" / "TopicTest" / "0"
    assert sorted(p.name for p in qdir.iterdir()) == [file_name(0), file_name(1000), file_name(2000)]
    assert store.get_max_offset_in_queue("TopicTest", 0) == 120
    assert store.get_min_offset_in_queue("TopicTest", 0) == 0
    assert store.get_message_total_in_queue("TopicTest", 0) == 120
    # a pull reads one consume-queue file at most (travelCqFileNumWhenGetMessage = 1)
    res = store.get_message("g", "TopicTest", 0, 45, 32)
    assert res.status is GetMessageStatus.FOUND
    assert res.message_queue_offsets == list(range(45, 50))
    assert res.next_begin_offset == 50
    res = store.get_message("g", "TopicTest", 0, 50, 32)
    assert res.message_queue_offsets == list(range(50, 82))
    rec77 = decode_messages(res.message_buffers[27])[0]
    assert rec77.queue_offset == 77
    assert store.get_commit_log_offset_in_queue("TopicTest", 0, 77) == rec77.commit_log_offset


def test_pull_statuses(store):
    assert store.get_message("g", "Nope", 0, 5, 32).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert store.get_message("g", "Nope", 0, 5, 32).next_begin_offset == 0
    for i in range(5):
        store.put_message(make_msg(queue_id=1, body=f"{i}".encode()))
    ok = store.get_message("g", "TopicTest", 1, 0, 32)
    assert ok.status is GetMessageStatus.FOUND
    assert (ok.min_offset, ok.max_offset, ok.next_begin_offset, ok.message_count) == (0, 5, 5, 5)
    assert [m.body for m in decode_messages(ok.body)] == [b"0", b"1", b"2", b"3", b"4"]
    one = store.get_message("g", "TopicTest", 1, 5, 32)
    assert (one.status, one.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 5)
    bad = store.get_message("g", "TopicTest", 1, 9, 32)
    assert (bad.status, bad.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 5)
    empty = store.get_message("g", "TopicTest", 2, 0, 32)
    assert empty.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    part = store.get_message("g", "TopicTest", 1, 2, 2)
    assert part.message_queue_offsets == [2, 3] and part.next_begin_offset == 4


def test_transfer_limits(store):
    for _ in range(40):
        store.put_message(make_msg(body=b"q" * 100))
    res = store.get_message("g", "TopicTest", 0, 0, 64)
    assert res.message_count == 32  # maxTransferCountOnMessageInMemory
    res = store.get_message("g", "TopicTest", 0, 0, 64, max_total_msg_size=1000)
    assert 0 < res.buffer_total_size <= 1000 and res.message_count < 32


def test_tag_filter(store):
    for i in range(6):
        store.put_message(make_msg(tags="TagA" if i % 3 == 0 else "TagB"))
    res = store.get_message("g", "TopicTest", 0, 0, 32, message_filter=TagsMessageFilter.from_expression("TagA"))
    assert res.message_queue_offsets == [0, 3]
    assert res.next_begin_offset == 6
    res = store.get_message("g", "TopicTest", 0, 1, 32, message_filter=TagsMessageFilter.from_expression("TagC || X"))
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 6)
    everything = TagsMessageFilter.from_expression("*")
    assert store.get_message("g", "TopicTest", 0, 0, 32, message_filter=everything).message_count == 6
    assert TagsMessageFilter.from_tags(["TagA"]) == TagsMessageFilter.from_expression(" TagA ")


def test_arrival_listener_and_extra_dispatchers(store):
    arrivals, seen = [], []
    store.add_arrival_listener(lambda req: arrivals.append((req.topic, req.queue_id, req.consume_queue_offset + 1)))
    store.add_dispatcher(lambda req: seen.append(req.commit_log_offset))

    def broken(req):
        raise RuntimeError("listener bug")

    store.add_arrival_listener(broken)
    r1 = store.put_message(make_msg(queue_id=0))
    r2 = store.put_message(make_msg(queue_id=2))
    store.put_message(make_msg(queue_id=0, sys_flag=0x4))  # prepared: dispatched, not queued
    assert arrivals[:2] == [("TopicTest", 0, 1), ("TopicTest", 2, 1)]
    assert seen[:2] == [r1.commit_log_offset, r2.commit_log_offset] and len(seen) == 3


def test_time_search_and_store_times(store_factory, tmp_path):
    clock = {"now": 1_000_000}
    store = store_factory(small_config(tmp_path / "store"), now_ms=lambda: clock["now"])
    times = []
    for i in range(120):  # three consume-queue files
        clock["now"] = 1_000_000 + (i // 2) * 10  # two messages per timestamp
        times.append(store.put_message(make_msg()).store_timestamp)
    assert store.get_earliest_message_time("TopicTest", 0) == 1_000_000
    assert store.get_earliest_message_time_in_store() == 1_000_000
    assert store.get_message_store_timestamp("TopicTest", 0, 77) == times[77]
    assert store.get_message_store_timestamp("TopicTest", 0, 500) == -1
    lower = BoundaryType.LOWER
    upper = BoundaryType.UPPER
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 1_000_000 + 300) == 60  # first of the pair
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 1_000_000 + 300, upper) == 61
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 1_000_000 + 305, lower) == 62  # between
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 1_000_000 + 305, upper) == 61
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 10**12) == 120
    assert store.get_offset_in_queue_by_time("Unknown", 0, 10**12) == 0
    for i in (0, 1, 49, 50, 99, 100, 119):
        assert store.get_offset_in_queue_by_time("TopicTest", 0, times[i], lower) == i - (i % 2)


def test_consume_queue_files_hold_at_most_one_descriptor(store):
    import os
    import resource
    import sys

    before = len(os.listdir("/proc/self/fd"))
    for t in range(40):
        for q in range(4):
            assert store.put_message(make_msg(topic=f"Many{t}", queue_id=q)).is_ok
    store.flush_consume_queues(0)
    grown = len(os.listdir("/proc/self/fd")) - before
    # Python < 3.13: mmap keeps a duplicate descriptor per file; from 3.13 none is kept
    assert grown < (10 if sys.version_info >= (3, 13) else 160 + 10)
    assert store.get_max_offset_in_queue("Many39", 3) == 1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard  # load() raised the soft limit, as a broker host's ulimit would
