"""The blocking facade's base: Twisted's reactor in crochet's thread, Deferred calls waited on.

The Deferred API is the core; most users call blocking methods from ordinary threads (scripts, a
Spark executor). This module is where the first turns into the second:

- ``ensure_reactor()`` starts the global reactor once per process, lazily (never at import), in
  crochet's thread. If the reactor is already run by its owner (a Twisted application, a test
  runner), crochet is told not to start it (``crochet.no_setup()``) and calls go to that reactor.
  crochet stops the reactor when the main thread exits, so a script does not hang at exit;
  callers still waiting then get ReactorStoppedError.
- ``call(fn, *args, timeout=...)`` runs ``fn`` in the reactor thread and waits for its result (a
  Deferred, a coroutine or a plain value): the value is returned, a failure re-raised as the
  original exception. On timeout the Deferred is cancelled, so its canceller runs (a pending
  remoting call forgets its opaque), and CallTimeoutError is raised.
- ``blocking`` and ``delegate`` turn a Deferred-returning method into a blocking one in one line,
  for the client facades (BlockingProducer, ...)::

      class BlockingProducer:
          def __init__(self, core: Producer, timeout: float = 3.0) -> None:
              ensure_reactor()
              self._core, self.timeout = core, timeout

          send = delegate("send")                                   # self._core.send(...)
          shutdown = delegate("shutdown", timeout_attr="shutdown_timeout")

          @blocking
          def route(self, topic: str) -> Deferred[TopicRouteData]:  # body runs in the reactor
              return self._core.instance.route(topic)

- ``submit(fn, *args, sink=...)`` is the hot path of the facades' sends: calls from any thread
  join one queue that the reactor thread drains in one wake-up (a ``callFromThread`` only when the
  queue was empty), and each outcome goes to a sink: a ``Waiter`` (a bare lock the caller blocks
  on, the cheapest wake-up: on Linux its thread's eventfd, see ``_ThreadWake``), a
  ``concurrent.futures.Future`` (``FutureSink``) or a callback.
  When the reactor stops, every queued or pending sink fails with ReactorStoppedError.
  ``LightFuture`` (a ``concurrent.futures.Future`` that makes its Condition only when a thread
  waits on it) and ``Window`` (a bound on calls handed off, released by their sinks) keep the
  per-call cost of ``send_async`` low.

Twisted objects are touched only in the reactor thread (the wrapped functions run there), or in
a caller's thread holding the reactor lock: on Twisted's epoll reactor the reactor thread holds
``_ReactorLock`` but while it waits for I/O, and ``submit_to(..., here=True)`` (a blocking sync
send) takes it, if free, to frame and write its request itself instead of waking the reactor.
"""

from __future__ import annotations

import _thread
import concurrent.futures
import contextlib
import functools
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import crochet
from twisted.internet import defer
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IReactorFDSet
from twisted.internet.main import CONNECTION_LOST
from twisted.logger import Logger, LogLevel
from twisted.python import log as twisted_log
from twisted.python import threadable
from twisted.python.failure import Failure

from rmqwire.errors import RemotingTimeoutError, RmqwireError
from rmqwire.remoting.flushing import hold_flushes, release_flushes

__all__ = [
    "CANCEL_GRACE",
    "CallTimeoutError",
    "ReactorStoppedError",
    "ReactorThreadError",
    "FutureSink",
    "LightFuture",
    "Waiter",
    "Window",
    "blocking",
    "call",
    "delegate",
    "ensure_reactor",
    "submit",
]

#: How long a timed-out caller waits for the cancellation to run in the reactor thread. Only a
#: reactor blocked by someone's code takes that long; the caller then raises without waiting more.
CANCEL_GRACE = 5.0
#: How long ensure_reactor() waits for a reactor thread it started to turn for the first time.
START_TIMEOUT = 30.0

log = Logger(namespace="rmqwire.client.blocking")


class CallTimeoutError(RemotingTimeoutError):
    """A blocking call got no result within its timeout; its Deferred was cancelled."""


class ReactorThreadError(RmqwireError, RuntimeError):
    """A blocking call was made from the reactor thread, where waiting would deadlock."""


class ReactorStoppedError(RmqwireError):
    """The reactor has stopped (interpreter exit) or never started: no result will come."""


# One reactor per process is Twisted's own global (and crochet's); these only remember that it
# serves calls from other threads, so later calls skip the start-up path.
_start_lock = threading.Lock()
_ready = threading.Event()


def ensure_reactor() -> Any:
    """Make sure the global reactor runs and serves calls from other threads; return it.

    Idempotent and thread-safe. Starts crochet's reactor thread on first use, unless the reactor
    is already running (its owner keeps running it: crochet's ``no_setup`` case).
    """
    from twisted.internet import (
        reactor,  # the facade is an entry point: it resolves the reactor
    )

    if _ready.is_set():
        return reactor
    with _start_lock:
        if _ready.is_set():
            return reactor
        if reactor.running:
            # run by its owner, or by crochet for another library (no_setup() then refuses)
            with contextlib.suppress(RuntimeError):
                crochet.no_setup()
            _inbox.attach(reactor)
            _ready.set()
            return reactor
        crochet.setup()
        # Wait for the loop's first turn: by then the new thread is registered as the I/O thread
        # (a reactor run earlier in another thread, e.g. by trial, leaves that one registered).
        try:
            crochet.run_in_reactor(_first_turn)()
        except crochet.ReactorStopped:
            raise ReactorStoppedError("the reactor has stopped (interpreter exit)") from None
        if not _ready.wait(START_TIMEOUT):
            raise ReactorStoppedError(
                f"the reactor thread did not start within {START_TIMEOUT:g} s "
                "(a reactor that was stopped cannot run again)"
            )
    return reactor


