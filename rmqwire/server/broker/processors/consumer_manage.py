"""QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET and GET_CONSUMER_LIST_BY_GROUP (Java
``ConsumerManageProcessor``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.consumer import (
    GetConsumerListByGroup,
    GetConsumerListByGroupRequestHeader,
    GetConsumerListByGroupResponseBody,
)
from rmqwire.codec.commands.offset import (
    QueryConsumerOffset,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffset,
    UpdateConsumerOffsetRequestHeader,
)
from rmqwire.errors import for_code
from rmqwire.remoting.dispatcher import Processor, RequestContext

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["ConsumerManageProcessor"]


class ConsumerManageProcessor(Processor):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @GetConsumerListByGroup.responder
    def get_consumer_list_by_group(self, header: GetConsumerListByGroupRequestHeader, body: Any,
                                   context: RequestContext) -> Any:
        group = header.consumer_group
        info = self.broker.consumer_manager.get(group)
        if info is not None:
            ids = info.all_client_ids()
            if ids:
                return Response(body=GetConsumerListByGroupResponseBody(consumer_id_list=ids))
        raise for_code(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")

    @UpdateConsumerOffset.responder
    def update_consumer_offset(self, header: UpdateConsumerOffsetRequestHeader, body: Any,
                               context: RequestContext) -> Any:
        broker = self.broker
        topic, group = header.topic, header.consumer_group
        if not broker.subscription_group_manager.contains(group):
            raise for_code(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!")
        if not broker.topic_config_manager.contains(topic):
            raise for_code(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        if header.queue_id is None:
            raise for_code(ResponseCode.INVALID_PARAMETER, f"QueueId is null, topic is {topic}")
        if header.commit_offset is None:
            raise for_code(ResponseCode.INVALID_PARAMETER, f"Offset is null, topic is {topic}")
        assert topic is not None and group is not None
        offsets = broker.consumer_offset_manager
        if broker.settings.broker.use_server_side_reset_offset and offsets.has_offset_reset(
                topic, group, header.queue_id):
            return Response(remark="Offset has been previously reset")
        offsets.commit_offset(context.peer, group, topic, header.queue_id, header.commit_offset)
        return Response()

    @QueryConsumerOffset.responder
    def query_consumer_offset(self, header: QueryConsumerOffsetRequestHeader, body: Any,
                              context: RequestContext) -> Any:
        broker = self.broker
        group, topic = header.consumer_group or "", header.topic or ""
        queue_id = header.queue_id if header.queue_id is not None else 0
        offset = broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return QueryConsumerOffsetResponseHeader(offset=offset)
        min_offset = broker.store.get_min_offset_in_queue(topic, queue_id)
        if header.set_zero_if_not_found is False:
            return Response(code=ResponseCode.QUERY_NOT_FOUND,
                            remark="Not found, do not set to zero, maybe this group boot first")
        if min_offset <= 0 and broker.check_in_mem_by_consume_offset(topic, queue_id, 0):
            return QueryConsumerOffsetResponseHeader(offset=0)
        return Response(code=ResponseCode.QUERY_NOT_FOUND,
                        remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
