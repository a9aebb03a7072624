"""Consumer offsets (Java ``OffsetStore``): in memory while consuming, persisted to the broker
(clustering) or to a local file (broadcasting).

- ``RemoteBrokerOffsetStore``: reads with QUERY_CONSUMER_OFFSET (22 QUERY_NOT_FOUND = -1, any
  other failure = -2), writes with UPDATE_CONSUMER_OFFSET, oneway from the periodic persist (and
  at shutdown), two-way on request; persisting forgets queues no longer assigned.
- ``LocalFileOffsetStore``: Java's file, ``<dir>/<clientId>/<group>/offsets.json`` with
  ``dir`` = ``$HOME/.rocketmq_offsets`` (``rocketmq.client.localOffsetStoreDir``), holding
  ``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:offset,...}}``; the previous
  content is kept as ``offsets.json.bak`` and read when the file is missing or unreadable.

An offset updated with ``update_and_freeze_offset`` (after PULL_OFFSET_MOVED) ignores further
updates until the queue's offset is removed (Java ``ControllableOffset``). Store reads are
Deferreds; memory reads are plain calls. Only the reactor thread touches a store.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.consumer.mq_admin import broker_not_exist, find_broker_in_subscribe
from rmqwire.client.instance import ClientInstance
from rmqwire.client.route import MASTER_ID
from rmqwire.codec.body import LONG, MQ, FastjsonBody, map_of, prop
from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.offset import QueryConsumerOffset, UpdateConsumerOffset
from rmqwire.errors import CodecError
from rmqwire.model import MessageQueue

__all__ = [
    "ControllableOffset",
    "LocalFileOffsetStore",
    "OffsetSerializeWrapper",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "local_offset_store_dir",
]

#: Java's timeout for offset queries and updates (ms).
OFFSET_CALL_TIMEOUT = 5.0


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


@dataclasses.dataclass(slots=True)
class ControllableOffset:
    """An offset that ``update_and_freeze`` pins until it is removed."""

    value: int
    allow_to_update: bool = True

    def update(self, target: int, increase_only: bool = False) -> None:
        if self.allow_to_update:
            self.value = max(target, self.value) if increase_only else target

    def update_and_freeze(self, target: int) -> None:
        self.allow_to_update = False
        self.value = target


@dataclasses.dataclass
class OffsetSerializeWrapper(FastjsonBody):
    """Java ``OffsetSerializeWrapper``: the local offsets file's content."""

    offset_table: dict[MessageQueue, int] | None = prop("offsetTable", map_of(MQ, LONG), factory=dict)


