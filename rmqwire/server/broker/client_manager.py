"""Producer and consumer groups and their connections (Java ``ProducerManager``,
``ConsumerManager`` / ``ConsumerGroupInfo``, ``DefaultConsumerIdsChangeListener``).

HEART_BEAT registers a client's channel in each of its groups; a consumer group whose members or
subscriptions change gets NOTIFY_CONSUMER_IDS_CHANGED (oneway) on every member's channel, so the
clients rebalance at once instead of at their next 20 s rebalance. A channel leaves every group
when it closes, or when it has not sent a heartbeat for ``channelExpiredTimeout`` ms (then it is
closed too). Everything here runs in the reactor thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from twisted.logger import Logger

from rmqwire.codec.codes import DEFAULT_VERSION, LanguageCode
from rmqwire.codec.commands.consumer import NotifyConsumerIdsChanged
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.java import now_ms
from rmqwire.model import ConsumeFromWhere, ConsumeType, MessageModel
from rmqwire.server.broker.subscription_order import heartbeat_order
from rmqwire.server.namesrv.hash_order import ConcurrentHashMapBins

__all__ = [
    "ClientChannelInfo",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "ProducerManager",
]


@dataclasses.dataclass(slots=True, eq=False)
class ClientChannelInfo:
    """One client connection as a group member (Java ``ClientChannelInfo``)."""

    channel: Any
    client_id: str
    language: LanguageCode | int
    version: int
    last_update_timestamp: int = 0

    @property
    def addr(self) -> str:
        return str(getattr(self.channel, "peer", ""))


@dataclasses.dataclass(slots=True, eq=False)
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None
    channel_info_table: dict[Any, ClientChannelInfo] = dataclasses.field(default_factory=dict)
    subscription_table: dict[str, SubscriptionData] = dataclasses.field(default_factory=dict)
    #: The subscription table's topics as Java's ConcurrentHashMap holds them (its order).
    subscription_bins: ConcurrentHashMapBins = dataclasses.field(default_factory=ConcurrentHashMapBins)
    last_update_timestamp: int = 0

    def all_client_ids(self) -> list[str]:
        return [c.client_id for c in self.channel_info_table.values()]

    def all_channels(self) -> list[Any]:
        return list(self.channel_info_table)

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        return self.subscription_table.get(topic)

    def find_channel(self, channel: Any) -> ClientChannelInfo | None:
        return self.channel_info_table.get(channel)

    def update_channel(self, info: ClientChannelInfo, consume_type: ConsumeType | None,
                       message_model: MessageModel | None, consume_from_where: ConsumeFromWhere | None,
                       now: int) -> bool:
        """True when the channel is new to the group."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        old = self.channel_info_table.get(info.channel)
        updated = False
        if old is None:
            self.channel_info_table[info.channel] = info
            old = info
            updated = True
        elif old.client_id != info.client_id:
            self.channel_info_table[info.channel] = info
            old = info
        self.last_update_timestamp = now
        old.last_update_timestamp = now
        return updated

    def put_subscription(self, topic: str, sub: SubscriptionData) -> None:
        self.subscription_table[topic] = sub
        self.subscription_bins.put(topic)

    def update_subscription(self, subs: Iterable[SubscriptionData], now: int) -> bool:
        """True when a topic was added or removed (a newer version of a topic replaces the old one
        without counting as a change, as in Java). New topics go in in Java's order (see
        subscription_order), which mqadmin consumerConnection can show."""
        updated = False
        topics = set()
        for sub in heartbeat_order(subs):
            topic = sub.topic or ""
            topics.add(topic)
            old = self.subscription_table.get(topic)
            if old is None:
                self.put_subscription(topic, sub)
                updated = True
            elif sub.sub_version > old.sub_version:
                self.put_subscription(topic, sub)
        for topic in [t for t in self.subscription_table if t not in topics]:
            del self.subscription_table[topic]
            self.subscription_bins.remove(topic)
            updated = True
        self.last_update_timestamp = now
        return updated