def _first_turn() -> None:
    from twisted.internet import reactor

    _inbox.attach(reactor)
    _ready.set()


def call(fn: Callable[..., Any], /, *args: Any, timeout: float, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in the reactor thread and wait up to ``timeout`` seconds.

    ``fn`` may return a Deferred, a coroutine or a plain value. Returns the result, or raises the
    exception the call failed with. On timeout the Deferred is cancelled and CallTimeoutError is
    raised. Pass an argument named ``timeout`` to ``fn`` positionally or with functools.partial.
    """
    return _call(fn, args, kwargs, timeout)


def blocking(
    method: Callable[..., Any] | None = None,
    /,
    *,
    timeout: float | None = None,
    timeout_attr: str = "timeout",
) -> Any:
    """Decorate a method whose body runs in the reactor thread and returns a Deferred (or is a
    coroutine) so that callers in any thread block for its result.

    The wait is bounded by ``timeout`` when given, else by the instance attribute named
    ``timeout_attr`` (read at each call). ``__wrapped__`` is the Deferred-returning method.
    Usable bare (``@blocking``) or with options (``@blocking(timeout_attr="send_timeout")``).
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            limit = timeout if timeout is not None else getattr(self, timeout_attr)
            return _call(func, (self, *args), kwargs, limit)

        return wrapper

    return decorate if method is None else decorate(method)


def delegate(
    name: str,
    *,
    to: str = "_core",
    timeout: float | None = None,
    timeout_attr: str = "timeout",
) -> Callable[..., Any]:
    """A blocking method calling ``self.<to>.<name>(...)`` in the reactor thread:
    ``send = delegate("send")`` in a facade class whose core object is ``self._core``."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(self, to), name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Blocking ``self.{to}.{name}(...)``: see its Deferred API."
    return blocking(method, timeout=timeout, timeout_attr=timeout_attr)


# ---- internals -----------------------------------------------------------------------------


def _describe(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


@dataclass
class _Pending:
    """One blocking call, as seen in the reactor thread (only that thread touches it)."""

    what: str
    deferred: Deferred[Any] | None = None
    done: bool = False  # the outcome went to the waiting caller
    abandoned: bool = False  # the caller timed out: the outcome is dropped

    def settle(self, result: Any) -> Any:
        if not self.abandoned:
            self.done = True
            return result
        if isinstance(result, Failure) and not result.check(CancelledError):
            log.failure("{what} failed after its caller timed out", result, level=LogLevel.warn,
                        what=self.what)
        return None  # nobody will read it: keep crochet from logging it as unhandled


@crochet.run_in_reactor
def _start(pending: _Pending, fn: Callable[..., Any], args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> Deferred[Any]:
    d = defer.maybeDeferred(fn, *args, **kwargs)  # also runs a coroutine (Deferred.fromCoroutine)
    pending.deferred = d
    return d.addBoth(pending.settle)


@crochet.run_in_reactor
def _abandon(pending: _Pending) -> bool:
    """Cancel a timed-out call; True when its outcome had already gone to the caller."""
    if pending.done:
        return True
    pending.abandoned = True
    if pending.deferred is not None:  # always set: _start was queued before us
        pending.deferred.cancel()
    return False


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
          timeout: float) -> Any:
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    ensure_reactor()
    what = _describe(fn)
    if threadable.isInIOThread():
        raise ReactorThreadError(
            f"blocking call of {what} from the reactor thread would deadlock; "
            "use its Deferred API there"
        )
    pending = _Pending(what)
    try:
        eventual = _start(pending, fn, args, kwargs)
        try:
            return eventual.wait(timeout)
        except crochet.TimeoutError:
            pass
        # Cancel in the reactor thread and wait for that (bounded) while still holding
        # `eventual`, so the cancelled outcome lands there instead of in crochet's error log.
        try:
            settled = _abandon(pending).wait(CANCEL_GRACE)
        except crochet.TimeoutError:
            settled = False
        if settled:  # the result came between our timeout and the cancellation: still good
            return eventual.wait(0)
    except crochet.ReactorStopped:
        raise ReactorStoppedError(f"the reactor stopped before {what} finished") from None
    raise CallTimeoutError(f"{what} gave no result within {timeout:g} s; it was cancelled")


# ---- submit: the batched hand-off of the facades' sends ------------------------------------


class _ThreadWake:
    """How the reactor thread wakes one waiting thread: an eventfd of that thread (Linux), reused
    by each of its Waiters. A lock released by the reactor wakes the waiting caller while the
    reactor still holds the GIL: on a shared core the caller runs, finds the GIL taken, sleeps
    again and is woken once more when the reactor polls (blocking sync send: 5.6 context switches
    per send; 4.3 with this). The eventfd's write releases the GIL around the syscall, so the
    woken caller takes it at once. The count it carries is only a hint: a waiter is settled when
    its ``_done`` is set, and a stale wake-up (from a waiter that gave up) costs a poll."""

    __slots__ = ("fd", "poller", "__weakref__")

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN)

    def wake(self) -> None:
        os.eventfd_write(self.fd, 1)

    def wait(self, waiter: Waiter, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``waiter`` to be settled; False if it was not."""
        end = 0.0
        poll = self.poller.poll
        while not waiter._done:
            if end:
                left = end - time.monotonic()
                if left <= 0:
                    return False
            else:
                end = time.monotonic() + timeout
                left = timeout
            if poll(left * 1000):
                with contextlib.suppress(BlockingIOError):  # another reader took the count
                    os.eventfd_read(self.fd)
        return True

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # the thread ended and no Waiter of it is left (the reactor holds a waiter it settles)
        _close(self.fd)


_thread_wakes = threading.local()
if hasattr(os, "register_at_fork"):
    # a forked child must not share its parent's eventfd: its first Waiter makes its own
    os.register_at_fork(after_in_child=lambda: _thread_wakes.__dict__.pop("wake", None))


def _thread_wake() -> _ThreadWake | None:
    """The calling thread's _ThreadWake; None where there is no eventfd (a lock per Waiter)."""
    try:
        return _thread_wakes.wake  # type: ignore[no-any-return]
    except AttributeError:
        if not hasattr(os, "eventfd"):
            return None
        wake = _thread_wakes.wake = _ThreadWake()
        return wake


class Waiter:
    """A sink one blocked caller waits on, in the thread that made it, woken by the reactor
    thread: that thread's eventfd (``_ThreadWake``), else a bare lock.

    Usable with ``submit`` (the call's Deferred is kept for a cancellation) and ``submit_to``: a
    call that settles the waiter itself may set ``attempt`` to an object whose ``cancel()`` drops
    it (the producer's first attempt), so a timed-out caller still cancels the call."""

    __slots__ = ("_wake", "_lock", "_done", "result", "error", "deferred", "attempt", "what")

    def __init__(self, what: str) -> None:
        self._wake = wake = _thread_wake()
        if wake is None:
            self._lock = _thread.allocate_lock()
            self._lock.acquire()
        self._done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.deferred: Deferred[Any] | None = None
        self.attempt: Any = None
        self.what = what

    def _signal(self) -> None:
        inbox = _inbox
        pending = inbox._pending
        pending.discard(self)  # a submit_to call settles the waiter itself
        wake = self._wake
        if wake is not None:
            direct = inbox._direct
            if wake is getattr(_thread_wakes, "wake", None):
                return  # settled in its own thread (it read its answer): it is not waiting
            if (direct is not None and direct.owner == _thread.get_ident() and direct.open
                    and not pending and not inbox._scheduled):
                # the only call: its caller will write its next one itself (run_here), once
                # the holder of the reactor lock lets it go
                direct.wakes.append(wake)
            else:
                wake.wake()
        else:
            self._lock.release()

    def ok(self, result: Any) -> None:
        if not self._done:
            self.result = result
            self._done = True  # after the result: the waiting thread reads it once this is set
            self._signal()

    def fail(self, failure: Failure) -> None:
        if not self._done:
            self.error = failure.value
            self._done = True
            self._signal()
        elif not failure.check(CancelledError, ReactorStoppedError):
            log.failure("{what} failed after its caller timed out", failure, level=LogLevel.warn,
                        what=self.what)

    def _abandon(self) -> None:
        """In the reactor thread: a timed-out caller gives up; cancel the call if still pending."""
        if self._done:
            return
        if self.deferred is not None:
            self.deferred.cancel()  # fails the waiter with CancelledError, or settles it first
            return
        attempt = self.attempt
        if attempt is not None:
            self.attempt = None
            attempt.cancel()  # forgets the call (no outcome comes), or fails us via its retries
        if not self._done:  # still queued (dropped when it comes out of the queue), or forgotten
            self.fail(Failure(CancelledError()))

    def _settled_within(self, timeout: float) -> bool:
        wake = self._wake
        if wake is not None:
            if getattr(_thread_wakes, "wake", None) is not wake:
                # its thread's eventfd is read by that thread only (another reader would take
                # the wake-ups of that thread's own waiters)
                raise RuntimeError("a Waiter is waited on in the thread that made it")
            return wake.wait(self, timeout)
        return self._lock.acquire(timeout=timeout)

    def wait(self, timeout: float) -> Any:
        """The outcome: the result, or the exception raised. CallTimeoutError after ``timeout``
        (the call is cancelled), ReactorStoppedError when the reactor stopped meanwhile."""
        if not self._settled_within(timeout):
            try:
                _inbox.reactor.callFromThread(self._abandon)
            except AttributeError:  # no reactor attached: nothing to cancel
                pass
            # the result may have come between our timeout and the cancellation: still good
            if not self._settled_within(CANCEL_GRACE) or isinstance(self.error, CancelledError):
                raise CallTimeoutError(
                    f"{self.what} gave no result within {timeout:g} s; it was cancelled")
        if self.error is not None:
            raise self.error
        return self.result


_PENDING = concurrent.futures._base.PENDING
_FINISHED = concurrent.futures._base.FINISHED
_SETTLED = frozenset({_FINISHED, concurrent.futures._base.CANCELLED,
                      concurrent.futures._base.CANCELLED_AND_NOTIFIED})
#: Guards every LightFuture that has no Condition yet (held for a few attribute writes only).
_light_lock = threading.Lock()


class LightFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    """A ``concurrent.futures.Future`` whose Condition (eight GC-tracked objects, the bulk of a
    Future's cost) is made only when a thread has to wait on it: ``result()``/``exception()``
    before it is settled, ``wait()``, ``as_completed()``, ``cancel()``...

    Until then ``set_result``, ``set_exception`` and ``add_done_callback`` run under one shared
    lock, and a first done-callback is kept in a slot (``_one``), not a list. The Condition is
    made under that lock too, so an operation either completes on the shared lock before it
    exists or runs on it after (the base class's code): they never mix. A settled future's
    ``done()``, ``result()`` and ``exception()`` read it without any lock: FINISHED is final and
    is written after the outcome (a done-callback calling ``f.result()``, the usual way, makes
    nothing). Relies on the attribute protocol of CPython's ``concurrent.futures._base``
    (3.11-3.13).
    """

    _waiters: Any = ()  # a list once the Condition exists (wait()/as_completed() append to it)
    _done_callbacks: Any = ()
    _one: Any = None  # the first done-callback, until the Condition exists (then in the list)

    def __init__(self) -> None:  # no super().__init__: it makes the Condition
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._cond: threading.Condition | None = None

    @property  # type: ignore[override]
    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            with _light_lock:
                cond = self._cond
                if cond is None:
                    self._waiters = []
                    callbacks = list(self._done_callbacks)
                    one = self._one
                    if one is not None:
                        self._one = None
                        callbacks.insert(0, one)  # added first: it runs first
                    self._done_callbacks = callbacks
                    cond = self._cond = threading.Condition()
        return cond

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        if self._cond is None:
            with _light_lock:
                if self._cond is None:
                    if self._state not in _SETTLED:
                        if self._one is None and not self._done_callbacks:
                            self._one = fn
                        elif self._done_callbacks:
                            self._done_callbacks.append(fn)
                        else:
                            self._done_callbacks = [fn]
                        return
                    run_now = True
                else:
                    run_now = False
            if run_now:
                try:
                    fn(self)
                except Exception:
                    concurrent.futures._base.LOGGER.exception("exception calling callback for %r", self)
                return
        super().add_done_callback(fn)

    def done(self) -> bool:
        if self._state is _FINISHED:
            return True
        return super().done()

    def result(self, timeout: float | None = None) -> Any:
        if self._state is _FINISHED:
            error = self._exception
            if error is None:
                return self._result
            try:
                raise error
            finally:
                error = None  # as the base class: no cycle through this frame
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state is _FINISHED:
            return self._exception
        return super().exception(timeout)

    def _settle_light(self, result: Any, exception: BaseException | None) -> bool:
        """Settle without a Condition when none exists; False when the base class must."""
        with _light_lock:
            if self._cond is not None:
                return False
            settled = self._state in _SETTLED
            if not settled:
                self._result = result
                self._exception = exception
                self._state = _FINISHED
                one = self._one  # taken under the lock: a Condition made from now on finds none
                if one is not None:
                    self._one = None
        if settled:  # outside the lock: repr() makes the Condition, under that lock
            raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")
        if one is not None:
            try:
                one(self)
            except Exception:
                concurrent.futures._base.LOGGER.exception("exception calling callback for %r", self)
        if self._done_callbacks:
            self._invoke_callbacks()
        return True

    def set_result(self, result: Any) -> None:
        if not self._settle_light(result, None):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._settle_light(None, exception):
            super().set_exception(exception)


class Window:
    """At most ``size`` calls handed off and not yet settled: a BoundedSemaphore's job with a
    plain lock (no Condition round trip unless a caller has to wait). Any thread may release."""

    __slots__ = ("_lock", "_free", "_waiting", "_room")

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._free = size
        self._waiting = 0
        self._room = threading.Condition(self._lock)

    def acquire(self, timeout: float) -> bool:
        """Take a slot, waiting up to ``timeout`` seconds for one; False if none came."""
        with self._lock:
            if self._free > 0:
                self._free -= 1
                return True
            self._waiting += 1
            try:
                if not self._room.wait_for(self._has_room, timeout):
                    return False
            finally:
                self._waiting -= 1
            self._free -= 1
            return True

    def _has_room(self) -> bool:
        return self._free > 0

    def release(self) -> None:
        with self._lock:
            self._free += 1
            if self._waiting:
                self._room.notify()


def _call_ended(sink: FutureSink | SinkFuture) -> None:
    """A future-settling sink's call ended: its ``window`` slot is given back (once: a send failed
    at shutdown may still end later) and the inbox forgets it (a submit_to call settles it itself)."""
    window = sink.window
    if window is not None:
        sink.window = None
        window.release()
    _inbox._pending.discard(sink)


class FutureSink:
    """A sink settling a ``concurrent.futures.Future`` (its callbacks run in the reactor thread);
    the call's ``window`` slot, if any, is given back first (once, when the call ends)."""

    __slots__ = ("future", "deferred", "window")

    def __init__(self, future: concurrent.futures.Future[Any], window: Window | None = None) -> None:
        self.future = future
        self.deferred: Deferred[Any] | None = None
        self.window = window

    def ok(self, result: Any) -> None:
        _call_ended(self)
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # settled at shutdown
            self.future.set_result(result)

    def fail(self, failure: Failure) -> None:
        _call_ended(self)
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            self.future.set_exception(failure.value)


#: Facade futures the reactor thread settles between two offers of the GIL to other threads.
YIELD_EVERY = 64
_sched_yield: Callable[[], None] | None = getattr(os, "sched_yield", None)


class _Settled:
    """How many facade futures were settled since the reactor thread last gave up the GIL.

    The reactor settles a whole read of answers (up to 128 KiB, hundreds of sends) holding the
    GIL; a sender woken meanwhile by a done-callback (a slot of its window free) gets the GIL
    only when the read is done or after the switch interval (5 ms), and what it sends then waits
    in the inbox for the read's end: its window drains and the broker runs dry in bursts. Every
    YIELD_EVERY settled futures ``os.sched_yield`` releases the GIL and lets a woken thread on
    the same core run first, and the sends it queued meanwhile are written at once (the inbox
    drained here, unless this runs inside a drain: a thread's sends keep their order). With
    nobody waiting it is one short syscall per YIELD_EVERY sends."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def one(self) -> None:
        count = self.count + 1
        if count < YIELD_EVERY:
            self.count = count
            return
        self.count = 0
        if _sched_yield is not None:
            _sched_yield()
            inbox = _inbox
            if inbox._scheduled and not inbox._draining:
                inbox._drain()


_settled = _Settled()


class SinkFuture(LightFuture):
    """A LightFuture that is its own sink (``ok``/``fail`` as FutureSink's, the ``window`` slot
    given back once): one object less per call than a LightFuture with a FutureSink. Every
    YIELD_EVERY settled ones the reactor thread offers the GIL to a waiting sender (``_Settled``)."""

    def __init__(self, window: Window | None = None) -> None:  # LightFuture's, inline
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._cond = None
        self.window = window
        self.deferred: Deferred[Any] | None = None

    def ok(self, result: Any) -> None:
        _call_ended(self)
        try:
            self.set_result(result)
        except concurrent.futures.InvalidStateError:  # settled at shutdown, or cancelled
            pass
        _settled.one()

    def fail(self, failure: Failure) -> None:
        _call_ended(self)
        try:
            self.set_exception(failure.value)
        except concurrent.futures.InvalidStateError:
            pass
        _settled.one()


class _Bell:
    """The inbox's own wake-up of the reactor thread (Linux): an eventfd the reactor reads, whose
    ``doRead`` drains the inbox. ``callFromThread`` per burst is Twisted's waker pipe plus its
    thread-call queue: a few Python calls more on both sides of every blocking sync send. Its fd is
    closed with the last reference, so a put that took the bell just before it was rung off
    never writes to a closed (or reused) fd number."""

    log = Logger(namespace="rmqwire.client.blocking")

    def __init__(self, inbox: _Inbox, reactor: Any) -> None:
        self.inbox = inbox
        self.reactor = reactor
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)

    def fileno(self) -> int:
        return self.fd

    def logPrefix(self) -> str:  # noqa: N802 - Twisted's interface
        return "rmqwire.client.blocking.inbox"

    def doRead(self) -> None:  # noqa: N802 - Twisted's interface
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:  # a spurious wake-up
            pass
        try:
            self.inbox._drain()
        except Exception:  # an escaping error would make the reactor drop us: nothing drains then
            self.log.failure("draining the blocking calls failed")

    def connectionLost(self, reason: Failure) -> None:  # noqa: N802 - Twisted's interface
        # the reactor dropped us (removeReader is not that): back to callFromThread
        self.inbox._ring_off(self)

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # only now: a put that took the bell before it was rung off may still write to it
        _close(self.fd)


class _Unlocked:
    """The reactor's epoll object, whose ``poll`` (the reactor thread's wait for I/O) runs with
    the reactor lock released (``_ReactorLock``); the callers it settled are woken then.

    It also keeps the sockets callers read their answers on (``_AnswerWatch``) registered with
    EPOLLEXCLUSIVE behind the caller's own epoll: epoll cannot modify such a registration, so
    Twisted's ``modify`` of one is a delete and an add (which keeps it behind the caller's), and
    a register or unregister of its fd (closed, or its number reused) forgets the watch."""

    __slots__ = ("_poller", "_direct", "_ident", "watches")

    def __init__(self, poller: Any, direct: _ReactorLock) -> None:
        self._poller = poller
        self._direct = direct
        self._ident = _thread.get_ident()  # made in the reactor thread
        self.watches: dict[int, _AnswerWatch] = {}  # by fd

    def register(self, fd: int, mask: int) -> None:
        if self.watches:
            self.watches.pop(fd, None)
        self._poller.register(fd, mask)

    def modify(self, fd: int, mask: int) -> None:
        if fd in self.watches:
            poller = self._poller
            poller.unregister(fd)
            try:
                poller.register(fd, mask | select.EPOLLEXCLUSIVE)
            except BaseException:
                del self.watches[fd]
                poller.register(fd, mask)
            return
        self._poller.modify(fd, mask)

    def unregister(self, fd: int) -> None:
        if self.watches:
            self.watches.pop(fd, None)
        self._poller.unregister(fd)

    def poll(self, timeout: float = -1, maxevents: int = -1) -> list[tuple[int, int]]:
        direct = self._direct
        direct.release()
        try:
            return self._poller.poll(timeout, maxevents)  # type: ignore[no-any-return]
        finally:
            direct.lock.acquire()
            direct.owner = self._ident

    def __getattr__(self, name: str) -> Any:
        return getattr(self._poller, name)


class _ReactorLock:
    """A lock the reactor thread holds at all times but while it waits for I/O in epoll.

    Another thread that takes it may run reactor code as if it were the reactor thread: the
    reactor cannot run any until the lock is released, and what the kernel learns meanwhile (a
    socket written, a reader or writer added) it sees when it polls next. What it cannot see is a
    timer set sooner than the one its wait was computed for: whoever sets one wakes it
    (``_Inbox.run_here``). A blocking sync send so frames and writes its request in the caller's
    thread: no wake-up of the reactor and no thread switch before the request is on the wire.

    A caller whose Waiter the holder settles while no other call is under way is woken when the
    lock is released (``wakes``): woken at once, on a shared core, it would run before the
    reactor's pass ends, find the lock taken and queue its next send for the reactor after all.
    With other calls under way (many threads) it is woken at once: its next send queues while
    the reactor still runs, and the reactor's next pass writes it with the others' in one go.
    Only Twisted's epoll reactor is fitted with it (its ``_poller``); elsewhere calls queue."""

    __slots__ = ("reactor", "lock", "open", "owner", "wakes")

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.lock = _thread.allocate_lock()
        self.open = False  # runs by other threads allowed (from install to shutdown)
        self.owner = 0  # the holder's thread ident (0: not known to be held)
        self.wakes: list[_ThreadWake] = []  # to wake once the lock is released

    def release(self) -> None:
        """Release the lock, then wake the callers settled meanwhile."""
        self.owner = 0
        wakes = self.wakes
        if wakes:
            self.wakes = []
        self.lock.release()
        for wake in wakes:
            wake.wake()

    @classmethod
    def install(cls, reactor: Any) -> _ReactorLock | None:
        """Fit ``reactor`` with the lock; in the reactor thread, which holds it from then on."""
        try:
            from twisted.internet.epollreactor import EPollReactor
        except ImportError:  # not Linux
            return None
        poller = getattr(reactor, "_poller", None)
        if not isinstance(reactor, EPollReactor) or poller is None or isinstance(poller, _Unlocked):
            return None
        self = cls(reactor)
        self.lock.acquire()
        self.owner = _thread.get_ident()
        reactor._poller = _Unlocked(poller, self)
        self.open = True
        return self


