"""The blocking facade's base: crochet's reactor thread, calls waited on with a timeout.

These run the global reactor in crochet's thread for the rest of the pytest process (that is the
facade's point); the loopback remoting tests go through the same facade, so they coexist.
Interpreter exit and the no_setup case (reactor run by its owner) are checked in subprocesses.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from held_reactor import held_reactor
from twisted.internet import defer, task
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.logger import LogLevel, globalLogPublisher
from twisted.python import threadable
from twisted.python.failure import Failure

from rmqwire.client import blocking as facade
from rmqwire.client.blocking import (
    CallTimeoutError,
    FutureSink,
    LightFuture,
    ReactorThreadError,
    SinkFuture,
    Waiter,
    Window,
    blocking,
    call,
    delegate,
    ensure_reactor,
    submit,
    submit_to,
)
from rmqwire.errors import RemotingTimeoutError, RmqwireError

WAIT = 30.0  # generous: a shared 2-core machine; every wait here ends on a condition
SHORT = 0.2  # for calls that must time out (they never fire on their own)
ROOT = Path(__file__).resolve().parents[3]


class Boom(Exception):
    pass


@pytest.fixture
def reactor() -> Any:
    return ensure_reactor()


@pytest.fixture
def logged() -> Iterator[list[dict[str, Any]]]:
    """Twisted log events at warn level or above (crochet logs unhandled results as errors)."""
    events: list[dict[str, Any]] = []

    def observe(event: dict[str, Any]) -> None:
        if event.get("isError") or event.get("log_level") in (LogLevel.warn, LogLevel.error,
                                                              LogLevel.critical):
            events.append(event)

    globalLogPublisher.addObserver(observe)
    try:
        yield events
    finally:
        globalLogPublisher.removeObserver(observe)


def _drain() -> None:
    """Let the reactor run what is queued (calls from threads run in order), then collect
    garbage, so late log lines from abandoned results have been emitted."""
    call(lambda: None, timeout=WAIT)
    gc.collect()
    call(lambda: None, timeout=WAIT)


# ---- results and errors -------------------------------------------------------------------------


def test_ensure_reactor_is_idempotent_and_thread_safe() -> None:
    with ThreadPoolExecutor(8) as pool:
        reactors = list(pool.map(lambda _: ensure_reactor(), range(16)))
    assert len({id(r) for r in reactors}) == 1
    assert reactors[0].running
    assert threading.get_ident() != call(threading.get_ident, timeout=WAIT)
    assert call(threadable.isInIOThread, timeout=WAIT) is True


def test_plain_value_deferred_and_coroutine(reactor: Any) -> None:
    assert call(lambda a, b=0: a + b, 1, b=2, timeout=WAIT) == 3
    assert call(task.deferLater, reactor, 0, lambda: "later", timeout=WAIT) == "later"

    async def coro(x: int) -> int:
        await task.deferLater(reactor, 0, lambda: None)
        return x * 2

    assert call(coro, 21, timeout=WAIT) == 42


def test_exceptions_keep_their_type_and_identity(reactor: Any) -> None:
    err = Boom("sync")

    def raise_now() -> None:
        raise err

    with pytest.raises(Boom) as info:
        call(raise_now, timeout=WAIT)
    assert info.value is err

    def raise_key_error() -> None:
        raise KeyError("later")

    def fail_later() -> Deferred[None]:
        return task.deferLater(reactor, 0, raise_key_error)

    with pytest.raises(KeyError, match="later"):
        call(fail_later, timeout=WAIT)

    async def coro() -> None:
        await task.deferLater(reactor, 0, lambda: None)
        raise Boom("coroutine")

    with pytest.raises(Boom, match="coroutine"):
        call(coro, timeout=WAIT)


def test_timeout_must_be_positive() -> None:
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            call(lambda: None, timeout=bad)


# ---- timeouts cancel ----------------------------------------------------------------------------


def test_timeout_cancels_the_deferred(logged: list[dict[str, Any]]) -> None:
    cancelled = threading.Event()
    made: list[Deferred[None]] = []

    def never() -> Deferred[None]:
        d: Deferred[None] = Deferred(canceller=lambda _: cancelled.set())
        made.append(d)
        return d

    with pytest.raises(CallTimeoutError, match="never gave no result") as info:
        call(never, timeout=SHORT)
    assert isinstance(info.value, RemotingTimeoutError)
    assert cancelled.wait(WAIT), "the Deferred's canceller did not run"
    assert made[0].called  # cancel() fired it (CancelledError), so nothing is left pending
    del info  # its traceback holds the call's frame: free it, so late logs come now
    made.clear()
    _drain()
    assert logged == []  # the cancelled outcome is not reported as an unhandled error


def test_timeout_cancels_a_coroutine(reactor: Any) -> None:
    cancelled = threading.Event()

    async def waits_forever() -> None:
        await Deferred(canceller=lambda _: cancelled.set())

    with pytest.raises(CallTimeoutError):
        call(waits_forever, timeout=SHORT)
    assert cancelled.wait(WAIT)


def test_failure_after_timeout_is_logged_as_a_warning(logged: list[dict[str, Any]]) -> None:
    def canceller(d: Deferred[None]) -> None:
        d.errback(Boom("canceller failed"))

    with pytest.raises(CallTimeoutError):
        call(lambda: Deferred(canceller=canceller), timeout=SHORT)
    _drain()
    assert [e.get("log_level") for e in logged] == [LogLevel.warn]
    assert logged[0]["log_failure"].check(Boom)


# ---- threads ------------------------------------------------------------------------------------


def test_many_threads_at_once(reactor: Any) -> None:
    def one_thread(n: int) -> list[tuple[int, int]]:
        return [call(task.deferLater, reactor, 0, lambda i=i: (n, i), timeout=WAIT)
                for i in range(25)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one_thread, range(8)))
    assert results == [[(n, i) for i in range(25)] for n in range(8)]


def test_many_threads_timing_out_while_others_succeed(reactor: Any) -> None:
    cancels = []
    lock = threading.Lock()

    def never() -> Deferred[None]:
        def cancelled(_: Deferred[None]) -> None:
            with lock:
                cancels.append(1)

        return Deferred(canceller=cancelled)

    def one(i: int) -> Any:
        if i % 2:
            with pytest.raises(CallTimeoutError):
                call(never, timeout=SHORT)
            return "timeout"
        return call(task.deferLater, reactor, 0, lambda: i, timeout=WAIT)

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(12)))
    assert results == [i if i % 2 == 0 else "timeout" for i in range(12)]
    _drain()
    assert len(cancels) == 6


def test_call_from_the_reactor_thread_is_refused() -> None:
    with pytest.raises(ReactorThreadError, match="reactor thread") as info:
        # the inner call runs in the reactor thread
        call(functools.partial(call, lambda: 1, timeout=WAIT), timeout=WAIT)
    assert isinstance(info.value, RmqwireError)


# ---- decorators for facades ---------------------------------------------------------------------


class _Core:
    """A Deferred API, as the client core offers (runs in the reactor thread)."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.cancelled = threading.Event()

    def send(self, body: bytes, *, tag: str = "") -> Deferred[str]:
        assert threadable.isInIOThread()
        return task.deferLater(self.reactor, 0, lambda: f"sent {body!r} {tag}".strip())

    def hang(self) -> Deferred[None]:
        return Deferred(canceller=lambda _: self.cancelled.set())


