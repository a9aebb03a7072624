"""Recovery: clean restarts, torn tails, lost consume queues, the checkpoint, and a killed process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from store_helpers import make_msg, small_config

from rmqwire.codec.message import decode_messages
from rmqwire.server.store import FlushDiskType, GetMessageStatus, StoreLoadError
from rmqwire.server.store.config import file_name


def read_queue(store, topic="TopicTest", queue_id=0):
    out, offset = [], 0
    while True:
        res = store.get_message("g", topic, queue_id, offset, 32)
        if res.status is not GetMessageStatus.FOUND:
            assert res.status in (GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.NO_MESSAGE_IN_QUEUE), res.status
            return out
        out.extend(decode_messages(res.body, check_crc=True))
        offset = res.next_begin_offset


def cq_bytes(root: Path) -> dict[str, bytes]:
    base = root / "consumequeue"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def test_clean_restart_takes_the_normal_path(store_factory, tmp_path):
    store = store_factory()
    for i in range(30):
        store.put_message(make_msg(queue_id=i % 3, body=f"{i}".encode()))
    end = store.max_phy_offset
    store.shutdown()
    assert not (tmp_path / "store" / "abort").exists()
    store = store_factory()
    report = store.recovery_report
    assert not report.abnormal and not report.torn_tail and report.process_offset == end
    assert report.records_dispatched == 0
    assert [store.get_max_offset_in_queue("TopicTest", q) for q in range(3)] == [10, 10, 10]
    r = store.put_message(make_msg(queue_id=1))
    assert r.commit_log_offset == end and r.queue_offset == 10
    assert (tmp_path / "store" / "abort").read_text() == str(os.getpid())


def corrupt_last_record(root: Path, record_offset: int, size: int, file_size: int) -> None:
    seg = root / "commitlog" / file_name(record_offset - record_offset % file_size)
    with open(seg, "r+b") as f:  # test set-up only: simulate a half-written record
        pos = record_offset % file_size
        f.seek(pos + size // 2)
        f.write(bytes(size - size // 2))


def test_torn_tail_after_a_crash_is_cut_off(store_factory, tmp_path):
    root = tmp_path / "store"
    store = store_factory()
    results = [store.put_message(make_msg(body=f"body-{i}".encode() * 20)) for i in range(10)]
    store.abandon()  # as if killed: abort file stays
    last = results[-1]
    corrupt_last_record(root, last.commit_log_offset, last.append_result.wrote_bytes, 64 * 1024)
    store = store_factory()
    report = store.recovery_report
    assert report.abnormal and report.torn_tail
    assert report.process_offset == last.commit_log_offset
    assert store.max_phy_offset == last.commit_log_offset
    assert [m.body for m in read_queue(store)] == [f"body-{i}".encode() * 20 for i in range(9)]
    r = store.put_message(make_msg(body=b"after"))
    assert (r.commit_log_offset, r.queue_offset) == (last.commit_log_offset, 9)
    store.shutdown()
    store = store_factory()
    assert not store.recovery_report.torn_tail
    assert [m.body for m in read_queue(store)][-2:] == [b"body-8" * 20, b"after"]


def test_torn_tail_on_the_normal_path_truncates_the_consume_queue(store_factory, tmp_path):
    root = tmp_path / "store"
    store = store_factory()
    results = [store.put_message(make_msg(body=b"z" * 300)) for _ in range(5)]
    store.shutdown()
    last = results[-1]
    corrupt_last_record(root, last.commit_log_offset, last.append_result.wrote_bytes, 64 * 1024)
    store = store_factory()
    report = store.recovery_report
    assert not report.abnormal and report.torn_tail
    assert report.max_phy_offset_of_consume_queue > report.process_offset
    assert store.get_max_offset_in_queue("TopicTest", 0) == 4
    assert len(read_queue(store)) == 4
    assert store.put_message(make_msg()).queue_offset == 4


def test_consume_queues_are_rebuilt_from_the_commit_log(store_factory, tmp_path):
    root = tmp_path / "store"
    store = store_factory()
    for i in range(130):
        store.put_message(make_msg(queue_id=i % 2, tags=f"T{i % 5}", topic=f"Topic{i % 3}"))
    store.shutdown()
    before = cq_bytes(root)
    shutil.rmtree(root / "consumequeue")
    store = store_factory()
    assert store.recovery_report.records_dispatched == 130
    store.shutdown()
    assert cq_bytes(root) == before


def test_abnormal_recovery_rebuilds_lost_entries_from_the_checkpoint_file(store_factory, tmp_path):
    root = tmp_path / "store"
    clock = {"now": 1000}
    config = small_config(root, mapped_file_size_commit_log=4096)
    store = store_factory(config, now_ms=lambda: clock["now"])

    def fill_until_file(n: int) -> None:
        while store.max_phy_offset < n * 4096:
            assert store.put_message(make_msg(body=b"p" * 600)).is_ok

    fill_until_file(3)  # files 0-2, the last record of phase 1 opens file 3
    clock["now"] = 50_000
    fill_until_file(5)
    store.flush()
    store.flush_consume_queues(0)  # checkpoint: physic = logics = 50 000, so min_timestamp 47 000
    assert store.checkpoint.min_timestamp == 47_000
    clock["now"] = 60_000
    fill_until_file(7)
    total = store.get_max_offset_in_queue("TopicTest", 0)
    store.abandon()
    # lose the newest consume-queue entries, as an unflushed queue would after a power cut
    qfiles = sorted((root / "consumequeue" / "TopicTest" / "0").iterdir())
    data = bytearray(qfiles[-1].read_bytes())
    used = len(data.rstrip(b"\0"))
    data[used - 3 * 20 : used] = bytes(60)
    qfiles[-1].write_bytes(bytes(data))
    store = store_factory(config, now_ms=lambda: clock["now"])
    report = store.recovery_report
    assert report.abnormal and not report.torn_tail
    first_records = {}
    for f in store.commit_log.mapped_file_queue.files:
        first_records[f.file_name] = decode_messages(f.mm[: int.from_bytes(f.mm[:4], "big")])[0].store_timestamp
    expected_start = max(n for n, ts in first_records.items() if ts <= 47_000)
    assert report.start_file == expected_start != file_name(0)
    assert store.get_max_offset_in_queue("TopicTest", 0) == total
    msgs = read_queue(store)
    assert [m.queue_offset for m in msgs] == list(range(total))


def test_directory_lock_and_size_checks(store_factory, tmp_path):
    store = store_factory()
    store.put_message(make_msg())
    with pytest.raises(StoreLoadError, match="locked"):
        store_factory()
    store.shutdown()
    with pytest.raises(StoreLoadError, match="65536 bytes, not the configured 131072"):
        store_factory(small_config(tmp_path / "store", mapped_file_size_commit_log=128 * 1024))
    store_factory()  # the failed attempt released the lock


# ---- a process killed with SIGKILL while appending ------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from rmqwire.codec.message import MessageExt
    from rmqwire.server.store import DefaultMessageStore, FlushDiskType, MessageStoreConfig

    root, mode = sys.argv[1], sys.argv[2]
    cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024,
                             mapped_file_size_consume_queue=1000, flush_disk_type=FlushDiskType[mode],
                             max_hash_slot_num=100, max_index_num=400)  # as small_config
    store = DefaultMessageStore(cfg)
    store.load()
    store.start()
    start = store.get_max_offset_in_queue("Kill", 0)
    out = sys.stdout
    i = start
    while True:
        body = (f"record-{i}-".encode() * 40)[: 200 + i % 300]
        r = store.put_message(MessageExt(topic="Kill", body=body, queue_id=0, properties={"i": str(i)},
                                         born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2)))
        if r.status.name != "PUT_OK":
            out.write(f"ERR {r.status.name}\\n")
            out.flush()
            break
        out.write(f"{i}\\n")
        out.flush()
        i += 1
    """
)


