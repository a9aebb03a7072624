"""``MetricsCollectTask``: one collection cycle over the Admin API (rocketmq-exporter's six
scheduled tasks, run together).

What each part asks, as the Java exporter does (request codes in brackets):

- broker runtime: GET_BROKER_RUNTIME_INFO (28) of every master -> ``rocketmq_brokeruntime_*``; of
  every slave too, for ``rocketmq_broker_commitlog_diff`` (master - slave commitLogMaxOffset);
- broker stats: VIEW_BROKER_STATS_DATA (315) BROKER_PUT_NUMS / BROKER_GET_NUMS keyed by cluster
  -> ``rocketmq_broker_tps`` / ``_qps``;
- producers: GET_ALL_PRODUCER_INFO (328) of every master -> ``rocketmq_producer_count``;
- per topic: its route (105), GET_TOPIC_STATS_INFO (202) of each broker -> ``rocketmq_producer_offset``
  (``_topic_retry_offset`` / ``_topic_dlq_offset`` for %RETRY% / %DLQ% topics), TOPIC_PUT_NUMS /
  TOPIC_PUT_SIZE -> ``rocketmq_producer_tps`` / ``_message_size``, QUERY_TOPIC_CONSUME_BY_WHO (300)
  for its groups;
- per topic and group: the group's connections (203, once per group), GET_CONSUME_STATS (208) of
  each broker -> ``rocketmq_group_diff`` (clustering groups), ``rocketmq_consumer_offset``, and
  one pull (11) of the next unconsumed message per lagging queue -> lag time; GROUP_GET_NUMS,
  GROUP_GET_SIZE, SNDBCK_PUT_NUMS keyed ``topic@group`` -> ``rocketmq_consumer_tps``, ...;
- per online group: GET_CONSUMER_RUNNING_INFO (307) of each client -> ``rocketmq_client_*``.

Unlike the Java tasks, which walk topics and groups one request at a time (a cycle that stops
finishing on large clusters, rocketmq-exporter#144), every request here is issued at once and
bounded per address (``CollectOptions.per_address`` requests in flight to each broker or
NameServer); a topic's route and a group's connections are asked once per cycle. Expected
refusals are quiet: a topic or group that went away, a consumer offline, and a stats item the broker
does not have yet ("The stats <GROUP_GET_NUMS> <t@g> not exist", rocketmq-exporter#24/#77), which
is exported as 0 (nothing happened in the last minute). Other failures are counted by kind.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, DeferredSemaphore
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.admin.core import (
    DLQ_GROUP_TOPIC_PREFIX,
    MASTER_ID,
    RETRY_GROUP_TOPIC_PREFIX,
    AdminCore,
    retry_topic,
    select_broker_addr,
)
from rmqwire.admin.types import AdminError, PullStatus
from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.admin import (
    BrokerStatsItem,
    BrokerStatsName,
    ConsumerConnection,
    ConsumeStats,
)
from rmqwire.codec.commands.route import ClusterInfo, TopicRouteData
from rmqwire.errors import (
    BrokerResponseError,
    CodecError,
    ConnectionLostError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
)
from rmqwire.metrics.exporter.broker_runtime import BrokerRuntimeStats
from rmqwire.metrics.exporter.collector import RMQMetricsCollector
from rmqwire.model import MessageModel, MessageQueue

N = BrokerStatsName

#: Refusals that only say "nothing to report" (a topic or group gone, a consumer offline).
QUIET_CODES = {ResponseCode.TOPIC_NOT_EXIST, ResponseCode.CONSUMER_NOT_ONLINE,
               ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.BROADCAST_CONSUMPTION}


def is_stats_missing(e: BaseException) -> bool:
    """VIEW_BROKER_STATS_DATA's "The stats <NAME> <key> not exist" (no traffic yet)."""
    return (isinstance(e, BrokerResponseError) and e.code == ResponseCode.SYSTEM_ERROR
            and "not exist" in (e.remark or ""))


def error_kind(e: BaseException) -> str | None:
    """The kind an error is counted as; None for an expected refusal (not an error)."""
    if isinstance(e, RemotingTimeoutError):
        return "timeout"
    if isinstance(e, (RemotingConnectError, ConnectionLostError)):
        return "connect"
    if isinstance(e, RemotingError):
        return "remoting"
    if isinstance(e, BrokerResponseError):
        return None if e.code in QUIET_CODES or is_stats_missing(e) else "response"
    if isinstance(e, CodecError):
        return "decode"
    if isinstance(e, AdminError):
        return "admin"
    return "internal"


