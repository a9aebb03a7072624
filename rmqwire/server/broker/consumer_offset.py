"""Committed consumer offsets (Java ``ConsumerOffsetManager``), persisted to
``config/consumerOffset.json`` (with its ``.bak``) in the official format: ``offsetTable`` keyed by
``topic@group`` with unquoted integer queue ids, ``dataVersion`` and the derived ``groupTopicMap``.

Commits only change memory; the broker persists every ``flushConsumerOffsetInterval`` ms (and at
shutdown), as the official broker does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from twisted.logger import Logger

from rmqwire.codec.commands.topic import DataVersion
from rmqwire.codec.java import now_ms
from rmqwire.errors import CodecError
from rmqwire.server.broker.config_file import ConfigFile
from rmqwire.server.namesrv.hash_order import (
    concurrent_capacity,
    hashmap_order,
    java_order,
)

__all__ = ["TOPIC_GROUP_SEPARATOR", "ConsumerOffsetManager"]

TOPIC_GROUP_SEPARATOR = "@"
#: Java ``consumerOffsetUpdateVersionStep``: the data version moves once per this many commits.
_VERSION_STEP = 500


def _key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class ConsumerOffsetManager:
    log = Logger()

    def __init__(self, path: str | Path | None, *, clock: Callable[[], int] = now_ms) -> None:
        self.file = ConfigFile(path) if path is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self.offset_table: dict[str, dict[int, int]] = {}
        self.pull_offset_table: dict[str, dict[int, int]] = {}
        self.reset_offset_table: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion(timestamp=clock())
        self._commits = 0
        self._dirty = False

    # ---- persistence -----------------------------------------------------------------------------

    def load(self) -> None:
        if self.file is None:
            return
        tree = self.file.load()
        if not isinstance(tree, Mapping):
            return
        table = tree.get("offsetTable")
        if isinstance(table, Mapping):
            for key, queues in table.items():
                if not isinstance(key, str) or not isinstance(queues, Mapping):
                    continue
                self.offset_table[key] = {
                    int(q): int(o) for q, o in queues.items()
                    if isinstance(q, int) and isinstance(o, int)
                }
        dv = tree.get("dataVersion")
        if isinstance(dv, Mapping):
            try:
                self.data_version = DataVersion.from_fastjson(dv)
            except (CodecError, TypeError, ValueError):
                pass

    def to_tree(self) -> dict[str, Any]:
        with self._lock:
            table = {k: dict(v) for k, v in self.offset_table.items()}
            dv = self.data_version.to_fastjson()
        group_topics: dict[str, list[str]] = {}
        for key in table:
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            if group:
                group_topics.setdefault(group, []).append(topic)
        return {"dataVersion": dv, "groupTopicMap": group_topics, "offsetTable": table}

    def persist(self) -> None:
        if self.file is not None:
            self._dirty = False
            self.file.save(self.to_tree())

    def persist_if_changed(self) -> None:
        if self._dirty:
            self.persist()

    # ---- offsets ---------------------------------------------------------------------------------

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = _key(topic, group)
        with self._lock:
            queues = self.offset_table.setdefault(key, {})
            prev = queues.get(queue_id)
            queues[queue_id] = offset
            self._dirty = True
            self._commits += 1
            if self._commits % _VERSION_STEP == 0:
                dv = self.data_version
                self.data_version = DataVersion(state_version=dv.state_version,
                                                timestamp=self._clock(), counter=dv.counter + 1)
        if prev is not None and offset < prev:
            self.log.warn("update consumer offset less than store. clientHost={host}, key={key}, "
                          "queueId={q}, requestOffset={new}, storeOffset={old}",
                          host=client_host, key=key, q=queue_id, new=offset, old=prev)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 if none."""
        queues = self.offset_table.get(_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(_key(topic, group), {}))

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.pull_offset_table.setdefault(_key(topic, group), {})[queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        queues = self.pull_offset_table.get(_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        out = set()
        for key in list(self.offset_table):
            topic, _, g = key.partition(TOPIC_GROUP_SEPARATOR)
            if g == group:
                out.add(topic)
        return out

    def which_group_by_topic(self, topic: str) -> list[str]:
        """The groups with offsets on ``topic``, in the order of Java's ``whichGroupByTopic``
        HashSet, filled from its offset table's ConcurrentHashMap iteration."""
        keys = list(self.offset_table)
        groups = []
        for key in java_order(keys, concurrent_capacity(len(keys))):
            t, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            if t == topic:
                groups.append(group)
        return hashmap_order(groups)

    def clean_offset_by_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self.offset_table if k.partition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
                del self.offset_table[key]
                self._dirty = True

    def remove_offset(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self.offset_table if k.partition(TOPIC_GROUP_SEPARATOR)[2] == group]:
                del self.offset_table[key]
                self._dirty = True

    # ---- server-side reset (useServerSideResetOffset) -------------------------------------------

    def assign_reset_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        self.reset_offset_table.setdefault(_key(topic, group), {})[queue_id] = offset
        self.commit_offset("ResetOffset", group, topic, queue_id, offset)

    def has_offset_reset(self, topic: str, group: str, queue_id: int) -> bool:
        return queue_id in self.reset_offset_table.get(_key(topic, group), {})

    def query_then_erase_reset_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        queues = self.reset_offset_table.get(_key(topic, group))
        if not queues:
            return None
        return queues.pop(queue_id, None)
