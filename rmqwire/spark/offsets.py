"""Queue offsets as Spark sees them, and the arithmetic on them (pure: no network, no Spark).

A source offset is ``{"topic": {"brokerName": {"queueId": nextOffset}}}`` — rocketmq-spark's
shape, Kafka's ``{"topic": {"partition": offset}}`` with a broker level. Keys are strings because
Spark hands offsets between the JVM and Python as JSON. Ranges are ``[from, until)``: RocketMQ's
max offset is the next offset to be written.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from rmqwire.model import MessageQueue

#: Sentinels of ``startingOffsets`` / ``endingOffsets`` JSON (Kafka's and rocketmq-spark's).
EARLIEST = -2
LATEST = -1

Offsets = dict[MessageQueue, int]


def to_json_dict(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for mq in sorted(offsets):
        out.setdefault(mq.topic, {}).setdefault(mq.broker_name, {})[str(mq.queue_id)] = int(offsets[mq])
    return out


def from_json_dict(d: Mapping[str, object]) -> Offsets:
    """The inverse of ``to_json_dict``; a ValueError names what is malformed."""
    out: Offsets = {}
    if not isinstance(d, Mapping):
        raise ValueError(f"offsets must be a JSON object of topics, not {d!r}")
    for topic, brokers in d.items():
        if not isinstance(brokers, Mapping):
            raise ValueError(f'offsets of topic {topic!r} must be {{"brokerName": {{"queueId": offset}}}}')
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                raise ValueError(f"offsets of {topic}/{broker} must be {{\"queueId\": offset}}")
            for qid, off in queues.items():
                try:
                    mq = MessageQueue(str(topic), str(broker), int(qid))
                except ValueError:
                    raise ValueError(f"queue id {qid!r} of {topic}/{broker} is not an integer") from None
                if isinstance(off, bool) or not isinstance(off, int):
                    raise ValueError(f"offset of {topic}/{broker}/{qid} must be an integer, not {off!r}")
                out[mq] = off
    return out


def parse_json_offsets(text: str, option: str) -> Offsets:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"option {option!r} is neither 'earliest'/'latest' nor JSON: {e}") from None
    try:
        return from_json_dict(d)
    except ValueError as e:
        raise ValueError(f"option {option!r}: {e}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``[start, until)`` of one queue: one Spark task, or part of one."""

    mq: MessageQueue
    start: int
    until: int

    @property
    def size(self) -> int:
        return max(0, self.until - self.start)


def ranges(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> list[QueueRange]:
    """One range per queue that has data between ``start`` and ``end`` (empty queues are left
    out: rocketmq-spark issue #148). A queue missing from ``start`` starts at its end offset's
    start, which the caller resolved (new queues are read from their beginning)."""
    out = []
    for mq in sorted(end):
        s = start.get(mq)
        if s is None:
            continue
        if end[mq] > s:
            out.append(QueueRange(mq, s, end[mq]))
    return out


def split_ranges(rs: list[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """Kafka's ``minPartitions``: cut the larger ranges so that there are at least that many
    tasks, each queue's share proportional to its size (a hint, as in Kafka)."""
    total = sum(r.size for r in rs)
    if not min_partitions or len(rs) >= min_partitions or total == 0:
        return rs
    out = []
    for r in rs:
        parts = max(1, round(r.size * min_partitions / total))
        parts = min(parts, r.size)
        step, extra = divmod(r.size, parts)
        s = r.start
        for i in range(parts):
            u = s + step + (1 if i < extra else 0)
            out.append(QueueRange(r.mq, s, u))
            s = u
    return out


def rate_limit(start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int],
               max_rows: int) -> Offsets:
    """End offsets reading at most about ``max_rows`` messages, shared among queues in
    proportion to their backlog; every queue with a backlog gets at least one (Kafka's rule)."""
    backlog = {mq: latest[mq] - start.get(mq, latest[mq]) for mq in latest}
    total = sum(v for v in backlog.values() if v > 0)
    if total <= max_rows:
        return dict(latest)
    out = {}
    for mq, off in latest.items():
        b = backlog[mq]
        s = start.get(mq, off)
        if b <= 0:
            out[mq] = off
            continue
        share = max(1, int(b * max_rows / total))
        out[mq] = s + min(b, share)
    return out


def available(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> int:
    return sum(max(0, end[mq] - start.get(mq, end[mq])) for mq in end)
