"""HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG (Java ``ClientManageProcessor``).

A heartbeat registers the client's channel in its producer and consumer groups (consumer groups
are auto-created when allowed and get their ``%RETRY%`` topic), answers with the broker's version
(stamped on every response) and, as 5.x does, the IS_SUPPORT_HEART_BEAT_V2 / IS_SUB_CHANGE ext
fields. Heartbeat v2 (a non-zero fingerprint) may omit subscriptions: the group's are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.consumer import CheckClientConfig, CheckClientRequestBody
from rmqwire.codec.commands.heartbeat import (
    HeartBeat,
    HeartbeatData,
    UnregisterClient,
    UnregisterClientRequestHeader,
)
from rmqwire.errors import for_code
from rmqwire.model import ExpressionType, PermName
from rmqwire.remoting.dispatcher import Processor, RequestContext
from rmqwire.server.broker.client_manager import ClientChannelInfo
from rmqwire.server.broker.topic_config import RETRY_PREFIX, validate_group

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["ClientManageProcessor"]

IS_SUPPORT_HEART_BEAT_V2 = "IS_SUPPORT_HEART_BEAT_V2"
IS_SUB_CHANGE = "IS_SUB_CHANGE"


class ClientManageProcessor(Processor):
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._fingerprints: dict[str, int] = {}

    def _channel_info(self, client_id: str | None, context: RequestContext) -> ClientChannelInfo:
        request = context.request
        return ClientChannelInfo(
            channel=context.channel,
            client_id=client_id or "",
            language=request.language if request is not None else 0,
            version=request.version if request is not None else 0,
        )

    @HeartBeat.responder
    def heart_beat(self, header: Any, body: HeartbeatData | None, context: RequestContext) -> Any:
        broker = self.broker
        data = body if body is not None else HeartbeatData()
        info = self._channel_info(data.client_id, context)
        broker.watch_channel(context.channel)
        v2 = data.heartbeat_fingerprint != 0
        sub_changed = False
        for consumer in data.consumer_data_set or []:
            group = consumer.group_name or ""
            if v2:
                old = self._fingerprints.get(group)
                if old is not None and old != data.heartbeat_fingerprint:
                    sub_changed = True
            self._fingerprints[group] = data.heartbeat_fingerprint
            subs = consumer.subscription_data_set or []
            has_order = any(broker.topic_config_manager.is_order_topic(s.topic) for s in subs)
            group_cfg = broker.subscription_group_manager.find(group)
            if group_cfg is None:
                continue
            notify = group_cfg.notify_consumer_ids_changed_enable
            sys_flag = 0x2 if consumer.unit_mode else 0
            if validate_group(group):
                broker.topic_config_manager.create_in_send_back(
                    RETRY_PREFIX + group, group_cfg.retry_queue_nums,
                    int(PermName.PERM_READ | PermName.PERM_WRITE), has_order, sys_flag)
            changed = broker.consumer_manager.register_consumer(
                group, info, consumer.consume_type, consumer.message_model, consumer.consume_from_where,
                None if (v2 and data.without_sub) else list(subs), notify)
            if changed:
                self.log.info("registerConsumer info changed, SDK address={addr}, group={g}",
                              addr=context.peer, g=group)
        for producer in data.producer_data_set or []:
            broker.producer_manager.register_producer(producer.group_name or "", info)
        header_out = {IS_SUPPORT_HEART_BEAT_V2: "true",
                      IS_SUB_CHANGE: "true" if (sub_changed or not v2) else "false"}
        return Response(header=header_out)

    @UnregisterClient.responder
    def unregister_client(self, header: UnregisterClientRequestHeader, body: Any,
                          context: RequestContext) -> Any:
        broker = self.broker
        info = self._channel_info(header.client_id, context)
        if header.producer_group is not None:
            broker.producer_manager.unregister_producer(header.producer_group, info)
        if header.consumer_group is not None:
            cfg = broker.subscription_group_manager.get(header.consumer_group)
            notify = cfg.notify_consumer_ids_changed_enable if cfg is not None else True
            broker.consumer_manager.unregister_consumer(header.consumer_group, info, notify)
        return Response()

    @CheckClientConfig.responder
    def check_client_config(self, header: Any, body: CheckClientRequestBody | None,
                            context: RequestContext) -> Any:
        sub = body.subscription_data if body is not None else None
        if sub is None:
            return Response()
        etype = sub.expression_type
        if etype is None or etype == ExpressionType.TAG:
            return Response()
        if not self.broker.settings.broker.enable_property_filter:
            raise for_code(ResponseCode.SYSTEM_ERROR,
                           f"The broker does not support consumer to filter message by {etype}")
        raise for_code(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"unsupported expression type {etype}")
