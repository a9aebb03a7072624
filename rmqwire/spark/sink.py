"""The ``rocketmq`` sink: each task sends its rows with one producer per worker process, waits
for every send and fails on the first error. At-least-once (a retried task sends its rows
again): give each row a unique ``keys`` value and de-duplicate by key downstream.

Columns: ``body`` (binary or string, required), ``topic`` (unless the ``topic`` option is
set, which wins), ``tags``, ``keys`` (string or array of strings), ``properties``
(map<string,string>); routing: ``brokerName`` + ``queueId`` (that queue), or ``shardingKey``
(queue chosen by the key's hash, Java's SelectMessageQueueByHash: ordered per key);
``deliveryTimestamp`` (timestamp or epoch ms, a 5.x timer message) or ``delayLevel`` (1..18).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from rmqwire.client.message import Message, SendResult
from rmqwire.client.producer.blocking import Producer
from rmqwire.codec.java import java_string_hash
from rmqwire.errors import RemotingTooManyRequestsError, SystemBusyError
from rmqwire.model import MessageQueue
from rmqwire.spark.options import WriteOptions

#: Producer group of the sink's producers when the ``producerGroup`` option is not given.
DEFAULT_PRODUCER_GROUP = "rmqwire_spark_writer"
#: Sends of one task in flight at once.
MAX_IN_FLIGHT = 256
#: Sends again of a message the broker refused for flow control, and the pause before them (s).
BUSY_RETRIES = 10
BUSY_PAUSE = 0.5

_COLUMNS = {"body", "topic", "tags", "keys", "properties", "brokerName", "queueId", "shardingKey",
            "deliveryTimestamp", "delayLevel"}


@dataclasses.dataclass
class SentCount(WriterCommitMessage):
    rows: int


def check_columns(names: Sequence[str], opts: WriteOptions) -> None:
    if "body" not in names:
        raise ValueError("the rocketmq sink needs a 'body' column (binary or string)")
    if opts.topic is None and "topic" not in names:
        raise ValueError("the rocketmq sink needs a 'topic' column or the 'topic' option")
    unknown = sorted(set(names) - _COLUMNS)
    if unknown:
        raise ValueError(f"unknown column(s) for the rocketmq sink: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(_COLUMNS))})")
    if ("brokerName" in names) != ("queueId" in names):
        raise ValueError("columns 'brokerName' and 'queueId' go together")


_lock = threading.Lock()
_producers: dict[tuple[int, WriteOptions], Producer] = {}


def producer_for(opts: WriteOptions) -> Producer:
    """This process's producer for these settings (the topic aside). Each has its own client
    instance: one instance refuses a second producer of the same group."""
    key = (os.getpid(), dataclasses.replace(opts, topic=None))
    with _lock:
        p = _producers.get(key)
        if p is None:
            c = opts.connection
            p = Producer(opts.producer_group or DEFAULT_PRODUCER_GROUP, namesrv_addr=c.namesrv_addr,
                         instance_name=f"rmqwire_spark_writer_{os.getpid()}_{len(_producers)}",
                         send_msg_timeout=opts.send_timeout_ms,
                         retry_times_when_send_failed=opts.retry_times,
                         retry_times_when_send_async_failed=opts.retry_times,
                         max_message_size=opts.max_message_size, **c.client_options())
            p.start()
            _producers[key] = p
        return p


def by_hash(mqs: Sequence[MessageQueue], msg: Any, key: str) -> MessageQueue:
    """Java ``SelectMessageQueueByHash``: the key's String.hashCode modulo the queue count."""
    return mqs[abs(java_string_hash(key) % len(mqs))]


def _millis(v: Any) -> int:
    # Spark hands timestamps as naive local datetimes, which .timestamp() reads as local time
    return int(v.timestamp() * 1000) if isinstance(v, datetime.datetime) else int(v)


