"""Consumer groups a broker knows (Java ``SubscriptionGroupManager``), persisted to
``config/subscriptionGroup.json`` (with its ``.bak``) in the official format.

A group used for the first time is created with the defaults (16 retries, 1 retry queue, ...)
when ``autoCreateSubscriptionGroup`` is on, as the official broker does; names are checked first
(``^[%|a-zA-Z0-9_-]+$``, at most 255 characters).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from twisted.logger import Logger

from rmqwire.codec.commands.admin import SubscriptionGroupConfig
from rmqwire.codec.commands.topic import DataVersion
from rmqwire.codec.java import now_ms
from rmqwire.errors import CodecError
from rmqwire.server.broker.config import BrokerConfig
from rmqwire.server.broker.config_file import ConfigFile
from rmqwire.server.broker.topic_config import is_topic_or_group_illegal

__all__ = ["SYSTEM_GROUPS", "SubscriptionGroupManager"]

#: The groups a 5.3.3 broker creates at start (MixAll's tool, filter-server, self-test, ONS and
#: transaction-check groups).
SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
)
_SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
_GROUP_MAX_LENGTH = 255


class SubscriptionGroupManager:
    log = Logger()

    def __init__(self, broker: BrokerConfig, path: str | Path | None, *,
                 clock: Callable[[], int] = now_ms) -> None:
        self.broker = broker
        self.file = ConfigFile(path) if path is not None else None
        self._clock = clock
        self._lock = threading.RLock()
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.forbidden_table: dict[str, dict[str, int]] = {}
        self.data_version = DataVersion(timestamp=clock())
        for group in SYSTEM_GROUPS:
            self.table[group] = SubscriptionGroupConfig(group_name=group)

    # ---- persistence -----------------------------------------------------------------------------

    def load(self) -> None:
        if self.file is None:
            return
        tree = self.file.load()
        if not isinstance(tree, Mapping):
            return
        with self._lock:
            table = tree.get("subscriptionGroupTable")
            if isinstance(table, Mapping):
                for name, raw in table.items():
                    try:
                        cfg = SubscriptionGroupConfig.from_fastjson(raw)
                    except (CodecError, TypeError, ValueError) as e:
                        self.log.warn("subscriptionGroup.json: group {name} ignored: {why}",
                                      name=name, why=str(e))
                        continue
                    cfg.group_name = cfg.group_name or str(name)
                    self.table[cfg.group_name] = cfg
            forbidden = tree.get("forbiddenTable")
            if isinstance(forbidden, Mapping):
                self.forbidden_table = {
                    str(g): {str(t): int(v) for t, v in topics.items() if isinstance(v, int)}
                    for g, topics in forbidden.items() if isinstance(topics, Mapping)
                }
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
                "forbiddenTable": {g: dict(t) for g, t in self.forbidden_table.items()},
                "subscriptionGroupTable": {n: c.to_fastjson() for n, c in self.table.items()},
            }

    def persist(self) -> None:
        if self.file is not None:
            self.file.save(self.to_tree())

    def _next_version(self) -> None:
        dv = self.data_version
        self.data_version = DataVersion(state_version=dv.state_version, timestamp=self._clock(),
                                        counter=dv.counter + 1)

    # ---- queries and changes ---------------------------------------------------------------------

    def contains(self, group: str | None) -> bool:
        return group in self.table

    def get(self, group: str | None) -> SubscriptionGroupConfig | None:
        return self.table.get(group) if group is not None else None

    def find(self, group: str | None) -> SubscriptionGroupConfig | None:
        """Java ``findSubscriptionGroupConfig``: the group's config, auto-created when allowed."""
        if group is None:
            return None
        cfg = self.table.get(group)
        if cfg is not None:
            return cfg
        may_create = self.broker.auto_create_subscription_group or (
            self.broker.enable_create_sys_group and group.startswith(_SYS_GROUP_PREFIX)
        )
        if not may_create or len(group) > _GROUP_MAX_LENGTH or not group or is_topic_or_group_illegal(group):
            return None
        with self._lock:
            cfg = self.table.get(group)
            if cfg is None:
                cfg = SubscriptionGroupConfig(group_name=group)
                self.table[group] = cfg
                self.log.info("auto create a subscription group, {group}", group=group)
            self._next_version()
            self.persist()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP."""
        name = cfg.group_name
        if not name or len(name) > _GROUP_MAX_LENGTH or is_topic_or_group_illegal(name):
            raise ValueError(f"illegal group name {name!r}")
        with self._lock:
            self.table[name] = cfg
            self._next_version()
            self.persist()

    def delete(self, group: str) -> bool:
        with self._lock:
            old = self.table.pop(group, None)
            self.forbidden_table.pop(group, None)
            if old is None:
                return False
            self._next_version()
            self.persist()
            return True

    def is_forbidden(self, group: str, topic: str, perm_index: int) -> bool:
        """Java ``getForbidden``: bit ``perm_index`` of the group's forbidden value for ``topic``."""
        value = self.forbidden_table.get(group, {}).get(topic, 0)
        return bool(value & (1 << perm_index))
