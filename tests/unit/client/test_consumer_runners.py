"""Listener runners: results handed back to the reactor thread, exceptions as outcomes, one
hand-off for many short calls (spread again when calls are slow), stop without joining from a
worker."""

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


def test_short_calls_go_out_as_one_task_and_are_settled_each() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 3, "T")
    settled: list[tuple[Any, Outcome]] = []

    def boom(x: int) -> int:
        if x == 5:
            raise ValueError("listener failed")
        return x * 10

    r.submit_many(boom, [(i,) for i in range(32)], [f"k{i}" for i in range(32)], settled.extend)
    assert r._tasks.qsize() == 1  # one hand-off for the whole list
    r.start()
    reactor.drain_until(lambda: len(settled) == 32)
    got = dict(settled)
    assert {k: o.value for k, o in got.items() if k != "k5"} == {f"k{i}": i * 10 for i in range(32) if i != 5}
    assert got["k5"].error.check(ValueError)
    r.stop()
    assert r.join(10)


def test_slow_calls_go_out_one_per_task_while_a_worker_may_be_idle() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 2, "T")
    r.slow_share = 0.5  # half the listener calls were slow lately
    r.submit_many(lambda x: x, [(i,) for i in range(3)], ["a", "b", "c"], lambda items: None)
    assert r._tasks.qsize() == 3
    # more queued than workers: chunks of MAX_CHUNK per task
    r.submit_many(lambda x: x, [(i,) for i in range(40)], list(range(40)), lambda items: None)
    assert r._tasks.qsize() == 3 + 3
    settled: list[tuple[Any, Outcome]] = []
    r.stop()  # queued work is refused, each key once
    r.submit_many(lambda: 1, [(), ()], ["x", "y"], settled.extend)
    assert [k for k, o in settled] == ["x", "y"] and all(o.error is not None for _, o in settled)


def test_a_slow_call_hands_the_rest_of_its_list_to_another_worker() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 2, "T")
    last_ran = threading.Event()
    threads: dict[int, str] = {}

    def call(i: int) -> bool:
        threads[i] = threading.current_thread().name
        if i == 3:
            last_ran.set()
        if i == 1:  # after call 0 the later half (call 3) went back: it runs on the other worker
            return last_ran.wait(10)
        return True

    settled: list[tuple[Any, Outcome]] = []
    r.submit_many(call, [(i,) for i in range(4)], list(range(4)), settled.extend)
    r.SLOW_CALL = 0.0  # every call counts as slow
    r.start()
    reactor.drain_until(lambda: len(settled) == 4)
    assert all(o.value is True for _, o in settled)
    assert threads[1] != threads[3]
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


def test_batches_go_out_as_one_task_and_only_failed_calls_come_back_one_by_one() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 3, "T")
    ran: list[int] = []

    def call(x: int) -> str:
        ran.append(x)
        if x == 2:
            raise ValueError("listener failed")
        return "no" if x == 5 else "ok"

    settled: list[tuple[Any, list[int], Any, int]] = []
    r.submit_batches(call, [("a", [1, 2, 3]), ("b", [4, 5])], "ok", settled.extend)
    assert r._tasks.qsize() == 1  # one hand-off for both batches
    r.start()
    reactor.drain_until(lambda: len(settled) == 2)
    assert sorted(ran) == [1, 2, 3, 4, 5]
    got = {key: (args, failed) for key, args, failed, _ in settled}
    (a_args, [(a_index, a_outcome)]), (b_args, [(b_index, b_outcome)]) = got["a"], got["b"]
    assert (a_args, a_index, b_args, b_index) == ([1, 2, 3], 1, [4, 5], 1)
    assert a_outcome.error.check(ValueError) and b_outcome.value == "no" and b_outcome.error is None
    settled.clear()
    r.submit_batches(call, [("c", [1, 3])], "ok", settled.extend)
    reactor.drain_until(lambda: len(settled) == 1)
    assert settled[0][:3] == ("c", [1, 3], None)  # all ok: no outcome per call
    r.stop()
    assert r.join(10)


def test_a_slow_call_hands_the_rest_of_its_batches_to_another_task() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 2, "T")
    ran: list[int] = []
    settled: list[tuple[Any, list[int], Any, int]] = []
    r.SLOW_CALL = 0.0  # every call counts as slow: each hands on what is left
    r.submit_batches(lambda i: ran.append(i) or "ok", [("a", [0, 1, 2]), ("b", [3, 4])], "ok", settled.extend)
    r.start()
    reactor.drain_until(lambda: sum(len(args) for _, args, _, _ in settled) == 5)
    # each call ended its task: five results of one call each, every call run once, in order
    assert ran == [0, 1, 2, 3, 4]
    assert [(key, args, failed) for key, args, failed, _ in settled] == [
        ("a", [0], None), ("a", [1], None), ("a", [2], None), ("b", [3], None), ("b", [4], None)]
    r.stop()
    assert r.join(10)


def test_batches_refused_or_dropped_at_stop_come_back_failed() -> None:
    reactor = FakeReactor()
    r = ThreadRunner(reactor, 1, "T")
    queued: list[tuple[Any, list[int], Any, int]] = []
    r.submit_batches(lambda x: "ok", [("a", [1, 2])], "ok", queued.extend)
    r.stop()  # never started: the queued batch is dropped
    assert [(key, args, [j for j, _ in failed]) for key, args, failed, _ in queued] == [("a", [1, 2], [0, 1])]
    assert all(o.error is not None for _, o in queued[0][2])
    refused: list[tuple[Any, list[int], Any, int]] = []
    r.submit_batches(lambda x: "ok", [("b", [3])], "ok", refused.extend)
    assert [(key, [j for j, _ in failed]) for key, _, failed, _ in refused] == [("b", [0])]
