"""Commit-log flush services: periodic (ASYNC_FLUSH) and group commit (SYNC_FLUSH).

Each service is one thread that calls a flush function (``fdatasync``, which releases the GIL), so
an appending thread, e.g. a Twisted reactor, never waits for the disk. A SYNC_FLUSH writer gets a
``concurrent.futures.Future`` that completes with ``PutMessageStatus.PUT_OK`` once a flush covers
its record, or ``FLUSH_DISK_TIMEOUT`` when ``syncFlushTimeout`` passes first; a broker bridges it
to a Deferred with ``future.add_done_callback`` + ``reactor.callFromThread``. One flush serves every
writer waiting at that moment (Java ``GroupCommitService``); ``FlushDiskWatcher`` expires waiters
even while a flush is stuck in the kernel. A broker's store flushes in a helper process instead
(``flush_helper.py``), and falls back to ``GroupCommitService`` when the helper cannot run.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable

from rmqwire.server.store.results import PutMessageResult, PutMessageStatus

__all__ = [
    "FlushDiskWatcher",
    "FlushListener",
    "FlushRealTimeService",
    "GroupCommitRequest",
    "GroupCommitService",
    "ServiceThread",
]

log = logging.getLogger(__name__)


class ServiceThread:
    """A named daemon thread with ``wakeup`` and a stop flag (Java ``ServiceThread``)."""

    name = "ServiceThread"

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run_logged, name=self.name, daemon=True)
        self._thread.start()

    def _run_logged(self) -> None:
        try:
            self.run()
        except Exception:  # a dead flush thread would silently stop durability: make it loud
            log.exception("%s died", self.name)

    def run(self) -> None:
        raise NotImplementedError

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wakeup(self) -> None:
        self._wakeup.set()

    def wait_for_running(self, interval_s: float) -> None:
        self._wakeup.wait(interval_s)
        self._wakeup.clear()
        self.on_wait_end()

    def on_wait_end(self) -> None:
        pass

    def shutdown(self, timeout: float = 60.0) -> None:
        self._stopped.set()
        self._wakeup.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
            if t.is_alive():
                log.error("%s did not stop within %.0f s", self.name, timeout)


#: Told of a round's completed listened requests (``GroupCommitRequest.token`` set), from the
#: flush or watcher thread: one call per round, each request with PUT_OK or FLUSH_DISK_TIMEOUT.
FlushListener = Callable[[list[tuple["GroupCommitRequest", PutMessageStatus]]], None]


class GroupCommitRequest:
    """A writer waiting until the commit log is flushed up to ``next_offset``: ``future`` gets
    ``result`` (PUT_OK), or a copy of it with FLUSH_DISK_TIMEOUT. A listened request (no future)
    goes to the store's flush listener instead, with its ``token`` (the writer's, e.g. its held
    response; the listener dedups the flush's and the watcher's completions)."""

    __slots__ = ("next_offset", "deadline", "future", "result", "token", "done")

    def __init__(
        self,
        next_offset: int,
        timeout_ms: int,
        result: PutMessageResult,
        clock: Callable[[], float] = time.monotonic,
        *,
        listened: bool = False,
    ) -> None:
        self.next_offset = next_offset
        self.deadline = clock() + timeout_ms / 1000.0
        self.result = result
        self.token: object = None
        self.done = False
        self.future: concurrent.futures.Future[PutMessageResult] | None = (
            None if listened else concurrent.futures.Future())

    def answer(self, status: PutMessageStatus,
               listened: list[tuple[GroupCommitRequest, PutMessageStatus]]) -> None:
        """Complete the writer once: its future now, or (listened) by adding it to ``listened``,
        which the caller hands to the flush listener in one call for the whole round."""
        if self.future is None:
            if not self.done:
                self.done = True
                listened.append((self, status))
        else:
            self.wakeup_customer(status)

    def wakeup_customer(self, status: PutMessageStatus) -> None:
        """Complete the future once; later completions (flush vs. watcher) are ignored."""
        self.done = True
        if self.future is None or self.future.done():
            return
        result = self.result
        if status is not PutMessageStatus.PUT_OK:
            log.error("flush did not reach commit-log offset %d in time", self.next_offset)
            result = PutMessageResult(status, result.append_result)
        try:
            self.future.set_result(result)
        except concurrent.futures.InvalidStateError:
            pass


class FlushDiskWatcher(ServiceThread):
    """Completes overdue requests with FLUSH_DISK_TIMEOUT even while a flush hangs in the kernel.

    Requests share one timeout, so arrival order is deadline order: the watcher looks at the
    oldest one only, dropping completed ones, and otherwise sleeps until its deadline.
    """

    name = "FlushDiskWatcher"

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 listener: Callable[[], FlushListener | None] = lambda: None) -> None:
        super().__init__()
        self._clock = clock
        self._listener = listener
        self._requests: collections.deque[GroupCommitRequest] = collections.deque()

    def add(self, request: GroupCommitRequest) -> None:
        idle = not self._requests
        self._requests.append(request)
        if idle:  # the watcher may be in a long idle sleep: let it see this deadline
            self._wakeup.set()

    def run(self) -> None:
        requests = self._requests
        while not self.stopped:
            wait = 0.5
            while requests:
                req = requests[0]
                if req.done:
                    requests.popleft()
                    continue
                left = req.deadline - self._clock()
                if left <= 0:
                    late: list[tuple[GroupCommitRequest, PutMessageStatus]] = []
                    req.answer(PutMessageStatus.FLUSH_DISK_TIMEOUT, late)
                    if late:
                        _tell(self._listener(), late)
                    requests.popleft()
                    continue
                wait = min(left, 0.5)
                break
            self._wakeup.wait(wait)
            self._wakeup.clear()


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: batches waiting writers, flushes once, completes all of them."""

    name = "GroupCommitService"

    def __init__(
        self,
        flush: Callable[[], int],
        on_flushed: Callable[[int], None],
        *,
        wait_interval_s: float = 0.01,
        listener: Callable[[], FlushListener | None] = lambda: None,
    ) -> None:
        """``flush()`` makes the commit log durable and returns the flushed offset;
        ``on_flushed(offset)`` runs after each flush (dispatch, checkpoint time); ``listener()``
        gives the flush listener for listened requests."""
        super().__init__()
        self._flush = flush
        self._on_flushed = on_flushed
        self._listener = listener
        self._interval = wait_interval_s
        # Writers append, the flush thread takes everything at the start of a round (Java swaps
        # two lists under a spin lock; a deque needs no lock at all).
        self._requests: collections.deque[GroupCommitRequest] = collections.deque()

    def put_request(self, request: GroupCommitRequest) -> None:
        self._requests.append(request)
        if not self._wakeup.is_set():
            self._wakeup.set()

    def do_commit(self) -> None:
        pending = self._requests
        requests = [pending.popleft() for _ in range(len(pending))]
        flushed = self._flush()
        listened: list[tuple[GroupCommitRequest, PutMessageStatus]] = []
        for req in requests:
            ok = flushed >= req.next_offset
            # Behind only when an fdatasync failed: retry, then report FLUSH_DISK_TIMEOUT.
            for _ in range(2):
                if ok:
                    break
                flushed = self._flush()
                ok = flushed >= req.next_offset
            req.answer(PutMessageStatus.PUT_OK if ok else PutMessageStatus.FLUSH_DISK_TIMEOUT,
                       listened)
        if listened:  # the round's listened writers in one call
            _tell(self._listener(), listened)
        try:
            self._on_flushed(flushed)
        except Exception:
            log.exception("after-flush hook failed")

    def run(self) -> None:
        while not self.stopped:
            try:
                self.wait_for_running(self._interval)
                self.do_commit()
            except Exception:
                log.exception("%s: flush failed", self.name)
        # Shutdown: serve whoever arrived meanwhile, then one last flush.
        try:
            self.do_commit()
        except Exception:
            log.exception("%s: final flush failed", self.name)


