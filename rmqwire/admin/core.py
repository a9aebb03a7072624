"""The Admin API's Twisted core: the operations of Java's ``DefaultMQAdminExt`` that the tools use.

Every public method returns a Deferred of a typed result (a codec body such as ``ClusterInfo``,
``TopicStatsTable``, ``ConsumeStats``, or a type of ``rmqwire.admin.types``) or fails with a typed
error: ``rmqwire.errors.BrokerResponseError`` subclasses for a peer's refusal (the code and remark
Java's ``MQClientException``/``MQBrokerException`` would carry), ``RemotingError`` for transport
failures, ``AdminError`` for what the Java tools raise themselves.

NameServers: the client instance of the producer work (rmqwire.client.instance) was not in the
repository when this was written, so the core owns a ``RemotingClient`` and a small sticky
NameServer choice that moves to the next address on a transport error (Java's
``NettyRemotingClient`` keeps one chosen NameServer and picks another when its channel fails).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from twisted.application.service import Service
from twisted.internet.defer import Deferred, FirstError, gatherResults
from twisted.logger import Logger

from rmqwire.admin.javautil import hashmap_order, load_properties
from rmqwire.admin.types import (
    AdminError,
    MessageTrack,
    PullResult,
    PullStatus,
    QueryResult,
    RollbackStats,
    TrackType,
)
from rmqwire.codec.codes import LanguageCode, ResponseCode
from rmqwire.codec.commands import Command, Response
from rmqwire.codec.commands.admin import (
    BrokerStatsData,
    CleanExpiredConsumeQueue,
    CleanUnusedTopic,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    DeleteExpiredCommitLog,
    DeleteSubscriptionGroup,
    GetAllProducerInfo,
    GetAllSubscriptionGroupConfig,
    GetBrokerConfig,
    GetBrokerConsumeStats,
    GetBrokerRuntimeInfo,
    GetConsumerConnectionList,
    GetConsumeStats,
    GetProducerConnectionList,
    GetSubscriptionGroupConfig,
    GroupList,
    OffsetWrapper,
    ProducerConnection,
    ProducerTableInfo,
    QueryTopicConsumeByWho,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    UpdateAndCreateSubscriptionGroup,
    UpdateBrokerConfig,
    ViewBrokerStatsData,
)
from rmqwire.codec.commands.consumer import (
    ConsumeMessageDirectly,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    GetConsumerRunningInfo,
)
from rmqwire.codec.commands.heartbeat import build_subscription_data
from rmqwire.codec.commands.namesrv import (
    AddWritePermOfBroker,
    DeleteKVConfig,
    DeleteTopicInNamesrv,
    GetAllTopicListFromNameserver,
    GetKVConfig,
    GetNamesrvConfig,
    GetTopicsByCluster,
    PutKVConfig,
    UpdateNamesrvConfig,
    WipeWritePermOfBroker,
)
from rmqwire.codec.commands.offset import (
    CloneGroupOffset,
    GetMaxOffset,
    GetMinOffset,
    InvokeBrokerToResetOffset,
    ResetOffsetBody,
    SearchOffsetByTimestamp,
    UpdateConsumerOffset,
)
from rmqwire.codec.commands.pull import PullMessage, PullSysFlag
from rmqwire.codec.commands.query import (
    QueryConsumeQueue,
    QueryConsumeQueueResponseBody,
    QueryMessage,
    ViewMessageById,
)
from rmqwire.codec.commands.route import (
    BrokerData,
    ClusterInfo,
    GetBrokerClusterInfo,
    GetRouteInfo,
    TopicRouteData,
)
from rmqwire.codec.commands.topic import (
    DeleteTopicInBroker,
    GetTopicConfig,
    GetTopicStatsInfo,
    TopicConfig,
    TopicList,
    TopicStatsTable,
    UpdateAndCreateTopic,
)
from rmqwire.codec.ids import parse_offset_msg_id
from rmqwire.codec.message import MessageExt, PropertyKey, decode_messages
from rmqwire.errors import (
    BrokerResponseError,
    CodecError,
    MQClientError,
    RemotingError,
    for_code,
)
from rmqwire.model import ConsumeType, MessageModel, MessageQueue, TopicFilterType
from rmqwire.remoting.client import RemotingClient
from rmqwire.remoting.config import RemotingConfig

T = TypeVar("T")

#: Java ``DefaultMQAdminExt``'s default timeout (5000 ms) for each request.
DEFAULT_TIMEOUT = 5.0
#: ``MixAll`` names.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
MASTER_ID = 0
#: ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``.
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
#: Java's pull consumer: ``brokerSuspendMaxTimeMillis`` and ``consumerPullTimeoutMillis``.
PULL_SUSPEND_MS = 20_000
PULL_TIMEOUT = 10.0


def deferred(fn: Callable[..., Awaitable[T]]) -> Callable[..., Deferred[T]]:
    """Run a coroutine method as a Deferred (the core's public methods return Deferreds)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Deferred[T]:
        return Deferred.fromCoroutine(fn(*args, **kwargs))  # type: ignore[arg-type]

    return wrapper


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def is_lmq(topic: str | None) -> bool:
    return bool(topic) and topic.startswith("%LMQ%")  # type: ignore[union-attr]


#: Java stack frames where the tools' exceptions are made (5.3.3 sources), for the text of
#: ``UtilAll.exceptionSimpleDesc`` that mqadmin shows in message tracks.
ROUTE_FRAME = ("org.apache.rocketmq.client.impl.MQClientAPIImpl.getTopicRouteInfoFromNameServer"
               "(MQClientAPIImpl.java:1998)")
NOT_ONLINE_FRAME = ("org.apache.rocketmq.tools.admin.DefaultMQAdminExtImpl."
                    "examineConsumerConnectionInfo(DefaultMQAdminExtImpl.java:616)")
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def java_client_exception(e: BrokerResponseError) -> str:
    """``MQClientException.toString`` for a code and remark (FAQ link added as Java does)."""
    message = f"CODE: {e.code}  DESC: {e.remark}"
    if "\nSee " not in message:
        message += f"\nFor more information, please visit the url, {FAQ_URL}"
    return f"org.apache.rocketmq.client.exception.MQClientException: {message}"


def exception_simple_desc(e: Exception) -> str:
    """``UtilAll.exceptionSimpleDesc``: the exception and the frame Java made it in."""
    frame = getattr(e, "java_frame", None)
    if isinstance(e, BrokerResponseError):
        text = java_client_exception(e)
    else:
        text = f"{type(e).__name__}: {e}"
    return f"{text}, {frame}" if frame else text


def select_broker_addr(bd: BrokerData) -> str | None:
    """``BrokerData.selectBrokerAddr``: the master, else any slave (Java picks one at random)."""
    addrs = bd.broker_addrs or {}
    master = addrs.get(MASTER_ID)
    if master is not None:
        return master
    return random.choice(list(addrs.values())) if addrs else None


def properties_text(props: Mapping[str, str]) -> bytes:
    """``MixAll.properties2String``: ``key=value`` lines, UTF-8."""
    return "".join(f"{k}={v}\n" for k, v in props.items() if v is not None).encode("utf-8")


def parse_properties(data: bytes | None) -> dict[str, str]:
    """``MixAll.string2Properties`` (``Properties.load``): keys in the order of the text."""
    return load_properties(data or b"")


class NamesrvChooser:
    """The NameServer addresses and the one in use; a transport error moves to the next one."""

    def __init__(self, addrs: Sequence[str], rng: random.Random | None = None) -> None:
        self.addrs = tuple(addrs)
        self._index = (rng or random.Random()).randrange(len(self.addrs)) if self.addrs else 0

    def order(self) -> list[str]:
        """Every address, the current one first."""
        n = len(self.addrs)
        return [self.addrs[(self._index + i) % n] for i in range(n)]

    def failed(self, addr: str) -> None:
        if self.addrs and self.addrs[self._index % len(self.addrs)] == addr:
            self._index = (self._index + 1) % len(self.addrs)


class AdminCore(Service):
    """DefaultMQAdminExt's operations over typed remoting calls; the reactor is injected."""

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        namesrv_addr: str | Sequence[str],
        *,
        config: RemotingConfig | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        remoting: RemotingClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        addrs = namesrv_addr.split(";") if isinstance(namesrv_addr, str) else list(namesrv_addr)
        addrs = [a.strip() for a in addrs if a and a.strip()]
        if not addrs:
            raise AdminError("no NameServer address (give -n or set NAMESRV_ADDR)")
        self.reactor = reactor
        self.timeout = timeout
        self.config = config if config is not None else RemotingConfig(call_timeout=timeout)
        self.remoting = remoting if remoting is not None else RemotingClient(reactor, self.config)
        self.namesrv = NamesrvChooser(addrs, rng)
        self.rng = rng or random.Random()

    # ---- lifecycle -----------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        self.remoting.startService()

    def stopService(self) -> Deferred[None]:
        super().stopService()
        return self.remoting.close()

    # ---- plumbing ------------------------------------------------------------------------------

    @property
    def name_server_address_list(self) -> list[str]:
        return list(self.namesrv.addrs)

    async def call(self, addr: str, command: type[Command], *, timeout: float | None = None,
                   body: Any = None, **fields: Any) -> Response[Any, Any]:
        return await self.remoting.call(addr, command, body=body,
                                        timeout=timeout or self.timeout, **fields)

    async def call_as(self, addr: str, command: type[Command], *, language: LanguageCode | None = None,
                      extra: Mapping[str, str] | None = None, timeout: float | None = None,
                      **fields: Any) -> Response[Any, Any]:
        """A call with another language in the frame, or extra ext fields beside the header's
        (what Java does for a C++ reset and for the unique-key query)."""
        request = command.request(language=language or self.config.language,
                                  version=self.config.version, **fields)
        if extra:
            request = dataclasses.replace(request, ext_fields={**(request.ext_fields or {}), **extra})
        cmd = await self.remoting.invoke(addr, request, timeout or self.timeout)
        return command.parse_response(cmd)

    async def call_namesrv(self, command: type[Command], *, body: Any = None,
                           **fields: Any) -> Response[Any, Any]:
        """Call the NameServer in use; on a transport error try the others in turn."""
        last: Exception | None = None
        for addr in self.namesrv.order():
            try:
                return await self.call(addr, command, body=body, **fields)
            except RemotingError as e:
                self.namesrv.failed(addr)
                last = e
        assert last is not None
        raise last

    # ---- NameServer: routes, clusters, topics --------------------------------------------------

    @deferred
    async def examine_broker_cluster_info(self) -> ClusterInfo:
        return (await self.call_namesrv(GetBrokerClusterInfo)).body

    @deferred
    async def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        return await self._route(topic)

    async def _route(self, topic: str) -> TopicRouteData:
        try:
            r = await self.call_namesrv(GetRouteInfo, topic=topic)
        except BrokerResponseError as e:
            e.java_frame = ROUTE_FRAME  # type: ignore[attr-defined]
            raise
        if r.body is None:  # Java: an empty SUCCESS answer is "no route" too
            e = for_code(ResponseCode.TOPIC_NOT_EXIST,
                         f"No topic route info in name server for the topic: {topic}")
            e.java_frame = ROUTE_FRAME  # type: ignore[attr-defined]
            raise e
        return r.body

    @deferred
    async def fetch_all_topic_list(self) -> TopicList:
        return (await self.call_namesrv(GetAllTopicListFromNameserver)).body or TopicList()

    @deferred
    async def fetch_topics_by_cluster(self, cluster: str) -> TopicList:
        return (await self.call_namesrv(GetTopicsByCluster, cluster=cluster)).body or TopicList()

    @deferred
    async def get_topic_cluster_list(self, topic: str) -> list[str]:
        """The clusters holding the first broker of the topic's route (Java's HashSet, unordered)."""
        info = (await self.call_namesrv(GetBrokerClusterInfo)).body
        route = await self._route(topic)
        if not route.broker_datas:
            raise AdminError(f"topic {topic} has no broker in its route")
        name = route.broker_datas[0].broker_name
        return [c for c, names in (info.cluster_addr_table or {}).items() if name in names]

    # ---- NameServer: KV config, permissions, config --------------------------------------------

    @deferred
    async def create_and_update_kv_config(self, namespace: str, key: str, value: str) -> None:
        await self._each_namesrv(PutKVConfig, namespace=namespace, key=key, value=value)

    @deferred
    async def delete_kv_config(self, namespace: str, key: str) -> None:
        await self._each_namesrv(DeleteKVConfig, namespace=namespace, key=key)

    async def _each_namesrv(self, command: type[Command], **fields: Any) -> None:
        """Java writes KV config to every NameServer and fails on the last refusal."""
        error: BrokerResponseError | None = None
        for addr in self.namesrv.addrs:
            try:
                await self.call(addr, command, **fields)
            except BrokerResponseError as e:
                error = e
        if error is not None:
            raise error

    @deferred
    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        r = await self.call_namesrv(GetKVConfig, namespace=namespace, key=key)
        if r.code == ResponseCode.QUERY_NOT_FOUND:
            raise for_code(r.code, r.remark)
        return r.header.value if r.header is not None else None

    @deferred
    async def wipe_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        r = await self.call(namesrv_addr, WipeWritePermOfBroker, broker_name=broker_name)
        return r.header.wipe_topic_count or 0

    @deferred
    async def add_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        r = await self.call(namesrv_addr, AddWritePermOfBroker, broker_name=broker_name)
        return r.header.add_topic_count or 0

    @deferred
    async def get_name_server_config(
        self, namesrv_addrs: Sequence[str] | None = None
    ) -> dict[str, dict[str, str]]:
        """NameServer address -> its config (in the order of its answer)."""
        out: dict[str, dict[str, str]] = {}
        for addr in namesrv_addrs or self.namesrv.addrs:
            r = await self.call(addr, GetNamesrvConfig)
            out[addr] = parse_properties(r.body)
        return out

    @deferred
    async def update_name_server_config(
        self, properties: Mapping[str, str], namesrv_addrs: Sequence[str] | None = None
    ) -> None:
        body = properties_text(properties)
        if not body:
            return
        error: BrokerResponseError | None = None
        for addr in namesrv_addrs or self.namesrv.addrs:
            try:
                await self.call(addr, UpdateNamesrvConfig, body=body)
            except BrokerResponseError as e:
                error = e
        if error is not None:
            raise error

    @deferred
    async def create_or_update_order_conf(self, key: str, value: str, is_cluster: bool) -> None:
        """``createOrUpdateOrderConf``: the ORDER_TOPIC_CONFIG entry of a topic; without
        ``is_cluster`` the value's brokerName:num entries are merged into the existing ones."""
        if not is_cluster:
            old = None
            try:
                old = await self.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, key)
            except BrokerResponseError:
                pass
            merged: dict[str, str] = {}
            for item in (old or "").split(";"):
                if item.strip():
                    merged[item.split(":")[0]] = item
            merged[value.split(":")[0]] = value
            value = ";".join(merged[k] for k in hashmap_order(merged))  # Java: a HashMap
        await self._each_namesrv(PutKVConfig, namespace=NAMESPACE_ORDER_TOPIC_CONFIG, key=key,
                                 value=value)

    # ---- brokers: runtime, config, stats -------------------------------------------------------

    @deferred
    async def fetch_broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        r = await self.call(broker_addr, GetBrokerRuntimeInfo)
        return dict(r.body.table or {}) if r.body is not None else {}

    @deferred
    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's config in the order of its answer."""
        r = await self.call(broker_addr, GetBrokerConfig)
        return parse_properties(r.body)

    @deferred
    async def update_broker_config(self, broker_addr: str, properties: Mapping[str, str]) -> None:
        body = properties_text(properties)
        if body:
            await self.call(broker_addr, UpdateBrokerConfig, body=body)

    @deferred
    async def view_broker_stats_data(self, broker_addr: str, stats_name: str,
                                     stats_key: str) -> BrokerStatsData:
        r = await self.call(broker_addr, ViewBrokerStatsData, stats_name=stats_name,
                            stats_key=stats_key)
        if r.body is None:
            raise AdminError("no broker stats data", response_code=ResponseCode.SUCCESS)
        return BrokerStatsData.decode(r.body)

    @deferred
    async def get_all_producer_info(self, broker_addr: str) -> ProducerTableInfo:
        """The producers of every producer group on one broker."""
        r = await self.call(broker_addr, GetAllProducerInfo)
        return ProducerTableInfo.decode(r.body or b"{}")

    @deferred
    async def fetch_consume_stats_in_broker(self, broker_addr: str, is_order: bool = False,
                                            timeout: float | None = None) -> ConsumeStatsList:
        r = await self.call(broker_addr, GetBrokerConsumeStats, is_order=is_order, timeout=timeout)
        return r.body or ConsumeStatsList()

    @deferred
    async def clean_expired_consumer_queue(self, cluster: str | None = None,
                                           broker_addr: str | None = None) -> bool:
        return await self._broker_chore(CleanExpiredConsumeQueue, cluster, broker_addr)

    @deferred
    async def delete_expired_commit_log(self, cluster: str | None = None,
                                        broker_addr: str | None = None) -> bool:
        return await self._broker_chore(DeleteExpiredCommitLog, cluster, broker_addr)

    @deferred
    async def clean_unused_topic(self, cluster: str | None = None,
                                 broker_addr: str | None = None) -> bool:
        return await self._broker_chore(CleanUnusedTopic, cluster, broker_addr)

    async def _broker_chore(self, command: type[Command], cluster: str | None,
                            broker_addr: str | None) -> bool:
        """One broker, or every broker of a cluster (of every cluster); the last answer counts."""
        if broker_addr:
            await self.call(broker_addr, command)
            return True
        info = (await self.call_namesrv(GetBrokerClusterInfo)).body
        result = False
        clusters = [cluster] if cluster else list(info.cluster_addr_table or {})
        for name in clusters:
            for addr in all_addrs_of_cluster(info, name):
                await self.call(addr, command)
                result = True
        return result

    # ---- topics on brokers ---------------------------------------------------------------------

    @deferred
    async def create_and_update_topic_config(self, broker_addr: str, config: TopicConfig) -> None:
        attrs = config.attributes or {}
        await self.call(
            broker_addr, UpdateAndCreateTopic,
            topic=config.topic_name, default_topic="TBW102",
            read_queue_nums=config.read_queue_nums, write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=(config.topic_filter_type or TopicFilterType.SINGLE_TAG).name,
            topic_sys_flag=config.topic_sys_flag, order=config.order,
            # AttributeParser.parseToString over Java's HashMap
            attributes=",".join(f"{k}={attrs[k]}" if attrs[k] else k
                                for k in hashmap_order(attrs)) or None,
        )

    @deferred
    async def examine_topic_config(self, broker_addr: str, topic: str) -> TopicConfig:
        r = await self.call(broker_addr, GetTopicConfig, topic=topic, lo=True)
        return TopicConfig.decode(r.body or b"{}")

    @deferred
    async def examine_topic_stats(self, topic: str, broker_addr: str | None = None) -> TopicStatsTable:
        """One broker's stats of the topic, or those of every broker in its route."""
        if broker_addr is not None:
            return (await self.call(broker_addr, GetTopicStatsInfo, topic=topic)).body
        route = await self._route(topic)
        table = TopicStatsTable()
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is not None:
                tst = (await self.call(addr, GetTopicStatsInfo, topic=topic)).body
                table.offset_table.update(tst.offset_table or {})
        if not table.offset_table:
            raise AdminError("Not found the topic stats info")
        return table

    @deferred
    async def delete_topic(self, topic: str, cluster: str) -> None:
        """From every broker of the cluster, then from every NameServer."""
        info = (await self.call_namesrv(GetBrokerClusterInfo)).body
        for addr in set(all_addrs_of_cluster(info, cluster)):
            await self.call(addr, DeleteTopicInBroker, topic=topic)
        for addr in self.namesrv.addrs:
            await self.call(addr, DeleteTopicInNamesrv, topic=topic)

    @deferred
    async def delete_topic_in_broker(self, broker_addrs: Iterable[str], topic: str) -> None:
        for addr in broker_addrs:
            await self.call(addr, DeleteTopicInBroker, topic=topic)

    @deferred
    async def delete_topic_in_name_server(self, namesrv_addrs: Iterable[str] | None, topic: str,
                                          cluster: str | None = None) -> None:
        for addr in namesrv_addrs or self.namesrv.addrs:
            await self.call(addr, DeleteTopicInNamesrv, topic=topic, cluster_name=cluster)

    # ---- subscription groups -------------------------------------------------------------------

    @deferred
    async def create_and_update_subscription_group_config(
        self, broker_addr: str, config: SubscriptionGroupConfig
    ) -> None:
        await self.call(broker_addr, UpdateAndCreateSubscriptionGroup, body=config)

    @deferred
    async def examine_subscription_group_config(self, broker_addr: str,
                                                group: str) -> SubscriptionGroupConfig | None:
        r = await self.call(broker_addr, GetSubscriptionGroupConfig, group=group)
        return r.body

    @deferred
    async def get_all_subscription_group(self, broker_addr: str) -> SubscriptionGroupWrapper:
        r = await self.call(broker_addr, GetAllSubscriptionGroupConfig)
        return r.body or SubscriptionGroupWrapper()

    @deferred
    async def delete_subscription_group(self, broker_addr: str, group: str,
                                        remove_offset: bool = False) -> None:
        await self.call(broker_addr, DeleteSubscriptionGroup, group_name=group,
                        clean_offset=remove_offset)

    # ---- consumers and producers ---------------------------------------------------------------

    @deferred
    async def examine_consume_stats(self, group: str, topic: str | None = None,
                                    cluster: str | None = None) -> ConsumeStats:
        return await self._consume_stats(group, topic, cluster)

    async def _consume_stats(self, group: str, topic: str | None = None,
                             cluster: str | None = None) -> ConsumeStats:
        route_topics = [retry_topic(group)]
        if topic is not None:
            route_topics += [topic, f"%RETRY%{group}_{topic}"]  # KeyBuilder.buildPopRetryTopic
        if topic and (is_lmq(topic) or topic == "rmq_sys_wheel_timer") and cluster:
            route_topics.append(cluster)
        route: TopicRouteData | None = None
        for i, t in enumerate(route_topics):
            try:
                route = await self._route(t)
                break
            except (BrokerResponseError, RemotingError):
                if i == len(route_topics) - 1:
                    raise
        assert route is not None
        result = ConsumeStats()
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is not None:
                r = await self.call(addr, GetConsumeStats, consumer_group=group, topic=topic,
                                    timeout=self.timeout * 3)
                result.offset_table.update(r.body.offset_table or {})
                result.consume_tps += r.body.consume_tps
                if r.command is not None:
                    result.broker_version = min(result.broker_version or r.command.version,
                                                r.command.version)
        if not result.offset_table:
            try:
                cc = await self._consumer_connection(group)
            except (BrokerResponseError, RemotingError, AdminError):
                raise for_code(
                    ResponseCode.CONSUMER_NOT_ONLINE,
                    "Not found the consumer group consume stats, because return offset table is "
                    "empty, maybe the consumer not online") from None
            if cc.message_model == MessageModel.BROADCASTING:
                raise for_code(
                    ResponseCode.BROADCAST_CONSUMPTION,
                    "Not found the consumer group consume stats, because return offset table is "
                    "empty, the consumer is under the broadcast mode")
        return result

    @deferred
    async def examine_consume_stats_on(self, broker_addr: str, group: str,
                                       topic: str | None = None,
                                       timeout: float | None = None) -> ConsumeStats:
        """One broker's consume stats of the group (of one topic, or of all its topics)."""
        r = await self.call(broker_addr, GetConsumeStats, consumer_group=group, topic=topic,
                            timeout=timeout or self.timeout * 3)
        return r.body or ConsumeStats()

    @deferred
    async def examine_consumer_connection_info(self, group: str,
                                               broker_addr: str | None = None) -> ConsumerConnection:
        return await self._consumer_connection(group, broker_addr)

    async def _consumer_connection(self, group: str,
                                   broker_addr: str | None = None) -> ConsumerConnection:
        addr = broker_addr
        if addr is None:
            route = await self._route(retry_topic(group))
            if route.broker_datas:
                addr = select_broker_addr(self.rng.choice(route.broker_datas))
        result = ConsumerConnection()
        if addr:
            result = (await self.call(addr, GetConsumerConnectionList, consumer_group=group)).body
        if not result.connection_set:
            e = for_code(ResponseCode.CONSUMER_NOT_ONLINE, "Not found the consumer group connection")
            e.java_frame = NOT_ONLINE_FRAME  # type: ignore[attr-defined]
            raise e
        return result

    @deferred
    async def examine_producer_connection_info(self, group: str, topic: str) -> ProducerConnection:
        route = await self._route(topic)
        result = ProducerConnection()
        if route.broker_datas:
            addr = select_broker_addr(self.rng.choice(route.broker_datas))
            if addr:
                r = await self.call(addr, GetProducerConnectionList, producer_group=group)
                result = ProducerConnection.decode(r.body or b"{}")
        if not result.connection_set:
            raise AdminError("Not found the producer group connection")
        return result

    @deferred
    async def query_topic_consume_by_who(self, topic: str,
                                         broker_addr: str | None = None) -> GroupList:
        """The groups consuming the topic: from one broker, else from the first of its route."""
        if broker_addr is not None:
            r = await self.call(broker_addr, QueryTopicConsumeByWho, topic=topic)
            return r.body or GroupList()
        return await self._consume_by_who(topic)

    async def _consume_by_who(self, topic: str) -> GroupList:
        route = await self._route(topic)
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is not None:
                return (await self.call(addr, QueryTopicConsumeByWho, topic=topic)).body or GroupList()
        return GroupList()

    @deferred
    async def get_consumer_running_info(self, group: str, client_id: str, jstack: bool = False,
                                        broker_addr: str | None = None) -> ConsumerRunningInfo | None:
        """Asked through ``broker_addr`` (a broker the client is connected to), else through the
        first broker of the group's retry topic route."""
        addrs = [broker_addr] if broker_addr else [
            select_broker_addr(bd) for bd in (await self._route(retry_topic(group))).broker_datas or []]
        for addr in addrs:
            if addr is not None:
                r = await self.call(addr, GetConsumerRunningInfo, consumer_group=group,
                                    client_id=client_id, jstack_enable=jstack)
                return r.body
        return None

    @deferred
    async def consume_message_directly(self, group: str, client_id: str, topic: str, msg_id: str,
                                       cluster: str | None = None) -> ConsumeMessageDirectlyResult:
        """Java ``consumeMessageDirectly``: the message's broker hands it to the consumer
        ``client_id`` of ``group`` (CONSUME_MESSAGE_DIRECTLY), which reports how its listener did."""
        msg = await self.view_message(topic, msg_id, cluster)
        if PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX in msg.properties:
            msg_id = msg.offset_msg_id
        host, port = msg.store_host
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        r = await self.call(addr, ConsumeMessageDirectly, consumer_group=group, client_id=client_id,
                            msg_id=msg_id, topic=topic)
        return ConsumeMessageDirectlyResult.decode(r.body or b"{}")

    @deferred
    async def clone_group_offset(self, src_group: str, dest_group: str, topic: str,
                                 offline: bool) -> None:
        route = await self._route(retry_topic(src_group))
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is not None:
                await self.call(addr, CloneGroupOffset, src_group=src_group,
                                dest_group=dest_group, topic=topic, offline=offline)

    # ---- offsets -------------------------------------------------------------------------------

    @deferred
    async def reset_offset_by_timestamp(self, topic: str, group: str, timestamp: int,
                                        force: bool = True, cluster: str | None = None,
                                        is_c: bool = False) -> dict[MessageQueue, int]:
        """Ask each broker to reset the group's online consumers to ``timestamp``; the new offset
        of every queue. CONSUMER_NOT_ONLINE when no consumer of the group is online."""
        route_topic = cluster if (is_lmq(topic) or topic == "rmq_sys_wheel_timer") and cluster else topic
        route = await self._route(route_topic)
        out: dict[MessageQueue, int] = {}
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is None:
                continue
            r = await self.call_as(addr, InvokeBrokerToResetOffset, topic=topic, group=group,
                                   timestamp=timestamp, is_force=force, offset=-1,
                                   language=LanguageCode.CPP if is_c else None)
            if r.body is not None:
                out.update(ResetOffsetBody.decode(r.body).offset_table or {})
        return out

    @deferred
    async def reset_offset_by_timestamp_old(
        self, group: str, topic: str, timestamp: int, force: bool, cluster: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[RollbackStats]:
        """The tool writes the offsets itself (for a group with no consumer online);
        ``progress(1)`` is called (in the reactor thread) after each queue."""
        route_topic = cluster if (is_lmq(topic) or topic == "rmq_sys_wheel_timer") and cluster else topic
        route = await self._route(route_topic)
        queue_datas = {q.broker_name: q for q in route.queue_datas or []}
        out: list[RollbackStats] = []
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is None:
                continue
            cs = (await self.call(addr, GetConsumeStats, consumer_group=group)).body
            consumed = False
            for mq, ow in (cs.offset_table or {}).items():
                if mq.topic == topic:
                    consumed = True
                    out.append(await self._rollback(addr, group, mq, ow, timestamp, force))
                    if progress is not None:
                        progress(1)
            if not consumed:
                stats = (await self.call(addr, GetTopicStatsInfo, topic=topic)).body.offset_table or {}
                qd = queue_datas.get(bd.broker_name)
                for qid in range(qd.read_queue_nums if qd else 0):
                    mq = MessageQueue(topic, bd.broker_name or "", qid)
                    to = stats[mq]
                    ow = OffsetWrapper(broker_offset=to.max_offset, consumer_offset=to.min_offset)
                    out.append(await self._rollback(addr, group, mq, ow, timestamp, force))
                    if progress is not None:
                        progress(1)
        return out

    async def _rollback(self, addr: str, group: str, mq: MessageQueue, ow: OffsetWrapper,
                        timestamp: int, force: bool) -> RollbackStats:
        if timestamp == -1:
            r = await self.call(addr, GetMaxOffset, topic=mq.topic, queue_id=mq.queue_id)
        else:
            r = await self.call(addr, SearchOffsetByTimestamp, topic=mq.topic,
                                queue_id=mq.queue_id, timestamp=timestamp)
        reset = r.header.offset
        stats = RollbackStats(mq.broker_name, mq.queue_id, ow.broker_offset, ow.consumer_offset,
                              reset, ow.consumer_offset)
        if force or reset <= ow.consumer_offset:
            stats.rollback_offset = reset
            await self.call(addr, UpdateConsumerOffset, consumer_group=group, topic=mq.topic,
                            queue_id=mq.queue_id, commit_offset=reset, bname=mq.broker_name)
        return stats

    @deferred
    async def reset_offset_by_queue_id(self, broker_addr: str, group: str, topic: str,
                                       queue_id: int, offset: int) -> None:
        await self.call(broker_addr, UpdateConsumerOffset, consumer_group=group, topic=topic,
                        queue_id=queue_id, commit_offset=offset)
        await self.call(broker_addr, InvokeBrokerToResetOffset, topic=topic, group=group,
                        timestamp=0, is_force=False, queue_id=queue_id, offset=offset)

    @deferred
    async def update_consume_offset(self, broker_addr: str, group: str, mq: MessageQueue,
                                    offset: int) -> None:
        await self.call(broker_addr, UpdateConsumerOffset, consumer_group=group, topic=mq.topic,
                        queue_id=mq.queue_id, commit_offset=offset, bname=mq.broker_name)

    async def _master_of(self, mq: MessageQueue) -> str:
        route = await self._route(mq.topic)
        for bd in route.broker_datas or []:
            if bd.broker_name == mq.broker_name:
                addr = (bd.broker_addrs or {}).get(MASTER_ID)
                if addr:
                    return addr
        raise AdminError(f"The broker[{mq.broker_name}] not exist")

    @deferred
    async def min_offset(self, mq: MessageQueue) -> int:
        addr = await self._master_of(mq)
        r = await self.call(addr, GetMinOffset, topic=mq.topic, queue_id=mq.queue_id,
                            bname=mq.broker_name)
        return r.header.offset

    @deferred
    async def max_offset(self, mq: MessageQueue) -> int:
        addr = await self._master_of(mq)
        r = await self.call(addr, GetMaxOffset, topic=mq.topic, queue_id=mq.queue_id,
                            bname=mq.broker_name)
        return r.header.offset

    @deferred
    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        addr = await self._master_of(mq)
        r = await self.call(addr, SearchOffsetByTimestamp, topic=mq.topic, queue_id=mq.queue_id,
                            timestamp=timestamp, bname=mq.broker_name)
        return r.header.offset

    @deferred
    async def search_offset_on(self, broker_addr: str, topic: str, queue_id: int, timestamp: int,
                               timeout: float | None = None) -> int:
        """The queue offset of ``timestamp`` on one broker (Java's deprecated searchOffset)."""
        r = await self.call(broker_addr, SearchOffsetByTimestamp, topic=topic, queue_id=queue_id,
                            timestamp=timestamp, timeout=timeout)
        return r.header.offset

    @deferred
    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of the topic (``topicRouteData2TopicSubscribeInfo``), in route order."""
        route = await self._route(topic)
        return subscribe_queues(topic, route)

    # ---- messages ------------------------------------------------------------------------------

    @deferred
    async def view_message(self, topic: str, msg_id: str, cluster: str | None = None) -> MessageExt:
        """By offset message id (VIEW_MESSAGE_BY_ID), else by unique key over the last 3 days."""
        try:
            oid = parse_offset_msg_id(msg_id)
        except CodecError:
            oid = None
        if oid is not None:
            try:
                host, port = oid.store_host
                addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
                r = await self.call(addr, ViewMessageById, topic=topic, offset=oid.commit_log_offset)
                (msg,) = decode_messages(r.body or b"")[:1] or (None,)
                if msg is not None:
                    return msg
            except (BrokerResponseError, RemotingError, CodecError) as e:
                self.log.debug("view message {id} by offset failed ({e}); trying the unique key",
                               id=msg_id, e=e)
        now = int(self.reactor.seconds() * 1000)
        qr = await self._query(topic, msg_id, 32, now - 3 * 24 * 3600 * 1000, 2**63 - 1, cluster,
                               unique=True)
        if not qr.messages:
            raise for_code(ResponseCode.NO_MESSAGE, "query message by id finished, but no message.")
        return qr.messages[0]

    @deferred
    async def query_message(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                            end: int = 2**63 - 1, cluster: str | None = None,
                            unique: bool = False) -> QueryResult:
        return await self._query(topic, key, max_num, begin, end, cluster, unique=unique)

    @deferred
    async def query_message_by_uniq_key(self, topic: str, key: str, max_num: int = 32,
                                        begin: int = 0, end: int = 2**63 - 1,
                                        cluster: str | None = None) -> QueryResult:
        return await self._query(topic, key, max_num, begin, end, cluster, unique=True)

    async def _query(self, topic: str, key: str, max_num: int, begin: int, end: int,
                     cluster: str | None, *, unique: bool) -> QueryResult:
        lmq = is_lmq(topic)
        route_topic = cluster if (lmq or topic == "rmq_sys_wheel_timer") and cluster else topic
        route = await self._route(route_topic)
        addrs = []
        for bd in route.broker_datas or []:
            if not lmq and cluster and cluster != bd.cluster:
                continue
            addr = select_broker_addr(bd)
            if addr is not None:
                addrs.append(addr)
        if not addrs:
            raise AdminError(f"The topic[{topic}] not matched route info")
        results: list[QueryResult] = []
        for addr in addrs:
            try:
                r = await self._query_one(addr, cluster if lmq else topic, key, max_num, begin,
                                          end, unique)
            except (BrokerResponseError, RemotingError):
                continue  # Java logs and goes on with the other brokers
            results.append(r)
        last = max((r.index_last_update_timestamp for r in results), default=0)
        found: list[MessageExt] = []
        for qr in results:
            for msg in qr.messages:
                if unique:
                    if msg.msg_id == key:
                        found.append(msg)
                elif msg.keys is not None:
                    if key in msg.keys.split(" ") and (lmq or msg.topic == topic):
                        found.append(msg)
        if not found:  # Java's MQClientException(NO_MESSAGE, ...)
            raise for_code(ResponseCode.NO_MESSAGE, "query message by key finished, but no message.")
        return QueryResult(last, found)

    async def _query_one(self, addr: str, topic: str | None, key: str, max_num: int, begin: int,
                         end: int, unique: bool) -> QueryResult:
        r = await self.call_as(addr, QueryMessage, topic=topic, key=key, max_num=max_num,
                               begin_timestamp=begin, end_timestamp=end,
                               extra={"_UNIQUE_KEY_QUERY": "true"} if unique else None,
                               timeout=self.timeout * 3)
        return QueryResult(r.header.index_last_update_timestamp or 0,
                           decode_messages(r.body or b""))

    @deferred
    async def pull_queues(self, requests: Sequence[tuple[MessageQueue, int]], sub_expression: str,
                          max_nums: int, group: str = TOOLS_CONSUMER_GROUP) -> list[PullResult]:
        """One pull of each (queue, offset), all at once; the results in the same order."""
        pulls = [self.pull(mq, sub_expression, offset, max_nums, group) for mq, offset in requests]
        try:
            return await gatherResults(pulls, consumeErrors=True)
        except FirstError as e:
            raise e.subFailure.value from None

    @deferred
    async def pull(self, mq: MessageQueue, sub_expression: str, offset: int,
                   max_nums: int, group: str = TOOLS_CONSUMER_GROUP,
                   broker_addr: str | None = None) -> PullResult:
        """One pull of a queue as Java's ``DefaultMQPullConsumer.pull`` (tags filtered again here,
        MIN_OFFSET/MAX_OFFSET set on each message); from ``broker_addr``, else the queue's master."""
        addr = broker_addr or await self._master_of(mq)
        sd = build_subscription_data(mq.topic, sub_expression)
        r = await self.call(
            addr, PullMessage, timeout=PULL_TIMEOUT,
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=int(PullSysFlag.build(subscription=True)),
            commit_offset=0, suspend_timeout_millis=PULL_SUSPEND_MS, subscription=sd.sub_string,
            sub_version=0, expression_type=sd.expression_type, bname=mq.broker_name,
        )
        h = r.header
        status = {
            ResponseCode.SUCCESS: PullStatus.FOUND,
            ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
            ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
            ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
        }[r.code]
        result = PullResult(status, h.next_begin_offset or 0, h.min_offset or 0,
                            h.max_offset or 0)
        if status is PullStatus.FOUND:
            msgs = decode_messages(r.body or b"")
            if sd.tags_set and not sd.class_filter_mode:
                msgs = [m for m in msgs if m.tags is not None and m.tags in sd.tags_set]
            for m in msgs:
                m.properties[PropertyKey.MIN_OFFSET] = str(result.min_offset)
                m.properties[PropertyKey.MAX_OFFSET] = str(result.max_offset)
                m.queue_id = mq.queue_id
                if h.offset_delta is not None:
                    m.queue_offset += h.offset_delta
            result.messages = msgs
        return result

    @deferred
    async def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int, index: int,
                                  count: int, group: str | None) -> QueryConsumeQueueResponseBody:
        r = await self.call(broker_addr, QueryConsumeQueue, topic=topic, queue_id=queue_id,
                            index=index, count=count, consumer_group=group)
        if r.body is None:  # the broker's "Index i of q@topic is not exist!" (mqadmin: a trace)
            raise MQClientError(r.remark or "the broker answered without consume queue data")
        return QueryConsumeQueueResponseBody.decode(r.body)

    @deferred
    async def message_track_detail(self, msg: MessageExt) -> list[MessageTrack]:
        """What each group consuming the message's topic did with it (``messageTrackDetail``)."""
        groups = await self._consume_by_who(msg.topic)
        out: list[MessageTrack] = []
        for group in groups.group_list or []:
            mt = MessageTrack(group)
            try:
                cc = await self._consumer_connection(group)
            except BrokerResponseError as e:
                if getattr(e, "java_frame", None) is None:  # a broker's answer: MQBrokerException
                    if e.code == ResponseCode.CONSUMER_NOT_ONLINE:
                        mt.track_type = TrackType.NOT_ONLINE
                    mt.exception_desc = f"CODE:{e.code} DESC:{e.remark}"
                else:  # raised by the tool itself (MQClientException)
                    mt.exception_desc = exception_simple_desc(e)
                out.append(mt)
                continue
            except Exception as e:
                mt.exception_desc = exception_simple_desc(e)
                out.append(mt)
                continue
            if cc.consume_type == ConsumeType.CONSUME_ACTIVELY:
                mt.track_type = TrackType.PULL
            elif cc.consume_type == ConsumeType.CONSUME_PASSIVELY:
                try:
                    consumed = await self._consumed(msg, group)
                except BrokerResponseError as e:
                    if e.code == ResponseCode.CONSUMER_NOT_ONLINE:
                        mt.track_type = TrackType.NOT_ONLINE
                        mt.exception_desc = f"CODE:{e.code} DESC:{e.remark}"
                    if e.code == ResponseCode.BROADCAST_CONSUMPTION:
                        mt.track_type = TrackType.CONSUME_BROADCASTING
                    out.append(mt)
                    continue
                except Exception as e:
                    mt.exception_desc = exception_simple_desc(e)
                    out.append(mt)
                    continue
                if consumed:
                    mt.track_type = TrackType.CONSUMED
                    for t, sd in (cc.subscription_table or {}).items():
                        if t == msg.topic:
                            tags = sd.tags_set or []
                            if not (msg.tags in tags or "*" in tags or not tags):
                                mt.track_type = TrackType.CONSUMED_BUT_FILTERED
                else:
                    mt.track_type = TrackType.NOT_CONSUME_YET
            out.append(mt)
        return out

    async def _consumed(self, msg: MessageExt, group: str) -> bool:
        cs = await self._consume_stats(group)
        info = (await self.call_namesrv(GetBrokerClusterInfo)).body
        store = f"{msg.store_host[0]}:{msg.store_host[1]}"
        for mq, ow in (cs.offset_table or {}).items():
            if mq.topic == msg.topic and mq.queue_id == msg.queue_id:
                bd = (info.broker_addr_table or {}).get(mq.broker_name)
                if bd is not None and (bd.broker_addrs or {}).get(MASTER_ID) == store:
                    if ow.consumer_offset > msg.queue_offset:
                        return True
        return False


