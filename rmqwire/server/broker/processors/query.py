"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID (Java ``QueryMessageProcessor``).

QUERY_MESSAGE looks ``topic#key`` up in the store's index between two store times and answers the
records found back to back, oldest first, with how far the index reaches
(indexLastUpdateTimestamp / indexLastUpdatePhyoffset). The ``_UNIQUE_KEY_QUERY=true`` extra field
(a query by message id, i.e. UNIQ_KEY) replaces the requested maxNum by ``defaultQueryMaxNum``;
any query returns at most ``maxMsgsNumBatch`` records. VIEW_MESSAGE_BY_ID answers the one record
at a commit-log offset (from an offset message id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqwire.codec.acl import UNIQUE_KEY_QUERY
from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.query import (
    QueryMessage,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageById,
    ViewMessageRequestHeader,
)
from rmqwire.errors import for_code
from rmqwire.remoting.dispatcher import Processor, RequestContext

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["QueryMessageProcessor"]

NOT_FOUND_REMARK = "can not find message, maybe time range not correct"


class QueryMessageProcessor(Processor):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @QueryMessage.responder
    def query_message(self, header: QueryMessageRequestHeader, body: Any, context: RequestContext) -> Any:
        store = self.broker.store
        max_num = header.max_num or 0
        request = context.request
        if request is not None and (request.ext_fields or {}).get(UNIQUE_KEY_QUERY) == "true":
            max_num = store.config.default_query_max_num
        result = store.query_message(
            header.topic or "", header.key or "", max_num, header.begin_timestamp or 0, header.end_timestamp or 0
        )
        reply = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        )
        if not result.message_buffers:
            return Response(header=reply, code=ResponseCode.QUERY_NOT_FOUND, remark=NOT_FOUND_REMARK)
        return Response(header=reply, body=result.body)

    @ViewMessageById.responder
    def view_message_by_id(self, header: ViewMessageRequestHeader, body: Any, context: RequestContext) -> Any:
        offset = header.offset
        store = self.broker.store
        record = store.select_one_message_by_offset(offset) if offset is not None and offset >= 0 else None
        if record is None:
            raise for_code(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return Response(body=record)