class _Facade:
    def __init__(self, core: _Core) -> None:
        ensure_reactor()
        self._core = core
        self.timeout = WAIT
        self.hang_timeout = SHORT

    send = delegate("send")
    hang = delegate("hang", timeout_attr="hang_timeout")
    hang_fixed = delegate("hang", timeout=SHORT)

    @blocking
    def twice(self, body: bytes) -> Deferred[list[str]]:
        return defer.gatherResults([self._core.send(body), self._core.send(body, tag="again")])

    @blocking(timeout_attr="hang_timeout")
    async def hang_async(self) -> None:
        await self._core.hang()


def test_delegate_and_blocking_methods(reactor: Any) -> None:
    core = _Core(reactor)
    facade = _Facade(core)
    assert facade.send(b"x", tag="t") == "sent b'x' t"
    assert facade.twice(b"y") == ["sent b'y'", "sent b'y' again"]
    assert _Facade.twice.__wrapped__.__name__ == "twice"  # the Deferred API, for unit tests
    assert _Facade.send.__name__ == "send"
    for method in (facade.hang, facade.hang_fixed, facade.hang_async):
        core.cancelled.clear()
        with pytest.raises(CallTimeoutError):
            method()
        assert core.cancelled.wait(WAIT)


def test_blocking_method_from_the_reactor_thread_is_refused(reactor: Any) -> None:
    facade = _Facade(_Core(reactor))
    with pytest.raises(ReactorThreadError):
        call(facade.send, b"x", timeout=WAIT)


# ---- process lifetime (subprocesses: the reactor of this process is already running) ------------


def _run_script(source: str) -> subprocess.CompletedProcess[str]:
    # bounded: a hang at interpreter exit fails the test instead of blocking the run
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )


def test_no_reactor_thread_at_import() -> None:
    out = _run_script("""
        import threading
        import rmqwire.client.blocking
        print(sorted(t.name for t in threading.enumerate()))
    """)
    assert (out.returncode, out.stdout.strip()) == (0, "['MainThread']"), out.stderr


def test_interpreter_exits_promptly_after_use() -> None:
    out = _run_script("""
        import threading
        from twisted.internet import task
        from rmqwire.client.blocking import call, ensure_reactor
        reactor = ensure_reactor()
        print(call(task.deferLater, reactor, 0, lambda: "done", timeout=30))
        print(any(t.name == "CrochetReactor" for t in threading.enumerate()))
    """)
    assert (out.returncode, out.stdout.split()) == (0, ["done", "True"]), out.stderr


def test_interpreter_exit_unblocks_a_waiting_thread() -> None:
    # A non-daemon thread waits on a call that never ends: at exit crochet stops the reactor,
    # the waiter gets ReactorStoppedError, and the process ends instead of hanging.
    out = _run_script("""
        import threading
        from twisted.internet.defer import Deferred
        from rmqwire.client.blocking import ReactorStoppedError, call

        started = threading.Event()

        def never():
            started.set()
            return Deferred()

        def waiter():
            try:
                call(never, timeout=600)
            except ReactorStoppedError as e:
                print("stopped:", type(e).__name__, flush=True)

        threading.Thread(target=waiter).start()
        assert started.wait(30)
    """)
    assert (out.returncode, out.stdout.strip()) == (0, "stopped: ReactorStoppedError"), out.stderr


# ---- submit: the batched hand-off ---------------------------------------------------------------


