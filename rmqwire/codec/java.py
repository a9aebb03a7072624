"""Java-compatible helpers the codec needs in more than one place (stdlib only).

- fastjson's string escaping (``SerializeWriter`` default features, and BrowserCompatible);
- ``Double.toString``;
- ``String.compareTo`` order as a sort key, and ``String.hashCode``;
- ``System.currentTimeMillis``;
- a ``ConcurrentHashMap`` resize (its bins' new order), for the server's and the CLI's orders.
"""

from __future__ import annotations

import decimal
import math
import re
import struct
import time
from typing import Any

__all__ = [
    "FASTJSON_BROWSER_ESCAPES",
    "FASTJSON_BROWSER_NEEDS_ESCAPE",
    "FASTJSON_ESCAPES",
    "FASTJSON_NEEDS_ESCAPE",
    "fastjson_quote",
    "concurrent_hashmap_transfer",
    "java_double_str",
    "java_string_hash",
    "java_string_sort_key",
    "now_ms",
]

#: A bin of a hash table model: (spread hash, key) in iteration order.
Bin = list[tuple[int, Any]]

# ---- fastjson string escaping ---------------------------------------------------------------------

#: fastjson 1.2.83's default escaping (``str.translate`` table): control characters get their short
#: form where one exists, else ``\\u00XX`` with uppercase hex; DEL and the JavaScript line
#: separators U+2028/U+2029 are escaped too; quote and backslash. Other non-ASCII is written raw
#: and "/" is left alone (golden vectors from the Java classes pin this).
FASTJSON_ESCAPES: dict[int, str] = {i: f"\\u{i:04X}" for i in (*range(0x20), 0x7F, 0x2028, 0x2029)}
FASTJSON_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
FASTJSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})

#: BrowserCompatible (the NameServer's standard route) also writes "/" as ``\\/``. It escapes every
#: non-ASCII UTF-16 unit as well, which callers do for non-ASCII text as a whole; so this table is
#: only applied to ASCII text and U+2028/U+2029 have no entry.
FASTJSON_BROWSER_ESCAPES: dict[int, str] = {
    c: e for c, e in FASTJSON_ESCAPES.items() if c < 0x80
} | {ord("/"): "\\/"}


def _char_class(table: dict[int, str]) -> re.Pattern[str]:
    """A regex matching any character that ``table`` escapes (a pre-check before translate)."""
    return re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(table)) + "]")


FASTJSON_NEEDS_ESCAPE = _char_class(FASTJSON_ESCAPES)
FASTJSON_BROWSER_NEEDS_ESCAPE = _char_class(FASTJSON_BROWSER_ESCAPES)


def fastjson_quote(s: str) -> str:
    """``s`` as a JSON string literal the way fastjson writes it by default."""
    if FASTJSON_NEEDS_ESCAPE.search(s) is None:
        return f'"{s}"'
    return '"' + s.translate(FASTJSON_ESCAPES) + '"'


# ---- Double.toString ------------------------------------------------------------------------------

_MIN_NORMAL = 2.2250738585072014e-308


def java_double_str(x: float) -> str:
    """Java ``Double.toString``: ``1.5``, ``-0.0``, ``1.0E7``, ``1.0E-4``, ``NaN``, ``-Infinity``.

    Plain decimal for 1e-3 <= |x| < 1e7, else ``d.dddE<exp>``; always at least one fractional
    digit. The digits are the shortest that read back as ``x`` (Python's repr); where one digit
    would do for a subnormal, Java prints two (4.9E-324, not 5.0E-324). This is byte for byte what
    fastjson 1.2.83 writes (checked on 173 000 doubles). JDK 17's own Double.toString prints about
    1 in 70 of those with more digits than needed (9.999999999999999E22 for 1e23); both forms
    parse back to the same double.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    a = abs(x)
    if a == 0.0 or 1e-3 <= a < 1e7:
        return repr(x)  # Python's layout equals Java's in this range
    r = repr(a)
    if "e" in r:
        mant, _, exp_s = r.partition("e")
        exp = int(exp_s)
        digits = mant.replace(".", "")
    else:  # Python prints 1e7 <= a < 1e16 and 1e-4 <= a < 1e-3 plainly
        int_part, _, frac = r.partition(".")
        if int_part != "0":
            exp = len(int_part) - 1
            digits = int_part + frac
        else:
            sig = frac.lstrip("0")
            exp = -(len(frac) - len(sig) + 1)
            digits = sig
    digits = digits.rstrip("0") or "0"
    if len(digits) == 1 and a < _MIN_NORMAL:
        # Java needs two digits here; take the two-digit decimal nearest the exact value.
        scaled = decimal.Decimal(a).scaleb(-exp).quantize(decimal.Decimal("0.1"))
        digits = str(scaled).replace(".", "")
        if len(digits) == 3:  # rounded up to 10.0
            digits, exp = "10", exp + 1
    out = f"{digits[0]}.{digits[1:] or '0'}E{exp}"
    return "-" + out if x < 0 else out


# ---- String.compareTo -----------------------------------------------------------------------------


def java_string_sort_key(s: str) -> bytes:
    """A key that sorts str like Java ``String.compareTo``.

    Java compares UTF-16 code units, Python code points; the orders differ when a supplementary
    character meets a BMP character >= U+E000. Big-endian UTF-16 bytes sort like the code units.
    """
    return s.encode("utf-16-be", "surrogatepass")


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``31*h + c`` over UTF-16 code units, int32 overflow."""
    h = 0
    for (cu,) in struct.iter_unpack(">H", java_string_sort_key(s)):
        h = (31 * h + cu) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# ---- System.currentTimeMillis ---------------------------------------------------------------------


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (Java ``System.currentTimeMillis``)."""
    return time.time_ns() // 1_000_000


# ---- String.valueOf -------------------------------------------------------------------------------


def java_str(value: object) -> str:
    """Java string concatenation of a value: ``null`` for None, ``true``/``false`` for bools."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---- ConcurrentHashMap resize ---------------------------------------------------------------------


def concurrent_hashmap_transfer(table: list[Bin], n: int) -> list[Bin]:
    """The 2n bins a ``ConcurrentHashMap`` resize (JDK 9+ ``transfer``) makes of ``table``'s n.

    Unlike HashMap's, it moves the nodes of a bin ahead of its "last run" (the longest tail going
    to one side) in reverse order, so a map's order depends on the history of its resizes.
    """
    new: list[Bin] = [[] for _ in range(2 * n)]
    for i, bin_ in enumerate(table):
        if not bin_:
            continue
        run_bit = bin_[0][0] & n
        last_run = 0
        for j in range(1, len(bin_)):
            b = bin_[j][0] & n
            if b != run_bit:
                run_bit, last_run = b, j
        lo: Bin = []
        hi: Bin = []
        if run_bit == 0:
            lo = list(bin_[last_run:])
        else:
            hi = list(bin_[last_run:])
        for node in bin_[:last_run]:
            (lo if node[0] & n == 0 else hi).insert(0, node)
        new[i], new[i + n] = lo, hi
    return new
