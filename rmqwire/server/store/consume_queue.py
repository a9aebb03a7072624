"""Consume queues: per topic and queue id, a log of 20-byte entries pointing into the commit log.

``consumequeue/<topic>/<queueId>/<20-digit logical byte offset>``; entry n is at byte n * 20:
commit-log offset (int64), record size (int32), tags code (int64). Java ``ConsumeQueue``.
"""

from __future__ import annotations

import enum
import logging
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rmqwire.server.store.config import CQ_STORE_UNIT_SIZE
from rmqwire.server.store.mapped_file import MappedFile, MappedFileQueue

__all__ = ["BoundaryType", "ConsumeQueue", "CqUnit"]

log = logging.getLogger(__name__)

_UNIT = struct.Struct(">qiq")
_MAX_INT = 2**31 - 1
#: Entries written before the first real entry of a queue whose first file starts mid-file.
_BLANK_UNIT = _UNIT.pack(0, _MAX_INT, 0)
_READ_CHUNK_UNITS = 256


class BoundaryType(enum.Enum):
    """Which side of a timestamp ``offset_in_queue_by_time`` answers (Java ``BoundaryType``)."""

    LOWER = "lower"
    UPPER = "upper"


@dataclass(frozen=True, slots=True)
class CqUnit:
    queue_offset: int
    pos: int  # commit-log offset of the record
    size: int
    tags_code: int
    batch_num: int = 1


def _is_valid(offset: int, size: int) -> bool:
    return offset >= 0 and size > 0


