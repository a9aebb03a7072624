"""Routes: TopicRouteData -> the queues a producer writes to / a consumer reads from; no I/O.

Behaviour of Java's ``MQClientInstance`` (``topicRouteData2TopicPublishInfo``,
``topicRouteData2TopicSubscribeInfo``, the broker address table, ``findBrokerAddressIn*``) and
``TopicPublishInfo`` (round-robin with a per-topic counter starting at a random value). The
``RouteTable`` holds what a client instance learned from the NameServers; it is plain data so that
unit tests build it from literal routes.
"""

from __future__ import annotations

import copy
import dataclasses
import random as _random
from collections.abc import Callable, Iterable
from typing import Any

from rmqwire.codec.commands.route import BrokerData, QueueData, TopicRouteData
from rmqwire.model import MessageQueue, PermName, java_string_compare

MASTER_ID = 0

QueueFilter = Callable[[MessageQueue], bool]


class QueueIndex:
    """Java ``ThreadLocalIndex``: a counter that starts at a random int32 and masks to positive.

    The reactor serves every send, so one counter per topic stands for Java's per-thread ones.
    """

    __slots__ = ("_random", "_value")

    def __init__(self, rng: _random.Random | None = None) -> None:
        self._random = rng or _random.Random()
        self._value: int | None = None

    def increment_and_get(self) -> int:
        if self._value is None:
            self._value = self._random.getrandbits(32) - 2**31  # Random.nextInt()
        self._value = ((self._value + 1 + 2**31) % 2**32) - 2**31  # int32 wrap-around
        return self._value & 0x7FFFFFFF

    def reset(self) -> None:
        self._value = self._random.randrange(2**31 - 1)  # abs(nextInt(Integer.MAX_VALUE))


@dataclasses.dataclass(eq=False)
class TopicPublishInfo:
    """The queues a producer may write for one topic (Java ``TopicPublishInfo``)."""

    topic: str
    message_queues: list[MessageQueue] = dataclasses.field(default_factory=list)
    order_topic: bool = False
    have_topic_router_info: bool = False
    route: TopicRouteData | None = None
    index: QueueIndex = dataclasses.field(default_factory=QueueIndex)

    def ok(self) -> bool:
        return bool(self.message_queues)

    def select_one(self, *filters: QueueFilter) -> MessageQueue | None:
        """The next queue round-robin; with filters, the next one passing all of them (None when
        no queue passes within one full round)."""
        mqs = self.message_queues
        if not mqs:
            return None
        n = len(mqs)
        if filters:
            for _ in range(n):
                mq = mqs[self.index.increment_and_get() % n]
                if all(f(mq) for f in filters):
                    return mq
            return None
        return mqs[self.index.increment_and_get() % n]

    def reset_index(self) -> None:
        self.index.reset()

    def write_queue_nums_by_broker(self, broker_name: str) -> int:
        for qd in (self.route.queue_datas if self.route else None) or ():
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def _sort_queue_datas(qds: Iterable[QueueData]) -> list[QueueData]:
    # QueueData.compareTo: by broker name (String.compareTo)
    import functools

    return sorted(qds, key=functools.cmp_to_key(
        lambda a, b: java_string_compare(a.broker_name or "", b.broker_name or "")))


def _sort_broker_datas(bds: Iterable[BrokerData]) -> list[BrokerData]:
    import functools

    return sorted(bds, key=functools.cmp_to_key(
        lambda a, b: java_string_compare(a.broker_name or "", b.broker_name or "")))


def is_writeable(perm: int) -> bool:
    return bool(perm & PermName.PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PermName.PERM_READ)


def parse_order_topic_conf(topic: str, conf: str) -> list[MessageQueue]:
    """``"broker-a:4;broker-b:4"`` -> queues 0..n-1 of each broker, in that order."""
    out = []
    for item in conf.split(";"):
        if not item:
            continue
        name, _, nums = item.partition(":")
        out.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
    return out


def topic_route_to_publish_info(
    topic: str, route: TopicRouteData, *, rng: _random.Random | None = None
) -> TopicPublishInfo:
    """Java ``topicRouteData2TopicPublishInfo``.

    With ``orderTopicConf`` the queue list comes from it alone (an ordered topic). Otherwise: the
    QueueDatas sorted by broker name, writable ones only, of brokers that have a master, with
    queue ids 0..writeQueueNums-1. (Static topics, ``topicQueueMappingByBroker``, are not mapped.)
    """
    info = TopicPublishInfo(topic, route=route, index=QueueIndex(rng))
    if route.order_topic_conf:
        info.message_queues = parse_order_topic_conf(topic, route.order_topic_conf)
        info.order_topic = True
        return info
    brokers = {bd.broker_name: bd for bd in route.broker_datas or ()}
    for qd in _sort_queue_datas(route.queue_datas or ()):
        if not is_writeable(qd.perm):
            continue
        bd = brokers.get(qd.broker_name)
        if bd is None or MASTER_ID not in (bd.broker_addrs or {}):
            continue
        info.message_queues.extend(
            MessageQueue(topic, qd.broker_name or "", i) for i in range(qd.write_queue_nums)
        )
    return info


def topic_route_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """Java ``topicRouteData2TopicSubscribeInfo``: readable queues 0..readQueueNums-1."""
    return {
        MessageQueue(topic, qd.broker_name or "", i)
        for qd in route.queue_datas or ()
        if is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }


