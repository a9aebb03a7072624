"""One index file (Java ``IndexFile`` + ``IndexHeader``): a hash table from message keys to
commit-log offsets, memory-mapped like the other store files.

| region | layout (big-endian) |
|---|---|
| header, 40 bytes | beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64, hashSlotCount i32, indexCount i32 |
| slots | ``hashSlotNum`` x i32: number of the newest entry of that slot, 0 = empty |
| entries | ``indexNum`` x 20 bytes: keyHash i32, phyOffset i64, timeDiff i32 (seconds after beginTimestamp), prevIndex i32 |

Entry 0 is never used (``indexCount`` starts at 1), so 0 ends a chain. The header is written into
the mapping after every put, as Java's setters do (after the last put of a batch's records, which
are dispatched as one), so a reader of the file sees it current.
"""

from __future__ import annotations

import functools
import operator
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

from rmqwire.codec.java import java_string_hash
from rmqwire.server.store.mapped_file import MappedFile

__all__ = ["INDEX_HEADER_SIZE", "IndexFile", "PrefixedKeyHash", "index_key_hash"]

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
_INT_MAX = 2**31 - 1

_HEADER = struct.Struct(">qqqqii")
_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")


#: 31**k mod 2**32, highest power first: Java's ``31*h + c`` loop over n ASCII bytes is the dot
#: product of the bytes with the last n of these, evaluated in C (``sum(map(mul, ...))``) instead
#: of one Python step per character (it was the broker's top cost on a batch send: two keys per
#: message, ~50 characters each).
_HASH_POWERS_MAX = 256
_HASH_POWERS = tuple(pow(31, k, 1 << 32) for k in reversed(range(_HASH_POWERS_MAX)))


#: 31**k mod 2**32, lowest power first: joins a prefix's hash to the rest's.
_POW31 = tuple(pow(31, k, 1 << 32) for k in range(_HASH_POWERS_MAX + 1))


def _fold(h: int) -> int:
    """A 32-bit hash as ``abs`` of Java's int, 0 for Integer.MIN_VALUE (whose abs overflows)."""
    h &= 0xFFFFFFFF
    return 0 if h == 0x80000000 else (0x100000000 - h if h & 0x80000000 else h)


def _raw_hash(key: str) -> int:
    """Java's ``String.hashCode`` as an unsigned 32-bit value."""
    n = len(key)
    if n <= _HASH_POWERS_MAX and key.isascii():  # the common case, without the UTF-16 round trip
        return sum(map(operator.mul, key.encode("ascii"), _HASH_POWERS[_HASH_POWERS_MAX - n :])) & 0xFFFFFFFF
    return java_string_hash(key) & 0xFFFFFFFF


def index_key_hash(key: str) -> int:
    """``abs(key.hashCode())``, 0 for Integer.MIN_VALUE (whose abs overflows)."""
    return _fold(_raw_hash(key))


class PrefixedKeyHash:
    """``index_key_hash(prefix + key)`` for one prefix (``topic#``) and many keys: the prefix is
    hashed once, as ``hash(a + b) = hash(a) * 31**len(b) + hash(b)`` (mod 2**32, ``len`` in UTF-16
    units, so non-ASCII keys take the whole string)."""

    __slots__ = ("prefix", "_prefix_hash")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._prefix_hash = _raw_hash(prefix)

    def __call__(self, key: str) -> int:
        n = len(key)
        if n <= _HASH_POWERS_MAX and key.isascii():
            return _fold(self._prefix_hash * _POW31[n] + _raw_hash(key))
        return index_key_hash(self.prefix + key)


@functools.lru_cache(maxsize=64)
def _entries(n: int) -> struct.Struct:
    """``n`` consecutive index entries."""
    return struct.Struct(">" + "iqii" * n)


