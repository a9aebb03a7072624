"""Broker configuration with the official key names, read from a ``broker.conf`` properties file.

Four groups, as ``mqbroker`` has them: ``BrokerConfig`` (below), ``NettyServerConfig`` and
``NettyClientConfig`` (the NameServer's classes, ``listenPort`` 10911 as BrokerStartup sets it) and
the store's ``MessageStoreConfig`` (``rmqwire.server.store``), plus the store keys the broker
itself reads (``brokerRole``, ``haListenPort``, the timer and delay-offset keys; ``StoreExtras``). A key of
the file applies to every group that has it, parsed as Java's ``MixAll.properties2Object`` does.

rmqwire extension (printed after the official keys): ``enableUpdateBrokerConfig`` (false):
UPDATE_BROKER_CONFIG is refused unless it is true, and even then only the keys in
``UPDATABLE_KEYS`` may change: CVE-2023-33246 was remote code execution through a broker
config update that set a path and a command.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rmqwire.server.namesrv.config import (
    ConfigGroup,
    NettyClientConfig,
    NettyServerConfig,
    format_value,
    item,
    parse_properties,
)
from rmqwire.server.store import FlushDiskType, MessageStoreConfig

__all__ = [
    "UPDATABLE_KEYS",
    "BrokerConfig",
    "BrokerSettings",
    "StoreExtras",
    "local_address",
]

#: BrokerStartup's listen port.
DEFAULT_LISTEN_PORT = 10911


def local_address() -> str:
    """Java's ``NetworkUtil.getLocalAddress`` in spirit: the address of the interface that routes
    outwards (no packet is sent), else the loopback address."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never answered, only routed
            addr = s.getsockname()[0]
            if addr and not addr.startswith("0."):
                return str(addr)
    except OSError:
        pass
    return "127.0.0.1"


def _host_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


