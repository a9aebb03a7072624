"""PULL_MESSAGE and LITE_PULL_MESSAGE (Java ``PullMessageProcessor`` with its default result
handler).

Checks in Java's order (broker and group permissions, topic, queue id, the subscription from the
request or from the group's heartbeat), then a read of the consume queue filtered by tag hash.
Java's status mapping: FOUND -> SUCCESS with the records as the body; NO_MATCHED_MESSAGE and
MESSAGE_WAS_REMOVING -> PULL_RETRY_IMMEDIATELY; OFFSET_OVERFLOW_ONE / OFFSET_FOUND_NULL (and an
empty queue read from 0) -> PULL_NOT_FOUND; OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY, OFFSET_RESET
and an empty queue read from elsewhere -> PULL_OFFSET_MOVED. The remark is the status name.

A PULL_NOT_FOUND with the SUSPEND flag is held (``long_polling``) and processed once more, without
suspension, when a matching message arrives or the suspend time is up. With COMMIT_OFFSET set the
request's ``commitOffset`` is stored for the group, on the first pass only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.heartbeat import SubscriptionData, build_subscription_data
from rmqwire.codec.commands.pull import (
    LitePullMessage,
    PullMessage,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
)
from rmqwire.codec.java import java_string_hash
from rmqwire.errors import MQClientError
from rmqwire.model import ConsumeType, ExpressionType, MessageModel, PermName
from rmqwire.remoting.dispatcher import Processor, RequestContext
from rmqwire.server.broker.long_polling import PullRequest
from rmqwire.server.store import GetMessageResult, GetMessageStatus, TagsMessageFilter

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["PullMessageProcessor", "filter_of"]

#: FAQUrl.suggestTodo(SUBSCRIPTION_GROUP_NOT_EXIST / SAME_GROUP_DIFFERENT_TOPIC)
FAQ_TIP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
SUB_ALL = "*"
#: PermName.INDEX_PERM_READ
_INDEX_PERM_READ = 2
#: RequestSource PROXY_FOR_BROADCAST / PROXY_FOR_STREAM
_PROXY_FOR_BROADCAST = 1
_PROXY_FOR_STREAM = 2

_STATUS_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_RESET: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def filter_of(sub: SubscriptionData | None) -> TagsMessageFilter:
    """Java ``ExpressionMessageFilter.isMatchedByConsumeQueue`` for TAG subscriptions."""
    if sub is None or sub.class_filter_mode or sub.sub_string == SUB_ALL:
        return TagsMessageFilter(None)
    codes = sub.code_set
    if not codes and sub.tags_set:
        codes = [java_string_hash(t) for t in sub.tags_set]
    return TagsMessageFilter(frozenset(codes or ()))


def _is_tag_type(expression_type: str | None) -> bool:
    return expression_type is None or expression_type == "" or expression_type == ExpressionType.TAG


class PullMessageProcessor(Processor):
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @PullMessage.responder
    @LitePullMessage.responder
    def pull_message(self, header: PullMessageRequestHeader, body: Any, context: RequestContext) -> Any:
        lite = context.request is not None and context.request.code == LitePullMessage.code
        return self.process(header, context, allow_suspend=True, lite=lite)

    def process(self, h: PullMessageRequestHeader, context: RequestContext, *, allow_suspend: bool,
                lite: bool = False) -> Any:
        broker = self.broker
        bcfg = broker.settings.broker
        rh = PullMessageResponseHeader()

        def refuse(code: int, remark: str, forbidden: int | None = None) -> Response[Any, Any]:
            rh.forbidden_type = forbidden
            return Response(header=rh, code=code, remark=remark)

        if not bcfg.broker_permission & PermName.PERM_READ:
            return refuse(ResponseCode.NO_PERMISSION,
                          f"the broker[{bcfg.broker_ip1}] pulling message is forbidden", 1)
        if lite and not bcfg.lite_pull_message_enable:
            return refuse(ResponseCode.NO_PERMISSION,
                          f"the broker[{bcfg.broker_ip1}] for lite pull consumer is forbidden", 1)
        group = h.consumer_group
        group_cfg = broker.subscription_group_manager.find(group)
        if group_cfg is None:
            return refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group [{group}] does not exist, {FAQ_TIP}")
        if not group_cfg.consume_enable:
            return refuse(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}", 2)
        topic = h.topic
        topic_cfg = broker.topic_config_manager.select(topic)
        if topic_cfg is None:
            self.log.error("the topic {t} not exist, consumer: {p}", t=topic, p=context.peer)
            return refuse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_TIP}")
        if not topic_cfg.perm & PermName.PERM_READ:
            return refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden", 3)
        queue_id = h.queue_id if h.queue_id is not None else -1
        if queue_id < 0 or queue_id >= topic_cfg.read_queue_nums:
            return refuse(ResponseCode.INVALID_PARAMETER,
                          f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                          f"[{topic_cfg.read_queue_nums}] consumer:[{context.peer}]")
        assert group is not None and topic is not None
        consumers = broker.consumer_manager
        source = h.request_source
        if source == _PROXY_FOR_BROADCAST:
            consumers.compensate_basic_info(group, ConsumeType.CONSUME_PASSIVELY, MessageModel.BROADCASTING)
        elif source == _PROXY_FOR_STREAM:
            consumers.compensate_basic_info(group, ConsumeType.CONSUME_ACTIVELY, MessageModel.CLUSTERING)
        else:
            consumers.compensate_basic_info(group, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING)
        sys_flag = h.sys_flag or 0
        sub: SubscriptionData | None
        if sys_flag & PullSysFlag.SUBSCRIPTION:
            try:
                sub = build_subscription_data(topic, h.subscription, h.expression_type)
            except (MQClientError, ValueError):
                self.log.warn("Parse the consumer's subscription[{s}] failed, group: {g}",
                              s=h.subscription, g=group)
                return refuse(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
            consumers.compensate_subscription(group, topic, sub)
        else:
            info = consumers.get(group)
            if info is None:
                return refuse(ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ_TIP}")
            if not group_cfg.consume_broadcast_enable and info.message_model is MessageModel.BROADCASTING:
                return refuse(ResponseCode.NO_PERMISSION,
                              f"the consumer group[{group}] can not consume by broadcast way", 4)
            if broker.subscription_group_manager.is_forbidden(group, topic, _INDEX_PERM_READ):
                return refuse(ResponseCode.NO_PERMISSION,
                              f"the consumer group[{group}] is forbidden for topic[{topic}]", 5)
            sub = info.find_subscription(topic)
            if sub is None:
                return refuse(ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ_TIP}")
            if sub.sub_version < (h.sub_version or 0):
                return refuse(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        if not _is_tag_type(sub.expression_type) and not bcfg.enable_property_filter:
            return refuse(ResponseCode.SYSTEM_ERROR,
                          f"The broker does not support consumer to filter message by {sub.expression_type}")
        message_filter = filter_of(sub)

        store = broker.store
        offset = h.queue_offset if h.queue_offset is not None else 0
        reset = None
        if bcfg.use_server_side_reset_offset:
            reset = broker.consumer_offset_manager.query_then_erase_reset_offset(topic, group, queue_id)
        if reset is not None:
            result = GetMessageResult(
                status=GetMessageStatus.OFFSET_RESET, next_begin_offset=reset,
                min_offset=store.get_min_offset_in_queue(topic, queue_id),
                max_offset=store.get_max_offset_in_queue(topic, queue_id),
            )
        else:
            got = store.get_message(group, topic, queue_id, offset, h.max_msg_nums or 0,
                                    message_filter=message_filter)
            if got is None:
                return Response(header=rh, code=ResponseCode.SYSTEM_ERROR, remark="store getMessage return null")
            result = got

        code = _STATUS_CODES.get(result.status)
        if code is None:  # NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
            code = ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        rh.next_begin_offset = result.next_begin_offset
        rh.min_offset = result.min_offset
        rh.max_offset = result.max_offset
        rh.topic_sys_flag = topic_cfg.topic_sys_flag
        rh.group_sys_flag = group_cfg.group_sys_flag
        if bcfg.slave_read_enable:
            rh.suggest_which_broker_id = (group_cfg.which_broker_when_consume_slowly
                                          if result.suggest_pulling_from_slave else group_cfg.broker_id)
        else:
            rh.suggest_which_broker_id = 0

        offsets = broker.consumer_offset_manager
        offsets.commit_pull_offset(group, topic, queue_id, result.next_begin_offset)
        if allow_suspend and sys_flag & PullSysFlag.COMMIT_OFFSET and h.commit_offset is not None:
            offsets.commit_offset(context.peer, group, topic, queue_id, h.commit_offset)

        remark = result.status.name
        if code == ResponseCode.SUCCESS:
            broker.stats.on_get(topic, result.message_count)
            broker.stats_manager.on_get(group, topic, queue_id, result.message_count,
                                        result.buffer_total_size)
            metrics = broker.metrics
            if metrics.enabled:
                metrics.on_get(topic, group, result.message_count, result.buffer_total_size)
            return Response(header=rh, body=result.body, code=code, remark=remark)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & PullSysFlag.SUSPEND:
            timeout = h.suspend_timeout_millis or 0
            if not bcfg.long_polling_enable:
                timeout = bcfg.short_polling_time_mills
            return self._suspend(h, context, topic, queue_id, offset, message_filter, timeout, lite)
        if code == ResponseCode.PULL_OFFSET_MOVED:
            self.log.warn("PULL_OFFSET_MOVED:correction offset. topic={t}, groupId={g}, requestOffset={o}, "
                          "newOffset={n}", t=topic, g=group, o=offset, n=result.next_begin_offset)
        return Response(header=rh, code=code, remark=remark)

    def _suspend(self, h: PullMessageRequestHeader, context: RequestContext, topic: str, queue_id: int,
                 offset: int, message_filter: TagsMessageFilter, timeout_ms: int, lite: bool) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()

        def resume() -> None:
            try:
                answer = self.process(h, context, allow_suspend=False, lite=lite)
            except Exception as e:
                d.errback(e)
                return
            d.callback(answer)

        req = PullRequest(topic, queue_id, offset, message_filter, resume,
                          drop=lambda: d.callback(None), channel=context.channel)
        self.broker.watch_channel(context.channel)
        self.broker.pull_hold_service.suspend(req, timeout_ms)
        return d
