"""NameServer configuration with the official key names, read from a ``java.util.Properties`` file.

Three groups, as ``mqnamesrv`` has them: ``NamesrvConfig``, ``NettyServerConfig`` and
``NettyClientConfig``. Every official key is accepted and printed (``-p``) in the official order
and format; the ones rmqwire acts on are listed in ``NamesrvSettings`` docs. A file key is applied
to every group that has it (``writeBufferHighWaterMark`` is in both Netty groups), as Java's
``MixAll.properties2Object`` does: ints and longs must parse (else the key is ignored, and
rmqwire logs it), booleans are true only for a case-insensitive "true", strings are trimmed.

rmqwire extensions (printed after the official keys):

- ``brokerChannelExpiredTime`` (ms, 120000): how long a broker may stay silent before it
  expires, when its registration names no ``heartbeatTimeoutMillis`` (Java's fixed
  ``DEFAULT_BROKER_CHANNEL_EXPIRED_TIME``);
- ``enableUpdateNamesrvConfig`` (false): UPDATE_NAMESRV_CONFIG is refused unless this is true,
  and even then only keys in ``UPDATABLE_KEYS`` may change (never a path, class name or script:
  CVE-2023-37582 was remote code execution through ``configStorePath``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

# ---- java.util.Properties --------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(data: bytes | str) -> dict[str, str]:
    """``java.util.Properties.load``: comments (# !), ``k=v`` / ``k: v`` / ``k v``, backslash
    line continuations and escapes (``\\uXXXX``). Bytes are read as ISO-8859-1, as Java's
    ``load(InputStream)`` does. Later duplicates win; insertion order is kept."""
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    out: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_entry(logical)
        out[key] = value
    return out


def _logical_lines(text: str) -> Iterator[str]:
    pending: str | None = None
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")  # continuation lines lose their indent too
        if pending is None and (not line or line[0] in "#!"):
            continue
        # A line continues when it ends with an odd number of backslashes.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _split_entry(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    key_chars: list[str] = []
    while i < n:
        c = line[i]
        if c == "\\" and i + 1 < n:
            key_chars.append(line[i : i + 2])
            i += 2
            continue
        if c in "=: \t\f":
            break
        key_chars.append(c)
        i += 1
    # Separator: blanks, then at most one '=' or ':', then blanks.
    while i < n and line[i] in " \t\f":
        i += 1
    if i < n and line[i] in "=:":
        i += 1
        while i < n and line[i] in " \t\f":
            i += 1
    return _unescape("".join(key_chars)), _unescape(line[i:])


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6] or ""):
            out.append(chr(int(s[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


# ---- typed config items -----------------------------------------------------------------------

_META = "rmqwire.config"
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class ConfigItem:
    """One config key: its Java field name (printed), its setter-derived key (read from files;
    differs only for ``isScanAvailableNameSrv``), and its Java type."""

    attr: str
    name: str
    key: str
    java_type: str  # "String", "int", "long", "boolean"
    extension: bool


def item(
    name: str,
    java_type: str,
    default: Any = None,
    *,
    factory: Callable[[], Any] | None = None,
    key: str | None = None,
    extension: bool = False,
) -> Any:
    meta = {_META: (name, key or name, java_type, extension)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def parse_value(java_type: str, text: str) -> Any:
    """A value the way ``MixAll.properties2Object`` parses it; ValueError when Java would fail."""
    if java_type == "String":
        return text.strip()
    if java_type == "boolean":
        return text.lower() == "true"
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(f"{text!r} is not a Java {java_type}")
    v = int(text)
    bits = 32 if java_type == "int" else 64
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise ValueError(f"{text!r} overflows a Java {java_type}")
    return v


def format_value(value: Any) -> str:
    """``String.valueOf`` of a config value; None prints as "" (MixAll.printObjectProperties)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ConfigGroup:
    """Base of the three config dataclasses: their items, in the official printing order."""

    _items_cache: ClassVar[dict[type, tuple[ConfigItem, ...]]] = {}

    @classmethod
    def items(cls) -> tuple[ConfigItem, ...]:
        found = ConfigGroup._items_cache.get(cls)
        if found is None:
            found = tuple(
                ConfigItem(f.name, *f.metadata[_META])
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                if _META in f.metadata
            )
            ConfigGroup._items_cache[cls] = found
        return found

    def apply(self, props: Mapping[str, str]) -> list[str]:
        """Set every item whose key is in ``props``; return the keys whose values did not parse."""
        bad = []
        for it in self.items():
            text = props.get(it.key)
            if text is None:
                continue
            try:
                setattr(self, it.attr, parse_value(it.java_type, text))
            except ValueError:
                bad.append(it.key)
        return bad

    def values(self, *, extensions: bool | None = None) -> list[tuple[str, Any]]:
        """(printed name, value) pairs; ``extensions`` None = all, True/False = only those/others."""
        return [
            (it.name, getattr(self, it.attr))
            for it in self.items()
            if extensions is None or it.extension == extensions
        ]


def _user_home() -> Path:
    return Path(os.path.expanduser("~"))


def _rocketmq_home() -> str | None:
    # Java: system property rocketmq.home.dir, else the ROCKETMQ_HOME environment variable.
    return os.environ.get("ROCKETMQ_HOME")


@dataclass
class NamesrvConfig(ConfigGroup):
    """``org.apache.rocketmq.common.namesrv.NamesrvConfig`` (5.3.3), plus rmqwire's extensions."""

    rocketmq_home: str | None = item("rocketmqHome", "String", factory=_rocketmq_home)
    kv_config_path: str = item(
        "kvConfigPath", "String", factory=lambda: str(_user_home() / "namesrv" / "kvConfig.json")
    )
    config_store_path: str = item(
        "configStorePath",
        "String",
        factory=lambda: str(_user_home() / "namesrv" / "namesrv.properties"),
    )
    product_env_name: str = item("productEnvName", "String", "center")
    cluster_test: bool = item("clusterTest", "boolean", False)
    order_message_enable: bool = item("orderMessageEnable", "boolean", False)
    return_order_topic_config_to_broker: bool = item(
        "returnOrderTopicConfigToBroker", "boolean", True
    )
    client_request_thread_pool_nums: int = item("clientRequestThreadPoolNums", "int", 8)
    default_thread_pool_nums: int = item("defaultThreadPoolNums", "int", 16)
    client_request_thread_pool_queue_capacity: int = item(
        "clientRequestThreadPoolQueueCapacity", "int", 50000
    )
    default_thread_pool_queue_capacity: int = item("defaultThreadPoolQueueCapacity", "int", 10000)
    scan_not_active_broker_interval: int = item("scanNotActiveBrokerInterval", "long", 5000)
    unregister_broker_queue_capacity: int = item("unRegisterBrokerQueueCapacity", "int", 3000)
    support_acting_master: bool = item("supportActingMaster", "boolean", False)
    enable_all_topic_list: bool = item("enableAllTopicList", "boolean", True)
    enable_topic_list: bool = item("enableTopicList", "boolean", True)
    notify_min_broker_id_changed: bool = item("notifyMinBrokerIdChanged", "boolean", False)
    enable_controller_in_namesrv: bool = item("enableControllerInNamesrv", "boolean", False)
    need_wait_for_service: bool = item("needWaitForService", "boolean", False)
    wait_seconds_for_service: int = item("waitSecondsForService", "int", 45)
    delete_topic_with_broker_registration: bool = item(
        "deleteTopicWithBrokerRegistration", "boolean", False
    )
    config_black_list: str = item(
        "configBlackList", "String", "configBlackList;configStorePath;kvConfigPath"
    )
    # ---- rmqwire extensions
    broker_channel_expired_time: int = item(
        "brokerChannelExpiredTime", "long", 120_000, extension=True
    )
    enable_update_namesrv_config: bool = item(
        "enableUpdateNamesrvConfig", "boolean", False, extension=True
    )
    # Native metrics (rmqwire.server.namesrv.metrics), with the broker's 5.x key names: a Java
    # NameServer has none.
    metrics_exporter_type: str = item("metricsExporterType", "String", "DISABLE", extension=True)
    metrics_prom_exporter_port: int = item("metricsPromExporterPort", "int", 5557, extension=True)
    metrics_prom_exporter_host: str = item("metricsPromExporterHost", "String", "", extension=True)
    metrics_label: str = item("metricsLabel", "String", "", extension=True)


@dataclass
class NettyServerConfig(ConfigGroup):
    """``NettyServerConfig``; rmqwire uses ``bindAddress``, ``listenPort`` (9876, as mqnamesrv
    sets it) and ``serverChannelMaxIdleTimeSeconds``."""

    bind_address: str = item("bindAddress", "String", "0.0.0.0")
    listen_port: int = item("listenPort", "int", 9876)
    server_worker_threads: int = item("serverWorkerThreads", "int", 8)
    server_callback_executor_threads: int = item("serverCallbackExecutorThreads", "int", 0)
    server_selector_threads: int = item("serverSelectorThreads", "int", 3)
    server_oneway_semaphore_value: int = item("serverOnewaySemaphoreValue", "int", 256)
    server_async_semaphore_value: int = item("serverAsyncSemaphoreValue", "int", 64)
    server_channel_max_idle_time_seconds: int = item("serverChannelMaxIdleTimeSeconds", "int", 120)
    server_socket_snd_buf_size: int = item("serverSocketSndBufSize", "int", 0)
    server_socket_rcv_buf_size: int = item("serverSocketRcvBufSize", "int", 0)
    write_buffer_high_water_mark: int = item("writeBufferHighWaterMark", "int", 0)
    write_buffer_low_water_mark: int = item("writeBufferLowWaterMark", "int", 0)
    server_socket_backlog: int = item("serverSocketBacklog", "int", 1024)
    server_netty_worker_group_enable: bool = item("serverNettyWorkerGroupEnable", "boolean", True)
    server_pooled_byte_buf_allocator_enable: bool = item(
        "serverPooledByteBufAllocatorEnable", "boolean", True
    )
    enable_shutdown_gracefully: bool = item("enableShutdownGracefully", "boolean", False)
    shutdown_wait_time_seconds: int = item("shutdownWaitTimeSeconds", "int", 30)
    use_epoll_native_selector: bool = item("useEpollNativeSelector", "boolean", False)


@dataclass
class NettyClientConfig(ConfigGroup):
    """``NettyClientConfig``: accepted and printed; the NameServer itself makes no client calls."""

    client_worker_threads: int = item("clientWorkerThreads", "int", 4)
    client_callback_executor_threads: int = item(
        "clientCallbackExecutorThreads", "int", factory=lambda: os.cpu_count() or 1
    )
    client_oneway_semaphore_value: int = item("clientOnewaySemaphoreValue", "int", 65535)
    client_async_semaphore_value: int = item("clientAsyncSemaphoreValue", "int", 65535)
    connect_timeout_millis: int = item("connectTimeoutMillis", "int", 3000)
    channel_not_active_interval: int = item("channelNotActiveInterval", "long", 60000)
    scan_available_name_srv: bool = item(
        "isScanAvailableNameSrv", "boolean", True, key="scanAvailableNameSrv"
    )
    client_channel_max_idle_time_seconds: int = item("clientChannelMaxIdleTimeSeconds", "int", 120)
    client_socket_snd_buf_size: int = item("clientSocketSndBufSize", "int", 0)
    client_socket_rcv_buf_size: int = item("clientSocketRcvBufSize", "int", 0)
    client_pooled_byte_buf_allocator_enable: bool = item(
        "clientPooledByteBufAllocatorEnable", "boolean", False
    )
    client_close_socket_if_timeout: bool = item("clientCloseSocketIfTimeout", "boolean", True)
    use_tls: bool = item("useTLS", "boolean", False)
    socks_proxy_config: str = item("socksProxyConfig", "String", "{}")
    write_buffer_high_water_mark: int = item("writeBufferHighWaterMark", "int", 0)
    write_buffer_low_water_mark: int = item("writeBufferLowWaterMark", "int", 0)
    disable_callback_executor: bool = item("disableCallbackExecutor", "boolean", False)
    disable_netty_worker_group: bool = item("disableNettyWorkerGroup", "boolean", False)
    max_reconnect_interval_time_seconds: int = item("maxReconnectIntervalTimeSeconds", "long", 60)
    enable_reconnect_for_go_away: bool = item("enableReconnectForGoAway", "boolean", True)


#: Keys UPDATE_NAMESRV_CONFIG may change once ``enableUpdateNamesrvConfig`` is true: behaviour
#: switches and numbers only (no path, class name, address or script).
UPDATABLE_KEYS: frozenset[str] = frozenset({
    "orderMessageEnable",
    "returnOrderTopicConfigToBroker",
    "scanNotActiveBrokerInterval",
    "supportActingMaster",
    "enableAllTopicList",
    "enableTopicList",
    "notifyMinBrokerIdChanged",
    "needWaitForService",
    "waitSecondsForService",
    "deleteTopicWithBrokerRegistration",
    "brokerChannelExpiredTime",
    "unRegisterBrokerQueueCapacity",
})
#: Keys Java refuses whatever ``configBlackList`` says.
ALWAYS_BLACK_LISTED: frozenset[str] = frozenset(
    {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}
)


@dataclass
class NamesrvSettings:
    """Everything ``rmqwire namesrv`` reads: the three groups and the file's own properties
    (GET_NAMESRV_CONFIG lists those too, as Java's Configuration does)."""

    namesrv: NamesrvConfig = field(default_factory=NamesrvConfig)
    server: NettyServerConfig = field(default_factory=NettyServerConfig)
    client: NettyClientConfig = field(default_factory=NettyClientConfig)
    file_properties: dict[str, str] = field(default_factory=dict)
    #: Keys of the file whose values did not parse (Java ignores them silently).
    ignored: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> NamesrvSettings:
        """Defaults, then the properties file at ``path`` (``configStorePath`` becomes ``path``)."""
        settings = cls()
        if path is not None:
            props = parse_properties(Path(path).read_bytes())
            settings.apply(props)
            settings.file_properties = dict(props)
            settings.namesrv.config_store_path = str(path)
        return settings

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> NamesrvSettings:
        """Defaults overridden by ``props`` (for embedding and tests)."""
        settings = cls()
        settings.apply(props)
        settings.file_properties = dict(props)
        return settings

    def apply(self, props: Mapping[str, str]) -> None:
        bad: set[str] = set()
        for group in (self.namesrv, self.server, self.client):
            bad.update(group.apply(props))
        self.ignored = sorted(bad)

    def print_lines(self, now: float | None = None) -> list[str]:
        """What ``mqnamesrv -p`` prints: one ``<time> INFO main - key=value`` line per item."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        pairs = [
            *self.namesrv.values(extensions=False),
            *self.server.values(),
            *self.client.values(),
            *self.namesrv.values(extensions=True),
        ]
        return [f"{stamp} INFO main - {k}={format_value(v)}" for k, v in pairs]

    def print_config(self, out: TextIO) -> None:
        for line in self.print_lines():
            out.write(line + "\n")

    def all_configs(self) -> dict[str, str]:
        """Java ``Configuration.getAllConfigsFormatString`` as a mapping: the file's properties,
        then every non-null item of NamesrvConfig and NettyServerConfig, sorted by key."""
        merged = dict(self.file_properties)
        for group in (self.namesrv, self.server):
            for it in group.items():
                value = getattr(group, it.attr)
                if value is not None:
                    merged[it.name] = format_value(value)
        return dict(sorted(merged.items(), key=lambda kv: kv[0].encode("utf-16-be")))

    def all_configs_text(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.all_configs().items())

    def black_list(self) -> frozenset[str]:
        listed = {k for k in self.namesrv.config_black_list.split(";")}
        return frozenset(listed | ALWAYS_BLACK_LISTED)
