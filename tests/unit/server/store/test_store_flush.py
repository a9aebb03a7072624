"""Flush modes: periodic ASYNC_FLUSH, SYNC_FLUSH group commit, FLUSH_DISK_TIMEOUT, dispatch gating."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time

import pytest
from store_helpers import make_msg, small_config

from rmqwire.server.store import FlushDiskType, PutMessageStatus


class GatedSync:
    """``fdatasync`` that counts commit-log flushes and can hold them until released."""

    def __init__(self) -> None:
        self.commit_log_calls = 0
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()

    def hold(self) -> None:
        self.entered.clear()
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def __call__(self, fd: int) -> None:
        if "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):
            with self._lock:
                self.commit_log_calls += 1
            self.entered.set()
            if not self.gate.wait(30):
                raise OSError("test gate never released")
        os.fdatasync(fd)


def wait_until(pred, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


@pytest.fixture
def gated():
    g = GatedSync()
    yield g
    g.release()


def sync_store(store_factory, tmp_path, gated, **cfg):
    config = small_config(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH, **cfg)
    return store_factory(config, sync=gated)


def test_async_flush_is_periodic_and_the_put_does_not_wait(store_factory, tmp_path, gated):
    config = small_config(tmp_path / "store", flush_interval_commit_log=20, flush_commit_log_least_pages=1)
    store = store_factory(config, sync=gated)
    gated.hold()  # the flush thread may block: puts must still complete at once
    futures = [store.async_put_message(make_msg(body=b"a" * 2000)) for _ in range(5)]
    assert all(f.done() and f.result().status is PutMessageStatus.PUT_OK for f in futures)
    assert store.get_max_offset_in_queue("TopicTest", 0) == 5  # dispatched without waiting for disk
    gated.release()
    mfq = store.commit_log.mapped_file_queue
    wait_until(lambda: mfq.flushed_where >= 8192)  # at least the full pages, by the flush thread
    assert gated.commit_log_calls >= 1


def test_sync_flush_put_returns_after_its_flush(store_factory, tmp_path, gated):
    store = sync_store(store_factory, tmp_path, gated)
    r = store.put_message(make_msg(body=b"durable"))
    assert r.status is PutMessageStatus.PUT_OK
    end = r.commit_log_offset + r.append_result.wrote_bytes
    assert store.commit_log.flushed_where >= end
    assert gated.commit_log_calls >= 1


def test_group_commit_one_flush_serves_many_waiters(store_factory, tmp_path, gated):
    store = sync_store(store_factory, tmp_path, gated)
    gated.hold()
    first = store.async_put_message(make_msg(body=b"first"))
    assert gated.entered.wait(10)  # the flush thread is inside fdatasync for the first record
    calls_before = gated.commit_log_calls
    results: list[concurrent.futures.Future] = []
    writers = [threading.Thread(target=lambda: results.extend(
        store.async_put_message(make_msg(body=b"w" * 50)) for _ in range(10))) for _ in range(5)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert len(results) == 50 and not any(f.done() for f in results) and not first.done()
    gated.release()
    assert first.result(10).status is PutMessageStatus.PUT_OK
    statuses = [f.result(10).status for f in results]
    assert statuses == [PutMessageStatus.PUT_OK] * 50
    # all 50 waiters were covered by at most two more flushes (the batch, maybe one straggler)
    assert gated.commit_log_calls - calls_before <= 2
    assert store.get_max_offset_in_queue("TopicTest", 0) == 51


def test_flush_disk_timeout_while_the_disk_hangs(store_factory, tmp_path, gated):
    store = sync_store(store_factory, tmp_path, gated, sync_flush_timeout=200)
    gated.hold()
    f = store.async_put_message(make_msg(body=b"slow disk"))
    r = f.result(20)  # completed by the watcher while fdatasync is still stuck
    assert not gated.gate.is_set()
    assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert r.is_ok and r.append_result is not None  # appended, only its durability is unknown
    assert store.get_max_offset_in_queue("TopicTest", 0) == 0  # not dispatched before the flush
    gated.release()
    wait_until(lambda: store.get_max_offset_in_queue("TopicTest", 0) == 1)


def test_sync_flush_without_wait_returns_at_once(store_factory, tmp_path, gated):
    store = sync_store(store_factory, tmp_path, gated)
    gated.hold()
    f = store.async_put_message(make_msg(props={"WAIT": "false"}))
    assert f.done() and f.result().status is PutMessageStatus.PUT_OK
    gated.release()
    wait_until(lambda: store.get_max_offset_in_queue("TopicTest", 0) == 1)


def test_sync_flush_dispatches_only_flushed_records(store_factory, tmp_path, gated):
    store = sync_store(store_factory, tmp_path, gated)
    arrivals = []
    store.add_arrival_listener(lambda req: arrivals.append(threading.current_thread().name))
    gated.hold()
    f = store.async_put_message(make_msg())
    assert gated.entered.wait(10)
    assert store.get_max_offset_in_queue("TopicTest", 0) == 0 and arrivals == []
    gated.release()
    assert f.result(10).is_ok
    wait_until(lambda: arrivals == ["GroupCommitService"])


def test_shutdown_flushes_and_dispatches_everything(store_factory, tmp_path, gated):
    store = sync_store(store_factory, tmp_path, gated)
    for _ in range(3):
        store.async_put_message(make_msg(props={"WAIT": "false"}))
    store.shutdown()
    assert not (tmp_path / "store" / "abort").exists()
    reopened = store_factory(sync_store_config := small_config(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH))
    assert sync_store_config.is_sync_flush
    assert reopened.get_max_offset_in_queue("TopicTest", 0) == 3
    assert not reopened.recovery_report.abnormal


class DurableSync:
    """Real ``fdatasync`` that records what it made durable: the commit-log bytes written before
    each call (the file's write position at entry, as a commit-log offset) count once it returns."""

    def __init__(self) -> None:
        self.store = None
        self.durable = 0
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        covered = None
        if "/commitlog/" in path and self.store is not None:
            for f in self.store.commit_log.mapped_file_queue.files:
                if os.path.samefile(f.path, path):
                    covered = f.file_from_offset + f.wrote_position
        os.fdatasync(fd)
        if covered is not None:
            with self._lock:
                self.durable = max(self.durable, covered)


def test_listened_writers_are_released_only_after_their_bytes_are_fdatasynced(store_factory, tmp_path):
    """Under a steady stream of listened appends (over several commit-log files), every writer a
    round releases ends below what an fdatasync that already returned covered, and a record
    reaches the dispatchers (consume queue, long polling: a consumer) only once durable too."""
    durable = DurableSync()
    config = small_config(tmp_path / "store", flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = store_factory(config, sync=durable)
    durable.store = store
    bad: list[str] = []
    released: list[int] = []
    n = 400

    def on_arrival(req) -> None:
        if req.commit_log_offset + req.msg_size > durable.durable:
            bad.append(f"record at {req.commit_log_offset} dispatched before its fdatasync")

    def listener(done) -> None:
        for req, status in done:
            if req.next_offset > durable.durable:
                bad.append(f"writer up to {req.next_offset} released, durable {durable.durable}")
            if status is PutMessageStatus.PUT_OK:
                released.append(req.next_offset)

    store.add_arrival_listener(on_arrival)
    store.set_flush_listener(listener)

    def write() -> None:
        for i in range(n):
            store.put_listened(make_msg(body=b"d" * 600, queue_id=i % 4)).token = i

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(30)
    wait_until(lambda: len(released) == n)
    assert store.max_phy_offset > 2 * config.mapped_file_size_commit_log  # crossed files
    wait_until(lambda: sum(store.get_max_offset_in_queue("TopicTest", q) for q in range(4)) == n)
    assert bad == []


def test_listened_message_invisible_to_a_consumer_until_flushed_and_dispatched(store_factory, tmp_path, gated):
    """A listened put whose fdatasync is held: not released, not in its consume queue, not
    returned by a pull; once the flush returns, released, then dispatched and pulled."""
    store = sync_store(store_factory, tmp_path, gated)
    done: list = []
    store.set_flush_listener(done.extend)
    gated.hold()
    req = store.put_listened(make_msg(body=b"held in the page cache"))
    assert gated.entered.wait(10)  # the round is inside its fdatasync
    assert done == []
    assert store.get_max_offset_in_queue("TopicTest", 0) == 0
    assert store.get_message("g", "TopicTest", 0, 0, 32).message_count == 0
    gated.release()
    wait_until(lambda: done == [(req, PutMessageStatus.PUT_OK)])
    assert store.commit_log.flushed_where >= req.next_offset
    wait_until(lambda: store.get_max_offset_in_queue("TopicTest", 0) == 1)
    assert store.get_message("g", "TopicTest", 0, 0, 32).message_count == 1