def to_message(row: dict[str, Any], opts: WriteOptions) -> tuple[Message, dict[str, Any]]:
    """A row as a message and the send's routing arguments."""
    topic = opts.topic or row.get("topic")
    if not topic:
        raise ValueError(f"a row has no topic (and the 'topic' option is not set): {row!r}"[:300])
    body = row.get("body")
    if body is None:
        raise ValueError("a row has a null body")
    keys = row.get("keys")
    msg = Message(topic, body if isinstance(body, (bytes, str)) else bytes(body), tags=row.get("tags"),
                  keys=keys, properties=row.get("properties") or None,
                  delay_level=int(row.get("delayLevel") or 0))
    if row.get("deliveryTimestamp") is not None:
        msg.deliver_time_ms = _millis(row["deliveryTimestamp"])
    route: dict[str, Any] = {}
    if row.get("brokerName") is not None and row.get("queueId") is not None:
        route["queue"] = MessageQueue(topic, row["brokerName"], int(row["queueId"]))
    elif row.get("shardingKey") is not None:
        route["selector"], route["arg"] = by_hash, str(row["shardingKey"])
    return msg, route


class _TaskSender:
    """The sends of one task: at most MAX_IN_FLIGHT at once; a send the broker refused for
    flow control (SYSTEM_BUSY, e.g. "[TIMEOUT_CLEAN_QUEUE] broker busy") is sent again after a
    pause, up to BUSY_RETRIES times; any other failure is the task's error."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.idle = threading.Condition(self.lock)
        self.busy: list[tuple[Message, dict[str, Any], int]] = []
        self.errors: list[BaseException] = []
        self.sent = 0

    def send(self, msg: Message, route: dict[str, Any], attempt: int = 0) -> None:
        self.slots.acquire()
        with self.lock:
            self.in_flight += 1
        fut = self.producer.send_async(msg, **route)
        fut.add_done_callback(lambda f: self._done(f, msg, route, attempt))

    def _done(self, f: concurrent.futures.Future[SendResult], msg: Message, route: dict[str, Any],
              attempt: int) -> None:
        self.slots.release()
        e = f.exception()
        with self.lock:
            if e is None:
                self.sent += 1
            elif isinstance(e, (SystemBusyError, RemotingTooManyRequestsError)) and attempt < BUSY_RETRIES:
                self.busy.append((msg, route, attempt + 1))
            else:
                self.errors.append(e)
            self.in_flight -= 1
            self.idle.notify_all()

    def check(self) -> None:
        """Raise the first failure; send again what the broker refused as busy."""
        with self.lock:
            if self.errors:
                raise self.errors[0]
            again, self.busy = self.busy, []
        if again:
            time.sleep(BUSY_PAUSE)
            for msg, route, attempt in again:
                self.send(msg, route, attempt)

    def flush(self) -> None:
        while True:
            with self.lock:
                while self.in_flight and not self.errors:
                    self.idle.wait(1.0)
                if self.errors:
                    while self.in_flight:  # no send left running behind a failed task
                        self.idle.wait(1.0)
                    raise self.errors[0]
                if not self.busy:
                    return
            self.check()


def send_rows(rows: Iterator[Any], opts: WriteOptions) -> SentCount:
    """Send every row; return once all sends ended, raising the first failure."""
    sender = _TaskSender(producer_for(opts))
    for row in rows:
        sender.check()
        sender.send(*to_message(row.asDict() if hasattr(row, "asDict") else dict(row), opts))
    sender.flush()
    return SentCount(sender.sent)


class RocketMQBatchWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions, schema: Any) -> None:
        check_columns(schema.fieldNames(), opts)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return send_rows(iterator, self.opts)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # each task waited for its sends; RocketMQ has no atomic multi-message publish

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class RocketMQStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: WriteOptions, schema: Any) -> None:
        check_columns(schema.fieldNames(), opts)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return send_rows(iterator, self.opts)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
