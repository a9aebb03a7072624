"""SYNC_FLUSH group commit through a flush helper process, completed on the broker's reactor.

With the in-process ``GroupCommitService`` every round passes the GIL twice between the reactor and
the flush thread (waking the thread, then getting the GIL back after ``fdatasync``), which costs more
than the ``fdatasync`` itself. Here the flush runs in a small helper process (``_flush_child.py``,
spawned at start, ended with the store): the reactor tells it the highest commit-log offset to make
durable over a Unix socket, once its puts are done (after the reactor pass, and while more I/O is
ready, after that too, up to 1 ms: the flush thread also started only when the reactor slept); the
helper ``fdatasync``\\ s every file up to the highest target it has read (one flush serves all of
them, as Java's ``GroupCommitService`` swaps its request lists) and answers with the offset now on
disk; the reactor reads the answer as it reads a client's socket (``fileno`` / ``doRead``: an
``IReadDescriptor``), completes every request that offset covers and, once the answers are sent,
dispatches to the consume queues. Neither the wake-up nor the completion needs the GIL of another
thread. Puts from other threads send their target at once.

Durability is the in-process flush's: the helper syncs its own descriptors of the same files (passed
over the socket, ``SCM_RIGHTS``), and ``fdatasync`` writes the inode's dirty page-cache pages
whichever process dirtied them through its shared mapping. A request completes with PUT_OK only
from a helper's answer covering it; ``FlushDiskWatcher`` still answers FLUSH_DISK_TIMEOUT after
``syncFlushTimeout``. A helper that exits is replaced (told every file from the flushed offset on
and the highest target); one that dies within a second of its start makes the store go back to the
in-process ``GroupCommitService`` for good, loudly.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqwire.server.store._flush_child import MSG
from rmqwire.server.store.flush import FlushListener, GroupCommitRequest, GroupCommitService
from rmqwire.server.store.mapped_file import MappedFileQueue
from rmqwire.server.store.results import PutMessageStatus

__all__ = ["FlushHelper", "HelperGroupCommitService", "ReactorLike"]

log = logging.getLogger(__name__)

_CHILD = str(Path(__file__).with_name("_flush_child.py"))
#: A helper dying sooner than this after its start is not replaced again.
_MIN_LIFE_S = 1.0
#: The longest a target waits for the reactor to run out of ready I/O (see ``_send_asked``).
_IDLE_WAIT_S = 0.001


class ReactorLike:
    """What the service needs of a Twisted reactor (``IReactorFDSet``, ``callLater``,
    ``callFromThread``)."""

    def addReader(self, reader: Any) -> None: ...  # noqa: N802
    def callLater(self, delay: float, f: Callable[..., Any], *args: Any) -> Any: ...  # noqa: N802
    def removeReader(self, reader: Any) -> None: ...  # noqa: N802
    def callFromThread(self, f: Callable[..., Any], *args: Any) -> None: ...  # noqa: N802


class FlushHelper:
    """One helper process and the store's end of its socket (stream: no datagram queue limit)."""

    def __init__(self, flushed: int) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", _CHILD, str(theirs.fileno()), str(flushed)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, close_fds=True,
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        mine.setblocking(False)
        self.sock = mine
        self.started = time.monotonic()
        self._partial = b""

    @property
    def pid(self) -> int:
        return self.process.pid

    def fileno(self) -> int:
        return self.sock.fileno()

    def send_file(self, start: int, size: int, fd: int) -> None:
        socket.send_fds(self.sock, [MSG.pack(b"F", start, size)], [fd])

    def send_target(self, offset: int) -> bool:
        """False when the socket is full (the helper has not read for long: it is stuck)."""
        try:
            self.sock.send(MSG.pack(b"T", offset, 0))
        except BlockingIOError:
            return False
        return True

    def read_answers(self) -> list[tuple[int, int]] | None:
        """The (offset, errno) answers readable now; None once the helper is gone."""
        out = []
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return out
            except OSError:
                return None
            if not data:
                return None
            if self._partial:
                data, self._partial = self._partial + data, b""
            end = len(data) - len(data) % MSG.size
            out.extend((a, b) for _kind, a, b in MSG.iter_unpack(data[:end]))
            self._partial = data[end:]
            if len(data) < 4096:  # all there was (no second recv just to hear EAGAIN)
                return out

    def close(self, wait_s: float = 10.0) -> None:
        """Close the socket (the helper ends at EOF after any flush in progress) and reap it."""
        self.sock.close()
        try:
            self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            log.error("flush helper %d did not end: killed", self.pid)
            self.process.kill()
            self.process.wait()


