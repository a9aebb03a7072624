"""One assigned queue's pulled-but-unconsumed messages (Java ``ProcessQueue``).

Messages are kept by queue offset; the consumer offset to commit is always the smallest offset
still held (``remove_messages`` returns it, or the last pulled offset + 1 when nothing is left),
so a commit never skips a message still being consumed. Orderly consumption takes messages in
offset order into a "consuming" set and either commits them (offset = last taken + 1) or puts
them back.

Only the reactor thread touches a ProcessQueue (consume threads hand their results back to it),
so there are no locks; ``consuming_tasks`` counts listener runs in flight (what Java's consume
lock guards). Offsets arrive in increasing order, so a deque keeps them sorted; a removed offset
is dropped from the deque lazily. Times are ms from the injected clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from rmqwire.codec.commands.consumer import ProcessQueueInfo
from rmqwire.codec.message import MessageExt, PropertyKey

__all__ = [
    "PULL_MAX_IDLE_TIME",
    "REBALANCE_LOCK_INTERVAL",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "ProcessQueue",
]

#: Java ``rocketmq.client.rebalance.lockMaxLiveTime``: a local lock older than this is expired.
REBALANCE_LOCK_MAX_LIVE_TIME = 30_000
#: Java ``rocketmq.client.rebalance.lockInterval``: how often orderly consumers relock.
REBALANCE_LOCK_INTERVAL = 20_000
#: Java ``rocketmq.client.pull.pullMaxIdleTime``: a queue not pulled for this long is re-created.
PULL_MAX_IDLE_TIME = 120_000


def _size(msg: MessageExt) -> int:
    return len(msg.body) if msg.body else 0


class ProcessQueue:
    __slots__ = (
        "_now", "_order", "consuming", "consuming_orderly", "consuming_tasks", "dropped",
        "last_consume_timestamp", "last_lock_timestamp", "last_pull_timestamp", "locked",
        "msg_acc_cnt", "msg_count", "msg_size", "msg_tree", "queue_offset_max",
        "try_unlock_times",
    )

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now = now_ms
        now = now_ms()
        self.msg_tree: dict[int, MessageExt] = {}
        self._order: deque[int] = deque()
        self.consuming_orderly: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.locked = False
        self.last_lock_timestamp = now
        self.consuming = False
        self.msg_acc_cnt = 0
        self.try_unlock_times = 0
        self.consuming_tasks = 0

    def __repr__(self) -> str:
        return (f"ProcessQueue(count={self.msg_count}, first={self.first_offset()}, "
                f"dropped={self.dropped}, locked={self.locked})")

    # ---- time-based state -------------------------------------------------------------------

    def is_lock_expired(self) -> bool:
        return self._now() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self) -> bool:
        return self._now() - self.last_pull_timestamp > PULL_MAX_IDLE_TIME

    # ---- ordered offsets --------------------------------------------------------------------

    def first_offset(self) -> int | None:
        order, tree = self._order, self.msg_tree
        while order and order[0] not in tree:
            order.popleft()
        return order[0] if order else None

    def last_offset(self) -> int | None:
        order, tree = self._order, self.msg_tree
        while order and order[-1] not in tree:
            order.pop()
        return order[-1] if order else None

    def _resort(self) -> None:
        self._order = deque(sorted(self.msg_tree))

    # ---- pulled messages --------------------------------------------------------------------

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages; True when a consume request should be dispatched (orderly:
        nobody is consuming this queue yet)."""
        tree, order = self.msg_tree, self._order
        added = size = 0
        last: MessageExt | None = None
        unordered = False
        for msg in msgs:
            last = msg
            offset = msg.queue_offset
            if offset in tree:
                tree[offset] = msg  # Java's TreeMap.put replaces, counts unchanged
                continue
            tree[offset] = msg
            if order and offset <= order[-1]:
                unordered = True
            order.append(offset)
            added += 1
            self.queue_offset_max = offset
            body = msg.body
            if body:
                size += len(body)
        if unordered:
            self._resort()
        self.msg_count += added
        self.msg_size += size
        dispatch = False
        if tree and not self.consuming:
            dispatch = True
            self.consuming = True
        if last is not None:
            max_offset = last.get_property(PropertyKey.MAX_OFFSET)
            if max_offset is not None:
                acc = int(max_offset) - last.queue_offset
                if acc > 0:
                    self.msg_acc_cnt = acc
        return dispatch

    def max_span(self) -> int:
        first = self.first_offset()
        if first is None:
            return 0
        last = self.last_offset()
        assert last is not None
        return last - first

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; the offset to commit (-1 when the queue held nothing)."""
        self.last_consume_timestamp = self._now()
        tree = self.msg_tree
        if not tree:
            return -1
        removed = size = 0
        pop = tree.pop
        for msg in msgs:
            if pop(msg.queue_offset, None) is not None:
                removed += 1
                body = msg.body
                if body:
                    size += len(body)
        self.msg_count -= removed
        self.msg_size -= size
        if self.msg_count == 0:
            self.msg_size = 0
        first = self.first_offset()
        return first if first is not None else self.queue_offset_max + 1

    def contains(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self.msg_tree

    def has_temp_message(self) -> bool:
        return bool(self.msg_tree)

    def clear(self) -> None:
        self.msg_tree.clear()
        self._order.clear()
        self.consuming_orderly.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    # ---- orderly consumption ----------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """The next ``batch_size`` messages in offset order, moved to the consuming set; an
        empty list ends this round of consumption (``consuming`` is cleared)."""
        self.last_consume_timestamp = self._now()
        out: list[MessageExt] = []
        tree, order = self.msg_tree, self._order
        while len(out) < batch_size:
            first = self.first_offset()
            if first is None:
                break
            order.popleft()
            msg = tree.pop(first)
            self.consuming_orderly[first] = msg
            out.append(msg)
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """The taken messages are consumed: the offset after the last of them (-1: none)."""
        taken = self.consuming_orderly
        if not taken:
            return -1
        offset = max(taken)
        self.msg_count -= len(taken)
        if self.msg_count == 0:
            self.msg_size = 0
        else:
            self.msg_size -= sum(_size(m) for m in taken.values())
        taken.clear()
        return offset + 1

    def rollback(self) -> None:
        """Put every taken message back, to be consumed again."""
        self.make_messages_to_consume_again(list(self.consuming_orderly.values()))

    def make_messages_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        back = list(msgs)
        for msg in back:
            self.consuming_orderly.pop(msg.queue_offset, None)
            self.msg_tree[msg.queue_offset] = msg
        if back:
            self._resort()  # rare (a failed orderly batch): keep it simple

    # ---- reporting --------------------------------------------------------------------------

    def fill_process_queue_info(self, commit_offset: int) -> ProcessQueueInfo:
        info = ProcessQueueInfo(commit_offset=commit_offset)
        first = self.first_offset()
        if first is not None:
            info.cached_msg_min_offset = first
            info.cached_msg_max_offset = self.last_offset() or first
            info.cached_msg_count = len(self.msg_tree)
        info.cached_msg_size_in_mib = self.msg_size // (1024 * 1024)
        if self.consuming_orderly:
            info.transaction_msg_min_offset = min(self.consuming_orderly)
            info.transaction_msg_max_offset = max(self.consuming_orderly)
            info.transaction_msg_count = len(self.consuming_orderly)
        info.locked = self.locked
        info.try_unlock_times = self.try_unlock_times
        info.last_lock_timestamp = self.last_lock_timestamp
        info.droped = self.dropped
        info.last_pull_timestamp = self.last_pull_timestamp
        info.last_consume_timestamp = self.last_consume_timestamp
        return info