class ConsumeQueue:
    """One queue of one topic. Writes are serialized by the store's dispatcher."""

    def __init__(
        self,
        topic: str,
        queue_id: int,
        root: Path,
        file_size: int,
        sync: Callable[[int], None] = os.fdatasync,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_queue = MappedFileQueue(root / topic / str(queue_id), file_size, sync, keep_fds=False)
        self.file_size = file_size
        #: End (offset + size) of the last record this queue points at; -1 when empty.
        self.max_physic_offset = -1
        #: Logical byte offset of the first valid entry.
        self.min_logic_offset = 0

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic}-{self.queue_id}, min={self.min_offset_in_queue}, max={self.max_offset_in_queue})"

    # -- load / recover --------------------------------------------------------------------------

    def load(self) -> None:
        self.mapped_file_queue.load()

    def recover(self) -> None:
        """Find the end of the valid entries, scanning from the third-last file (Java ``recover``)."""
        files = self.mapped_file_queue.files
        if not files:
            return
        index = max(len(files) - 3, 0)
        f = files[index]
        process_offset = f.file_from_offset
        while True:
            valid_end = self._scan_valid(f)
            if valid_end == self.file_size and index + 1 < len(files):
                index += 1
                f = files[index]
                process_offset = f.file_from_offset
                continue
            process_offset += valid_end
            break
        mfq = self.mapped_file_queue
        mfq.flushed_where = process_offset
        mfq.truncate_dirty_files(process_offset)

    def _scan_valid(self, f: MappedFile) -> int:
        """Byte length of the leading valid entries of ``f``; updates ``max_physic_offset``."""
        pos = 0
        mm = f.mm
        while pos < self.file_size:
            chunk = mm[pos : min(pos + _READ_CHUNK_UNITS * CQ_STORE_UNIT_SIZE, self.file_size)]
            for offset, size, _tags in _UNIT.iter_unpack(chunk):
                if not _is_valid(offset, size):
                    return pos
                if not (offset == 0 and size == _MAX_INT):  # pre-fill blanks point nowhere
                    self.max_physic_offset = offset + size
                pos += CQ_STORE_UNIT_SIZE
        return pos

    # -- writes ----------------------------------------------------------------------------------

    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write entry ``cq_offset``; True also when it is already there (a repeated dispatch)."""
        if offset + size <= self.max_physic_offset:
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        mfq = self.mapped_file_queue
        f = mfq.last_or_create(expect)
        if f is None:
            return False
        if f.first_create_in_queue and cq_offset != 0 and f.wrote_position == 0:
            # The queue starts mid-file (its older entries are gone): pad up to the first entry.
            self.min_logic_offset = expect
            mfq.flushed_where = expect
            until = expect % self.file_size
            if until:
                f.write_at(0, _BLANK_UNIT * (until // CQ_STORE_UNIT_SIZE))
                f.wrote_position = until
        if cq_offset != 0:
            current = f.file_from_offset + f.wrote_position
            if expect < current:
                log.warning("consume queue %s-%d built twice at offset %d", self.topic, self.queue_id, cq_offset)
                return True
            if expect != current:
                log.warning(
                    "consume queue %s-%d out of order: entry %d expected at byte %d, queue ends at %d",
                    self.topic, self.queue_id, cq_offset, expect, current,
                )
        self.max_physic_offset = offset + size
        ok = f.append(_UNIT.pack(offset, size, tags_code))
        if not ok:
            log.error("consume queue %s-%d: file %s has no room", self.topic, self.queue_id, f.file_name)
        return ok

    def put_batch_position_info(self, offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int],
                                first_cq_offset: int) -> bool:
        """Entries ``first_cq_offset``, ``first_cq_offset + 1``... for consecutive records, in one
        write when they continue the queue inside its last file; otherwise (a repeat, a gap, a new
        queue starting mid-file, a file boundary) entry by entry, with the same outcome."""
        n = len(offsets)
        expect = first_cq_offset * CQ_STORE_UNIT_SIZE
        f = None
        if n and offsets[0] + sizes[0] > self.max_physic_offset:  # else a repeat: checked first
            f = self.mapped_file_queue.last_or_create(expect)
            if f is None:
                return False
        pos = f.wrote_position if f is not None else 0
        if (
            f is None
            or f.file_from_offset + pos != expect
            or pos + n * CQ_STORE_UNIT_SIZE > self.file_size
            or (f.first_create_in_queue and first_cq_offset != 0 and pos == 0)
        ):
            put = self.put_message_position_info
            return all([put(o, s, t, first_cq_offset + i)
                        for i, (o, s, t) in enumerate(zip(offsets, sizes, tags_codes, strict=True))])
        self.max_physic_offset = offsets[-1] + sizes[-1]
        return f.append(b"".join(map(_UNIT.pack, offsets, sizes, tags_codes)))

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop entries pointing at or after commit-log ``phy_offset`` (Java ``truncateDirtyLogicFiles``)."""
        mfq = self.mapped_file_queue
        self.max_physic_offset = phy_offset
        while True:
            f = mfq.last()
            if f is None:
                return
            keep = 0
            last_end = None
            delete_file = False
            old_end = f.wrote_position
            units = _UNIT.iter_unpack(f.mm[: max(old_end, 0)]) if old_end else iter(())
            for i, (offset, size, _tags) in enumerate(units):
                if i == 0 and offset >= phy_offset:
                    delete_file = True
                    break
                if not _is_valid(offset, size) or offset >= phy_offset:
                    break
                keep = (i + 1) * CQ_STORE_UNIT_SIZE
                if not (offset == 0 and size == _MAX_INT):
                    last_end = offset + size
            if delete_file or keep == 0 and old_end == 0 and f is not mfq.first():
                mfq.delete_last_file()
                continue
            f.wrote_position = f.flushed_position = keep
            if old_end > keep:
                f.write_at(keep, bytes(old_end - keep))
            if last_end is not None:
                self.max_physic_offset = last_end
            mfq.flushed_where = min(mfq.flushed_where, f.file_from_offset + keep)
            return

    def flush(self, least_pages: int) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    # -- offsets ---------------------------------------------------------------------------------

    @property
    def max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.max_offset // CQ_STORE_UNIT_SIZE

    @property
    def min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    @property
    def message_total_in_queue(self) -> int:
        return self.max_offset_in_queue - self.min_offset_in_queue

    def roll_next_file(self, index: int) -> int:
        per_file = self.file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Move the min offset to the first entry whose record still exists (Java ``correctMinOffset``)."""
        mfq = self.mapped_file_queue
        if self.min_logic_offset >= mfq.max_offset:
            return
        last = mfq.last()
        if last is None:
            return
        read_pos = last.read_position
        tail = last.read(read_pos - CQ_STORE_UNIT_SIZE, 8) if read_pos >= CQ_STORE_UNIT_SIZE else None
        if tail is not None and int.from_bytes(tail, "big", signed=True) < min_commit_log_offset:
            self.min_logic_offset = last.file_from_offset + read_pos
            return
        first = mfq.first()
        if first is None:
            return
        start = self.min_logic_offset - first.file_from_offset
        intact = start >= 0
        start = max(start, 0)
        if start > first.read_position:
            log.error("consume queue file %s should have been deleted", first.file_name)
            return
        n = (first.read_position - start) // CQ_STORE_UNIT_SIZE
        if n <= 0:
            return

        def offset_at(i: int) -> int:
            raw = first.read(start + i * CQ_STORE_UNIT_SIZE, 8)
            return int.from_bytes(raw, "big", signed=True) if raw else -1

        if intact and offset_at(0) >= min_commit_log_offset:
            return
        lo, hi = 0, n  # first entry whose record offset >= min_commit_log_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if offset_at(mid) >= min_commit_log_offset:
                hi = mid
            else:
                lo = mid + 1
        if lo < n:
            self.min_logic_offset = first.file_from_offset + start + lo * CQ_STORE_UNIT_SIZE

    def delete_expired_file(self, min_commit_log_offset: int) -> int:
        count = self.mapped_file_queue.delete_expired_by_offset(min_commit_log_offset, CQ_STORE_UNIT_SIZE)
        self.correct_min_offset(min_commit_log_offset)
        return count

    # -- reads -----------------------------------------------------------------------------------

    def iterate_from(self, start_index: int) -> Iterator[CqUnit] | None:
        """Entries from ``start_index`` to the end of the file holding it, or None when that
        index is not stored (below the min offset, in a deleted file, or not written yet)."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        f = self.mapped_file_queue.find_by_offset(offset)
        if f is None:
            return None
        pos = offset % self.file_size
        end = f.read_position
        if pos >= end:
            return None
        return self._units(f, pos, end, start_index)

    @staticmethod
    def _units(f: MappedFile, pos: int, end: int, index: int) -> Iterator[CqUnit]:
        while pos < end:
            n = min(_READ_CHUNK_UNITS * CQ_STORE_UNIT_SIZE, end - pos)
            chunk = f.read(pos, n)
            if chunk is None:
                return
            for offset, size, tags in _UNIT.iter_unpack(chunk):
                yield CqUnit(index, offset, size, tags)
                index += 1
            pos += n

    def get(self, index: int) -> CqUnit | None:
        it = self.iterate_from(index)
        return next(it, None) if it is not None else None

    def earliest_unit(self) -> CqUnit | None:
        return self.get(self.min_offset_in_queue)

    def latest_unit(self) -> CqUnit | None:
        return self.get(self.max_offset_in_queue - 1)

    def offset_in_queue_by_time(
        self,
        timestamp: int,
        boundary: BoundaryType,
        pickup_store_timestamp: Callable[[int, int], int],
        min_physic_offset: int,
    ) -> int:
        """Queue offset for a store time (Java ``getOffsetInQueueByTime``): pick the file by its
        first/last store times, then binary-search it; 0 when nothing fits."""
        f = self._file_by_time(timestamp, boundary, pickup_store_timestamp)
        if f is None:
            return 0
        low = self.min_logic_offset - f.file_from_offset if self.min_logic_offset > f.file_from_offset else 0
        rng = f.file_size
        if f.wrote_position != 0 and f.wrote_position != f.file_size:
            rng = f.wrote_position  # the file being written
        data = f.read(0, rng)
        if not data or rng < CQ_STORE_UNIT_SIZE:
            return 0
        unit = CQ_STORE_UNIT_SIZE
        ceiling = rng - unit
        floor = low

        def time_at(p: int) -> tuple[int, int]:
            phy, size, _ = _UNIT.unpack_from(data, p)
            return phy, pickup_store_timestamp(phy, size)

        base = f.file_from_offset
        _, t = time_at(ceiling)
        if t < timestamp:
            return (base + ceiling + unit) // unit if boundary is BoundaryType.LOWER else (base + ceiling) // unit
        _, t = time_at(floor)
        if t > timestamp:
            return base // unit if boundary is BoundaryType.LOWER else 0
        high = ceiling
        target = left = right = -1
        while high >= low:
            mid = (low + high) // (2 * unit) * unit
            phy, _size, _ = _UNIT.unpack_from(data, mid)
            if phy < min_physic_offset:
                low = mid + unit
                left = mid
                continue
            _, t = time_at(mid)
            if t < 0:
                return 0
            if t == timestamp:
                target = mid
                break
            if t > timestamp:
                high = mid - unit
                right = mid
            else:
                low = mid + unit
                left = mid
        if target != -1:
            step = -unit if boundary is BoundaryType.LOWER else unit
            offset = target
            while True:
                attempt = offset + step
                if attempt < floor or attempt > ceiling or time_at(attempt)[1] != timestamp:
                    break
                offset = attempt
        else:
            offset = right if boundary is BoundaryType.LOWER else left
        return int((base + offset) / unit)  # Java division truncates toward zero

    def _file_by_time(
        self, timestamp: int, boundary: BoundaryType, pickup: Callable[[int, int], int]
    ) -> MappedFile | None:
        files = self.mapped_file_queue.files
        if not files:
            return None
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if f.start_timestamp < 0:
                raw = f.read(0, CQ_STORE_UNIT_SIZE)
                if raw:
                    phy, size, _ = _UNIT.unpack(raw)
                    t = pickup(phy, size)
                    if t > 0:
                        f.start_timestamp = t
            if i < len(files) - 1 and f.stop_timestamp < 0:
                raw = f.read(f.file_size - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
                if raw:
                    phy, size, _ = _UNIT.unpack(raw)
                    t = pickup(phy, size)
                    if t > 0:
                        f.stop_timestamp = t
        if boundary is BoundaryType.LOWER:
            for i, f in enumerate(files):
                if i < len(files) - 1 and f.stop_timestamp >= timestamp:
                    return f
            return files[-1]
        for f in reversed(files):
            if f.start_timestamp <= timestamp:
                return f
        return None

    def close(self) -> None:
        self.mapped_file_queue.close()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mapped_file_queue.destroy()
