"""Offset arithmetic and option parsing of the rocketmq Spark source (no Spark, no broker)."""

from __future__ import annotations

import json

import pytest

from rmqwire.model import MessageQueue
from rmqwire.spark import offsets as off
from rmqwire.spark.options import GROUP_REFUSED, ReadOptions, WriteOptions, parse_assign

A0, A1, B0 = (MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0))


def test_json_round_trip_uses_string_keys() -> None:
    d = off.to_json_dict({A0: 5, A1: 7, B0: 0})
    assert d == {"T": {"a": {"0": 5, "1": 7}, "b": {"0": 0}}}
    assert off.from_json_dict(json.loads(json.dumps(d))) == {A0: 5, A1: 7, B0: 0}


@pytest.mark.parametrize("bad", ['{"T": 1}', '{"T": {"a": {"x": 1}}}', '{"T": {"a": {"0": "1"}}}', "[1]"])
def test_bad_offset_json_names_the_option(bad: str) -> None:
    with pytest.raises(ValueError, match="startingOffsets"):
        off.parse_json_offsets(bad, "startingOffsets")


def test_ranges_skip_empty_queues() -> None:
    rs = off.ranges({A0: 3, A1: 5, B0: 0}, {A0: 10, A1: 5, B0: 2})
    assert rs == [off.QueueRange(A0, 3, 10), off.QueueRange(B0, 0, 2)]


def test_min_partitions_splits_proportionally_and_covers_every_offset() -> None:
    rs = off.split_ranges([off.QueueRange(A0, 0, 900), off.QueueRange(A1, 0, 100)], 10)
    assert len(rs) == 10
    assert sum(r.mq == A0 for r in rs) == 9
    covered = sorted((r.mq, o) for r in rs for o in range(r.start, r.until))
    assert covered == sorted([(A0, o) for o in range(900)] + [(A1, o) for o in range(100)])
    assert off.split_ranges(rs[:2], None) == rs[:2]


def test_rate_limit_is_proportional_with_at_least_one_each() -> None:
    end = off.rate_limit({A0: 0, A1: 0, B0: 0}, {A0: 1000, A1: 10, B0: 0}, 101)
    assert end[A0] == 100 and end[A1] == 1 and end[B0] == 0
    assert off.available({A0: 0, A1: 0, B0: 0}, end) <= 101
    assert off.rate_limit({A0: 0}, {A0: 50}, 100) == {A0: 50}


def test_read_options_defaults_and_precedence() -> None:
    o = ReadOptions.parse({"NAMESERVER": "h:9876", "Topic": "A, B"}, streaming=False)
    assert o.subscription.topics == ("A", "B") and o.starting.kind == "earliest" and o.ending.kind == "latest"
    s = ReadOptions.parse({"nameServer": "h", "topic": "A", "startingOffsets": "earliest",
                           "startingTimestamp": "123"}, streaming=True)
    assert s.starting.kind == "timestamp" and s.starting.timestamp == 123
    assert ReadOptions.parse({"nameServer": "h", "topic": "A"}, streaming=True).starting.kind == "latest"


@pytest.mark.parametrize("opts, match", [
    ({"topic": "A", "group": "g"}, "commitOffsetsToGroup"),
    ({}, "exactly one of"),
    ({"topic": "A", "topicPattern": "A.*"}, "exactly one of"),
    ({"topic": "A", "startingOffsets": "latest"}, "not allowed for a batch"),
    ({"topic": "A", "endingOffsets": '{"A": {"a": {"0": -2}}}'}, "not allowed"),
    ({"topic": "A", "minPartitions": "0"}, "minPartitions"),
    ({"topic": "A", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"topic": "A", "bogus": "1"}, "unknown option"),
    ({"topic": "A", "accessKey": "k"}, "go together"),
])
def test_bad_read_options_are_refused_with_a_reason(opts: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ReadOptions.parse({"nameServer": "h", **opts}, streaming=False)
    assert "checkpoint" in GROUP_REFUSED


def test_missing_name_server_and_streaming_only_batch_options() -> None:
    with pytest.raises(ValueError, match="nameServer"):
        ReadOptions.parse({"topic": "A"}, streaming=False)
    with pytest.raises(ValueError, match="batch queries only"):
        ReadOptions.parse({"nameServer": "h", "topic": "A", "endingOffsets": "latest"}, streaming=True)


def test_assign_json() -> None:
    assert parse_assign('{"T": {"a": [0, 1], "b": [0]}}') == [A0, A1, B0]
    with pytest.raises(ValueError, match="assign"):
        parse_assign('{"T": [0, 1]}')


def test_write_options() -> None:
    w = WriteOptions.parse({"nameServer": "h", "topic": "T", "retryTimes": "0"})
    assert w.topic == "T" and w.retry_times == 0
    with pytest.raises(ValueError, match="unknown option"):
        WriteOptions.parse({"nameServer": "h", "subExpression": "x"})
