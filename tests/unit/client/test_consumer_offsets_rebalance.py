"""Offset stores (Java's file layout, .bak recovery, the broker store's -1/-2 and forgetting
unassigned queues, frozen offsets) and the rebalance service's timing (20 s, 1 s after an
unbalanced round, wakeups coalesced, one round at a time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from consumer_broker import ConsumerWorld
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.config import ClientConfig
from rmqwire.client.consumer.offset_store import (
    ControllableOffset,
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from rmqwire.client.consumer.rebalance import RebalanceService
from rmqwire.client.instance import ClientInstance
from rmqwire.model import MessageQueue

_t = SynchronousTestCase()
MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_controllable_offset_freezes() -> None:
    o = ControllableOffset(5)
    o.update(3, increase_only=True)
    assert o.value == 5
    o.update(3)
    assert o.value == 3
    o.update_and_freeze(9)
    o.update(1)
    assert o.value == 9


def test_local_file_store_layout_and_backup(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("10.0.0.1@DEFAULT", "g", tmp_path)
    store.update_offset(MQ0, 4)
    store.update_offset(MQ1, 7)
    _t.successResultOf(store.persist_all([MQ0]))
    path = tmp_path / "10.0.0.1@DEFAULT" / "g" / "offsets.json"
    assert path.read_text() == '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:4}}'
    _t.successResultOf(store.persist(MQ1))
    # the previous content is kept as offsets.json.bak
    assert (tmp_path / "10.0.0.1@DEFAULT" / "g" / "offsets.json.bak").read_text() == \
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:4}}'
    again = LocalFileOffsetStore("10.0.0.1@DEFAULT", "g", tmp_path)
    again.load()
    assert again.clone_offset_table() == {MQ0: 4, MQ1: 7}
    path.write_text("{not json")  # a torn write: the backup is read instead
    third = LocalFileOffsetStore("10.0.0.1@DEFAULT", "g", tmp_path)
    assert _t.successResultOf(third.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE)) == 4
    assert _t.successResultOf(third.read_offset(MessageQueue("T", "x", 9), ReadOffsetType.READ_FROM_STORE)) == -1
    assert _t.successResultOf(third.read_offset(MQ1, ReadOffsetType.READ_FROM_MEMORY)) == -1


def test_remote_store_reads_persists_and_forgets() -> None:
    w = ConsumerWorld()
    w.add_topic("T", 2)
    b = w.cb["broker-a"]
    instance = ClientInstance(w.reactor, ClientConfig(namesrv_addr=w.namesrv_addr, client_ip="10.0.0.1"))
    instance.startService()
    store = RemoteBrokerOffsetStore(instance, "g")
    d = store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE)
    w.run()
    assert _t.successResultOf(d) == -1  # QUERY_NOT_FOUND
    b.offsets[("g", "T", 1)] = 12
    d = store.read_offset(MQ1, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
    w.run()
    assert _t.successResultOf(d) == 12 and store.memory_offset(MQ1) == 12
    store.update_offset(MQ0, 3)
    d = store.persist_all([MQ0])  # MQ1 is no longer assigned: forgotten, not written
    w.run()
    _t.successResultOf(d)
    assert [(u.queue_id, u.commit_offset) for u in b.offset_updates] == [(0, 3)]
    assert store.clone_offset_table() == {MQ0: 3}
    unknown = MessageQueue("T", "broker-z", 0)
    d = store.read_offset(unknown, ReadOffsetType.READ_FROM_STORE)
    w.run()
    assert _t.successResultOf(d) == -2  # no such broker
    d = instance.stopService()
    w.run()
    _t.successResultOf(d)


class Rounds:
    def __init__(self, results: list[Any]) -> None:
        self.results = results
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        r = self.results.pop(0) if self.results else True
        return r if isinstance(r, Deferred) else succeed(r)


def test_rebalance_service_timing() -> None:
    clock = Clock()
    rounds = Rounds([False, True])
    s = RebalanceService(clock, rounds)
    s.start()
    s.wakeup()  # within the 1 s minimum interval since start: waits for it
    clock.advance(0.5)
    assert rounds.calls == 0
    clock.advance(0.5)
    assert rounds.calls == 1  # unbalanced: next in 1 s
    clock.advance(1)
    assert rounds.calls == 2  # balanced: next in 20 s
    clock.advance(19.9)
    assert rounds.calls == 2
    clock.advance(0.1)
    assert rounds.calls == 3
    _t.successResultOf(s.stop())
    clock.advance(100)
    assert rounds.calls == 3 and not clock.getDelayedCalls()


def test_rebalance_service_runs_one_round_at_a_time() -> None:
    clock = Clock()
    slow: Deferred[bool] = Deferred()
    rounds = Rounds([slow])
    s = RebalanceService(clock, rounds)
    s.start()
    clock.advance(20)
    assert rounds.calls == 1
    s.wakeup()
    s.wakeup()
    clock.advance(5)
    assert rounds.calls == 1  # still running: the wakeups wait for it
    stopped = s.stop()
    assert not stopped.called
    slow.callback(True)
    _t.successResultOf(stopped)
    clock.advance(30)
    assert rounds.calls == 1
