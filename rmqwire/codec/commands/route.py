"""Topic routes: GET_ROUTEINFO_BY_TOPIC and GET_BROKER_CLUSTER_INFO, with their bodies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqwire.codec.body import (
    ANY,
    BOOL,
    INT,
    LONG_KEY,
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
from rmqwire.codec.header import (
    TopicRequestHeader,
    jfield,
)


class GetRouteInfoRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)
    accept_standard_json_only: bool | None = jfield("Boolean")  # 4.9.4+


@dataclass
class QueueData(FastjsonBody):
    broker_name: str | None = prop("brokerName", STRING)
    read_queue_nums: int = prop("readQueueNums", INT, 0)
    write_queue_nums: int = prop("writeQueueNums", INT, 0)
    perm: int = prop("perm", INT, 0)
    topic_sys_flag: int = prop("topicSysFlag", INT, 0)


@dataclass
class BrokerData(FastjsonBody):
    cluster: str | None = prop("cluster", STRING)
    broker_name: str | None = prop("brokerName", STRING)
    #: broker id (0 = master) -> "ip:port"; fastjson's default style writes the ids unquoted.
    broker_addrs: dict[int, str] | None = prop("brokerAddrs", map_of(LONG_KEY, STRING))
    zone_name: str | None = prop("zoneName", STRING)
    enable_acting_master: bool = prop("enableActingMaster", BOOL, False)


@dataclass
class TopicRouteData(FastjsonBody):
    order_topic_conf: str | None = prop("orderTopicConf", STRING)
    queue_datas: list[QueueData] | None = prop(
        "queueDatas", list_of(body_of(QueueData)), factory=list
    )
    broker_datas: list[BrokerData] | None = prop(
        "brokerDatas", list_of(body_of(BrokerData)), factory=list
    )
    filter_server_table: dict[str, list[str]] | None = prop(
        "filterServerTable", map_of(STR_KEY, list_of(STRING)), factory=dict
    )
    #: 5.x static topics: brokerName -> TopicQueueMappingInfo, kept as generic data.
    topic_queue_mapping_by_broker: dict[str, Any] | None = prop(
        "topicQueueMappingByBroker", map_of(STR_KEY, ANY)
    )


@dataclass
class ClusterInfo(FastjsonBody):
    broker_addr_table: dict[str, BrokerData] | None = prop(
        "brokerAddrTable", map_of(STR_KEY, body_of(BrokerData))
    )
    cluster_addr_table: dict[str, list[str]] | None = prop(
        "clusterAddrTable", map_of(STR_KEY, list_of(STRING))
    )


# ---- commands -----------------------------------------------------------------------------------


class GetRouteInfo(Command):
    """A topic's route from a NameServer; TOPIC_NOT_EXIST when it has none."""

    code = RequestCode.GET_ROUTEINFO_BY_TOPIC
    header = GetRouteInfoRequestHeader
    response_body = TopicRouteData


class GetBrokerClusterInfo(Command):
    code = RequestCode.GET_BROKER_CLUSTER_INFO
    response_body = ClusterInfo
