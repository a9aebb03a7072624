"""Executor side: read one queue range ``[start, until)`` straight from its broker.

Each Python worker process keeps one ``QueuePuller`` per connection (Spark reuses its Python
workers, so the client, its connections and its route cache outlive a task). A range is read as
windows of ``pullBatchSize`` offsets, ``PREFETCH_WINDOWS`` of them in flight at once in the
reactor thread, handed over in order to the task's thread, which turns them into Arrow record
batches while the next pulls travel.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import threading
from collections.abc import Iterator

import pyarrow as pa
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from rmqwire.client.blocking import ensure_reactor
from rmqwire.client.consumer.blocking import QueuePuller
from rmqwire.client.consumer.pull import Puller, PullStatus
from rmqwire.codec.message import MessageExt
from rmqwire.errors import RmqwireError
from rmqwire.model import MessageQueue
from rmqwire.spark.offsets import QueueRange
from rmqwire.spark.options import Connection
from rmqwire.spark.schema import record_batch

log = logging.getLogger(__name__)

#: Pulls of one range in flight at once (each at most ``pullBatchSize`` messages).
PREFETCH_WINDOWS = 16
#: Rows per Arrow record batch handed to Spark.
BATCH_ROWS = 4096
#: Attempts of one pull that timed out or failed on the transport before the task fails.
PULL_ATTEMPTS = 3
#: The consumer group named in PULL_MESSAGE (nothing is committed for it).
READER_GROUP = "rmqwire_spark_reader"


class DataLossError(RmqwireError):
    """Offsets a query needs are no longer (or not yet) on the broker (``failOnDataLoss``)."""


@dataclasses.dataclass(frozen=True)
class ReadSpec:
    """What every task of a query needs besides its range (picklable)."""

    connection: Connection
    sub_expression: str = "*"
    pull_batch_size: int = 32
    pull_timeout_ms: int = 10_000
    fail_on_data_loss: bool = True
    system_properties: bool = False


_lock = threading.Lock()
_pullers: dict[tuple[int, Connection], QueuePuller] = {}


def puller_for(conn: Connection) -> QueuePuller:
    """This process's client for ``conn`` (keyed by pid too: a forked worker builds its own).

    Each connection gets its own instance name: one client id is one client instance, whose
    broker-name → address table would otherwise mix two clusters' ``broker-a``."""
    key = (os.getpid(), conn)
    with _lock:
        p = _pullers.get(key)
        if p is None:
            p = QueuePuller(READER_GROUP, namesrv_addr=conn.namesrv_addr,
                            instance_name=f"rmqwire_spark_{os.getpid()}_{len(_pullers)}", **conn.client_options())
            p.start()
            _pullers[key] = p
        return p


def read_range(spec: ReadSpec, r: QueueRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``r`` (tag-filtered by ``spec.sub_expression``) as Arrow record batches."""
    puller = puller_for(spec.connection)
    reactor = ensure_reactor()
    step = spec.pull_batch_size
    windows = [(s, min(s + step, r.until)) for s in range(r.start, r.until, step)]
    futures: list[concurrent.futures.Future[list[MessageExt]]] = [
        concurrent.futures.Future() for _ in windows]

    def start(i: int) -> None:  # reactor thread
        if i < len(windows) and not futures[i].done():
            d = Deferred.fromCoroutine(_window(puller.puller, spec, r.mq, *windows[i]))
            d.addBoth(_settle, futures[i])

    for i in range(min(PREFETCH_WINDOWS, len(windows))):
        reactor.callFromThread(start, i)
    pending: list[MessageExt] = []
    wait = spec.pull_timeout_ms / 1000 * (PULL_ATTEMPTS + 1) + 30
    try:
        for i, fut in enumerate(futures):
            msgs = fut.result(timeout=wait)
            reactor.callFromThread(start, i + PREFETCH_WINDOWS)
            pending.extend(msgs)
            if len(pending) >= BATCH_ROWS:
                yield record_batch(pending, system_properties=spec.system_properties)
                pending = []
        if pending:
            yield record_batch(pending, system_properties=spec.system_properties)
    finally:
        for fut in futures:  # a failed or abandoned task starts no more pulls
            fut.cancel()


def _settle(result: object, fut: concurrent.futures.Future[list[MessageExt]]) -> None:
    if fut.set_running_or_notify_cancel():  # False: the task gave up on this window
        if isinstance(result, Failure):
            fut.set_exception(result.value)
        else:
            fut.set_result(result)  # type: ignore[arg-type]


async def _window(puller: Puller, spec: ReadSpec, mq: MessageQueue, start: int, until: int) -> list[MessageExt]:
    """Messages of ``[start, until)``: pull until the broker's next offset passes ``until``."""
    out: list[MessageExt] = []
    off = start
    attempts = 0
    while off < until:
        try:
            res = await puller.pull(mq, off, min(until - off, spec.pull_batch_size),
                                    expression=spec.sub_expression, timeout_millis=spec.pull_timeout_ms)
        except Exception as e:
            attempts += 1
            if attempts >= PULL_ATTEMPTS:
                raise
            log.warning("pull of %s at %d failed (%s); retrying", mq, off, e)
            continue
        if res.status is PullStatus.FOUND:
            out.extend(m for m in res.messages if m.queue_offset < until)
        nxt = res.next_begin_offset
        if res.status is not PullStatus.FOUND and off < res.min_offset:
            nxt = max(nxt, res.min_offset)
            _lost(spec, mq, off, min(nxt, until), f"below the queue's min offset {res.min_offset}")
        elif res.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL) and nxt <= off:
            # the range was planned from the max offset, so the broker lost what it had
            _lost(spec, mq, off, until, f"beyond the queue's max offset {res.max_offset}")
            nxt = until
        if nxt <= off:
            raise DataLossError(f"{mq}: the broker answered {res.status.value} at offset {off} "
                                f"without moving on (next {nxt})")
        off = nxt
    return out


def _lost(spec: ReadSpec, mq: MessageQueue, start: int, until: int, why: str) -> None:
    text = (f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: offsets [{start}, {until}) are gone ({why}); "
            "they were deleted or the queue was reset")
    if spec.fail_on_data_loss:
        raise DataLossError(text + ". Set failOnDataLoss=false to skip them with a warning.")
    log.warning("%s; skipped (failOnDataLoss=false)", text)


def close_all() -> None:
    """Shut this process's clients down (tests and benchmarks; Spark workers just exit)."""
    with _lock:
        pullers = list(_pullers.values())
        _pullers.clear()
    for p in pullers:
        p.shutdown()
