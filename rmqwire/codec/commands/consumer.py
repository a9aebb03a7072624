"""Consumer group management: member lists, send-back, queue locks, running info."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqwire.codec.body import (
    ANY,
    BOOL,
    DOUBLE,
    INT,
    LONG,
    MQ,
    STR_KEY,
    STRING,
    FastjsonBody,
    body_of,
    list_of,
    map_of,
    prop,
)
from rmqwire.codec.codes import RequestCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.header import (
    CommandHeader,
    RpcRequestHeader,
    TopicRequestHeader,
    jfield,
)
from rmqwire.codec.java import java_string_sort_key
from rmqwire.model import (
    MessageQueue,
)


class GetConsumerListByGroupRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)


class GetConsumerListByGroupResponseHeader(CommandHeader):
    pass


class ConsumerSendMsgBackRequestHeader(RpcRequestHeader):
    offset: int | None = jfield("Long", required=True)  # commit-log physical offset
    group: str | None = jfield("String", required=True)
    delay_level: int | None = jfield("Integer", required=True)
    origin_msg_id: str | None = jfield("String")
    origin_topic: str | None = jfield("String")
    unit_mode: bool = jfield("boolean")
    max_reconsume_times: int | None = jfield("Integer")


class NotifyConsumerIdsChangedRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)


class LockBatchMqRequestHeader(RpcRequestHeader):
    """LOCK_BATCH_MQ (41): rpc fields only; the queues travel in the body."""


class UnlockBatchMqRequestHeader(RpcRequestHeader):
    """UNLOCK_BATCH_MQ (42): rpc fields only."""


class GetConsumerRunningInfoRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    client_id: str | None = jfield("String", required=True)
    jstack_enable: bool = jfield("boolean")


class ConsumeMessageDirectlyResultRequestHeader(TopicRequestHeader):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str | None = jfield("String", required=True)
    client_id: str | None = jfield("String")
    msg_id: str | None = jfield("String")
    broker_name: str | None = jfield("String")
    topic: str | None = jfield("String")  # 5.x
    topic_sys_flag: int | None = jfield("Integer")  # 5.x
    group_sys_flag: int | None = jfield("Integer")  # 5.x


class GetConsumerStatusRequestHeader(TopicRequestHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str | None = jfield("String", required=True)
    group: str | None = jfield("String", required=True)
    client_addr: str | None = jfield("String")


@dataclass
class LockBatchRequestBody(FastjsonBody):
    consumer_group: str | None = prop("consumerGroup", STRING)
    client_id: str | None = prop("clientId", STRING)
    only_this_broker: bool = prop("onlyThisBroker", BOOL, False)
    mq_set: list[MessageQueue] | None = prop("mqSet", list_of(MQ), factory=list)


@dataclass
class UnlockBatchRequestBody(FastjsonBody):
    consumer_group: str | None = prop("consumerGroup", STRING)
    client_id: str | None = prop("clientId", STRING)
    only_this_broker: bool = prop("onlyThisBroker", BOOL, False)
    mq_set: list[MessageQueue] | None = prop("mqSet", list_of(MQ), factory=list)


@dataclass
class LockBatchResponseBody(FastjsonBody):
    lock_ok_mq_set: list[MessageQueue] | None = prop("lockOKMQSet", list_of(MQ), factory=list)


@dataclass
class GetConsumerListByGroupResponseBody(FastjsonBody):
    consumer_id_list: list[str] | None = prop("consumerIdList", list_of(STRING))


@dataclass
class ConsumeStatus(FastjsonBody):
    pull_rt: float = prop("pullRT", DOUBLE, 0.0)
    pull_tps: float = prop("pullTPS", DOUBLE, 0.0)
    consume_rt: float = prop("consumeRT", DOUBLE, 0.0)
    consume_ok_tps: float = prop("consumeOKTPS", DOUBLE, 0.0)
    consume_failed_tps: float = prop("consumeFailedTPS", DOUBLE, 0.0)
    consume_failed_msgs: int = prop("consumeFailedMsgs", LONG, 0)


@dataclass
class ProcessQueueInfo(FastjsonBody):
    commit_offset: int = prop("commitOffset", LONG, 0)
    cached_msg_min_offset: int = prop("cachedMsgMinOffset", LONG, 0)
    cached_msg_max_offset: int = prop("cachedMsgMaxOffset", LONG, 0)
    cached_msg_count: int = prop("cachedMsgCount", INT, 0)
    cached_msg_size_in_mib: int = prop("cachedMsgSizeInMiB", INT, 0)
    transaction_msg_min_offset: int = prop("transactionMsgMinOffset", LONG, 0)
    transaction_msg_max_offset: int = prop("transactionMsgMaxOffset", LONG, 0)
    transaction_msg_count: int = prop("transactionMsgCount", INT, 0)
    locked: bool = prop("locked", BOOL, False)
    try_unlock_times: int = prop("tryUnlockTimes", LONG, 0)
    last_lock_timestamp: int = prop("lastLockTimestamp", LONG, 0)
    droped: bool = prop("droped", BOOL, False)  # sic: the Java property name
    last_pull_timestamp: int = prop("lastPullTimestamp", LONG, 0)
    last_consume_timestamp: int = prop("lastConsumeTimestamp", LONG, 0)


def _subscription_order(sd: SubscriptionData) -> bytes:
    # SubscriptionData.compareTo: String order of topic + "@" + subString (null -> "null").
    topic = "null" if sd.topic is None else sd.topic
    sub = "null" if sd.sub_string is None else sd.sub_string
    return java_string_sort_key(f"{topic}@{sub}")


@dataclass
class ConsumerRunningInfo(FastjsonBody):
    """GET_CONSUMER_RUNNING_INFO reply. Java keeps the tables in TreeMaps (written key-sorted)
    and the subscriptions in a TreeSet (written in SubscriptionData.compareTo order)."""

    properties: dict[str, Any] | None = prop("properties", map_of(STR_KEY, ANY), factory=dict)
    subscription_set: list[SubscriptionData] | None = prop(
        "subscriptionSet",
        list_of(body_of(SubscriptionData), sort_key=_subscription_order),
        factory=list,
    )
    mq_table: dict[MessageQueue, ProcessQueueInfo] | None = prop(
        "mqTable", map_of(MQ, body_of(ProcessQueueInfo), tree_map=True), factory=dict
    )
    #: PopProcessQueueInfo values kept as generic data.
    mq_pop_table: dict[MessageQueue, Any] | None = prop(
        "mqPopTable", map_of(MQ, ANY, tree_map=True), factory=dict
    )
    status_table: dict[str, ConsumeStatus] | None = prop(
        "statusTable", map_of(STR_KEY, body_of(ConsumeStatus), tree_map=True), factory=dict
    )
    user_consumer_info: dict[str, str] | None = prop(
        "userConsumerInfo", map_of(STR_KEY, STRING, tree_map=True), factory=dict
    )
    jstack: str | None = prop("jstack", STRING)


# ---- commands -----------------------------------------------------------------------------------


class GetConsumerListByGroup(Command):
    code = RequestCode.GET_CONSUMER_LIST_BY_GROUP
    header = GetConsumerListByGroupRequestHeader
    response_header = GetConsumerListByGroupResponseHeader
    response_body = GetConsumerListByGroupResponseBody


class NotifyConsumerIdsChanged(Command):
    """Broker -> every consumer of a group, oneway: rebalance now."""

    code = RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    header = NotifyConsumerIdsChangedRequestHeader
    oneway = True


class ConsumerSendMsgBack(Command):
    code = RequestCode.CONSUMER_SEND_MSG_BACK
    header = ConsumerSendMsgBackRequestHeader


class LockBatchMq(Command):
    code = RequestCode.LOCK_BATCH_MQ
    header = LockBatchMqRequestHeader
    body = LockBatchRequestBody
    response_body = LockBatchResponseBody


class UnlockBatchMq(Command):
    code = RequestCode.UNLOCK_BATCH_MQ
    header = UnlockBatchMqRequestHeader
    body = UnlockBatchRequestBody


class GetConsumerRunningInfo(Command):
    """Admin -> broker -> consumer client (the broker forwards it on the client's connection)."""

    code = RequestCode.GET_CONSUMER_RUNNING_INFO
    header = GetConsumerRunningInfoRequestHeader
    response_body = ConsumerRunningInfo


class ConsumeMessageDirectly(Command):
    code = RequestCode.CONSUME_MESSAGE_DIRECTLY
    header = ConsumeMessageDirectlyResultRequestHeader
    body = bytes
    response_body = bytes


class GetConsumerStatusFromClient(Command):
    code = RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT
    header = GetConsumerStatusRequestHeader
    response_body = bytes


class InvokeBrokerToGetConsumerStatus(Command):
    code = RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    header = GetConsumerStatusRequestHeader
    response_body = bytes


# ---- consumer-side bodies (issue 9) -------------------------------------------------------------


@dataclass
class CheckClientRequestBody(FastjsonBody):
    """CHECK_CLIENT_CONFIG (46): may this broker filter by the subscription's expression type?"""

    client_id: str | None = prop("clientId", STRING)
    group: str | None = prop("group", STRING)
    subscription_data: SubscriptionData | None = prop("subscriptionData", body_of(SubscriptionData))
    namespace: str | None = prop("namespace", STRING)


@dataclass
class ConsumeMessageDirectlyResult(FastjsonBody):
    """CONSUME_MESSAGE_DIRECTLY answer; ``consume_result`` is a CMResult name (CR_SUCCESS, ...)."""

    order: bool = prop("order", BOOL, False)
    auto_commit: bool = prop("autoCommit", BOOL, True)
    consume_result: str | None = prop("consumeResult", STRING)
    remark: str | None = prop("remark", STRING)
    spent_time_mills: int = prop("spentTimeMills", LONG, 0)


@dataclass
class GetConsumerStatusBody(FastjsonBody):
    """GET_CONSUMER_STATUS_FROM_CLIENT answer: the client's offsets of a topic."""

    message_queue_table: dict[MessageQueue, int] | None = prop(
        "messageQueueTable", map_of(MQ, LONG), factory=dict
    )
    #: INVOKE_BROKER_TO_GET_CONSUMER_STATUS answer: client id -> its offsets.
    consumer_table: dict[str, dict[MessageQueue, int]] | None = prop(
        "consumerTable", map_of(STR_KEY, map_of(MQ, LONG)), factory=dict)


@dataclass
class ResetOffsetBodyForClient(FastjsonBody):
    """RESET_CONSUMER_CLIENT_OFFSET body (Java ``ResetOffsetBody``): queue -> offset."""

    offset_table: dict[MessageQueue, int] | None = prop("offsetTable", map_of(MQ, LONG), factory=dict)


class CheckClientConfig(Command):
    """No header; the body says the subscription. Not SUCCESS: the broker cannot filter so."""

    code = RequestCode.CHECK_CLIENT_CONFIG
    body = CheckClientRequestBody