# ---- helpers shared with the CLI -----------------------------------------------------------------


def all_addrs_of_cluster(info: ClusterInfo, cluster: str) -> list[str]:
    """``ClusterInfo.retrieveAllAddrByCluster``: every broker address (masters and slaves)."""
    out: list[str] = []
    for name in (info.cluster_addr_table or {}).get(cluster, []):
        bd = (info.broker_addr_table or {}).get(name)
        if bd is not None:
            out.extend((bd.broker_addrs or {}).values())
    return out


def master_addrs_of_cluster(info: ClusterInfo, cluster: str) -> list[str] | None:
    """``CommandUtil.fetchMasterAddrByClusterName`` (None when the cluster is unknown)."""
    names = (info.cluster_addr_table or {}).get(cluster)
    if names is None:
        return None
    out = []
    for name in names:
        bd = (info.broker_addr_table or {}).get(name)
        if bd is not None and (bd.broker_addrs or {}).get(MASTER_ID):
            out.append(bd.broker_addrs[MASTER_ID])
    return out


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """``MQClientInstance.topicRouteData2TopicSubscribeInfo``: readable queues of each broker."""
    out = []
    for qd in route.queue_datas or []:
        if qd.perm & 0x4:  # PermName.isReadable
            out.extend(MessageQueue(topic, qd.broker_name or "", i) for i in range(qd.read_queue_nums))
    return out


__all__ = [
    "DEFAULT_TIMEOUT",
    "AdminCore",
    "NamesrvChooser",
    "all_addrs_of_cluster",
    "master_addrs_of_cluster",
    "subscribe_queues",
]
