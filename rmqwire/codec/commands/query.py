"""Message queries: QUERY_MESSAGE (by key), VIEW_MESSAGE_BY_ID, QUERY_CONSUME_QUEUE."""

from __future__ import annotations

from dataclasses import dataclass

from rmqwire.codec.body import (
    BOOL,
    INT,
    LONG,
    STRING,
    FastjsonBody,
    body_of,
    list_of,
    prop,
)
from rmqwire.codec.codes import RequestCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.header import (
    CommandHeader,
    TopicQueueRequestHeader,
    TopicRequestHeader,
    jfield,
)


class QueryConsumeQueueRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String")
    queue_id: int = jfield("int")
    index: int = jfield("long")
    count: int = jfield("int")
    consumer_group: str | None = jfield("String")


class ViewMessageRequestHeader(CommandHeader):
    topic: str | None = jfield("String")  # 5.x
    offset: int | None = jfield("Long", required=True)  # commit-log offset


class ViewMessageResponseHeader(CommandHeader):
    pass


class QueryMessageRequestHeader(TopicRequestHeader):
    """QUERY_MESSAGE (12). ``_UNIQUE_KEY_QUERY`` travels as an extra key."""

    topic: str | None = jfield("String", required=True)
    key: str | None = jfield("String", required=True)
    max_num: int | None = jfield("Integer", required=True)
    begin_timestamp: int | None = jfield("Long", required=True)
    end_timestamp: int | None = jfield("Long", required=True)


class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int | None = jfield("Long", required=True)
    index_last_update_phyoffset: int | None = jfield("Long", required=True)


# ---- commands -----------------------------------------------------------------------------------


class QueryMessage(Command):
    """By key (or by unique key with the ``_UNIQUE_KEY_QUERY`` extra field); the body is stored
    records."""

    code = RequestCode.QUERY_MESSAGE
    header = QueryMessageRequestHeader
    response_header = QueryMessageResponseHeader
    response_body = bytes


class ViewMessageById(Command):
    """By commit-log offset (from an offset message id); the body is one stored record."""

    code = RequestCode.VIEW_MESSAGE_BY_ID
    header = ViewMessageRequestHeader
    response_header = ViewMessageResponseHeader
    response_body = bytes


class QueryConsumeQueue(Command):
    code = RequestCode.QUERY_CONSUME_QUEUE
    header = QueryConsumeQueueRequestHeader
    response_body = bytes


# ---- added for the Admin API (issue 14) -------------------------------------------------------


@dataclass
class ConsumeQueueData(FastjsonBody):
    physic_offset: int = prop("physicOffset", LONG, 0)
    physic_size: int = prop("physicSize", INT, 0)
    tags_code: int = prop("tagsCode", LONG, 0)
    extend_data_json: str | None = prop("extendDataJson", STRING)
    bit_map: str | None = prop("bitMap", STRING)
    eval: bool = prop("eval", BOOL, False)
    msg: str | None = prop("msg", STRING)


@dataclass
class QueryConsumeQueueResponseBody(FastjsonBody):
    """QUERY_CONSUME_QUEUE answer (the command keeps the body as bytes)."""

    subscription_data: SubscriptionData | None = prop("subscriptionData", body_of(SubscriptionData))
    filter_data: str | None = prop("filterData", STRING)
    queue_data: list[ConsumeQueueData] | None = prop("queueData", list_of(body_of(ConsumeQueueData)))
    max_queue_index: int = prop("maxQueueIndex", LONG, 0)
    min_queue_index: int = prop("minQueueIndex", LONG, 0)
