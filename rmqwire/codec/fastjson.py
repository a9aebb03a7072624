"""Reading and writing JSON the way Java's fastjson 1.2.83 does (RemotingSerializable bodies).

fastjson's default output is not always JSON: non-string map keys are written unquoted
(``{0:"127.0.0.1:10911"}``) and object keys as JSON objects (``{{"brokerName":...}:{...}}``).
``loads`` accepts that, plus what fastjson's lenient reader accepts (unquoted identifier keys,
single-quoted strings, ``\\x`` escapes, stray commas). Standard JSON goes through the stdlib
``json`` C parser first; the hand-written scanner only runs when that fails.
Spec: shared/spec/wire-format.md section 9.1.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from rmqwire.codec.java import (
    FASTJSON_BROWSER_ESCAPES,
    FASTJSON_BROWSER_NEEDS_ESCAPE,
    fastjson_quote,
    java_double_str,
    java_string_sort_key,
)
from rmqwire.errors import CodecError
from rmqwire.model import MessageQueue

__all__ = ["MAX_DEPTH", "FrozenObject", "dumps", "java_double", "loads"]

#: fastjson refuses deeper nesting ("array level > 512"); so do we, without recursion.
MAX_DEPTH = 512


class FrozenObject(Mapping[str, Any]):
    """An immutable, hashable JSON object: what a JSON-object map key parses into.

    fastjson writes ``Map<MessageQueue, V>`` keys as objects; a Python dict key must be hashable.
    Nested objects become FrozenObject and arrays tuples. Equality is dict equality (order-free);
    iteration keeps the written order so re-encoding reproduces the input.
    """

    __slots__ = ("_d", "_h")

    def __init__(self, items: Mapping[Any, Any] | Any = ()) -> None:
        self._d: dict[Any, Any] = {k: _freeze(v) for k, v in dict(items).items()}
        self._h: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._h is None:
            self._h = hash(frozenset(self._d.items()))
        return self._h

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenObject):
            return self._d == other._d
        if isinstance(other, Mapping):
            # Freeze the other side too, so {"a": [1]} equals the frozen {"a": (1,)}.
            return self._d == {k: _freeze(v) for k, v in other.items()}
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenObject({self._d!r})"


def _freeze(v: Any) -> Any:
    if isinstance(v, FrozenObject):
        return v
    if isinstance(v, Mapping):
        return FrozenObject(v)
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


# ---- reading ---------------------------------------------------------------------------------


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse fastjson output (or any standard JSON) into Python values.

    Objects become dicts (object-valued keys become FrozenObject, unquoted number keys int),
    arrays lists, decimals float, integers int (any size). Raises CodecError with the offset
    (bytes for bytes input, characters for str input) on malformed input.
    """
    raw: bytes | None = None
    if not isinstance(text, str):
        raw = bytes(text)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(f"JSON body is not valid UTF-8: {e.reason}", offset=e.start) from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass  # not standard JSON (or too deep for the C parser)
    try:
        return loads_lenient(text)
    except _ScanError as e:
        if raw is None or text.isascii():
            raise
        # Report a byte offset into what the caller passed in.
        offset = len(text[: e.char_offset].encode("utf-8"))
        raise CodecError(e.reason, offset=offset) from None


def loads_lenient(text: str) -> Any:
    """``loads`` for text already known not to be standard JSON (skips the stdlib attempt)."""
    fast = _loads_rewritten(text)
    if fast is not _NO_RESULT:
        return fast
    return _Scanner(text).parse()


# fastjson's most common departure from JSON, unquoted integer keys (``{0:"addr"}``), is
# rewritten into sentinel-marked string keys so the C parser still does the work; a hook turns
# them back into ints. A candidate key is rewritten only outside strings, judged by the parity
# of unescaped quotes before it (JSON's own rule, so if the C parser accepts the result, every
# rewrite was a real key). Object keys and the rest of fastjson's leniency go to the scanner.
_INT_KEY = re.compile(r"[{,][ \t\n\r]*(-?[0-9]+)(?=[ \t\n\r]*:)")
_ESCAPED_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*\\"')  # an odd run of backslashes, then '"'
_SENTINEL = "\x00"
_NO_RESULT = object()


def _restore_int_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    d = dict(pairs)
    if _SENTINEL not in "".join(d):  # C-speed test; most objects have no rewritten key
        return d
    return {(int(k[1:]) if k[:1] == _SENTINEL else k): v for k, v in pairs}