@dataclass
class BrokerConfig(ConfigGroup):
    """``org.apache.rocketmq.common.BrokerConfig`` (5.3.3): the keys rmqwire acts on (and a few
    that clients and mqadmin read back), with Java's defaults."""

    rocketmq_home: str | None = item("rocketmqHome", "String", factory=lambda: _env("ROCKETMQ_HOME"))
    namesrv_addr: str | None = item("namesrvAddr", "String", factory=lambda: _env("NAMESRV_ADDR"))
    broker_ip1: str = item("brokerIP1", "String", factory=local_address)
    broker_ip2: str | None = item("brokerIP2", "String")  # None: brokerIP1
    broker_name: str = item("brokerName", "String", factory=_host_name)
    broker_cluster_name: str = item("brokerClusterName", "String", "DefaultCluster")
    broker_id: int = item("brokerId", "long", 0)
    broker_permission: int = item("brokerPermission", "int", 6)
    default_topic_queue_nums: int = item("defaultTopicQueueNums", "int", 8)
    auto_create_topic_enable: bool = item("autoCreateTopicEnable", "boolean", True)
    cluster_topic_enable: bool = item("clusterTopicEnable", "boolean", True)
    broker_topic_enable: bool = item("brokerTopicEnable", "boolean", True)
    auto_create_subscription_group: bool = item("autoCreateSubscriptionGroup", "boolean", True)
    enable_create_sys_group: bool = item("enableCreateSysGroup", "boolean", True)
    msg_trace_topic_name: str = item("msgTraceTopicName", "String", "RMQ_SYS_TRACE_TOPIC")
    trace_topic_enable: bool = item("traceTopicEnable", "boolean", False)
    region_id: str = item("regionId", "String", "DefaultRegion")
    trace_on: bool = item("traceOn", "boolean", True)
    register_name_server_period: int = item("registerNameServerPeriod", "int", 30_000)
    register_broker_timeout_mills: int = item("registerBrokerTimeoutMills", "int", 24_000)
    force_register: bool = item("forceRegister", "boolean", True)
    compressed_register: bool = item("compressedRegister", "boolean", False)
    flush_consumer_offset_interval: int = item("flushConsumerOffsetInterval", "int", 5000)
    reject_transaction_message: bool = item("rejectTransactionMessage", "boolean", False)
    long_polling_enable: bool = item("longPollingEnable", "boolean", True)
    short_polling_time_mills: int = item("shortPollingTimeMills", "long", 1000)
    notify_consumer_ids_changed_enable: bool = item("notifyConsumerIdsChangedEnable", "boolean", True)
    # Native metrics (rmqwire.server.broker.metrics): PROM serves them; the name or Java's number.
    metrics_exporter_type: str = item("metricsExporterType", "String", "DISABLE")
    metrics_prom_exporter_port: int = item("metricsPromExporterPort", "int", 5557)
    metrics_prom_exporter_host: str = item("metricsPromExporterHost", "String", "")  # "": brokerIP1
    metrics_label: str = item("metricsLabel", "String", "")
    metrics_in_delta: bool = item("metricsInDelta", "boolean", False)
    channel_expired_timeout: int = item("channelExpiredTimeout", "long", 120_000)
    subscription_expired_timeout: int = item("subscriptionExpiredTimeout", "long", 600_000)
    slave_read_enable: bool = item("slaveReadEnable", "boolean", False)
    lite_pull_message_enable: bool = item("litePullMessageEnable", "boolean", True)
    revive_queue_num: int = item("reviveQueueNum", "int", 8)
    start_accept_send_request_time_stamp: int = item("startAcceptSendRequestTimeStamp", "long", 0)
    enable_property_filter: bool = item("enablePropertyFilter", "boolean", False)
    validate_system_topic_when_update_topic: bool = item(
        "validateSystemTopicWhenUpdateTopic", "boolean", True
    )
    use_server_side_reset_offset: bool = item("useServerSideResetOffset", "boolean", True)
    send_thread_pool_queue_capacity: int = item("sendThreadPoolQueueCapacity", "int", 10_000)
    pull_thread_pool_queue_capacity: int = item("pullThreadPoolQueueCapacity", "int", 100_000)
    lite_pull_thread_pool_queue_capacity: int = item("litePullThreadPoolQueueCapacity", "int", 100_000)
    query_thread_pool_queue_capacity: int = item("queryThreadPoolQueueCapacity", "int", 20_000)
    ack_thread_pool_queue_capacity: int = item("ackThreadPoolQueueCapacity", "int", 100_000)
    end_transaction_pool_queue_capacity: int = item("endTransactionPoolQueueCapacity", "int", 100_000)
    transaction_time_out: int = item("transactionTimeOut", "long", 6000)
    transaction_check_max: int = item("transactionCheckMax", "int", 15)
    transaction_check_interval: int = item("transactionCheckInterval", "long", 30_000)
    transaction_op_msg_max_size: int = item("transactionOpMsgMaxSize", "int", 4096)
    transaction_op_batch_interval: int = item("transactionOpBatchInterval", "int", 3000)
    store_reply_message_enable: bool = item("storeReplyMessageEnable", "boolean", True)
    config_black_list: str = item("configBlackList", "String", "configBlackList;brokerConfigPath")
    acl_enable: bool = item("aclEnable", "boolean", False)
    # ---- rmqwire extensions
    enable_update_broker_config: bool = item("enableUpdateBrokerConfig", "boolean", False, extension=True)

    @property
    def broker_ip2_effective(self) -> str:
        return self.broker_ip2 or self.broker_ip1


@dataclass
class StoreExtras(ConfigGroup):
    """``MessageStoreConfig`` keys read by the broker rather than the store."""

    broker_role: str = item("brokerRole", "String", "ASYNC_MASTER")
    ha_listen_port: int = item("haListenPort", "int", 0)  # 0: listenPort + 1 (BrokerStartup)
    timer_wheel_enable: bool = item("timerWheelEnable", "boolean", True)
    timer_precision_ms: int = item("timerPrecisionMs", "int", 1000)
    timer_max_delay_sec: int = item("timerMaxDelaySec", "int", 3600 * 24 * 3)
    timer_congest_num_each_slot: int = item("timerCongestNumEachSlot", "int", 2**31 - 1)
    flush_delay_offset_interval: int = item("flushDelayOffsetInterval", "long", 10_000)


#: Keys UPDATE_BROKER_CONFIG may change once ``enableUpdateBrokerConfig`` is true: switches and
#: numbers only (never a path, address, class name or command).
UPDATABLE_KEYS: frozenset[str] = frozenset({
    "brokerPermission",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "defaultTopicQueueNums",
    "longPollingEnable",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "rejectTransactionMessage",
    "traceOn",
    "registerNameServerPeriod",
})

#: Keys Java's AdminBrokerProcessor refuses whatever ``configBlackList`` says.
ALWAYS_BLACK_LISTED: frozenset[str] = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})


