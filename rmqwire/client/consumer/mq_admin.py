"""Queue-level lookups a consumer makes (Java ``MQAdminImpl`` and the broker finders of
``MQClientInstance``): which broker address serves a queue, its min/max offsets, the offset at a
time, the earliest store time, a topic's readable queues.

Each lookup uses the client instance's route table and refreshes the topic's route from the
NameServer once when the broker is unknown, as Java does; it fails with ``MQClientError("The
broker[<name>] not exist")`` when the broker stays unknown.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred

from rmqwire.client.instance import ClientInstance
from rmqwire.client.route import (
    MASTER_ID,
    FindBrokerResult,
    topic_route_to_subscribe_info,
)
from rmqwire.codec.commands.offset import (
    GetEarliestMsgStoretime,
    GetMaxOffset,
    GetMinOffset,
    SearchOffsetByTimestamp,
)
from rmqwire.codec.header import BoundaryType
from rmqwire.errors import MQClientError
from rmqwire.model import MessageQueue

__all__ = [
    "broker_not_exist",
    "earliest_msg_store_time",
    "fetch_subscribe_message_queues",
    "find_broker_in_publish",
    "find_broker_in_subscribe",
    "max_offset",
    "min_offset",
    "search_offset",
]


def broker_not_exist(broker_name: str) -> MQClientError:
    return MQClientError(f"The broker[{broker_name}] not exist")


def find_broker_in_subscribe(
    instance: ClientInstance, mq: MessageQueue, broker_id: int = MASTER_ID, *,
    only_this_broker: bool = False, retry_only_this_broker: bool | None = None,
) -> Deferred[FindBrokerResult | None]:
    """Java's ``findBrokerAddressInSubscribe`` with the one route refresh its callers do
    (``retry_only_this_broker`` is the flag of the second lookup; default the first one's)."""
    found = instance.routes.find_broker_address_in_subscribe(mq.broker_name, broker_id, only_this_broker)
    if found is not None:
        return defer.succeed(found)
    again = only_this_broker if retry_only_this_broker is None else retry_only_this_broker

    def retry(_: Any) -> FindBrokerResult | None:
        return instance.routes.find_broker_address_in_subscribe(mq.broker_name, broker_id, again)

    return _refresh(instance, mq.topic).addCallback(retry)


def find_broker_in_publish(instance: ClientInstance, mq: MessageQueue) -> Deferred[str]:
    """The master address of ``mq``'s broker (Java ``findBrokerAddressInPublish`` + refresh)."""
    addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr:
        return defer.succeed(addr)

    def retry(_: Any) -> str:
        found = instance.find_broker_address_in_publish(mq.broker_name)
        if not found:
            raise broker_not_exist(mq.broker_name)
        return found

    return _refresh(instance, mq.topic).addCallback(retry)


def _refresh(instance: ClientInstance, topic: str) -> Deferred[bool]:
    # Java's updateTopicRouteInfoFromNameServer logs failures and goes on
    return instance.update_topic_route(topic).addErrback(lambda _f: False)


def _offset_call(instance: ClientInstance, mq: MessageQueue, command: Any, **fields: Any) -> Deferred[int]:
    def call(addr: str) -> Deferred[int]:
        d = instance.broker_call(addr, command, command.header(
            topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name, **fields),
            timeout=instance.api_timeout)
        return d.addCallback(lambda r: r.header.offset if hasattr(r.header, "offset") else r.header.timestamp)

    return find_broker_in_publish(instance, mq).addCallback(call)


def max_offset(instance: ClientInstance, mq: MessageQueue) -> Deferred[int]:
    """GET_MAX_OFFSET: the next offset to be written in ``mq``."""
    return _offset_call(instance, mq, GetMaxOffset)


def min_offset(instance: ClientInstance, mq: MessageQueue) -> Deferred[int]:
    return _offset_call(instance, mq, GetMinOffset)


def search_offset(
    instance: ClientInstance, mq: MessageQueue, timestamp_ms: int,
    boundary: BoundaryType | None = None,
) -> Deferred[int]:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms`` (LOWER)."""
    return _offset_call(instance, mq, SearchOffsetByTimestamp, timestamp=int(timestamp_ms),
                        boundary_type=boundary)


def earliest_msg_store_time(instance: ClientInstance, mq: MessageQueue) -> Deferred[int]:
    return _offset_call(instance, mq, GetEarliestMsgStoretime)


def fetch_subscribe_message_queues(instance: ClientInstance, topic: str) -> Deferred[set[MessageQueue]]:
    """Java ``MQAdminImpl.fetchSubscribeMessageQueues``: the topic's readable queues, from the
    NameServer (MQClientError when the topic has none)."""
    def got(route: Any) -> set[MessageQueue]:
        mqs = topic_route_to_subscribe_info(topic, route)
        if not mqs:
            raise MQClientError(f"Can not find Message Queue for this topic, {topic} Namesrv return empty")
        return mqs

    def failed(f: Any) -> Any:
        raise MQClientError(f"Can not find Message Queue for this topic, {topic}") from f.value

    return instance.fetch_route(topic).addCallbacks(got, failed)
