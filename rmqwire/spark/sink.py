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
from rmqwire.model import MessageQueue
from rmqwire.spark.options import WriteOptions

#: Producer group of the sink's producers when the ``producerGroup`` option is not given.
DEFAULT_PRODUCER_GROUP = "rmqwire_spark_writer"
#: Sends of one task in flight at once.
MAX_IN_FLIGHT = 256

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
    key = (os.getpid(), opts)
    with _lock:
        p = _producers.get(key)
        if p is None:
            c = opts.connection
            p = Producer(opts.producer_group or DEFAULT_PRODUCER_GROUP, namesrv_addr=c.namesrv_addr,
                         instance_name=f"rmqwire_spark_{os.getpid()}", send_msg_timeout=opts.send_timeout_ms,
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


def send_rows(rows: Iterator[Any], opts: WriteOptions) -> SentCount:
    """Send every row, at most MAX_IN_FLIGHT at once; raise the first failure once all sends
    ended (so no send is left running behind a failed task)."""
    producer = producer_for(opts)
    slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
    futures: list[concurrent.futures.Future[SendResult]] = []
    first_error: list[BaseException] = []
    count = 0

    def done(f: concurrent.futures.Future[SendResult]) -> None:
        slots.release()
        if f.exception() is not None:
            first_error.append(f.exception())  # type: ignore[arg-type]

    for row in rows:
        if first_error:
            break
        msg, route = to_message(row.asDict() if hasattr(row, "asDict") else dict(row), opts)
        slots.acquire()
        fut = producer.send_async(msg, **route)
        fut.add_done_callback(done)
        futures.append(fut)
        count += 1
        if len(futures) >= 8 * MAX_IN_FLIGHT:  # keep the list short on long tasks
            futures = [f for f in futures if not f.done()]
    concurrent.futures.wait(futures)
    for f in futures:
        if f.exception() is not None:
            raise f.exception()  # type: ignore[misc]
    if first_error:
        raise first_error[0]
    return SentCount(count)


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