def fixed2(value: float) -> float:
    """Java's ``Utils.getFixedDouble``: two decimals."""
    return round(value, 2)


@dataclass(slots=True)
class CollectOptions:
    per_address: int = 16          # requests in flight to one broker or NameServer
    lag_time: bool = True          # pull the next unconsumed message of lagging queues
    client_metrics: bool = True    # ask each online consumer for its running info


@dataclass(slots=True)
class CycleReport:
    """What one cycle did: ``errors`` counts failures by (task, kind)."""

    started: float = 0.0
    duration: float = 0.0
    topics: int = 0
    groups: int = 0
    requests: int = 0
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    failed: bool = False           # the NameServer gave no cluster or topic list

    @property
    def ok(self) -> bool:
        return not self.failed and not self.errors


@dataclass(slots=True)
class BrokerInfo:
    cluster: str
    name: str
    master: str | None
    slaves: dict[int, str]


class Cycle:
    """Per-cycle state: routes and connections asked once, the limiter, the report."""

    def __init__(self, task: MetricsCollectTask, info: ClusterInfo) -> None:
        self.task = task
        self.admin = task.admin
        self.report = CycleReport(started=task.wall())
        self.brokers: dict[str, BrokerInfo] = {}
        for name, bd in (info.broker_addr_table or {}).items():
            addrs = dict(bd.broker_addrs or {})
            self.brokers[name] = BrokerInfo(bd.cluster or "", name, addrs.pop(MASTER_ID, None), addrs)
        self._sems: dict[str, DeferredSemaphore] = {}
        self._routes: dict[str, Deferred[TopicRouteData | None]] = {}
        self._connections: dict[str, Deferred[tuple[ConsumerConnection | None, str | None]]] = {}
        self.counted: set[str] = set()      # groups whose rocketmq_group_count is written
        self.spawned: list[Deferred[Any]] = []

    def cluster_of(self, broker_name: str, default: str = "") -> str:
        b = self.brokers.get(broker_name)
        return b.cluster if b else default

    async def call(self, addr: str, fn: Callable[..., Deferred[Any]], *args: Any, **kw: Any) -> Any:
        """``fn(*args)`` with at most ``per_address`` such calls in flight to ``addr``."""
        sem = self._sems.get(addr)
        if sem is None:
            sem = self._sems[addr] = DeferredSemaphore(self.task.options.per_address)
        await sem.acquire()
        self.report.requests += 1
        try:
            return await fn(*args, **kw)
        finally:
            sem.release()

    async def namesrv(self, fn: Callable[..., Deferred[Any]], *args: Any) -> Any:
        return await self.call("namesrv", fn, *args)

    def failed(self, task: str, e: BaseException) -> None:
        kind = error_kind(e)
        if kind is not None:
            self.report.errors[(task, kind)] += 1
            self.task.log.debug("{task}: {kind} error: {e!r}", task=task, kind=kind, e=e)

    async def guarded(self, task: str, coro: Awaitable[Any]) -> Any:
        try:
            return await coro
        except Exception as e:  # noqa: BLE001 - every failure is counted, none stops the cycle
            self.failed(task, e)
            return None

    def route(self, topic: str) -> Deferred[TopicRouteData | None]:
        """The topic's route, asked once per cycle (None when it is gone)."""
        d = self._routes.get(topic)
        if d is None:
            d = self._routes[topic] = Deferred.fromCoroutine(
                self.guarded("route", self.namesrv(self.admin.examine_topic_route_info, topic)))
        return _shared(d)

    def connection(self, group: str) -> Deferred[tuple[ConsumerConnection | None, str | None]]:
        """The group's consumer connections and the broker that answered, once per cycle."""
        d = self._connections.get(group)
        if d is None:
            d = self._connections[group] = Deferred.fromCoroutine(self._connection(group))
        return _shared(d)

    async def _connection(self, group: str) -> tuple[ConsumerConnection | None, str | None]:
        route = await self.route(retry_topic(group))
        for bd in (route.broker_datas if route else None) or []:
            addr = select_broker_addr(bd)
            if addr is None:
                continue
            try:
                conn = await self.call(addr, self.admin.examine_consumer_connection_info, group, addr)
            except Exception as e:  # noqa: BLE001
                self.failed("consumer_connection", e)
                continue
            return conn, addr
        return None, None

    def spawn(self, task: str, coro: Awaitable[Any]) -> None:
        self.spawned.append(Deferred.fromCoroutine(self.guarded(task, coro)))


