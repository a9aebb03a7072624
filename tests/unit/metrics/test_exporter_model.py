"""The exporter's pieces without a network: families, runtime parsing, series expiry, error kinds."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from rmqwire.errors import RemotingConnectError, RemotingTimeoutError, for_code
from rmqwire.metrics.exporter import BROKER_RUNTIME, FAMILIES, MAIN, RMQMetricsCollector
from rmqwire.metrics.exporter.broker_runtime import BrokerRuntimeStats, human_bytes
from rmqwire.metrics.exporter.collect_task import error_kind, is_stats_missing

#: a 5.3.3 broker's answer (brokerStatus), shortened
RUNTIME = {
    "msgPutTotalTodayNow": "71", "msgGetTotalTodayNow": "140", "commitLogMaxOffset": "12345",
    "commitLogMinOffset": "0", "putTps": "1.5 0.25 ", "getTransferredTps": "3.0 1.0 0.5",
    "getMissTps": "0.0 0.0 0.0", "getTotalTps": "1 2 3", "getFoundTps": "1 2 3",
    "commitLogDirCapacity": "Total : 251.99 GiB, Free : 74.40 GiB.",
    "remainHowManyDataToFlush": "1.50 KiB", "putLatency99": "0.35",
    "putMessageDistributeTime": "[<=0ms]:5 [0~10ms]:2 [10~50ms]:0 [50~100ms]:0 [100~200ms]:0 "
                                "[200~500ms]:0 [500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 "
                                "[5~10s]:0 [10s~]:1",
    "brokerVersionDesc": "V5_3_3", "brokerVersion": "479", "bootTimestamp": "1700000000000",
    "commitLogDiskRatio": "0.7", "sendThreadPoolQueueCapacity": "10000",
}


def test_the_89_families_of_rocketmq_exporter() -> None:
    assert len(MAIN) == 26 and len(BROKER_RUNTIME) == 63 and len(FAMILIES) == 89
    assert FAMILIES["rocketmq_group_diff"].labels == ("group", "topic", "countOfOnlineConsumers",
                                                      "msgModel")
    assert FAMILIES["rocketmq_topic_dlq_offset"].help == "TopicRetryOffset"   # Java's text
    assert all(f.labels[1] == "brokerIP" for f in BROKER_RUNTIME.values())


def test_runtime_table_read_per_key() -> None:
    stats = BrokerRuntimeStats.parse(RUNTIME)
    v = {k[len("rocketmq_brokeruntime_"):]: x for k, x in stats.values.items()}
    assert v["msg_put_total_today_now"] == 71 and v["commitlog_maxoffset"] == 12345
    assert (v["put_tps10"], v["put_tps60"]) == (1.5, 0.25) and "put_tps600" not in v
    assert v["gettransfered_tps600"] == 0.5          # 5.x spells it getTransferredTps
    assert v["commitlogdir_capacity_total"] == 251.99 * 1024 ** 3
    assert v["commitlogdir_capacity_free"] == 74.40 * 1024 ** 3
    assert v["remain_howmanydata_toflush"] == 1.5 * 1024
    assert v["pmdt_0ms"] == 5 and v["pmdt_0to10ms"] == 2 and v["pmdt_10stomore"] == 1
    assert len([k for k in v if k.startswith("pmdt_")]) == 13
    assert "dispatch_behind_bytes" not in v          # a key the broker did not send: left out
    assert (stats.version_desc, stats.version, stats.boot_timestamp) == ("V5_3_3", "479", "1700000000000")
    # odd values are skipped, not fatal (Java's reader throws and loses every family)
    odd = BrokerRuntimeStats.parse({"msgPutTotalTodayNow": "x", "putTps": "a b",
                                    "putMessageDistributeTime": "null", "commitLogDirCapacity": "?"})
    assert odd.values == {}
    assert human_bytes("0 B") == 0 and human_bytes("3 MiB") == 3 * 1024 ** 2 and human_bytes("") is None


def test_series_expire_and_identity_replaces() -> None:
    now = [100.0]
    c = RMQMetricsCollector(expire_after=60, clock=lambda: now[0])
    c.put("rocketmq_producer_offset", ("C", "b", "T1"), 5)
    c.put("rocketmq_group_diff", ("g", "T1", "1", "1"), 3, identity=(0, 1))
    c.put("rocketmq_group_diff", ("g", "T1", "0", "1"), 4, identity=(0, 1))   # consumer gone
    c.put("rocketmq_group_diff", ("g", "T2", "0", "1"), 1, identity=(0, 1))
    assert c.snapshot()["rocketmq_group_diff"] == {("g", "T1", "0", "1"): 4, ("g", "T2", "0", "1"): 1}
    now[0] += 30
    c.put("rocketmq_producer_offset", ("C", "b", "T2"), 7)
    now[0] += 31                                      # T1 written 61 s ago: gone
    assert c.snapshot()["rocketmq_producer_offset"] == {("C", "b", "T2"): 7}
    assert c.get("rocketmq_producer_offset", ("C", "b", "T1")) is None
    assert c.expire() == 1 and c.series_count() == 1
    registry = CollectorRegistry()
    registry.register(c)
    text = generate_latest(registry).decode()
    assert '# TYPE rocketmq_producer_offset gauge' in text
    assert 'rocketmq_producer_offset{broker="b",cluster="C",topic="T2"} 7.0' in text
    assert "# HELP rocketmq_brokeruntime_pmdt_0ms PutMessageDistributeTimeMap0ms" in text


def test_error_kinds() -> None:
    missing = for_code(1, "The stats <GROUP_GET_NUMS> <T@g> not exist")
    assert is_stats_missing(missing) and error_kind(missing) is None
    assert error_kind(for_code(17, "topic gone")) is None            # TOPIC_NOT_EXIST: quiet
    assert error_kind(for_code(206, "not online")) is None           # CONSUMER_NOT_ONLINE
    assert error_kind(for_code(1, "disk full")) == "response"
    assert error_kind(RemotingTimeoutError("t")) == "timeout"
    assert error_kind(RemotingConnectError("c")) == "connect"
    assert error_kind(ValueError("bug")) == "internal"

