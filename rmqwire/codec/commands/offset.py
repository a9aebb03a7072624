"""Consumer offsets and queue offsets: query, update, min/max, search by time, reset."""

from __future__ import annotations

from dataclasses import dataclass

from rmqwire.codec.body import (
    LONG,
    LONG_KEY,
    MQ,
    STR_KEY,
    FastjsonBody,
    body_of,
    map_of,
    prop,
)
from rmqwire.codec.codes import RequestCode, ResponseCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.topic import DataVersion
from rmqwire.codec.header import (
    BoundaryType,
    CommandHeader,
    RpcRequestHeader,
    TopicQueueRequestHeader,
    TopicRequestHeader,
    jfield,
)
from rmqwire.model import MessageQueue


class QueryConsumerOffsetRequestHeader(TopicQueueRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    set_zero_if_not_found: bool | None = jfield("Boolean")  # 5.x


class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class UpdateConsumerOffsetRequestHeader(TopicQueueRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    commit_offset: int | None = jfield("Long", required=True)


class UpdateConsumerOffsetResponseHeader(CommandHeader):
    pass


class GetMaxOffsetRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    committed: bool = jfield("boolean", default=True)  # 5.x primitive: always sent


class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class GetMinOffsetRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)


class GetMinOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class SearchOffsetRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    timestamp: int | None = jfield("Long", required=True)
    boundary_type: BoundaryType | None = jfield("BoundaryType")  # 5.x; None means LOWER


class SearchOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class GetEarliestMsgStoretimeRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)


class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int | None = jfield("Long", required=True)


class ResetOffsetRequestHeader(TopicQueueRequestHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int = jfield("int", default=-1)  # 5.x
    offset: int | None = jfield("Long")  # 5.x
    timestamp: int = jfield("long", required=True)
    is_force: bool = jfield("boolean", required=True)


class QueryConsumeTimeSpanRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)
    group: str | None = jfield("String", required=True)


class QueryCorrectionOffsetHeader(TopicRequestHeader):
    filter_groups: str | None = jfield("String")
    compare_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)


class CloneGroupOffsetRequestHeader(RpcRequestHeader):
    src_group: str | None = jfield("String", required=True)
    dest_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String")
    offline: bool = jfield("boolean")


@dataclass
class ConsumerOffsetSerializeWrapper(FastjsonBody):
    """GET_ALL_CONSUMER_OFFSET: ``"topic@group" -> {queueId: offset}`` (ids unquoted by Java)."""

    offset_table: dict[str, dict[int, int]] | None = prop(
        "offsetTable", map_of(STR_KEY, map_of(LONG_KEY, LONG)), factory=dict
    )
    data_version: DataVersion | None = prop("dataVersion", body_of(DataVersion))


# ---- commands -----------------------------------------------------------------------------------


class QueryConsumerOffset(Command):
    """QUERY_NOT_FOUND: the group has no offset for this queue yet."""

    code = RequestCode.QUERY_CONSUMER_OFFSET
    header = QueryConsumerOffsetRequestHeader
    response_header = QueryConsumerOffsetResponseHeader
    statuses = frozenset({ResponseCode.QUERY_NOT_FOUND})


class UpdateConsumerOffset(Command):
    """Java sends it oneway from the offset store's periodic persist, two-way from admin tools."""

    code = RequestCode.UPDATE_CONSUMER_OFFSET
    header = UpdateConsumerOffsetRequestHeader
    response_header = UpdateConsumerOffsetResponseHeader


class GetMaxOffset(Command):
    code = RequestCode.GET_MAX_OFFSET
    header = GetMaxOffsetRequestHeader
    response_header = GetMaxOffsetResponseHeader


class GetMinOffset(Command):
    code = RequestCode.GET_MIN_OFFSET
    header = GetMinOffsetRequestHeader
    response_header = GetMinOffsetResponseHeader


class SearchOffsetByTimestamp(Command):
    code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
    header = SearchOffsetRequestHeader
    response_header = SearchOffsetResponseHeader


class GetEarliestMsgStoretime(Command):
    code = RequestCode.GET_EARLIEST_MSG_STORETIME
    header = GetEarliestMsgStoretimeRequestHeader
    response_header = GetEarliestMsgStoretimeResponseHeader


class InvokeBrokerToResetOffset(Command):
    """Admin -> broker; the body is a ResetOffsetBody (queue -> offset)."""

    code = RequestCode.INVOKE_BROKER_TO_RESET_OFFSET
    header = ResetOffsetRequestHeader
    response_body = bytes


class ResetConsumerClientOffset(Command):
    """Broker -> consumer client: move to the offsets in the body."""

    code = RequestCode.RESET_CONSUMER_CLIENT_OFFSET
    header = ResetOffsetRequestHeader
    body = bytes


class QueryConsumeTimeSpan(Command):
    code = RequestCode.QUERY_CONSUME_TIME_SPAN
    header = QueryConsumeTimeSpanRequestHeader
    response_body = bytes


class QueryCorrectionOffset(Command):
    code = RequestCode.QUERY_CORRECTION_OFFSET
    header = QueryCorrectionOffsetHeader
    response_body = bytes


class CloneGroupOffset(Command):
    code = RequestCode.CLONE_GROUP_OFFSET
    header = CloneGroupOffsetRequestHeader


class GetAllConsumerOffset(Command):
    code = RequestCode.GET_ALL_CONSUMER_OFFSET
    response_body = ConsumerOffsetSerializeWrapper


# ---- added for the Admin API (issue 14) -------------------------------------------------------


@dataclass
class ResetOffsetBody(FastjsonBody):
    """INVOKE_BROKER_TO_RESET_OFFSET answer (the command keeps the body as bytes)."""

    offset_table: dict[MessageQueue, int] | None = prop(
        "offsetTable", map_of(MQ, LONG), factory=dict
    )