#: Longest a caller waits for its own answer holding the reactor lock (any other I/O or a timer
#: due sooner ends the wait first); after it the reactor reads the answer.
READ_HERE_LIMIT = 0.05
#: After a wait ended by other I/O, this many direct runs leave the answer to the reactor.
READ_HERE_BACKOFF = 64
_READ = 1  # _read_here read something
_INTERRUPTED = 2  # _read_here's wait ended by other I/O before the answer
_EPOLLIN = select.EPOLLIN
_answer_buffer = bytearray(0)  # read into by the reactor lock's holder only (_read_step)


class _AnswerWatch:
    """How a caller holding the reactor lock waits for its answer on one connection's socket
    without the reactor waking for it, and without changing the reactor's epoll per call.

    The caller waits in an epoll of its own (``poll``) holding the socket and the reactor's epoll
    (any other I/O ends the wait). Both hold the socket with EPOLLEXCLUSIVE, the caller's first
    (the reactor's registration is made again after it): the kernel then wakes the first of them
    that has a thread waiting, so an answer coming while the caller waits wakes the caller only,
    and anything coming while it does not (a broker's request, a pushed reply, a FIN between two
    calls) wakes the reactor as before. Was: the socket taken out of the reactor's epoll before
    each write and put back after the answer, two epoll_ctl per round trip."""

    __slots__ = ("transport", "poll", "__weakref__")

    def __init__(self, transport: Any, fd: int, epoll: Any) -> None:
        self.transport = transport
        own = select.epoll(2)
        own.register(fd, _EPOLLIN | select.EPOLLEXCLUSIVE)
        own.register(epoll.fileno(), _EPOLLIN)
        self.poll = own.poll


