"""Driver-side questions to the cluster: which queues, their min/max offsets, the offset of a
timestamp, and publishing progress to a consumer group. Only offsets travel here; the driver
never pulls messages (executors do, in ``rmqwire.spark.fetch``).

Built on the admin client (``rmqwire.admin``): one route lookup per topic per question, then
the per-queue requests to the brokers' masters all at once.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from twisted.internet.defer import Deferred, gatherResults

from rmqwire.admin.blocking import Admin
from rmqwire.admin.core import RETRY_GROUP_TOPIC_PREFIX, AdminCore, subscribe_queues
from rmqwire.client.blocking import call
from rmqwire.client.route import MASTER_ID
from rmqwire.codec.commands.admin import (
    SubscriptionGroupConfig,
    UpdateAndCreateSubscriptionGroup,
)
from rmqwire.codec.commands.offset import (
    GetMaxOffset,
    GetMinOffset,
    SearchOffsetByTimestamp,
    UpdateConsumerOffset,
)
from rmqwire.codec.commands.topic import TopicConfig
from rmqwire.codec.header import BoundaryType
from rmqwire.errors import MQClientError
from rmqwire.model import MessageQueue, PermName
from rmqwire.spark.offsets import Offsets
from rmqwire.spark.options import Connection, Subscription

T = TypeVar("T")

#: Topics a ``topicPattern`` never matches: the brokers' own (retry, DLQ, scheduling, ...).
_SYSTEM_TOPIC = re.compile(r"^(%RETRY%|%DLQ%|%LMQ%|rmq_sys_|SCHEDULE_TOPIC_|RMQ_SYS_|TBW102$)")


class Metadata:
    """A blocking view of the cluster for the driver; ``close()`` when done."""

    def __init__(self, conn: Connection, timeout: float = 30.0) -> None:
        self.admin = Admin(conn.namesrv_addr, access_key=conn.access_key, secret_key=conn.secret_key,
                           tls=conn.use_tls or None, timeout=min(timeout, 10.0), wait=timeout)
        self.admin.start()
        self.timeout = timeout
        self._groups_created: set[tuple[str, str]] = set()
        self._masters: dict[str, str] = {}  # broker name -> master address, from the last routes

    def close(self) -> None:
        self.admin.shutdown()

    def _run(self, fn: Callable[[AdminCore], Awaitable[T]]) -> T:
        return call(lambda: Deferred.fromCoroutine(fn(self.admin.core)), timeout=self.timeout)

    # ---- queues --------------------------------------------------------------------------------

    def queues(self, sub: Subscription) -> list[MessageQueue]:
        """The readable queues of the subscription now (re-asked on every trigger, so queues
        and brokers added while a query runs are picked up)."""
        if sub.assign:
            return list(sub.assign)
        if sub.pattern is not None:
            rx = re.compile(sub.pattern)
            names = self.admin.fetch_all_topic_list().topic_list
            topics: Iterable[str] = sorted(t for t in names if rx.fullmatch(t) and not _SYSTEM_TOPIC.match(t))
        else:
            topics = sub.topics

        async def go(core: AdminCore) -> list[MessageQueue]:
            routes = await gatherResults([core.examine_topic_route_info(t) for t in topics],
                                         consumeErrors=True)
            self._masters.update(_masters(routes))
            return sorted(mq for t, r in zip(topics, routes, strict=True) for mq in subscribe_queues(t, r))

        try:
            return self._run(go)
        except Exception as e:
            raise MQClientError(f"cannot resolve the queues of {list(topics)}: {_cause(e)}") from None

    def _master(self, mq: MessageQueue) -> str:
        addr = self._masters.get(mq.broker_name)
        if addr is None:
            self.queues(Subscription(topics=(mq.topic,)))
            addr = self._masters.get(mq.broker_name)
            if addr is None:
                raise MQClientError(f"broker {mq.broker_name!r} of {mq.topic} has no master in the route")
        return addr

    # ---- offsets -------------------------------------------------------------------------------

    def _per_queue(self, mqs: Iterable[MessageQueue],
                   ask: Callable[[AdminCore, str, MessageQueue], Deferred[int]]) -> Offsets:
        mqs = list(mqs)
        addrs = [self._master(mq) for mq in mqs]

        async def go(core: AdminCore) -> Offsets:
            values = await gatherResults([ask(core, a, mq) for a, mq in zip(addrs, mqs, strict=True)],
                                         consumeErrors=True)
            return dict(zip(mqs, values, strict=True))

        try:
            return self._run(go)
        except Exception as e:
            raise MQClientError(f"cannot read queue offsets: {_cause(e)}") from None

    def min_offsets(self, mqs: Iterable[MessageQueue]) -> Offsets:
        return self._per_queue(mqs, lambda core, addr, mq: _offset(core, addr, GetMinOffset, mq))

    def max_offsets(self, mqs: Iterable[MessageQueue]) -> Offsets:
        return self._per_queue(mqs, lambda core, addr, mq: _offset(core, addr, GetMaxOffset, mq))

    def offsets_for_times(self, times: Mapping[MessageQueue, int]) -> Offsets:
        """The first offset stored at or after each timestamp (the max offset when none is)."""
        return self._per_queue(times, lambda core, addr, mq: _offset(
            core, addr, SearchOffsetByTimestamp, mq, timestamp=times[mq], boundary_type=BoundaryType.LOWER))

    # ---- progress to a consumer group ----------------------------------------------------------

    def commit_to_group(self, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Write ``offsets`` as ``group``'s consume offsets, creating the subscription group on
        each broker first (5.3.3 refuses offsets of a group it does not know)."""
        by_addr: dict[str, list[MessageQueue]] = {}
        for mq in offsets:
            by_addr.setdefault(self._master(mq), []).append(mq)
        new = [a for a in by_addr if (a, group) not in self._groups_created]

        async def go(core: AdminCore) -> None:
            await gatherResults([Deferred.fromCoroutine(core.call(
                a, UpdateAndCreateSubscriptionGroup, body=SubscriptionGroupConfig(group_name=group)))
                for a in new], consumeErrors=True)
            # the group's retry topic, which a broker creates when a consumer of the group
            # heartbeats: mqadmin consumerProgress -g and lag exporters find the group by its route
            retry = TopicConfig(topic_name=RETRY_GROUP_TOPIC_PREFIX + group, read_queue_nums=1,
                                write_queue_nums=1, perm=int(PermName.PERM_READ | PermName.PERM_WRITE))
            await gatherResults([core.create_and_update_topic_config(a, retry) for a in new],
                                consumeErrors=True)
            await gatherResults([Deferred.fromCoroutine(core.call(
                a, UpdateConsumerOffset, consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                commit_offset=offsets[mq], bname=mq.broker_name))
                for a, mqs in by_addr.items() for mq in mqs], consumeErrors=True)

        try:
            self._run(go)
        except Exception as e:
            raise MQClientError(f"cannot commit offsets to group {group!r}: {_cause(e)}") from None
        self._groups_created.update((a, group) for a in new)


def _offset(core: AdminCore, addr: str, command: Any, mq: MessageQueue, **fields: Any) -> Deferred[int]:
    async def go() -> int:
        r = await core.call(addr, command, topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name,
                            **fields)
        return int(r.header.offset)

    return Deferred.fromCoroutine(go())


def _masters(routes: Iterable[Any]) -> dict[str, str]:
    out = {}
    for route in routes:
        for bd in route.broker_datas or []:
            addr = (bd.broker_addrs or {}).get(MASTER_ID)
            if addr:
                out[bd.broker_name] = addr
    return out


def _cause(e: BaseException) -> str:
    """The first real error inside Twisted's wrappers (FirstError of gatherResults)."""
    sub = getattr(e, "subFailure", None)
    if sub is not None:
        return _cause(sub.value)
    return f"{type(e).__name__}: {e}"
