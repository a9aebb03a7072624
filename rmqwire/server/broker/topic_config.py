"""Topics a broker serves (Java ``TopicConfigManager``) and topic-name rules (``TopicValidator``).

The table starts with the topics a 5.3.3 broker creates by itself (spec broker-and-store.md
6.12), then ``config/topics.json`` is read over it. Every change bumps the DataVersion and is
persisted at once (atomically, with ``topics.json.bak``); topics created by the broker itself
(auto-creation from TBW102 on send, a consumer group's retry topic) are also announced through
``on_created`` so the broker re-registers with its NameServers.

Names are checked (``^[%|a-zA-Z0-9_-]+$``, at most 127 characters, 255 for retry and DLQ
topics) before a topic enters the table: topic names become directory names in the store
(CVE-2019-17572 was a path traversal through one).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from twisted.logger import Logger

from rmqwire.codec.commands.topic import (
    DataVersion,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
)
from rmqwire.codec.java import now_ms
from rmqwire.errors import CodecError
from rmqwire.model import PermName, TopicFilterType
from rmqwire.server.broker.config import BrokerConfig, StoreExtras
from rmqwire.server.broker.config_file import ConfigFile

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "DLQ_PREFIX",
    "NOT_ALLOWED_SEND_TOPICS",
    "RETRY_PREFIX",
    "SCHEDULE_TOPIC",
    "TopicConfigManager",
    "is_system_topic",
    "is_topic_or_group_illegal",
    "validate_group",
    "validate_topic",
]

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TIMER_TOPIC = "rmq_sys_wheel_timer"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
TOPIC_MAX_LENGTH = 127
#: TopicConfigManager.SCHEDULE_TOPIC_QUEUE_NUM
SCHEDULE_TOPIC_QUEUE_NUM = 18

#: TopicValidator.SYSTEM_TOPIC_SET (fixed members; the broker adds its own at start).
_SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC,
    "RMQ_SYS_TRACE_TOPIC", TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT, "CHECKPOINT_TOPIC",
})
#: TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET: sends to these are refused with NO_PERMISSION.
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
})
_VALID_CHARS = frozenset("%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: How long a topic-table change may wait for the lock (Java LOCK_TIMEOUT_MILLIS).
_LOCK_TIMEOUT = 3.0


def is_topic_or_group_illegal(name: str) -> bool:
    return not _VALID_CHARS.issuperset(name)


def validate_topic(topic: str | None) -> str | None:
    """Java ``TopicValidator.validateTopic``: None when valid, else Java's remark."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_group(group: str | None) -> bool:
    """A consumer or producer group name fit to name a retry or DLQ topic (255 characters)."""
    return bool(group) and len(group) <= 255 - len(RETRY_PREFIX) and not is_topic_or_group_illegal(group)


def is_system_topic(topic: str, extra: Iterable[str] = ()) -> bool:
    return topic in _SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX) or topic in extra


def _safe_stored_name(topic: str) -> bool:
    # Names read back from topics.json or created internally: same character rules, and the
    # longer limit of retry/DLQ topics.
    return bool(topic) and len(topic) <= 255 and not is_topic_or_group_illegal(topic)