@dataclass
class BrokerSettings:
    """Everything ``rmqwire broker`` reads: the four groups and the file's own properties."""

    broker: BrokerConfig = field(default_factory=BrokerConfig)
    server: NettyServerConfig = field(
        default_factory=lambda: NettyServerConfig(listen_port=DEFAULT_LISTEN_PORT)
    )
    client: NettyClientConfig = field(default_factory=NettyClientConfig)
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    store_extras: StoreExtras = field(default_factory=StoreExtras)
    file_properties: dict[str, str] = field(default_factory=dict)
    config_path: str | None = None
    #: Keys of the file whose values did not parse (Java ignores them silently).
    ignored: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> BrokerSettings:
        """Defaults, then the ``broker.conf`` at ``path``."""
        if path is None:
            return cls()
        settings = cls.from_properties(parse_properties(Path(path).read_bytes()))
        settings.config_path = str(path)
        return settings

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **store_overrides: Any) -> BrokerSettings:
        """Defaults overridden by ``props`` (official key names)."""
        settings = cls()
        settings.apply(props, **store_overrides)
        return settings

    def apply(self, props: Mapping[str, str], **store_overrides: Any) -> None:
        bad: set[str] = set()
        for group in (self.broker, self.server, self.client, self.store_extras):
            bad.update(group.apply(props))
        try:
            self.store = MessageStoreConfig.from_properties(
                {**self.store.to_properties(), **props}, **store_overrides
            )
        except ValueError as e:
            raise ValueError(f"store config: {e}") from e
        self.file_properties.update(props)
        self.ignored = sorted(set(self.ignored) | bad)
        # Java: a master's id is 0 whatever the file says.
        if self.store_extras.broker_role.upper() in ("ASYNC_MASTER", "SYNC_MASTER"):
            self.broker.broker_id = 0

    # -- derived values -------------------------------------------------------------------

    @property
    def listen_port(self) -> int:
        return self.server.listen_port

    @property
    def fast_listen_port(self) -> int:
        """The VIP channel: listenPort - 2 (Java's ``fastListenPort``)."""
        return self.server.listen_port - 2

    @property
    def ha_listen_port(self) -> int:
        return self.store_extras.ha_listen_port or self.server.listen_port + 1

    @property
    def broker_addr(self) -> str:
        return f"{self.broker.broker_ip1}:{self.server.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker.broker_ip2_effective}:{self.ha_listen_port}"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.broker.namesrv_addr or "").split(";") if a.strip()]

    @property
    def is_sync_flush(self) -> bool:
        return self.store.flush_disk_type is FlushDiskType.SYNC_FLUSH

    # -- printing ---------------------------------------------------------------------------

    def _pairs(self) -> list[tuple[str, Any]]:
        broker = self.broker.values(extensions=False)
        broker = [(k, self.broker.broker_ip2_effective if k == "brokerIP2" else v) for k, v in broker]
        store = list(self.store.to_properties().items())
        store += [(k, self.ha_listen_port if k == "haListenPort" else v)
                  for k, v in self.store_extras.values()]
        return [*broker, *self.server.values(), *self.client.values(), *store,
                *self.broker.values(extensions=True)]

    def print_lines(self, now: float | None = None) -> list[str]:
        """What ``mqbroker -p`` prints: one ``<time> INFO main - key=value`` line per item."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        return [f"{stamp} INFO main - {k}={format_value(v)}" for k, v in self._pairs()]

    def print_config(self, out: TextIO) -> None:
        for line in self.print_lines():
            out.write(line + "\n")

    def all_configs(self) -> dict[str, str]:
        """Java ``Configuration.getAllConfigsFormatString`` (GET_BROKER_CONFIG) as a mapping: the
        file's properties and every non-null item, sorted by key as Java's String order sorts."""
        merged = dict(self.file_properties)
        for k, v in self._pairs():
            if v is not None:
                merged[k] = format_value(v)
        return dict(sorted(merged.items(), key=lambda kv: kv[0].encode("utf-16-be")))

    def all_configs_text(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.all_configs().items())

    def black_list(self) -> frozenset[str]:
        """Java's ``configBlackList`` plus the keys its AdminBrokerProcessor always adds."""
        return ALWAYS_BLACK_LISTED | frozenset(k for k in self.broker.config_black_list.split(";") if k)

    def invalid_values(self, props: Mapping[str, str]) -> list[str]:
        """The keys of ``props`` whose values do not parse as the broker key's Java type."""
        trial = dataclasses.replace(self.broker)
        return sorted(trial.apply(props))

    def update(self, props: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG (once allowed): apply ``props`` to the broker group only."""
        self.broker.apply(props)
        self.file_properties.update(props)


def replace_store(settings: BrokerSettings, **changes: Any) -> None:
    """Change store settings after loading (e.g. ``rmqwire standalone --store-dir``)."""
    settings.store = dataclasses.replace(settings.store, **changes)
    settings.store.validate()
