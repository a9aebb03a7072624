"""Allocation strategies: Java's AllocateMessageQueueAveragely exactly (the spec's examples and
formula), and the partition properties every strategy must keep so that a group never has a
queue twice or not at all."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqwire.client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    md5_hash,
    strategy_of,
)
from rmqwire.codec.java import java_string_sort_key
from rmqwire.model import MessageQueue


def mqs(n: int, brokers: tuple[str, ...] = ("broker-a",)) -> list[MessageQueue]:
    return sorted(MessageQueue("T", b, i) for b in brokers for i in range(n))


def cids(n: int) -> list[str]:
    return sorted((f"10.0.0.{i}@{i}#1" for i in range(n)), key=java_string_sort_key)


def spec_formula(mq_all: list[MessageQueue], cid_all: list[str], cid: str) -> list[MessageQueue]:
    """broker-and-store.md section 9.4, written independently of the implementation."""
    index = cid_all.index(cid)
    mod = len(mq_all) % len(cid_all)
    if len(mq_all) <= len(cid_all):
        avg = 1
    elif mod > 0 and index < mod:
        avg = len(mq_all) // len(cid_all) + 1
    else:
        avg = len(mq_all) // len(cid_all)
    start = index * avg if (mod > 0 and index < mod) else index * avg + mod
    rng = min(avg, len(mq_all) - start)
    return mq_all[start : start + rng] if rng > 0 else []


def test_averagely_spec_examples() -> None:
    s = AllocateMessageQueueAveragely()
    q, c = mqs(8), cids(3)
    assert [[m.queue_id for m in s.allocate("g", cid, q, c)] for cid in c] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    q2 = mqs(2)
    assert [[m.queue_id for m in s.allocate("g", cid, q2, c)] for cid in c] == [[0], [1], []]
    assert s.name == "AVG"


def test_a_client_the_broker_does_not_list_gets_nothing_and_empty_inputs_fail() -> None:
    s = AllocateMessageQueueAveragely()
    assert s.allocate("g", "stranger", mqs(4), cids(2)) == []
    with pytest.raises(ValueError, match="currentCID is empty"):
        s.allocate("g", "", mqs(4), cids(2))
    with pytest.raises(ValueError, match="mqAll is null or mqAll empty"):
        s.allocate("g", "a", [], ["a"])
    with pytest.raises(ValueError, match="cidAll is null or cidAll empty"):
        s.allocate("g", "a", mqs(1), [])


PARTITIONING = [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
                AllocateMessageQueueConsistentHash(), AllocateMessageQueueConsistentHash(3)]


@given(n_mq=st.integers(1, 40), n_cid=st.integers(1, 12), brokers=st.integers(1, 3))
def test_every_strategy_partitions_the_queues(n_mq: int, n_cid: int, brokers: int) -> None:
    q = mqs(n_mq, tuple(f"broker-{chr(97 + i)}" for i in range(brokers)))
    c = cids(n_cid)
    for s in PARTITIONING:
        parts = [s.allocate("g", cid, q, c) for cid in c]
        flat = [m for p in parts for m in p]
        assert sorted(flat) == q, f"{s.name}: a queue is missing or assigned twice"
    avg = AllocateMessageQueueAveragely()
    for cid in c:
        assert avg.allocate("g", cid, q, c) == spec_formula(q, c, cid)


def test_by_circle_deals_queues_round_robin() -> None:
    s = AllocateMessageQueueAveragelyByCircle()
    q, c = mqs(7), cids(3)
    assert [[m.queue_id for m in s.allocate("g", cid, q, c)] for cid in c] == [[0, 3, 6], [1, 4], [2, 5]]


def test_consistent_hash_uses_java_md5_ring() -> None:
    assert md5_hash("abc") == int.from_bytes(hashlib.md5(b"abc").digest()[:4], "big")
    q, c = mqs(16), cids(4)
    s = AllocateMessageQueueConsistentHash()
    before = {cid: set(s.allocate("g", cid, q, c)) for cid in c}
    # the owner of a queue is the first virtual node at or after the queue's hash
    ring = sorted((md5_hash(f"{cid}-{i}"), cid) for cid in c for i in range(10))
    for mq in q:
        h = md5_hash(str(mq))
        owner = next((cid for k, cid in ring if k >= h), ring[0][1])
        assert mq in before[owner]
    # one more consumer only takes queues away, never moves them between the old ones
    c2 = sorted([*c, "10.0.0.99@99#1"], key=java_string_sort_key)
    after = {cid: set(s.allocate("g", cid, q, c2)) for cid in c2}
    for cid in c:
        assert after[cid] <= before[cid]
    with pytest.raises(ValueError):
        AllocateMessageQueueConsistentHash(-1)


def test_machine_room_strategies() -> None:
    q = sorted([MessageQueue("T", "hz@broker-a", i) for i in range(4)] +
               [MessageQueue("T", "sh@broker-b", i) for i in range(4)])
    c = ["hz-client-1", "hz-client-2"]
    room = AllocateMessageQueueByMachineRoom(["hz"])
    assert [[m.broker_name for m in room.allocate("g", cid, q, c)] for cid in c] == [["hz@broker-a"] * 2] * 2
    assert room.name == "MACHINE_ROOM"

    class Rooms:
        def broker_deploy_in(self, mq: MessageQueue) -> str:
            return mq.broker_name.split("@")[0]

        def consumer_deploy_in(self, cid: str) -> str:
            return cid.split("-")[0]

    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), Rooms())
    assert nearby.name == "MACHINE_ROOM_NEARBY-AVG"
    got = {cid: nearby.allocate("g", cid, q, c) for cid in c}
    # hz queues split between the hz consumers; sh has no consumer, so everybody shares it
    assert sorted(m for v in got.values() for m in v) == q
    assert all(len(v) == 4 for v in got.values())
    fixed = AllocateMessageQueueByConfig([q[0]])
    assert fixed.allocate("g", "x", q, c) == [q[0]] and fixed.name == "CONFIG"


def test_strategy_of_names() -> None:
    assert isinstance(strategy_of(None), AllocateMessageQueueAveragely)
    assert isinstance(strategy_of("averagely"), AllocateMessageQueueAveragely)
    assert isinstance(strategy_of("by_circle"), AllocateMessageQueueAveragelyByCircle)
    assert isinstance(strategy_of("consistent-hash"), AllocateMessageQueueConsistentHash)
    with pytest.raises(ValueError):
        strategy_of("nope")
    with pytest.raises(TypeError):
        strategy_of(object())  # type: ignore[arg-type]
