"""ProcessQueue: the offset to commit is always the smallest message still held; orderly
take/commit/rollback; counters and the running-info snapshot (Java ``ProcessQueue``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rmqwire.client.consumer.process_queue import (
    PULL_MAX_IDLE_TIME,
    REBALANCE_LOCK_MAX_LIVE_TIME,
    ProcessQueue,
)
from rmqwire.codec.message import MessageExt


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def msg(offset: int, size: int = 10, max_offset: int | None = None) -> MessageExt:
    props = {} if max_offset is None else {"MAX_OFFSET": str(max_offset)}
    return MessageExt(topic="T", body=b"x" * size, queue_offset=offset, properties=props)


def test_remove_returns_the_smallest_offset_still_held() -> None:
    pq = ProcessQueue(Clock())
    batch = [msg(i) for i in range(10, 15)]
    assert pq.put_messages(batch) is True  # nobody consumes yet: dispatch
    assert pq.put_messages([msg(15)]) is False
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (6, 60, 5)
    assert pq.remove_messages([batch[1], batch[3]]) == 10  # 10 is still in flight
    assert pq.remove_messages([batch[0]]) == 12
    assert pq.remove_messages([batch[2], batch[4], msg(15)]) == 16  # empty: last pulled + 1
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert ProcessQueue(Clock()).remove_messages([msg(1)]) == -1


def test_duplicate_offsets_replace_and_out_of_order_puts_stay_sorted() -> None:
    pq = ProcessQueue(Clock())
    pq.put_messages([msg(5), msg(6)])
    pq.put_messages([msg(6, size=99), msg(3)])
    assert pq.msg_count == 3 and pq.first_offset() == 3 and pq.last_offset() == 6
    assert pq.msg_tree[6].body == b"x" * 99


@given(st.lists(st.integers(0, 200), min_size=1, unique=True), st.data())
def test_commit_offset_model(offsets: list[int], data: st.DataObject) -> None:
    pq = ProcessQueue(Clock())
    ordered = sorted(offsets)
    pq.put_messages([msg(o) for o in ordered])
    held = set(ordered)
    for o in data.draw(st.permutations(ordered)):
        held.discard(o)
        expected = min(held) if held else ordered[-1] + 1
        assert pq.remove_messages([msg(o)]) == expected


def test_orderly_take_commit_and_put_back() -> None:
    pq = ProcessQueue(Clock())
    pq.put_messages([msg(i) for i in range(5)])
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    assert pq.commit() == 2 and pq.msg_count == 3
    again = pq.take_messages(2)
    pq.make_messages_to_consume_again(again)
    assert [m.queue_offset for m in pq.take_messages(3)] == [2, 3, 4]
    pq.rollback()
    assert pq.first_offset() == 2 and pq.msg_count == 3
    assert [m.queue_offset for m in pq.take_messages(10)] == [2, 3, 4]
    assert pq.commit() == 5 and pq.msg_count == 0
    assert pq.take_messages(1) == [] and pq.consuming is False
    assert pq.commit() == -1


def test_lock_and_pull_expiry_and_info() -> None:
    clock = Clock()
    pq = ProcessQueue(clock)
    pq.put_messages([msg(7, max_offset=20), msg(8, max_offset=20)])
    assert pq.msg_acc_cnt == 12
    clock.ms += REBALANCE_LOCK_MAX_LIVE_TIME + 1
    assert pq.is_lock_expired() and not pq.is_pull_expired()
    clock.ms += PULL_MAX_IDLE_TIME
    assert pq.is_pull_expired()
    pq.take_messages(1)
    info = pq.fill_process_queue_info(commit_offset=7)
    assert (info.commit_offset, info.cached_msg_min_offset, info.cached_msg_max_offset, info.cached_msg_count) == (
        7, 8, 8, 1)
    assert (info.transaction_msg_min_offset, info.transaction_msg_count) == (7, 1)
    pq.clear()
    assert pq.msg_count == 0 and pq.first_offset() is None and not pq.has_temp_message()
