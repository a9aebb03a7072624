"""SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2 (Java ``ReplyMessageProcessor``): the answer of a
request-reply exchange, pushed to the requesting producer.

After the send checks (``msgCheck``), the reply goes to the client named by its REPLY_TO_CLIENT
property as PUSH_REPLY_MESSAGE_TO_CLIENT (two-way, on that client's producer connection, with
PUSH_REPLY_TIME added). The answer is SUCCESS (msgId "0", queue offset 0) when the client took
it, else 1 SYSTEM_ERROR with Java's remark. With ``storeReplyMessageEnable`` (default) the reply
is also stored in its topic, as sent (no UNIQ_KEY or CLUSTER added), and a stored reply's answer
carries its offset message id and queue offset.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from rmqwire.codec.codes import LanguageCode, ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.send import (
    PushReplyMessageToClient,
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendReplyMessage,
    SendReplyMessageV2,
)
from rmqwire.codec.message import (
    MessageExt,
    PropertyKey,
    decode_properties,
    encode_properties,
    java_hashmap_order,
)
from rmqwire.remoting.dispatcher import Processor, RequestContext
from rmqwire.server.broker.processors.send import peer_host
from rmqwire.server.broker.transaction.bridge import put_message
from rmqwire.server.store import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["ReplyMessageProcessor"]

#: Java ``Broker2Client.callClient``'s timeout.
PUSH_TIMEOUT = 10.0
_STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                     PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})


class ReplyMessageProcessor(Processor):
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._random = random.Random()
        self.pushed = 0

    @SendReplyMessage.responder
    def send_reply_message(self, header: SendMessageRequestHeader, body: bytes | None,
                           context: RequestContext) -> Any:
        return self._process(header, body, context)

    @SendReplyMessageV2.responder
    def send_reply_message_v2(self, header: Any, body: bytes | None, context: RequestContext) -> Any:
        return self._process(header.to_v1(), body, context)

    def _process(self, h: SendMessageRequestHeader, body: bytes | None, context: RequestContext) -> Any:
        broker = self.broker
        b = broker.settings.broker
        ext = {PropertyKey.MSG_REGION: b.region_id, PropertyKey.TRACE_SWITCH: "true" if b.trace_on else "false"}
        start = b.start_accept_send_request_time_stamp
        if start and broker.now_ms() < start:
            return Response(header=ext, code=ResponseCode.SYSTEM_ERROR, remark=f"broker unable to service, until {start}")
        cfg = broker.send_processor.check_message(h, context)
        if isinstance(cfg, Response):
            return cfg
        queue_id = h.queue_id if h.queue_id is not None else 0
        if queue_id < 0:
            nums = cfg.write_queue_nums
            queue_id = self._random.randrange(99_999_999) % nums if nums > 0 else 0
        props = decode_properties(h.properties)
        msg = MessageExt(
            topic=h.topic or "",
            body=body if body is not None else b"",
            flag=h.flag or 0,
            properties=dict(props),
            queue_id=queue_id,
            born_timestamp=h.born_timestamp or 0,
            born_host=peer_host(context.peer),
            store_host=broker.store_host,
            reconsume_times=h.reconsume_times or 0,
        )
        d = self._push(h, msg, context)

        def pushed(push: tuple[bool, str]) -> Any:
            ok, remark = push
            header = dict(ext)
            code, answer_remark = ResponseCode.SUCCESS, None
            if ok:
                header.update(msgId="0", queueId=str(queue_id), queueOffset="0")
            else:
                code, answer_remark = ResponseCode.SYSTEM_ERROR, remark
            if not b.store_reply_message_enable:
                return Response(header=header, code=code, remark=answer_remark)
            return self._store(msg, header, queue_id).addCallback(
                lambda hdr: Response(header=hdr, code=code, remark=answer_remark))

        return d.addCallback(pushed)

    def _push(self, h: SendMessageRequestHeader, msg: MessageExt, context: RequestContext) -> Deferred[tuple[bool, str]]:
        """Java ``pushReplyMessage``: (pushed, remark when not)."""
        sender = msg.properties.get(PropertyKey.MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            self.log.warn("REPLY_TO_CLIENT is null, can not reply message")
            return defer.succeed((False, "reply message properties[REPLY_TO_CLIENT] is null"))
        channel = self.broker.producer_manager.find_channel(sender)
        if channel is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            self.log.warn(remark)
            return defer.succeed((False, remark))
        props = java_hashmap_order({**msg.properties, PropertyKey.PUSH_REPLY_TIME: str(self.broker.now_ms())}, 128)
        born_ip, born_port = peer_host(context.peer)
        store_ip, store_port = self.broker.store_host
        header = ReplyMessageRequestHeader(
            producer_group=h.producer_group, topic=h.topic, default_topic=h.default_topic,
            default_topic_queue_nums=h.default_topic_queue_nums, queue_id=h.queue_id, sys_flag=h.sys_flag,
            born_timestamp=h.born_timestamp, flag=h.flag, properties=encode_properties(props),
            reconsume_times=h.reconsume_times, unit_mode=bool(h.unit_mode),
            born_host=f"{born_ip}:{born_port}", store_host=f"{store_ip}:{store_port}",
            store_timestamp=self.broker.now_ms(),
        )
        request = PushReplyMessageToClient.request(header, msg.body, language=LanguageCode.JAVA,
                                                   version=self.broker.version)
        fail = f"push reply message to {sender}fail."  # sic: Java's remark has no space

        def answered(response: Any) -> tuple[bool, str]:
            if response.code == ResponseCode.SUCCESS:
                self.pushed += 1
                return True, ""
            self.log.warn("push reply message to <{s}> return fail, response remark: {r}", s=sender, r=response.remark)
            return False, fail

        def failed(f: Any) -> tuple[bool, str]:
            self.log.warn("push reply message to <{s}> fail. {why}", s=sender, why=f.getErrorMessage())
            return False, fail

        try:
            d = channel.invoke(request, PUSH_TIMEOUT)
        except Exception as e:
            d = defer.fail(e)
        return d.addCallbacks(answered, failed)

    def _store(self, msg: MessageExt, header: dict[str, str], queue_id: int) -> Deferred[dict[str, str]]:
        """Store the reply; a stored one's answer names it."""

        def stored(result: PutMessageResult) -> dict[str, str]:
            append = result.append_result
            if result.status not in _STORED or append is None:
                self.log.warn("process reply message, store put failed: {s}", s=result.status.name)
                return header
            self.broker.stats.on_put(msg.topic, append.msg_num, append.wrote_bytes)
            return {**header, "msgId": append.msg_id, "queueId": str(queue_id),
                    "queueOffset": str(append.logics_offset)}

        return put_message(self.broker, msg).addCallback(stored)
