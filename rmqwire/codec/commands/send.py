"""Sending: SEND_MESSAGE and its V2, batch and reply forms."""

from __future__ import annotations

import dataclasses

from rmqwire.codec.codes import (
    DEFAULT_VERSION,
    FLAG_ONEWAY,
    LanguageCode,
    RequestCode,
    ResponseCode,
)
from rmqwire.codec.commands.base import Command
from rmqwire.codec.frame import (
    PreparedRequest,
    RemotingCommand,
    json_quote,
    json_request_template,
)
from rmqwire.codec.header import (
    CommandHeader,
    TopicQueueRequestHeader,
    jfield,
)
from rmqwire.errors import CodecError


class SendMessageRequestHeader(TopicQueueRequestHeader):
    """SEND_MESSAGE (10), SEND_REPLY_MESSAGE (324). ``bname`` is the target broker name."""

    producer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    default_topic: str | None = jfield("String", required=True)
    default_topic_queue_nums: int | None = jfield("Integer", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    sys_flag: int | None = jfield("Integer", required=True)
    born_timestamp: int | None = jfield("Long", required=True)
    flag: int | None = jfield("Integer", required=True)
    properties: str | None = jfield("String")
    reconsume_times: int | None = jfield("Integer")
    unit_mode: bool | None = jfield("Boolean")  # 4.x: primitive boolean, always sent
    batch: bool | None = jfield("Boolean")  # 4.x: primitive boolean, always sent
    max_reconsume_times: int | None = jfield("Integer")

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """Java ``createSendMessageRequestHeaderV2``: ``bname`` becomes ``n``; ns/nsd/oway/lo drop.

        ``k``/``m`` come from Java's ``isUnitMode()``/``isBatch()``, which turn null into false, so
        V2 always carries them. Unknown extra keys are carried over (ACL keys etc.), except a..n.
        """
        return SendMessageRequestHeaderV2(
            a=self.producer_group,
            b=self.topic,
            c=self.default_topic,
            d=self.default_topic_queue_nums,
            e=self.queue_id,
            f=self.sys_flag,
            g=self.born_timestamp,
            h=self.flag,
            i=self.properties,
            j=self.reconsume_times,
            k=bool(self.unit_mode),
            l=self.max_reconsume_times,  # noqa: E741 - Java's name
            m=bool(self.batch),
            n=self.bname,
            extra={k: v for k, v in self.extra.items() if k not in _V2_WIRE},
        )


class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325).

    Java's class inherits the rpc fields, but its FastCodesHeader codec reads and writes only a..n,
    so here any other key (``bname`` included) stays in ``extra``.
    """

    a: str | None = jfield("String", required=True)  # producerGroup
    b: str | None = jfield("String", required=True)  # topic
    c: str | None = jfield("String", required=True)  # defaultTopic
    d: int | None = jfield("Integer", required=True)  # defaultTopicQueueNums
    e: int | None = jfield("Integer", required=True)  # queueId
    f: int | None = jfield("Integer", required=True)  # sysFlag
    g: int | None = jfield("Long", required=True)  # bornTimestamp
    h: int | None = jfield("Integer", required=True)  # flag
    i: str | None = jfield("String")  # properties
    j: int | None = jfield("Integer")  # reconsumeTimes
    k: bool | None = jfield("Boolean")  # unitMode
    l: int | None = jfield("Integer")  # noqa: E741 - maxReconsumeTimes
    m: bool | None = jfield("Boolean")  # batch
    n: str | None = jfield("String")  # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        """Java ``createSendMessageRequestHeaderV1`` (what the broker does with every V2 send)."""
        return SendMessageRequestHeader(
            producer_group=self.a,
            topic=self.b,
            default_topic=self.c,
            default_topic_queue_nums=self.d,
            queue_id=self.e,
            sys_flag=self.f,
            born_timestamp=self.g,
            flag=self.h,
            properties=self.i,
            reconsume_times=self.j,
            unit_mode=self.k,
            max_reconsume_times=self.l,
            batch=self.m,
            bname=self.n,
            extra={
                k: v
                for k, v in self.extra.items()
                if k not in SendMessageRequestHeader.__wire_names__
            },
        )


_V2_WIRE = frozenset("abcdefghijklmn")


class SendMessageResponseHeader(CommandHeader):
    """Response to every send code. The broker also puts MSG_REGION and TRACE_ON (kept in extra)."""

    msg_id: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    queue_offset: int | None = jfield("Long", required=True)
    transaction_id: str | None = jfield("String")
    batch_uniq_id: str | None = jfield("String")  # 5.x
    recall_handle: str | None = jfield("String")  # 5.x


class ReplyMessageRequestHeader(TopicQueueRequestHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> requesting producer."""

    producer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    default_topic: str | None = jfield("String", required=True)
    default_topic_queue_nums: int | None = jfield("Integer", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    sys_flag: int | None = jfield("Integer", required=True)
    born_timestamp: int | None = jfield("Long", required=True)
    flag: int | None = jfield("Integer", required=True)
    properties: str | None = jfield("String")
    reconsume_times: int | None = jfield("Integer")
    unit_mode: bool = jfield("boolean")
    born_host: str | None = jfield("String", required=True)
    store_host: str | None = jfield("String", required=True)
    store_timestamp: int = jfield("long", required=True)


# ---- commands -----------------------------------------------------------------------------------

#: Java's send path treats these as results (SendStatus), not exceptions.
_SEND_STATUSES = frozenset(
    {
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)


class SendMessage(Command):
    code = RequestCode.SEND_MESSAGE
    header = SendMessageRequestHeader
    body = bytes
    response_header = SendMessageResponseHeader
    statuses = _SEND_STATUSES


class SendMessageV2(SendMessage):
    """What Java clients send: the V2 header with single-letter keys."""

    code = RequestCode.SEND_MESSAGE_V2
    header = SendMessageRequestHeaderV2


class SendBatchMessage(SendMessageV2):
    """Body: ``rmqwire.codec.message.encode_batch``."""

    code = RequestCode.SEND_BATCH_MESSAGE


class SendReplyMessage(SendMessage):
    code = RequestCode.SEND_REPLY_MESSAGE


class SendReplyMessageV2(SendMessageV2):
    code = RequestCode.SEND_REPLY_MESSAGE_V2


class PushReplyMessageToClient(Command):
    """Broker -> requesting producer: the reply of a request-reply message."""

    code = RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT
    header = ReplyMessageRequestHeader
    body = bytes


#: The fields of a V2 send that change from one send to the next to one topic and broker
#: (queueId, sysFlag, bornTimestamp, flag: integers), then its properties (text).
SEND_OPEN_FIELDS = ("e", "f", "g", "h")
SEND_TEXT_FIELDS = ("i",)
_INT32 = (-(2**31), 2**31 - 1)


class SendRequestTemplate:
    """A topic's V2 sends to one broker, framed once: the typed request (``command.request`` of
    ``header``) as a JSON template whose queue id, sysFlag, born timestamp, flag, properties, and
    then body and opaque, are filled per send; any other change of the header (the group, the
    topic, the broker, reconsume fields, ``extra``) needs another template. ``oneway``: the
    requests carry the ONEWAY flag (a oneway send)."""

    __slots__ = ("command", "header", "language", "version", "oneway", "_template")

    def __init__(self, command: type[SendMessageV2], header: SendMessageRequestHeaderV2, *,
                 language: LanguageCode = LanguageCode.PYTHON, version: int = DEFAULT_VERSION,
                 oneway: bool = False) -> None:
        self.command = command
        self.header = header
        self.language = language
        self.version = version
        self.oneway = oneway
        cmd = command.request(header, language=language, version=version)
        if oneway:
            cmd = dataclasses.replace(cmd, flag=cmd.flag | FLAG_ONEWAY)
        template, order = json_request_template(cmd, SEND_OPEN_FIELDS, SEND_TEXT_FIELDS)
        if order != SEND_OPEN_FIELDS + SEND_TEXT_FIELDS:
            raise CodecError(f"send template fields out of order: {order}")  # `extra` put one first
        self._template = template

    def request(self, queue_id: int, sys_flag: int, born_timestamp: int, flag: int,
                properties: str, body: bytes | None, quoted: bytes | None = None) -> SendPrepared:
        """The send's request; ValueError (TypeError) for a value the typed header would refuse
        (out of its Java type's range, or not an int or str). ``quoted``: ``properties`` as the
        frame writes it (``json_quote(properties).encode()``), when the caller has it."""
        lo, hi = _INT32
        if not (type(queue_id) is int and lo <= queue_id <= hi and type(sys_flag) is int
                and lo <= sys_flag <= hi and type(flag) is int and lo <= flag <= hi
                and type(born_timestamp) is int and -(2**63) <= born_timestamp < 2**63):
            raise ValueError("send template: queue id, sysFlag and flag must be int32s, the born "
                             "timestamp an int64")
        if quoted is None:
            quoted = json_quote(properties).encode()
        return SendPrepared(self, (queue_id, sys_flag, born_timestamp, flag, quoted), properties, body)

    def typed(self, queue_id: int, sys_flag: int, born_timestamp: int, flag: int, properties: str,
              body: bytes | None) -> RemotingCommand:
        """The typed request a ``request`` of these values stands for."""
        header = dataclasses.replace(self.header, e=queue_id, f=sys_flag, g=born_timestamp, h=flag,
                                     i=properties)
        cmd = self.command.request(header, body, language=self.language, version=self.version)
        return dataclasses.replace(cmd, flag=cmd.flag | FLAG_ONEWAY) if self.oneway else cmd


class SendPrepared(PreparedRequest):
    """A ``SendRequestTemplate``'s request: its typed form (``command()``) is made only when a
    connection needs it (RPC hooks, a ROCKETMQ header), so no callable is built per send."""

    __slots__ = ("send_template", "properties")

    def __init__(self, send_template: SendRequestTemplate, values: tuple[int | bytes, ...],
                 properties: str, body: bytes | None) -> None:
        self.code = send_template.command.code
        self.template = send_template._template
        self.values = values
        self.body = body
        self.send_template = send_template
        self.properties = properties

    def command(self) -> RemotingCommand:  # type: ignore[override]
        queue_id, sys_flag, born_timestamp, flag = self.values[:4]
        return self.send_template.typed(queue_id, sys_flag, born_timestamp, flag,  # type: ignore[arg-type]
                                        self.properties, self.body)