class _Reader:
    """The reactor's read descriptor for one helper (a new one per helper: the fd changes)."""

    def __init__(self, service: HelperGroupCommitService, helper: FlushHelper) -> None:
        self.service = service
        self.helper = helper
        self.added = False

    def fileno(self) -> int:
        return self.helper.sock.fileno()

    def doRead(self) -> None:  # noqa: N802
        self.service._on_readable(self.helper)

    def connectionLost(self, reason: object) -> None:  # noqa: N802
        self.service._helper_lost(self.helper)

    def logPrefix(self) -> str:  # noqa: N802
        return "FlushHelper"


class HelperGroupCommitService:
    """The store's SYNC_FLUSH service when a reactor completes its requests (see the module)."""

    name = "FlushHelper"

    def __init__(
        self,
        queue: MappedFileQueue,
        on_flushed: Callable[[int], None],
        listener: FlushListener,
        reactor: ReactorLike,
        fallback: Callable[[], GroupCommitService],
    ) -> None:
        """``queue`` the commit log's files; ``on_flushed(offset)`` after each answer (dispatch);
        ``listener`` gets listened completions on the reactor thread; ``fallback()`` makes the
        in-process service (its listener hops to the reactor itself)."""
        self._queue = queue
        self._on_flushed = on_flushed
        self._listener = listener
        self._reactor = reactor
        self._make_fallback = fallback
        self._fallback: GroupCommitService | None = None
        self._lock = threading.Lock()  # sends (puts may come from any thread) and the switch
        self._requests: collections.deque[GroupCommitRequest] = collections.deque()
        self._targets: collections.deque[tuple[int, int]] = collections.deque()  # (offset, store ts) sent
        self._asked = 0  # highest target sent
        self._unsent = False  # the highest target is not in the socket yet (it was full)
        self._send_scheduled = False  # a call after this reactor pass sends the highest target
        self._dispatch_scheduled = False  # a call after this pass dispatches what was flushed
        self._first_unsent = 0.0
        # Readable when the reactor has I/O ready (Twisted's epoll reactor): a pass will follow.
        self._busy_probe: select.poll | None = None
        poller = getattr(reactor, "_poller", None)
        if poller is not None and hasattr(poller, "fileno"):
            self._busy_probe = select.poll()
            self._busy_probe.register(poller.fileno(), select.POLLIN)
        self._files_end = 0  # end offset of the last file the helper holds
        self._helper: FlushHelper | None = None
        self._reader: _Reader | None = None
        self._reactor_thread: int | None = None  # learnt when the first reader is added
        self._stopped = threading.Event()
        self._thread = None  # DefaultMessageStore.abandon looks for a thread to join

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            try:
                self._spawn()
            except OSError as e:
                log.critical("no flush helper (%s): SYNC_FLUSH flushes in the in-process flush thread", e)
                self._go_in_process()

    def _spawn(self) -> None:
        flushed = self._queue.flushed_where
        helper = FlushHelper(flushed)
        self._helper = helper
        self._files_end = 0
        self._send_files(helper, max(flushed, self._asked))
        if self._asked > flushed:
            self._unsent = not helper.send_target(self._asked)
        self._reader = reader = _Reader(self, helper)
        self._reactor.callFromThread(self._add_reader, reader)
        log.info("flush helper %d started at commit-log offset %d", helper.pid, flushed)

    def _add_reader(self, reader: _Reader) -> None:
        with self._lock:
            self._reactor_thread = threading.get_ident()
            if reader is self._reader:  # not already replaced or stopped
                self._reactor.addReader(reader)
                reader.added = True

    def _detach(self, reader: _Reader | None, helper: FlushHelper | None, wait_s: float) -> None:
        """Take the reader off the reactor, then close the helper (closing first would leave
        the reactor a dead descriptor to unregister). Called without the lock held."""
        if reader is not None and reader.added:
            if threading.get_ident() == self._reactor_thread:
                self._reactor.removeReader(reader)
            else:
                removed = threading.Event()

                def remove() -> None:
                    self._reactor.removeReader(reader)
                    removed.set()
                self._reactor.callFromThread(remove)
                if not removed.wait(wait_s):  # no reactor running: nothing to unregister from
                    log.warning("flush helper reader not removed by the reactor")
        if helper is not None:
            helper.close(wait_s)

    def _send_files(self, helper: FlushHelper, upto: int) -> None:
        """Hand the helper every file it lacks from the flushed offset up to ``upto``."""
        start_at = max(self._files_end, self._queue.flushed_where)
        for f in self._queue.files:
            end = f.file_from_offset + f.file_size
            if end <= start_at:
                continue
            if f.file_from_offset >= upto and self._files_end:
                break
            helper.send_file(f.file_from_offset, f.file_size, f._fd)
            self._files_end = end

    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop the helper (it finishes a flush in progress); the store flushes itself after this,
        and the requests still waiting complete from that flush."""
        self._stopped.set()
        with self._lock:
            helper, reader, self._helper, self._reader = self._helper, self._reader, None, None
            fallback = self._fallback
        self._detach(reader, helper, min(timeout, 10.0))
        if fallback is not None:
            fallback.shutdown(timeout)
            return
        flushed = self._queue.flush_all()
        self._complete(flushed, in_reactor=False)

    def abandon(self) -> None:
        """As a killed broker: the helper sees EOF and ends; nobody is answered."""
        self._stopped.set()
        with self._lock:
            helper, reader, self._helper, self._reader = self._helper, self._reader, None, None
            fallback = self._fallback
        self._detach(reader, helper, 10.0)
        if fallback is not None:
            fallback._stopped.set()
            fallback.wakeup()
            if fallback._thread is not None:
                fallback._thread.join(10)

    @property
    def helper_pid(self) -> int | None:
        h = self._helper
        return h.pid if h is not None else None

    # -- requests (any thread) -----------------------------------------------------------------

    def put_request(self, request: GroupCommitRequest) -> None:
        append = request.result.append_result
        with self._lock:
            if self._fallback is not None:
                self._fallback.put_request(request)
                return
            self._requests.append(request)
            self._ask(request.next_offset, append.store_timestamp if append is not None else 0)

    def wakeup(self) -> None:
        """A put that does not wait is flushed all the same (Java's GroupCommitService flushes
        every 10 ms without requests): its target, nobody to answer."""
        with self._lock:
            if self._fallback is not None:
                self._fallback.wakeup()
                return
            self._ask(self._queue.max_offset, 0)

    def _ask(self, offset: int, store_timestamp: int) -> None:
        if offset <= self._asked or self._stopped.is_set():
            return
        self._asked = offset
        self._targets.append((offset, store_timestamp))
        if threading.get_ident() == self._reactor_thread:
            # One target per reactor pass, after it: the puts of one read (a dozen sends from
            # pipelining clients) join one flush instead of the helper starting on the first.
            if not self._send_scheduled:
                self._send_scheduled = True
                self._first_unsent = time.monotonic()
                self._reactor.callLater(0, self._send_asked)
            return
        self._send(self._asked)

    def _send_asked(self) -> None:
        probe = self._busy_probe
        if probe is not None and probe.poll(0) and time.monotonic() - self._first_unsent < _IDLE_WAIT_S:
            # More I/O is ready: the reactor runs another pass before it sleeps, and that pass's
            # puts join this flush (up to 1 ms). Sent at once, the target made rounds of ~2
            # sends on a loaded machine, and more, smaller fdatasyncs cost more than they saved.
            self._reactor.callLater(0, self._send_asked)
            return
        with self._lock:
            self._send_scheduled = False
            if self._fallback is None:
                self._send(self._asked)

    def _send(self, offset: int) -> None:
        helper = self._helper
        if helper is None:
            return
        try:
            if offset > self._files_end:
                self._send_files(helper, offset)
            # A full socket: the helper is stuck in a flush; the target goes after its answer.
            self._unsent = not helper.send_target(offset)
        except OSError as e:  # gone: its reader sees EOF and replaces it
            log.error("flush helper %d: %s", helper.pid, e)

    # -- on the reactor ------------------------------------------------------------------------

    def _on_readable(self, helper: FlushHelper) -> None:
        answers = helper.read_answers()
        if answers is None:
            self._helper_lost(helper)
            return
        flushed, failed_at = -1, -1
        for offset, err in answers:
            if err:
                log.error("flush helper %d: fdatasync failed (%s) below commit-log offset %d",
                          helper.pid, os.strerror(err), offset)
                failed_at = max(failed_at, offset)
            else:
                flushed = max(flushed, offset)
        if failed_at >= 0:
            self._fail_upto(failed_at)
        if flushed >= 0:
            self._complete(flushed, in_reactor=True)
        if self._unsent:
            with self._lock:
                if self._helper is helper and self._unsent:
                    self._unsent = not helper.send_target(self._asked)

    def _complete(self, flushed: int, *, in_reactor: bool) -> None:
        ts = 0
        targets = self._targets
        while targets and targets[0][0] <= flushed:
            ts = targets.popleft()[1] or ts
        self._queue.mark_flushed(flushed, ts)
        self._answer_upto(flushed, PutMessageStatus.PUT_OK, in_reactor)
        if not in_reactor:
            self._dispatch()
        elif not self._dispatch_scheduled:
            # After this pass's writes are sent (the server's flush call was scheduled by the
            # release, earlier): the consume-queue dispatch need not delay the answers.
            self._dispatch_scheduled = True
            self._reactor.callLater(0, self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        try:
            self._on_flushed(self._queue.flushed_where)
        except Exception:
            log.exception("after-flush hook failed")

    def _fail_upto(self, offset: int) -> None:
        self._answer_upto(offset, PutMessageStatus.FLUSH_DISK_TIMEOUT, True)

    def _answer_upto(self, offset: int, status: PutMessageStatus, in_reactor: bool) -> None:
        """Answer ``status`` to every request whose record ends at or below ``offset``."""
        requests = self._requests
        listened: list[tuple[GroupCommitRequest, PutMessageStatus]] = []
        while requests and requests[0].next_offset <= offset:
            requests.popleft().answer(status, listened)
        if listened:
            self._tell(listened, in_reactor)

    def _tell(self, done: list[tuple[GroupCommitRequest, PutMessageStatus]], in_reactor: bool) -> None:
        try:
            if in_reactor:
                self._listener(done)
            else:
                self._reactor.callFromThread(self._listener, done)
        except Exception:
            log.exception("flush listener failed")

    def _helper_lost(self, helper: FlushHelper) -> None:
        with self._lock:
            if helper is not self._helper:
                return  # already replaced, or stopping
            reader, self._helper, self._reader = self._reader, None, None
            self._detach(reader, helper, 1.0)
            if self._stopped.is_set():
                return
            code = helper.process.returncode
            if time.monotonic() - helper.started < _MIN_LIFE_S:
                log.critical("flush helper %d exited (%s) %.1f s after its start: SYNC_FLUSH goes back to "
                             "the in-process flush thread", helper.pid, code, time.monotonic() - helper.started)
                self._go_in_process()
                return
            log.error("flush helper %d exited (%s): starting another", helper.pid, code)
            try:
                self._spawn()
            except OSError as e:
                log.critical("no new flush helper (%s): SYNC_FLUSH goes back to the in-process flush thread", e)
                self._go_in_process()

    def _go_in_process(self) -> None:
        fallback = self._make_fallback()
        fallback.start()
        self._fallback = fallback
        requests, self._requests = self._requests, collections.deque()
        self._targets.clear()
        for req in requests:
            fallback.put_request(req)
        fallback.wakeup()