def run_and_kill(root: Path, mode: str, acks_wanted: int) -> list[int]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), mode], stdout=subprocess.PIPE, env=env)
    acked: list[int] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while len(acked) < acks_wanted:
            line = proc.stdout.readline()
            assert line, f"child exited early with {proc.poll()}"
            assert not line.startswith(b"ERR"), line
            acked.append(int(line))
            assert time.monotonic() < deadline, "child too slow"
        proc.send_signal(signal.SIGKILL)  # mid-append loop: it keeps writing until the signal lands
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    return acked


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_every_acknowledged_record_survives_sigkill(store_factory, tmp_path, mode):
    root = tmp_path / "store"
    acked: list[int] = []
    for cycle in range(3):
        acked += run_and_kill(root, mode, 150)
        assert (root / "abort").exists()
        store = store_factory(small_config(root, mapped_file_size_consume_queue=1000,
                                           flush_disk_type=FlushDiskType[mode]))
        report = store.recovery_report
        assert report.abnormal
        msgs = read_queue(store, "Kill", 0)
        indices = [int(m.properties["i"]) for m in msgs]
        assert indices == list(range(len(indices))), f"cycle {cycle}: gaps or duplicates"
        assert set(acked) <= set(indices)
        for m in msgs:  # intact: CRC checked by read_queue, content checked here
            i = int(m.properties["i"])
            assert m.body == (f"record-{i}-".encode() * 40)[: 200 + i % 300]
            assert m.queue_offset == i
        store.shutdown()



