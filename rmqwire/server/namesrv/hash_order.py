"""The iteration order of Java's hash tables, so our bodies list things in the order Java's do.

A Java client keeps the order of the lists it receives (``queueDatas``, ``brokerDatas``) and
``mqadmin topicRoute`` prints them, so rmqwire lists a topic's brokers in the order the official
NameServer's ``HashMap`` / ``HashSet`` would. Java iterates a hash table bucket by bucket; the
bucket of a key is ``spread(hashCode) & (capacity - 1)`` and a bucket keeps insertion order
(a HashMap's resize splits buckets without reordering them; a ConcurrentHashMap's reverses part of
one: ``ConcurrentHashMapBins``). Treeified buckets (8+ colliding keys in a table of 64+) are not
modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from rmqwire.codec.java import Bin, concurrent_hashmap_transfer, java_string_hash

K = TypeVar("K")

_MIN_CAPACITY = 16


def java_long_hash(v: int) -> int:
    """``Long.hashCode``: the two 32-bit halves xor-ed, as a signed int."""
    v &= 0xFFFFFFFFFFFFFFFF
    h = (v ^ (v >> 32)) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def _bucket(h: int, capacity: int) -> int:
    h &= 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def hashmap_capacity(size: int, initial: int = _MIN_CAPACITY) -> int:
    """The table size of a ``HashMap`` grown by puts to ``size`` entries (resize past 3/4 full)."""
    cap = initial
    while size > cap * 3 // 4:
        cap *= 2
    return cap


def copy_capacity(size: int) -> int:
    """The table size of ``new HashSet<>(collection)`` / ``new HashMap<>(map)`` of ``size``."""
    want = max(int(size / 0.75) + 1, _MIN_CAPACITY)
    cap = 1
    while cap < want:
        cap *= 2
    return cap


def concurrent_capacity(size: int, initial: int = _MIN_CAPACITY) -> int:
    """The table size of a ``ConcurrentHashMap`` grown to ``size`` (resize at 3/4 full)."""
    cap = initial
    while size >= cap - (cap >> 2):
        cap *= 2
    return cap


def concurrent_initial(initial_capacity: int) -> int:
    """Table size of ``new ConcurrentHashMap<>(n)`` (it sizes for n * 1.5 + 1)."""
    want = initial_capacity + (initial_capacity >> 1) + 1
    cap = 1
    while cap < want:
        cap *= 2
    return cap


def concurrent_putall_capacity(size: int) -> int:
    """Table size of ``new ConcurrentHashMap<>()`` after ``putAll`` of ``size`` entries: tryPresize
    allocates the table for size * 1.5 + 1, finds it below its target still and doubles it once
    (8 bins for 2 entries)."""
    cap = concurrent_initial(size)
    return cap if size == 0 else 2 * cap


class ConcurrentHashMapBins:
    """The bins of a ``new ConcurrentHashMap<String, ?>()`` under puts and removes, for its
    iteration order where history matters: 16 bins, doubled when 3/4 full and never shrunk; a
    resize reverses part of a bin (``concurrent_hashmap_transfer``)."""

    __slots__ = ("_count", "_table")

    def __init__(self) -> None:
        self._table: list[Bin] = [[] for _ in range(_MIN_CAPACITY)]
        self._count = 0

    def _bin(self, key: str) -> tuple[int, Bin]:
        h = _bucket(java_string_hash(key), 1 << 31)  # spread, HASH_BITS
        return h, self._table[h & (len(self._table) - 1)]

    def put(self, key: str) -> None:
        """A put of an absent key (a present one keeps its place)."""
        h, bin_ = self._bin(key)
        if any(k == key for _, k in bin_):
            return
        bin_.append((h, key))
        self._count += 1
        n = len(self._table)
        if self._count >= n - (n >> 2):
            self._table = concurrent_hashmap_transfer(self._table, n)

    def remove(self, key: str) -> None:
        _, bin_ = self._bin(key)
        for i, (_, k) in enumerate(bin_):
            if k == key:
                del bin_[i]
                self._count -= 1
                return

    def __iter__(self) -> Iterator[str]:
        return (k for bin_ in self._table for _, k in bin_)

    def __len__(self) -> int:
        return self._count


def java_order(
    keys: Iterable[K], capacity: int, hash_fn: Callable[[K], int] = java_string_hash  # type: ignore[assignment]
) -> list[K]:
    """``keys`` (in insertion order) in the order a Java table of ``capacity`` iterates them."""
    return sorted(keys, key=lambda k: _bucket(hash_fn(k), capacity))


def hashmap_order(keys: Iterable[K], hash_fn: Callable[[K], int] = java_string_hash) -> list[K]:  # type: ignore[assignment]
    """Iteration order of a ``HashMap``/``HashSet`` filled by puts in the given order."""
    keys = list(keys)
    return java_order(keys, hashmap_capacity(len(keys)), hash_fn)


def long_key_order(keys: Iterable[int]) -> list[int]:
    """Iteration order of a ``HashMap<Long, ?>`` filled in the given order."""
    return hashmap_order(keys, java_long_hash)
