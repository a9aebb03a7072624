"""The message index (Java ``IndexService``): ``index/`` files filled by the dispatcher, queried
by QUERY_MESSAGE.

Each dispatched record is indexed under ``topic#UNIQ_KEY`` and ``topic#k`` for every
space-separated KEYS value (rolled-back transactional records are not). When a file is full
the next one starts; the full one is flushed in the background and its end time becomes the
checkpoint's ``indexMsgTimestamp``. The file being filled is flushed at shutdown. After a crash,
files newer than ``indexMsgTimestamp`` are dropped and rebuilt from what recovery re-dispatches.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rmqwire.server.store.checkpoint import StoreCheckpoint
from rmqwire.server.store.config import MessageStoreConfig
from rmqwire.server.store.index_file import IndexFile, PrefixedKeyHash, file_size_of
from rmqwire.server.store.mapped_file import StoreLoadError
from rmqwire.server.store.results import DispatchBatch, DispatchRequest

__all__ = ["IndexService", "QueryOffsetResult", "index_file_name"]

log = logging.getLogger(__name__)

_TRAN_MASK = 0xC
_TRAN_ROLLBACK = 0xC


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


def index_file_name(now_ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local time as ``yyyyMMddHHmmssSSS``."""
    t = datetime.datetime.fromtimestamp(now_ms / 1000.0)
    return t.strftime("%Y%m%d%H%M%S") + f"{now_ms % 1000:03d}"


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