def test_rebuilt_queue_starts_mid_file_after_retention(store_factory, tmp_path):
    """The consume queue's first file then begins with (0, Integer.MAX_VALUE, 0) blanks."""
    root = tmp_path / "store"
    config = small_config(root, mapped_file_size_commit_log=4096)
    store = store_factory(config)
    for i in range(70):
        store.put_message(make_msg(body=b"e" * 500, props={"i": str(i)}))
    assert store.commit_log.mapped_file_queue.delete_expired_by_time(0, 10**15, True, 3) == 3
    first_left = decode_messages(store.select_one_message_by_offset(store.min_phy_offset))[0].queue_offset
    store.shutdown()
    shutil.rmtree(root / "consumequeue")
    store = store_factory(config)
    assert store.get_min_offset_in_queue("TopicTest", 0) == first_left > 0
    qfile = root / "consumequeue" / "TopicTest" / "0" / file_name(first_left // 50 * 1000)
    data = qfile.read_bytes()
    blanks = first_left % 50
    assert data[: blanks * 20] == (b"\0" * 8 + b"\x7f\xff\xff\xff" + b"\0" * 8) * blanks
    res = store.get_message("g", "TopicTest", 0, 0, 32)
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, first_left)
    msgs = read_queue_from(store, first_left)
    assert [int(m.properties["i"]) for m in msgs] == list(range(first_left, 70))
    store.shutdown()
    store = store_factory(config)  # the min offset is found again from the commit log's start
    assert store.get_min_offset_in_queue("TopicTest", 0) == first_left


def read_queue_from(store, offset):
    out = []
    while True:
        res = store.get_message("g", "TopicTest", 0, offset, 32)
        if res.status is not GetMessageStatus.FOUND:
            return out
        out.extend(decode_messages(res.body, check_crc=True))
        offset = res.next_begin_offset


def test_shutdown_leaves_no_threads_and_delete_topics(store_factory):
    import threading

    store = store_factory()
    store.put_message(make_msg(topic="Gone"))
    store.put_message(make_msg(topic="Kept"))
    assert store.delete_topics(["Gone", "Nope"]) == 1
    assert store.topics() == ["Kept"]
    assert store.get_max_offset_in_queue("Gone", 0) == 0
    assert store.put_message(make_msg(topic="Gone")).queue_offset == 0  # a topic recreated starts over
    store.shutdown()
    names = {t.name for t in threading.enumerate()}
    assert not names & {"GroupCommitService", "FlushRealTimeService", "FlushDiskWatcher", "StoreScheduler"}
