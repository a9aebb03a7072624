"""Store runtime statistics (the store keys of GET_BROKER_RUNTIME_INFO)."""

from __future__ import annotations

from rmqwire.server.store.stats import StoreStats


def test_tps_and_runtime_keys():
    clock = {"now": 1_000_000}
    stats = StoreStats(lambda: clock["now"])
    info = stats.runtime_info()
    assert info["putTps"] == "  " and info["putMessageDistributeTime"] == "null"
    assert info["runtime"] == "[ 0 days, 0 hours, 0 minutes, 0 seconds ]"
    for _ in range(61):
        stats.sample()
        clock["now"] += 1000
        stats.record_put(50, 50 * 100, 3)
        stats.get_message_times_total_found += 7
        stats.get_message_times_total_miss += 3
    stats.sample()
    info = stats.runtime_info()
    assert info["putTps"] == "50.0 50.0 "  # no 10-minute window yet
    assert info["getTotalTps"] == "10.0 10.0 "
    assert info["putMessageTimesTotal"] == str(61 * 50) and info["putMessageAverageSize"] == "100.0"
    assert info["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:59 [10~50ms]:0")
    assert info["putLatency99"] == "10.00"
    assert info["runtime"] == "[ 0 days, 0 hours, 1 minutes, 1 seconds ]"
