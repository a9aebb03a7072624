"""SYNC_FLUSH through the flush helper process, completed on a reactor (``flush_helper``)."""

from __future__ import annotations

import os
import queue
import select
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from store_helpers import make_msg, small_config

from rmqwire.server.store import FlushDiskType, PutMessageStatus, flush_helper
from rmqwire.server.store.flush import GroupCommitService
from rmqwire.server.store.flush_helper import HelperGroupCommitService


class SelectReactor:
    """Just enough of a Twisted reactor, run by the test's own thread (its reactor thread)."""

    def __init__(self) -> None:
        self.readers: set[Any] = set()
        self.calls: queue.Queue[tuple[Any, tuple[Any, ...]]] = queue.Queue()
        self.later: list[tuple[Any, tuple[Any, ...]]] = []
        self.thread = threading.get_ident()

    def addReader(self, reader: Any) -> None:  # noqa: N802
        assert threading.get_ident() == self.thread
        self.readers.add(reader)

    def removeReader(self, reader: Any) -> None:  # noqa: N802
        assert threading.get_ident() == self.thread
        self.readers.discard(reader)

    def callFromThread(self, f: Any, *args: Any) -> None:  # noqa: N802
        self.calls.put((f, args))

    def callLater(self, delay: float, f: Any, *args: Any) -> None:  # noqa: N802
        assert threading.get_ident() == self.thread and delay == 0
        self.later.append((f, args))

    def iterate(self, timeout: float = 0.02, *, reads_only: bool = False) -> None:
        """One pass: calls from threads, zero-delay calls, then the readable readers (only
        those with ``reads_only``: what was scheduled waits)."""
        while not reads_only:
            try:
                f, args = self.calls.get_nowait()
            except queue.Empty:
                break
            f(*args)
        if not reads_only:
            later, self.later = self.later, []
            for f, args in later:
                f(*args)
        readers = {r.fileno(): r for r in self.readers if r.fileno() >= 0}
        if not readers:
            time.sleep(timeout)
            return
        ready, _, _ = select.select(list(readers), [], [], 0 if self.later and not reads_only else timeout)
        for fd in ready:
            readers[fd].doRead()

    def run_until(self, pred: Any, timeout: float = 20.0, *, reads_only: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached")
            self.iterate(reads_only=reads_only)


def helper_store(store_factory: Any, tmp_path: Path, **cfg: Any) -> tuple[Any, SelectReactor, list[Any]]:
    """A SYNC_FLUSH store whose listener records (request, status, flushed offset, thread)."""
    config = small_config(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH, **cfg)
    store = store_factory(config, start=False)
    reactor = SelectReactor()
    done: list[Any] = []

    def listener(completed: list[Any]) -> None:
        for req, status in completed:
            done.append((req, status, store.commit_log.flushed_where, threading.get_ident()))

    store.set_flush_listener(listener, reactor=reactor)
    store.start()
    assert isinstance(store._group_commit, HelperGroupCommitService)
    return store, reactor, done


def test_helper_releases_writers_after_its_flush_on_the_reactor(store_factory, tmp_path):
    """Listened puts across several commit-log files: each answered PUT_OK once, on the reactor
    thread, with the flushed offset past its record; dispatched to the consume queues."""
    store, reactor, done = helper_store(store_factory, tmp_path)
    reqs = []
    for i in range(300):  # 600-byte bodies, 64 KiB files: the helper is handed new files
        reqs.append(store.put_listened(make_msg(body=b"d" * 600, queue_id=i % 4)))
        if i % 7 == 0:
            reactor.iterate(0)
    reactor.run_until(lambda: len(done) == len(reqs))
    assert [d[0] for d in done] == reqs
    assert all(status is PutMessageStatus.PUT_OK for _r, status, _f, _t in done)
    assert all(flushed >= req.next_offset for req, _s, flushed, _t in done)
    assert {t for *_x, t in done} == {reactor.thread}
    assert store.commit_log.mapped_file_queue.files[-1].file_from_offset > 2 * 64 * 1024
    reactor.run_until(lambda: sum(store.get_max_offset_in_queue("TopicTest", q) for q in range(4)) == 300)
    files = store.commit_log.mapped_file_queue.files
    assert all(f.flushed_position == f.file_size for f in files[:-1])


def test_an_answer_releases_only_the_writers_it_covers(store_factory, tmp_path):
    """The helper answers the target it was sent; a writer that came after that target waits for
    its own (one target per reactor pass, sent after it)."""
    store, reactor, done = helper_store(store_factory, tmp_path)
    service = store._group_commit
    reactor.run_until(lambda: service._reader in reactor.readers)
    pid = service.helper_pid
    os.kill(pid, signal.SIGSTOP)
    try:
        covered = store.put_listened(make_msg(body=b"a" * 3000))
        assert reactor.later  # the target goes after the pass ...
        reactor.iterate(0)  # ... here, to the frozen helper
        late = store.put_listened(make_msg(body=b"b" * 3000))  # its target not sent yet
    finally:
        os.kill(pid, signal.SIGCONT)
    reactor.run_until(lambda: done, reads_only=True)
    assert [(r, s) for r, s, _f, _t in done] == [(covered, PutMessageStatus.PUT_OK)]
    assert covered.next_offset <= done[0][2] < late.next_offset
    reactor.run_until(lambda: len(done) == 2)
    assert done[1][:2] == (late, PutMessageStatus.PUT_OK) and done[1][2] >= late.next_offset


def test_the_target_waits_while_the_reactor_has_io_ready(store_factory, tmp_path, monkeypatch):
    """With Twisted's epoll reactor the target goes once the reactor has no ready I/O left (the
    puts of its next passes join the flush), or after a bound."""
    ready_r, ready_w = os.pipe()  # stands for the reactor's epoll descriptor: readable = I/O ready

    class Poller:
        def fileno(self) -> int:
            return ready_r

    monkeypatch.setattr(SelectReactor, "_poller", Poller(), raising=False)
    monkeypatch.setattr(flush_helper, "_IDLE_WAIT_S", 60.0)
    try:
        store, reactor, done = helper_store(store_factory, tmp_path)
        reactor.run_until(lambda: store._group_commit._reader in reactor.readers)
        os.write(ready_w, b"x")
        first = store.put_listened(make_msg(body=b"1"))
        for _ in range(5):  # passes while I/O is ready: the target is held, so nothing is flushed
            reactor.iterate(0)
            assert done == [] and reactor.later
        second = store.put_listened(make_msg(body=b"2"))  # a later pass's put joins
        os.read(ready_r, 1)
        reactor.run_until(lambda: len(done) == 2)
        assert [(r, s) for r, s, _f, _t in done] == [(first, PutMessageStatus.PUT_OK),
                                                     (second, PutMessageStatus.PUT_OK)]
        assert done[0][2] == done[1][2] >= second.next_offset  # one answer for both
        monkeypatch.setattr(flush_helper, "_IDLE_WAIT_S", 0.0)  # the bound: sent though I/O is ready
        os.write(ready_w, b"x")
        third = store.put_listened(make_msg(body=b"3"))
        reactor.run_until(lambda: len(done) == 3)
        assert done[2][:2] == (third, PutMessageStatus.PUT_OK)
    finally:
        os.close(ready_r)
        os.close(ready_w)


def test_future_puts_from_other_threads_complete_from_the_helper(store_factory, tmp_path):
    store, reactor, _done = helper_store(store_factory, tmp_path)
    futures = []
    writer = threading.Thread(target=lambda: futures.extend(
        store.async_put_message(make_msg(body=b"f" * 100)) for _ in range(20)))
    writer.start()
    writer.join(30)
    reactor.run_until(lambda: all(f.done() for f in futures))
    assert [f.result().status for f in futures] == [PutMessageStatus.PUT_OK] * 20
    assert store.commit_log.flushed_where == store.commit_log.max_offset


def test_a_stopped_helper_never_lets_a_writer_through_unflushed(store_factory, tmp_path):
    """The helper frozen (SIGSTOP): the writer gets FLUSH_DISK_TIMEOUT after syncFlushTimeout,
    never PUT_OK; once it runs again, later writers are answered PUT_OK."""
    store, reactor, done = helper_store(store_factory, tmp_path, sync_flush_timeout=300)
    service = store._group_commit
    pid = service.helper_pid
    os.kill(pid, signal.SIGSTOP)
    try:
        first = store.put_listened(make_msg(body=b"waits"))
        reactor.run_until(lambda: done)
        assert [(r, s) for r, s, _f, _t in done] == [(first, PutMessageStatus.FLUSH_DISK_TIMEOUT)]
    finally:
        os.kill(pid, signal.SIGCONT)
    second = store.put_listened(make_msg(body=b"after"))
    reactor.run_until(lambda: any(r is second for r, *_x in done))
    assert [(r, s) for r, s, _f, _t in done] == [
        (first, PutMessageStatus.FLUSH_DISK_TIMEOUT), (second, PutMessageStatus.PUT_OK)]
    assert done[1][2] >= second.next_offset


def test_a_killed_helper_is_replaced_and_its_writers_answered(store_factory, tmp_path, monkeypatch):
    store, reactor, done = helper_store(store_factory, tmp_path)
    service = store._group_commit
    monkeypatch.setattr(flush_helper, "_MIN_LIFE_S", 0.0)  # replaced even right after its start
    reactor.run_until(lambda: service._reader in reactor.readers)
    old = service.helper_pid
    os.kill(old, signal.SIGSTOP)  # the put's target reaches a helper that then dies unanswered
    req = store.put_listened(make_msg(body=b"x" * 5000))
    reactor.iterate(0)
    os.kill(old, signal.SIGKILL)
    os.kill(old, signal.SIGCONT)
    reactor.run_until(lambda: done)
    assert service.helper_pid not in (None, old)
    assert [(r, s) for r, s, _f, _t in done] == [(req, PutMessageStatus.PUT_OK)]
    assert done[0][2] >= req.next_offset
    with pytest.raises(ProcessLookupError):
        os.kill(old, 0)  # reaped, not a zombie


def test_a_helper_that_cannot_start_falls_back_to_the_flush_thread(store_factory, tmp_path, monkeypatch):
    """A helper dying at once (here: no script) is not restarted in a loop: the in-process
    group commit takes over, with the writers already waiting."""
    monkeypatch.setattr(flush_helper, "_CHILD", str(tmp_path / "missing.py"))
    store, reactor, done = helper_store(store_factory, tmp_path)
    req = store.put_listened(make_msg(body=b"y"))
    reactor.run_until(lambda: done)
    assert isinstance(store._group_commit._fallback, GroupCommitService)
    assert [(r, s) for r, s, _f, _t in done] == [(req, PutMessageStatus.PUT_OK)]
    assert done[0][2] >= req.next_offset
    later = store.put_listened(make_msg(body=b"z"))
    reactor.run_until(lambda: len(done) == 2)
    assert done[1][:2] == (later, PutMessageStatus.PUT_OK)


def test_shutdown_ends_the_helper_and_answers_waiting_writers(store_factory, tmp_path):
    store, reactor, done = helper_store(store_factory, tmp_path)
    pid = store._group_commit.helper_pid
    req = store.put_listened(make_msg(body=b"last"))  # nobody reads the helper: no reactor pass
    store.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    reactor.iterate(0)  # the completion hops to the reactor as the flush thread's did
    assert [(r, s) for r, s, _f, _t in done] == [(req, PutMessageStatus.PUT_OK)]
    assert done[0][2] >= req.next_offset


def test_an_injected_sync_keeps_the_flush_thread(store_factory, tmp_path):
    config = small_config(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = store_factory(config, start=False, sync=lambda fd: os.fdatasync(fd))
    store.set_flush_listener(lambda done: None, reactor=SelectReactor())
    store.start()
    assert isinstance(store._group_commit, GroupCommitService)


@pytest.mark.skipif(not os.access("/proc/kpageflags", os.R_OK), reason="reading page flags needs root")
def test_helper_fdatasync_cleans_pages_dirtied_through_the_brokers_mapping(store_factory, tmp_path):
    """What the design rests on: pages written through this process's shared mapping are
    written back by the helper's fdatasync on its own descriptor (PG_dirty cleared)."""
    import ctypes
    import struct

    store, reactor, done = helper_store(store_factory, tmp_path)
    # The service learns its reactor thread on the reactor's first pass; from then on a put on
    # that thread hands its target to the helper only after the pass (in run_until below). Before
    # it, the put hands it over at once, and the helper's fdatasync could clean the pages before
    # they are checked (seen once on a loaded machine).
    reactor.iterate(0)
    req = store.put_listened(make_msg(body=b"p" * 20000))  # several pages
    f = store.commit_log.mapped_file_queue.files[0]
    view = (ctypes.c_char * f.file_size).from_buffer(f.mm)
    try:
        base = ctypes.addressof(view)

        def dirty(offset: int) -> bool:
            with open("/proc/self/pagemap", "rb") as pm:
                pm.seek((base + offset) // 4096 * 8)
                (entry,) = struct.unpack("<Q", pm.read(8))
            pfn = entry & ((1 << 55) - 1)
            assert entry >> 63 and pfn
            with open("/proc/kpageflags", "rb") as kf:
                kf.seek(pfn * 8)
                (flags,) = struct.unpack("<Q", kf.read(8))
            return bool(flags >> 4 & 1)  # KPF_DIRTY

        pages = range(0, req.next_offset, 4096)
        for p in pages:
            if not dirty(p):
                # the kernel's own writeback got there first (a busy machine): dirty the page
                # again with the bytes it holds, so the helper's flush has it to clean
                f.mm[p:p + 1] = f.mm[p:p + 1]
        assert all(dirty(p) for p in pages)
        reactor.run_until(lambda: done)
        assert done[0][:2] == (req, PutMessageStatus.PUT_OK)
        assert not any(dirty(p) for p in pages)
    finally:
        del view
