"""The broker's administrative codes (Java ``AdminBrokerProcessor``, the default processor).

Topics and groups: UPDATE_AND_CREATE_TOPIC (re-registered with the NameServers before the answer
goes out, as Java's synchronous registration does), DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG,
GET_TOPIC_STATS_INFO, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
DELETE_SUBSCRIPTIONGROUP. Offsets: GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME,
SEARCH_OFFSET_BY_TIMESTAMP, GET_ALL_CONSUMER_OFFSET, GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS,
INVOKE_BROKER_TO_RESET_OFFSET (server side, Java 5.x's default, or pushed to the consumers).
Who consumes what: QUERY_TOPIC_CONSUME_BY_WHO, QUERY_TOPICS_BY_CONSUMER. Stats:
VIEW_BROKER_STATS_DATA (``BrokerStatsManager``). The broker itself: GET_BROKER_RUNTIME_INFO
(Java's keys), GET_BROKER_CONFIG, and UPDATE_BROKER_CONFIG, refused for Java's black list and
unless ``enableUpdateBrokerConfig`` is set, then only for the keys of ``UPDATABLE_KEYS``
(CVE-2023-33246); CLEAN_EXPIRED_CONSUMEQUEUE, DELETE_EXPIRED_COMMITLOG; QUERY_CONSUME_QUEUE. Connections:
GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST. Relayed to one consumer on its own
connection (``client_relay``): GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY,
INVOKE_BROKER_TO_GET_CONSUMER_STATUS.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from rmqwire.codec import fastjson
from rmqwire.codec.codes import LanguageCode, ResponseCode
from rmqwire.codec.commands.admin import (
    BrokerStatsData,
    BrokerStatsItem,
    CleanExpiredConsumeQueue,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    DeleteExpiredCommitLog,
    DeleteSubscriptionGroup,
    DeleteSubscriptionGroupRequestHeader,
    GetAllProducerInfo,
    GetAllSubscriptionGroupConfig,
    GetBrokerConfig,
    GetBrokerConfigResponseHeader,
    GetBrokerConsumeStats,
    GetBrokerRuntimeInfo,
    GetConsumerConnectionList,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStats,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionList,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfig,
    GetSubscriptionGroupConfigRequestHeader,
    GroupList,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryTopicConsumeByWho,
    QueryTopicsByConsumer,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    UpdateAndCreateSubscriptionGroup,
    UpdateBrokerConfig,
    ViewBrokerStatsData,
)
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.consumer import (
    ConsumeMessageDirectly,
    GetConsumerRunningInfo,
    InvokeBrokerToGetConsumerStatus,
    LockBatchMq,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchMq,
    UnlockBatchRequestBody,
)
from rmqwire.codec.commands.namesrv import KVTable
from rmqwire.codec.commands.offset import (
    ConsumerOffsetSerializeWrapper,
    GetAllConsumerOffset,
    GetEarliestMsgStoretime,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffset,
    GetMaxOffsetResponseHeader,
    GetMinOffset,
    GetMinOffsetResponseHeader,
    InvokeBrokerToResetOffset,
    ResetOffsetBody,
    ResetOffsetRequestHeader,
    SearchOffsetByTimestamp,
    SearchOffsetResponseHeader,
)
from rmqwire.codec.commands.query import (
    ConsumeQueueData,
    QueryConsumeQueue,
    QueryConsumeQueueRequestHeader,
    QueryConsumeQueueResponseBody,
)
from rmqwire.codec.commands.topic import (
    CreateTopicRequestHeader,
    DeleteTopicInBroker,
    DeleteTopicRequestHeader,
    GetAllTopicConfig,
    GetTopicConfig,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfo,
    GetTopicStatsInfoRequestHeader,
    TopicList,
    TopicOffset,
    TopicStatsTable,
    UpdateAndCreateTopic,
)
from rmqwire.codec.header import BoundaryType as WireBoundaryType
from rmqwire.codec.ids import parse_offset_msg_id
from rmqwire.errors import CodecError, for_code
from rmqwire.model import MessageQueue, TopicFilterType
from rmqwire.remoting.dispatcher import Processor, RequestContext
from rmqwire.server.broker.config import UPDATABLE_KEYS
from rmqwire.server.broker.subscription_order import connection_order
from rmqwire.server.broker.topic_config import new_topic_config, validate_topic
from rmqwire.server.namesrv.config import parse_properties
from rmqwire.server.namesrv.hash_order import hashmap_order
from rmqwire.server.store import BoundaryType

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["AdminBrokerProcessor", "parse_attributes"]

#: Java ``ConsumeQueueExt.MAX_ADDR``: a tags code at or below it is an address in the extension file.
CQ_EXT_MAX_ADDR = -(2**31) - 1


def parse_attributes(text: str | None) -> dict[str, str]:
    """Java ``AttributeParser.parseToMap``: ``+k=v,+k2=v2`` (``-k`` deletes); empty -> {}."""
    out: dict[str, str] = {}
    if not text:
        return out
    for kv in text.split(","):
        if not kv:
            continue
        if kv.startswith("+"):
            key, sep, value = kv.partition("=")
            if not sep or len(key) <= 1 or not value:
                raise ValueError(f"attribute format is not correct: {kv}")
            out[key] = value
        elif kv.startswith("-"):
            if len(kv) <= 1 or "=" in kv:
                raise ValueError(f"attribute format is not correct: {kv}")
            out[kv] = ""
        else:
            raise ValueError(f"attribute format is not correct: {kv}")
    return out


class AdminBrokerProcessor(Processor):
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    # ---- topics ----------------------------------------------------------------------------------

    @UpdateAndCreateTopic.responder
    def update_and_create_topic(self, header: CreateTopicRequestHeader, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        topic = header.topic
        self.log.info("Broker receive request to update or create topic={t}, caller address={p}",
                      t=topic, p=context.peer)
        invalid = validate_topic(topic)
        if invalid is not None:
            raise for_code(ResponseCode.INVALID_PARAMETER, invalid)
        assert topic is not None
        if broker.settings.broker.validate_system_topic_when_update_topic and \
                broker.topic_config_manager.is_system_topic(topic):
            raise for_code(ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic.")
        try:
            attributes = parse_attributes(header.attributes)
        except ValueError as e:
            raise for_code(ResponseCode.SYSTEM_ERROR, str(e)) from None
        ftype = TopicFilterType.__members__.get(header.topic_filter_type or "SINGLE_TAG", TopicFilterType.SINGLE_TAG)
        cfg = new_topic_config(
            topic, header.read_queue_nums or 0, header.write_queue_nums or 0,
            header.perm if header.perm is not None else 6, ftype, header.topic_sys_flag or 0,
            bool(header.order), {k.lstrip("+"): v for k, v in attributes.items() if k.startswith("+")},
        )
        if not broker.topic_config_manager.update(cfg):
            return Response()
        d = broker.register_incremental([cfg])
        return d.addCallback(lambda _: Response())

    @DeleteTopicInBroker.responder
    def delete_topic(self, header: DeleteTopicRequestHeader, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        topic = header.topic
        if topic is None or not topic.strip():
            raise for_code(ResponseCode.INVALID_PARAMETER, "The specified topic is blank.")
        if broker.settings.broker.validate_system_topic_when_update_topic and \
                broker.topic_config_manager.is_system_topic(topic):
            raise for_code(ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic.")
        broker.delete_topic(topic)
        return Response()

    @GetAllTopicConfig.responder
    def get_all_topic_config(self, header: Any, body: Any, context: RequestContext) -> Any:
        return self.broker.topic_config_manager.serialize_wrapper_all()

    @GetTopicConfig.responder
    def get_topic_config(self, header: GetTopicConfigRequestHeader, body: Any, context: RequestContext) -> Any:
        """The body is Java's TopicConfigAndQueueMapping: the TopicConfig (no static-topic mapping)."""
        cfg = self.broker.topic_config_manager.select(header.topic)
        if cfg is None:
            raise for_code(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}")
        return Response(body=cfg.encode(standard=False))

    @GetTopicStatsInfo.responder
    def get_topic_stats_info(self, header: GetTopicStatsInfoRequestHeader, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        topic = header.topic
        cfg = broker.topic_config_manager.select(topic)
        if cfg is None or topic is None:
            raise for_code(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = broker.store
        table = TopicStatsTable()
        for queue_id in range(max(cfg.write_queue_nums, cfg.read_queue_nums)):
            mq = MessageQueue(topic, broker.settings.broker.broker_name, queue_id)
            lo = max(0, store.get_min_offset_in_queue(topic, queue_id))
            hi = max(0, store.get_max_offset_in_queue(topic, queue_id))
            ts = store.get_message_store_timestamp(topic, queue_id, hi - 1) if hi > 0 else 0
            table.offset_table[mq] = TopicOffset(min_offset=lo, max_offset=hi, last_update_timestamp=max(ts, 0))
        return table

    # ---- subscription groups ---------------------------------------------------------------------

    @UpdateAndCreateSubscriptionGroup.responder
    def update_and_create_subscription_group(self, header: Any, body: SubscriptionGroupConfig | None,
                                             context: RequestContext) -> Any:
        if body is not None:
            try:
                self.broker.subscription_group_manager.update(body)
            except ValueError as e:
                raise for_code(ResponseCode.INVALID_PARAMETER, str(e)) from None
        return Response()

    @GetAllSubscriptionGroupConfig.responder
    def get_all_subscription_group(self, header: Any, body: Any, context: RequestContext) -> Any:
        sgm = self.broker.subscription_group_manager
        return SubscriptionGroupWrapper(subscription_group_table=dict(sgm.table), data_version=sgm.data_version)

    @GetSubscriptionGroupConfig.responder
    def get_subscription_group_config(self, header: GetSubscriptionGroupConfigRequestHeader, body: Any,
                                      context: RequestContext) -> Any:
        cfg = self.broker.subscription_group_manager.get(header.group)
        if cfg is None:
            raise for_code(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                           f"No group in this broker, client: {context.peer} group: {header.group}")
        return cfg

    @DeleteSubscriptionGroup.responder
    def delete_subscription_group(self, header: DeleteSubscriptionGroupRequestHeader, body: Any,
                                  context: RequestContext) -> Any:
        group = header.group_name or ""
        self.broker.subscription_group_manager.delete(group)
        if header.clean_offset:
            self.broker.consumer_offset_manager.remove_offset(group)
        return Response()

    # ---- orderly consumers' queue locks ----------------------------------------------------------

    @LockBatchMq.responder
    def lock_batch_mq(self, header: Any, body: LockBatchRequestBody | None, context: RequestContext) -> Any:
        if body is None:
            return LockBatchResponseBody()
        locked = self.broker.rebalance_lock_manager.try_lock_batch(
            body.consumer_group or "", body.mq_set or [], body.client_id or "")
        return LockBatchResponseBody(lock_ok_mq_set=locked)

    @UnlockBatchMq.responder
    def unlock_batch_mq(self, header: Any, body: UnlockBatchRequestBody | None, context: RequestContext) -> Any:
        if body is not None:
            self.broker.rebalance_lock_manager.unlock_batch(
                body.consumer_group or "", body.mq_set or [], body.client_id or "")
        return Response()

    # ---- offsets ---------------------------------------------------------------------------------

    @GetMaxOffset.responder
    def get_max_offset(self, header: Any, body: Any, context: RequestContext) -> Any:
        offset = self.broker.store.get_max_offset_in_queue(header.topic or "", header.queue_id or 0)
        return GetMaxOffsetResponseHeader(offset=offset)

    @GetMinOffset.responder
    def get_min_offset(self, header: Any, body: Any, context: RequestContext) -> Any:
        offset = self.broker.store.get_min_offset_in_queue(header.topic or "", header.queue_id or 0)
        return GetMinOffsetResponseHeader(offset=offset)

    @GetEarliestMsgStoretime.responder
    def get_earliest_msg_storetime(self, header: Any, body: Any, context: RequestContext) -> Any:
        ts = self.broker.store.get_earliest_message_time(header.topic or "", header.queue_id or 0)
        return GetEarliestMsgStoretimeResponseHeader(timestamp=ts)

    @SearchOffsetByTimestamp.responder
    def search_offset_by_timestamp(self, header: Any, body: Any, context: RequestContext) -> Any:
        boundary = BoundaryType.UPPER if header.boundary_type is WireBoundaryType.UPPER else BoundaryType.LOWER
        offset = self.broker.store.get_offset_in_queue_by_time(
            header.topic or "", header.queue_id or 0, header.timestamp or 0, boundary)
        return SearchOffsetResponseHeader(offset=offset)

    @GetAllConsumerOffset.responder
    def get_all_consumer_offset(self, header: Any, body: Any, context: RequestContext) -> Any:
        com = self.broker.consumer_offset_manager
        return ConsumerOffsetSerializeWrapper(
            offset_table={k: dict(v) for k, v in com.offset_table.items()}, data_version=com.data_version)

    def _offset_wrapper(self, group: str, topic: str, queue_id: int, *, with_pull: bool) -> OffsetWrapper:
        """One queue's line of Java's ConsumeStats (negative offsets read as 0)."""
        broker = self.broker
        store, offsets = broker.store, broker.consumer_offset_manager
        consumer_offset = max(offsets.query_offset(group, topic, queue_id), 0)
        last_ts = 0
        if consumer_offset > 0:
            last_ts = max(0, store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1))
        pull_offset = max(consumer_offset, offsets.query_pull_offset(group, topic, queue_id)) if with_pull else 0
        return OffsetWrapper(broker_offset=max(0, store.get_max_offset_in_queue(topic, queue_id)),
                             consumer_offset=consumer_offset, pull_offset=pull_offset, last_timestamp=last_ts)

    def _subscribed(self, group: str, topic: str) -> bool:
        """Java skips a topic the group does not subscribe when the group subscribes any."""
        cm = self.broker.consumer_manager
        if cm.find_subscription(group, topic) is not None:
            return True
        info, comp = cm.get(group), cm.compensation_table.get(group)
        return not ((info is not None and info.subscription_table) or (comp is not None and comp.subscription_table))

    @GetConsumeStats.responder
    def get_consume_stats(self, header: GetConsumeStatsRequestHeader, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        group = header.consumer_group or ""
        listed = [t for t in (header.topic_list or "").split(";") if t]
        if listed:  # an explicit list skips the subscription check
            topics = set(listed)
        else:
            topics = {header.topic} if header.topic else broker.consumer_offset_manager.which_topic_by_consumer(group)
            topics = {t for t in topics if self._subscribed(group, t)}
        stats = ConsumeStats()
        name = broker.settings.broker.broker_name
        for topic in sorted(topics):
            cfg = broker.topic_config_manager.select(topic)
            if cfg is None:
                continue
            for queue_id in range(cfg.read_queue_nums):
                stats.offset_table[MessageQueue(topic, name, queue_id)] = self._offset_wrapper(
                    group, topic, queue_id, with_pull=True)
            stats.consume_tps += broker.stats_manager.tps_group_get_nums(group, topic)
        return stats

    @GetBrokerConsumeStats.responder
    def get_broker_consume_stats(self, header: Any, body: Any, context: RequestContext) -> Any:
        """Java ``fetchAllConsumeStatsInBroker``: every subscription group's stats on each topic
        it has offsets for (only ordered topics with ``isOrder``), queue by write queue."""
        broker = self.broker
        name = broker.settings.broker.broker_name
        result = ConsumeStatsList(broker_addr=broker.address)
        for group in list(broker.subscription_group_manager.table):
            per_topic = []
            for topic in sorted(broker.consumer_offset_manager.which_topic_by_consumer(group)):
                cfg = broker.topic_config_manager.select(topic)
                if cfg is None or (header.is_order and not cfg.order) or not self._subscribed(group, topic):
                    continue
                stats = ConsumeStats()
                for queue_id in range(cfg.write_queue_nums):
                    stats.offset_table[MessageQueue(topic, name, queue_id)] = self._offset_wrapper(
                        group, topic, queue_id, with_pull=False)
                stats.consume_tps = broker.stats_manager.tps_group_get_nums(group, topic)
                for w in stats.offset_table.values():
                    result.total_diff += w.broker_offset - w.consumer_offset
                    # Java's sum too, though no pull offset is filled in here (so it is negative)
                    result.total_inflight_diff += w.pull_offset - w.consumer_offset
                per_topic.append(stats)
            result.consume_stats_list.append({group: per_topic})
        return result

    @QueryTopicConsumeByWho.responder
    def query_topic_consume_by_who(self, header: Any, body: Any, context: RequestContext) -> Any:
        """The groups with offsets on the topic, and what Java's consumer table gives: its
        topic-to-groups table records each subscribed topic's own name (a Java quirk that
        ``mqadmin statsAll`` shows as a group named after the topic)."""
        broker = self.broker
        topic = header.topic or ""
        # Java's HashSet: the consumer table's entry first, then the offset table's groups;
        # mqadmin prints groups sharing a bucket in this JSON order
        groups = [topic] if broker.consumer_manager.query_topic_consume_by_who(topic) else []
        groups += [g for g in broker.consumer_offset_manager.which_group_by_topic(topic) if g != topic]
        return GroupList(group_list=hashmap_order(groups))

    @QueryTopicsByConsumer.responder
    def query_topics_by_consumer(self, header: Any, body: Any, context: RequestContext) -> Any:
        topics = self.broker.consumer_offset_manager.which_topic_by_consumer(header.group or "")
        return TopicList(topic_list=sorted(topics), broker_addr=self.broker.address)

    @GetAllProducerInfo.responder
    def get_all_producer_info(self, header: Any, body: Any, context: RequestContext) -> Any:
        table = {
            group: [ProducerInfo(client_id=c.client_id, remote_ip=c.addr, language=c.language,
                                 version=c.version, last_update_timestamp=c.last_update_timestamp)
                    for c in channels.values()]
            for group, channels in self.broker.producer_manager.group_channel_table.items()
        }
        return ProducerTableInfo(data=table).encode()

    @ViewBrokerStatsData.responder
    def view_broker_stats_data(self, header: Any, body: Any, context: RequestContext) -> Any:
        item = self.broker.stats_manager.get_stats_item(header.stats_name or "", header.stats_key or "")
        if item is None:
            raise for_code(ResponseCode.SYSTEM_ERROR,
                           f"The stats <{header.stats_name}> <{header.stats_key}> not exist")

        def of(snapshot: Any) -> BrokerStatsItem:
            return BrokerStatsItem(sum=snapshot.sum, tps=snapshot.tps, avgpt=snapshot.avgpt)

        return Response(body=BrokerStatsData(stats_minute=of(item.in_minute()), stats_hour=of(item.in_hour()),
                                             stats_day=of(item.in_day())).encode())

    # ---- resetting offsets, and what the consumers report ----------------------------------------

    @InvokeBrokerToResetOffset.responder
    def reset_offset(self, header: ResetOffsetRequestHeader, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        topic, group = header.topic or "", header.group or ""
        self.log.info("[reset-offset] reset offset started by {p}. topic={t}, group={g}, timestamp={ts}, "
                      "isForce={f}", p=context.peer, t=topic, g=group, ts=header.timestamp, f=header.is_force)
        if broker.settings.broker.use_server_side_reset_offset:
            return self._reset_offset_on_server(topic, group, header.queue_id, header.timestamp, header.offset)
        return broker.broker2client.reset_offset(topic, group, header.timestamp, header.is_force)

    def _reset_offset_on_server(self, topic: str, group: str, queue_id: int, timestamp: int,
                                offset: int | None) -> Any:
        """Java ``resetOffsetInner``: the new offsets are kept for the group's next pull (which
        answers OFFSET_MOVED with them) and committed; a running consumer needs no push."""
        broker = self.broker
        store = broker.store
        cfg = broker.topic_config_manager.select(topic)
        if cfg is None:
            raise for_code(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
        if not broker.subscription_group_manager.contains(group):
            raise for_code(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist")

        def by_time(qid: int) -> int:
            if timestamp < 0:
                return store.get_max_offset_in_queue(topic, qid)
            return store.get_offset_in_queue_by_time(topic, qid, timestamp, BoundaryType.LOWER)

        targets: dict[int, int] = {}
        if queue_id >= 0:
            if offset is not None and offset != -1:
                lo, hi = store.get_min_offset_in_queue(topic, queue_id), store.get_max_offset_in_queue(topic, queue_id)
                if (lo >= 0 and offset < lo) or offset > hi + 1:
                    raise for_code(ResponseCode.SYSTEM_ERROR,
                                   f"Target offset {offset} not in consume queue range [{lo}-{hi}]")
                targets[queue_id] = offset
            else:
                targets[queue_id] = by_time(queue_id)
        else:
            targets = {qid: by_time(qid) for qid in range(cfg.read_queue_nums)}
        if not targets:
            raise for_code(ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        offsets = broker.consumer_offset_manager
        name = broker.settings.broker.broker_name
        table = {}
        for qid, target in targets.items():
            if target >= 0:  # Java ignores (and logs) a negative target
                offsets.assign_reset_offset(topic, group, qid, target)
            table[MessageQueue(topic, name, qid)] = target
        return Response(body=ResetOffsetBody(offset_table=table).encode())

    @InvokeBrokerToGetConsumerStatus.responder
    def get_consumer_status(self, header: Any, body: Any, context: RequestContext) -> Any:
        self.log.info("[get-consumer-status] get consumer status by {p}. topic={t}, group={g}",
                      p=context.peer, t=header.topic, g=header.group)
        return self.broker.broker2client.get_consume_status(header.topic or "", header.group or "",
                                                             header.client_addr)

    @GetConsumerRunningInfo.responder
    def get_consumer_running_info(self, header: Any, body: Any, context: RequestContext) -> Any:
        request = context.request
        assert request is not None
        return self.broker.broker2client.call_consumer(request.code, request, header.consumer_group,
                                                       header.client_id)

    @ConsumeMessageDirectly.responder
    def consume_message_directly(self, header: Any, body: Any, context: RequestContext) -> Any:
        """Forwarded with the broker's name, the topic's and group's sys flags and the stored
        message (found by the offset message id) as the body, as Java does."""
        broker = self.broker
        request = context.request
        assert request is not None
        fields = dict(request.ext_fields or {})
        fields["brokerName"] = broker.settings.broker.broker_name
        if header.topic:
            cfg = broker.topic_config_manager.select(header.topic)
            if cfg is not None:
                fields["topicSysFlag"] = str(cfg.topic_sys_flag)
        if header.consumer_group:
            group_cfg = broker.subscription_group_manager.get(header.consumer_group)
            if group_cfg is not None:
                fields["groupSysFlag"] = str(group_cfg.group_sys_flag)
        record = None
        try:
            record = broker.store.select_one_message_by_offset(
                parse_offset_msg_id(header.msg_id or "").commit_log_offset)
        except CodecError:
            pass  # Java forwards the admin's own body when the id is not an offset message id
        forward = dataclasses.replace(request, ext_fields=fields,
                                      body=bytes(record) if record is not None else request.body)
        return broker.broker2client.call_consumer(request.code, forward, header.consumer_group, header.client_id)

    # ---- the consume queue ------------------------------------------------------------------------

    @QueryConsumeQueue.responder
    def query_consume_queue(self, header: QueryConsumeQueueRequestHeader, body: Any,
                            context: RequestContext) -> Any:
        """Java ``queryConsumeQueue`` (mqadmin queryCq): ``count`` units from ``index``, within the
        file that holds it. rmqwire has no consume-queue extension: every unit is a plain one, and
        ``filterData`` is "null" (Java's for a tag subscription) for SQL92 subscriptions too."""
        topic, queue_id, index = header.topic or "", header.queue_id or 0, header.index or 0
        cq = self.broker.store.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            raise for_code(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        answer = QueryConsumeQueueResponseBody(max_queue_index=cq.max_offset_in_queue,
                                               min_queue_index=cq.min_offset_in_queue)
        group = header.consumer_group
        if group is not None:
            answer.subscription_data = self.broker.consumer_manager.find_subscription(group, topic)
            answer.filter_data = ("null" if answer.subscription_data is not None
                                  else f"{group}@{topic} is not online!")
        units = cq.iterate_from(index)
        if units is None:
            return Response(remark=f"Index {index} of {queue_id}@{topic} is not exist!")
        answer.queue_data = []
        for unit in units:
            if unit.queue_offset - index >= (header.count or 0):
                break
            one = ConsumeQueueData(physic_offset=unit.pos, physic_size=unit.size,
                                   tags_code=unit.tags_code)
            if unit.tags_code <= CQ_EXT_MAX_ADDR:  # an extension address: not kept here
                one.msg = f"Cq extend not exist!addr: {unit.tags_code}"
            answer.queue_data.append(one)
        return answer.encode()

    # ---- store maintenance -----------------------------------------------------------------------

    @CleanExpiredConsumeQueue.responder
    def clean_expired_consume_queue(self, header: Any, body: Any, context: RequestContext) -> Any:
        self.log.info("AdminBrokerProcessor#cleanExpiredConsumeQueue: start.")
        self.broker.store.clean_expired_consumer_queue()
        self.log.info("AdminBrokerProcessor#cleanExpiredConsumeQueue: end.")
        return Response()

    @DeleteExpiredCommitLog.responder
    def delete_expired_commit_log(self, header: Any, body: Any, context: RequestContext) -> Any:
        self.log.warn("invoke deleteExpiredCommitLog start.")
        self.broker.store.execute_delete_files_manually()
        self.log.warn("invoke deleteExpiredCommitLog end.")
        return Response()

    # ---- the broker itself -----------------------------------------------------------------------

    @GetBrokerRuntimeInfo.responder
    def get_broker_runtime_info(self, header: Any, body: Any, context: RequestContext) -> Any:
        return KVTable(table=self.broker.runtime_info())

    @GetBrokerConfig.responder
    def get_broker_config(self, header: Any, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        version = fastjson.dumps(broker.config_data_version.to_fastjson(), standard=False)
        return Response(header=GetBrokerConfigResponseHeader(version=version),
                        body=broker.settings.all_configs_text().encode("utf-8", "replace"))

    @UpdateBrokerConfig.responder
    def update_broker_config(self, header: Any, body: bytes | None, context: RequestContext) -> Any:
        """Java's checks (the black list, with its remark), then rmqwire's: the switch
        ``enableUpdateBrokerConfig`` and the allow-list of keys that are never paths, addresses,
        class names or commands (CVE-2023-33246 set rocketmqHome / filterServerNums this way)."""
        broker = self.broker
        self.log.info("Broker receive request to update config, caller address={p}", p=context.peer)
        if body is None:
            return Response()
        try:
            props = parse_properties(body.decode("utf-8"))
        except (UnicodeDecodeError, CodecError):
            raise for_code(ResponseCode.SYSTEM_ERROR, "string2Properties error") from None
        refused = self._refused_config_update(props)
        if refused:
            self.log.warn("UPDATE_BROKER_CONFIG from {peer} refused: {why}", peer=context.peer, why=refused)
            raise for_code(ResponseCode.NO_PERMISSION, refused)
        if props:
            broker.update_config(props)
        return Response()

    def _refused_config_update(self, props: dict[str, str]) -> str | None:
        settings = self.broker.settings
        if set(props) & settings.black_list():
            return "Can not update config in black list."
        if not settings.broker.enable_update_broker_config:
            return ("Updating the broker config remotely is disabled "
                    "(set enableUpdateBrokerConfig=true to allow its safe keys)")
        refused = sorted(set(props) - UPDATABLE_KEYS)
        if refused:
            return (f"Config key(s) {', '.join(refused)} may not be updated remotely; "
                    f"allowed: {', '.join(sorted(UPDATABLE_KEYS))}")
        bad = settings.invalid_values(props)
        if bad:
            return f"Config value(s) not valid for their type: {', '.join(bad)}"
        return None

    # ---- connections -----------------------------------------------------------------------------

    @GetConsumerConnectionList.responder
    def get_consumer_connection_list(self, header: GetConsumerConnectionListRequestHeader, body: Any,
                                     context: RequestContext) -> Any:
        group = header.consumer_group
        info = self.broker.consumer_manager.get(group)
        if info is None:
            raise for_code(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        conn = ConsumerConnection(
            connection_set=[_connection(c) for c in info.channel_info_table.values()],
            subscription_table=connection_order(info.subscription_table, info.subscription_bins),
            consume_type=info.consume_type, message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        )
        # fastjson2 writes the map in its own order, which mqadmin's shows (not key order)
        return conn.encode(standard=False)

    @GetProducerConnectionList.responder
    def get_producer_connection_list(self, header: GetProducerConnectionListRequestHeader, body: Any,
                                     context: RequestContext) -> Any:
        group = header.producer_group or ""
        conns = self.broker.producer_manager.group_connections(group)
        if not conns:
            raise for_code(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return ProducerConnection(connection_set=[_connection(c) for c in conns]).encode()


def _connection(info: Any) -> Connection:
    lang = info.language
    try:
        lang = LanguageCode(lang)
    except ValueError:
        lang = LanguageCode.OTHER
    return Connection(client_id=info.client_id, client_addr=info.addr, language=lang, version=info.version)

