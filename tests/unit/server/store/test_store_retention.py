"""Retention: expired files by age at deleteWhen, disk-usage thresholds, the disk-full guard."""

from __future__ import annotations

import datetime
import os

from store_helpers import make_msg, small_config

from rmqwire.server.store import GetMessageStatus, PutMessageStatus
from rmqwire.server.store.config import file_name
from rmqwire.server.store.retention import disk_partition_used_ratio, is_it_time_to_do

NOW = 1_800_000_000_000
HOUR = 3_600_000


class Env:
    """Injected clock, local hour and disk usage for one store."""

    def __init__(self) -> None:
        self.now = NOW
        self.hour = 12
        self.usage = 0.10

    def kwargs(self):
        return {
            "now_ms": lambda: self.now,
            "local_now": lambda: datetime.datetime(2027, 1, 1, self.hour, 30),
            "disk_usage": lambda path: self.usage,
        }


def filled_store(store_factory, tmp_path, env, files=5, **cfg):
    config = small_config(tmp_path / "store", mapped_file_size_commit_log=4096,
                          mapped_file_size_consume_queue=5 * 20, **cfg)
    store = store_factory(config, **env.kwargs())
    while store.max_phy_offset < (files - 1) * 4096 + 100:
        assert store.put_message(make_msg(body=b"r" * 700)).is_ok
    return store


def age_files(store, hours: float, env: Env) -> None:
    t = (env.now - hours * HOUR) / 1000
    for f in store.commit_log.mapped_file_queue.files:
        os.utime(f.path, (t, t))


def commit_log_names(tmp_path):
    return sorted(p.name for p in (tmp_path / "store" / "commitlog").iterdir())


def test_expired_files_go_at_the_delete_when_hour(store_factory, tmp_path):
    env = Env()
    store = filled_store(store_factory, tmp_path, env)
    age_files(store, 73, env)
    assert store.run_retention() == 0  # 12:30 is not deleteWhen (04)
    env.hour = 4
    assert store.run_retention() == 4  # never the file being written
    assert commit_log_names(tmp_path) == [file_name(4 * 4096)]
    assert store.min_phy_offset == 4 * 4096
    # consume queues follow: their files pointing below the new minimum are gone
    cq = store.find_consume_queue("TopicTest", 0)
    min_q = store.get_min_offset_in_queue("TopicTest", 0)
    assert min_q > 0 and cq.get(min_q).pos >= 4 * 4096
    assert cq.get(min_q - 1) is None or cq.get(min_q - 1).pos < 4 * 4096
    res = store.get_message("g", "TopicTest", 0, 0, 32)
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, min_q)
    res = store.get_message("g", "TopicTest", 0, min_q, 32)
    assert res.status is GetMessageStatus.FOUND and res.message_queue_offsets[0] == min_q
    # the store reopens with the reduced set of files
    store.shutdown()
    store = store_factory(store.config, **env.kwargs())
    assert store.min_phy_offset == 4 * 4096 and store.get_min_offset_in_queue("TopicTest", 0) == min_q


def test_young_files_stay_and_deletion_stops_at_the_first_young_one(store_factory, tmp_path):
    env = Env()
    env.hour = 4
    store = filled_store(store_factory, tmp_path, env)
    age_files(store, 1, env)
    old = store.commit_log.mapped_file_queue.files[0]
    t = (env.now - 100 * HOUR) / 1000
    os.utime(old.path, (t, t))
    assert store.run_retention() == 1
    assert commit_log_names(tmp_path)[0] == file_name(4096)


def test_disk_above_max_used_ratio_deletes_expired_files_at_any_hour(store_factory, tmp_path):
    env = Env()
    store = filled_store(store_factory, tmp_path, env)
    age_files(store, 80, env)
    env.usage = 0.80  # above diskMaxUsedSpaceRatio 75, below the forcible 85
    assert store.run_retention() == 4


def test_disk_above_clean_forcibly_ratio_deletes_young_files(store_factory, tmp_path):
    env = Env()
    store = filled_store(store_factory, tmp_path, env, delete_file_batch_max=2)
    age_files(store, 1, env)
    env.usage = 0.86
    assert store.run_retention() == 2  # deleteFileBatchMax per round
    assert store.run_retention() == 2
    assert store.run_retention() == 0
    assert store.running_flags.is_writeable


def test_disk_full_refuses_puts_until_space_is_back(store_factory, tmp_path):
    env = Env()
    store = filled_store(store_factory, tmp_path, env, files=2)
    env.usage = 0.95  # above diskSpaceWarningLevelRatio 90
    assert store.run_retention() == 1  # and cleans at once: the oldest file goes whatever its age
    assert store.running_flags.is_disk_full
    assert store.put_message(make_msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    min_q = store.get_min_offset_in_queue("TopicTest", 0)
    assert store.get_message("g", "TopicTest", 0, min_q, 1).status is GetMessageStatus.FOUND
    info = store.runtime_info()
    assert info["commitLogDiskRatio"] == "0.95" and info["commitLogMaxOffset"] == str(store.max_phy_offset)
    env.usage = 0.5
    store.run_retention()
    assert store.put_message(make_msg()).is_ok


def test_manual_delete(store_factory, tmp_path):
    env = Env()
    store = filled_store(store_factory, tmp_path, env, files=3)
    age_files(store, 100, env)
    store.execute_delete_files_manually()
    assert store.run_retention() == 2


def test_helpers():
    assert is_it_time_to_do("04;16", datetime.datetime(2027, 1, 1, 16, 5))
    assert not is_it_time_to_do("04", datetime.datetime(2027, 1, 1, 5, 0))
    ratio = disk_partition_used_ratio("/")
    assert 0.0 <= ratio <= 1.0 and ratio == round(ratio, 2)  # whole percents (0.28 * 100 is not 28.0)
    assert disk_partition_used_ratio("/no/such/path") == -1.0
