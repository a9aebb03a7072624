"""The metric families of apache/rocketmq-exporter (``RMQMetricsCollector``): names, HELP texts
and label names exactly as the Java exporter exposes them, so its dashboards and rules work on ours.

Every family is a gauge, as in Java (even the offsets its README calls counters). HELP is Java's
text, typos included (``rocketmq_topic_dlq_offset`` says "TopicRetryOffset").
"""

from __future__ import annotations

from dataclasses import dataclass

# Java's label lists (RMQMetricsCollector.*_LABEL_NAMES)
TOPIC = ("cluster", "broker", "topic")
GROUP = ("cluster", "broker", "topic", "group")
BROKER = ("cluster", "brokerIP", "broker")
CLIENT = ("clientAddr", "clientId", "group", "topic")
DIFF = ("group", "topic", "countOfOnlineConsumers", "msgModel")
COUNT = ("caddr", "localaddr", "group")
DLQ = ("cluster", "broker", "group")
RUNTIME = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    help: str
    labels: tuple[str, ...]


def _families(*rows: tuple[str, str, tuple[str, ...]]) -> dict[str, Family]:
    return {name: Family(name, help_, labels) for name, help_, labels in rows}


#: The 26 families outside ``rocketmq_brokeruntime_*``.
MAIN = _families(
    ("rocketmq_group_diff", "GroupDiff", DIFF),
    ("rocketmq_group_retrydiff", "GroupRetryDiff", DIFF),
    ("rocketmq_group_dlqdiff", "GroupDLQDiff", DIFF),
    ("rocketmq_group_count", "GroupCount", COUNT),
    ("rocketmq_producer_count", "producer instance counter", DLQ),
    ("rocketmq_producer_offset", "TopicOffset", TOPIC),
    ("rocketmq_topic_retry_offset", "TopicRetryOffset", TOPIC),
    ("rocketmq_topic_dlq_offset", "TopicRetryOffset", DLQ),
    ("rocketmq_client_consume_fail_msg_count", "consumerClientFailedMsgCounts", CLIENT),
    ("rocketmq_client_consume_fail_msg_tps", "consumerClientFailedTPS", CLIENT),
    ("rocketmq_client_consume_ok_msg_tps", "consumerClientOKTPS", CLIENT),
    ("rocketmq_client_consume_rt", "consumerClientRT", CLIENT),
    ("rocketmq_client_consumer_pull_rt", "consumerClientPullRT", CLIENT),
    ("rocketmq_client_consumer_pull_tps", "consumerClientPullTPS", CLIENT),
    ("rocketmq_broker_tps", "BrokerPutNums", BROKER),
    ("rocketmq_broker_qps", "BrokerGetNums", BROKER),
    ("rocketmq_broker_commitlog_diff", "brokerCommitLogDiffGauge", BROKER),
    ("rocketmq_consumer_tps", "GroupGetNums", GROUP),
    ("rocketmq_group_consume_tps", "GroupConsumeTPS", GROUP),
    ("rocketmq_consumer_offset", "GroupBrokerTotalOffset", GROUP),
    ("rocketmq_group_consume_total_offset", "GroupConsumeTotalOffset", GROUP),
    ("rocketmq_consumer_message_size", "GroupGetMessageSize", GROUP),
    ("rocketmq_send_back_nums", "SendBackNums", GROUP),
    ("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime", GROUP),
    ("rocketmq_producer_tps", "TopicPutNums", TOPIC),
    ("rocketmq_producer_message_size", "TopicPutMessageSize", TOPIC),
)

