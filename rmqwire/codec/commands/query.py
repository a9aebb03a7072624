"""Message queries: QUERY_MESSAGE (by key), VIEW_MESSAGE_BY_ID, QUERY_CONSUME_QUEUE."""

from __future__ import annotations

from rmqwire.codec.codes import RequestCode
from rmqwire.codec.commands.base import Command
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
