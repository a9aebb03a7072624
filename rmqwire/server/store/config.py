"""The store's configuration: Java ``MessageStoreConfig`` keys, defaults and directory layout.

Every field keeps the Java default of RocketMQ 5.3.3 and carries its Java property name, so a
``broker.conf`` can be applied with ``MessageStoreConfig.from_properties`` (unknown keys are
ignored: a broker.conf mixes broker, remoting and store keys).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FlushDiskType", "MessageStoreConfig", "file_name", "parse_delay_levels"]

#: Size of one consume-queue entry (Java ``ConsumeQueue.CQ_STORE_UNIT_SIZE``).
CQ_STORE_UNIT_SIZE = 20
#: The page size Java assumes for flush accounting (``MappedFile.OS_PAGE_SIZE``).
OS_PAGE_SIZE = 4096


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def _java(default: Any, name: str) -> Any:
    return dataclasses.field(default=default, metadata={"java": name})


@dataclasses.dataclass(slots=True)
class MessageStoreConfig:
    """Store settings; times are milliseconds unless the name says hours."""

    store_path_root_dir: str = _java(str(Path.home() / "store"), "storePathRootDir")
    #: None: ``<root>/commitlog``.
    store_path_commit_log: str | None = _java(None, "storePathCommitLog")
    mapped_file_size_commit_log: int = _java(1024 * 1024 * 1024, "mappedFileSizeCommitLog")
    mapped_file_size_consume_queue: int = _java(300_000 * CQ_STORE_UNIT_SIZE, "mappedFileSizeConsumeQueue")

    flush_disk_type: FlushDiskType = _java(FlushDiskType.ASYNC_FLUSH, "flushDiskType")
    flush_interval_commit_log: int = _java(500, "flushIntervalCommitLog")
    flush_commit_log_least_pages: int = _java(4, "flushCommitLogLeastPages")
    flush_commit_log_thorough_interval: int = _java(10_000, "flushCommitLogThoroughInterval")
    flush_interval_consume_queue: int = _java(1000, "flushIntervalConsumeQueue")
    flush_consume_queue_least_pages: int = _java(2, "flushConsumeQueueLeastPages")
    flush_consume_queue_thorough_interval: int = _java(60_000, "flushConsumeQueueThoroughInterval")
    sync_flush_timeout: int = _java(5000, "syncFlushTimeout")

    #: Applied to the body, as Java's encoder does; the record may be 64 KiB larger.
    max_message_size: int = _java(4 * 1024 * 1024, "maxMessageSize")
    check_crc_on_recover: bool = _java(True, "checkCRCOnRecover")
    auto_message_version_on_topic_len: bool = _java(True, "autoMessageVersionOnTopicLen")
    message_delay_level: str = _java(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", "messageDelayLevel"
    )
    os_page_cache_busy_time_out_mills: int = _java(1000, "osPageCacheBusyTimeOutMills")

    # -- retention
    file_reserved_time: int = _java(72, "fileReservedTime")  # hours
    delete_when: str = _java("04", "deleteWhen")  # hours of day, ';'-separated
    disk_max_used_space_ratio: int = _java(75, "diskMaxUsedSpaceRatio")
    disk_space_warning_level_ratio: int = _java(90, "diskSpaceWarningLevelRatio")
    disk_space_clean_forcibly_ratio: int = _java(85, "diskSpaceCleanForciblyRatio")
    clean_file_forcibly_enable: bool = _java(True, "cleanFileForciblyEnable")
    clean_resource_interval: int = _java(10_000, "cleanResourceInterval")
    delete_file_batch_max: int = _java(10, "deleteFileBatchMax")

    # -- pull
    max_transfer_bytes_on_message_in_memory: int = _java(256 * 1024, "maxTransferBytesOnMessageInMemory")
    max_transfer_count_on_message_in_memory: int = _java(32, "maxTransferCountOnMessageInMemory")
    max_transfer_bytes_on_message_in_disk: int = _java(64 * 1024, "maxTransferBytesOnMessageInDisk")
    max_transfer_count_on_message_in_disk: int = _java(8, "maxTransferCountOnMessageInDisk")
    access_message_in_memory_max_ratio: int = _java(40, "accessMessageInMemoryMaxRatio")
    max_filter_message_size: int = _java(16000, "maxFilterMessageSize")
    travel_cq_file_num_when_get_message: int = _java(1, "travelCqFileNumWhenGetMessage")

    # -- index (index/ files and QUERY_MESSAGE)
    message_index_enable: bool = _java(True, "messageIndexEnable")
    max_hash_slot_num: int = _java(5_000_000, "maxHashSlotNum")
    max_index_num: int = _java(5_000_000 * 4, "maxIndexNum")
    #: The most offsets one index query returns, whatever the request asks.
    max_msgs_num_batch: int = _java(64, "maxMsgsNumBatch")
    #: Abnormal recovery also re-dispatches back to the checkpoint's index time (else index
    #: files written after it are dropped and older messages lose their entries, as Java).
    message_index_safe: bool = _java(False, "messageIndexSafe")
    #: maxNum of a QUERY_MESSAGE by unique key (the request's own maxNum is ignored then).
    default_query_max_num: int = _java(32, "defaultQueryMaxNum")

    #: Java reads this from BrokerConfig; it gates the message-arrival listener (long polling).
    long_polling_enable: bool = _java(True, "longPollingEnable")

    # -- layout -------------------------------------------------------------------------------

    @property
    def root_dir(self) -> Path:
        return Path(self.store_path_root_dir)

    @property
    def commit_log_dir(self) -> Path:
        if self.store_path_commit_log:
            return Path(self.store_path_commit_log)
        return self.root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.root_dir / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root_dir / "abort"

    @property
    def lock_path(self) -> Path:
        return self.root_dir / "lock"

    @property
    def config_dir(self) -> Path:
        return self.root_dir / "config"

    @property
    def is_sync_flush(self) -> bool:
        return self.flush_disk_type is FlushDiskType.SYNC_FLUSH

    # -- broker.conf ----------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: Any) -> MessageStoreConfig:
        """Build from Java property names (``broker.conf``); other keys are ignored."""
        by_java = {f.metadata["java"]: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, raw in props.items():
            f = by_java.get(key)
            if f is None:
                continue
            kwargs[f.name] = _convert(f, str(raw).strip())
        kwargs.update(overrides)
        cfg = cls(**kwargs)
        cfg.validate()
        return cfg

    def to_properties(self) -> dict[str, str]:
        """The Java property names and values (``-p``-style printing, broker.conf writing)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, enum.Enum):
                v = v.value
            elif isinstance(v, bool):
                v = "true" if v else "false"
            out[f.metadata["java"]] = str(v)
        return out

    def validate(self) -> None:
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError("mappedFileSizeCommitLog must be at least 4096 bytes")
        size = self.mapped_file_size_consume_queue
        if size < CQ_STORE_UNIT_SIZE or size % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"mappedFileSizeConsumeQueue must be a positive multiple of {CQ_STORE_UNIT_SIZE}")
        parse_delay_levels(self.message_delay_level)
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ValueError("maxHashSlotNum must be positive and maxIndexNum above 1")
        if 40 + self.max_hash_slot_num * 4 + self.max_index_num * 20 > 2**31 - 1:
            # Java maps an index file with an int size
            raise ValueError("maxHashSlotNum and maxIndexNum make an index file over 2 GiB")


def _convert(f: dataclasses.Field[Any], raw: str) -> Any:
    t = str(f.type)  # annotations are strings here (postponed evaluation)
    if t == "FlushDiskType":
        return FlushDiskType(raw)
    if t == "bool":
        # Boolean.parseBoolean: anything but "true" (any case) is false
        return raw.lower() == "true"
    if t == "int":
        return int(raw)
    return raw


_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str) -> dict[int, int]:
    """``messageDelayLevel`` -> {level: delay ms}; levels start at 1 (Java ``parseDelayLevel``)."""
    table = {}
    for i, item in enumerate(spec.split(" "), start=1):
        unit = item[-1:]
        if unit not in _UNITS_MS or not item[:-1].isdigit():
            raise ValueError(f"bad messageDelayLevel item {item!r}")
        table[i] = int(item[:-1]) * _UNITS_MS[unit]
    return table


def file_name(offset: int) -> str:
    """A segment's file name: its start offset as 20 decimal digits (Java ``UtilAll.offset2FileName``)."""
    return f"{offset:020d}"


def total_physical_memory() -> int:
    """Physical memory in bytes (Java ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 24 * 1024 * 1024 * 1024  # Java's own fallback
