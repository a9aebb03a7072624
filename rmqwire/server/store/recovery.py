"""Recovery at start (Java ``CommitLog.recoverNormally`` / ``recoverAbnormally``).

First every consume queue finds the end of its valid entries. Then the commit log is scanned
record by record (magic, field sizes and, with ``checkCRCOnRecover``, the body CRC) to find where
valid data ends:

- normally (no ``abort`` file: the last run shut down cleanly) from the file holding the consume
  queues' furthest record, dispatching what the queues do not have yet;
- abnormally (``abort`` left by a crash) from the last file whose first record is older than the
  checkpoint's ``min_timestamp``, re-dispatching everything from there (the queues skip entries
  they already hold).

Everything after the last valid record is cut off: a torn tail in the commit log, and queue
entries pointing at or beyond it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rmqwire.codec.message import MAGIC_CODE_V1, MAGIC_CODE_V2
from rmqwire.server.store.checkpoint import StoreCheckpoint
from rmqwire.server.store.commitlog import (
    CommitLog,
    check_message_and_return_size,
    store_timestamp_position,
)
from rmqwire.server.store.consume_queue import ConsumeQueue
from rmqwire.server.store.mapped_file import MappedFile
from rmqwire.server.store.results import DispatchRequest

__all__ = ["RecoveryReport", "recover_commit_log", "recover_consume_queues"]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found: whether it was the crash path, where the log ends, what it cut."""

    abnormal: bool
    start_file: str | None
    process_offset: int
    records_scanned: int
    records_dispatched: int
    #: The scan stopped at bytes that are not zeros: a half-written or corrupt record was cut.
    torn_tail: bool
    max_phy_offset_of_consume_queue: int


def recover_consume_queues(queues: list[ConsumeQueue]) -> int:
    """Recover each queue; returns the furthest commit-log end any of them points at (-1: none)."""
    furthest = -1
    for cq in queues:
        cq.recover()
        furthest = max(furthest, cq.max_physic_offset)
    return furthest


def _matched_for_abnormal_start(f: MappedFile, checkpoint: StoreCheckpoint, index_safe: bool) -> bool:
    head = f.mm[:80]
    (magic,) = _I32.unpack_from(head, 4)
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        return False
    (sys_flag,) = _I32.unpack_from(head, 36)
    (store_ts,) = _I64.unpack_from(head, store_timestamp_position(sys_flag))
    limit = checkpoint.min_timestamp_index if index_safe else checkpoint.min_timestamp
    return store_ts != 0 and store_ts <= limit


def recover_commit_log(
    commit_log: CommitLog,
    checkpoint: StoreCheckpoint,
    *,
    abnormal: bool,
    max_phy_offset_of_consume_queue: int,
    dispatch: Callable[[DispatchRequest], None],
    truncate_consume_queues: Callable[[int], None],
    destroy_consume_queues: Callable[[], None],
    check_crc: bool,
    delay_levels: Mapping[int, int],
    message_index_safe: bool = False,
) -> RecoveryReport:
    mfq = commit_log.mapped_file_queue
    files = mfq.files
    if not files:
        if max_phy_offset_of_consume_queue >= 0:
            log.warning("no commit-log files: consume queues are dropped")
        mfq.flushed_where = 0
        destroy_consume_queues()
        return RecoveryReport(abnormal, None, 0, 0, 0, False, max_phy_offset_of_consume_queue)

    if abnormal:
        index = len(files) - 1
        while index >= 0 and not _matched_for_abnormal_start(files[index], checkpoint, message_index_safe):
            index -= 1
        index = max(index, 0)
    else:
        index = len(files) - 1
        while index > 0 and files[index].file_from_offset > max_phy_offset_of_consume_queue:
            index -= 1

    f = files[index]
    start_file = f.file_name
    pos = 0
    last_valid = f.file_from_offset
    scanned = dispatched = 0
    torn = False
    while True:
        req = check_message_and_return_size(
            f.mm, pos, f.file_size, check_crc=check_crc, delay_levels=delay_levels
        )
        if req.success and req.msg_size > 0:
            last_valid = f.file_from_offset + pos
            pos += req.msg_size
            scanned += 1
            # Java (normal path) compares with '>' and so would skip a record starting exactly at
            # the queues' end; '>=' is right, and re-dispatching a present entry is a no-op.
            if abnormal or req.commit_log_offset >= max_phy_offset_of_consume_queue:
                dispatch(req)
                dispatched += 1
        elif req.success:  # blank end-of-file record
            index += 1
            if index >= len(files):
                break
            f = files[index]
            pos = 0
        else:
            torn = f.mm[pos : pos + 16].count(0) != len(f.mm[pos : pos + 16])
            if torn:
                log.warning("torn or corrupt record at %d is cut off", f.file_from_offset + pos)
            break

    process_offset = f.file_from_offset + pos
    checkpoint.confirm_phy_offset = last_valid
    if max_phy_offset_of_consume_queue > process_offset:
        log.warning(
            "consume queues point up to %d, past the commit log end %d: truncated",
            max_phy_offset_of_consume_queue, process_offset,
        )
        truncate_consume_queues(process_offset)
    mfq.flushed_where = process_offset
    mfq.truncate_dirty_files(process_offset)
    log.info(
        "%s recovery from %s: log ends at %d (%d records scanned, %d dispatched)",
        "abnormal" if abnormal else "normal", start_file, process_offset, scanned, dispatched,
    )
    return RecoveryReport(
        abnormal, start_file, process_offset, scanned, dispatched, torn, max_phy_offset_of_consume_queue
    )
