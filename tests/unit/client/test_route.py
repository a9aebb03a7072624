"""rmqwire.client.route: TopicRouteData -> publish / subscribe info, the broker table (pure)."""

from __future__ import annotations

import random

from rmqwire.client.route import (
    QueueIndex,
    RouteTable,
    TopicPublishInfo,
    default_route_for,
    route_changed,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)
from rmqwire.codec.commands.route import BrokerData, QueueData, TopicRouteData
from rmqwire.model import MessageQueue


def route(*queues: tuple[str, int, int, int], masters: dict[str, dict[int, str]] | None = None,
          order: str | None = None) -> TopicRouteData:
    names = [q[0] for q in queues]
    addrs = masters or {n: {0: f"10.0.0.{i}:10911"} for i, n in enumerate(names)}
    return TopicRouteData(
        order_topic_conf=order,
        queue_datas=[QueueData(broker_name=n, read_queue_nums=r, write_queue_nums=w, perm=p)
                     for n, r, w, p in queues],
        broker_datas=[BrokerData(cluster="c", broker_name=n, broker_addrs=a) for n, a in addrs.items()],
    )


def test_publish_queues_sorted_by_broker_writable_with_master_only() -> None:
    r = route(("broker-b", 2, 2, 6), ("broker-a", 4, 3, 6), ("broker-c", 2, 2, 4), ("broker-d", 1, 1, 6),
              masters={"broker-a": {0: "a:1"}, "broker-b": {0: "b:1"}, "broker-c": {0: "c:1"},
                       "broker-d": {1: "d-slave:1"}})
    info = topic_route_to_publish_info("T", r)
    assert info.message_queues == [MessageQueue("T", "broker-a", i) for i in range(3)] + [
        MessageQueue("T", "broker-b", i) for i in range(2)]
    assert not info.order_topic and info.ok()


def test_order_topic_conf_gives_the_queue_list_alone() -> None:
    info = topic_route_to_publish_info("T", route(("broker-a", 8, 8, 6), order="broker-b:2;broker-a:1"))
    assert info.order_topic
    assert info.message_queues == [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-b", 1),
                                   MessageQueue("T", "broker-a", 0)]


def test_subscribe_info_is_readable_queues() -> None:
    r = route(("broker-a", 2, 4, 6), ("broker-b", 3, 3, 2))
    assert topic_route_to_subscribe_info("T", r) == {MessageQueue("T", "broker-a", 0),
                                                     MessageQueue("T", "broker-a", 1)}


def test_default_route_caps_queue_counts() -> None:
    r = route(("broker-a", 8, 8, 7), ("broker-b", 2, 8, 7))
    d = default_route_for(r, 4)
    assert [(q.read_queue_nums, q.write_queue_nums) for q in d.queue_datas] == [(4, 4), (2, 2)]
    assert r.queue_datas[0].write_queue_nums == 8  # the original is untouched


def test_route_changed_ignores_list_order() -> None:
    m = {"broker-a": {0: "a:1"}, "broker-b": {0: "b:1"}}
    a = route(("broker-a", 4, 4, 6), ("broker-b", 4, 4, 6), masters=m)
    b = route(("broker-b", 4, 4, 6), ("broker-a", 4, 4, 6), masters=m)
    b.broker_datas.reverse()
    assert not route_changed(a, b)
    c = route(("broker-a", 4, 4, 6), ("broker-b", 4, 2, 6))
    assert route_changed(a, c)
    assert route_changed(None, a)


def test_round_robin_from_a_random_start_and_filters() -> None:
    mqs = [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)]
    info = TopicPublishInfo("T", list(mqs), index=QueueIndex(random.Random(7)))
    first = info.select_one()
    i = mqs.index(first)
    assert [info.select_one() for _ in range(3)] == [mqs[(i + k) % 3] for k in (1, 2, 3)]
    assert info.select_one(lambda q: q.broker_name == "b") == mqs[2]
    assert info.select_one(lambda q: False) is None


def test_queue_index_masks_to_positive_across_int32_wrap() -> None:
    idx = QueueIndex()
    idx._value = 2**31 - 2
    assert [idx.increment_and_get() for _ in range(3)] == [2**31 - 1, 0, 1]


def test_route_table_addresses_and_heartbeat_targets() -> None:
    t = RouteTable()
    t.store("T", route(("broker-a", 4, 4, 6), masters={"broker-a": {0: "m:1", 1: "s:1"}}))
    assert t.find_broker_address_in_publish("broker-a") == "m:1"
    assert t.find_broker_address_in_publish("nope") is None
    assert [x.addr for x in t.heartbeat_targets(masters_only=True)] == ["m:1"]
    assert sorted(x.addr for x in t.heartbeat_targets(masters_only=False)) == ["m:1", "s:1"]
    sub = t.find_broker_address_in_subscribe("broker-a", 1, False)
    assert sub is not None and (sub.broker_addr, sub.slave) == ("s:1", True)
    t.set_broker_version("broker-a", "m:1", 479)
    assert t.find_broker_address_in_admin("broker-a").broker_version == 479
    assert t.broker_name_of("s:1") == ("broker-a", 1)


def test_clean_offline_brokers_forgets_addresses_no_route_mentions() -> None:
    t = RouteTable()
    t.store("T", route(("broker-a", 4, 4, 6), masters={"broker-a": {0: "a:1"}}))
    t.store("U", route(("broker-b", 4, 4, 6), masters={"broker-b": {0: "b:1", 1: "b:2"}}))
    t.topic_routes.pop("U")
    assert sorted(t.clean_offline_brokers()) == ["b:1", "b:2"]
    assert list(t.broker_addrs) == ["broker-a"]
