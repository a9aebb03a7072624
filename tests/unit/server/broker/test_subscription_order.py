"""The order of a group's subscriptions as the Java 5.3.3 broker applies and lists them.

Expected values come from the official classes (rocketmq 5.3.3, fastjson2 2.0.43):
``SubscriptionData.hashCode``; ``HeartbeatData.decode`` of heartbeats listing the subscriptions
in the order given, each passed to ``ConsumerGroupInfo.updateSubscription``; then
``ConsumerConnection.getSubscriptionTable().putAll`` of the group's table and ``encode``.
"""

from __future__ import annotations

import pytest

from rmqwire.codec.commands.heartbeat import build_subscription_data
from rmqwire.server.broker.client_manager import ConsumerGroupInfo
from rmqwire.server.broker.subscription_order import connection_order, subscription_hash
from rmqwire.server.namesrv.hash_order import concurrent_putall_capacity


@pytest.mark.parametrize(("topic", "expression", "expression_type", "java"), [
    ("AdmT_88058b88", "*", "TAG", 844868952),
    ("%RETRY%AdmG_88058b88", "*", "TAG", -732895987),
    ("T1", "TagA || TagB", "TAG", 111414584),
    ("%RETRY%G", "x||y||z", "TAG", -1846332866),
    ("TS", "a > 1", "SQL92", -583474268),
])
def test_subscription_hash_is_javas(topic: str, expression: str, expression_type: str, java: int) -> None:
    sub = build_subscription_data(topic, expression, expression_type)
    assert subscription_hash(sub) == java
    sub.sub_version += 1  # not part of the hash
    assert subscription_hash(sub) == java


def test_putall_presizes_then_doubles() -> None:
    assert [concurrent_putall_capacity(n) for n in (0, 1, 2, 3, 6, 11)] == [1, 4, 8, 16, 32, 64]


def _listed(*heartbeats: list[tuple[str, str]]) -> list[str]:
    info = ConsumerGroupInfo("G")
    version = 1000
    for heartbeat in heartbeats:
        subs = []
        for topic, expression in heartbeat:
            sub = build_subscription_data(topic, expression)
            sub.sub_version, version = version, version + 1
            subs.append(sub)
        info.update_subscription(subs, 0)
    return list(connection_order(info.subscription_table, info.subscription_bins))


@pytest.mark.parametrize(("heartbeats", "java"), [
    # issue 12: the two share a bin of mqadmin's table; the heartbeat's HashSet puts the topic
    # first, whatever order the client listed them in (String order would put %RETRY% first)
    ([[("AdmT_88058b88", "*"), ("%RETRY%AdmG_88058b88", "*")]], ["AdmT_88058b88", "%RETRY%AdmG_88058b88"]),
    ([[("%RETRY%AdmG_88058b88", "*"), ("AdmT_88058b88", "*")]], ["AdmT_88058b88", "%RETRY%AdmG_88058b88"]),
    # 6 entries: a 32-bin copy of a 16-bin group table (neither's order, nor insertion, nor String)
    ([[("T232460", "TagA || TagB"), ("%RETRY%G70", "x||y||z"), ("T984787", "*"), ("T519896", "*"),
       ("T553259", "TagA"), ("T761111", "*")]],
     ["T519896", "T761111", "T553259", "T984787", "T232460", "%RETRY%G70"]),
    # a topic's newer version keeps its place; new topics after it in the set's order
    ([[("T800875", "TagA || TagB")],
      [("T800875", "*"), ("T888598", "TagA || TagB"), ("T596853", "TagA || TagB"), ("%RETRY%G8", "x||y||z")]],
     ["T596853", "%RETRY%G8", "T800875", "T888598"]),
    # a dropped topic leaves, an added one joins its bin's end
    ([[("TA", "*"), ("TB", "*"), ("TC", "TagA"), ("%RETRY%G", "*")],
      [("TB", "*"), ("TC", "TagB"), ("TD", "*"), ("%RETRY%G", "*"), ("TE", "*")]],
     ["TD", "TE", "%RETRY%G", "TB", "TC"]),
    # 14 topics grew the group's map to 32 bins; it keeps them when 4 of 5 topics leave
    ([[(t, "*") for t in ("Topic35", "Topic36", "Topic68", "Topic70", "Topic55", "%RETRY%G", "Topic09", "Topic44",
                          "Topic47", "Topic32", "Topic06", "Topic30", "Topic13", "Topic76")],
      [(t, "*") for t in ("Topic68", "Topic09", "Topic44", "Topic88", "Topic70")]],
     ["Topic68", "Topic09", "Topic70", "Topic44", "Topic88"]),
])
def test_consumer_connection_lists_the_group_as_java(heartbeats: list[list[tuple[str, str]]],
                                                     java: list[str]) -> None:
    assert _listed(*heartbeats) == java
