"""Client heartbeats and unregistration, with the subscription bodies they carry."""

from __future__ import annotations

from dataclasses import dataclass

from rmqwire.codec.body import (
    BOOL,
    INT,
    LONG,
    STRING,
    FastjsonBody,
    body_of,
    enum_of,
    list_of,
    prop,
)
from rmqwire.codec.codes import RequestCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.header import (
    CommandHeader,
    RpcRequestHeader,
    jfield,
)
from rmqwire.codec.java import now_ms
from rmqwire.codec.message import java_string_hash
from rmqwire.errors import MQClientError
from rmqwire.model import (
    ConsumeFromWhere,
    ConsumeType,
    ExpressionType,
    MessageModel,
)


class HeartbeatRequestHeader(RpcRequestHeader):
    """HEART_BEAT (34): rpc fields only (4.9.x sends no header at all)."""


class UnregisterClientRequestHeader(RpcRequestHeader):
    client_id: str | None = jfield("String", required=True, wire="clientID")
    producer_group: str | None = jfield("String")
    consumer_group: str | None = jfield("String")


class UnregisterClientResponseHeader(CommandHeader):
    pass


@dataclass
class SubscriptionData(FastjsonBody):
    # filterClassSource is @JSONField(serialize=false) in Java and unused since 4.x: not declared.
    class_filter_mode: bool = prop("classFilterMode", BOOL, False)
    topic: str | None = prop("topic", STRING)
    sub_string: str | None = prop("subString", STRING)
    tags_set: list[str] | None = prop("tagsSet", list_of(STRING), factory=list)
    #: String.hashCode() of each tag (int32), parallel to tags_set.
    code_set: list[int] | None = prop("codeSet", list_of(INT), factory=list)
    sub_version: int = prop("subVersion", LONG, factory=now_ms)
    expression_type: str | None = prop("expressionType", STRING, ExpressionType.TAG)


@dataclass
class ProducerData(FastjsonBody):
    group_name: str | None = prop("groupName", STRING)


@dataclass
class ConsumerData(FastjsonBody):
    group_name: str | None = prop("groupName", STRING)
    consume_type: ConsumeType | None = prop("consumeType", enum_of(ConsumeType))
    message_model: MessageModel | None = prop("messageModel", enum_of(MessageModel))
    consume_from_where: ConsumeFromWhere | None = prop(
        "consumeFromWhere", enum_of(ConsumeFromWhere)
    )
    subscription_data_set: list[SubscriptionData] | None = prop(
        "subscriptionDataSet", list_of(body_of(SubscriptionData)), factory=list
    )
    unit_mode: bool = prop("unitMode", BOOL, False)


@dataclass
class HeartbeatData(FastjsonBody):
    client_id: str | None = prop("clientID", STRING)
    producer_data_set: list[ProducerData] | None = prop(
        "producerDataSet", list_of(body_of(ProducerData)), factory=list
    )
    consumer_data_set: list[ConsumerData] | None = prop(
        "consumerDataSet", list_of(body_of(ConsumerData)), factory=list
    )
    heartbeat_fingerprint: int = prop("heartbeatFingerprint", INT, 0)  # 5.x
    without_sub: bool = prop("withoutSub", BOOL, False)  # 5.x (Java getter isWithoutSub)


def build_subscription_data(
    topic: str, expression: str | None, expression_type: str | None = ExpressionType.TAG
) -> SubscriptionData:
    """Java ``FilterAPI.build``: parse a tag expression (``"TagA || TagB"``, ``"*"``).

    For TAG (or None): an empty expression or ``*`` subscribes to everything; otherwise the
    expression is split on ``||``, each tag trimmed, empties dropped, and tag + hashCode added.
    Other types (SQL92) keep the expression verbatim and must not be empty.
    """
    if expression_type is None or expression_type == ExpressionType.TAG:
        sd = SubscriptionData(topic=topic, sub_string=expression)
        if not expression or expression == "*":
            sd.sub_string = "*"
            return sd
        pieces = expression.split("||")
        while pieces and pieces[-1] == "":
            pieces.pop()  # Java's split drops trailing empty strings
        if not pieces:
            raise MQClientError(f"tag expression {expression!r} has no tags")
        for piece in pieces:
            tag = piece.strip()
            # Java adds to HashSets: a repeated tag (or hash code) is kept once.
            if tag and tag not in sd.tags_set:
                sd.tags_set.append(tag)
                code = java_string_hash(tag)
                if code not in sd.code_set:
                    sd.code_set.append(code)
        return sd
    if not expression:
        raise MQClientError(f"a {expression_type} expression cannot be empty")
    return SubscriptionData(topic=topic, sub_string=expression, expression_type=expression_type)


# ---- commands -----------------------------------------------------------------------------------


class HeartBeat(Command):
    code = RequestCode.HEART_BEAT
    header = HeartbeatRequestHeader
    body = HeartbeatData


class UnregisterClient(Command):
    code = RequestCode.UNREGISTER_CLIENT
    header = UnregisterClientRequestHeader
    response_header = UnregisterClientResponseHeader
