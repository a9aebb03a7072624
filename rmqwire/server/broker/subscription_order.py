"""The order of a consumer group's subscriptions, as the Java broker keeps and lists them.

``mqadmin consumerConnection`` prints the GET_CONSUMER_CONNECTION_LIST body's subscriptionTable by
iterating the ConcurrentHashMap it decodes it into: subscriptions in different bins come out in
bin order whatever the body says, but those sharing a bin (a topic and its group's ``%RETRY%``
topic, 1 time in 16) come out in the body's JSON order. The Java broker's JSON order is made by
these hash tables, replayed here:

1. HEART_BEAT: fastjson2 decodes the subscriptionDataSet into a ``HashSet<SubscriptionData>``
   (``SubscriptionData.hashCode``, not the JSON order) and ``ConsumerGroupInfo.updateSubscription``
   puts the new topics, in that set's order, into the group's ``ConcurrentHashMap`` (16 bins, grown
   at 3/4 full). A newer version of a topic replaces it in place; a dropped topic is removed.
2. GET_CONSUMER_CONNECTION_LIST: ``putAll`` of that map into the ConsumerConnection's fresh
   ``ConcurrentHashMap`` presizes it (8 bins for 2 entries) and fills it in the group
   table's iteration order; fastjson2 writes it in its own iteration order (map keys unsorted).

The group's map is modelled bin by bin (``ConsumerGroupInfo.subscription_bins``): once it held
12 topics it has grown, and a ConcurrentHashMap resize reverses part of a bin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.java import java_string_hash
from rmqwire.server.namesrv.hash_order import (
    concurrent_putall_capacity,
    hashmap_order,
    java_order,
)

__all__ = ["connection_order", "heartbeat_order", "subscription_hash"]


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def _str_hash(s: str | None) -> int:
    return 0 if s is None else java_string_hash(s)


def subscription_hash(sub: SubscriptionData) -> int:
    """``SubscriptionData.hashCode`` (subVersion is not part of it; a set hashes to the sum of
    its distinct elements)."""
    h = 31 + (1231 if sub.class_filter_mode else 1237)
    h = 31 * h + (0 if sub.code_set is None else sum(set(sub.code_set)))
    h = 31 * h + _str_hash(sub.sub_string)
    h = 31 * h + (0 if sub.tags_set is None else sum(java_string_hash(t) for t in set(sub.tags_set)))
    h = 31 * h + _str_hash(sub.topic)
    return _int32(31 * h + _str_hash(sub.expression_type))


def heartbeat_order(subs: Iterable[SubscriptionData]) -> list[SubscriptionData]:
    """A heartbeat's subscriptions in the order the Java broker applies them (step 1)."""
    return hashmap_order(subs, subscription_hash)


def connection_order(table: Mapping[str, SubscriptionData],
                     group_order: Iterable[str]) -> dict[str, SubscriptionData]:
    """The group's subscription table, whose topics Java's map iterates in ``group_order``
    (``ConsumerGroupInfo.subscription_bins``), in the order the Java broker's
    GET_CONSUMER_CONNECTION_LIST body lists it (step 2)."""
    return {topic: table[topic] for topic in java_order(group_order, concurrent_putall_capacity(len(table)))}
