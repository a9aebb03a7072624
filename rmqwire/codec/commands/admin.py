"""Broker administration: subscription groups, consume stats, connections, config, stats."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    enum_of,
    list_of,
    map_of,
    prop,
)
from rmqwire.codec.codes import LanguageCode, RequestCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.commands.namesrv import KVTable
from rmqwire.codec.commands.topic import DataVersion, TopicList
from rmqwire.codec.header import (
    CommandHeader,
    RpcRequestHeader,
    TopicRequestHeader,
    jfield,
)
from rmqwire.model import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
)


class QueryTopicConsumeByWhoRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)


class GetSubscriptionGroupConfigRequestHeader(RpcRequestHeader):
    group: str | None = jfield("String", required=True)


class DeleteSubscriptionGroupRequestHeader(RpcRequestHeader):
    group_name: str | None = jfield("String", required=True)
    clean_offset: bool = jfield("boolean")  # 5.x (4.x: removeOffset)


class GetConsumeStatsRequestHeader(TopicRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String")
    topic_list: str | None = jfield("String")  # 5.x, ";"-separated


class GetConsumerConnectionListRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)


class GetProducerConnectionListRequestHeader(RpcRequestHeader):
    producer_group: str | None = jfield("String", required=True)


class QueryTopicsByConsumerRequestHeader(RpcRequestHeader):
    group: str | None = jfield("String", required=True)


class QuerySubscriptionByConsumerRequestHeader(TopicRequestHeader):
    group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String")


class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str | None = jfield("String", required=True)
    stats_key: str | None = jfield("String", required=True)


class GetAllProducerInfoRequestHeader(CommandHeader):
    pass


class GetBrokerConfigResponseHeader(CommandHeader):
    """GET_BROKER_CONFIG (26) answer; the request has no header (UPDATE_BROKER_CONFIG neither)."""

    version: str | None = jfield("String", required=True)


@dataclass
class Connection(FastjsonBody):
    client_id: str | None = prop("clientId", STRING)
    client_addr: str | None = prop("clientAddr", STRING)
    language: LanguageCode | None = prop("language", enum_of(LanguageCode))
    version: int = prop("version", INT, 0)


@dataclass
class ConsumerConnection(FastjsonBody):
    connection_set: list[Connection] | None = prop(
        "connectionSet", list_of(body_of(Connection)), factory=list
    )
    subscription_table: dict[str, SubscriptionData] | None = prop(
        "subscriptionTable", map_of(STR_KEY, body_of(SubscriptionData)), factory=dict
    )
    consume_type: ConsumeType | None = prop("consumeType", enum_of(ConsumeType))
    message_model: MessageModel | None = prop("messageModel", enum_of(MessageModel))
    consume_from_where: ConsumeFromWhere | None = prop(
        "consumeFromWhere", enum_of(ConsumeFromWhere)
    )


@dataclass
class OffsetWrapper(FastjsonBody):
    broker_offset: int = prop("brokerOffset", LONG, 0)
    consumer_offset: int = prop("consumerOffset", LONG, 0)
    pull_offset: int = prop("pullOffset", LONG, 0)
    last_timestamp: int = prop("lastTimestamp", LONG, 0)


@dataclass
class ConsumeStats(FastjsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] | None = prop(
        "offsetTable", map_of(MQ, body_of(OffsetWrapper)), factory=dict
    )
    consume_tps: float = prop("consumeTps", DOUBLE, 0.0)
    #: Not on the wire: the lowest version (MQVersion ordinal) in the answering brokers' response
    #: frames, 0 if none answered; a 4.x broker's OffsetWrapper has no pullOffset.
    broker_version: int = field(default=0, compare=False)


@dataclass
class GroupList(FastjsonBody):
    group_list: list[str] | None = prop("groupList", list_of(STRING), factory=list)


@dataclass
class SimpleSubscriptionData(FastjsonBody):
    topic: str | None = prop("topic", STRING)
    expression_type: str | None = prop("expressionType", STRING)
    expression: str | None = prop("expression", STRING)
    version: int = prop("version", LONG, 0)


def _default_retry_policy() -> dict[str, Any]:
    return {"type": "CUSTOMIZED"}


@dataclass
class SubscriptionGroupConfig(FastjsonBody):
    group_name: str | None = prop("groupName", STRING)
    consume_enable: bool = prop("consumeEnable", BOOL, True)
    consume_from_min_enable: bool = prop("consumeFromMinEnable", BOOL, True)
    consume_broadcast_enable: bool = prop("consumeBroadcastEnable", BOOL, True)
    consume_message_orderly: bool = prop("consumeMessageOrderly", BOOL, False)
    retry_queue_nums: int = prop("retryQueueNums", INT, 1)
    retry_max_times: int = prop("retryMaxTimes", INT, 16)
    #: GroupRetryPolicy kept as generic data (``{"type":"CUSTOMIZED"}`` by default).
    group_retry_policy: Any = prop("groupRetryPolicy", ANY, factory=_default_retry_policy)
    broker_id: int = prop("brokerId", LONG, 0)
    which_broker_when_consume_slowly: int = prop("whichBrokerWhenConsumeSlowly", LONG, 1)
    notify_consumer_ids_changed_enable: bool = prop("notifyConsumerIdsChangedEnable", BOOL, True)
    group_sys_flag: int = prop("groupSysFlag", INT, 0)
    consume_timeout_minute: int = prop("consumeTimeoutMinute", INT, 15)
    subscription_data_set: list[SimpleSubscriptionData] | None = prop(
        "subscriptionDataSet", list_of(body_of(SimpleSubscriptionData))
    )
    attributes: dict[str, str] | None = prop("attributes", map_of(STR_KEY, STRING), factory=dict)


@dataclass
class SubscriptionGroupWrapper(FastjsonBody):
    subscription_group_table: dict[str, SubscriptionGroupConfig] | None = prop(
        "subscriptionGroupTable", map_of(STR_KEY, body_of(SubscriptionGroupConfig)), factory=dict
    )
    data_version: DataVersion | None = prop(
        "dataVersion", body_of(DataVersion), factory=DataVersion
    )


# ---- commands -----------------------------------------------------------------------------------


class GetBrokerRuntimeInfo(Command):
    code = RequestCode.GET_BROKER_RUNTIME_INFO
    response_body = KVTable


class GetBrokerConfig(Command):
    """The body is the broker's config as Java properties text."""

    code = RequestCode.GET_BROKER_CONFIG
    response_header = GetBrokerConfigResponseHeader
    response_body = bytes