def _loads_rewritten(text: str) -> Any:
    if "\\u0000" in text:
        return _NO_RESULT  # a real key could start with the sentinel: let the scanner decide
    escaped = [m.end() - 1 for m in _ESCAPED_QUOTE.finditer(text)] if '\\"' in text else []
    out: list[str] = []
    last = counted_to = quotes = ei = 0
    for m in _INT_KEY.finditer(text):
        p = m.start()
        quotes += text.count('"', counted_to, p)
        counted_to = p
        while ei < len(escaped) and escaped[ei] < p:
            quotes -= 1
            ei += 1
        if quotes & 1:
            continue  # inside a string
        k0, k1 = m.span(1)
        out.append(text[last:k0])
        out.append('"\\u0000')
        out.append(text[k0:k1])
        out.append('"')
        last = k1
    if not out:
        return _NO_RESULT
    out.append(text[last:])
    try:
        return json.loads("".join(out), object_pairs_hook=_restore_int_keys)
    except (ValueError, RecursionError):
        return _NO_RESULT


_WS = frozenset(" \t\n\r\f\b")
# fastjson writes 1.0E7 / 4.9E-324 and, with WriteClassName, type suffixes (1L, 1.5F, 2D ...).
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?([LSBFD])?")
_IDENT = re.compile(r"[A-Za-z_$][\w$.\-]*")
_PLAIN_DQ = re.compile(r'[^"\\]*')
_PLAIN_SQ = re.compile(r"[^'\\]*")
_SIMPLE_ESCAPES = {
    '"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "F": "\f", "n": "\n",
    "r": "\r", "t": "\t", "v": "\x0b", "0": "\x00", "1": "\x01", "2": "\x02", "3": "\x03",
    "4": "\x04", "5": "\x05", "6": "\x06", "7": "\x07",
}
_HEX = frozenset("0123456789abcdefABCDEF")

class _ScanError(CodecError):
    """A scanner error; ``char_offset`` indexes the decoded text."""

    def __init__(self, reason: str, char_offset: int) -> None:
        super().__init__(reason, offset=char_offset)
        self.reason = reason
        self.char_offset = char_offset


# Frame states while inside an object.
_EXPECT_KEY, _IN_KEY, _EXPECT_VALUE, _EXPECT_COMMA = range(4)


