"""5.x timer messages (Java ``TimerMessageStore``): messages parked by the put hook in
``rmq_sys_wheel_timer`` queue 0 are re-put to their real topic and queue once their slot
(``TIMER_OUT_MS``, rounded down to ``timerPrecisionMs``) has passed.

The messages live in the CommitLog and the consume queue exactly as Java's do, so an official
broker reading the store finds them. The timer's own index is rmqwire's, not Java's timerwheel /
timerlog files: the pending entries are a heap in memory, rebuilt at start by re-reading the
timer queue, and a small checkpoint (``config/rmqwireTimerCheck.json``) says where to re-read
from and which entries were already delivered:

- ``lowWaterOffset``: every queue entry below it was delivered;
- ``enqueueOffset`` and ``readTimeMs``: an entry in [lowWaterOffset, enqueueOffset) whose slot is
  before ``readTimeMs`` was delivered; everything else is delivered (again) after a restart.

So a message is delivered at least once, not early, and a restart only repeats deliveries of the
last checkpoint interval. Runs on the reactor: one pass every 100 ms reads new queue entries and
re-puts the due ones, a bounded number per pass; the checkpoint is written in a thread.

Delivered records carry what Java's carry: the original properties plus TIMER_OUT_MS,
TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS, REAL_TOPIC and REAL_QID (Java fixes the record's properties
before it clears the last two).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from rmqwire.codec.java import now_ms
from rmqwire.codec.message import MessageExt, PropertyKey
from rmqwire.server.broker.processors.send import hashmap_ordered
from rmqwire.server.broker.schedule.delay import _in_thread
from rmqwire.server.broker.topic_config import TIMER_TOPIC
from rmqwire.server.files import atomic_write
from rmqwire.server.store import DefaultMessageStore, PutMessageStatus

__all__ = ["TimerMessageStore"]

#: Seconds between passes.
TICK = 0.1
#: Queue entries read, and messages re-put, in one pass at most.
BATCH = 1024
CHECKPOINT_NAME = "rmqwireTimerCheck.json"


class TimerMessageStore:
    log = Logger()

    def __init__(self, reactor: Any, store: DefaultMessageStore, checkpoint_path: str | Path | None, *,
                 precision_ms: Callable[[], int] = lambda: 1000,
                 flush_interval_ms: int = 1000,
                 clock: Callable[[], int] = now_ms,
                 run_blocking: Callable[[Callable[[], None]], Deferred[None]] | None = None,
                 on_put: Callable[[str, int, int], None] | None = None) -> None:
        self.reactor = reactor
        self.store = store
        self.path = Path(checkpoint_path) if checkpoint_path is not None else None
        self.precision_ms = precision_ms
        self.flush_interval_ms = flush_interval_ms
        self.clock = clock
        self._run_blocking = run_blocking if run_blocking is not None else _in_thread(reactor)
        #: Told of every re-put (topic, messages, bytes), as Java counts them in the topic's puts.
        self.on_put = on_put
        #: (slot ms, queue offset, commit-log offset, enqueue time ms)
        self._heap: list[tuple[int, int, int, int]] = []
        self.enqueue_offset = 0
        self.read_time_ms = 0
        #: At load: below ``_skip_until`` an entry whose slot is before ``_skip_before_ms`` was delivered.
        self._skip_until = 0
        self._skip_before_ms = 0
        self._loop: LoopingCall | None = None
        self._last_flush = 0
        self._writing: Deferred[None] | None = None
        self._written: dict[str, int] | None = None
        self.enqueued = 0
        self.dequeued = 0
        self.started = False

    # ---- checkpoint ------------------------------------------------------------------------------

    def load(self) -> None:
        low = enqueue = read = 0
        if self.path is not None:
            try:
                tree = json.loads(self.path.read_bytes())
                low = int(tree.get("lowWaterOffset", 0))
                enqueue = int(tree.get("enqueueOffset", low))
                read = int(tree.get("readTimeMs", 0))
            except FileNotFoundError:
                pass
            except (OSError, ValueError, TypeError, AttributeError) as e:
                self.log.warn("timer checkpoint {p} unusable ({why}): re-reading the timer queue from its start",
                              p=str(self.path), why=str(e))
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        min_offset = cq.min_offset_in_queue if cq is not None else 0
        self.enqueue_offset = max(low, min_offset)
        self._skip_until = max(enqueue, self.enqueue_offset)
        self._skip_before_ms = read
        self.read_time_ms = read

    def checkpoint(self) -> dict[str, int]:
        """What the checkpoint file holds now (see the module doc)."""
        low = min((e[1] for e in self._heap), default=self.enqueue_offset)
        read = min([self.read_time_ms] + [e[0] for e in self._heap])
        if self.enqueue_offset < self._skip_until:
            # Still re-reading what the last run had read: keep its promise for that range.
            read = min(read, self._skip_before_ms)
        return {"enqueueOffset": self.enqueue_offset, "lowWaterOffset": low, "readTimeMs": read}

    def _write(self, tree: dict[str, int]) -> None:
        if self.path is not None:
            atomic_write(self.path, json.dumps(tree, sort_keys=True).encode())

    def _flush_in_background(self) -> None:
        if self.path is None or self._writing is not None:
            return
        tree = self.checkpoint()
        if tree == self._written:
            return  # an idle timer does not rewrite its file every second
        self._written = tree
        d = self._run_blocking(lambda: self._write(tree))
        self._writing = d
        d.addErrback(lambda f: self.log.failure("writing the timer checkpoint failed", f))

        def done(_: Any) -> None:
            self._writing = None
        d.addBoth(done)

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        loop = LoopingCall(self.tick)
        loop.clock = self.reactor
        loop.start(TICK, now=False).addErrback(lambda f: self.log.failure("timer stopped", f))
        self._loop = loop

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        try:
            self._write(self.checkpoint())
        except OSError:
            self.log.failure("writing the timer checkpoint failed")

    def tick(self) -> None:
        try:
            self.enqueue()
            self.dequeue()
        except Exception:
            self.log.failure("timer pass failed")
        now = self.clock()
        if now - self._last_flush >= self.flush_interval_ms:
            self._last_flush = now
            self._flush_in_background()

    # ---- enqueue: timer queue -> heap ------------------------------------------------------------

    def enqueue(self) -> int:
        """Read up to BATCH new entries of the timer queue into the heap; returns how many."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        if cq is None:
            return 0
        if self.enqueue_offset < cq.min_offset_in_queue:
            self.log.warn("timer offset {o} below the queue's min {m}", o=self.enqueue_offset,
                          m=cq.min_offset_in_queue)
            self.enqueue_offset = cq.min_offset_in_queue
        n = 0
        precision = max(1, self.precision_ms())
        enqueue_time = self.clock() // precision * precision
        while n < BATCH:
            units = cq.iterate_from(self.enqueue_offset)
            if units is None:
                break
            start = self.enqueue_offset
            for unit in units:
                n += 1
                self.enqueue_offset = unit.queue_offset + 1
                msg = self.store.look_message_by_offset(unit.pos)
                slot = _timer_out_ms(msg)
                if slot is None:
                    self.log.warn("timer queue entry {o} has no usable TIMER_OUT_MS: skipped", o=unit.queue_offset)
                elif unit.queue_offset < self._skip_until and slot < self._skip_before_ms:
                    pass  # delivered before the restart
                else:
                    heapq.heappush(self._heap, (slot, unit.queue_offset, unit.pos, enqueue_time))
                    self.enqueued += 1
                if n >= BATCH:
                    break
            if self.enqueue_offset == start:  # an unreadable file: try again next pass
                break
        return n

    # ---- dequeue: due slots -> real topics --------------------------------------------------------

    def dequeue(self) -> int:
        """Re-put every message whose slot has passed (up to BATCH); returns how many."""
        precision = max(1, self.precision_ms())
        now = self.clock()
        threshold = now // precision * precision  # a slot is delivered once the clock left it
        heap = self._heap
        n = 0
        while heap and heap[0][0] < threshold and n < BATCH:
            slot, queue_offset, pos, enqueue_time = heap[0]
            msg = self.store.look_message_by_offset(pos)
            if msg is None:
                heapq.heappop(heap)
                continue
            try:
                inner = self.convert(msg, enqueue_time, now)
            except ValueError:
                self.log.error("timer message at {pos} has no usable REAL_TOPIC/REAL_QID: dropped", pos=pos)
                heapq.heappop(heap)
                continue
            future = self.store.async_put_message(inner, hooks=False, wait_store=False)
            result = future.result() if future.done() else None
            status = result.status if result is not None else None
            if status is not PutMessageStatus.PUT_OK and status not in _NO_RETRY:
                self.log.warn("timer re-put failed ({s}); retried", s=status)
                return n
            if status is PutMessageStatus.PUT_OK and self.on_put is not None and result.append_result is not None:
                self.on_put(inner.topic, result.append_result.msg_num, result.append_result.wrote_bytes)
            heapq.heappop(heap)
            n += 1
            self.dequeued += 1
        if not heap or heap[0][0] >= threshold:
            self.read_time_ms = max(self.read_time_ms, threshold)
        return n

    @staticmethod
    def convert(stored: MessageExt, enqueue_time: int, now: int) -> MessageExt:
        """Java ``convert`` + ``convertMessage``: the record's properties plus TIMER_ENQUEUE_MS and
        TIMER_DEQUEUE_MS, on the real topic and queue."""
        props = dict(stored.properties)
        topic = props.get(PropertyKey.REAL_TOPIC)
        queue_id = int(props.get(PropertyKey.REAL_QUEUE_ID, ""))
        if not topic:
            raise ValueError("no REAL_TOPIC")
        props[PropertyKey.TIMER_ENQUEUE_MS] = str(enqueue_time)
        props[PropertyKey.TIMER_DEQUEUE_MS] = str(now)
        return MessageExt(
            topic=topic, body=stored.body, flag=stored.flag, properties=hashmap_ordered(props),
            queue_id=queue_id, sys_flag=stored.sys_flag, born_timestamp=stored.born_timestamp,
            born_host=stored.born_host, store_host=stored.store_host, reconsume_times=stored.reconsume_times)

    # ---- views -----------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._heap)

    def read_behind(self) -> int:
        """Java ``getDequeueBehind``: whole seconds from the first slot not yet delivered to now
        (0 while the passes keep up; it grows when re-puts fall behind or the reactor lags)."""
        if not self.read_time_ms:
            return 0
        return max(0, self.clock() - self.read_time_ms) // 1000

    def offset_behind(self) -> int:
        return max(0, self.store.get_max_offset_in_queue(TIMER_TOPIC, 0) - self.enqueue_offset)


#: Java's doPut: these results are not retried (the message is skipped).
_NO_RETRY = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                       PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL})


def _timer_out_ms(msg: MessageExt | None) -> int | None:
    if msg is None:
        return None
    try:
        return int(msg.properties.get(PropertyKey.TIMER_OUT_MS, ""))
    except ValueError:
        return None
