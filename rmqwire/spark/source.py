"""``RocketMQDataSource``: Spark reads and writes RocketMQ through rmqwire (PySpark >= 4.0)::

    from rmqwire.spark import RocketMQDataSource
    spark.dataSource.register(RocketMQDataSource)
    df = spark.read.format("rocketmq").option("nameServer", "127.0.0.1:9876").option("topic", "T").load()

The driver plans from offsets only (routes, min/max offsets, timestamp searches: ``metadata``);
each task pulls one queue range straight from its broker (``fetch``). A streaming query's
offsets live in Spark's checkpoint; ``commitOffsetsToGroup`` publishes them to a consumer group
for monitoring, never to resume from.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from rmqwire.model import MessageQueue
from rmqwire.spark import offsets as off
from rmqwire.spark.fetch import DataLossError, ReadSpec, read_range
from rmqwire.spark.metadata import Metadata
from rmqwire.spark.options import Connection, Position, ReadOptions, WriteOptions
from rmqwire.spark.schema import SCHEMA_DDL

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # PySpark 4.0 / 4.1
    ReadLimit = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment,misc]

    class ReadAllAvailable:  # type: ignore[no-redef]
        pass

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

log = logging.getLogger(__name__)


class RocketMQDataSource(DataSource):
    """Short name ``rocketmq``: batch and streaming reads, batch (``mode("append")``) and
    streaming writes. Options: see the README's Spark section and ``rmqwire.spark.options``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return RocketMQBatchReader(ReadOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return RocketMQStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from rmqwire.spark.sink import RocketMQBatchWriter

        if overwrite:
            raise ValueError("the rocketmq sink only appends: use mode('append')")
        return RocketMQBatchWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from rmqwire.spark.sink import RocketMQStreamWriter

        return RocketMQStreamWriter(WriteOptions.parse(self.options), schema)


@dataclasses.dataclass(frozen=True)
class RangePartition(InputPartition):
    """One Spark task: a queue range, or nothing (Spark wants at least one partition)."""

    range: off.QueueRange | None

    def __init__(self, range: off.QueueRange | None) -> None:  # InputPartition's own __init__ takes a value
        object.__setattr__(self, "range", range)
        object.__setattr__(self, "value", range)


def _spec(o: ReadOptions) -> ReadSpec:
    return ReadSpec(o.connection, o.sub_expression, o.pull_batch_size, o.pull_timeout_ms,
                    o.fail_on_data_loss, o.system_properties)


def resolve(md: Metadata, mqs: Sequence[MessageQueue], pos: Position, *, default: str) -> off.Offsets:
    """Offsets of ``mqs`` for a position; queues the position does not name take ``default``
    (``earliest`` or ``latest``)."""
    if pos.kind in ("earliest", "latest"):
        return (md.min_offsets if pos.kind == "earliest" else md.max_offsets)(mqs)
    if pos.kind == "timestamp":
        assert pos.timestamp is not None
        return md.offsets_for_times({mq: pos.timestamp for mq in mqs})
    given = pos.offset_map
    unknown = sorted(set(given) - set(mqs))
    if unknown:
        raise ValueError(f"offsets name queues the subscription does not have: {unknown}")
    mins, maxs = md.min_offsets(mqs), md.max_offsets(mqs)
    fallback = mins if default == "earliest" else maxs
    if pos.kind == "timestamps":
        found = md.offsets_for_times(given)
        return {mq: found.get(mq, fallback[mq]) for mq in mqs}
    out = {}
    for mq in mqs:
        v = given.get(mq)
        out[mq] = fallback[mq] if v is None else mins[mq] if v == off.EARLIEST else maxs[mq] if v == off.LATEST else v
    return out


def check_loss(md: Metadata, start: off.Offsets, fail: bool) -> off.Offsets:
    """``start`` with offsets below their queue's min offset (deleted data) reported per
    ``failOnDataLoss`` and moved up to it."""
    mins = md.min_offsets(start) if start else {}
    out = dict(start)
    for mq, s in start.items():
        if s < mins[mq]:
            text = (f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: offsets [{s}, {mins[mq]}) are gone "
                    "(below the queue's min offset)")
            if fail:
                raise DataLossError(text + ". Set failOnDataLoss=false to skip them with a warning.")
            log.warning("%s; skipped (failOnDataLoss=false)", text)
            out[mq] = mins[mq]
    return out


