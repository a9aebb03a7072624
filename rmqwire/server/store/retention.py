"""Retention: deleting expired commit-log and consume-queue files (Java ``CleanCommitLogService``,
``CleanConsumeQueueService``) and the disk-usage guard that stops writes on a full disk.

Commit-log files (never the one being written) go when older than ``fileReservedTime`` hours by
modification time, but only at a ``deleteWhen`` hour, or at any time when the disk is used above
``diskMaxUsedSpaceRatio``, or when the store asked for it. Above ``diskSpaceCleanForciblyRatio`` the
oldest files go whatever their age; above ``diskSpaceWarningLevelRatio`` the store is marked disk
full and refuses puts (SERVICE_NOT_AVAILABLE) until usage drops. Consume-queue files go once every
entry in them points below the commit log's new minimum offset.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from rmqwire.server.store.config import MessageStoreConfig

__all__ = ["CleanCommitLogService", "RunningFlags", "disk_partition_used_ratio", "is_it_time_to_do"]

log = logging.getLogger(__name__)


def disk_partition_used_ratio(path: str | os.PathLike[str]) -> float:
    """Used fraction of the partition holding ``path``, rounded up to 1 % as Java's
    ``getDiskPartitionSpaceUsedPercent``; -1 when it cannot be measured."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    pct = used * 100 // entire + (1 if used * 100 % entire else 0)
    return pct / 100.0


def is_it_time_to_do(when: str, now: datetime.datetime) -> bool:
    """``deleteWhen``: hours of the day separated by ';' (Java ``UtilAll.isItTimeToDo``)."""
    for w in when.split(";"):
        w = w.strip()
        if w and int(w) == now.hour:
            return True
    return False


class RunningFlags:
    """Java ``RunningFlags`` bits that gate reads and writes."""

    NOT_READABLE = 1
    NOT_WRITEABLE = 1 << 1
    WRITE_LOGICS_QUEUE_ERROR = 1 << 2
    WRITE_INDEX_FILE_ERROR = 1 << 3
    DISK_FULL = 1 << 4
    LOGIC_DISK_FULL = 1 << 6

    def __init__(self) -> None:
        self.bits = 0

    @property
    def is_readable(self) -> bool:
        return not self.bits & self.NOT_READABLE

    @property
    def is_writeable(self) -> bool:
        mask = (
            self.NOT_WRITEABLE
            | self.WRITE_LOGICS_QUEUE_ERROR
            | self.DISK_FULL
            | self.WRITE_INDEX_FILE_ERROR
            | self.LOGIC_DISK_FULL
        )
        return not self.bits & mask

    @property
    def is_cq_writeable(self) -> bool:
        mask = self.NOT_WRITEABLE | self.WRITE_LOGICS_QUEUE_ERROR | self.WRITE_INDEX_FILE_ERROR | self.LOGIC_DISK_FULL
        return not self.bits & mask

    @property
    def is_disk_full(self) -> bool:
        return bool(self.bits & self.DISK_FULL)

    def make_disk_full(self) -> bool:
        """Set DISK_FULL; True if it was clear before."""
        was = not self.bits & self.DISK_FULL
        self.bits |= self.DISK_FULL
        return was

    def make_disk_ok(self) -> bool:
        """Clear DISK_FULL; True if it was clear already."""
        was = not self.bits & self.DISK_FULL
        self.bits &= ~self.DISK_FULL
        return was

    def make_logics_queue_error(self) -> None:
        self.bits |= self.WRITE_LOGICS_QUEUE_ERROR


@dataclass(frozen=True, slots=True)
class CleanResult:
    time_up: bool
    space_to_delete: bool
    manual: bool
    clean_immediately: bool
    deleted_files: int


class CleanCommitLogService:
    """Decides when and how much of the commit log to delete; the store runs it periodically."""

    MAX_MANUAL_DELETE_FILE_TIMES = 20

    def __init__(
        self,
        config: MessageStoreConfig,
        running_flags: RunningFlags,
        delete_expired: Callable[[int, int, bool, int], int],
        *,
        disk_usage: Callable[[str], float] = disk_partition_used_ratio,
        now_ms: Callable[[], int],
        local_now: Callable[[], datetime.datetime] = datetime.datetime.now,
    ) -> None:
        """``delete_expired(expired_ms, now_ms, clean_immediately, batch_max)`` deletes commit-log
        files and returns how many."""
        self.config = config
        self.flags = running_flags
        self._delete_expired = delete_expired
        self._disk_usage = disk_usage
        self._now_ms = now_ms
        self._local_now = local_now
        self.manual_delete_times = 0
        self.clean_immediately = False

    @property
    def warning_level_ratio(self) -> float:
        return min(max(self.config.disk_space_warning_level_ratio / 100.0, 0.35), 0.90)

    @property
    def clean_forcibly_ratio(self) -> float:
        return min(max(self.config.disk_space_clean_forcibly_ratio / 100.0, 0.30), 0.85)

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_times = self.MAX_MANUAL_DELETE_FILE_TIMES

    def is_time_to_delete(self) -> bool:
        try:
            return is_it_time_to_do(self.config.delete_when, self._local_now())
        except ValueError:
            log.error("bad deleteWhen %r", self.config.delete_when)
            return False

    def commit_log_ratio(self) -> float:
        return self._disk_usage(str(self.config.commit_log_dir))

    def consume_queue_ratio(self) -> float:
        return self._disk_usage(str(self.config.consume_queue_dir))

    def is_space_to_delete(self) -> bool:
        """Java ``isSpaceToDelete``: also marks the store disk-full or OK."""
        self.clean_immediately = False
        ratios = (("commit log", self.commit_log_ratio()), ("consume queue", self.consume_queue_ratio()))
        for what, ratio in ratios:
            if ratio > self.warning_level_ratio:
                if self.flags.make_disk_full():
                    log.error("%s disk maybe full soon (%.2f): puts refused until space is freed", what, ratio)
                self.clean_immediately = True
                return True
            if ratio > self.clean_forcibly_ratio:
                self.clean_immediately = True
                return True
            if not self.flags.make_disk_ok():
                log.info("%s disk space OK (%.2f): puts accepted again", what, ratio)
        limit = self.config.disk_max_used_space_ratio / 100.0
        for _, ratio in ratios:
            if ratio < 0 or ratio > limit:
                return True
        return False

    def run(self) -> CleanResult:
        time_up = self.is_time_to_delete()
        space = self.is_space_to_delete()
        manual = self.manual_delete_times > 0
        deleted = 0
        clean_now = False
        if time_up or space or manual:
            if manual:
                self.manual_delete_times -= 1
            clean_now = self.config.clean_file_forcibly_enable and self.clean_immediately
            expired_ms = self.config.file_reserved_time * 3_600_000
            deleted = self._delete_expired(expired_ms, self._now_ms(), clean_now, self.config.delete_file_batch_max)
            if deleted == 0 and space:
                log.warning("disk space will be full soon, but no file could be deleted")
        return CleanResult(time_up, space, manual, clean_now, deleted)
