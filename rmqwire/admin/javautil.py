"""Java collection behaviour the Admin API and the CLI reproduce (stdlib only).

- iteration orders of ``HashMap``/``HashSet`` and ``ConcurrentHashMap`` (which backs
  ``java.util.Properties``): mqadmin prints maps and sets in those orders;
- ``java.util.Properties.load``, which reads the config texts of brokers and NameServers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from rmqwire.codec.java import concurrent_hashmap_transfer, java_string_hash
from rmqwire.model import MessageQueue

K = TypeVar("K", bound=Hashable)

# ---- hash table iteration orders -------------------------------------------------------------------


def string_hash(s: str | None) -> int:
    return 0 if s is None else java_string_hash(s)


def long_hash(v: int) -> int:
    """``Long.hashCode``."""
    v &= 0xFFFFFFFFFFFFFFFF
    h = (v ^ (v >> 32)) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def mq_hash(mq: MessageQueue) -> int:
    """``MessageQueue.hashCode``."""
    h = 1
    h = (31 * h + string_hash(mq.broker_name)) & 0xFFFFFFFF
    h = (31 * h + mq.queue_id) & 0xFFFFFFFF
    h = (31 * h + string_hash(mq.topic)) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def default_hash(k: Any) -> int:
    if isinstance(k, str):
        return string_hash(k)
    if isinstance(k, MessageQueue):
        return mq_hash(k)
    if isinstance(k, bool):
        return 1231 if k else 1237
    if isinstance(k, int):
        return long_hash(k)
    raise TypeError(f"no Java hash for {type(k).__name__}")


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size(n: int) -> int:
    cap = 1
    while cap < max(n, 1):
        cap <<= 1
    return cap


def hashmap_order(
    keys: Iterable[K], initial_capacity: int = 16, hash_fn: Callable[[Any], int] = default_hash
) -> list[K]:
    """The order a ``HashMap``/``HashSet`` iterates ``keys`` inserted in the given order.

    Resizing keeps the insertion order inside a bucket, so the order is (bucket in the final table,
    insertion order). Duplicates keep their first position. Tree bins (8+ keys colliding in a
    table of 64+) are not modelled.
    """
    seen: dict[K, None] = dict.fromkeys(keys)
    cap = _table_size(initial_capacity)
    while len(seen) > cap * 3 // 4:
        cap <<= 1
    ordered = sorted(enumerate(seen), key=lambda it: (_spread(hash_fn(it[1])) & (cap - 1), it[0]))
    return [k for _, k in ordered]


def putall_capacity(size: int) -> int:
    """The table an empty ``HashMap`` allocates for ``putAll`` of ``size`` entries."""
    return _table_size(int(size / 0.75 + 1.0))


def hashmap_putall_order(sources: Iterable[Iterable[K]]) -> list[K]:
    """The order of ``m = new HashMap<>(); m.putAll(a); m.putAll(b); ...`` where each source is
    a ``HashMap`` built by puts (a fastjson-decoded map): its keys in the order given."""
    groups = [hashmap_order(list(src)) for src in sources]
    if not groups:
        return []
    keys = [k for g in groups for k in g]
    return hashmap_order(keys, putall_capacity(len(groups[0])))


def concurrent_hashmap_order(
    keys: Iterable[K], initial_capacity: int = 16, hash_fn: Callable[[Any], int] = default_hash,
    *, presized: bool = True,
) -> list[K]:
    """The order a ``ConcurrentHashMap`` iterates ``keys`` put in the given order.

    Unlike HashMap, a resize moves the nodes of a bin ahead of its "last run" in reverse order,
    so the order depends on the history of resizes; this replays them (JDK 9+ transfer).
    ``initial_capacity`` is the constructor's argument (``java.util.Properties`` passes 8);
    ``presized=False`` is the no-argument constructor (a 16-bin table).
    """
    if presized:
        n = _table_size(int(1.0 + initial_capacity / 0.75))
    else:
        n = 16
    table: list[list[tuple[int, K]]] = [[] for _ in range(n)]
    size_ctl = n - (n >> 2)
    count = 0
    index: dict[K, None] = {}
    for k in keys:
        if k in index:
            continue  # a put of an existing key keeps its node where it is
        index[k] = None
        h = _spread(hash_fn(k)) & 0x7FFFFFFF
        table[h & (n - 1)].append((h, k))
        count += 1
        while count >= size_ctl:
            table = concurrent_hashmap_transfer(table, n)
            n <<= 1
            size_ctl = n - (n >> 2)  # Java: (old << 1) - (old >>> 1)
    return [k for bin_ in table for _, k in bin_]


def ordered(mapping: Mapping[K, Any], keys: list[K]) -> dict[K, Any]:
    return {k: mapping[k] for k in keys}


# ---- java.util.Properties.load ---------------------------------------------------------------------


def load_properties(data: bytes) -> dict[str, str]:
    """``Properties.load(InputStream)``: ISO-8859-1 text, ``\\uXXXX`` escapes, continuations,
    ``#``/``!`` comments, ``=``/``:``/whitespace separators. Keys in first-seen order (a repeated key
    keeps its place and takes the last value, as a map put does)."""
    text = data.decode("latin-1")
    out: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_property(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> Iterable[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        yield line


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return key, line[j:]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= len(s):
            try:
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                raise ValueError(f"malformed \\uxxxx encoding in {s!r}") from None
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