def _watch(reactor: Any, transport: Any, fd: int) -> _AnswerWatch | None:
    """The socket's ``_AnswerWatch``, made on first use (the reactor lock held, the socket read
    and not written by the reactor); None where the reactor's epoll is not ours."""
    unlocked = reactor._poller
    if type(unlocked) is not _Unlocked:
        return None
    watches = unlocked.watches
    watch = watches.get(fd)
    if watch is not None and watch.transport is transport:
        return watch
    epoll = unlocked._poller
    watch = _AnswerWatch(transport, fd, epoll)
    # made again after the caller's: the kernel offers a wake-up to the caller's epoll first
    epoll.unregister(fd)
    try:
        epoll.register(fd, _EPOLLIN | select.EPOLLEXCLUSIVE)
    except BaseException:
        epoll.register(fd, _EPOLLIN)  # as it was: the reactor reads it
        raise
    watches[fd] = watch
    return watch


def _answer_watch(reactor: Any, channel: Any) -> tuple[Any, int, float, Any, Any] | None:
    """When a caller holding the reactor lock writes its request on ``channel`` and may wait for
    and read the answer itself (``_read_here``): the call is the connection's only one, the
    socket is read and not written by the reactor (no TLS, nothing queued) and no timer is due.
    Returns (transport, fd, end of the wait, its watch, channel) for ``_read_here``; None when
    the reactor reads the answer."""
    transport = getattr(channel, "transport", None)
    if (getattr(transport, "TLS", True) or not getattr(channel, "connected", False)
            or len(channel.connection) != 1 or transport.dataBuffer or transport._tempDataLen):
        return None
    fd = transport.fileno()
    if fd not in reactor._reads or fd in reactor._writes or reactor._selectables.get(fd) is not transport:
        return None
    timeout = reactor.timeout()
    if timeout is None or timeout > READ_HERE_LIMIT:
        timeout = READ_HERE_LIMIT
    if timeout <= 0:
        return None
    watch = _watch(reactor, transport, fd)
    if watch is None:
        return None
    return transport, fd, time.monotonic() + timeout, watch, channel