class _Scanner:
    """Iterative (explicit-stack) parser, so hostile nesting cannot raise RecursionError."""

    __slots__ = ("s", "n", "pos")

    def __init__(self, s: str) -> None:
        self.s = s
        self.n = len(s)
        self.pos = 0

    def error(self, msg: str, pos: int | None = None) -> CodecError:
        return _ScanError(f"bad fastjson text: {msg}", self.pos if pos is None else pos)

    def skip_ws(self) -> str:
        s, n, pos = self.s, self.n, self.pos
        while pos < n and s[pos] in _WS:
            pos += 1
        self.pos = pos
        return s[pos] if pos < n else ""

    def parse(self) -> Any:
        try:
            return self._parse()
        except RecursionError:
            # Freezing, hashing or comparing an object key recurses once per nesting level.
            raise self.error("object key nested too deeply") from None

    def _parse(self) -> Any:
        # Each frame is [container, is_object, state, pending_key].
        stack: list[list[Any]] = []
        value: Any = None
        while True:
            c = self.skip_ws()
            if not c:
                raise self.error("unexpected end of input")
            top = stack[-1] if stack else None
            if top is not None and top[1]:
                state = top[2]
                if state == _EXPECT_COMMA:
                    if c == ",":
                        self.pos += 1
                        top[2] = _EXPECT_KEY
                        continue
                    if c == "}":
                        self.pos += 1
                        value = stack.pop()[0]
                    else:
                        raise self.error("expected ',' or '}' in object")
                elif state == _EXPECT_KEY:
                    if c == "}":
                        self.pos += 1
                        value = stack.pop()[0]
                    elif c == ",":  # fastjson skips stray commas
                        self.pos += 1
                        continue
                    elif c in "\"'":
                        top[3] = self.string(c)
                        self.colon()
                        top[2] = _EXPECT_VALUE
                        continue
                    elif c == "-" or "0" <= c <= "9":
                        top[3] = self.number()
                        self.colon()
                        top[2] = _EXPECT_VALUE
                        continue
                    elif c in "{[":
                        top[2] = _IN_KEY
                        self.open(stack, c)
                        continue
                    else:
                        m = _IDENT.match(self.s, self.pos)
                        if m is None:
                            raise self.error("expected an object key")
                        top[3] = m.group()
                        self.pos = m.end()
                        self.colon()
                        top[2] = _EXPECT_VALUE
                        continue
                else:  # _EXPECT_VALUE
                    if c in "{[":
                        self.open(stack, c)
                        continue
                    value = self.scalar(c)
            elif top is not None:  # inside an array
                if c == "]":
                    self.pos += 1
                    value = stack.pop()[0]
                elif c == ",":
                    # Between elements, or a stray one: fastjson's reader skips both.
                    self.pos += 1
                    top[2] = _EXPECT_KEY
                    continue
                elif top[2] == _EXPECT_COMMA:
                    raise self.error("expected ',' or ']' in array")
                elif c in "{[":
                    self.open(stack, c)
                    continue
                else:
                    value = self.scalar(c)
            else:  # top level
                if c in "{[":
                    self.open(stack, c)
                    continue
                value = self.scalar(c)
            # A value is complete: hand it to the enclosing container (or return it).
            if not stack:
                if self.skip_ws():
                    raise self.error("trailing characters after the JSON value")
                return value
            top = stack[-1]
            if not top[1]:  # array: the next token must be ',' or ']'
                top[0].append(value)
                top[2] = _EXPECT_COMMA
            elif top[2] == _IN_KEY:  # an object or array used as a key
                top[3] = _freeze(value)
                self.colon()
                top[2] = _EXPECT_VALUE
            else:
                top[0][top[3]] = value
                top[2] = _EXPECT_COMMA

    def open(self, stack: list[list[Any]], c: str) -> None:
        if len(stack) >= MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH}")
        self.pos += 1
        if c == "{":
            stack.append([{}, True, _EXPECT_KEY, None])
        else:
            stack.append([[], False, _EXPECT_KEY, None])

    def colon(self) -> None:
        if self.skip_ws() != ":":
            raise self.error("expected ':' after an object key")
        self.pos += 1

    def scalar(self, c: str) -> Any:
        if c in "\"'":
            return self.string(c)
        if c == "-" or "0" <= c <= "9":
            return self.number()
        for word, val in (("null", None), ("true", True), ("false", False), ("undefined", None)):
            if self.s.startswith(word, self.pos):
                self.pos += len(word)
                return val
        raise self.error(f"unexpected character {c!r}")

    def number(self) -> int | float:
        m = _NUMBER.match(self.s, self.pos)
        if m is None:
            raise self.error("bad number")
        start = self.pos
        self.pos = m.end()
        text = m.group()
        if m.group(3):
            text = text[:-1]
        try:
            if m.group(1) is not None or m.group(2) is not None or m.group(3) in ("F", "D"):
                return float(text)
            return int(text)
        except ValueError:  # e.g. more digits than Python's int parsing limit
            raise self.error("number out of range", start) from None

    def string(self, quote: str) -> str:
        s = self.s
        start = self.pos
        pos = start + 1
        plain = _PLAIN_DQ if quote == '"' else _PLAIN_SQ
        parts: list[str] = []
        while True:
            m = plain.match(s, pos)
            assert m is not None  # the pattern matches the empty string
            parts.append(m.group())
            pos = m.end()
            if pos >= self.n:
                raise self.error("unterminated string", start)
            if s[pos] == quote:
                self.pos = pos + 1
                return "".join(parts) if len(parts) > 1 else parts[0]
            # backslash
            if pos + 1 >= self.n:
                raise self.error("unterminated string", start)
            e = s[pos + 1]
            if e in _SIMPLE_ESCAPES:
                parts.append(_SIMPLE_ESCAPES[e])
                pos += 2
            elif e == "u":
                h = s[pos + 2 : pos + 6]
                if len(h) != 4 or not all(ch in _HEX for ch in h):
                    raise self.error("bad \\u escape", pos)
                cp = int(h, 16)
                pos += 6
                # Join a UTF-16 surrogate pair into one code point, as Java strings do implicitly.
                if 0xD800 <= cp < 0xDC00 and s.startswith("\\u", pos):
                    h2 = s[pos + 2 : pos + 6]
                    if len(h2) == 4 and all(ch in _HEX for ch in h2):
                        lo = int(h2, 16)
                        if 0xDC00 <= lo < 0xE000:
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                            pos += 6
                parts.append(chr(cp))
            elif e == "x":
                h = s[pos + 2 : pos + 4]
                if len(h) != 2 or not all(ch in _HEX for ch in h):
                    raise self.error("bad \\x escape", pos)
                parts.append(chr(int(h, 16)))
                pos += 4
            else:
                raise self.error(f"bad escape \\{e}", pos)


# ---- writing ---------------------------------------------------------------------------------

def java_double(x: float) -> str:
    """A double as fastjson writes it: Java's ``Double.toString``, but NaN and infinities as null."""
    if math.isnan(x) or math.isinf(x):
        return "null"
    return java_double_str(x)


