"""The store's IndexFile / IndexService: Java's layout byte for byte, building from the dispatcher,
queries by key and time range, files rolling over, the checkpoint's index time, restarts and
crash recovery, retention."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import StoreFactory, make_msg, small_config

from rmqwire.codec.java import java_string_hash
from rmqwire.codec.message import MessageSysFlag, decode_messages
from rmqwire.server.store import MessageStoreConfig, StoreLoadError
from rmqwire.server.store.index_file import IndexFile, index_key_hash
from rmqwire.server.store.index_service import index_file_name

T0 = 1_700_000_000_000
HEADER = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")


class FakeClock:
    def __init__(self, t: int = T0) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def _wait(probe, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _index_files(root: Path) -> list[Path]:
    return sorted((root / "index").iterdir())


def test_key_hash_is_javas_abs_string_hash() -> None:
    assert index_key_hash("hello") == 99162322  # "hello".hashCode()
    assert index_key_hash("TopicTest#k1") == abs(java_string_hash("TopicTest#k1"))
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0  # Math.abs overflows: Java keeps 0
    for key in ("T#\u00e9t\u00e9", "T#\U0001f600", "T#k" * 50):
        assert index_key_hash(key) == abs(java_string_hash(key))


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300) | st.text(st.characters(max_codepoint=127), max_size=300))
def test_key_hash_fast_path_equals_javas_loop(key: str) -> None:
    """The ASCII fast path (a dot product with powers of 31) against the UTF-16 loop, across the
    length where the fast path hands over (256)."""
    h = java_string_hash(key)
    assert index_key_hash(key) == (0 if h == -(2**31) else abs(h))


def test_file_name_is_local_time_to_the_millisecond() -> None:
    name = index_file_name(T0 + 7)
    assert len(name) == 17 and name.isdigit() and name.endswith("007")
    assert name == time.strftime("%Y%m%d%H%M%S", time.localtime(T0 / 1000)) + "007"


def test_layout_of_one_file(tmp_path: Path) -> None:
    """Header, slots and entries where Java reads them; one slot makes every key chain."""
    f = IndexFile(tmp_path / "20240101000000000", 1, 10)
    assert (tmp_path / "20240101000000000").stat().st_size == 40 + 4 + 10 * 20
    assert f.put_key("T#a", 100, T0)
    assert f.put_key("T#b", 200, T0 + 2500)
    f.flush()
    raw = (tmp_path / "20240101000000000").read_bytes()
    assert HEADER.unpack_from(raw, 0) == (T0, T0 + 2500, 100, 200, 1, 3)
    assert struct.unpack_from(">i", raw, 40) == (2,)  # the slot holds the newest entry
    assert ENTRY.unpack_from(raw, 44 + 20) == (index_key_hash("T#a"), 100, 0, 0)
    assert ENTRY.unpack_from(raw, 44 + 40) == (index_key_hash("T#b"), 200, 2, 1)  # 2.5 s -> 2
    out: list[int] = []
    f.select_phy_offsets(out, "T#a", 10, 0, T0 + 10_000)
    assert out == [100]  # same slot, other hash: skipped
    f.close()
    again = IndexFile(tmp_path / "20240101000000000", 1, 10)
    again.load()
    assert (again.index_count, again.end_phy_offset, again.hash_slot_count) == (3, 200, 1)
    again.close(flush=False)


def test_full_file_refuses_and_wrong_size_is_refused(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "1", 4, 3)
    assert f.put_key("a", 1, T0) and f.put_key("b", 2, T0)
    assert f.is_write_full and not f.put_key("c", 3, T0)
    f.close()
    with pytest.raises(StoreLoadError):
        IndexFile(tmp_path / "1", 4, 5)


def test_dispatcher_indexes_uniq_key_and_each_key(store_factory: StoreFactory) -> None:
    clock = FakeClock()
    store = store_factory(now_ms=clock)
    r = store.put_message(make_msg(keys="k1  k2", props={"UNIQ_KEY": "U1"}))
    assert r.is_ok
    other = store.put_message(make_msg(topic="Other", keys="k1"))
    for key in ("U1", "k1", "k2"):
        q = store.query_message("TopicTest", key, 32, 0, T0 + 1000)
        assert [m.commit_log_offset for m in decode_messages(q.body)] == [r.commit_log_offset]
    assert store.query_message("TopicTest", "k3", 32, 0, T0 + 1000).message_buffers == []
    assert store.query_message("Other", "k1", 32, 0, T0 + 1000).index_last_update_phyoffset == \
        other.commit_log_offset
    (f,) = store.index_service.files
    assert f.index_count == 1 + 3 + 1  # entry 0 unused; U1, k1, k2; Other#k1 (empty key skipped)


def test_rolled_back_records_are_not_indexed(store_factory: StoreFactory) -> None:
    store = store_factory()
    rollback = int(MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
    assert store.put_message(make_msg(keys="gone", sys_flag=rollback)).is_ok
    assert store.put_message(make_msg(keys="kept")).is_ok
    now = int(time.time() * 1000)
    assert store.query_message("TopicTest", "gone", 32, 0, now + 60_000).message_buffers == []
    assert len(store.query_message("TopicTest", "kept", 32, 0, now + 60_000).message_buffers) == 1


def test_time_range_order_and_max_num(store_factory: StoreFactory) -> None:
    clock = FakeClock()
    store = store_factory(small_config(store_factory.root, max_msgs_num_batch=5), now_ms=clock)
    offsets = []
    for i in range(8):
        clock.t = T0 + i * 10_000
        offsets.append(store.put_message(make_msg(body=b"m%d" % i, keys="same")).commit_log_offset)
    q = store.query_message("TopicTest", "same", 32, T0 + 20_000, T0 + 50_000)
    assert [m.commit_log_offset for m in decode_messages(q.body)] == offsets[2:6]  # oldest first
    assert q.index_last_update_timestamp == T0 + 70_000
    assert q.index_last_update_phyoffset == offsets[-1]
    # at most maxMsgsNumBatch, the newest ones
    q = store.query_message("TopicTest", "same", 32, 0, T0 + 100_000)
    assert [m.commit_log_offset for m in decode_messages(q.body)] == offsets[3:]
    q = store.query_message("TopicTest", "same", 2, 0, T0 + 100_000)
    assert [m.commit_log_offset for m in decode_messages(q.body)] == offsets[6:]


def test_files_roll_over_and_the_full_one_sets_the_checkpoint(store_factory: StoreFactory) -> None:
    clock = FakeClock()
    cfg = small_config(store_factory.root, max_hash_slot_num=7, max_index_num=10)
    store = store_factory(cfg, now_ms=clock)
    offsets = []
    for i in range(12):  # 2 keys each: 9 per file (entry 0 unused) -> 3 files
        clock.t = T0 + i * 1000
        offsets.append(store.put_message(make_msg(keys=f"k{i} all")).commit_log_offset)
    files = store.index_service.files
    assert len(files) == 3 and len(_index_files(store_factory.root)) == 3
    assert files[1].begin_phy_offset == files[0].end_phy_offset
    _wait(lambda: store.checkpoint.index_msg_timestamp == files[1].end_timestamp, "the full files' flush")
    raw = store.checkpoint.path.read_bytes()
    assert struct.unpack_from(">q", raw, 16) == (files[1].end_timestamp,)
    q = store.query_message("TopicTest", "all", 32, 0, T0 + 100_000)
    assert [m.commit_log_offset for m in decode_messages(q.body)] == offsets  # across all files
    for i in (0, 5, 11):
        q = store.query_message("TopicTest", f"k{i}", 32, 0, T0 + 100_000)
        assert [m.commit_log_offset for m in decode_messages(q.body)] == [offsets[i]]


def test_clean_restart_keeps_the_index_without_duplicates(store_factory: StoreFactory) -> None:
    store = store_factory()
    sent = [store.put_message(make_msg(keys="k", props={"UNIQ_KEY": f"U{i}"})).commit_log_offset for i in range(5)]
    store.shutdown()
    store = store_factory()
    assert not store.recovery_report.abnormal
    sent.append(store.put_message(make_msg(keys="k")).commit_log_offset)
    q = store.query_message("TopicTest", "k", 32, 0, int(time.time() * 1000) + 60_000)
    assert [m.commit_log_offset for m in decode_messages(q.body)] == sent
    assert len(store.index_service.files) == 1


@pytest.mark.parametrize("index_safe", [False, True])
def test_crash_drops_newer_index_files_and_rebuilds_them(store_factory: StoreFactory, index_safe: bool) -> None:
    clock = FakeClock()
    cfg = small_config(store_factory.root, max_hash_slot_num=7, max_index_num=10, message_index_safe=index_safe)
    store = store_factory(cfg, now_ms=clock)
    offsets = []
    for i in range(12):
        clock.t = T0 + i * 1000
        offsets.append(store.put_message(make_msg(keys=f"k{i} all")).commit_log_offset)
    full_end = store.index_service.files[1].end_timestamp
    _wait(lambda: store.checkpoint.index_msg_timestamp == full_end, "the full files' flush")
    names = [p.name for p in _index_files(store_factory.root)]
    store.flush_consume_queues(0)  # the checkpoint's queue time: recovery starts near the end
    store.abandon()

    store = store_factory(cfg, now_ms=clock)
    assert store.recovery_report.abnormal
    kept = [f.file_name for f in store.index_service.files]
    assert kept[:2] == names[:2] and names[2] not in kept  # the file past the checkpoint is gone
    q = store.query_message("TopicTest", "all", 32, 0, T0 + 100_000)
    got = [m.commit_log_offset for m in decode_messages(q.body)]
    # As Java, the record at the kept files' end offset is indexed again (a crash may have cut
    # its keys half-way): it is found twice.
    boundary = store.index_service.files[1].end_phy_offset
    assert sorted(set(got)) == offsets and got.count(boundary) == 2 and len(got) == len(offsets) + 1


def test_disabled_index_builds_nothing(store_factory: StoreFactory) -> None:
    store = store_factory(small_config(store_factory.root, message_index_enable=False))
    assert store.put_message(make_msg(keys="k")).is_ok
    assert not (store_factory.root / "index").exists()
    assert store.query_message("TopicTest", "k", 32, 0, 2**62).message_buffers == []


def test_retention_deletes_index_files_below_the_commit_log(store_factory: StoreFactory) -> None:
    clock = FakeClock()
    cfg = small_config(store_factory.root, max_hash_slot_num=7, max_index_num=10)
    store = store_factory(cfg, now_ms=clock)
    for i in range(12):
        store.put_message(make_msg(keys=f"k{i} all"))
    files = list(store.index_service.files)
    store.index_service.delete_expired_file(files[1].end_phy_offset)  # older than file 1's end
    assert store.index_service.files == files[1:]
    store.index_service.delete_expired_file(2**62)
    assert store.index_service.files == files[2:]  # the newest file always stays
    assert [p.name for p in _index_files(store_factory.root)] == [files[2].file_name]


def test_config_names_and_limits() -> None:
    cfg = MessageStoreConfig.from_properties({"maxHashSlotNum": "10", "maxIndexNum": "40",
                                              "messageIndexSafe": "true", "defaultQueryMaxNum": "5"})
    assert (cfg.max_hash_slot_num, cfg.max_index_num, cfg.message_index_safe, cfg.default_query_max_num) == \
        (10, 40, True, 5)
    assert MessageStoreConfig().max_msgs_num_batch == 64
    with pytest.raises(ValueError):
        MessageStoreConfig.from_properties({"maxIndexNum": "200000000"})


@settings(max_examples=300)
@given(topic=st.text(max_size=20), key=st.one_of(st.text(max_size=300), st.text(st.characters(max_codepoint=0x7F), max_size=300)))
def test_prefixed_key_hash_is_the_hash_of_the_joined_key(topic, key):
    from rmqwire.server.store.index_file import PrefixedKeyHash

    assert PrefixedKeyHash(topic + "#")(key) == index_key_hash(topic + "#" + key)
