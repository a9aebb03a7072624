"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK (Java
``SendMessageProcessor``).

The path of the official broker: ``msgCheck`` (broker and topic permissions, topic name, system
topics, auto-creation from the request's default topic (TBW102) or a retry topic, queue id), a
random write queue for ``queueId < 0``, the retry/DLQ diversion of ``%RETRY%`` sends, a UNIQ_KEY
stamped when the client sent none, the CLUSTER property, transactional half messages, then the
store and the mapping of its result onto a response code. Every answer carries the MSG_REGION and
TRACE_ON ext fields, as Java's ``preSend`` adds them before anything else.

A SYNC_FLUSH put's answer is built when the message is appended and held (a ``HeldResponse``, framed
by the channel at once); the store's flush thread hands each group-commit round's completions to the
reactor in one call, which releases them: the frames are written once the flush covered them.
"""

from __future__ import annotations

import functools
import random
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.consumer import (
    ConsumerSendMsgBack,
    ConsumerSendMsgBackRequestHeader,
)
from rmqwire.codec.commands.send import (
    SendBatchMessage,
    SendMessage,
    SendMessageRequestHeader,
    SendMessageV2,
)
from rmqwire.codec.ids import create_offset_msg_id
from rmqwire.codec.message import (
    MessageExt,
    PropertyKey,
    decode_properties,
    java_hashmap_order,
)
from rmqwire.model import PermName, TopicFilterType
from rmqwire.remoting.dispatcher import HeldResponse, Processor, RequestContext
from rmqwire.server.broker.metrics import message_type
from rmqwire.server.broker.topic_config import (
    DLQ_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_PREFIX,
    TRANS_HALF_TOPIC,
    validate_topic,
)
from rmqwire.server.store import PutMessageResult, PutMessageStatus
from rmqwire.server.store.flush import GroupCommitRequest

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["SendMessageProcessor", "peer_host"]

#: Java ``FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)`` / ``SUBSCRIPTION_GROUP_NOT_EXIST``.
APPLY_TOPIC_TIP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
#: MixAll.DLQ_NUMS_PER_GROUP
DLQ_NUMS_PER_GROUP = 1
#: MessageSysFlag.MULTI_TAGS_FLAG
MULTI_TAGS_FLAG = 0x1 << 1
_TRAN_MASK = 0xC
#: MQVersion.Version.V3_4_9 ordinal (maxReconsumeTimes in the header counts from there)
_V3_4_9 = 89

_FAILED_REMARKS: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED: (
        ResponseCode.SYSTEM_ERROR,
        "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq "
        "consumeQueue num exceed maxLmqConsumeQueueNum config num, default limit 2w."),
}
_OK_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


@functools.lru_cache(maxsize=4096)
def _hashmap_positions(keys: tuple[str, ...]) -> tuple[int, ...]:
    index = {k: i for i, k in enumerate(keys)}
    return tuple(index[k] for k in java_hashmap_order(dict.fromkeys(keys, ""), 128))


def hashmap_ordered(props: dict[str, str]) -> dict[str, str]:
    """``props`` in the order of Java's ``HashMap(128)`` filled in insertion order (what the
    official broker writes), computed once per key sequence: clients send few distinct ones."""
    items = list(props.items())
    return {items[i][0]: items[i][1] for i in _hashmap_positions(tuple(props))}


def peer_host(peer: str) -> tuple[str, int]:
    """``host:port`` / ``[v6]:port`` of a channel as the (ip, port) a record stores."""
    host, _, port = peer.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return host or "0.0.0.0", int(port)
    except ValueError:
        return "0.0.0.0", 0


class _Refused(Exception):
    """An answer other than success, with its code and remark."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class SendMessageProcessor(Processor):
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._random = random.Random()
        self._ext: dict[str, str] = {}
        self.refresh_ext_fields()
        reactor = broker.reactor
        broker.store.set_flush_listener(_release_flushed, reactor=reactor)

    def refresh_ext_fields(self) -> None:
        b = self.broker.settings.broker
        self._ext = {PropertyKey.MSG_REGION: b.region_id,
                     PropertyKey.TRACE_SWITCH: "true" if b.trace_on else "false"}

    # ---- responders ------------------------------------------------------------------------------

    @SendMessage.responder
    def send_message(self, header: SendMessageRequestHeader, body: bytes | None,
                     context: RequestContext) -> Any:
        return self._process(header, body, context, batch=bool(header.batch))

    @SendMessageV2.responder
    @SendBatchMessage.responder
    def send_message_v2(self, header: Any, body: bytes | None, context: RequestContext) -> Any:
        v1 = header.to_v1()
        batch = context.request is not None and context.request.code == SendBatchMessage.code
        return self._process(v1, body, context, batch=batch or bool(v1.batch))

    # ---- the send path ---------------------------------------------------------------------------

    @ConsumerSendMsgBack.responder
    def consumer_send_msg_back(self, header: ConsumerSendMsgBackRequestHeader, body: Any,
                               context: RequestContext) -> Any:
        """Java ``consumerSendMsgBack``: the message at commit-log offset ``header.offset`` goes
        to ``%RETRY%group`` with DELAY = 3 + reconsumeTimes (or the requested level), or to
        ``%DLQ%group`` once its reconsume times reach the budget; the put hook then parks a
        delayed one in SCHEDULE_TOPIC_XXXX."""
        broker = self.broker
        group = header.group or ""
        sub = broker.subscription_group_manager.find(group)
        if sub is None:
            return Response(code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                            remark=f"subscription group not exist, {group} {APPLY_TOPIC_TIP}")
        bcfg = broker.settings.broker
        if not bcfg.broker_permission & PermName.PERM_WRITE:
            return Response(code=ResponseCode.NO_PERMISSION,
                            remark=f"the broker[{bcfg.broker_ip1}] sending message is forbidden")
        if sub.retry_queue_nums <= 0:
            return Response(code=ResponseCode.SUCCESS)
        topics = broker.topic_config_manager
        rw = int(PermName.PERM_READ | PermName.PERM_WRITE)
        new_topic = RETRY_PREFIX + group
        queue_id = self._random.randrange(sub.retry_queue_nums)
        cfg = topics.create_in_send_back(new_topic, sub.retry_queue_nums, rw,
                                         topic_sys_flag=0x2 if header.unit_mode else 0)
        if cfg is None:
            return Response(code=ResponseCode.SYSTEM_ERROR, remark=f"topic[{new_topic}] not exist")
        if not cfg.perm & PermName.PERM_WRITE:
            return Response(code=ResponseCode.NO_PERMISSION,
                            remark=f"the topic[{new_topic}] sending message is forbidden")
        offset = header.offset or 0
        stored = broker.store.look_message_by_offset(offset) if offset >= 0 else None
        if stored is None:
            return Response(code=ResponseCode.SYSTEM_ERROR, remark=f"look message by offset failed, {offset}")
        props = stored.properties
        props.setdefault(PropertyKey.RETRY_TOPIC, stored.topic)
        props[PropertyKey.WAIT_STORE_MSG_OK] = "false"
        delay = header.delay_level or 0
        max_times = sub.retry_max_times
        version = context.request.version if context.request is not None else 0
        if version >= _V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if stored.reconsume_times >= max_times or delay < 0:
            if broker.metrics.enabled:
                broker.metrics.record_dlq(group, header.origin_topic or "")
            new_topic = DLQ_PREFIX + group
            queue_id = self._random.randrange(DLQ_NUMS_PER_GROUP)
            if topics.create_in_send_back(new_topic, DLQ_NUMS_PER_GROUP, rw) is None:
                return Response(code=ResponseCode.SYSTEM_ERROR, remark=f"topic[{new_topic}] not exist")
            props[PropertyKey.DELAY_TIME_LEVEL] = "0"
        else:
            props[PropertyKey.DELAY_TIME_LEVEL] = str(delay if delay != 0 else 3 + stored.reconsume_times)
        if not props.get(PropertyKey.ORIGIN_MESSAGE_ID, "").strip():
            # The store's MessageExt id: the offset message id of the first message.
            props[PropertyKey.ORIGIN_MESSAGE_ID] = stored.offset_msg_id
        inner = MessageExt(
            topic=new_topic, body=stored.body, flag=stored.flag, properties=hashmap_ordered(props),
            queue_id=queue_id, sys_flag=stored.sys_flag, born_timestamp=stored.born_timestamp,
            born_host=stored.born_host, store_host=broker.store_host,
            reconsume_times=stored.reconsume_times + 1)
        result = broker.store.async_put_message(inner, wait_store=False).result()  # never waits
        if result.status is not PutMessageStatus.PUT_OK:
            return Response(code=ResponseCode.SYSTEM_ERROR, remark=result.status.name)
        return Response(code=ResponseCode.SUCCESS)

    def _refusal(self, code: int, remark: str | None) -> Response[Any, Any]:
        return Response(header=dict(self._ext), code=code, remark=remark)

    def _process(self, h: SendMessageRequestHeader, body: bytes | None, context: RequestContext,
                 *, batch: bool) -> Any:
        broker = self.broker
        start = broker.settings.broker.start_accept_send_request_time_stamp
        if start and broker.now_ms() < start:
            return self._refusal(ResponseCode.SYSTEM_ERROR, "broker unable to service, until "
                                 f"{start}")
        try:
            topic_config = self._msg_check(h, context)
            if batch:
                msg = self._batch_message(h, body, context, topic_config)
            else:
                msg = self._single_message(h, body, context, topic_config)
            # Answered with the queue the message was sent to, even when the put hook parks it
            # in SCHEDULE_TOPIC_XXXX or the timer topic (Java answers queueIdInt).
            queue_id = msg.queue_id
            outcome = broker.store.put_listened(msg, batch=batch)
        except _Refused as r:
            return self._refusal(r.code, r.remark)
        if type(outcome) is not GroupCommitRequest:
            return self._answer(outcome, msg, queue_id)
        # SYNC_FLUSH: the PUT_OK answer now (Java's FLUSH_DISK_TIMEOUT one differs only in its
        # code), sent when the flush covered the message (_release_flushed)
        held = HeldResponse(self._answer(outcome.result, msg, queue_id))
        outcome.token = held
        return held

    def _msg_check(self, h: SendMessageRequestHeader, context: RequestContext) -> Any:
        broker = self.broker
        topics = broker.topic_config_manager
        topic = h.topic
        bperm = broker.settings.broker.broker_permission
        if not bperm & PermName.PERM_WRITE and topics.is_order_topic(topic):
            raise _Refused(ResponseCode.NO_PERMISSION,
                           f"the broker[{broker.settings.broker.broker_ip1}] sending message is forbidden")
        invalid = validate_topic(topic)
        if invalid is not None:
            raise _Refused(ResponseCode.INVALID_PARAMETER, invalid)
        assert topic is not None
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise _Refused(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        cfg = topics.select(topic)
        if cfg is None:
            sys_flag = 0
            if h.unit_mode:
                sys_flag = 0x2 if topic.startswith(RETRY_PREFIX) else 0x1
            self.log.warn("the topic {t} not exist, producer: {p}", t=topic, p=context.peer)
            cfg = topics.create_in_send(topic, h.default_topic, context.peer, h.default_topic_queue_nums,
                                        sys_flag)
            if cfg is None and topic.startswith(RETRY_PREFIX):
                cfg = topics.create_in_send_back(topic, 1, int(PermName.PERM_READ | PermName.PERM_WRITE),
                                                 topic_sys_flag=sys_flag)
            if cfg is None:
                raise _Refused(ResponseCode.TOPIC_NOT_EXIST,
                               f"topic[{topic}] not exist, apply first please!{APPLY_TOPIC_TIP}")
        queue_id = h.queue_id if h.queue_id is not None else 0
        valid = max(cfg.write_queue_nums, cfg.read_queue_nums)
        if queue_id >= valid:
            raise _Refused(ResponseCode.INVALID_PARAMETER,
                           f"request queueId[{queue_id}] is illegal, {_topic_config_str(cfg)} "
                           f"Producer: {context.peer}")
        return cfg

    def check_message(self, h: SendMessageRequestHeader, context: RequestContext) -> Any:
        """``msgCheck`` for the other processors that store what clients send (replies): the
        topic's config, or the refusal (a Response) to answer with."""
        try:
            return self._msg_check(h, context)
        except _Refused as r:
            return self._refusal(r.code, r.remark)

    def _queue_id(self, h: SendMessageRequestHeader, cfg: Any) -> int:
        queue_id = h.queue_id if h.queue_id is not None else 0
        if queue_id < 0:
            nums = cfg.write_queue_nums
            queue_id = self._random.randrange(99_999_999) % nums if nums > 0 else 0
        return queue_id

    def _base_message(self, h: SendMessageRequestHeader, body: bytes | None, context: RequestContext,
                      cfg: Any, properties: dict[str, str]) -> MessageExt:
        sys_flag = h.sys_flag or 0
        if cfg.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        return MessageExt(
            topic=h.topic or "",
            body=body if body is not None else None,  # type: ignore[arg-type]
            flag=h.flag or 0,
            properties=properties,
            queue_id=self._queue_id(h, cfg),
            sys_flag=sys_flag,
            born_timestamp=h.born_timestamp or 0,
            born_host=peer_host(context.peer),
            store_host=self.broker.store_host,
            reconsume_times=h.reconsume_times or 0,
        )

    def _single_message(self, h: SendMessageRequestHeader, body: bytes | None, context: RequestContext,
                        cfg: Any) -> MessageExt:
        props = decode_properties(h.properties)
        props.update(self._ext)  # Java's buildMsgContext stores MSG_REGION and TRACE_ON too
        props.pop(PropertyKey.POP_CK, None)  # clearReservedProperties
        msg = self._base_message(h, body, context, cfg, props)
        self._retry_and_dlq(h, msg, context)
        if not props.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            props[PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self.broker.next_uniq_id()
        props[PropertyKey.CLUSTER] = self.broker.settings.broker.broker_cluster_name
        prepared = (props.get(PropertyKey.TRANSACTION_PREPARED, "").lower() == "true"
                    and not (msg.reconsume_times > 0 and msg.delay_time_level > 0))
        if prepared:
            if self.broker.settings.broker.reject_transaction_message:
                raise _Refused(ResponseCode.NO_PERMISSION,
                               f"the broker[{self.broker.settings.broker.broker_ip1}] sending transaction "
                               "message is forbidden")
            self._to_half_message(msg)
        msg.properties = hashmap_ordered(msg.properties)
        return msg

    def _to_half_message(self, msg: MessageExt) -> None:
        """Java ``TransactionalMessageBridge.parseHalfMessageInner``: a prepared message is stored
        in the half topic, its real topic and queue kept in properties."""
        props = msg.properties
        props[PropertyKey.REAL_TOPIC] = msg.topic
        props[PropertyKey.REAL_QUEUE_ID] = str(msg.queue_id)
        props[PropertyKey.TRANSACTION_ID] = props.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        msg.sys_flag &= ~_TRAN_MASK
        msg.topic = TRANS_HALF_TOPIC
        msg.queue_id = 0

    def _retry_and_dlq(self, h: SendMessageRequestHeader, msg: MessageExt, context: RequestContext) -> None:
        """Java ``handleRetryAndDLQ``: a send to ``%RETRY%group`` past the group's retry budget
        goes to ``%DLQ%group``."""
        topic = h.topic or ""
        if not topic.startswith(RETRY_PREFIX):
            return
        group = topic[len(RETRY_PREFIX):]
        sub = self.broker.subscription_group_manager.find(group)
        if sub is None:
            raise _Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                           f"subscription group not exist, {group} {APPLY_TOPIC_TIP}")
        max_times = sub.retry_max_times
        version = context.request.version if context.request is not None else 0
        if version >= _V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        # A group holding live queue locks consumes orderly: its retries go to the DLQ at once.
        ordered = not self.broker.rebalance_lock_manager.is_lock_all_expired(group)
        if (h.reconsume_times or 0) > max_times or ordered:
            # Java's msg.setDelayTimeLevel(0) is overwritten by the properties set afterwards:
            # the DLQ record keeps DELAY=-1.
            msg.properties[PropertyKey.DELAY_TIME_LEVEL] = "-1"
            if self.broker.metrics.enabled:  # Java labels it with the producer group and topic
                self.broker.metrics.record_dlq(h.producer_group or "", topic)
            dlq = DLQ_PREFIX + group
            cfg = self.broker.topic_config_manager.create_in_send_back(
                dlq, DLQ_NUMS_PER_GROUP, int(PermName.PERM_READ | PermName.PERM_WRITE))
            if cfg is None:
                raise _Refused(ResponseCode.SYSTEM_ERROR, f"topic[{dlq}] not exist")
            msg.topic = dlq
            msg.queue_id = self._random.randrange(99_999_999) % DLQ_NUMS_PER_GROUP

    def _batch_message(self, h: SendMessageRequestHeader, body: bytes | None, context: RequestContext,
                       cfg: Any) -> MessageExt:
        topic = h.topic or ""
        if len(topic) > 127:
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}")
        if topic.startswith(RETRY_PREFIX):
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        props = decode_properties(h.properties)
        props.update(self._ext)
        props.pop(PropertyKey.POP_CK, None)
        props[PropertyKey.CLUSTER] = self.broker.settings.broker.broker_cluster_name
        return self._base_message(h, body, context, cfg, hashmap_ordered(props))

    # ---- the answer ------------------------------------------------------------------------------

    _id_prefix: tuple[tuple[str, int], str] | None = None

    def _msg_ids(self, offsets: tuple[int, ...], store_host: tuple[str, int]) -> str:
        """The offset message ids, comma-joined as Java's ``msgIdSupplier`` (the host part once)."""
        cached = self._id_prefix
        if cached is None or cached[0] != store_host:
            prefix = create_offset_msg_id(store_host, 0)[:-16]
            cached = self._id_prefix = (store_host, prefix)
        prefix = cached[1]
        return ",".join(f"{prefix}{o:016X}" for o in offsets)

    def _answer(self, result: PutMessageResult, msg: MessageExt, queue_id: int) -> Response[Any, Any]:
        status = result.status
        code = _OK_CODES.get(status)
        if code is None:
            if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
                return self._refusal(
                    ResponseCode.MESSAGE_ILLEGAL,
                    "the message is illegal, maybe msg body or properties length not matched. msg body "
                    f"length limit {self.broker.settings.store.max_message_size}B, msg properties "
                    "length limit 32KB.")
            if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                return self._refusal(
                    ResponseCode.SERVICE_NOT_AVAILABLE,
                    "service not available now. It may be caused by one of the following reasons: the "
                    f"broker's disk is full [{self.broker.disk_util()}], messages are put to the slave, "
                    "message store has been shut down, etc.")
            timer = self._timer_refusal(status)
            if timer is not None:
                return timer
            code, remark = _FAILED_REMARKS.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
            return self._refusal(code, remark)
        append = result.append_result
        assert append is not None
        self.broker.stats.on_put(msg.topic, append.msg_num, append.wrote_bytes)
        self.broker.stats_manager.on_put(msg.topic, msg.queue_id, append.msg_num, append.wrote_bytes)
        metrics = self.broker.metrics
        if metrics.enabled:
            metrics.on_put(msg.topic, message_type(msg.properties), append.msg_num, append.wrote_bytes)
        if msg.topic == TRANS_HALF_TOPIC and status is PutMessageStatus.PUT_OK:
            metrics.record_half(msg.properties.get(PropertyKey.REAL_TOPIC, ""), 1)
        header = dict(self._ext)
        header["msgId"] = self._msg_ids(append.record_offsets, append.store_host)
        header["queueId"] = str(queue_id)
        header["queueOffset"] = str(append.logics_offset)
        uniq = msg.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq is not None:
            header["transactionId"] = uniq
        return Response(header=header, code=code)


    def _timer_refusal(self, status: PutMessageStatus) -> Response[Any, Any] | None:
        extras = self.broker.settings.store_extras
        if status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:
            return self._refusal(
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal, the delay time should not be bigger than the max delay "
                f"{extras.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger "
                "than the current time")
        if status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL:
            n = extras.timer_congest_num_each_slot
            return self._refusal(
                ResponseCode.SYSTEM_ERROR,
                f"timer message is under flow control, max num limit is {n * 2} or the current value is "
                f"greater than {n} and less than {n * 2}, trigger random flow control")
        if status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE:
            return self._refusal(
                ResponseCode.SYSTEM_ERROR,
                "accurate timer message is not enabled, timerWheelEnable is "
                f"{str(extras.timer_wheel_enable).lower()}")
        return None


def _release_flushed(done: list[tuple[GroupCommitRequest, PutMessageStatus]]) -> None:
    """On the reactor: a group-commit round's (or the flush watcher's) completions."""
    for req, status in done:
        held = req.token
        if type(held) is HeldResponse:
            if status is PutMessageStatus.PUT_OK:
                held.release()
            else:
                held.release(_OK_CODES.get(status, ResponseCode.SYSTEM_ERROR))


def _topic_config_str(cfg: Any) -> str:
    """Java ``TopicConfig.toString``."""
    ftype = cfg.topic_filter_type.name if cfg.topic_filter_type is not None else "null"
    return (f"TopicConfig [topicName={cfg.topic_name}, readQueueNums={cfg.read_queue_nums}, "
            f"writeQueueNums={cfg.write_queue_nums}, perm={_perm_str(cfg.perm)}, "
            f"topicFilterType={ftype}, topicSysFlag={cfg.topic_sys_flag}, order={str(cfg.order).lower()}, "
            f"attributes={cfg.attributes or {}}]")


def _perm_str(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")