def plan(start: off.Offsets, end: off.Offsets, min_partitions: int | None) -> list[RangePartition]:
    return [RangePartition(r) for r in off.split_ranges(off.ranges(start, end), min_partitions)]


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.spec = _spec(opts)

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        md = Metadata(o.connection)
        try:
            mqs = md.queues(o.subscription)
            start = check_loss(md, resolve(md, mqs, o.starting, default="earliest"), o.fail_on_data_loss)
            end = resolve(md, mqs, o.ending, default="latest")
        finally:
            md.close()
        return plan(start, end, o.min_partitions) or [RangePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r = getattr(partition, "range", None)
        if r is not None:
            yield from read_range(self.spec, r)


# ---- streaming -------------------------------------------------------------------------------------

_md_lock = threading.Lock()
_metadata: dict[tuple[int, Connection], Metadata] = {}


def _shared_metadata(conn: Connection) -> Metadata:
    """One admin client per process and connection for the long-lived driver-side runner (the
    reader object itself is pickled to executors, so it holds no client)."""
    key = (os.getpid(), conn)
    with _md_lock:
        md = _metadata.get(key)
        if md is None:
            md = _metadata[key] = Metadata(conn)
        return md


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over queue offsets. Every ``latestOffset`` re-reads the routes, so queues
    and brokers added while the query runs are read from their beginning."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.spec = _spec(opts)
        self._target: off.Offsets | None = None  # Trigger.AvailableNow's snapshot
        self._latest: off.Offsets = {}
        self._waiting_since: float | None = None  # minOffsetsPerTrigger: first short trigger
        self._published: dict[str, Any] | None = None  # last offsets written to the group
        self._last_end: dict[str, Any] | None = None

    def _md(self) -> Metadata:
        return _shared_metadata(self.opts.connection)

    def initialOffset(self) -> dict:
        md = self._md()
        mqs = md.queues(self.opts.subscription)
        return off.to_json_dict(resolve(md, mqs, self.opts.starting, default="latest"))

    def _with_new_queues(self, start: off.Offsets) -> tuple[off.Offsets, off.Offsets]:
        """(start including queues that appeared since, at their min offset; their max offsets)."""
        md = self._md()
        mqs = md.queues(self.opts.subscription)
        new = [mq for mq in mqs if mq not in start]
        full = dict(start)
        if new:
            full.update(md.min_offsets(new))
        return full, md.max_offsets(mqs)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is None:  # PySpark 4.0/4.1 call latestOffset(): go on from the last end returned
            start = self._last_end if self._last_end is not None else self.initialOffset()
        self._publish(start)  # the end of the last completed batch: see _publish
        begin = off.from_json_dict(start)
        full, latest = self._with_new_queues(begin)
        self._latest = latest
        if self._target is not None:
            latest = {mq: min(v, self._target[mq]) for mq, v in latest.items() if mq in self._target}
        end = dict(begin)
        for mq, v in latest.items():
            s = full[mq]
            if v < s:
                text = (f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: max offset {v} is below the "
                        f"query's offset {s} (the queue was reset or recreated)")
                if self.opts.fail_on_data_loss:
                    raise DataLossError(text + ". Set failOnDataLoss=false to go on from its max offset.")
                log.warning("%s; going on from %d", text, v)
            end[mq] = v
        if limit is None:  # PySpark 4.0/4.1: no admission control from the engine, use the options
            max_rows = self.opts.max_offsets_per_trigger
        else:
            max_rows = limit.max_rows if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) else None
        if max_rows:
            end = off.rate_limit(full, end, max_rows)
        if not isinstance(limit, ReadAllAvailable) and self.opts.min_offsets_per_trigger:
            if not self._enough(off.available(full, end)):
                return start
        self._last_end = off.to_json_dict(end)
        return self._last_end

    def _enough(self, available: int) -> bool:
        """minOffsetsPerTrigger with maxTriggerDelay (Kafka's rule)."""
        if available >= (self.opts.min_offsets_per_trigger or 0):
            self._waiting_since = None
            return True
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        if available > 0 and (now - self._waiting_since) * 1000 >= self.opts.max_trigger_delay_ms:
            self._waiting_since = None
            return True
        return False

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None and self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if ReadMinRows is not None and self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        return off.to_json_dict(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        md = self._md()
        self._target = md.max_offsets(md.queues(self.opts.subscription))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = off.from_json_dict(start), off.from_json_dict(end)
        md = self._md()
        new = [mq for mq in stop if mq not in begin]
        if new:  # queues that appeared during the batch's planning start at their beginning
            begin.update(md.min_offsets(new))
        begin.update(check_loss(md, {mq: s for mq, s in begin.items() if stop.get(mq, s) > s},
                                self.opts.fail_on_data_loss))
        return plan(begin, stop, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r = getattr(partition, "range", None)
        if r is not None:
            yield from read_range(self.spec, r)

    def commit(self, end: dict) -> None:
        self._publish(end)

    def _publish(self, offsets: Mapping[str, Any]) -> None:
        """``commitOffsetsToGroup``: write the end of the last completed batch to the group.

        Spark calls ``commit(end)`` of batch N only when it plans batch N+1, and never for the
        last batch of a Trigger.AvailableNow run; but it always asks ``latestOffset(start)``
        with ``start`` = the end of the batch that just completed (also when the run ends and
        after a restart has re-run an unfinished batch), so both calls publish.
        """
        group = self.opts.commit_offsets_to_group
        if not group or not offsets or offsets == self._published:
            return
        self._md().commit_to_group(group, off.from_json_dict(offsets))
        self._published = dict(offsets)

    def stop(self) -> None:
        with _md_lock:
            md = _metadata.pop((os.getpid(), self.opts.connection), None)
        if md is not None:
            md.close()