class TopicConfigManager:
    """The topic table. Thread-safe; ``on_created(configs)`` is called (outside the lock) when the
    broker created topics by itself, so that they are registered with the NameServers."""

    log = Logger()

    def __init__(
        self,
        broker: BrokerConfig,
        store_extras: StoreExtras,
        path: str | Path | None,
        *,
        clock: Callable[[], int] = now_ms,
        on_created: Callable[[list[TopicConfig]], None] | None = None,
    ) -> None:
        self.broker = broker
        self.file = ConfigFile(path) if path is not None else None
        self._clock = clock
        self.on_created = on_created
        self._lock = threading.RLock()
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(timestamp=clock())
        self.mapping_data_version = DataVersion(timestamp=clock())
        self.system_topics: set[str] = set()
        self._init_system_topics(store_extras)

    # ---- system topics ---------------------------------------------------------------------------

    def _system(self, name: str, queues: int = 16, perm: int = 6) -> None:
        self.system_topics.add(name)
        self.table[name] = TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                                       perm=perm)

    def _init_system_topics(self, extras: StoreExtras) -> None:
        b = self.broker
        rw = int(PermName.PERM_READ | PermName.PERM_WRITE)
        inherit = int(PermName.PERM_INHERIT)
        self._system(SELF_TEST_TOPIC, 1)
        if b.auto_create_topic_enable:
            self._system(AUTO_CREATE_TOPIC_KEY_TOPIC, b.default_topic_queue_nums, inherit | rw)
        self._system(BENCHMARK_TOPIC, 1024)
        self._system(b.broker_cluster_name, 16, inherit | (rw if b.cluster_topic_enable else 0))
        self._system(b.broker_name, 1, inherit | (rw if b.broker_topic_enable else 0))
        self._system(OFFSET_MOVED_EVENT, 1)
        self._system(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if b.trace_topic_enable:
            self._system(b.msg_trace_topic_name, 1)
        self._system(f"{b.broker_cluster_name}_REPLY_TOPIC", 1)
        self._system(f"rmq_sys_REVIVE_LOG_{b.broker_cluster_name}", b.revive_queue_num)
        self._system(f"rmq_sys_SYNC_BROKER_MEMBER_{b.broker_name}", 1, inherit)
        self._system(TRANS_HALF_TOPIC, 1)
        self._system(TRANS_OP_HALF_TOPIC, 1)
        if extras.timer_wheel_enable:
            self._system(TIMER_TOPIC, 1)

    def is_system_topic(self, topic: str) -> bool:
        return is_system_topic(topic, self.system_topics)

    # ---- persistence -----------------------------------------------------------------------------

    def load(self) -> None:
        """Read ``topics.json`` (or its backup) over the built-in table."""
        if self.file is None:
            return
        tree = self.file.load()
        if not isinstance(tree, Mapping):
            return
        with self._lock:
            table = tree.get("topicConfigTable")
            if isinstance(table, Mapping):
                for name, raw in table.items():
                    try:
                        cfg = TopicConfig.from_fastjson(raw)
                    except (CodecError, TypeError, ValueError) as e:
                        self.log.warn("topics.json: topic {name} ignored: {why}", name=name, why=str(e))
                        continue
                    cfg.topic_name = cfg.topic_name or str(name)
                    if not _safe_stored_name(cfg.topic_name):
                        self.log.warn("topics.json: illegal topic name {name!r} ignored", name=cfg.topic_name)
                        continue
                    self.table[cfg.topic_name] = cfg
            dv = tree.get("dataVersion")
            if isinstance(dv, Mapping):
                try:
                    self.data_version = DataVersion.from_fastjson(dv)
                except (CodecError, TypeError, ValueError):
                    pass

    def to_tree(self) -> dict[str, Any]:
        with self._lock:
            return {
                "dataVersion": self.data_version.to_fastjson(),
                "topicConfigTable": {name: cfg.to_fastjson() for name, cfg in self.table.items()},
            }

    def persist(self) -> None:
        if self.file is not None:
            self.file.save(self.to_tree())

    def _next_version(self) -> None:
        dv = self.data_version
        self.data_version = DataVersion(state_version=dv.state_version, timestamp=self._clock(),
                                        counter=dv.counter + 1)

    # ---- queries ---------------------------------------------------------------------------------

    def select(self, topic: str | None) -> TopicConfig | None:
        return self.table.get(topic) if topic is not None else None

    def contains(self, topic: str | None) -> bool:
        return topic in self.table

    def is_order_topic(self, topic: str | None) -> bool:
        cfg = self.select(topic)
        return cfg is not None and cfg.order

    def topics(self) -> list[str]:
        return list(self.table)

    # ---- changes ---------------------------------------------------------------------------------

    def _acquire(self) -> bool:
        return self._lock.acquire(timeout=_LOCK_TIMEOUT)

    def _announce(self, configs: list[TopicConfig]) -> None:
        if configs and self.on_created is not None:
            try:
                self.on_created(configs)
            except Exception:
                self.log.failure("announcing new topics failed")

    def create_in_send(
        self, topic: str, default_topic: str | None, remote: str, client_queue_nums: int | None,
        topic_sys_flag: int,
    ) -> TopicConfig | None:
        """Java ``createTopicInSendMessageMethod``: create ``topic`` like ``default_topic`` if that
        topic exists with the INHERIT permission; None otherwise."""
        created: TopicConfig | None = None
        if not self._acquire():
            return None
        try:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            if not _safe_stored_name(topic):
                return None
            default = self.table.get(default_topic) if default_topic is not None else None
            if default is None:
                self.log.warn("Create new topic failed, because the default topic[{d}] not exist. "
                              "producer:[{r}]", d=default_topic, r=remote)
                return None
            perm = default.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker.auto_create_topic_enable:
                perm = int(PermName.PERM_READ | PermName.PERM_WRITE)
            if not perm & PermName.PERM_INHERIT:
                self.log.warn("Create new topic failed, because the default topic[{d}] has no perm [{p}] "
                              "producer:[{r}]", d=default_topic, p=perm, r=remote)
                return None
            queues = max(0, min(client_queue_nums if client_queue_nums is not None else 0,
                                default.write_queue_nums))
            created = TopicConfig(
                topic_name=topic, read_queue_nums=queues, write_queue_nums=queues,
                perm=perm & ~int(PermName.PERM_INHERIT), topic_sys_flag=topic_sys_flag,
                topic_filter_type=default.topic_filter_type,
            )
            self.log.info("Create new topic by default topic:[{d}] config:[{c}] producer:[{r}]",
                          d=default_topic, c=created, r=remote)
            self.table[topic] = created
            self._next_version()
            self.persist()
        finally:
            self._lock.release()
        self._announce([created])
        return created

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, is_order: bool = False, topic_sys_flag: int = 0,
    ) -> TopicConfig | None:
        """Java ``createTopicInSendMessageBackMethod``: a retry or DLQ topic, created if absent
        (an existing one only gets its ``order`` flag updated)."""
        cfg = self.table.get(topic)
        if cfg is not None:
            if cfg.order != is_order:
                with self._lock:
                    cfg.order = is_order
                    self._next_version()
                    self.persist()
            return cfg
        if not _safe_stored_name(topic):
            return None
        if not self._acquire():
            return None
        try:
            cfg = self.table.get(topic)
            if cfg is not None:
                return cfg
            cfg = TopicConfig(topic_name=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums,
                              perm=perm, topic_sys_flag=topic_sys_flag, order=is_order)
            self.log.info("create new topic {c}", c=cfg)
            self.table[topic] = cfg
            self._next_version()
            self.persist()
        finally:
            self._lock.release()
        self._announce([cfg])
        return cfg

    def update(self, cfg: TopicConfig) -> bool:
        """UPDATE_AND_CREATE_TOPIC: put ``cfg``; False when nothing changed (Java's idempotent
        answer). The caller registers the change."""
        with self._lock:
            if self.table.get(cfg.topic_name or "") == cfg:
                return False
            old = self.table.get(cfg.topic_name or "")
            if old is not None and cfg.attributes is not None and old.attributes:
                cfg = dataclasses.replace(cfg, attributes={**old.attributes, **cfg.attributes})
            self.table[cfg.topic_name or ""] = cfg
            self._next_version()
            self.persist()
            return True

    def delete(self, topic: str) -> bool:
        with self._lock:
            if self.table.pop(topic, None) is None:
                return False
            self._next_version()
            self.persist()
            return True

    def update_order_topic_config(self, order_topics: Iterable[str]) -> None:
        """Topics listed in the NameServer's ORDER_TOPIC_CONFIG become ``order`` (REGISTER_BROKER's
        answer); as Java, nothing is ever switched back here."""
        with self._lock:
            changed = False
            for topic in order_topics:
                cfg = self.table.get(topic)
                if cfg is not None and not cfg.order:
                    cfg.order = True
                    changed = True
            if changed:
                self._next_version()
                self.persist()

    # ---- registration ----------------------------------------------------------------------------

    def _registered_copy(self, cfg: TopicConfig) -> TopicConfig:
        bperm = self.broker.broker_permission
        if bperm & PermName.PERM_READ and bperm & PermName.PERM_WRITE:
            return cfg
        return dataclasses.replace(cfg, perm=cfg.perm & bperm)

    def serialize_wrapper(self, only: Iterable[TopicConfig] | None = None) -> TopicConfigAndMappingSerializeWrapper:
        """What REGISTER_BROKER carries: every topic (or ``only`` these), perms masked by
        ``brokerPermission`` when the broker is not fully readable and writable."""
        with self._lock:
            configs = list(self.table.values()) if only is None else list(only)
            table = {c.topic_name or "": self._registered_copy(c) for c in configs}
            return TopicConfigAndMappingSerializeWrapper(
                topic_config_table=table, data_version=dataclasses.replace(self.data_version)
            )


    def serialize_wrapper_all(self) -> TopicConfigAndMappingSerializeWrapper:
        """GET_ALL_TOPIC_CONFIG: the whole table as stored (no static-topic mappings here)."""
        with self._lock:
            return TopicConfigAndMappingSerializeWrapper(
                topic_config_table=dict(self.table), data_version=dataclasses.replace(self.data_version),
                mapping_data_version=dataclasses.replace(self.mapping_data_version),
            )


def new_topic_config(
    topic: str, read: int, write: int, perm: int, filter_type: TopicFilterType | None,
    sys_flag: int, order: bool, attributes: dict[str, str] | None,
) -> TopicConfig:
    return TopicConfig(topic_name=topic, read_queue_nums=read, write_queue_nums=write, perm=perm,
                       topic_filter_type=filter_type or TopicFilterType.SINGLE_TAG,
                       topic_sys_flag=sys_flag, order=order, attributes=attributes or {})
