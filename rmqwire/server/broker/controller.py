"""``Broker``: the embeddable broker service (Java ``BrokerController``).

A Twisted ``Service`` that owns the message store (``rmqwire.server.store``), the topic, group
and offset tables (``config/*.json`` under the store root), the client tables, long polling, the
processors, a ``RemotingServer`` on ``listenPort`` and one on the fast (VIP) port ``listenPort - 2``
(which, as Java's, answers everything but pulls), and the registration with the NameServers.

    broker = Broker(reactor, BrokerSettings.from_properties({"namesrvAddr": "127.0.0.1:9876"}))
    broker.startService()        # load and recover the store, listen, register
    ...
    yield broker.stopService()   # unregister, answer held pulls, final flush, clean store

``listenPort`` 0 picks free ports (a pair P, P-2). The reactor is injected.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IPushProducer
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from zope.interface import implementer

from rmqwire.codec.codes import DEFAULT_VERSION, version_name
from rmqwire.codec.commands.pull import LitePullMessage, PullMessage
from rmqwire.codec.commands.topic import DataVersion, TopicConfig
from rmqwire.codec.ids import UniqueIdGenerator
from rmqwire.codec.java import now_ms
from rmqwire.remoting.config import JAVA_SERVER_CONFIG, RemotingConfig
from rmqwire.remoting.dispatcher import Dispatcher
from rmqwire.remoting.server import RemotingServer
from rmqwire.server.acl.plain import DEFAULT_PLAIN_ACL_FILE, PlainAccessValidator
from rmqwire.server.broker.client_manager import ConsumerManager, ProducerManager
from rmqwire.server.broker.client_relay import Broker2Client
from rmqwire.server.broker.config import BrokerSettings
from rmqwire.server.broker.consumer_offset import ConsumerOffsetManager
from rmqwire.server.broker.long_polling import PullRequestHoldService
from rmqwire.server.broker.metrics import BrokerMetrics
from rmqwire.server.broker.processors.admin import AdminBrokerProcessor
from rmqwire.server.broker.processors.client_manage import ClientManageProcessor
from rmqwire.server.broker.processors.consumer_manage import ConsumerManageProcessor
from rmqwire.server.broker.processors.end_transaction import EndTransactionProcessor
from rmqwire.server.broker.processors.pull import PullMessageProcessor
from rmqwire.server.broker.processors.query import QueryMessageProcessor
from rmqwire.server.broker.processors.reply import ReplyMessageProcessor
from rmqwire.server.broker.processors.send import SendMessageProcessor
from rmqwire.server.broker.rebalance_lock import RebalanceLockManager
from rmqwire.server.broker.register import BrokerRegistrar
from rmqwire.server.broker.schedule import (
    ScheduleHook,
    ScheduleMessageService,
    TimerMessageStore,
)
from rmqwire.server.broker.stats import BrokerStats, BrokerStatsManager
from rmqwire.server.broker.subscription_group import SubscriptionGroupManager
from rmqwire.server.broker.topic_config import TopicConfigManager
from rmqwire.server.broker.transaction import (
    TransactionalMessageCheckService,
    TransactionalMessageService,
    TransactionCheckListener,
)
from rmqwire.server.store import DefaultMessageStore
from rmqwire.server.store.config import total_physical_memory
from rmqwire.server.store.retention import disk_partition_used_ratio
from rmqwire.server.tls import TlsSystemConfig

__all__ = ["Broker"]

#: How often the ACL files are checked for changes (Java's AclFileWatchService: 500 ms).
ACL_WATCH_INTERVAL = 1.0
#: Java's system property naming the plain ACL file (relative to rocketmqHome); here a broker.conf key.
ACL_FILE_KEY = "rocketmq.acl.plain.file"
#: Java's ClientHousekeepingService period.
CLIENT_SCAN_INTERVAL = 10.0
_FREE_PORT_ATTEMPTS = 50


def _human_bytes(n: int) -> str:
    """Java ``MixAll.humanReadableByteCount(bytes, si=false)``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