class ConsumerManager:
    log = Logger()

    def __init__(self, *, notify_enabled: Callable[[], bool] = lambda: True,
                 channel_expired_timeout: int = 120_000, clock: Callable[[], int] = now_ms,
                 version: int = DEFAULT_VERSION) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        #: Groups pulling without heartbeats (lite pull, proxies): Java's compensation table.
        self.compensation_table: dict[str, ConsumerGroupInfo] = {}
        self.topic_group_table: dict[str, set[str]] = {}
        self._notify_enabled = notify_enabled
        self.channel_expired_timeout = channel_expired_timeout
        self._clock = clock
        self._version = version
        self.notifications_sent = 0

    def get(self, group: str | None) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group) if group is not None else None

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        if info is not None:
            sub = info.find_subscription(topic)
            if sub is not None:
                return sub
        comp = self.compensation_table.get(group)
        return comp.find_subscription(topic) if comp is not None else None

    def compensate_basic_info(self, group: str, consume_type: ConsumeType, model: MessageModel) -> None:
        info = self.compensation_table.get(group)
        if info is None:
            info = self.compensation_table[group] = ConsumerGroupInfo(group)
        info.consume_type = consume_type
        info.message_model = model

    def compensate_subscription(self, group: str, topic: str, sub: SubscriptionData) -> None:
        info = self.compensation_table.get(group)
        if info is None:
            info = self.compensation_table[group] = ConsumerGroupInfo(group)
        info.put_subscription(topic, sub)

    def register_consumer(
        self, group: str, info: ClientChannelInfo, consume_type: ConsumeType | None,
        model: MessageModel | None, from_where: ConsumeFromWhere | None,
        subs: list[SubscriptionData] | None, notify: bool,
    ) -> bool:
        """A consumer's heartbeat; ``subs`` None keeps the group's subscriptions (heartbeat v2
        without subscriptions). True when members or subscriptions changed."""
        now = self._clock()
        group_info = self.consumer_table.get(group)
        if group_info is None:
            group_info = self.consumer_table[group] = ConsumerGroupInfo(group, consume_type, model, from_where)
        for sub in subs if subs is not None else group_info.subscription_table.values():
            self.topic_group_table.setdefault(sub.topic or "", set()).add(group)
        r1 = group_info.update_channel(info, consume_type, model, from_where, now)
        r2 = group_info.update_subscription(subs, now) if subs is not None else False
        if (r1 or r2) and notify and group_info.message_model is not MessageModel.BROADCASTING:
            self.notify_change(group, group_info.all_channels())
        return r1 or r2

    def unregister_consumer(self, group: str, info: ClientChannelInfo, notify: bool) -> None:
        group_info = self.consumer_table.get(group)
        if group_info is None:
            return
        group_info.channel_info_table.pop(info.channel, None)
        if not group_info.channel_info_table:
            self._remove_group(group)
        if notify and group_info.message_model is not MessageModel.BROADCASTING:
            self.notify_change(group, group_info.all_channels())

    def _remove_group(self, group: str) -> None:
        removed = self.consumer_table.pop(group, None)
        if removed is None:
            return
        self.log.info("unregister consumer ok, no any connection, and remove consumer group, {g}", g=group)
        for topic in list(removed.subscription_table):
            groups = self.topic_group_table.get(topic)
            if groups is not None:
                groups.discard(group)
                if not groups:
                    del self.topic_group_table[topic]

    def channel_closed(self, channel: Any) -> bool:
        """Java ``doChannelCloseEvent``: drop ``channel`` from every group; notify the rest."""
        removed = False
        for group, group_info in list(self.consumer_table.items()):
            if group_info.channel_info_table.pop(channel, None) is None:
                continue
            removed = True
            if not group_info.channel_info_table:
                self._remove_group(group)
            if group_info.message_model is not MessageModel.BROADCASTING:
                self.notify_change(group, group_info.all_channels())
        return removed

    def scan_not_active_channels(self) -> list[Any]:
        """Drop (and return, to be closed) channels silent past ``channelExpiredTimeout``."""
        now = self._clock()
        expired = []
        for group, group_info in list(self.consumer_table.items()):
            for channel, info in list(group_info.channel_info_table.items()):
                if now - info.last_update_timestamp > self.channel_expired_timeout:
                    self.log.warn("SCAN: remove expired channel from ConsumerManager consumerTable. "
                                  "channel={addr}, consumerGroup={g}", addr=info.addr, g=group)
                    del group_info.channel_info_table[channel]
                    expired.append(channel)
            if not group_info.channel_info_table:
                self._remove_group(group)
        return expired

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return set(self.topic_group_table.get(topic, ()))

    def notify_change(self, group: str, channels: list[Any]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to every member (Java's real-time notify)."""
        if not self._notify_enabled():
            return
        for channel in channels:
            invoke = getattr(channel, "invoke_oneway", None)
            if invoke is None or not getattr(channel, "is_open", True):
                continue
            request = NotifyConsumerIdsChanged.request(
                consumer_group=group, language=LanguageCode.JAVA, version=self._version
            )
            self.notifications_sent += 1
            invoke(request).addErrback(
                lambda f, ch=channel: self.log.warn("notifyConsumerIdsChanged to {peer} failed: {why}",
                                                    peer=getattr(ch, "peer", "?"), why=f.getErrorMessage())
            )


class ProducerManager:
    """Producer group -> {channel: ClientChannelInfo}, and client id -> channel."""

    log = Logger()

    def __init__(self, *, channel_expired_timeout: int = 120_000, clock: Callable[[], int] = now_ms) -> None:
        self.group_channel_table: dict[str, dict[Any, ClientChannelInfo]] = {}
        self.client_channel_table: dict[str, Any] = {}
        self.channel_expired_timeout = channel_expired_timeout
        self._clock = clock
        self._next_channel = 0

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.setdefault(group, {})
        old = channels.get(info.channel)
        if old is None:
            channels[info.channel] = info
            self.client_channel_table[info.client_id] = info.channel
            self.log.info("new producer connected, group: {g} channel: {addr}", g=group, addr=info.addr)
            old = info
        old.last_update_timestamp = self._clock()

    def unregister_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.get(group)
        if not channels:
            return
        old = channels.pop(info.channel, None)
        if old is not None:
            self.client_channel_table.pop(old.client_id, None)
        if not channels:
            del self.group_channel_table[group]

    def channel_closed(self, channel: Any) -> bool:
        removed = False
        for group, channels in list(self.group_channel_table.items()):
            info = channels.pop(channel, None)
            if info is None:
                continue
            removed = True
            if self.client_channel_table.get(info.client_id) is channel:
                del self.client_channel_table[info.client_id]
            if not channels:
                del self.group_channel_table[group]
        return removed

    def scan_not_active_channels(self) -> list[Any]:
        now = self._clock()
        expired = []
        for group, channels in list(self.group_channel_table.items()):
            for channel, info in list(channels.items()):
                if now - info.last_update_timestamp > self.channel_expired_timeout:
                    del channels[channel]
                    self.client_channel_table.pop(info.client_id, None)
                    expired.append(channel)
            if not channels:
                del self.group_channel_table[group]
        return expired

    def group_connections(self, group: str) -> list[ClientChannelInfo]:
        return list(self.group_channel_table.get(group, {}).values())

    def get_available_channel(self, group: str | None) -> Any:
        """Java ``getAvailableChannel``: the next open channel of ``group`` in turn (the broker's
        transaction checks go there), None when the group has none."""
        channels = list(self.group_channel_table.get(group or "", {}))
        if not channels:
            return None
        self._next_channel = (self._next_channel + 1) & 0x7FFFFFFF
        for i in range(len(channels)):
            channel = channels[(self._next_channel + i) % len(channels)]
            if getattr(channel, "is_open", True):
                return channel
        return None

    def find_channel(self, client_id: str | None) -> Any:
        """Java ``findChannel``: the channel of a producer client id (reply messages go there)."""
        return self.client_channel_table.get(client_id or "")
