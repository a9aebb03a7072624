"""The broker's requests to consumers (Java ``ClientRemotingProcessor``, consumer side), answered
on the connection they came in on:

- NOTIFY_CONSUMER_IDS_CHANGED (oneway): every consumer of this client rebalances now;
- RESET_CONSUMER_CLIENT_OFFSET (oneway): the group's push consumer moves to the given offsets;
- GET_CONSUMER_STATUS_FROM_CLIENT: the group's offsets of a topic;
- GET_CONSUMER_RUNNING_INFO: a ConsumerRunningInfo that ``mqadmin consumerStatus`` prints
  (with the stacks of this process's threads when ``jstackEnable``);
- CONSUME_MESSAGE_DIRECTLY: run the group's listener on one message and report the outcome.

A group this client does not have gets 1 SYSTEM_ERROR ``The Consumer Group <g> not exist in this
consumer``, as from Java. Consumers are found by group in the client instance's member table.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import threading
import traceback
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from rmqwire.client.instance import ClientInstance
from rmqwire.codec.codes import ResponseCode, version_name
from rmqwire.codec.commands import Response
from rmqwire.codec.commands.consumer import (
    CheckClientConfig,
    CheckClientRequestBody,
    ConsumeMessageDirectly,
    ConsumeMessageDirectlyResult,
    GetConsumerRunningInfo,
    GetConsumerStatusBody,
    GetConsumerStatusFromClient,
    NotifyConsumerIdsChanged,
    ResetOffsetBodyForClient,
)
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.commands.offset import ResetConsumerClientOffset
from rmqwire.codec.message import decode_message
from rmqwire.errors import MQClientError, for_code
from rmqwire.model import ExpressionType
from rmqwire.remoting.dispatcher import Processor, RequestContext

__all__ = ["ConsumerClientProcessor", "check_client_in_broker", "running_info_properties"]


def _not_exist(group: str | None) -> Exception:
    return for_code(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")


class ConsumerClientProcessor(Processor):
    log = Logger()

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    def _consumer(self, group: str | None) -> Any:
        return self.instance.consumers.get(group) if group is not None else None

    @NotifyConsumerIdsChanged.responder
    def notify_consumer_ids_changed(self, header: Any, body: Any, context: RequestContext) -> None:
        self.log.info("receive broker's notification[{peer}], the consumer group: {group} changed, "
                      "rebalance immediately", peer=context.peer, group=header.consumer_group)
        for consumer in list(self.instance.consumers.values()):
            wake = getattr(consumer, "rebalance_immediately", None)
            if wake is not None:
                wake()

    @ResetConsumerClientOffset.responder
    def reset_offset(self, header: Any, body: bytes | None, context: RequestContext) -> Deferred[None] | None:
        self.log.info("invoke reset offset operation from broker. brokerAddr={peer}, topic={topic}, "
                      "group={group}, timestamp={ts}", peer=context.peer, topic=header.topic,
                      group=header.group, ts=header.timestamp)
        offsets = ResetOffsetBodyForClient.decode(body).offset_table if body else {}
        consumer = self._consumer(header.group)
        reset = getattr(consumer, "reset_offset", None)
        if reset is None:
            self.log.info("[reset-offset] consumer does not exist. group={group}", group=header.group)
            return None
        return reset(header.topic, dict(offsets or {})).addCallback(lambda _: None)

    @GetConsumerStatusFromClient.responder
    def get_consumer_status(self, header: Any, body: Any, context: RequestContext) -> bytes:
        consumer = self._consumer(header.group)
        status = getattr(consumer, "consumer_status", None)
        table = status(header.topic) if status is not None else {}
        return GetConsumerStatusBody(message_queue_table=table).encode()

    @GetConsumerRunningInfo.responder
    def get_consumer_running_info(self, header: Any, body: Any, context: RequestContext) -> Any:
        consumer = self._consumer(header.consumer_group)
        if consumer is None:
            raise _not_exist(header.consumer_group)
        info = consumer.consumer_running_info()
        props = info.properties
        props["PROP_NAMESERVER_ADDR"] = "".join(f"{a};" for a in self.instance.namesrv_addrs)
        props["PROP_CONSUME_TYPE"] = consumer.consume_type().name
        props["PROP_CLIENT_VERSION"] = version_name(self.instance.remoting.config.version)
        if header.jstack_enable:
            info.jstack = python_stacks()
        return Response(body=info)

    @ConsumeMessageDirectly.responder
    def consume_message_directly(self, header: Any, body: bytes | None, context: RequestContext) -> Any:
        consumer = self._consumer(header.consumer_group)
        direct = getattr(consumer, "consume_message_directly", None)
        if direct is None:
            raise _not_exist(header.consumer_group)
        msg = decode_message(body or b"")

        def encode(result: dict[str, Any]) -> bytes:
            cr = result.get("consumeResult")
            return ConsumeMessageDirectlyResult(
                order=result.get("order", False), auto_commit=result.get("autoCommit", True),
                consume_result=cr.name if isinstance(cr, enum.Enum) else cr,
                remark=result.get("remark"), spent_time_mills=result.get("spentTimeMills", 0),
            ).encode()

        return direct(msg, header.broker_name).addCallback(encode)


def python_stacks() -> str:
    """Every thread's stack, for ``jstackEnable`` (Java prints ``UtilAll.jstack``)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"Thread: {names.get(ident, ident)}")
        out.extend("    " + line.rstrip() for line in traceback.format_stack(frame))
        out.append("")
    return "\n".join(out)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def running_info_properties(consumer: Any, java_class: str) -> dict[str, Any]:
    """The consumer's settings under Java's property names, as ``MixAll.object2Properties`` of
    the Java consumer object gives them (every value a string)."""
    props: dict[str, Any] = {}
    for obj in (consumer.client_config, consumer.config):
        for f in dataclasses.fields(obj):
            if f.name in ("secret_key", "security_token", "tls"):
                continue
            v = getattr(obj, f.name)
            if v is None:
                continue
            if isinstance(v, enum.Enum):
                v = v.name
            elif isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, tuple):
                v = ";".join(str(x) for x in v)
            props[_camel(f.name)] = str(v)
    props["consumerGroup"] = consumer.group
    props["namesrvAddr"] = ";".join(consumer.client_config.namesrv_addrs)
    props["clientIP"] = consumer.client_config.client_ip or ""
    props["allocateMessageQueueStrategy"] = type(consumer.strategy).__name__
    props["clientClass"] = java_class
    props.pop("allocateStrategy", None)
    return props


def check_client_in_broker(instance: ClientInstance, group: str,
                           subscriptions: list[SubscriptionData]) -> Deferred[None]:
    """Java ``checkClientInBroker``: a non-TAG subscription (SQL92) is checked with a broker of
    its topic (CHECK_CLIENT_CONFIG); a broker that cannot filter so fails the start."""
    calls = []
    for sd in subscriptions:
        if sd.expression_type in (None, ExpressionType.TAG) or sd.topic is None:
            continue
        addr = instance.routes.find_broker_addr_by_topic(sd.topic, instance.rng)
        if addr is None:
            continue
        body = CheckClientRequestBody(client_id=instance.client_id, group=group, subscription_data=sd)

        def failed(f: Any, sd: SubscriptionData = sd) -> None:
            code = getattr(f.value, "code", -1)
            raise MQClientError(f.value.remark if hasattr(f.value, "remark") else f.getErrorMessage(),
                                response_code=code) from f.value

        calls.append(instance.broker_call(addr, CheckClientConfig, body=body,
                                          timeout=instance.api_timeout).addCallbacks(lambda _: None, failed))
    if not calls:
        return defer.succeed(None)
    return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None).addErrback(
        lambda f: f.value.subFailure if isinstance(f.value, defer.FirstError) else f)