@implementer(IPushProducer)
class _ReadThrottle:
    """Stops reading a client's requests while the answers to it pile up unread (the transport
    calls ``pauseProducing`` past its write buffer size and ``resumeProducing`` once drained), so a
    client that sends but does not read cannot make the broker buffer answers without bound."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.transport.pauseProducing()

    def resumeProducing(self) -> None:  # noqa: N802
        self.transport.resumeProducing()

    def stopProducing(self) -> None:  # noqa: N802
        pass


class _BrokerServer(RemotingServer):
    """A RemotingServer whose connections stop reading while their answers are not read."""

    def build_protocol(self) -> Any:
        proto = super().build_protocol()
        made = proto.connectionMade

        def connection_made() -> None:
            made()
            transport = proto.transport
            if hasattr(transport, "registerProducer") and hasattr(transport, "pauseProducing"):
                try:
                    transport.registerProducer(_ReadThrottle(transport), True)
                except RuntimeError:  # another producer already: leave it
                    pass

        proto.connectionMade = connection_made
        return proto


class Broker(Service):
    log = Logger()

    def __init__(
        self,
        reactor: Any,
        settings: BrokerSettings | None = None,
        *,
        remoting_config: RemotingConfig | None = None,
        fast_port: bool = True,
    ) -> None:
        self.reactor = reactor
        self.settings = settings if settings is not None else BrokerSettings()
        self.version = DEFAULT_VERSION
        self.shutting_down = False
        b = self.settings.broker
        config_dir = Path(self.settings.store.store_path_root_dir) / "config"
        self.store = DefaultMessageStore(self.settings.store)
        self.topic_config_manager = TopicConfigManager(
            b, self.settings.store_extras, config_dir / "topics.json", on_created=self._topics_created)
        self.subscription_group_manager = SubscriptionGroupManager(b, config_dir / "subscriptionGroup.json")
        self.consumer_offset_manager = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.consumer_manager = ConsumerManager(
            notify_enabled=lambda: self.settings.broker.notify_consumer_ids_changed_enable,
            channel_expired_timeout=b.channel_expired_timeout, version=self.version)
        self.producer_manager = ProducerManager(channel_expired_timeout=b.channel_expired_timeout)
        self.rebalance_lock_manager = RebalanceLockManager()
        self.pull_hold_service = PullRequestHoldService(reactor, self.store.get_max_offset_in_queue)
        self.stats = BrokerStats()
        extras = self.settings.store_extras
        self.schedule_message_service = ScheduleMessageService(
            reactor, self.store, config_dir / "delayOffset.json",
            persist_interval_ms=lambda: self.settings.store_extras.flush_delay_offset_interval,
            on_put=self._delayed_put)
        self.timer_message_store = (TimerMessageStore(
            reactor, self.store, config_dir / "rmqwireTimerCheck.json",
            precision_ms=lambda: self.settings.store_extras.timer_precision_ms, on_put=self.stats.on_put)
            if extras.timer_wheel_enable else None)
        self.store.add_put_hook(ScheduleHook(lambda: self.schedule_message_service.max_delay_level, extras))
        self.stats_manager = BrokerStatsManager(b.broker_cluster_name)
        self.broker2client = Broker2Client(self)
        self.config_data_version = DataVersion()
        self._uniq = UniqueIdGenerator(ip=_ip_or_none(b.broker_ip1))

        self.send_processor = SendMessageProcessor(self)
        self.pull_processor = PullMessageProcessor(self)
        self.consumer_manage_processor = ConsumerManageProcessor(self)
        self.client_manage_processor = ClientManageProcessor(self)
        self.admin_processor = AdminBrokerProcessor(self)
        self.transactional_message_service = TransactionalMessageService(self)
        self.transaction_check_service = TransactionalMessageCheckService(
            self, self.transactional_message_service,
            TransactionCheckListener(self, self.transactional_message_service))
        self.end_transaction_processor = EndTransactionProcessor(self)
        self.reply_processor = ReplyMessageProcessor(self)
        self.query_processor = QueryMessageProcessor(self)
        processors = (self.admin_processor, self.send_processor, self.pull_processor,
                      self.consumer_manage_processor, self.client_manage_processor,
                      self.end_transaction_processor, self.reply_processor, self.query_processor)
        idle = self.settings.server.server_channel_max_idle_time_seconds
        base = remoting_config if remoting_config is not None else JAVA_SERVER_CONFIG
        self.tls = TlsSystemConfig.from_properties(self.settings.file_properties)
        if base.tls is None:
            base = base.replace(tls=self.tls.server_context())
        self.remoting_config = base.replace(idle_timeout=float(idle) if idle > 0 else None)
        interface = self.settings.server.bind_address
        self.server = _BrokerServer(reactor, self.remoting_config, processors=processors,
                                     port=self.settings.listen_port, interface=interface,
                                     tls_mode=self.tls.mode)
        self.fast_server: RemotingServer | None = None
        if fast_port:
            fast = Dispatcher.for_config(self.remoting_config, *processors)
            for code in PullMessage.codes + LitePullMessage.codes:
                fast.unregister(code)  # Java's fast server has no pull processor
            self.fast_server = _BrokerServer(reactor, self.remoting_config, dispatcher=fast,
                                              port=max(self.settings.listen_port - 2, 0), interface=interface,
                                              tls_mode=self.tls.mode)
        self.acl: PlainAccessValidator | None = None
        if b.acl_enable:
            # Java's broker registers the validator as an RPC hook of both servers.
            self.acl = PlainAccessValidator.for_home(
                b.rocketmq_home, self.settings.file_properties.get(ACL_FILE_KEY, DEFAULT_PLAIN_ACL_FILE))
            for server in (self.server, self.fast_server):
                if server is not None:
                    server.dispatcher.add_hook(self.acl)
        self.registrar = BrokerRegistrar(reactor, self)
        self.metrics = BrokerMetrics(self)
        self.store_host: tuple[str, int] = (b.broker_ip1, self.settings.listen_port)
        self._watched: set[Any] = set()
        self._loops: list[LoopingCall] = []
        self.registered: Deferred[None] = Deferred()
        self._memory_for_hot_data = (total_physical_memory()
                                     * self.settings.store.access_message_in_memory_max_ratio // 100)

    # ---- addresses -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        """What the broker registers (``brokerIP1:listenPort``)."""
        return self.settings.broker_addr

    def now_ms(self) -> int:
        return now_ms()

    def next_uniq_id(self) -> str:
        return self._uniq.next_id()

    # ---- Service ---------------------------------------------------------------------------------

    def startService(self) -> None:
        """Load and recover the store and the config files, listen, start registering.

        Raises StoreLoadError (store locked or unreadable) or CannotListenError; nothing is left
        running then."""
        store = self.store
        report = store.load()
        try:
            self.topic_config_manager.load()
            self.subscription_group_manager.load()
            self.consumer_offset_manager.load()
            store.add_arrival_listener(self.pull_hold_service.on_arrival, self.pull_hold_service.on_arrival_batch)
            store.start()
            self.schedule_message_service.load()
            if self.timer_message_store is not None:
                self.timer_message_store.load()
            self._listen()
            self.metrics.start()
        except BaseException:
            for server in (self.server, self.fast_server):
                if server is not None:
                    self._stop_now(server)
            self.metrics.stop()
            store.shutdown()
            raise
        self.pull_hold_service.start()
        self.schedule_message_service.start()
        if self.timer_message_store is not None:
            self.timer_message_store.start()
        self.stats_manager.start(self.reactor)
        self._every(self.settings.broker.flush_consumer_offset_interval / 1000.0, self._persist_offsets)
        self._every(CLIENT_SCAN_INTERVAL, self._scan_channels)
        self.transaction_check_service.start()
        if self.acl is not None:
            self._every(ACL_WATCH_INTERVAL, self.acl.reload_if_changed)
        super().startService()
        self.log.info("store {root} recovered ({how})", root=self.settings.store.store_path_root_dir,
                      how=report)
        self.registrar.start().chainDeferred(self.registered)
        self.log.info("The broker[{name}, {addr}] boot success. serializeType=JSON and name server is {ns}",
                      name=self.settings.broker.broker_name, addr=self.address,
                      ns=self.settings.broker.namesrv_addr)

    def _listen(self) -> None:
        fast = self.fast_server
        if self.settings.listen_port != 0:
            self.server.startService()
            if fast is not None:
                fast.startService()
            return
        # Free ports: the main one first, then its fast port (P - 2), until both are free.
        for _ in range(_FREE_PORT_ATTEMPTS):
            self.server.requested_port = 0
            self.server.startService()
            port = self.server.port
            if fast is None:
                break
            if port > 2:
                fast.requested_port = port - 2
                try:
                    fast.startService()
                    break
                except CannotListenError:
                    pass
            self._stop_now(self.server)
        else:
            raise CannotListenError(self.settings.server.bind_address, 0,
                                    OSError("no free port pair P, P-2"))
        self.settings.server.listen_port = self.server.port
        self.store_host = (self.settings.broker.broker_ip1, self.server.port)

    @staticmethod
    def _stop_now(server: RemotingServer) -> None:
        listening = server._listening
        server._listening = None
        if listening is not None:
            listening.stopListening()
        server.running = 0

    def _every(self, seconds: float, fn: Any) -> None:
        loop = LoopingCall(fn)
        loop.clock = self.reactor
        loop.start(max(seconds, 0.01), now=False).addErrback(
            lambda f: self.log.failure("broker task {fn} stopped", f, fn=getattr(fn, "__name__", fn)))
        self._loops.append(loop)

    def stopService(self) -> Deferred[None]:
        """Unregister, answer held pulls, close connections, persist and shut the store down."""
        super().stopService()
        self.shutting_down = True
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        self.transaction_check_service.stop()
        self.transactional_message_service.shutdown()
        self.stats_manager.stop()
        self.pull_hold_service.stop()
        stopped_metrics = self.metrics.stop()
        self.schedule_message_service.stop()
        if self.timer_message_store is not None:
            self.timer_message_store.stop()
        d = self.registrar.stop()
        if stopped_metrics is not None:
            d.addBoth(lambda result: stopped_metrics.addBoth(lambda _: result))

        def stop_servers(_: Any) -> Deferred[Any]:
            servers = [self.server] + ([self.fast_server] if self.fast_server is not None else [])
            return defer.gatherResults(
                [defer.maybeDeferred(s.stopService) for s in servers if s.running], consumeErrors=True)

        d.addBoth(stop_servers)
        d.addBoth(lambda _: self._shutdown_store())
        return d.addBoth(lambda _: None)

    def _shutdown_store(self) -> None:
        for persist in (self.consumer_offset_manager.persist, self.subscription_group_manager.persist,
                        self.topic_config_manager.persist):
            try:
                persist()
            except OSError:
                self.log.failure("persisting the broker config failed")
        self.store.shutdown()
        self.log.info("broker {name} shut down, store {root} closed cleanly",
                      name=self.settings.broker.broker_name, root=self.settings.store.store_path_root_dir)

    # ---- housekeeping ----------------------------------------------------------------------------

    def _delayed_put(self, topic: str, messages: int, size: int) -> None:
        """A delay-level message re-put to its topic: counted as a put of a delay message (Java
        ``PutResultProcess.onSuccess``)."""
        self.stats.on_put(topic, messages, size)
        if self.metrics.enabled:
            self.metrics.on_put(topic, "delay", messages, size)

    def _persist_offsets(self) -> None:
        self.consumer_offset_manager.persist_if_changed()

    def _scan_channels(self) -> None:
        for channel in self.consumer_manager.scan_not_active_channels() + \
                self.producer_manager.scan_not_active_channels():
            close = getattr(channel, "close", None)
            if close is not None:
                close()

    def watch_channel(self, channel: Any) -> None:
        """Drop a client's channel from every group once it closes."""
        if channel is None or channel in self._watched or not hasattr(channel, "when_closed"):
            return
        self._watched.add(channel)
        channel.when_closed().addCallback(lambda _: self._channel_closed(channel))

    def _channel_closed(self, channel: Any) -> None:
        self._watched.discard(channel)
        self.pull_hold_service.channel_closed(channel)
        self.consumer_manager.channel_closed(channel)
        self.producer_manager.channel_closed(channel)

    # ---- topics ----------------------------------------------------------------------------------

    def _topics_created(self, configs: list[TopicConfig]) -> None:
        if self.running:
            self.registrar.register_incremental(configs)

    def register_incremental(self, configs: list[TopicConfig]) -> Deferred[None]:
        if not self.running:
            return defer.succeed(None)
        return self.registrar.register_incremental(configs)

    def delete_topic(self, topic: str) -> None:
        """Java ``deleteTopicInBroker``: the config, the group offsets and the consume queues."""
        self.topic_config_manager.delete(topic)
        self.consumer_offset_manager.clean_offset_by_topic(topic)
        self.store.delete_topics([topic])

    # ---- config ----------------------------------------------------------------------------------

    def update_config(self, props: dict[str, str]) -> None:
        self.settings.update(props)
        dv = self.config_data_version
        self.config_data_version = DataVersion(state_version=dv.state_version, timestamp=now_ms(),
                                               counter=dv.counter + 1)
        self.send_processor.refresh_ext_fields()
        if "brokerPermission" in props:
            tcm = self.topic_config_manager
            with tcm._lock:
                tcm._next_version()
            self.registrar.register_all()

    # ---- store views -----------------------------------------------------------------------------

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Java ``checkInMemByConsumeOffset``: the message at ``offset`` is still in page cache."""
        cq = self.store.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get(offset) if cq is not None else None
        if unit is None:
            return False
        return self.store.max_phy_offset - unit.pos < self._memory_for_hot_data

    def disk_util(self) -> str:
        root = Path(self.settings.store.store_path_root_dir)
        cl = disk_partition_used_ratio(self.settings.store.commit_log_dir) * 100
        cq = disk_partition_used_ratio(root / "consumequeue") * 100
        index = disk_partition_used_ratio(root / "index") * 100
        return f"CL: {cl:5.2f} CQ: {cq:5.2f} INDEX: {index:5.2f}"

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the store's keys and the broker's (Java ``prepareRuntimeInfo``)."""
        store = self.store
        info = store.runtime_info()
        bcfg = self.settings.broker
        info["brokerActive"] = "true"
        info["brokerVersionDesc"] = version_name(self.version)
        info["brokerVersion"] = str(self.version)
        info.update(self.stats.runtime_info())
        info["dispatchBehindBytes"] = str(store.dispatch_behind_bytes)
        info["pageCacheLockTimeMills"] = "0"
        info["earliestMessageTimeStamp"] = str(store.get_earliest_message_time_in_store())
        info["startAcceptSendRequestTimeStamp"] = str(bcfg.start_accept_send_request_time_stamp)
        for key, value in (("timerReadBehind", "0"), ("timerOffsetBehind", "0"), ("timerCongestNum", "0"),
                           ("timerEnqueueTps", "0.0"), ("timerDequeueTps", "0.0")):
            info[key] = value
        if self.timer_message_store is not None:
            info["timerReadBehind"] = str(self.timer_message_store.read_behind())
            info["timerOffsetBehind"] = str(self.timer_message_store.offset_behind())
            info["timerCongestNum"] = str(self.timer_message_store.pending)
        info.update(self.schedule_message_service.running_stats())
        info["remainTransientStoreBufferNumbs"] = str(2**31 - 1)
        info["remainHowManyDataToFlush"] = _human_bytes(max(0, store.max_phy_offset - store.commit_log.flushed_where))
        root = Path(self.settings.store.store_path_root_dir)
        try:
            import shutil

            usage = shutil.disk_usage(root)
            info["commitLogDirCapacity"] = (f"Total : {_human_bytes(usage.total)}, "
                                            f"Free : {_human_bytes(usage.free)}.")
        except OSError:
            pass
        for pool, capacity in (("send", bcfg.send_thread_pool_queue_capacity),
                               ("pull", bcfg.pull_thread_pool_queue_capacity),
                               ("litePull", bcfg.lite_pull_thread_pool_queue_capacity),
                               ("query", bcfg.query_thread_pool_queue_capacity),
                               ("ack", bcfg.ack_thread_pool_queue_capacity)):
            info[f"{pool}ThreadPoolQueueSize"] = "0"
            info[f"{pool}ThreadPoolQueueCapacity"] = str(capacity)
            info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        info["EndTransactionQueueSize"] = "0"
        info["EndTransactionThreadPoolQueueCapacity"] = str(bcfg.end_transaction_pool_queue_capacity)
        return info


def _ip_or_none(ip: str) -> str | None:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)
        return ip
    except OSError:
        return None
