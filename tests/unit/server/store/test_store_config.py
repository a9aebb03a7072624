"""Store configuration: Java property names and defaults, directory layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqwire.server.store import FlushDiskType, MessageStoreConfig
from rmqwire.server.store.config import file_name, parse_delay_levels


def test_java_defaults():
    c = MessageStoreConfig()
    assert c.mapped_file_size_commit_log == 1024**3
    assert c.mapped_file_size_consume_queue == 6_000_000
    assert c.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert (c.file_reserved_time, c.delete_when, c.sync_flush_timeout) == (72, "04", 5000)
    assert c.max_message_size == 4 * 1024 * 1024
    assert c.root_dir == Path.home() / "store"


def test_from_broker_conf_properties(tmp_path):
    c = MessageStoreConfig.from_properties({
        "brokerName": "broker-a",  # not a store key: ignored
        "storePathRootDir": str(tmp_path),
        "mappedFileSizeCommitLog": "65536",
        "flushDiskType": "SYNC_FLUSH",
        "checkCRCOnRecover": "False",
        "deleteWhen": "04;05",
    })
    assert c.flush_disk_type is FlushDiskType.SYNC_FLUSH and c.is_sync_flush
    assert c.check_crc_on_recover is False and c.mapped_file_size_commit_log == 65536
    assert c.commit_log_dir == tmp_path / "commitlog"
    assert c.consume_queue_dir == tmp_path / "consumequeue"
    assert (c.checkpoint_path.name, c.abort_path.name, c.lock_path.name) == ("checkpoint", "abort", "lock")
    props = c.to_properties()
    assert props["flushDiskType"] == "SYNC_FLUSH" and props["checkCRCOnRecover"] == "false"
    assert MessageStoreConfig.from_properties(props) == c
    other = MessageStoreConfig.from_properties({"storePathRootDir": "/r", "storePathCommitLog": "/c"})
    assert other.commit_log_dir == Path("/c")


def test_bad_values():
    with pytest.raises(ValueError):
        MessageStoreConfig.from_properties({"mappedFileSizeConsumeQueue": "1001"})
    with pytest.raises(ValueError):
        MessageStoreConfig.from_properties({"messageDelayLevel": "1s 5x"})
    with pytest.raises(ValueError):
        MessageStoreConfig.from_properties({"flushDiskType": "SOMETIMES"})


def test_names_and_delay_levels():
    assert file_name(1073741824) == "00000000001073741824"
    levels = parse_delay_levels(MessageStoreConfig().message_delay_level)
    assert (levels[1], levels[3], levels[18], len(levels)) == (1000, 10_000, 7_200_000, 18)