def test_submit_delivers_results_and_errors_to_sinks(reactor: Any) -> None:
    w = Waiter("ok")
    submit(task.deferLater, reactor, 0, lambda: 7, sink=w)
    assert w.wait(WAIT) == 7
    boom = Boom("x")
    w = Waiter("fails")
    submit(defer.fail, boom, sink=w)
    with pytest.raises(Boom) as info:
        w.wait(WAIT)
    assert info.value is boom
    w = Waiter("raises")
    submit(functools.partial(_raise, boom), sink=w)
    with pytest.raises(Boom):
        w.wait(WAIT)
    fut: concurrent.futures.Future[bool] = concurrent.futures.Future()
    submit(lambda: threadable.isInIOThread(), sink=FutureSink(fut))  # a plain value, run there
    assert fut.result(WAIT) is True


def _raise(e: Exception) -> None:
    raise e


def test_submit_queued_while_the_reactor_is_busy_runs_in_order(reactor: Any) -> None:
    # many calls queued during one reactor turn are drained together, in submission order
    order: list[int] = []
    waiters = [Waiter(str(i)) for i in range(100)]
    with held_reactor(reactor):
        for i, w in enumerate(waiters):
            submit(order.append, i, sink=w)
    assert [w.wait(WAIT) for w in waiters] == [None] * 100
    assert order == list(range(100))


def test_waiter_timeout_cancels_the_deferred(reactor: Any) -> None:
    cancelled = threading.Event()
    w = Waiter("never")
    submit(lambda: Deferred(canceller=lambda _: cancelled.set()), sink=w)
    with pytest.raises(CallTimeoutError, match="never gave no result"):
        w.wait(SHORT)
    assert cancelled.wait(WAIT)


def test_waiters_of_one_thread_settled_in_any_order_each_get_their_own_outcome(reactor: Any) -> None:
    # a thread's waiters share its wake-up (an eventfd on Linux): a wake-up for a later waiter,
    # or one left by a waiter that gave up, must not end another's wait early or be lost
    stale = Waiter("stale")
    submit(lambda: Deferred(), sink=stale)
    with pytest.raises(CallTimeoutError):
        stale.wait(SHORT)
    waiters = [Waiter(str(i)) for i in range(5)]
    for i, w in enumerate(waiters):  # the first to be submitted is the last to be settled
        submit(task.deferLater, reactor, 0.01 * (5 - i), lambda i=i: i, sink=w)
    assert [w.wait(WAIT) for w in waiters] == list(range(5))
    late = Waiter("late")
    submit(task.deferLater, reactor, 0.05, lambda: "late", sink=late)
    assert late.wait(WAIT) == "late"


def test_a_waiter_is_waited_on_in_its_own_thread(reactor: Any) -> None:
    w = Waiter("elsewhere")
    submit(lambda: 1, sink=w)
    if facade._thread_wake() is None:
        pytest.skip("no eventfd: a lock per Waiter, any thread may wait")
    with ThreadPoolExecutor(1) as pool, pytest.raises(RuntimeError, match="thread that made it"):
        pool.submit(w.wait, WAIT).result(WAIT)
    assert w.wait(WAIT) == 1


def test_a_threads_wake_up_is_closed_when_the_thread_and_its_waiters_are_gone(reactor: Any) -> None:
    if facade._thread_wake() is None:
        pytest.skip("no eventfd on this platform")
    refs: list[Any] = []

    def one_send() -> int:
        w = Waiter("t")
        refs.append(weakref.ref(w._wake))
        refs.append((w._wake.fd, _fd_info(w._wake.fd)))
        submit(lambda: 3, sink=w)
        return w.wait(WAIT)

    t = threading.Thread(target=lambda: refs.append(one_send()))
    t.start()
    t.join(WAIT)
    assert refs[2] == 3
    # the reactor's drain that settled the waiter may not have returned yet (it still holds the
    # call's tuple): a second call through the inbox is run only after it let go of the first
    call(lambda: None, timeout=WAIT)
    gc.collect()
    assert refs[0]() is None
    fd, info = refs[1]
    assert "eventfd" in info
    assert _fd_info(fd) != info  # closed (or the number reused for another file or eventfd)


def _fd_info(fd: int) -> str:
    """The kernel's description of ``fd`` (an eventfd's carries its id), "" when closed."""
    try:
        with open(f"/proc/self/fdinfo/{fd}") as f:
            return "".join(line for line in f if not line.startswith(("pos:", "eventfd-count")))
    except OSError:
        return ""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_share_its_parents_wake_up(reactor: Any) -> None:
    parent = facade._thread_wake()
    if parent is None:
        pytest.skip("no eventfd on this platform")
    pid = os.fork()
    if pid == 0:  # the child: only this thread, no reactor; exit without pytest's cleanup
        child = facade._thread_wake()
        os._exit(0 if child is not None and child is not parent and child.fd != -1 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_submit_from_many_threads(reactor: Any) -> None:
    def one_thread(n: int) -> list[tuple[int, int]]:
        out = []
        for i in range(50):
            w = Waiter("t")
            submit(task.deferLater, reactor, 0, lambda i=i: (n, i), sink=w)
            out.append(w.wait(WAIT))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one_thread, range(8)))
    assert results == [[(n, i) for i in range(50)] for n in range(8)]