def default_route_for(route: TopicRouteData, default_topic_queue_nums: int) -> TopicRouteData:
    """The TBW102 route as the publish route of a topic to auto-create: every QueueData's queue
    counts become min(default_topic_queue_nums, readQueueNums) (Java ``isDefault`` branch)."""
    out = copy.deepcopy(route)
    for qd in out.queue_datas or ():
        n = min(default_topic_queue_nums, qd.read_queue_nums)
        qd.read_queue_nums = n
        qd.write_queue_nums = n
    return out


def route_changed(old: TopicRouteData | None, new: TopicRouteData | None) -> bool:
    """Java ``TopicRouteData.topicRouteDataChanged``: compare with both lists sorted."""
    if old is None or new is None:
        return True
    return _normalised(old) != _normalised(new)


def _normalised(route: TopicRouteData) -> tuple[Any, ...]:
    return (
        route.order_topic_conf,
        _sort_queue_datas(route.queue_datas or ()),
        _sort_broker_datas(route.broker_datas or ()),
        route.filter_server_table or {},
        route.topic_queue_mapping_by_broker,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """Java ``FindBrokerResult``."""

    broker_addr: str
    slave: bool
    broker_version: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatTarget:
    broker_name: str
    broker_id: int
    addr: str


class RouteTable:
    """What one client instance knows of routes and brokers (Java ``MQClientInstance`` tables).

    ``topic_routes``: topic -> the last TopicRouteData; ``broker_addrs``: broker name -> {id:
    addr}; ``broker_versions``: broker name -> {addr: version} (learned from HEART_BEAT replies).
    """

    def __init__(self) -> None:
        self.topic_routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.broker_versions: dict[str, dict[str, int]] = {}

    def store(self, topic: str, route: TopicRouteData) -> None:
        """Take ``route`` for ``topic``: its brokers' addresses replace what was known of them."""
        for bd in route.broker_datas or ():
            if bd.broker_name is not None:
                self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs or {})
        self.topic_routes[topic] = copy.deepcopy(route)

    def find_broker_address_in_publish(self, broker_name: str | None) -> str | None:
        if broker_name is None:
            return None
        addrs = self.broker_addrs.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_address_in_admin(self, broker_name: str | None) -> FindBrokerResult | None:
        """Any address of the broker, master or not (first in the table)."""
        if broker_name is None:
            return None
        for broker_id, addr in (self.broker_addrs.get(broker_name) or {}).items():
            if addr:
                return FindBrokerResult(addr, broker_id != MASTER_ID,
                                        self.broker_version(broker_name, addr))
        return None

    def find_broker_address_in_subscribe(
        self, broker_name: str | None, broker_id: int, only_this_broker: bool
    ) -> FindBrokerResult | None:
        """Java ``findBrokerAddressInSubscribe``: the asked id, else (unless ``only_this_broker``)
        the next id up (a slave asked for the master), else any address."""
        if broker_name is None:
            return None
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        if addr is None and broker_id != MASTER_ID:
            addr = addrs.get(broker_id + 1)
            slave = True
        if addr is None and not only_this_broker:
            broker_id, addr = next(iter(addrs.items()))
            slave = broker_id != MASTER_ID
        if addr is None:
            return None
        return FindBrokerResult(addr, slave, self.broker_version(broker_name, addr))

    def find_broker_addr_by_topic(self, topic: str, rng: _random.Random | None = None) -> str | None:
        """Java ``findBrokerAddrByTopic``: a random broker of the topic, its master if any."""
        route = self.topic_routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = (rng or _random).choice(route.broker_datas)
        addrs = bd.broker_addrs or {}
        return addrs.get(MASTER_ID) or next(iter(addrs.values()), None)

    def heartbeat_targets(self, *, masters_only: bool) -> list[HeartbeatTarget]:
        """Every known broker address (producer-only clients: masters only), as Java iterates."""
        out = []
        for name, addrs in self.broker_addrs.items():
            for broker_id, addr in addrs.items():
                if addr is None or (masters_only and broker_id != MASTER_ID):
                    continue
                out.append(HeartbeatTarget(name, broker_id, addr))
        return out

    def all_broker_addresses(self) -> list[tuple[str, int, str]]:
        return [(n, i, a) for n, addrs in self.broker_addrs.items() for i, a in addrs.items() if a]

    def broker_name_of(self, addr: str) -> tuple[str, int] | None:
        for name, addrs in self.broker_addrs.items():
            for broker_id, a in addrs.items():
                if a == addr:
                    return name, broker_id
        return None

    def is_broker_addr_in_routes(self, addr: str) -> bool:
        return any(
            addr in (bd.broker_addrs or {}).values()
            for route in self.topic_routes.values()
            for bd in route.broker_datas or ()
        )

    def clean_offline_brokers(self) -> list[str]:
        """Java ``cleanOfflineBroker``: forget addresses no route mentions; returns them."""
        gone = []
        for name in list(self.broker_addrs):
            addrs = self.broker_addrs[name]
            for broker_id, addr in list(addrs.items()):
                if not self.is_broker_addr_in_routes(addr):
                    del addrs[broker_id]
                    gone.append(addr)
            if not addrs:
                del self.broker_addrs[name]
        return gone

    def set_broker_version(self, broker_name: str, addr: str, version: int) -> None:
        self.broker_versions.setdefault(broker_name, {})[addr] = version

    def broker_version(self, broker_name: str, addr: str) -> int:
        return self.broker_versions.get(broker_name, {}).get(addr, 0)