class UpdateBrokerConfig(Command):
    code = RequestCode.UPDATE_BROKER_CONFIG
    body = bytes


class UpdateAndCreateSubscriptionGroup(Command):
    code = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    body = SubscriptionGroupConfig


class GetSubscriptionGroupConfig(Command):
    code = RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG
    header = GetSubscriptionGroupConfigRequestHeader
    response_body = SubscriptionGroupConfig


class GetAllSubscriptionGroupConfig(Command):
    code = RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    response_body = SubscriptionGroupWrapper


class DeleteSubscriptionGroup(Command):
    code = RequestCode.DELETE_SUBSCRIPTIONGROUP
    header = DeleteSubscriptionGroupRequestHeader


class GetConsumeStats(Command):
    code = RequestCode.GET_CONSUME_STATS
    header = GetConsumeStatsRequestHeader
    response_body = ConsumeStats


class GetConsumerConnectionList(Command):
    code = RequestCode.GET_CONSUMER_CONNECTION_LIST
    header = GetConsumerConnectionListRequestHeader
    response_body = ConsumerConnection


class GetProducerConnectionList(Command):
    code = RequestCode.GET_PRODUCER_CONNECTION_LIST
    header = GetProducerConnectionListRequestHeader
    response_body = bytes


class QueryTopicConsumeByWho(Command):
    code = RequestCode.QUERY_TOPIC_CONSUME_BY_WHO
    header = QueryTopicConsumeByWhoRequestHeader
    response_body = GroupList


class QueryTopicsByConsumer(Command):
    code = RequestCode.QUERY_TOPICS_BY_CONSUMER
    header = QueryTopicsByConsumerRequestHeader
    response_body = TopicList