def file_size_of(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


class IndexFile:
    """``index/<yyyyMMddHHmmssSSS>``. A new file continues from the previous one's end
    (``end_phy_offset``/``end_timestamp``), which the first put then replaces."""

    def __init__(
        self,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
        *,
        sync: Callable[[int], None] = os.fdatasync,
    ) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = file_size_of(hash_slot_num, index_num)
        self._entries_at = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self._sync = sync
        self._mf = MappedFile(path, self.file_size, create=True)
        self._mf.wrote_position = self.file_size  # slots change anywhere: flushes sync it all
        self.mm = self._mf.mm
        self.begin_timestamp = 0
        self.end_timestamp = 0
        self.begin_phy_offset = 0
        self.end_phy_offset = 0
        self.hash_slot_count = 0
        self.index_count = 1
        if end_phy_offset > 0:
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            self.begin_timestamp = self.end_timestamp = end_timestamp
        if end_phy_offset > 0 or end_timestamp > 0:
            self._write_header()

    @property
    def path(self) -> Path:
        return self._mf.path

    @property
    def file_name(self) -> str:
        return self._mf.path.name

    def load(self) -> None:
        """Read the header of an existing file."""
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        ) = _HEADER.unpack_from(self.mm, 0)
        if self.index_count <= 0:
            self.index_count = 1

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self.mm,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add ``key`` -> ``phy_offset``; False when the file is full."""
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``put_key`` for a key whose ``index_key_hash`` is known."""
        count = self.index_count
        if count >= self.index_num:
            return False
        slot_at = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        mm = self.mm
        prev = _I32.unpack_from(mm, slot_at)[0]
        if prev <= 0 or prev > count:
            prev = 0
            self.hash_slot_count += 1
        begin = self.begin_timestamp
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if begin <= 0 or store_timestamp < begin:
            time_diff = 0
        else:
            # Java divides a long: truncation toward zero (both are >= 0 here), then clamps
            time_diff = min((store_timestamp - begin) // 1000, _INT_MAX)
        _ENTRY.pack_into(mm, self._entries_at + count * INDEX_SIZE, key_hash, phy_offset, time_diff, prev)
        _I32.pack_into(mm, slot_at, count)
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        # Java's IndexHeader setters write each field into the mapping as it changes: the header
        # is current for a reader or after a crash at every put, so it is written here too.
        self._write_header()
        return True

    def put_hashes(self, key_hashes: Sequence[int], phy_offsets: Sequence[int], store_timestamp: int,
                   start: int = 0) -> int:
        """``put_hash`` for ``key_hashes[start:]`` (one store time), the entries in one write and
        the header once at the end: the file's bytes are those of the puts one by one. Returns
        the index after the last key put (``len(key_hashes)`` unless the file filled up)."""
        count = self.index_count
        stop = min(len(key_hashes), start + self.index_num - count)
        if stop <= start:
            return start
        begin = self.begin_timestamp
        # Java's long division truncates toward zero (both are >= 0 where it runs), then clamps.
        first_diff = 0 if begin <= 0 or store_timestamp < begin else min((store_timestamp - begin) // 1000, _INT_MAX)
        if count <= 1:  # the file's first entry sets its begin, for the entries after it
            self.begin_phy_offset = phy_offsets[start]
            self.begin_timestamp = begin = store_timestamp
        diff = 0 if begin <= 0 or store_timestamp < begin else min((store_timestamp - begin) // 1000, _INT_MAX)
        mm = self.mm
        slots = self.hash_slot_num
        read_slot = _I32.unpack_from
        heads: dict[int, int] = {}  # slot position -> its newest entry, written after the entries
        flat: list[int] = []
        slot_count = self.hash_slot_count
        c = count
        for j in range(start, stop):
            key_hash = key_hashes[j]
            slot_at = INDEX_HEADER_SIZE + (key_hash % slots) * HASH_SLOT_SIZE
            prev = heads.get(slot_at)
            if prev is None:
                prev = read_slot(mm, slot_at)[0]
                if prev <= 0 or prev > c:
                    prev = 0
                    slot_count += 1
            heads[slot_at] = c
            flat += (key_hash, phy_offsets[j], diff, prev)
            c += 1
        flat[2] = first_diff
        _entries(stop - start).pack_into(mm, self._entries_at + count * INDEX_SIZE, *flat)
        write_slot = _I32.pack_into
        for slot_at, entry in heads.items():
            write_slot(mm, slot_at, entry)
        self.index_count = c
        self.hash_slot_count = slot_count
        self.end_phy_offset = phy_offsets[stop - 1]
        self.end_timestamp = store_timestamp
        self._write_header()
        return stop

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select_phy_offsets(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        """Append to ``out`` the offsets stored under ``key``'s hash between ``begin`` and ``end``
        (ms), newest first, until ``out`` holds ``max_num``."""
        if not self._mf.available:
            return
        key_hash = index_key_hash(key)
        slot_at = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        mm = self.mm
        count = self.index_count
        try:
            (current,) = _I32.unpack_from(mm, slot_at)
            if current <= 0 or current > count or count <= 1:
                return
            seen = 0
            while len(out) < max_num and seen < count:  # 'seen' bounds a corrupt, cyclic chain
                seen += 1
                hash_read, phy, time_diff, prev = _ENTRY.unpack_from(mm, self._entries_at + current * INDEX_SIZE)
                if time_diff < 0:
                    break
                time_read = self.begin_timestamp + time_diff * 1000
                if hash_read == key_hash and begin <= time_read <= end:
                    out.append(phy)
                if prev <= 0 or prev > count or prev == current or time_read < begin:
                    break
                current = prev
        except ValueError:  # unmapped by a concurrent close
            return

    def flush(self) -> None:
        """Write the header and make the file durable."""
        if not self._mf.available:
            return
        self._write_header()
        self._mf.flushed_position = 0
        self._mf.flush(0, self._sync)

    def close(self, flush: bool = True) -> None:
        if flush:
            self.flush()
        self._mf.close()

    def destroy(self) -> None:
        self._mf.destroy()
