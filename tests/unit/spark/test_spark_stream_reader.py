"""The micro-batch planning of RocketMQStreamReader against a fake cluster view (no broker)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from rmqwire.model import MessageQueue
from rmqwire.spark import offsets as off
from rmqwire.spark import source
from rmqwire.spark.fetch import DataLossError
from rmqwire.spark.options import ReadOptions

Q = [MessageQueue("T", "b", i) for i in range(3)]


class FakeMetadata:
    def __init__(self) -> None:
        self.mins = {Q[0]: 0, Q[1]: 0}
        self.maxs = {Q[0]: 100, Q[1]: 10}
        self.commits: list[tuple[str, dict[MessageQueue, int]]] = []

    def queues(self, sub: Any) -> list[MessageQueue]:
        return sorted(self.maxs)

    def min_offsets(self, mqs: Any) -> dict[MessageQueue, int]:
        return {mq: self.mins[mq] for mq in mqs}

    def max_offsets(self, mqs: Any) -> dict[MessageQueue, int]:
        return {mq: self.maxs[mq] for mq in mqs}

    def commit_to_group(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        self.commits.append((group, dict(offsets)))


@pytest.fixture
def md(monkeypatch: pytest.MonkeyPatch) -> FakeMetadata:
    fake = FakeMetadata()
    monkeypatch.setattr(source, "_shared_metadata", lambda conn: fake)
    return fake


def reader(**opts: str) -> source.RocketMQStreamReader:
    return source.RocketMQStreamReader(ReadOptions.parse(
        {"nameServer": "h", "topic": "T", "startingOffsets": "earliest", **opts}, streaming=True))


def test_rate_limit_only_when_the_engine_asks_for_it(md: FakeMetadata) -> None:
    r = reader(maxOffsetsPerTrigger="22")
    assert r.getDefaultReadLimit() == ReadMaxRows(22)
    start = r.initialOffset()
    assert off.from_json_dict(r.latestOffset(start, ReadMaxRows(22))) == {Q[0]: 20, Q[1]: 2}
    assert off.from_json_dict(r.latestOffset(start, ReadAllAvailable())) == {Q[0]: 100, Q[1]: 10}
    assert off.from_json_dict(r.latestOffset(start)) == {Q[0]: 20, Q[1]: 2}  # PySpark 4.0/4.1 form
    assert off.from_json_dict(r.reportLatestOffset()) == {Q[0]: 100, Q[1]: 10}


def test_available_now_stops_at_the_snapshot_and_new_queues_start_at_their_min(md: FakeMetadata) -> None:
    r = reader()
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    md.maxs[Q[0]] = 150  # arrives after the snapshot
    end = r.latestOffset(start, ReadAllAvailable())
    assert off.from_json_dict(end) == {Q[0]: 100, Q[1]: 10}
    assert r.latestOffset(end, ReadAllAvailable()) == end  # nothing more: the run ends

    r2 = reader()
    s2 = r2.initialOffset()
    md.maxs[Q[2]], md.mins[Q[2]] = 7, 2
    e2 = off.from_json_dict(r2.latestOffset(s2, ReadAllAvailable()))
    assert e2[Q[2]] == 7
    parts = r2.partitions(s2, off.to_json_dict(e2))
    assert [(p.range.mq, p.range.start, p.range.until) for p in parts if p.range.mq == Q[2]] == [(Q[2], 2, 7)]


def test_min_offsets_per_trigger_waits(md: FakeMetadata) -> None:
    r = reader(minOffsetsPerTrigger="500", maxTriggerDelay="1h")
    assert r.getDefaultReadLimit() == ReadMinRows(500)
    start = r.initialOffset()
    assert r.latestOffset(start, ReadMinRows(500)) == start
    assert off.from_json_dict(r.latestOffset(start, ReadAllAvailable())) == {Q[0]: 100, Q[1]: 10}


def test_progress_reaches_the_group_from_latest_offset_and_commit(md: FakeMetadata) -> None:
    r = reader(commitOffsetsToGroup="G")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    md.commits.clear()
    r.latestOffset(end, ReadAllAvailable())  # planning the next batch: the last one completed
    r.commit(end)  # the same offsets again: not written twice
    assert md.commits == [("G", {Q[0]: 100, Q[1]: 10})]


def test_reset_queue_is_data_loss(md: FakeMetadata) -> None:
    r = reader()
    start = off.to_json_dict({Q[0]: 500, Q[1]: 0})
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        r.latestOffset(start, ReadAllAvailable())
    md.mins[Q[1]] = 5
    with pytest.raises(DataLossError, match=r"\[0, 5\)"):
        r.partitions(off.to_json_dict({Q[0]: 0, Q[1]: 0}), off.to_json_dict({Q[0]: 100, Q[1]: 10}))
    lenient = reader(failOnDataLoss="false")
    parts = lenient.partitions(off.to_json_dict({Q[0]: 0, Q[1]: 0}), off.to_json_dict({Q[0]: 100, Q[1]: 10}))
    assert sorted((p.range.mq.queue_id, p.range.start) for p in parts) == [(0, 0), (1, 5)]