class QuerySubscriptionByConsumer(Command):
    code = RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER
    header = QuerySubscriptionByConsumerRequestHeader
    response_body = bytes


class BrokerStatsName:
    """``BrokerStatsManager``'s stats names (VIEW_BROKER_STATS_DATA's ``statsName``); the key is
    the topic, ``topic@group``, or the cluster name for the BROKER_* ones."""

    TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
    TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
    GROUP_GET_NUMS = "GROUP_GET_NUMS"
    GROUP_GET_SIZE = "GROUP_GET_SIZE"
    SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
    BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
    BROKER_GET_NUMS = "BROKER_GET_NUMS"


class ViewBrokerStatsData(Command):
    code = RequestCode.VIEW_BROKER_STATS_DATA
    header = ViewBrokerStatsDataRequestHeader
    response_body = bytes


class GetAllProducerInfo(Command):
    """The body is a ``ProducerTableInfo`` (kept as bytes here, as the other admin answers)."""

    code = RequestCode.GET_ALL_PRODUCER_INFO
    header = GetAllProducerInfoRequestHeader
    response_body = bytes


@dataclass
class ProducerInfo(FastjsonBody):
    client_id: str | None = prop("clientId", STRING)
    remote_ip: str | None = prop("remoteIP", STRING)
    language: LanguageCode | None = prop("language", enum_of(LanguageCode))
    version: int = prop("version", INT, 0)
    last_update_timestamp: int = prop("lastUpdateTimestamp", LONG, 0)


@dataclass
class ProducerTableInfo(FastjsonBody):
    """GET_ALL_PRODUCER_INFO answer: the producers of each producer group on a broker."""

    data: dict[str, list[ProducerInfo]] | None = prop(
        "data", map_of(STR_KEY, list_of(body_of(ProducerInfo))), factory=dict
    )


# ---- added for the Admin API (issue 14) -------------------------------------------------------


@dataclass
class ProducerConnection(FastjsonBody):
    """GET_PRODUCER_CONNECTION_LIST answer (the command keeps the body as bytes)."""

    connection_set: list[Connection] | None = prop(
        "connectionSet", list_of(body_of(Connection)), factory=list
    )


@dataclass
class BrokerStatsItem(FastjsonBody):
    sum: int = prop("sum", LONG, 0)
    tps: float = prop("tps", DOUBLE, 0.0)
    avgpt: float = prop("avgpt", DOUBLE, 0.0)


@dataclass
class BrokerStatsData(FastjsonBody):
    """VIEW_BROKER_STATS_DATA answer (the command keeps the body as bytes)."""

    stats_minute: BrokerStatsItem | None = prop("statsMinute", body_of(BrokerStatsItem))
    stats_hour: BrokerStatsItem | None = prop("statsHour", body_of(BrokerStatsItem))
    stats_day: BrokerStatsItem | None = prop("statsDay", body_of(BrokerStatsItem))


@dataclass
class ConsumeStatsList(FastjsonBody):
    """GET_BROKER_CONSUME_STATS answer: per group, the ConsumeStats of each of its topics."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] | None = prop(
        "consumeStatsList", list_of(map_of(STR_KEY, list_of(body_of(ConsumeStats)))), factory=list
    )
    broker_addr: str | None = prop("brokerAddr", STRING)
    total_diff: int = prop("totalDiff", LONG, 0)
    total_inflight_diff: int = prop("totalInflightDiff", LONG, 0)


class GetConsumeStatsInBrokerHeader(CommandHeader):
    is_order: bool = jfield("boolean", required=True)


class GetBrokerConsumeStats(Command):
    code = RequestCode.GET_BROKER_CONSUME_STATS
    header = GetConsumeStatsInBrokerHeader
    response_body = ConsumeStatsList


class CleanExpiredConsumeQueue(Command):
    code = RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE


class DeleteExpiredCommitLog(Command):
    code = RequestCode.DELETE_EXPIRED_COMMITLOG


class CleanUnusedTopic(Command):
    code = RequestCode.CLEAN_UNUSED_TOPIC
