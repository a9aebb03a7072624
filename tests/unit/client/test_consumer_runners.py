"""Listener runners: results handed back to the reactor thread, exceptions as outcomes, chunks
only when every worker is busy, stop without joining from a worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rmqwire.client.consumer.consume_service import Outcome, ReactorRunner, ThreadRunner


class FakeReactor:
    """callFromThread queues; the test thread plays the reactor by draining the queue."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.lock = threading.Lock()

    def callFromThread(self, fn: Callable[..., Any], *args: Any) -> None:  # noqa: N802
        with self.lock:
            self.calls.append((fn, args))

    def seconds(self) -> float:
        return time.monotonic()

    def drain_until(self, cond: Callable[[], bool], timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not cond():
            with self.lock:
                calls, self.calls = self.calls, []
            for fn, args in calls:
                fn(*args)
            assert time.monotonic() < end, "timed out"
            time.sleep(0.001)


def test_thread_runner_results_and_exceptions() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 3, "T")
    r.start()
    got: list[Outcome] = []

    def boom() -> None:
        raise ValueError("listener failed")

    r.submit(lambda x: x * 2, (21,), got.append)
    r.submit(boom, (), got.append)
    reactor.drain_until(lambda: len(got) == 2)
    assert sorted((o.error is not None, o.value or 0) for o in got) == [(False, 42), (True, 0)]
    failure = next(o.error for o in got if o.error is not None)
    assert failure.check(ValueError)
    r.stop()
    assert r.join(10)
    stopped: list[Outcome] = []
    r.submit(lambda: 1, (), stopped.append)
    assert stopped[0].error is not None  # refused after stop, reported at once


def test_chunks_only_when_every_worker_is_busy() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 2, "T")
    r.start()
    assert r.chunk_hint(32) == 1
    gate = threading.Event()
    done: list[Outcome] = []
    for _ in range(6):
        r.submit(gate.wait, (10,), done.append)
    # two workers hold a task each, four wait in the queue: more than one per worker
    deadline = time.monotonic() + 10
    while r._tasks.qsize() > 4 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert r.chunk_hint(32) == ThreadRunner.MAX_CHUNK and r.chunk_hint(3) == 3
    gate.set()
    reactor.drain_until(lambda: len(done) == 6)
    r.stop()
    assert r.join(10)


def test_reactor_runner_plain_and_deferred_results() -> None:
    from twisted.internet.defer import Deferred

    reactor = FakeReactor()
    r = ReactorRunner(reactor)
    later: list[Outcome] = []
    assert r.submit(lambda: "now", (), later.append).value == "now"
    d: Deferred[str] = Deferred()
    assert r.submit(lambda: d, (), later.append) is None
    d.callback("later")
    assert later[0].value == "later"
    assert r.submit(lambda: 1 / 0, (), later.append).error.check(ZeroDivisionError)


def test_settled_calls_finished_meanwhile_are_settled_together() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 2, "T")
    r.start()
    batches: list[list[tuple[Any, Outcome]]] = []
    plain: list[Outcome] = []
    for i in range(6):
        r.submit_settled(lambda x: x * 10, (i,), f"k{i}", batches.append)
    r.submit(lambda: "plain", (), plain.append)

    def boom() -> None:
        raise ValueError("listener failed")

    r.submit_settled(boom, (), "bad", batches.append)
    # nothing is settled until the reactor runs: every finished call lands in one batch
    deadline = time.monotonic() + 10
    while len(r._done) < 8 and time.monotonic() < deadline:
        time.sleep(0.001)
    reactor.drain_until(lambda: bool(batches) and bool(plain))
    assert len(batches) == 1 and plain[0].value == "plain"
    got = dict(batches[0])
    assert {k: o.value for k, o in got.items() if k != "bad"} == {f"k{i}": i * 10 for i in range(6)}
    assert got["bad"].error.check(ValueError)
    r.stop()
    assert r.join(10)
    refused: list[list[tuple[Any, Outcome]]] = []
    r.submit_settled(lambda: 1, (), "late", refused.append)
    assert refused[0][0][0] == "late" and refused[0][0][1].error is not None


def test_reactor_runner_settles_each_call() -> None:
    from twisted.internet.defer import Deferred

    r = ReactorRunner(FakeReactor())
    settled: list[list[tuple[Any, Outcome]]] = []
    r.submit_settled(lambda: "now", (), "a", settled.append)
    assert [(k, o.value) for k, o in settled[0]] == [("a", "now")]
    d: Deferred[str] = Deferred()
    r.submit_settled(lambda: d, (), "b", settled.append)
    assert len(settled) == 1
    d.callback("later")
    assert [(k, o.value) for k, o in settled[1]] == [("b", "later")]
