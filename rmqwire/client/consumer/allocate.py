"""Queue allocation strategies: which of a topic's queues one consumer of a group takes.

Pure functions of (group, this client id, every queue, every client id), as Java's
``AllocateMessageQueueStrategy`` implementations, so that a group mixing rmqwire and Java
consumers splits queues without overlap or gap. The rebalance passes ``mq_all`` sorted as
``MessageQueue.compareTo`` and ``cid_all`` sorted as ``String.compareTo`` (UTF-16 code units);
the strategies take the lists as given, exactly as Java's do.

- ``AllocateMessageQueueAveragely`` (the default, name ``AVG``): contiguous blocks, the first
  ``len(mq_all) % len(cid_all)`` consumers get one more (broker-and-store.md section 9.4);
- ``AllocateMessageQueueAveragelyByCircle`` (``AVG_BY_CIRCLE``): queue i goes to consumer
  i mod n;
- ``AllocateMessageQueueConsistentHash`` (``CONSISTENT_HASH``): a ring of ``virtual_node_cnt``
  virtual nodes per consumer keyed by the first four MD5 bytes of ``"<cid>-<i>"``; each queue
  goes to the first node at or after the MD5 of the queue's ``toString()``;
- ``AllocateMessageQueueByMachineRoom`` (``MACHINE_ROOM``): only queues of brokers named
  ``<room>@<name>`` for rooms in ``consumer_idcs``, split in blocks plus one remainder each;
- ``AllocateMachineRoomNearby`` (``MACHINE_ROOM_NEARBY-<inner>``): queues of this consumer's
  room by the inner strategy among that room's consumers, and queues of rooms without any
  consumer among all consumers;
- ``AllocateMessageQueueByConfig`` (``CONFIG``): a fixed list.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from twisted.logger import Logger

from rmqwire.model import MessageQueue

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "MachineRoomResolver",
    "md5_hash",
    "strategy_of",
]

_log = Logger(namespace="rmqwire.client.consumer.allocate")


class AllocateMessageQueueStrategy(Protocol):
    """What the rebalance calls (Java ``AllocateMessageQueueStrategy``)."""

    @property
    def name(self) -> str: ...

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]: ...


class _Strategy:
    name = ""

    def check(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> bool:
        """Java ``AbstractAllocateMessageQueueStrategy.check``: empty inputs are errors; a client
        id the broker does not list yet gets nothing."""
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all:
            raise ValueError("mqAll is null or mqAll empty")
        if not cid_all:
            raise ValueError("cidAll is null or cidAll empty")
        if current_cid not in cid_all:
            _log.info("[BUG] ConsumerGroup: {group} The consumerId: {cid} not in cidAll: {all}",
                      group=consumer_group, cid=current_cid, all=list(cid_all))
            return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AllocateMessageQueueAveragely(_Strategy):
    name = "AVG"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        n_mq, n_cid = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average = 1
        elif mod > 0 and index < mod:
            average = n_mq // n_cid + 1
        else:
            average = n_mq // n_cid
        start = index * average if (mod > 0 and index < mod) else index * average + mod
        count = min(average, n_mq - start)
        return [mq_all[start + i] for i in range(count)]  # count <= 0: nothing


class AllocateMessageQueueAveragelyByCircle(_Strategy):
    name = "AVG_BY_CIRCLE"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]


def md5_hash(key: str) -> int:
    """Java ``ConsistentHashRouter.MD5Hash``: the first 4 MD5 bytes of the UTF-8 key, big-endian,
    as a non-negative long."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash(_Strategy):
    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10, hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function or md5_hash

    def _ring(self, cid_all: Iterable[str]) -> tuple[list[int], list[str]]:
        ring: dict[int, str] = {}
        replicas: dict[str, int] = {}
        for cid in cid_all:
            existing = replicas.get(cid, 0)  # Java counts a repeated client's nodes on
            for i in range(self.virtual_node_cnt):
                ring[self.hash_function(f"{cid}-{i + existing}")] = cid  # a collision: last wins
            replicas[cid] = existing + self.virtual_node_cnt
        keys = sorted(ring)
        return keys, [ring[k] for k in keys]

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        keys, owners = self._ring(cid_all)
        if not keys:
            return []
        out = []
        for mq in mq_all:
            i = bisect.bisect_left(keys, self.hash_function(str(mq)))
            owner = owners[i if i < len(keys) else 0]  # past the last node: wrap to the first
            if owner == current_cid:
                out.append(mq)
        return out


class AllocateMessageQueueByMachineRoom(_Strategy):
    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str] = ()) -> None:
        self.consumer_idcs = set(consumer_idcs)

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        pre = []
        for mq in mq_all:
            parts = mq.broker_name.split("@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                pre.append(mq)
        per, rem = divmod(len(pre), len(cid_all))
        out = pre[per * index : per * index + per]
        if rem > index:
            out.append(pre[index + per * len(cid_all)])
        return out


class MachineRoomResolver(Protocol):
    """Java ``AllocateMachineRoomNearby.MachineRoomResolver``."""

    def broker_deploy_in(self, mq: MessageQueue) -> str: ...

    def consumer_deploy_in(self, client_id: str) -> str: ...


class AllocateMachineRoomNearby(_Strategy):
    def __init__(self, strategy: AllocateMessageQueueStrategy, resolver: MachineRoomResolver) -> None:
        if strategy is None:
            raise TypeError("allocateMessageQueueStrategy is null")
        if resolver is None:
            raise TypeError("machineRoomResolver is null")
        self.strategy = strategy
        self.resolver = resolver

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"MACHINE_ROOM_NEARBY-{self.strategy.name}"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        room_mqs: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {mq}")
            room_mqs.setdefault(room, []).append(mq)
        room_cids: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.resolver.consumer_deploy_in(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            room_cids.setdefault(room, []).append(cid)
        out: list[MessageQueue] = []
        mine = self.resolver.consumer_deploy_in(current_cid)
        here = room_mqs.pop(mine, None)
        if here:
            out.extend(self.strategy.allocate(consumer_group, current_cid, here,
                                              room_cids.get(mine, [])))
        for room in sorted(room_mqs):  # Java iterates a TreeMap
            if room not in room_cids:  # no consumer there: everybody shares its queues
                out.extend(self.strategy.allocate(consumer_group, current_cid, room_mqs[room], cid_all))
        return out


class AllocateMessageQueueByConfig(_Strategy):
    name = "CONFIG"

    def __init__(self, message_queues: Iterable[MessageQueue] = ()) -> None:
        self.message_queues = list(message_queues)

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        return list(self.message_queues)


_BY_NAME: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    "AVG": AllocateMessageQueueAveragely,
    "AVERAGELY": AllocateMessageQueueAveragely,
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CONSISTENT_HASH": AllocateMessageQueueConsistentHash,
}


def strategy_of(value: AllocateMessageQueueStrategy | str | None) -> AllocateMessageQueueStrategy:
    """A strategy object from itself, a name (``"averagely"``/``"AVG"``, ``"by_circle"``,
    ``"consistent_hash"``) or None (averagely). Strategies with settings (machine room, config)
    are passed as objects."""
    if value is None:
        return AllocateMessageQueueAveragely()
    if isinstance(value, str):
        factory = _BY_NAME.get(value.strip().upper().replace("-", "_").replace(" ", "_"))
        if factory is None:
            raise ValueError(f"unknown allocate strategy {value!r}; known: {sorted(_BY_NAME)}")
        return factory()
    if not callable(getattr(value, "allocate", None)):
        raise TypeError(f"{value!r} has no allocate(group, cid, mq_all, cid_all) method")
    return value