def dumps(obj: Any, *, standard: bool = True) -> str:
    """Write ``obj`` as JSON that Java's fastjson reads.

    ``standard=True``: strict JSON, byte for byte what a Java NameServer writes on its standard
    route (features BrowserCompatible + QuoteFieldNames + MapSortField): non-string keys quoted,
    map keys sorted by their type (ints numerically, strings like String.compareTo,
    MessageQueues like its compareTo), non-ASCII escaped as uppercase ``\\uXXXX``, ``/`` as
    ``\\/``, integers beyond +-(2**53-1) written as strings. Object keys (MessageQueue) become a
    JSON string holding the object, which Java reads back into the key.
    ``standard=False``: fastjson's default style, byte for byte (unquoted non-string keys,
    object keys as objects, raw non-ASCII), in the mapping's own order.
    Both write doubles like Java (``1.5``, ``1.0E7``). Values may be dicts, lists/tuples/sets,
    str, int, float, bool, None, enums (by name), MessageQueue, FrozenObject or objects with a
    ``to_fastjson()`` method returning such a tree.
    """
    out: list[str] = []
    _write(obj, out, standard, 0)
    return "".join(out)


def _mq_tree(mq: MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


# BrowserCompatible: '/' and every non-ASCII UTF-16 unit escaped, hex in uppercase. The stdlib
# encoder (C) does the non-ASCII work; only hex case, '/' and DEL are fixed up afterwards.
_JSON_ESCAPE_SEQ = re.compile(r"\\u[0-9a-f]{4}|\\\\")


def _upper_hex(m: re.Match[str]) -> str:
    t = m.group()
    return t if len(t) == 2 else "\\u" + t[2:].upper()


def _quote_std(s: str) -> str:
    if s.isascii():
        if FASTJSON_BROWSER_NEEDS_ESCAPE.search(s) is None:
            return f'"{s}"'
        return '"' + s.translate(FASTJSON_BROWSER_ESCAPES) + '"'
    t = json.dumps(s)  # ensure_ascii: \\uXXXX (lowercase), surrogate pairs for astral characters
    t = _JSON_ESCAPE_SEQ.sub(_upper_hex, t)
    return t.replace("/", "\\/").replace("\x7f", "\\u007F")


#: BrowserCompatible writes longs outside this range as strings (JavaScript's safe integers).
_SAFE_INT = (1 << 53) - 1


def _sort_key(k: Any) -> Any:
    return java_string_sort_key(k) if isinstance(k, str) else k


def _sorted_items(o: Mapping[Any, Any]) -> Any:
    items = list(o.items())
    if len(items) < 2:
        return items
    try:
        return sorted(items, key=lambda kv: _sort_key(kv[0]))
    except TypeError:  # mixed or unordered key types (e.g. generic object keys): keep order
        return items


def _write(o: Any, out: list[str], standard: bool, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CodecError(f"cannot encode: nesting deeper than {MAX_DEPTH}")
    if o is None:
        out.append("null")
    elif isinstance(o, str):
        out.append(_quote_std(o) if standard else fastjson_quote(o))
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, int):
        text = int.__repr__(o)
        out.append(f'"{text}"' if standard and not -_SAFE_INT <= o <= _SAFE_INT else text)
    elif isinstance(o, float):
        out.append(java_double(o))
    elif isinstance(o, Mapping):
        out.append("{")
        first = True
        for k, v in (_sorted_items(o) if standard else o.items()):
            if first:
                first = False
            else:
                out.append(",")
            _write_key(k, out, standard, depth)
            out.append(":")
            _write(v, out, standard, depth + 1)
        out.append("}")
    elif isinstance(o, (list, tuple, set, frozenset)):
        out.append("[")
        first = True
        for v in o:
            if first:
                first = False
            else:
                out.append(",")
            _write(v, out, standard, depth + 1)
        out.append("]")
    elif isinstance(o, enum.Enum):
        out.append(fastjson_quote(o.name))
    elif isinstance(o, MessageQueue):
        _write(_mq_tree(o), out, standard, depth)
    else:
        to = getattr(o, "to_fastjson", None)
        if to is None:
            raise CodecError(f"cannot encode a {type(o).__name__} as JSON")
        _write(to(), out, standard, depth)


def _write_key(k: Any, out: list[str], standard: bool, depth: int) -> None:
    if isinstance(k, str):
        out.append(_quote_std(k) if standard else fastjson_quote(k))
        return
    if isinstance(k, MessageQueue):
        k = _mq_tree(k)
    if isinstance(k, enum.Enum):
        out.append(fastjson_quote(k.name))
        return
    if isinstance(k, (int, float)) or k is None:  # int covers bool
        text = "null" if k is None else ("true" if k is True else "false" if k is False else None)
        if text is None:
            text = int.__repr__(k) if isinstance(k, int) else java_double(k)
        out.append(f'"{text}"' if standard else text)
        return
    sub: list[str] = []
    _write(k, sub, False, depth + 1)
    # Java reads a string key holding the object's JSON back into the object key (spec 9.1).
    text = "".join(sub)
    out.append(_quote_std(text) if standard else text)