def test_calls_queued_by_threads_wake_the_reactor_through_the_inbox_bell(
        reactor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Linux: the inbox's own eventfd, read by the reactor, drains it; no callFromThread per burst
    drains: list[Any] = []
    real = reactor.callFromThread

    def counting(f: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(f, "__func__", None) is facade._Inbox._drain:
            drains.append(f)
        real(f, *args, **kwargs)

    call(lambda: None, timeout=WAIT)  # attached: the bell is on
    assert facade._inbox._bell is not None
    monkeypatch.setattr(reactor, "callFromThread", counting)

    def one_thread(n: int) -> list[int]:
        waiters = []
        for i in range(20):
            w = Waiter("t")
            submit(lambda n=n, i=i: n * 100 + i, sink=w)
            waiters.append(w)
        return [w.wait(WAIT) for w in waiters]

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one_thread, range(4))) == [[n * 100 + i for i in range(20)] for n in range(4)]
    assert drains == []


def test_a_bell_rung_off_while_rung_still_gets_its_calls_drained(reactor: Any) -> None:
    # a put that rang the bell after the reactor's last read, then the bell goes (the reactor
    # dropped it): what was queued is drained through callFromThread; later puts use that too
    # until a bell is on again
    call(lambda: None, timeout=WAIT)
    waiter = Waiter("rung")
    later = Waiter("later")

    def ring_and_drop() -> None:
        bell = facade._inbox._bell
        assert bell is not None
        facade._inbox.put(lambda: "drained", (), {}, waiter)  # rings: read only after we return
        bell.connectionLost(Failure(ConnectionDone()))
        assert facade._inbox._bell is None

    try:
        call(ring_and_drop, timeout=WAIT)
        assert waiter.wait(WAIT) == "drained"
        submit(lambda: "later", sink=later)
        assert later.wait(WAIT) == "later"
    finally:
        call(facade._inbox._ring_on, reactor, timeout=WAIT)
    assert facade._inbox._bell is not None
    w = Waiter("again")
    submit(lambda: "again", sink=w)
    assert w.wait(WAIT) == "again"


# ---- LightFuture and Window: the cheap per-call objects of send_async ---------------------------


def test_light_future_is_a_future_settled_without_a_condition() -> None:
    seen: list[Any] = []
    f = LightFuture()
    assert isinstance(f, concurrent.futures.Future)
    f.add_done_callback(lambda g: seen.append(("first", g)))
    f.add_done_callback(lambda g: seen.append(("second", g)))
    f.set_result(5)
    assert f._cond is None  # nobody asked for the Condition: none was made
    assert seen == [("first", f), ("second", f)]
    f.add_done_callback(lambda g: seen.append(("late", g)))  # settled: runs at once
    assert seen[-1] == ("late", f)
    assert (f.done(), f.result(0), f.exception(0)) == (True, 5, None)
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result(6)
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_exception(Boom())
    g = LightFuture()
    boom = Boom("x")
    g.set_exception(boom)
    with pytest.raises(Boom) as info:
        g.result(0)
    assert info.value is boom
    assert "raised Boom" in repr(g)


def test_a_settled_light_future_is_read_without_a_condition() -> None:
    # a done-callback reading the outcome (the usual way) makes no Condition, nor does a second
    # settle, which raises without waiting on the shared lock it holds (repr makes the Condition)
    f = LightFuture()
    seen: list[Any] = []
    f.add_done_callback(lambda g: seen.append((g.done(), g.result(0), g.exception(0))))
    f.set_result(5)
    assert seen == [(True, 5, None)] and f._cond is None
    errors: list[BaseException] = []

    def settle_again() -> None:
        try:
            f.set_exception(Boom())
        except concurrent.futures.InvalidStateError as e:
            errors.append(e)

    t = threading.Thread(target=settle_again, daemon=True)
    t.start()
    t.join(WAIT)
    assert not t.is_alive() and len(errors) == 1 and "returned int" in str(errors[0])
    g = LightFuture()
    boom = Boom("y")
    g.set_exception(boom)
    assert g.exception(0) is boom and g._cond is None
    with pytest.raises(Boom) as info:
        g.result(0)
    assert info.value is boom and g._cond is None


def test_light_future_callbacks_keep_their_order_across_the_condition() -> None:
    # the first callback waits in a slot of its own; a Condition made later puts it first
    h = LightFuture()
    order: list[int] = []
    h.add_done_callback(lambda _: order.append(1))
    h.add_done_callback(lambda _: order.append(2))
    assert concurrent.futures.wait([h], timeout=0).not_done == {h}  # makes the Condition
    assert h._cond is not None
    h.add_done_callback(lambda _: order.append(3))
    h.set_result(0)
    assert order == [1, 2, 3]
    k = LightFuture()
    k.add_done_callback(lambda _: order.append(4))
    k.set_result(0)  # the slot alone
    assert order == [1, 2, 3, 4] and k._cond is None


def test_light_future_wait_cancel_and_module_functions() -> None:
    # result() in another thread, wait(), as_completed(), cancel(): the base class's code on
    # the Condition made when first needed; a callback added before still runs once
    f, g, h = LightFuture(), LightFuture(), LightFuture()
    calls: list[Any] = []
    f.add_done_callback(calls.append)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(f.result, WAIT)
        g.set_result("g")
        done, not_done = concurrent.futures.wait([f, g], timeout=0)
        assert (done, not_done) == ({g}, {f})
        f.set_result("f")
        assert waiting.result(WAIT) == "f"
    assert calls == [f]
    assert [x.result(0) for x in concurrent.futures.as_completed([f, g], timeout=WAIT)] in (
        ["f", "g"], ["g", "f"])
    cancelled: list[Any] = []
    h.add_done_callback(cancelled.append)
    assert h.cancel() and h.cancelled() and cancelled == [h]
    with pytest.raises(concurrent.futures.InvalidStateError):
        h.set_result(1)  # FutureSink suppresses this for a send the caller cancelled