def _shared(d: Deferred[Any]) -> Deferred[Any]:
    """A Deferred firing with ``d``'s result without consuming it (many awaiters, one request)."""
    out: Deferred[Any] = Deferred()

    def fire(result: Any) -> Any:
        out.callback(result) if not isinstance(result, Failure) else out.errback(result)
        return None if isinstance(result, Failure) else result

    d.addBoth(fire)
    return out


async def gather(coros: Iterable[Awaitable[Any]]) -> None:
    ds = [Deferred.fromCoroutine(c) for c in coros]  # type: ignore[arg-type]
    if ds:
        await DeferredList(ds, consumeErrors=True)


class MetricsCollectTask:
    """Runs cycles: ``await task.run_cycle()`` fills the collector and returns a CycleReport."""

    log = Logger()

    def __init__(self, admin: AdminCore, collector: RMQMetricsCollector,
                 options: CollectOptions | None = None,
                 wall: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.admin = admin
        self.collector = collector
        self.options = options or CollectOptions()
        self.wall = wall
        self.clock = clock

    async def run_cycle(self) -> CycleReport:
        t0 = self.clock()
        try:
            info = await self.admin.examine_broker_cluster_info()
            topics = sorted((await self.admin.fetch_all_topic_list()).topic_list or [])
        except Exception as e:  # noqa: BLE001 - reported as a failed cycle
            report = CycleReport(started=self.wall(), failed=True)
            report.errors[("namesrv", error_kind(e) or "response")] += 1
            self.log.warn("collection cycle: no cluster or topic list from the NameServer: {e}", e=e)
            report.duration = self.clock() - t0
            return report
        cycle = Cycle(self, info)
        cycle.report.topics = len(topics)
        await gather([
            *(self.broker_runtime(cycle, b) for b in cycle.brokers.values()),
            *(self.broker_stats(cycle, b) for b in cycle.brokers.values()),
            *(self.producers(cycle, b) for b in cycle.brokers.values()),
            *(self.topic(cycle, t) for t in topics),
        ])
        # client tasks were spawned as groups were found online; they may still run
        while cycle.spawned:
            spawned, cycle.spawned = cycle.spawned, []
            await DeferredList(spawned, consumeErrors=True)
        cycle.report.groups = len(cycle.counted)
        self.collector.expire()
        cycle.report.duration = self.clock() - t0
        return cycle.report

    # ---- brokers -------------------------------------------------------------------------------

    async def broker_runtime(self, cycle: Cycle, b: BrokerInfo) -> None:
        if not b.master:
            return
        master = await cycle.guarded("broker_runtime", self._runtime(cycle, b.master))
        if master is not None:
            labels = (b.cluster, b.master, "", master.version_desc, master.boot_timestamp,
                      master.version)
            for family, value in master.values.items():
                self.collector.put(family, labels, value)
        for slave_addr in b.slaves.values():
            slave = await cycle.guarded("broker_runtime", self._runtime(cycle, slave_addr))
            if master is None or slave is None:
                continue
            m, s = master.commit_log_max_offset, slave.commit_log_max_offset
            if m is not None and s is not None:
                self.collector.put("rocketmq_broker_commitlog_diff",
                                   (b.cluster, slave_addr, b.name), m - s)

    async def _runtime(self, cycle: Cycle, addr: str) -> BrokerRuntimeStats | None:
        table = await cycle.call(addr, self.admin.fetch_broker_runtime_stats, addr)
        return BrokerRuntimeStats.parse(table) if table else None

    async def broker_stats(self, cycle: Cycle, b: BrokerInfo) -> None:
        if not b.master:
            return
        labels = (b.cluster, b.master, b.name)
        for stats, family in ((N.BROKER_PUT_NUMS, "rocketmq_broker_tps"),
                              (N.BROKER_GET_NUMS, "rocketmq_broker_qps")):
            tps = await self._stats(cycle, "broker_stats", b.master, stats, b.cluster)
            if tps is not None:
                self.collector.put(family, labels, fixed2(tps.tps))

    async def producers(self, cycle: Cycle, b: BrokerInfo) -> None:
        if not b.master:
            return
        table = await cycle.guarded(
            "producer", cycle.call(b.master, self.admin.get_all_producer_info, b.master))
        for group, producers in ((table.data if table else None) or {}).items():
            self.collector.put("rocketmq_producer_count", (b.cluster, b.name, group),
                               -1 if producers is None else len(producers))

    async def _stats(self, cycle: Cycle, task: str, addr: str, name: str, key: str) -> Any:
        """A stats item's minute figures (zeros when the broker has none yet); None on error."""
        try:
            data = await cycle.call(addr, self.admin.view_broker_stats_data, addr, name, key)
        except Exception as e:  # noqa: BLE001
            if is_stats_missing(e):
                return BrokerStatsItem()
            cycle.failed(task, e)
            return None
        return data.stats_minute or BrokerStatsItem()

    # ---- topics --------------------------------------------------------------------------------

    async def topic(self, cycle: Cycle, topic: str) -> None:
        route = await cycle.route(topic)
        if route is None:
            return
        plain = not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
        work: list[Awaitable[Any]] = [self.topic_offset(cycle, topic, route)]
        if plain:
            work.append(self.topic_put_stats(cycle, topic, route))
        if not topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            work.append(self.topic_groups(cycle, topic, route, plain))
        await gather(work)

    async def topic_offset(self, cycle: Cycle, topic: str, route: TopicRouteData) -> None:
        sums: dict[str, int] = {}
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is None:
                continue
            stats = await cycle.guarded(
                "topic_offset", cycle.call(addr, self.admin.examine_topic_stats, topic, addr))
            for mq, off in ((stats.offset_table if stats else None) or {}).items():
                sums[mq.broker_name] = sums.get(mq.broker_name, 0) + off.max_offset
        for broker_name, total in sums.items():
            cluster = cycle.cluster_of(broker_name)
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                self.collector.put("rocketmq_topic_retry_offset", (cluster, broker_name, topic), total)
            elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                self.collector.put("rocketmq_topic_dlq_offset",
                                   (cluster, broker_name, topic[len(DLQ_GROUP_TOPIC_PREFIX):]), total)
            else:
                self.collector.put("rocketmq_producer_offset", (cluster, broker_name, topic), total)

    async def topic_put_stats(self, cycle: Cycle, topic: str, route: TopicRouteData) -> None:
        for bd in route.broker_datas or []:
            master = (bd.broker_addrs or {}).get(MASTER_ID)
            if not master:
                continue
            labels = (bd.cluster or cycle.cluster_of(bd.broker_name or ""), bd.broker_name or "", topic)
            for name, family in ((N.TOPIC_PUT_NUMS, "rocketmq_producer_tps"),
                                 (N.TOPIC_PUT_SIZE, "rocketmq_producer_message_size")):
                item = await self._stats(cycle, "topic_stats", master, name, topic)
                if item is not None:
                    self.collector.put(family, labels, fixed2(item.tps))

    async def topic_groups(self, cycle: Cycle, topic: str, route: TopicRouteData,
                           plain: bool) -> None:
        groups: set[str] = set()
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is None:
                continue
            found = await cycle.guarded("consume_by_who", cycle.call(
                addr, self.admin.query_topic_consume_by_who, topic, addr))
            groups.update((found.group_list if found else None) or [])
        await gather(self.group_on_topic(cycle, topic, group, route, plain) for group in sorted(groups))

    async def group_on_topic(self, cycle: Cycle, topic: str, group: str, route: TopicRouteData,
                             plain: bool) -> None:
        conn, conn_addr = await cycle.connection(group)
        online = len(conn.connection_set or []) if conn else 0
        if group not in cycle.counted:
            cycle.counted.add(group)
            caddr = ",".join(c.client_addr or "" for c in conn.connection_set or []) if conn else ""
            local = ",".join(c.client_id or "" for c in conn.connection_set or []) if conn else ""
            self.collector.put("rocketmq_group_count", (caddr, local, group), online, identity=(2,))
            if conn is not None and online and conn_addr and self.options.client_metrics:
                cycle.spawn("client", self.clients(cycle, group, conn, conn_addr))
        model = (conn.message_model if conn else None) or MessageModel.CLUSTERING
        work: list[Awaitable[Any]] = [self.consume_stats(cycle, topic, group, route, online, model)]
        if plain:
            work.append(self.group_get_stats(cycle, topic, group, route))
        await gather(work)

    async def consume_stats(self, cycle: Cycle, topic: str, group: str, route: TopicRouteData,
                            online: int, model: MessageModel) -> None:
        merged = ConsumeStats()
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is None:
                continue
            cs = await cycle.guarded("consume_stats", cycle.call(
                addr, self.admin.examine_consume_stats_on, addr, group, topic))
            merged.offset_table.update((cs.offset_table if cs else None) or {})
        table = merged.offset_table
        if not table:
            return
        if model is MessageModel.CLUSTERING:
            diff = sum(o.broker_offset - o.consumer_offset for o in table.values())
            family = ("rocketmq_group_retrydiff" if topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                      else "rocketmq_group_dlqdiff" if topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
                      else "rocketmq_group_diff")
            self.collector.put(family, (group, topic, str(online), str(model.value)), diff,
                               identity=(0, 1))
        offsets: dict[str, int] = {}
        for mq, o in table.items():
            offsets[mq.broker_name] = offsets.get(mq.broker_name, 0) + o.consumer_offset
        for broker_name, total in offsets.items():
            self.collector.put("rocketmq_consumer_offset",
                               (cycle.cluster_of(broker_name), broker_name, topic, group), total)
        if model is MessageModel.CLUSTERING and self.options.lag_time:
            await self.lag_time(cycle, topic, group, route, table)

    async def lag_time(self, cycle: Cycle, topic: str, group: str, route: TopicRouteData,
                       table: dict[MessageQueue, Any]) -> None:
        """Per broker, the longest time a next-to-consume message has waited since it was stored
        (0 for queues caught up: those need no pull)."""
        masters = {bd.broker_name: select_broker_addr(bd) for bd in route.broker_datas or []}
        lag: dict[str, float] = {}

        async def one(mq: MessageQueue, consumer_offset: int) -> None:
            addr = masters.get(mq.broker_name)
            if addr is None:
                return
            r = await cycle.guarded("lag_time", cycle.call(
                addr, self.admin.pull, mq, "*", consumer_offset, 1, broker_addr=addr))
            if r is not None and r.status is PullStatus.OFFSET_ILLEGAL:
                r = await cycle.guarded("lag_time", cycle.call(
                    addr, self.admin.pull, mq, "*", r.min_offset, 1, broker_addr=addr))
            if r is not None and r.status is PullStatus.FOUND and r.messages:
                ms = self.wall() * 1000 - r.messages[0].store_timestamp
                lag[mq.broker_name] = max(lag.get(mq.broker_name, 0.0), ms, 0.0)

        for mq in table:
            lag.setdefault(mq.broker_name, 0.0)
        await gather(one(mq, o.consumer_offset) for mq, o in table.items()
                     if o.broker_offset > o.consumer_offset)
        for broker_name, ms in lag.items():
            self.collector.put("rocketmq_group_get_latency_by_storetime",
                               (cycle.cluster_of(broker_name), broker_name, topic, group), ms)

    async def group_get_stats(self, cycle: Cycle, topic: str, group: str,
                              route: TopicRouteData) -> None:
        key = f"{topic}@{group}"
        for bd in route.broker_datas or []:
            master = (bd.broker_addrs or {}).get(MASTER_ID)
            if not master:
                continue
            labels = (bd.cluster or cycle.cluster_of(bd.broker_name or ""), bd.broker_name or "",
                      topic, group)
            for name, family, figure in (
                (N.GROUP_GET_NUMS, "rocketmq_consumer_tps", "tps"),
                (N.GROUP_GET_SIZE, "rocketmq_consumer_message_size", "tps"),
                (N.SNDBCK_PUT_NUMS, "rocketmq_send_back_nums", "sum"),   # Java: the minute's sum
            ):
                item = await self._stats(cycle, "group_stats", master, name, key)
                if item is not None:
                    v = getattr(item, figure)
                    self.collector.put(family, labels, fixed2(v) if figure == "tps" else v)

    # ---- clients -------------------------------------------------------------------------------

    async def clients(self, cycle: Cycle, group: str, conn: ConsumerConnection, addr: str) -> None:
        async def one(c: Any) -> None:
            info = await cycle.guarded("client", cycle.call(
                addr, self.admin.get_consumer_running_info, group, c.client_id, False,
                broker_addr=addr))
            for topic, st in ((info.status_table if info else None) or {}).items():
                labels = (c.client_addr or "", c.client_id or "", group, topic)
                put = self.collector.put
                put("rocketmq_client_consume_fail_msg_count", labels, st.consume_failed_msgs)
                put("rocketmq_client_consume_fail_msg_tps", labels, st.consume_failed_tps)
                put("rocketmq_client_consume_ok_msg_tps", labels, st.consume_ok_tps)
                put("rocketmq_client_consume_rt", labels, st.consume_rt)
                put("rocketmq_client_consumer_pull_rt", labels, st.pull_rt)
                put("rocketmq_client_consumer_pull_tps", labels, st.pull_tps)

        await gather(one(c) for c in conn.connection_set or [])
