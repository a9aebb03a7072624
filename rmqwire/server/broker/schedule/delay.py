"""Delay levels (Java ``ScheduleMessageService``): one timer per level re-puts the due messages of
``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` to their real topic and queue.

Runs on the reactor: each level is a chain of ``callLater`` calls (the first 1 s after start, then
every 100 ms while the queue's head is not due, as Java's timer tasks), and a pass re-puts at most
``BATCH`` messages before yielding. Re-puts never wait for a disk flush (WAIT is false, as Java
sets it), so nothing here blocks on the disk but the progress file, which is written in a thread.

Progress (the next consume-queue offset of each level) is kept in ``config/delayOffset.json`` in
Java's format (``offsetTable`` {level: offset} with unquoted integer keys, ``dataVersion``), saved
every ``flushDelayOffsetInterval`` ms and at stop, and corrected into the queue's bounds at load.

Delivered records keep DELAY, REAL_TOPIC and REAL_QID: Java fixes the record's properties before
it clears them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from rmqwire.codec.commands.topic import DataVersion
from rmqwire.codec.java import now_ms
from rmqwire.codec.message import MessageExt, PropertyKey
from rmqwire.errors import CodecError
from rmqwire.server.broker.config_file import ConfigFile
from rmqwire.server.broker.schedule.hook import delay_level_to_queue_id
from rmqwire.server.broker.topic_config import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rmqwire.server.store import DefaultMessageStore, PutMessageStatus

__all__ = ["ScheduleMessageService"]

#: Java's FIRST_DELAY_TIME, DELAY_FOR_A_WHILE and DELAY_FOR_A_PERIOD, in seconds.
FIRST_DELAY = 1.0
DELAY_FOR_A_WHILE = 0.1
DELAY_FOR_A_PERIOD = 10.0
#: Messages re-put in one reactor turn before the level yields.
BATCH = 256
#: BrokerConfig.delayOffsetUpdateVersionStep
VERSION_STEP = 200


def _in_thread(reactor: Any) -> Callable[[Callable[[], None]], Deferred[None]]:
    def run(fn: Callable[[], None]) -> Deferred[None]:
        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn)
    return run


class ScheduleMessageService:
    log = Logger()

    def __init__(self, reactor: Any, store: DefaultMessageStore, path: str | Path | None, *,
                 persist_interval_ms: Callable[[], int] = lambda: 10_000,
                 clock: Callable[[], int] = now_ms,
                 run_blocking: Callable[[Callable[[], None]], Deferred[None]] | None = None,
                 on_put: Callable[[str, int, int], None] | None = None) -> None:
        self.reactor = reactor
        self.store = store
        self.file = ConfigFile(path) if path is not None else None
        self.clock = clock
        self.persist_interval_ms = persist_interval_ms
        self._run_blocking = run_blocking if run_blocking is not None else _in_thread(reactor)
        #: Told of every re-put (topic, messages, bytes), as Java counts them in the topic's puts.
        self.on_put = on_put
        self.delay_level_table: dict[int, int] = dict(store.delay_levels)
        self.offset_table: dict[int, int] = {}
        self.data_version = DataVersion(timestamp=clock())
        self._changes = 0
        self._calls: dict[int, Any] = {}
        self._persist_loop: LoopingCall | None = None
        self._writing: Deferred[None] | None = None
        self._write_again = False
        self._written: dict[str, Any] | None = None
        self.started = False

    @property
    def max_delay_level(self) -> int:
        return max(self.delay_level_table, default=0)

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        return store_timestamp + self.delay_level_table.get(level, 1000)

    # ---- persistence -----------------------------------------------------------------------------

    def load(self) -> None:
        """Read delayOffset.json (or its .bak), then pull each offset into its queue's bounds."""
        tree = self.file.load() if self.file is not None else None
        if isinstance(tree, dict):
            table = tree.get("offsetTable")
            if isinstance(table, dict):
                for level, offset in table.items():
                    if isinstance(level, int) and isinstance(offset, int) and not isinstance(offset, bool):
                        self.offset_table[level] = offset
            dv = tree.get("dataVersion")
            if isinstance(dv, dict):
                try:
                    self.data_version = DataVersion.from_fastjson(dv)
                except (CodecError, TypeError, ValueError):
                    pass
        self._correct_offsets()

    def _correct_offsets(self) -> None:
        for level in self.delay_level_table:
            offset = self.offset_table.get(level)
            if offset is None:
                continue
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            if cq is None:
                continue
            fixed = min(max(offset, cq.min_offset_in_queue), cq.max_offset_in_queue)
            if fixed != offset:
                self.log.error("correct delay offset [delayLevel {lvl}] from {old} to {new}",
                               lvl=level, old=offset, new=fixed)
                self.offset_table[level] = fixed

    def to_tree(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_fastjson(),
                "offsetTable": dict(sorted(self.offset_table.items()))}

    def persist(self) -> None:
        """Write the file now, in the calling thread (at stop)."""
        if self.file is not None:
            self.file.save(self.to_tree())

    def _persist_in_background(self) -> None:
        if self.file is None:
            return
        if self._writing is not None:
            self._write_again = True
            return
        tree = self.to_tree()
        if tree == self._written:
            return
        self._written = tree
        file = self.file
        d = self._run_blocking(lambda: file.save(tree))
        self._writing = d

        def done(result: Any) -> None:
            self._writing = None
            if self._write_again and self.started:
                self._write_again = False
                self._persist_in_background()

        d.addErrback(lambda f: self.log.failure("persisting delayOffset.json failed", f))
        d.addBoth(done)

    def _update_offset(self, level: int, offset: int) -> None:
        self.offset_table[level] = offset
        self._changes += 1
        if self._changes % VERSION_STEP == 0:
            dv = self.data_version
            self.data_version = DataVersion(state_version=dv.state_version, timestamp=self.clock(),
                                            counter=dv.counter + 1)

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        for level in self.delay_level_table:
            self._schedule(level, self.offset_table.get(level, 0), FIRST_DELAY)
        loop = LoopingCall(self._persist_in_background)
        loop.clock = self.reactor
        interval = max(self.persist_interval_ms(), 10) / 1000.0
        loop.start(interval, now=False).addErrback(
            lambda f: self.log.failure("delay offset persistence stopped", f))
        self._persist_loop = loop

    def stop(self) -> None:
        """Cancel the timers and write the progress (synchronously: the broker is stopping)."""
        if not self.started:
            return
        self.started = False
        for call in self._calls.values():
            if call.active():
                call.cancel()
        self._calls.clear()
        if self._persist_loop is not None and self._persist_loop.running:
            self._persist_loop.stop()
        self._persist_loop = None
        try:
            self.persist()
        except OSError:
            self.log.failure("persisting delayOffset.json failed")

    def _schedule(self, level: int, offset: int, delay: float) -> None:
        if self.started:
            self._calls[level] = self.reactor.callLater(delay, self._run, level, offset)

    # ---- delivery --------------------------------------------------------------------------------

    def _run(self, level: int, offset: int) -> None:
        self._calls.pop(level, None)
        if not self.started:
            return
        try:
            next_offset, delay = self.deliver_due(level, offset)
        except Exception:
            self.log.failure("ScheduleMessageService, executeOnTimeUp exception")
            next_offset, delay = offset, DELAY_FOR_A_PERIOD
        self._schedule(level, next_offset, delay)

    def deliver_due(self, level: int, offset: int) -> tuple[int, float]:
        """One pass of a level's timer from ``offset``: re-put what is due; returns where the next
        pass starts and after how many seconds."""
        cq = self.store.find_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level), create=False)
        if cq is None:
            return offset, DELAY_FOR_A_WHILE
        units = cq.iterate_from(offset)
        if units is None:
            reset = offset
            if cq.min_offset_in_queue > offset:
                reset = cq.min_offset_in_queue
                self.log.error("schedule CQ offset invalid. offset={o}, cqMinOffset={m}", o=offset, m=reset)
            elif cq.max_offset_in_queue < offset:
                reset = cq.max_offset_in_queue
                self.log.error("schedule CQ offset invalid. offset={o}, cqMaxOffset={m}", o=offset, m=reset)
            return reset, DELAY_FOR_A_WHILE
        next_offset = offset
        done = 0
        for unit in units:
            now = self.clock()
            deliver_at = unit.tags_code
            if deliver_at > now + self.delay_level_table.get(level, 0):
                deliver_at = now  # a due time beyond the level's delay: the clock went back
            current = unit.queue_offset
            next_offset = current + 1
            if deliver_at > now:
                self._update_offset(level, current)
                return current, DELAY_FOR_A_WHILE
            if done >= BATCH:
                return current, 0.0
            done += 1
            stored = self.store.look_message_by_offset(unit.pos)
            if stored is None:
                continue
            try:
                inner = self.message_time_up(stored)
            except ValueError:
                self.log.error("schedule message at {pos} has no usable REAL_TOPIC/REAL_QID: dropped",
                               pos=unit.pos)
                continue
            if inner.topic == TRANS_HALF_TOPIC:
                self.log.error("[BUG] the real topic of schedule msg is {t}, discard the msg", t=inner.topic)
                continue
            future = self.store.async_put_message(inner, hooks=False, wait_store=False)
            result = future.result() if future.done() else None
            if result is None or result.status is not PutMessageStatus.PUT_OK:
                self.log.warn("ScheduleMessageService put message failed: {r}", r=result)
                return current, DELAY_FOR_A_WHILE
            self._counted(inner.topic, result)
            self._update_offset(level, next_offset)
        return next_offset, DELAY_FOR_A_WHILE

    def _counted(self, topic: str, result: Any) -> None:
        append = result.append_result
        if self.on_put is not None and append is not None:
            self.on_put(topic, append.msg_num, append.wrote_bytes)

    @staticmethod
    def message_time_up(stored: MessageExt) -> MessageExt:
        """The message to re-put (Java ``messageTimeUp``): the stored record's properties as they
        are (DELAY, REAL_TOPIC and REAL_QID included), on the real topic and queue."""
        props = stored.properties
        topic = props.get(PropertyKey.REAL_TOPIC)
        queue_id = int(props.get(PropertyKey.REAL_QUEUE_ID, ""))
        if not topic:
            raise ValueError("no REAL_TOPIC")
        return MessageExt(
            topic=topic, body=stored.body, flag=stored.flag, properties=dict(props), queue_id=queue_id,
            sys_flag=stored.sys_flag, born_timestamp=stored.born_timestamp, born_host=stored.born_host,
            store_host=stored.store_host, reconsume_times=stored.reconsume_times)

    # ---- views -----------------------------------------------------------------------------------

    def running_stats(self) -> dict[str, str]:
        """Java ``buildRunningStats``: ``scheduleMessageOffset_<level>`` = "offset,maxOffset"."""
        stats = {}
        for level, offset in self.offset_table.items():
            max_offset = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            stats[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
        return stats