def test_light_future_races_settle_each_callback_once() -> None:
    # settle, add callbacks and wait from three threads at once, many times: every callback
    # runs exactly once and every waiter gets the result, whichever path each operation took
    rounds = 2000
    futures = [LightFuture() for _ in range(rounds)]
    counts = [0] * rounds
    results: list[Any] = [None] * rounds
    start = threading.Barrier(3)

    def settle() -> None:
        start.wait()
        for i, f in enumerate(futures):
            f.set_result(i)

    def add() -> None:
        start.wait()
        for i, f in enumerate(futures):
            f.add_done_callback(lambda _, i=i: counts.__setitem__(i, counts[i] + 1))

    def wait() -> None:
        start.wait()
        for i, f in enumerate(futures):
            if i % 3 == 0:
                results[i] = f.result(WAIT)

    threads = [threading.Thread(target=t) for t in (settle, add, wait)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert counts == [1] * rounds
    assert [r for i, r in enumerate(results) if i % 3 == 0] == list(range(0, rounds, 3))


def test_window_bounds_and_wakes_a_waiting_caller() -> None:
    w = Window(2)
    assert w.acquire(0) and w.acquire(0)
    assert not w.acquire(SHORT)  # full: times out
    got = threading.Event()

    def take() -> None:
        if w.acquire(WAIT):
            got.set()

    t = threading.Thread(target=take)
    t.start()
    w.release()  # from another thread, as a sink in the reactor thread does
    assert got.wait(WAIT)
    t.join(WAIT)
    assert not w.acquire(0)


def test_future_sink_gives_its_window_slot_back_once(reactor: Any) -> None:
    w = Window(1)
    assert w.acquire(0)
    fut = LightFuture()
    fut.cancel()  # the caller gave up on it: the slot stays taken until the call ends
    assert not w.acquire(0)
    d: Deferred[int] = Deferred()
    submit(lambda: d, sink=FutureSink(fut, w))
    call(lambda: None, timeout=WAIT)
    assert not w.acquire(0)
    call(d.callback, 3, timeout=WAIT)
    assert w.acquire(0)


def test_submit_to_lets_the_call_settle_its_sink(reactor: Any) -> None:
    from rmqwire.client.blocking import _inbox

    held: list[FutureSink] = []

    def direct(sink: FutureSink, n: int) -> None:
        assert threadable.isInIOThread()
        held.append(sink)  # settled later, by whatever answers: no Deferred in between

    w = Window(3)
    futs = [LightFuture() for _ in range(3)]
    for f in futs:
        assert w.acquire(0)
    submit_to(direct, 1, sink=FutureSink(futs[0], w))
    call(lambda: None, timeout=WAIT)
    assert len(held) == 1 and not futs[0].done() and held[0] in _inbox._pending
    call(held[0].ok, 5, timeout=WAIT)
    assert futs[0].result(WAIT) == 5 and held[0] not in _inbox._pending
    call(held[0].fail, _failure(Boom("late")), timeout=WAIT)  # a second outcome: slot given once
    assert w.acquire(0) and not w.acquire(0)
    d: Deferred[int] = Deferred()
    submit_to(lambda sink, _: d, None, sink=FutureSink(futs[1], w))  # or hands back a Deferred
    call(d.callback, 6, timeout=WAIT)
    assert futs[1].result(WAIT) == 6
    boom = Boom("x")
    submit_to(_raise_with_sink, boom, sink=FutureSink(futs[2], w))
    assert futs[2].exception(WAIT) is boom
    assert w.acquire(0) and w.acquire(0) and not w.acquire(0)  # every slot back, once each
    assert call(lambda: len(_inbox._pending), timeout=WAIT) == 0


def test_sink_future_is_its_own_sink(reactor: Any) -> None:
    from rmqwire.client.blocking import _inbox

    w = Window(2)
    assert w.acquire(0) and w.acquire(0)
    ok, bad = SinkFuture(w), SinkFuture(w)
    seen: list[Any] = []
    ok.add_done_callback(lambda f: seen.append(f.result()))
    held: list[Any] = []
    submit_to(lambda sink, _: held.append(sink), None, sink=ok)
    submit_to(lambda sink, e: defer.fail(e), Boom("no"), sink=bad)
    assert isinstance(bad.exception(WAIT), Boom)
    assert held == [ok] and not ok.done()
    call(ok.ok, 4, timeout=WAIT)
    call(ok.fail, _failure(Boom("late")), timeout=WAIT)  # ignored, its slot not given twice
    assert ok.result(WAIT) == 4 and seen == [4]
    assert w.acquire(0) and w.acquire(0) and not w.acquire(0)
    assert call(lambda: len(_inbox._pending), timeout=WAIT) == 0


class _StubInbox:
    """The inbox as _Settled sees it: queued sends (``_scheduled``), a drain under way or not."""

    def __init__(self) -> None:
        self._pending: set[Any] = set()
        self._scheduled = False
        self._draining = False
        self.drains: list[int] = []

    def _drain(self) -> None:
        self.drains.append(len(self.drains))
        self._scheduled = False


def test_settled_sink_futures_offer_the_gil_every_yield_every(monkeypatch: pytest.MonkeyPatch) -> None:
    # the reactor thread settles a read's worth of answers holding the GIL: every YIELD_EVERY
    # settled facade futures (ok or failed, even a late outcome of one already settled) it gives
    # the GIL up once, after the done-callback that may have woken a sender, then writes what
    # the sender queued meanwhile (the inbox drained), unless nothing is queued or a drain runs
    callbacks: list[int] = []
    yields: list[int] = []
    inbox = _StubInbox()
    monkeypatch.setattr(facade, "_inbox", inbox)
    monkeypatch.setattr(facade, "_settled", facade._Settled())

    def yield_() -> None:
        yields.append(len(callbacks))
        inbox._scheduled = len(yields) != 2  # the second time nothing was queued meanwhile
        inbox._draining = len(yields) == 3  # the third time a queued call settled the future

    monkeypatch.setattr(facade, "_sched_yield", yield_)
    n = facade.YIELD_EVERY
    futs = [SinkFuture() for _ in range(4 * n + 5)]
    for i, f in enumerate(futs):
        f.add_done_callback(lambda f: callbacks.append(1))
        if i % 3:
            f.ok(i)
        else:
            f.fail(_failure(Boom(str(i))))
    assert yields == [n, 2 * n, 3 * n, 4 * n]
    assert inbox.drains == [0, 1]  # after the first and the fourth
    futs[0].ok("late")  # counted too: a settle attempt is the reactor's work all the same
    assert len(yields) == 4 and facade._settled.count == 6
    assert futs[1].result(0) == 1 and isinstance(futs[0].exception(0), Boom)


def test_settled_sink_futures_without_sched_yield(monkeypatch: pytest.MonkeyPatch) -> None:
    inbox = _StubInbox()
    inbox._scheduled = True
    monkeypatch.setattr(facade, "_inbox", inbox)
    monkeypatch.setattr(facade, "_settled", facade._Settled())
    monkeypatch.setattr(facade, "_sched_yield", None)  # a platform without it: nothing offered
    futs = [SinkFuture() for _ in range(facade.YIELD_EVERY + 1)]
    for i, f in enumerate(futs):
        f.ok(i)
    assert [f.result(0) for f in futs] == list(range(len(futs)))
    assert facade._settled.count == 1 and inbox.drains == []


def test_a_drain_keeps_a_threads_sends_in_order_when_a_settle_yields(
        reactor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # a queued call that settles a facade future at once (a send failing before it is written)
    # must not drain the calls queued after it ahead of the rest of its own drain
    from rmqwire.client.blocking import _inbox

    monkeypatch.setattr(facade, "YIELD_EVERY", 1)
    monkeypatch.setattr(facade, "_sched_yield", lambda: None)
    order: list[int] = []
    done = threading.Event()

    def settle_at_once(sink: Any, i: int) -> None:
        order.append(i)
        if i == 0:  # queued more while the drain runs: these go after 1..4
            for j in range(5, 8):
                submit_to(settle_at_once, j, sink=SinkFuture())
        sink.ok(i)
        if i == 7:
            done.set()

    def queue_all() -> None:
        for i in range(5):
            submit_to(settle_at_once, i, sink=SinkFuture())

    call(queue_all, timeout=WAIT)  # run in the reactor thread: its drain comes after this
    assert done.wait(WAIT)
    assert order == list(range(8))
    assert call(lambda: len(_inbox._pending), timeout=WAIT) == 0


def _failure(e: Exception) -> Any:
    from twisted.python.failure import Failure

    return Failure(e)


def _raise_with_sink(sink: Any, e: Exception) -> None:
    raise e


def test_interpreter_exit_fails_submitted_calls() -> None:
    # at exit the reactor stops: a waiting Waiter and a pending Future fail with
    # ReactorStoppedError, and later submits raise it, instead of anyone hanging
    out = _run_script("""
        import concurrent.futures, threading
        from twisted.internet.defer import Deferred
        from rmqwire.client.blocking import FutureSink, ReactorStoppedError, Waiter, submit, submit_to

        started = threading.Event()

        def never():
            started.set()
            return Deferred()

        fut = concurrent.futures.Future()
        submit(never, sink=FutureSink(fut))
        direct = concurrent.futures.Future()
        submit_to(lambda sink, _: None, None, sink=FutureSink(direct))  # never settles its sink

        def waiter():
            w = Waiter("never")
            submit(never, sink=w)
            try:
                w.wait(600)
            except ReactorStoppedError:
                print("waiter stopped", flush=True)
            print("future", type(fut.exception(30)).__name__, flush=True)
            print("direct", type(direct.exception(30)).__name__, flush=True)
            try:
                submit(never, sink=Waiter("late"))
            except ReactorStoppedError:
                print("late refused", flush=True)

        threading.Thread(target=waiter).start()
        assert started.wait(30)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["waiter stopped", "future ReactorStoppedError",
                                       "direct ReactorStoppedError", "late refused"], out.stderr


def test_reactor_run_by_its_owner() -> None:
    # crochet's no_setup case: the main thread runs the reactor; other threads call into it,
    # and the owner's own thread is refused instead of deadlocking.
    out = _run_script("""
        import threading
        from twisted.internet import reactor, task
        from rmqwire.client.blocking import ReactorThreadError, call

        workers = []

        def worker():
            try:
                print(call(task.deferLater, reactor, 0, lambda: "from worker", timeout=30))
                print(threading.current_thread().name != "CrochetReactor")
            finally:
                reactor.callFromThread(reactor.stop)

        def started():
            try:
                call(lambda: None, timeout=30)
            except ReactorThreadError:
                print("refused in the reactor thread")
            workers.append(threading.Thread(target=worker))
            workers[0].start()

        reactor.callWhenRunning(started)
        reactor.run()
        workers[0].join(30)
        print(sorted(t.name for t in threading.enumerate()))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "refused in the reactor thread", "from worker", "True", "['MainThread']",
    ]


# ---- submit_to(here=True): run in the caller while the reactor waits for I/O --------------------


class _StubReactor:
    """What ``_Inbox.run_here`` reads of a reactor: its timers, its wake-up, callFromThread."""

    def __init__(self) -> None:
        self._pendingTimedCalls: list[Any] = []
        self._newTimedCalls: list[Any] = []
        self.wakes = 0
        self.from_thread: list[Any] = []

    def wakeUp(self) -> None:  # noqa: N802 - Twisted's name
        self.wakes += 1

    def callFromThread(self, f: Any, *args: Any) -> None:  # noqa: N802 - Twisted's name
        self.from_thread.append((f, args))


class _Timer:
    def __init__(self, time: float) -> None:
        self.time = time


def _stub_inbox(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, _StubReactor, Any]:
    """An inbox on a stub reactor, the one Waiters report to for the test."""
    stub = _StubReactor()
    inbox = facade._Inbox()
    inbox.reactor = stub
    direct = facade._ReactorLock(stub)
    direct.open = True
    inbox._direct = direct
    monkeypatch.setattr(facade, "_inbox", inbox)
    return inbox, stub, direct


def test_run_here_runs_in_the_caller_and_wakes_the_reactor_for_a_sooner_timer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    inbox, stub, direct = _stub_inbox(monkeypatch)
    ran: list[int] = []

    def record(sink: Any, arg: Any) -> None:
        assert direct.lock.locked()  # the reactor is kept out meanwhile
        ran.append(threading.get_ident())
        sink.ok(arg)

    w = Waiter("here")
    inbox.run_here(record, "plain", w)
    assert w.wait(WAIT) == "plain" and ran == [threading.get_ident()]
    assert not direct.lock.locked() and stub.wakes == 0 and not stub.from_thread
    # a timer the reactor's wait did not account for wakes it; a later one does not
    stub._pendingTimedCalls[:] = [_Timer(10.0), _Timer(20.0)]
    cases = [
        (lambda: stub._newTimedCalls.append(_Timer(5.0)), 1),     # callLater
        (lambda: setattr(stub._pendingTimedCalls[0], "time", 9.0), 1),  # the soonest reset sooner
        (lambda: stub._pendingTimedCalls.insert(0, _Timer(8.0)), 1),    # another made the soonest
        (lambda: setattr(stub._pendingTimedCalls[1], "time", 30.0), 0),  # a later one moved later
        (lambda: None, 0),
    ]
    for change, wakes in cases:
        stub._newTimedCalls.clear()
        before = stub.wakes

        def timer(sink: Any, _: Any, change: Any = change) -> None:
            change()
            sink.ok(None)

        w = Waiter("timer")
        inbox.run_here(timer, None, w)
        w.wait(WAIT)
        assert stub.wakes - before == wakes
    stub._pendingTimedCalls.clear()  # no timer at all: any new one wakes it
    w = Waiter("first timer")
    inbox.run_here(lambda sink, _: (stub._pendingTimedCalls.append(_Timer(1.0)), sink.ok(1)), None, w)
    assert w.wait(WAIT) == 1 and stub.wakes == 4


def test_run_here_queues_behind_queued_calls_a_busy_reactor_and_a_shutdown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    inbox, stub, direct = _stub_inbox(monkeypatch)
    ran: list[str] = []

    def record(sink: Any, name: str) -> None:
        ran.append(name)
        sink.ok(name)

    first, second = Waiter("first"), Waiter("second")
    inbox.put(record, "first", None, first)  # type: ignore[arg-type]
    inbox.run_here(record, "second", second)  # the queued call goes first: queued too
    assert ran == [] and [i[1] for i in inbox._items] == ["first", "second"]
    [(drain, args)] = stub.from_thread  # no bell here: one callFromThread for the burst
    drain(*args)
    assert ran == ["first", "second"] and second.wait(WAIT) == "second"
    stub.from_thread.clear()
    inbox._pending.add(Waiter("another thread's call"))  # under way: queued, for one pass
    inbox.run_here(record, "others", Waiter("others"))
    assert ran == ["first", "second"] and len(stub.from_thread) == 1
    stub.from_thread.pop()[0]()
    assert ran[-1] == "others"
    inbox._pending.clear()
    with direct.lock:  # the reactor runs something: queued, no waiting for it
        inbox.run_here(record, "busy", Waiter("busy"))
    assert ran == ["first", "second", "others"] and len(stub.from_thread) == 1
    stub.from_thread[0][0]()
    assert ran[-1] == "busy"
    inbox._stop()  # before shutdown (in the reactor thread): no direct run after it
    assert not direct.open
    with pytest.raises(facade.ReactorStoppedError):
        inbox.run_here(record, "late", Waiter("late"))
    assert ran[-1] == "busy"


def test_submit_to_here_runs_in_the_calling_thread_while_the_reactor_waits(reactor: Any) -> None:
    where: list[bool] = []

    def settle(sink: Any, n: int) -> None:
        where.append(threadable.isInIOThread())
        sink.ok(n * 2)

    def one_thread(n: int) -> list[int]:
        out = []
        for i in range(50):
            w = Waiter("here")
            submit_to(settle, n * 100 + i, sink=w, here=True)
            out.append(w.wait(WAIT))
        return out

    call(lambda: None, timeout=WAIT)  # attached: the reactor lock is on
    assert facade._inbox._direct is not None and facade._inbox._direct.open
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one_thread, range(4)))
    assert results == [[(n * 100 + i) * 2 for i in range(50)] for n in range(4)]
    assert False in where  # some ran in their caller (else the reactor ran all: it was busy)
    with held_reactor(reactor):  # the reactor is busy: queued, run there
        w = Waiter("queued")
        submit_to(settle, 1, sink=w, here=True)
    assert w.wait(WAIT) == 2 and where[-1] is True
    assert call(lambda: len(facade._inbox._pending), timeout=WAIT) == 0


