"""Java's StatsItem arithmetic in BrokerStatsManager: windows sampled every 10 s / 10 min / 1 h
from a fake clock, a zero snapshot one period before an item's first, sum / TPS / average per
call from a window's first and last snapshots, and the counters the send and pull paths bump."""

from __future__ import annotations

from twisted.internet.task import Clock

from rmqwire.server.broker.stats import (
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
    StatsItemSet,
    StatsSnapshot,
)


class Now:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def test_item_windows_follow_java_arithmetic() -> None:
    now = Now()
    s = StatsItemSet("TOPIC_PUT_NUMS", now)
    assert s.in_minute("T") == StatsSnapshot()  # no item: zeros
    s.add_value("T", 6, 2)
    item = s.get("T")
    assert item is not None and item.in_minute() == StatsSnapshot()  # not sampled yet
    s.sample(0)
    # the zero snapshot 10 s before and the first real one
    assert item.in_minute() == StatsSnapshot(sum=6, tps=0.6, avgpt=3.0, times=2)
    for _ in range(10):  # a minute later only the last 7 snapshots (60 s) count
        now.ms += 10_000
        s.add_value("T", 1)
        s.sample(0)
    m = item.in_minute()
    assert (m.sum, m.times) == (6, 6) and m.tps == 0.1 and m.avgpt == 1.0
    assert item.in_hour() == StatsSnapshot() and item.in_day() == StatsSnapshot()
    s.sample(2)
    assert item.in_day().sum == 16  # everything since the start, over one hour
    now.ms += 3_600_000 * 2
    s.remove_idle(60_000)
    assert s.get("T") is None


def test_manager_counts_puts_and_gets_under_java_keys() -> None:
    now = Now()
    m = BrokerStatsManager("DefaultCluster", now)
    m.on_put("T", 1, 3, 300)
    m.on_get("cg", "T", 1, 2, 200)
    assert m.get_stats_item(TOPIC_PUT_NUMS, "T").value == 3
    assert m.get_stats_item(TOPIC_PUT_SIZE, "T").value == 300
    assert m.get_stats_item(BROKER_PUT_NUMS, "DefaultCluster").value == 3
    assert m.get_stats_item(GROUP_GET_NUMS, "T@cg").value == 2
    assert m.get_stats_item(GROUP_GET_SIZE, "T@cg").value == 200
    assert m.get_stats_item("QUEUE_GET_NUMS", "T@1@cg").value == 2
    assert m.get_stats_item("NO_SUCH_STATS", "T") is None
    assert m.tps_group_get_nums("cg", "T") == 0.0
    m.sample(0)
    assert m.tps_group_get_nums("cg", "T") == 0.2


def test_manager_samples_on_the_reactor() -> None:
    now = Now()
    clock = Clock()
    m = BrokerStatsManager("c", now)
    m.on_put("T", 0, 1, 10)
    m.start(clock)  # every window sampled at once, as Java's samplers start at delay 0
    item = m.get_stats_item(TOPIC_PUT_NUMS, "T")
    assert item.in_minute().sum == item.in_hour().sum == item.in_day().sum == 1
    m.on_put("T", 0, 4, 10)
    now.ms += 10_000
    clock.advance(10)
    assert item.in_minute().sum == 5 and item.in_hour().sum == 1
    m.stop()
    assert not clock.getDelayedCalls()
