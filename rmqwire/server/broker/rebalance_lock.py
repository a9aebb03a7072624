"""Queue locks of orderly consumers (Java ``RebalanceLockManager``): LOCK_BATCH_MQ /
UNLOCK_BATCH_MQ. A lock belongs to one client id and lapses after 60 s without renewal
(``rocketmq.broker.rebalance.lockMaxLiveTime``); the client renews every 20 s."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from rmqwire.codec.java import now_ms
from rmqwire.model import MessageQueue

__all__ = ["LOCK_MAX_LIVE_TIME", "RebalanceLockManager"]

LOCK_MAX_LIVE_TIME = 60_000


@dataclasses.dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update: int


class RebalanceLockManager:
    def __init__(self, *, clock: Callable[[], int] = now_ms, max_live_ms: int = LOCK_MAX_LIVE_TIME) -> None:
        self._clock = clock
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, _LockEntry]] = {}

    def _expired(self, entry: _LockEntry, now: int) -> bool:
        return now - entry.last_update > self.max_live_ms

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """Lock what is free or already ours (renewing it); return the queues ``client_id`` holds."""
        now = self._clock()
        locks = self.table.setdefault(group, {})
        ok = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None or entry.client_id == client_id or self._expired(entry, now):
                locks[mq] = _LockEntry(client_id, now)
                ok.append(mq)
        return ok

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]

    def is_lock_all_expired(self, group: str) -> bool:
        """True when ``group`` holds no live lock (then a retry is not an ordered one)."""
        now = self._clock()
        return all(self._expired(e, now) for e in self.table.get(group, {}).values())