def test_a_timer_set_by_a_caller_thread_wakes_a_reactor_waiting_without_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a private epoll reactor with no timer at all waits for I/O without a timeout: only the
    # wake-up of run_here makes it see a timer a direct run set; its shutdown ends direct runs
    from twisted.internet.epollreactor import EPollReactor

    r = EPollReactor()
    r._registerAsIOThread = False  # the process's I/O thread stays crochet's
    inbox = facade._Inbox()
    monkeypatch.setattr(facade, "_inbox", inbox)  # the one Waiters report to
    thread = threading.Thread(target=r.run, kwargs={"installSignalHandlers": False}, daemon=True)
    thread.start()
    attached = threading.Event()
    inbox.attach(r)
    r.callFromThread(attached.set)  # after _attached: the lock and the bell are on
    assert attached.wait(WAIT)
    direct = inbox._direct
    assert direct is not None and isinstance(r._poller, facade._Unlocked)
    try:
        here = 0
        for _ in range(200):  # until a run happened in this thread (the reactor was waiting)
            fired = threading.Event()
            ran: list[bool] = []

            def arm(sink: Any, _: Any, fired: threading.Event = fired, ran: list[bool] = ran) -> None:
                ran.append(threading.current_thread() is not thread)
                r.callLater(0.001, fired.set)
                sink.ok(None)

            w = Waiter("timer")
            inbox.run_here(arm, None, w)
            w.wait(WAIT)
            assert fired.wait(WAIT)  # without the wake-up the reactor would wait forever
            here += ran[0]
            if here >= 3:
                break
        assert here >= 3
    finally:
        r.callFromThread(r.stop)
        thread.join(WAIT)
    assert not thread.is_alive() and not direct.open
    with pytest.raises(facade.ReactorStoppedError):  # its lock stays held: queued, refused
        inbox.run_here(lambda sink, _: sink.ok(None), None, Waiter("after"))
    r._poller.close()