#: ``putMessageDistributeTime`` bucket (the broker's text) -> family suffix.
PMDT_BUCKETS = {
    "<=0ms": "0ms", "0~10ms": "0to10ms", "10~50ms": "10to50ms", "50~100ms": "50to100ms",
    "100~200ms": "100to200ms", "200~500ms": "200to500ms", "500ms~1s": "500to1s",
    "1~2s": "1to2s", "2~3s": "2to3s", "3~4s": "3to4s", "4~5s": "4to5s", "5~10s": "5to10s",
    "10s~": "10stomore",
}
PMDT_HELP = {
    "0ms": "PutMessageDistributeTimeMap0ms", "0to10ms": "PutMessageDistributeTimeMap0to10ms",
    "10to50ms": "PutMessageDistributeTimeMap10to50ms",
    "50to100ms": "PutMessageDistributeTimeMap50to100ms",
    "100to200ms": "PutMessageDistributeTimeMap100to200ms",
    "200to500ms": "PutMessageDistributeTimeMap200to500ms",
    "500to1s": "PutMessageDistributeTimeMap500to1s", "1to2s": "PutMessageDistributeTimeMap1to2s",
    "2to3s": "PutMessageDistributeTimeMap2to3s", "3to4s": "PutMessageDistributeTimeMap3to4s",
    "4to5s": "PutMessageDistributeTimeMap4to5s", "5to10s": "PutMessageDistributeTimeMap5to10s",
    "10stomore": "PutMessageDistributeTimeMap10toMore",
}

#: Runtime families read from one GET_BROKER_RUNTIME_INFO key as a number: suffix -> (key, HELP).
RUNTIME_SCALARS = {
    "msg_put_total_today_now": ("msgPutTotalTodayNow", "brokerRuntimeMsgPutTotalTodayNow"),
    "msg_gettotal_today_now": ("msgGetTotalTodayNow", "brokerRuntimeMsgGetTotalTodayNow"),
    "dispatch_behind_bytes": ("dispatchBehindBytes", "brokerRuntimeDispatchBehindBytes"),
    "put_message_size_total": ("putMessageSizeTotal", "brokerRuntimePutMessageSizeTotal"),
    "put_message_average_size": ("putMessageAverageSize", "brokerRuntimePutMessageAverageSize"),
    "query_threadpool_queue_capacity": ("queryThreadPoolQueueCapacity",
                                        "brokerRuntimeQueryThreadPoolQueueCapacity"),
    "remain_transientstore_buffer_numbs": ("remainTransientStoreBufferNumbs",
                                           "brokerRuntimeRemainTransientStoreBufferNumbs"),
    "earliest_message_timestamp": ("earliestMessageTimeStamp",
                                   "brokerRuntimeEarliestMessageTimeStamp"),
    "putmessage_entire_time_max": ("putMessageEntireTimeMax",
                                   "brokerRuntimePutMessageEntireTimeMax"),
    "start_accept_sendrequest_time": ("startAcceptSendRequestTimeStamp",
                                      "brokerRuntimeStartAcceptSendRequestTimeStamp"),
    "send_threadpool_queue_size": ("sendThreadPoolQueueSize",
                                   "brokerRuntimeSendThreadPoolQueueSize"),
    "putmessage_times_total": ("putMessageTimesTotal", "brokerRuntimePutMessageTimesTotal"),
    "getmessage_entire_time_max": ("getMessageEntireTimeMax",
                                   "brokerRuntimeGetMessageEntireTimeMax"),
    "pagecache_lock_time_mills": ("pageCacheLockTimeMills", "brokerRuntimePageCacheLockTimeMills"),
    "commitlog_disk_ratio": ("commitLogDiskRatio", "brokerRuntimeCommitLogDiskRatio"),
    "consumequeue_disk_ratio": ("consumeQueueDiskRatio", "brokerRuntimeConsumeQueueDiskRatio"),
    "dispatch_maxbuffer": ("dispatchMaxBuffer", "brokerRuntimeDispatchMaxBuffer"),
    "pull_threadpoolqueue_capacity": ("pullThreadPoolQueueCapacity",
                                      "brokerRuntimePullThreadPoolQueueCapacity"),
    "send_threadpoolqueue_capacity": ("sendThreadPoolQueueCapacity",
                                      "brokerRuntimeSendThreadPoolQueueCapacity"),
    "pull_threadpoolqueue_size": ("pullThreadPoolQueueSize",
                                  "brokerRuntimePullThreadPoolQueueSizeF"),
    "query_threadpoolqueue_size": ("queryThreadPoolQueueSize",
                                   "brokerRuntimeQueryThreadPoolQueueSize"),
    "pull_threadpoolqueue_headwait_timemills": ("pullThreadPoolQueueHeadWaitTimeMills",
                                                "brokerRuntimePullThreadPoolQueueHeadWaitTimeMills"),
    "query_threadpoolqueue_headwait_timemills": (
        "queryThreadPoolQueueHeadWaitTimeMills", "brokerRuntimeQueryThreadPoolQueueHeadWaitTimeMills"),
    "send_threadpoolqueue_headwait_timemills": ("sendThreadPoolQueueHeadWaitTimeMills",
                                                "brokerRuntimeSendThreadPoolQueueHeadWaitTimeMills"),
    "msg_gettotal_yesterdaymorning": ("msgGetTotalYesterdayMorning",
                                      "brokerRuntimeMsgGetTotalYesterdayMorning"),
    "msg_puttotal_yesterdaymorning": ("msgPutTotalYesterdayMorning",
                                      "brokerRuntimeMsgPutTotalYesterdayMorning"),
    "msg_gettotal_todaymorning": ("msgGetTotalTodayMorning", "brokerRuntimeMsgGetTotalTodayMorning"),
    "msg_puttotal_todaymorning": ("msgPutTotalTodayMorning", "brokerRuntimeMsgPutTotalTodayMorning"),
    "commitlog_maxoffset": ("commitLogMaxOffset", "brokerRuntimeCommitLogMaxOffset"),
    "commitlog_minoffset": ("commitLogMinOffset", "brokerRuntimeCommitLogMinOffset"),
    "put_latency_99": ("putLatency99", "brokerRuntimePutLatency99"),
    "put_latency_999": ("putLatency999", "brokerRuntimePutLatency999"),
}
#: Read as a byte count from human-readable text ("1.5 GiB"): suffix -> (key, HELP).
RUNTIME_BYTES = {
    "remain_howmanydata_toflush": ("remainHowManyDataToFlush",
                                   "brokerRuntimeRemainHowManyDataToFlush"),
}
#: "10s 60s 600s" TPS triples: key -> family stem (Java spells "transfered"; 5.x brokers
#: send ``getTransferredTps``, older ones ``getTransferedTps``).
RUNTIME_TPS = {
    "putTps": "put_tps", "getMissTps": "getmiss_tps", "getTransferredTps": "gettransfered_tps",
    "getTotalTps": "gettotal_tps", "getFoundTps": "getfound_tps",
}
TPS_WINDOWS = ("10", "60", "600")
TPS_HELP_STEM = {"put_tps": "PutTps", "getmiss_tps": "GetMissTps",
                 "gettransfered_tps": "GetTransferedTps", "gettotal_tps": "GetTotalTps",
                 "getfound_tps": "GetFoundTps"}