class IndexService:
    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        now_ms: Callable[[], int],
        sync: Callable[[int], None] = os.fdatasync,
    ) -> None:
        self.config = config
        self.hash_slot_num = config.max_hash_slot_num
        self.index_num = config.max_index_num
        self.store_path: Path = config.index_dir
        self._now_ms = now_ms
        self._sync = sync
        self.checkpoint: StoreCheckpoint | None = None
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._flushers: list[threading.Thread] = []
        #: The file being filled, read without the lock by the dispatcher (two keys per record);
        #: only ``_last_file`` sets it, and the lists' owners clear it.
        self._current: IndexFile | None = None
        self._key_hash: tuple[str, PrefixedKeyHash] = ("", PrefixedKeyHash("#"))  # the last topic's

    # -- lifecycle ---------------------------------------------------------------------------------

    def load(self, last_exit_ok: bool, checkpoint: StoreCheckpoint) -> None:
        """Map the existing files in name (time) order; after a crash drop those that end after
        the checkpoint's index time (their tail may be missing: recovery rebuilds them)."""
        self.checkpoint = checkpoint
        if not self.store_path.is_dir():
            return
        size = file_size_of(self.hash_slot_num, self.index_num)
        for path in sorted(self.store_path.iterdir()):
            if not path.is_file() or not path.name.isdigit():
                continue
            if path.stat().st_size != size:
                raise StoreLoadError(
                    f"{path}: {path.stat().st_size} bytes, not the {size} of maxHashSlotNum="
                    f"{self.hash_slot_num} maxIndexNum={self.index_num}"
                )
            f = IndexFile(path, self.hash_slot_num, self.index_num, sync=self._sync)
            f.load()
            if not last_exit_ok and f.end_timestamp > checkpoint.index_msg_timestamp:
                log.info("index file %s is newer than the checkpoint: rebuilt", path.name)
                f.close(flush=False)
                f.destroy()
                continue
            self.files.append(f)

    def _join_flushers(self) -> None:
        for t in self._flushers:
            t.join()
        self._flushers = []

    def shutdown(self) -> None:
        self._join_flushers()
        with self._lock:
            files, self.files = self.files, []
            self._current = None
        for f in files:
            try:
                f.close()
            except Exception:
                log.exception("index file %s: shutdown flush failed", f.file_name)

    def close(self) -> None:
        """Unmap without flushing (a crash, or a failed load)."""
        self._join_flushers()
        with self._lock:
            files, self.files = self.files, []
            self._current = None
        for f in files:
            f.close(flush=False)

    def destroy(self) -> None:
        self._join_flushers()
        with self._lock:
            files, self.files = self.files, []
            self._current = None
        for f in files:
            f.destroy()

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)

    def delete_expired_file(self, min_phy_offset: int) -> None:
        """Drop leading files whose entries all point below the commit log's start; the newest
        file always stays."""
        self._join_flushers()
        with self._lock:
            doomed = []
            for f in self.files[:-1]:
                if f.end_phy_offset >= min_phy_offset:
                    break
                doomed.append(f)
            self.files = self.files[len(doomed):]
        for f in doomed:
            log.info("index file %s expired: deleted", f.file_name)
            f.destroy()

    # -- building ----------------------------------------------------------------------------------

    def build_index(self, req: DispatchRequest) -> None:
        f = self._current
        if f is None or f.is_write_full:
            f = self._last_file()
        if f is None:
            return
        if req.commit_log_offset < f.end_phy_offset:  # indexed before a restart
            return
        if req.sys_flag & _TRAN_MASK == _TRAN_ROLLBACK:
            return
        topic, key_hash = self._key_hash
        if topic != req.topic:  # a batch's records share one: its "topic#" is hashed once
            key_hash = PrefixedKeyHash(build_key(req.topic, ""))
            self._key_hash = (req.topic, key_hash)
        if req.uniq_key is not None:
            f = self._put_hash(f, key_hash(req.uniq_key), req)
            if f is None:
                return
        if req.keys:
            for key in req.keys.split(" "):
                if key:
                    f = self._put_hash(f, key_hash(key), req)
                    if f is None:
                        return

    def build_index_batch(self, batch: DispatchBatch) -> None:
        """``build_index`` of each record of a batch, the keys hashed first and put in one loop.
        A key equal to the previous one reuses its hash: 5.3.3 gives every record of a batch the
        batch's UNIQ_KEY."""
        f = self._current
        if f is None or f.is_write_full:
            f = self._last_file()
        if f is None or batch.sys_flag & _TRAN_MASK == _TRAN_ROLLBACK:
            return
        # Records below the file's end were indexed before a restart; a batch's offsets grow, so
        # the file's end before the batch decides for every record.
        indexed_below = f.end_phy_offset
        topic, key_hash = self._key_hash
        if topic != batch.topic:
            key_hash = PrefixedKeyHash(build_key(batch.topic, ""))
            self._key_hash = (batch.topic, key_hash)
        hashes: list[int] = []
        offsets: list[int] = []
        add_hash, add_offset = hashes.append, offsets.append
        last_key, last_hash = None, 0
        for off, keys, uniq in zip(batch.commit_log_offsets, batch.keys, batch.uniq_keys, strict=True):
            if off < indexed_below:
                continue
            if uniq is not None:
                if uniq != last_key:
                    last_key, last_hash = uniq, key_hash(uniq)
                add_hash(last_hash)
                add_offset(off)
            if keys:
                for key in keys.split(" "):
                    if key:
                        if key != last_key:
                            last_key, last_hash = key, key_hash(key)
                        add_hash(last_hash)
                        add_offset(off)
        done = 0
        while True:
            done = f.put_hashes(hashes, offsets, batch.store_timestamp, done)
            if done >= len(hashes):
                if f.is_write_full and (not offsets or offsets[-1] < batch.commit_log_offsets[-1]):
                    # record by record, the next record would find the file full and start the next
                    self._last_file()
                return
            log.warning("index file %s is full, starting another", f.file_name)
            nxt = self._last_file()
            if nxt is None or nxt is f:
                log.error("index of the record at %d stopped: no index file", offsets[done])
                return
            f = nxt

    def _put_hash(self, f: IndexFile, key_hash: int, req: DispatchRequest) -> IndexFile | None:
        while not f.put_hash(key_hash, req.commit_log_offset, req.store_timestamp):
            log.warning("index file %s is full, starting another", f.file_name)
            nxt = self._last_file()
            if nxt is None or nxt is f:
                log.error("index of the record at %d stopped: no index file", req.commit_log_offset)
                return None
            f = nxt
        return f

    def _last_file(self) -> IndexFile | None:
        with self._lock:
            last = self.files[-1] if self.files else None
            if last is not None and not last.is_write_full:
                self._current = last
                return last
            end_phy = last.end_phy_offset if last is not None else 0
            end_ts = last.end_timestamp if last is not None else 0
            now = self._now_ms()
            try:
                self.store_path.mkdir(parents=True, exist_ok=True)
                path = self.store_path / index_file_name(now)
                while path.exists():  # two files within one millisecond (tiny test files)
                    now += 1
                    path = self.store_path / index_file_name(now)
                f = IndexFile(path, self.hash_slot_num, self.index_num, end_phy, end_ts, sync=self._sync)
            except OSError as e:
                log.error("cannot create an index file: %s", e)
                return None
            self.files.append(f)
            self._current = f
        if last is not None:
            t = threading.Thread(target=self._flush_full, args=(last,), name="FlushIndexFileThread", daemon=True)
            self._flushers = [x for x in self._flushers if x.is_alive()]
            self._flushers.append(t)
            t.start()
        return f

    def _flush_full(self, f: IndexFile) -> None:
        try:
            f.flush()
            cp = self.checkpoint
            if cp is not None and f.is_write_full:
                with self._checkpoint_lock:  # flushes of two full files may finish out of order
                    cp.index_msg_timestamp = max(cp.index_msg_timestamp, f.end_timestamp)
                    cp.flush()
        except (OSError, ValueError) as e:
            log.error("flush of the full index file %s failed: %s", f.file_name, e)

    # -- queries -----------------------------------------------------------------------------------

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Commit-log offsets stored under ``topic#key`` with a store time in [begin, end],
        newest file first; the result also tells how far the index reaches."""
        max_num = min(max_num, self.config.max_msgs_num_batch)
        result = QueryOffsetResult()
        with self._lock:
            files = list(self.files)
        if not files:
            return result
        result.index_last_update_timestamp = files[-1].end_timestamp
        result.index_last_update_phyoffset = files[-1].end_phy_offset
        full_key = build_key(topic, key)
        for f in reversed(files):
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(result.phy_offsets, full_key, max_num, begin, end)
            if f.begin_timestamp < begin or len(result.phy_offsets) >= max_num:
                break
        return result
