"""Requests the broker makes to its clients on their own connections (Java ``Broker2Client`` and
``AdminBrokerProcessor.callConsumer``).

- ``call_consumer``: an admin's GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY forwarded to
  one consumer (by group and client id) with the admin's ext fields and body; the consumer's
  answer goes back to the admin as it is.
- ``reset_offset``: the client-side reset (``useServerSideResetOffset=false``): compute each
  queue's offset for a timestamp and push RESET_CONSUMER_CLIENT_OFFSET (oneway) to every member.
- ``get_consume_status``: GET_CONSUMER_STATUS_FROM_CLIENT to the members, their offsets by client.

Each is a Deferred of the RemotingCommand to answer with. Runs in the reactor thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from rmqwire.codec.codes import LanguageCode, ResponseCode, version_name
from rmqwire.codec.commands.consumer import (
    GetConsumerStatusBody,
    GetConsumerStatusFromClient,
    ResetOffsetBodyForClient,
)
from rmqwire.codec.commands.offset import ResetConsumerClientOffset, ResetOffsetBody
from rmqwire.codec.frame import RemotingCommand
from rmqwire.errors import RemotingTimeoutError
from rmqwire.model import MessageQueue
from rmqwire.remoting.dispatcher import exception_simple_desc

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["Broker2Client", "CALL_CLIENT_TIMEOUT"]

#: Java's fixed 5 s for calls the broker makes to a client.
CALL_CLIENT_TIMEOUT = 5.0
#: MQVersion ordinals below which a client cannot take these calls (V3_1_8_SNAPSHOT, V3_0_7_SNAPSHOT).
V3_1_8_SNAPSHOT = 62
V3_0_7_SNAPSHOT = 28


def _version_desc(ordinal: int) -> str:
    try:
        return version_name(ordinal)
    except ValueError:  # before 4.0.0: no name worth computing
        return str(ordinal)


def _answer(code: int, remark: str | None = None, body: bytes | None = None) -> RemotingCommand:
    """A response frame (the dispatcher sets its opaque, flag, language and version)."""
    return RemotingCommand(code=code, remark=remark, body=body)


class Broker2Client:
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    # ---- admin -> broker -> one consumer ---------------------------------------------------------

    def call_consumer(self, code: int, request: RemotingCommand, group: str | None,
                      client_id: str | None) -> Deferred[RemotingCommand]:
        info = self.broker.consumer_manager.get(group)
        member = None
        if info is not None:
            member = next((c for c in info.channel_info_table.values() if c.client_id == client_id), None)
        if member is None:
            return defer.succeed(_answer(ResponseCode.SYSTEM_ERROR,
                                         f"The Consumer <{group}> <{client_id}> not online"))
        if member.version < V3_1_8_SNAPSHOT:
            return defer.succeed(_answer(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{_version_desc(member.version)}> too low to finish, "
                "please upgrade it to V3_1_8_SNAPSHOT"))
        forward = RemotingCommand.request(code, dict(request.ext_fields or {}), request.body,
                                          language=LanguageCode.JAVA, version=self.broker.version)
        d = member.channel.invoke(forward, CALL_CLIENT_TIMEOUT)

        def failed(failure: Any) -> RemotingCommand:
            if failure.check(RemotingTimeoutError):
                return _answer(ResponseCode.CONSUME_MSG_TIMEOUT,
                               f"consumer <{group}> <{client_id}> Timeout: {exception_simple_desc(failure)}")
            return _answer(ResponseCode.SYSTEM_ERROR,
                           f"invoke consumer <{group}> <{client_id}> Exception: {exception_simple_desc(failure)}")

        return d.addErrback(failed)

    # ---- reset offset, the client-side way -------------------------------------------------------

    def reset_offset(self, topic: str, group: str, timestamp: int, is_force: bool) -> RemotingCommand:
        broker = self.broker
        cfg = broker.topic_config_manager.select(topic)
        if cfg is None:
            self.log.error("[reset-offset] reset offset failed, no topic in this broker. topic={t}", t=topic)
            return _answer(ResponseCode.TOPIC_NOT_EXIST,
                           f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        store, offsets = broker.store, broker.consumer_offset_manager
        name = broker.settings.broker.broker_name
        table: dict[MessageQueue, int] = {}
        for queue_id in range(cfg.write_queue_nums):
            consumer_offset = offsets.query_offset(group, topic, queue_id)
            if consumer_offset == -1:
                return _answer(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                target = store.get_max_offset_in_queue(topic, queue_id)
            else:
                target = store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            target = max(target, 0)
            table[MessageQueue(topic, name, queue_id)] = target if is_force or target < consumer_offset \
                else consumer_offset
        info = broker.consumer_manager.get(group)
        if info is None or not info.channel_info_table:
            return _answer(ResponseCode.CONSUMER_NOT_ONLINE,
                           f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                           f"Timestamp: {timestamp}")
        for member in info.channel_info_table.values():
            if member.version < V3_0_7_SNAPSHOT:
                return _answer(ResponseCode.SYSTEM_ERROR,
                               f"the client does not support this feature. version={_version_desc(member.version)}")
        push = ResetConsumerClientOffset.request(
            topic=topic, group=group, timestamp=timestamp, is_force=False,
            body=ResetOffsetBodyForClient(offset_table=table).encode(),
            language=LanguageCode.JAVA, version=broker.version)
        for member in list(info.channel_info_table.values()):
            member.channel.invoke_oneway(push).addCallbacks(
                lambda _, c=member: self.log.info(
                    "[reset-offset] reset offset success. topic={t}, group={g}, clientId={c}",
                    t=topic, g=group, c=c.client_id),
                lambda f: self.log.error("[reset-offset] reset offset exception. topic={t}, group={g}, "
                                         "error={e}", t=topic, g=group, e=f.getErrorMessage()))
        return _answer(ResponseCode.SUCCESS, body=ResetOffsetBody(offset_table=table).encode())

    # ---- every member's offsets of a topic -------------------------------------------------------

    def get_consume_status(self, topic: str, group: str, client_id: str | None) -> Deferred[RemotingCommand]:
        info = self.broker.consumer_manager.get(group)
        members = list(info.channel_info_table.values()) if info is not None else []
        if not members:
            return defer.succeed(_answer(ResponseCode.SYSTEM_ERROR,
                                         f"No Any Consumer online in the consumer group: [{group}]"))
        for member in members:
            if member.version < V3_0_7_SNAPSHOT:
                return defer.succeed(_answer(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={_version_desc(member.version)}"))
        if client_id:
            members = [m for m in members if m.client_id == client_id][:1]
        request = GetConsumerStatusFromClient.request(topic=topic, group=group, language=LanguageCode.JAVA,
                                                      version=self.broker.version)
        table: dict[str, Any] = {}

        def ask(member: Any) -> Deferred[None]:
            def got(response: RemotingCommand) -> None:
                if response.code == ResponseCode.SUCCESS and response.body:
                    status = GetConsumerStatusBody.decode(response.body)
                    table[member.client_id] = status.message_queue_table or {}

            def failed(failure: Any) -> None:
                self.log.error("[get-consumer-status] get consumer status exception. topic={t}, group={g}, "
                               "error={e}", t=topic, g=group, e=failure.getErrorMessage())

            return member.channel.invoke(request, CALL_CLIENT_TIMEOUT).addCallbacks(got, failed)

        d = defer.gatherResults([ask(m) for m in members], consumeErrors=True)
        return d.addCallback(lambda _: _answer(
            ResponseCode.SUCCESS, body=GetConsumerStatusBody(consumer_table=table).encode()))