def test_callers_settled_under_the_reactor_lock_are_woken_when_it_is_released(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a caller woken while the holder still runs would find the lock taken (and, on a shared
    # core, take the CPU from the reactor's pass): the wake-up waits for the release. The holder
    # here is another thread (as the reactor is); a waiter settled in its own thread (a caller
    # that read its own answer) is not waiting, and is woken by nobody
    inbox, stub, direct = _stub_inbox(monkeypatch)
    seen: list[Any] = []
    w = Waiter("settled here")
    wake = w._wake
    assert wake is not None  # Linux: the thread's eventfd
    with contextlib.suppress(BlockingIOError):  # a stale count of an earlier test's waiter
        os.eventfd_read(wake.fd)

    def settle(sink: Any, _: Any) -> None:
        sink.ok("done")
        seen.append(list(direct.wakes))
        with pytest.raises(BlockingIOError):  # not written yet
            os.eventfd_read(wake.fd)

    def in_thread(fn: Any, *args: Any) -> None:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        t.join(WAIT)
        assert not t.is_alive()
        if errors:
            raise errors[0]

    in_thread(inbox.run_here, settle, None, w)  # run by another thread, which holds the lock
    assert seen == [[wake]] and direct.wakes == [] and direct.owner == 0
    assert os.eventfd_read(wake.fd) == 1  # written by the release
    assert w.wait(WAIT) == "done"
    # settled by a thread not holding the lock: woken at once
    other = Waiter("elsewhere")
    assert other._wake is wake
    in_thread(other.ok, 1)
    assert os.eventfd_read(wake.fd) == 1 and other.wait(WAIT) == 1
    # settled in its own thread, holding the lock or not: no wake-up at all
    own = Waiter("own")
    inbox.run_here(lambda sink, _: sink.ok(5), None, own)
    own_free = Waiter("own, lock free")
    own_free.ok(6)
    assert direct.wakes == []
    with pytest.raises(BlockingIOError):
        os.eventfd_read(wake.fd)
    assert own.wait(WAIT) == 5 and own_free.wait(WAIT) == 6
    # at shutdown the held wake-ups go out, and later ones at once
    late = Waiter("late")
    last = Waiter("last")

    def shut_down() -> None:
        with direct.lock:
            direct.owner = threading.get_ident()
            late.ok(2)
            assert direct.wakes == [wake]
            inbox._stop()
            assert direct.wakes == [] and os.eventfd_read(wake.fd) == 1
            last.ok(3)
            assert direct.wakes == [] and os.eventfd_read(wake.fd) == 1

    in_thread(shut_down)
    assert late.wait(WAIT) == 2 and last.wait(WAIT) == 3