def _read_step(reactor: Any, transport: Any, channel: Any) -> None:
    """The reactor's read step for this socket (``_doReadOrWrite`` of EPOLLIN: ``doRead``, and
    what follows a lost connection), in the caller's thread: one ``recv_into`` a buffer reused
    across calls; exactly one whole answer to a scanned call (the usual sync send's) goes
    straight to its receiver (``receive_whole``), anything else (part of a frame, several, a
    request of the peer's, the end) to the protocol as ``doRead`` hands it, bytes intact."""
    global _answer_buffer
    buf = _answer_buffer
    if len(buf) != transport.bufferSize:
        buf = _answer_buffer = bytearray(transport.bufferSize)
    try:
        n = transport.socket.recv_into(buf)
    except BlockingIOError:
        return
    except OSError:
        why: Any = CONNECTION_LOST
    else:
        try:
            if n and channel.receive_whole(buf, n):
                return
            why = transport._dataReceived(bytes(memoryview(buf)[:n]))  # b"": CONNECTION_DONE
        except BaseException:  # as the reactor's step: logged, and the connection dropped
            why = sys.exc_info()[1]
            twisted_log.err()
    if why:
        reactor._disconnectSelectable(transport, why, True)


def _read_here(reactor: Any, taken: tuple[Any, int, float, Any, Any], waiter: Waiter) -> int:
    """Wait for and read ``waiter``'s answer in the calling thread, which holds the reactor lock
    (the reactor waits in epoll) and wrote the request (``_answer_watch``: ``taken``): no wake-up
    of the reactor thread and none of the caller after it. The wait (``_AnswerWatch``) also
    watches the reactor's epoll, so any other I/O (a queued call's bell, another connection, a
    stop) ends it at once, as does the reactor's next timer: then the reactor goes on as if
    nothing happened, and reads the rest of the answer if any. What is read goes through
    ``_read_step`` (a hang-up or error through the reactor's own step), with writes held to the
    end as a drain's. Returns _READ when anything was read (the caller then checks the timers),
    | _INTERRUPTED when other I/O ended the wait before the answer."""
    transport, fd, end, watch, channel = taken
    reads, selectables = reactor._reads, reactor._selectables
    outcome = 0
    held = hold_flushes()
    try:
        # the write went to Twisted's queue (the socket full) or lost the connection: the
        # reactor's from here
        if (transport.dataBuffer or transport._tempDataLen or fd in reactor._writes
                or fd not in reads or selectables.get(fd) is not transport):
            return 0
        timeout = end - time.monotonic()
        poll = watch.poll
        while not waiter._done and timeout > 0:
            answered = other = 0
            for ready, event in poll(timeout):
                if ready == fd:
                    answered = event
                else:
                    other = 1
            if not answered:
                # the reactor's epoll has I/O ready (nested, it reports only what is ready now:
                # not this socket once read, though the reactor may have been woken for it when
                # it came before this wait): the reactor's from here
                if other:
                    outcome |= _INTERRUPTED
                break
            outcome |= _READ
            if answered == _EPOLLIN:
                _read_step(reactor, transport, channel)
            else:  # a hang-up or an error: the reactor's step for this event
                reactor._doReadOrWrite(transport, fd, answered)
            if fd not in reads or selectables.get(fd) is not transport:
                break  # lost, or no longer read
            timeout = end - time.monotonic()
    finally:
        release_flushes(held)
    return outcome