class OffsetStore:
    """The in-memory table both stores share, and their common operations."""

    log = Logger()

    def __init__(self, group: str) -> None:
        self.group = group
        self.offset_table: dict[MessageQueue, ControllableOffset] = {}

    # ---- memory -----------------------------------------------------------------------------

    def load(self) -> None:
        """Read what the store keeps at start (only the local file store keeps anything)."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        cur = self.offset_table.get(mq)
        if cur is None:
            self.offset_table[mq] = ControllableOffset(offset)
        else:
            cur.update(offset, increase_only)

    def update_and_freeze_offset(self, mq: MessageQueue, offset: int) -> None:
        cur = self.offset_table.get(mq)
        if cur is None:
            cur = self.offset_table[mq] = ControllableOffset(offset)
        cur.update_and_freeze(offset)

    def memory_offset(self, mq: MessageQueue) -> int:
        """The in-memory offset, -1 when there is none (READ_FROM_MEMORY)."""
        cur = self.offset_table.get(mq)
        return cur.value if cur is not None else -1

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: o.value for mq, o in self.offset_table.items() if not topic or mq.topic == topic}

    def read_offset(self, mq: MessageQueue, type_: ReadOffsetType) -> Deferred[int]:
        """Java ``readOffset``: memory (-1 if none), the store, or memory then the store."""
        if type_ is not ReadOffsetType.READ_FROM_STORE:
            cur = self.offset_table.get(mq)
            if cur is not None:
                return defer.succeed(cur.value)
            if type_ is ReadOffsetType.READ_FROM_MEMORY:
                return defer.succeed(-1)
        return self.read_from_store(mq)

    # ---- persistence (per store) ------------------------------------------------------------

    def read_from_store(self, mq: MessageQueue) -> Deferred[int]:
        raise NotImplementedError

    def persist_all(self, mqs: Iterable[MessageQueue]) -> Deferred[None]:
        raise NotImplementedError

    def persist(self, mq: MessageQueue) -> Deferred[None]:
        raise NotImplementedError

    def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, oneway: bool) -> Deferred[None]:
        return defer.succeed(None)


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets kept by the broker of each queue (clustering)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__(group)
        self.instance = instance

    def read_from_store(self, mq: MessageQueue) -> Deferred[int]:
        d = self.fetch_consume_offset_from_broker(mq)

        def got(offset: int) -> int:
            if offset >= 0:
                self.update_offset(mq, offset)
            return offset

        def failed(f: Failure) -> int:
            self.log.warn("fetchConsumeOffsetFromBroker exception, {mq}: {why}", mq=mq,
                          why=f.getErrorMessage())
            return -2

        return d.addCallbacks(got, failed)

    def fetch_consume_offset_from_broker(self, mq: MessageQueue) -> Deferred[int]:
        """QUERY_CONSUMER_OFFSET at the master; -1 when the broker has none for the group."""
        def call(found: Any) -> Deferred[int]:
            if found is None:
                raise broker_not_exist(mq.broker_name)
            d = self.instance.broker_call(found.broker_addr, QueryConsumerOffset, QueryConsumerOffset.header(
                consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name),
                timeout=OFFSET_CALL_TIMEOUT)
            return d.addCallback(
                lambda r: -1 if r.code == ResponseCode.QUERY_NOT_FOUND else r.header.offset)

        return find_broker_in_subscribe(self.instance, mq, MASTER_ID, only_this_broker=True,
                                        retry_only_this_broker=False).addCallback(call)

    def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, oneway: bool = True) -> Deferred[None]:
        def call(found: Any) -> Deferred[None]:
            if found is None:
                raise broker_not_exist(mq.broker_name)
            header = UpdateConsumerOffset.header(consumer_group=self.group, topic=mq.topic,
                                                 queue_id=mq.queue_id, commit_offset=offset,
                                                 bname=mq.broker_name)
            if oneway:
                return self.instance.broker_oneway(found.broker_addr, UpdateConsumerOffset, header)
            return self.instance.broker_call(found.broker_addr, UpdateConsumerOffset, header,
                                             timeout=OFFSET_CALL_TIMEOUT).addCallback(lambda _: None)

        return find_broker_in_subscribe(self.instance, mq, MASTER_ID).addCallback(call)

    def _logged(self, d: Deferred[None], mq: MessageQueue) -> Deferred[None]:
        def failed(f: Failure) -> None:
            self.log.warn("updateConsumeOffsetToBroker exception, {mq}: {why}", mq=mq,
                          why=f.getErrorMessage())

        return d.addErrback(failed)

    def persist_all(self, mqs: Iterable[MessageQueue]) -> Deferred[None]:
        mqs = set(mqs)
        if not mqs:
            return defer.succeed(None)
        calls = []
        for mq, offset in list(self.offset_table.items()):
            if mq in mqs:
                calls.append(self._logged(self.update_consume_offset_to_broker(mq, offset.value), mq))
            else:
                del self.offset_table[mq]  # no longer assigned: forget it (Java's unusedMQ)
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def persist(self, mq: MessageQueue) -> Deferred[None]:
        offset = self.offset_table.get(mq)
        if offset is None:
            return defer.succeed(None)
        return self._logged(self.update_consume_offset_to_broker(mq, offset.value), mq)


def local_offset_store_dir() -> Path:
    """Java ``LocalFileOffsetStore.LOCAL_OFFSET_STORE_DIR``; env ``ROCKETMQ_CLIENT_LOCAL_OFFSET_
    STORE_DIR`` stands for the system property ``rocketmq.client.localOffsetStoreDir``."""
    configured = os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".rocketmq_offsets"


class LocalFileOffsetStore(OffsetStore):
    """Offsets in a local file (broadcasting: every consumer keeps its own)."""

    def __init__(self, client_id: str, group: str, base_dir: Path | str | None = None) -> None:
        super().__init__(group)
        base = Path(base_dir) if base_dir is not None else local_offset_store_dir()
        self.store_path = base / client_id / group / "offsets.json"

    def load(self) -> None:
        wrapper = self._read_local_offset()
        if wrapper is not None:
            for mq, offset in (wrapper.offset_table or {}).items():
                self.offset_table[mq] = ControllableOffset(offset)
                self.log.info("load consumer's offset, {group} {mq} {offset}", group=self.group,
                              mq=mq, offset=offset)

    def read_from_store(self, mq: MessageQueue) -> Deferred[int]:
        try:
            wrapper = self._read_local_offset()
        except CodecError:
            return defer.succeed(-1)
        offset = (wrapper.offset_table or {}).get(mq) if wrapper is not None else None
        if offset is None:
            return defer.succeed(-1)
        self.update_offset(mq, offset)
        return defer.succeed(offset)

    def persist_all(self, mqs: Iterable[MessageQueue]) -> Deferred[None]:
        mqs = set(mqs)
        if not mqs:
            return defer.succeed(None)
        self._write({mq: o.value for mq, o in self.offset_table.items() if mq in mqs})
        return defer.succeed(None)

    def persist(self, mq: MessageQueue) -> Deferred[None]:
        offset = self.offset_table.get(mq)
        if offset is not None:
            self._write({mq: offset.value})
        return defer.succeed(None)

    def _write(self, updates: dict[MessageQueue, int]) -> None:
        try:
            wrapper = self._read_local_offset() or OffsetSerializeWrapper()
        except CodecError as e:
            self.log.error("readLocalOffset exception: {e}", e=e)
            return
        table = dict(wrapper.offset_table or {})
        table.update(updates)
        text = OffsetSerializeWrapper(offset_table=table).encode(standard=False)
        try:
            self._string_to_file(text, self.store_path)
        except OSError as e:
            self.log.error("persistAll consumer offset Exception, {path}: {e}", path=self.store_path, e=e)

    @staticmethod
    def _string_to_file(data: bytes, path: Path) -> None:
        """Java ``MixAll.string2File``: the previous content to ``.bak``, then the new one (written
        to a temporary file and renamed, so a crash never leaves half a file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            _write_atomically(path.with_name(path.name + ".bak"), path.read_bytes())
        _write_atomically(path, data)

    def _read_local_offset(self) -> OffsetSerializeWrapper | None:
        content = _read(self.store_path)
        if content:
            try:
                return OffsetSerializeWrapper.decode(content)
            except CodecError as e:
                self.log.warn("readLocalOffset Exception, and try to correct: {e}", e=e)
        return self._read_local_offset_bak()

    def _read_local_offset_bak(self) -> OffsetSerializeWrapper | None:
        content = _read(self.store_path.with_name(self.store_path.name + ".bak"))
        if content:
            return OffsetSerializeWrapper.decode(content)  # CodecError: Java throws too
        return None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
