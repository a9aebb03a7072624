"""Memory-mapped segment files and the queue of them (Java ``DefaultMappedFile``, ``MappedFileQueue``).

Data is written only through a shared mmap, so every appended byte sits in the page cache at once:
a process killed right after an append loses nothing. Durability against power loss comes from
``flush``, which calls ``fdatasync`` on the file descriptor: unlike ``mmap.flush`` (msync under the
GIL) it releases the GIL, so a flush thread never stalls the threads that append or serve pulls.
On Linux msync(MS_SYNC) of a shared mapping and fdatasync of its file write the same dirty pages.

Files are created sparse with the configured size, as Java's ``RandomAccessFile.setLength`` does.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from rmqwire.server.store.config import OS_PAGE_SIZE, file_name

__all__ = ["MappedFile", "MappedFileQueue", "StoreLoadError"]

log = logging.getLogger(__name__)

_DIGITS = re.compile(r"^\d+$")
#: Zeroing stops after this many consecutive zero bytes past a truncation point (see
#: ``MappedFile.zero_tail``).
_ZERO_RUN_TO_STOP = 1024 * 1024
_ZERO_CHUNK = 64 * 1024
_MMAP_HAS_TRACKFD = sys.version_info >= (3, 13)


class StoreLoadError(RuntimeError):
    """A store directory cannot be opened as it is (wrong file sizes, unreadable files)."""


class MappedFile:
    """One segment: ``<dir>/<20-digit start offset>``, mapped read-write in full."""

    __slots__ = (
        "_fd",
        "available",
        "file_from_offset",
        "file_size",
        "first_create_in_queue",
        "flushed_position",
        "mm",
        "path",
        "start_timestamp",
        "stop_timestamp",
        "store_timestamp",
        "wrote_position",
    )

    def __init__(self, path: Path, file_size: int, *, create: bool = False, keep_fd: bool = True) -> None:
        """``keep_fd=False`` (consume queues: many files, rarely flushed) holds no descriptor for
        flushing, the file is opened again for each flush; from Python 3.13 the mapping holds none
        either (``trackfd=False``), before that ``mmap`` keeps a duplicate of its own."""
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # store time of the last record appended (commit log)
        self.first_create_in_queue = False
        self.start_timestamp = -1  # consume queue: store time of its first / last entry (search)
        self.stop_timestamp = -1
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size != file_size:
                if create and size == 0:
                    os.ftruncate(fd, file_size)
                else:
                    raise StoreLoadError(
                        f"{path}: {size} bytes, not the configured {file_size} "
                        "(check the mapped file size settings)"
                    )
            extra = {"trackfd": False} if not keep_fd and _MMAP_HAS_TRACKFD else {}
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, **extra)
        except BaseException:
            os.close(fd)
            raise
        if keep_fd:
            self._fd = fd
        else:
            os.close(fd)  # the mapping stays valid without it
            self._fd = -1
        self.available = True

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    # -- state -----------------------------------------------------------------------------------

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def read_position(self) -> int:
        return self.wrote_position

    @property
    def file_name(self) -> str:
        return self.path.name

    def last_modified_ms(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    # -- writes ----------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> bool:
        """Append at the write position; False when it does not fit (Java ``appendMessage(byte[])``)."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        self.mm[pos:end] = data
        self.wrote_position = end
        return True

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self.mm[pos : pos + len(data)] = data

    def zero_tail(self, pos: int) -> None:
        """Clear stale bytes after a truncation point so a later recovery cannot read them back.

        Only non-zero chunks are written (writing zeros into a sparse hole would allocate it), and
        the scan stops after 1 MiB of zeros: a killed process leaves nothing beyond its last write.
        """
        zeros_seen = 0
        end = self.file_size
        while pos < end and zeros_seen < _ZERO_RUN_TO_STOP:
            n = min(_ZERO_CHUNK, end - pos)
            chunk = self.mm[pos : pos + n]
            if chunk.count(0) == n:
                zeros_seen += n
            else:
                self.mm[pos : pos + n] = bytes(n)
                zeros_seen = 0
            pos += n

    # -- reads -----------------------------------------------------------------------------------

    def read(self, pos: int, size: int) -> bytes | None:
        """``size`` bytes at ``pos`` when they are all written (Java ``selectMappedBuffer``)."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position:
            return None
        try:
            return self.mm[pos : pos + size]
        except ValueError:  # closed by retention meanwhile
            return None

    # -- durability ------------------------------------------------------------------------------

    def is_able_to_flush(self, least_pages: int) -> bool:
        flushed, write = self.flushed_position, self.wrote_position
        if self.is_full:
            return write > flushed
        if least_pages > 0:
            return write // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE >= least_pages
        return write > flushed

    def flush(self, least_pages: int, sync: Callable[[int], None] = os.fdatasync) -> int:
        """Make everything written so far durable; returns the flushed position."""
        if self.is_able_to_flush(least_pages) and self.available:
            target = self.wrote_position  # captured first: bytes before it are in the page cache
            try:
                if self._fd >= 0:
                    sync(self._fd)
                else:
                    fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        sync(fd)
                    finally:
                        os.close(fd)
            except (OSError, ValueError) as e:
                log.error("flush of %s failed: %s", self.path, e)
                return self.flushed_position
            self.flushed_position = target
        return self.flushed_position

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if not self.available:
            return
        self.available = False
        try:
            self.mm.close()
        except (BufferError, ValueError) as e:  # a reader still holds a view: the OS frees it later
            log.warning("could not unmap %s: %s", self.path, e)
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1

    def destroy(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


class MappedFileQueue:
    """The segments of one directory, in offset order (commit log, or one consume queue)."""

    def __init__(
        self,
        store_path: Path,
        file_size: int,
        sync: Callable[[int], None] = os.fdatasync,
        *,
        keep_fds: bool = True,
    ) -> None:
        self.store_path = store_path
        self.file_size = file_size
        self.sync = sync
        self.keep_fds = keep_fds
        # Replaced, never mutated in place, so readers can iterate a snapshot without the lock.
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.store_timestamp = 0
        self._lock = threading.Lock()

    # -- load ------------------------------------------------------------------------------------

    def load(self) -> None:
        """Map every segment of the directory (Java ``doLoad``): sizes must match the setting;
        an empty last file (a crash right after creating it) is removed."""
        if not self.store_path.is_dir():
            return
        paths = sorted(
            (p for p in self.store_path.iterdir() if p.is_file() and _DIGITS.match(p.name)),
            key=lambda p: int(p.name),
        )
        files = []
        for i, p in enumerate(paths):
            size = p.stat().st_size
            if size == 0 and i == len(paths) - 1:
                log.warning("%s is empty, removed", p)
                p.unlink()
                continue
            if size != self.file_size:
                for f in files:
                    f.close()
                raise StoreLoadError(
                    f"{p}: {size} bytes, not the configured {self.file_size} "
                    "(check the mapped file size settings)"
                )
            mf = MappedFile(p, self.file_size, keep_fd=self.keep_fds)
            mf.wrote_position = mf.flushed_position = self.file_size
            files.append(mf)
        self.files = files

    # -- lookup ----------------------------------------------------------------------------------

    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def last_or_create(self, start_offset: int) -> MappedFile | None:
        """The file to append to: the last one, or a new one when there is none or it is full
        (``start_offset`` places the first file of an empty queue)."""
        files = self.files
        last = files[-1] if files else None
        if last is not None and not last.is_full:
            return last
        with self._lock:
            files = self.files
            last = files[-1] if files else None
            if last is not None and not last.is_full:
                return last
            if last is None:
                create_offset = start_offset - start_offset % self.file_size
            else:
                create_offset = last.file_from_offset + self.file_size
            try:
                self.store_path.mkdir(parents=True, exist_ok=True)
                mf = MappedFile(
                    self.store_path / file_name(create_offset), self.file_size, create=True, keep_fd=self.keep_fds
                )
            except OSError as e:
                log.error("cannot create mapped file at offset %d in %s: %s", create_offset, self.store_path, e)
                return None
            if last is None:
                mf.first_create_in_queue = True
            self.files = [*files, mf]
            return mf

    def find_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0]
        if first.file_from_offset <= offset < files[-1].file_from_offset + self.file_size:
            idx = offset // self.file_size - first.file_from_offset // self.file_size
            if 0 <= idx < len(files):
                f = files[idx]
                if f.file_from_offset <= offset < f.file_from_offset + self.file_size:
                    return f
            for f in files:
                if f.file_from_offset <= offset < f.file_from_offset + self.file_size:
                    return f
        return first if return_first_on_not_found else None

    @property
    def min_offset(self) -> int:
        first = self.first()
        return first.file_from_offset if first is not None else -1

    @property
    def max_offset(self) -> int:
        last = self.last()
        return last.file_from_offset + last.read_position if last is not None else 0

    @property
    def total_file_size(self) -> int:
        return len(self.files) * self.file_size

    # -- truncation and deletion -----------------------------------------------------------------

    def truncate_dirty_files(self, offset: int) -> None:
        """Forget everything at or after ``offset``: the file holding it is cut back there, later
        files are deleted (Java ``truncateDirtyFiles``)."""
        with self._lock:
            keep = []
            for f in self.files:
                tail = f.file_from_offset + self.file_size
                if tail > offset and offset < f.file_from_offset:
                    f.destroy()
                    continue
                if tail > offset:
                    pos = offset - f.file_from_offset
                    f.wrote_position = f.flushed_position = pos
                    f.zero_tail(pos)
                keep.append(f)
            self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_last_file(self) -> None:
        with self._lock:
            if self.files:
                *rest, last = self.files
                last.destroy()
                self.files = rest

    def delete_files(self, doomed: list[MappedFile]) -> None:
        if not doomed:
            return
        gone = {id(f) for f in doomed}
        with self._lock:
            self.files = [f for f in self.files if id(f) not in gone]
        for f in doomed:
            f.destroy()

    def delete_expired_by_time(
        self, expired_ms: int, now_ms: int, clean_immediately: bool, batch_max: int
    ) -> int:
        """Delete the oldest files (never the last one) older than ``expired_ms`` by mtime, or all
        of them when cleaning immediately; stops at the first file it keeps."""
        files = self.files
        doomed = []
        for f in files[:-1]:
            if now_ms >= f.last_modified_ms() + expired_ms or clean_immediately:
                doomed.append(f)
                if len(doomed) >= batch_max:
                    break
            else:
                break
        self.delete_files(doomed)
        return len(doomed)

    def delete_expired_by_offset(self, offset: int, unit_size: int) -> int:
        """Consume-queue retention: delete leading files (never the last one) whose last entry
        points below commit-log ``offset``."""
        files = self.files
        doomed = []
        for f in files[:-1]:
            raw = f.read(self.file_size - unit_size, 8)
            if raw is None or int.from_bytes(raw, "big", signed=True) >= offset:
                break
            doomed.append(f)
        self.delete_files(doomed)
        return len(doomed)

    # -- flush -----------------------------------------------------------------------------------

    def flush(self, least_pages: int) -> bool:
        """Flush the file at the flushed position; True when nothing was left (Java semantics)."""
        f = self.find_by_offset(self.flushed_where, self.flushed_where == 0)
        if f is None:
            return True
        ts = f.store_timestamp
        where = f.file_from_offset + f.flush(least_pages, self.sync)
        result = where == self.flushed_where
        self.flushed_where = where
        if least_pages == 0:
            self.store_timestamp = ts
        return result

    def mark_flushed(self, offset: int, store_timestamp: int = 0) -> None:
        """Another process made everything below ``offset`` durable (the flush helper): move the
        flushed positions there, never back; ``store_timestamp`` is the store time of the last
        record below it (0: unknown, kept as is)."""
        if offset <= self.flushed_where:
            return
        for f in self.files:
            start = f.file_from_offset
            if start >= offset:
                break
            pos = min(offset - start, self.file_size)
            if pos > f.flushed_position:
                f.flushed_position = pos
        self.flushed_where = offset
        if store_timestamp > self.store_timestamp:
            self.store_timestamp = store_timestamp

    def flush_all(self) -> int:
        """Flush until the flushed position reaches everything written (one file per step, as a
        full file hands over to the next); returns it."""
        while True:
            before = self.flushed_where
            self.flush(0)
            if self.flushed_where >= self.max_offset or self.flushed_where == before:
                return self.flushed_where

    def close(self) -> None:
        with self._lock:
            for f in self.files:
                f.close()
            self.files = []

    def destroy(self) -> None:
        with self._lock:
            for f in self.files:
                f.destroy()
            self.files = []
        self.flushed_where = 0
        try:
            self.store_path.rmdir()
        except OSError:
            pass
