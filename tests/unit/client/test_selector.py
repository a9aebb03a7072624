"""Queue choice and broker latency fault tolerance (rmqwire.client.producer.selector)."""

from __future__ import annotations

import random

import pytest

from rmqwire.client.producer.selector import (
    LatencyFaultTolerance,
    MQFaultStrategy,
    select_by_hash,
)
from rmqwire.client.route import QueueIndex, TopicPublishInfo
from rmqwire.model import MessageQueue

MQS = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def info() -> TopicPublishInfo:
    return TopicPublishInfo("T", list(MQS), index=QueueIndex(random.Random(1)))


@pytest.mark.parametrize("latency,duration", [
    (0, 0), (49, 0), (50, 0), (100, 0), (549, 0), (550, 2000), (1800, 5000), (3000, 6000),
    (5000, 10000), (14999, 10000), (15000, 30000), (10**6, 30000),
])
def test_not_available_duration_follows_java_tables(latency: int, duration: int) -> None:
    assert MQFaultStrategy().compute_not_available_duration(latency) == duration


def test_retry_avoids_the_last_broker() -> None:
    s = MQFaultStrategy()
    i = info()
    for _ in range(10):
        assert s.select_one_message_queue(i, "a").broker_name == "b"
        assert s.select_one_message_queue(i, "b").broker_name == "a"


def test_only_one_broker_falls_back_to_it() -> None:
    s = MQFaultStrategy()
    i = TopicPublishInfo("T", [MessageQueue("T", "a", 0)])
    assert s.select_one_message_queue(i, "a") == MessageQueue("T", "a", 0)


def test_fault_items_only_recorded_when_enabled() -> None:
    s = MQFaultStrategy(send_latency_fault_enable=False)
    s.update_fault_item("a", 5000, isolation=True)
    assert s.tolerance.items == {}


def test_isolated_broker_is_avoided_until_its_duration_passes() -> None:
    clock = Clock()
    s = MQFaultStrategy(send_latency_fault_enable=True, clock=clock)
    s.update_fault_item("a", 20, isolation=True)  # counts as 10 s: unavailable for 10 s
    i = info()
    assert {s.select_one_message_queue(i, None).broker_name for _ in range(8)} == {"b"}
    clock.now += 9_999
    assert not s.tolerance.is_available("a")
    clock.now += 1
    assert s.tolerance.is_available("a")
    assert {s.select_one_message_queue(i, None).broker_name for _ in range(8)} == {"a", "b"}


def test_unreachable_everywhere_still_gives_a_queue() -> None:
    clock = Clock()
    s = MQFaultStrategy(send_latency_fault_enable=True, clock=clock)
    for b in ("a", "b"):
        s.update_fault_item(b, 0, isolation=True, reachable=False)
    assert s.select_one_message_queue(info(), "a") in MQS


def test_isolation_is_only_ever_extended() -> None:
    clock = Clock()
    t = LatencyFaultTolerance(clock)
    t.update_fault_item("a", 0, 30_000, True)
    t.update_fault_item("a", 0, 2_000, True)
    assert t.items["a"].start_timestamp == clock.now + 30_000


def test_select_by_hash_matches_java() -> None:
    # Java: "order-1".hashCode() = -1207111310; Integer 7 hashes to 7
    assert select_by_hash(MQS, None, 7) == MQS[7 % 4]
    assert select_by_hash(MQS, None, "order-1") == MQS[abs(-1207111310) % 4]
