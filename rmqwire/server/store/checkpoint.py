"""The store checkpoint (Java ``StoreCheckpoint``): one memory-mapped 4096-byte page.

| offset | field |
|---|---|
| 0 | physicMsgTimestamp: store time of the last commit-log record known flushed |
| 8 | logicsMsgTimestamp: store time of the last record whose consume-queue entry is flushed |
| 16 | indexMsgTimestamp |
| 24 | masterFlushedOffset |
| 32 | confirmPhyOffset |

Abnormal recovery starts from the last commit-log file whose first record is older than
``min_timestamp`` (the smaller of the first two, minus 3 s).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

__all__ = ["StoreCheckpoint"]

PAGE = 4096
_FIELDS = struct.Struct(">qqqqq")


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if os.fstat(fd).st_size < PAGE:
                os.ftruncate(fd, PAGE)  # Java maps one page, which extends the file the same way
            self._mm = mmap.mmap(fd, PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        if existed:
            (
                self.physic_msg_timestamp,
                self.logics_msg_timestamp,
                self.index_msg_timestamp,
                self.master_flushed_offset,
                self.confirm_phy_offset,
            ) = _FIELDS.unpack_from(self._mm, 0)

    @property
    def min_timestamp(self) -> int:
        """min(physic, logics) - 3 s, at least 0 (Java ``getMinTimestamp``)."""
        return max(min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000, 0)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        """Write the fields into the page and make them durable (fdatasync releases the GIL)."""
        _FIELDS.pack_into(
            self._mm,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )
        os.fdatasync(self._fd)

    def close(self, flush: bool = True) -> None:
        if self._fd < 0:
            return
        if flush:
            self.flush()
        self._mm.close()
        os.close(self._fd)
        self._fd = -1