CAPACITY = {"commitlogdir_capacity_total": "brokerRuntimeCommitLogDirCapacityTotal",
            "commitlogdir_capacity_free": "brokerRuntimeCommitLogDirCapacityFree"}

RUNTIME_PREFIX = "rocketmq_brokeruntime_"


def _runtime() -> dict[str, Family]:
    rows: list[tuple[str, str, tuple[str, ...]]] = []
    rows += [(f"{RUNTIME_PREFIX}pmdt_{s}", h, RUNTIME) for s, h in PMDT_HELP.items()]
    rows += [(RUNTIME_PREFIX + s, h, RUNTIME) for s, (_, h) in RUNTIME_SCALARS.items()]
    rows += [(RUNTIME_PREFIX + s, h, RUNTIME) for s, (_, h) in RUNTIME_BYTES.items()]
    rows += [(f"{RUNTIME_PREFIX}{stem}{w}", f"brokerRuntime{TPS_HELP_STEM[stem]}{w}", RUNTIME)
             for stem in RUNTIME_TPS.values() for w in TPS_WINDOWS]
    rows += [(RUNTIME_PREFIX + s, h, RUNTIME) for s, h in CAPACITY.items()]
    return _families(*rows)


#: The 63 ``rocketmq_brokeruntime_*`` families.
BROKER_RUNTIME = _runtime()
#: All 89, by name.
FAMILIES: dict[str, Family] = {**MAIN, **BROKER_RUNTIME}