def _tell(listener: FlushListener | None, done: list[tuple[GroupCommitRequest, PutMessageStatus]]) -> None:
    if listener is None:  # a listened request is only made while a listener is set
        log.error("no flush listener for %d completed requests", len(done))
        return
    try:
        listener(done)
    except Exception:
        log.exception("flush listener failed")


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: flush every ``flushIntervalCommitLog`` when at least
    ``flushCommitLogLeastPages`` pages are dirty, and everything every
    ``flushCommitLogThoroughInterval`` (Java ``FlushRealTimeService``)."""

    name = "FlushRealTimeService"

    def __init__(
        self,
        flush: Callable[[int], int],
        on_flushed: Callable[[int], None],
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._flush = flush
        self._on_flushed = on_flushed
        self._interval = interval_ms / 1000.0
        self._least_pages = least_pages
        self._thorough = thorough_interval_ms / 1000.0
        self._clock = clock
        self._last_thorough = 0.0

    def flush_once(self) -> int:
        least = self._least_pages
        now = self._clock()
        if now >= self._last_thorough + self._thorough:
            self._last_thorough = now
            least = 0
        flushed = self._flush(least)
        self._on_flushed(flushed)
        return flushed

    def run(self) -> None:
        while not self.stopped:
            # Java sleeps a fixed interval (flushCommitLogTimed=true): no wake-up per put.
            self._stopped.wait(self._interval)
            try:
                self.flush_once()
            except Exception:
                log.exception("%s: flush failed", self.name)
        try:
            self._on_flushed(self._flush(0))
        except Exception:
            log.exception("%s: final flush failed", self.name)