class _Inbox:
    """Calls queued by other threads, drained by the reactor thread in one wake-up per burst."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any]] = []
        self._scheduled = False
        self._pending: set[Any] = set()  # sinks whose Deferred has not fired (reactor thread)
        self._bell: _Bell | None = None  # set once the reactor reads it; else callFromThread
        self._direct: _ReactorLock | None = None  # set once the reactor holds it
        self._read_backoff = 0  # direct runs left that do not read their answer (lock holder)
        self._draining = False  # in _drain
        self.stopped = False
        self.reactor: Any = None

    def attach(self, reactor: Any) -> None:
        """Bind to the reactor; its shutdown fails what is queued or pending. Any thread."""
        with self._lock:
            if self.reactor is reactor:
                return
            self.reactor, self.stopped = reactor, False
        reactor.callFromThread(self._attached, reactor)

    def _attached(self, reactor: Any) -> None:
        reactor.addSystemEventTrigger("before", "shutdown", self._stop)
        self._ring_on(reactor)
        if self._direct is None:
            self._direct = _ReactorLock.install(reactor)

    def _ring_on(self, reactor: Any) -> None:
        """Wake the reactor through a bell from now on, where it can read one (reactor thread)."""
        if not hasattr(os, "eventfd") or not IReactorFDSet.providedBy(reactor):
            return
        bell = _Bell(self, reactor)
        reactor.addReader(bell)
        with self._lock:
            if self.reactor is reactor and not self.stopped and self._bell is None:
                self._bell = bell
                return
        reactor.removeReader(bell)

    def _ring_off(self, bell: _Bell) -> None:
        """Stop using ``bell`` (reactor thread); it is closed once no put holds it."""
        bell.reactor.removeReader(bell)
        with self._lock:
            if self._bell is bell:
                self._bell = None
            # a put may have rung it since it was last read (or still rings it): drained the
            # other way
            scheduled = self._scheduled and not self.stopped
        if scheduled:
            bell.reactor.callFromThread(self._drain)

    def put(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
            sink: Any) -> None:
        with self._lock:
            if self.stopped:
                raise ReactorStoppedError("the reactor has stopped (interpreter exit)")
            self._items.append((fn, args, kwargs, sink))
            if self._scheduled:
                return
            self._scheduled = True
            bell = self._bell
        if bell is not None:
            os.eventfd_write(bell.fd, 1)  # outside the lock: the woken reactor takes it at once
        else:
            self.reactor.callFromThread(self._drain)

    def run_here(self, fn: Callable[[Any, Any], Any], arg: Any, sink: Any) -> None:
        """``put`` of a submit_to call, run in the calling thread instead when the reactor is
        waiting for I/O (``_ReactorLock`` free) and no other call is queued or under way; else
        queued. A queued call goes first (a thread's calls keep their order); while others are
        under way (many threads sending) the reactor writes what they queued meanwhile in one
        pass and one send(2), which the callers writing one by one would not."""
        direct = self._direct
        if direct is None or not direct.lock.acquire(False):  # the reactor is busy: no waiting
            self.put(fn, arg, None, sink)  # type: ignore[arg-type]
            return
        direct.owner = _thread.get_ident()
        try:
            # shutting down, calls queued first, or others under way
            queued = not direct.open or self._scheduled or bool(self._pending)
            if not queued:
                reactor = direct.reactor
                heap = reactor._pendingTimedCalls
                head = heap[0] if heap else None
                when = head.time if head is not None else 0.0
                taken = None
                wake = False
                held = hold_flushes()  # written when the call returns, as a drain's
                try:
                    self._drain_items(((fn, arg, None, sink),))
                    # the reactor's wait ends at the soonest timer it knew: one set sooner here
                    # (a first call's deadline, a retry's delay) must wake it
                    if reactor._newTimedCalls or (heap and (heap[0] is not head or heap[0].time < when)):
                        wake = True
                    elif self._read_backoff:
                        self._read_backoff -= 1
                    elif type(sink) is Waiter and not sink._done:
                        channel = getattr(sink.attempt, "channel", None)
                        if channel is not None:
                            try:
                                taken = _answer_watch(reactor, channel)
                            except Exception:
                                log.failure("watching a socket for its caller's answer failed")
                finally:
                    release_flushes(held)  # the write
                if wake:
                    self._wake(reactor)
                elif taken is not None:
                    try:
                        outcome = _read_here(reactor, taken, sink)
                    except Exception:  # the call is under way all the same: the reactor reads it
                        log.failure("reading an answer in its caller's thread failed")
                        outcome = _READ | _INTERRUPTED
                    if outcome & _INTERRUPTED:
                        # other I/O came first (many threads sending: their queued calls ring
                        # the bell): their sends leave the waits for a while
                        self._read_backoff = READ_HERE_BACKOFF
                    if outcome & _READ and (reactor._newTimedCalls or (
                            heap and (heap[0] is not head or heap[0].time < when))):
                        self._wake(reactor)
        finally:
            direct.release()
        if queued:
            self.put(fn, arg, None, sink)  # type: ignore[arg-type]

    def _wake(self, reactor: Any) -> None:
        bell = self._bell
        if bell is not None:
            os.eventfd_write(bell.fd, 1)
        else:
            reactor.wakeUp()

    def _drain(self) -> None:
        # the queued calls' writes go out when the drain ends (one send(2) per connection), not
        # after the reactor pass through a zero-delay call each
        held = hold_flushes()
        self._draining = True  # a future settled by a queued call does not drain (_Settled)
        try:
            while True:
                with self._lock:
                    items = self._items
                    if not items:
                        self._scheduled = False
                        return
                    self._items = []
                self._drain_items(items)
        finally:
            self._draining = False
            release_flushes(held)

    def _drain_items(self, items: Iterable[tuple[Callable[..., Any], Any, Any, Any]]) -> None:
        pending = self._pending
        for fn, args, kwargs, sink in items:
            try:
                if kwargs is None:  # submit_to: fn(sink, arg) settles the sink or returns
                    pending.add(sink)  # failed at shutdown if still pending then
                    d = fn(sink, args)
                    if d is None:
                        continue
                else:
                    d = fn(*args, **kwargs)
            except Exception:
                pending.discard(sink)
                sink.fail(Failure())
                continue
            if not isinstance(d, Deferred):
                sink.ok(d)
                continue
            pending.add(sink)
            sink.deferred = d
            d.addBoth(self._settle, sink)

    def _settle(self, result: Any, sink: Any) -> None:
        self._pending.discard(sink)
        if isinstance(result, Failure):
            sink.fail(result)
        else:
            sink.ok(result)

    def _stop(self) -> None:
        direct = self._direct
        if direct is not None:
            direct.open = False  # held here: no direct run starts after this, and wakes go at once
            wakes, direct.wakes = direct.wakes, []
            for wake in wakes:
                wake.wake()
        bell = self._bell
        if bell is not None:
            self._ring_off(bell)
        with self._lock:
            self.stopped = True
            items, self._items = self._items, []
        stopped = Failure(ReactorStoppedError("the reactor stopped before the call finished"))
        sinks = [item[3] for item in items] + list(self._pending)
        self._pending.clear()
        for sink in sinks:
            sink.fail(stopped)


_inbox = _Inbox()


def submit_to(fn: Callable[[Any, Any], Any], arg: Any, /, *, sink: Any, here: bool = False) -> None:
    """Queue ``fn(sink, arg)`` for the reactor thread: it settles ``sink`` itself (``ok`` /
    ``fail``, which must also discard the sink from the inbox's pending set, as FutureSink and
    SinkFuture do) and returns None, or returns a Deferred (or a value) whose outcome goes to the
    sink as with ``submit``. No Deferred is needed for a call that completes the sink directly;
    one argument, so no argument tuple either (a GC-tracked object per call fewer).

    ``here``: run it in the calling thread instead while the reactor waits for I/O and nothing is
    queued (``_ReactorLock``): for a short call that only writes (a blocking sync send), whose
    caller then waits; ``fn`` must not block, nor wait for the reactor."""
    if _inbox.reactor is None:
        ensure_reactor()
    if here:
        _inbox.run_here(fn, arg, sink)
    else:
        _inbox.put(fn, arg, None, sink)  # type: ignore[arg-type]


def submit(fn: Callable[..., Any], /, *args: Any, sink: Any, **kwargs: Any) -> None:
    """Queue ``fn(*args, **kwargs)`` for the reactor thread; its outcome (a Deferred's, or a plain
    value's) goes to ``sink.ok(result)`` / ``sink.fail(failure)`` there. Raises
    ReactorStoppedError when the reactor has stopped."""
    if _inbox.reactor is None:  # attached once the reactor serves other threads
        ensure_reactor()
    _inbox.put(fn, args, kwargs, sink)
