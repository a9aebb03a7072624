"""What mqadmin's output depends on in the JVM, reproduced so rmqadmin prints the same text.

- ``printf``: ``java.util.Formatter`` for the conversions mqadmin uses (``%-20s``, ``%4d``,
  ``%9.2f``, ``%n``); ``%f`` rounds half-up on the shortest decimal form of the double, as Java does
  (``%.1f`` of 0.15 is ``0.2``; Python's ``%`` gives ``0.1``).
- ``jstr``: ``String.valueOf`` (``null``, ``true``, ``1.0E7``, enum names).
- Iteration orders of the JVM's hash tables and ``Properties.load`` come from
  ``rmqwire.admin.javautil``.
- ``Map.toString`` (``{k=v, k2=v2}``), ``Calendar``-based times, fastjson's ``PrettyFormat``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import re
import struct
import time
from collections.abc import Mapping
from typing import Any

from rmqwire.admin.javautil import (  # noqa: F401  (re-exported for the command modules)
    concurrent_hashmap_order,
    hashmap_order,
    load_properties,
    mq_hash,
    string_hash,
)
from rmqwire.codec import fastjson
from rmqwire.codec.codes import version_name
from rmqwire.codec.java import java_double_str
from rmqwire.model import MessageQueue

# ---- String.valueOf and Formatter ------------------------------------------------------------------


class JFloat(float):
    """A Java ``float`` (32-bit): printed and widened as the JVM does."""

    def __new__(cls, value: float) -> JFloat:
        return super().__new__(cls, struct.unpack("<f", struct.pack("<f", value))[0])


def jstr(v: Any) -> str:
    """``String.valueOf(v)`` for the values mqadmin prints."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, JFloat):
        return _float32_str(v)
    if isinstance(v, float):
        return java_double_str(v)
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, MessageQueue):
        return str(v)
    if isinstance(v, dict):
        return map_str(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return "[" + ", ".join(jstr(x) for x in v) + "]"
    return str(v)


def _float32_str(v: float) -> str:
    # Float.toString: the shortest digits that read back as the same float32.
    for digits in range(1, 10):
        text = f"{v:.{digits}g}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == v:
            return java_double_str(float(text))
    return java_double_str(v)


_SPEC = re.compile(r"%(-?)(0?)(\d*)(?:\.(\d+))?([sdfn%])")


def printf(fmt: str, *args: Any) -> str:
    """``String.format(fmt, args)`` for ``%[-|0][width][.precision](s|d|f)``, ``%n`` and ``%%``."""
    it = iter(args)

    def one(m: re.Match[str]) -> str:
        left, zero, width, prec, conv = m.groups()
        if conv == "n":
            return "\n"
        if conv == "%":
            return "%"
        v = next(it)
        if conv == "s":
            text = jstr(v)
            if prec:
                text = text[: int(prec)]
        elif conv == "d":
            text = str(int(v))
        else:
            text = fixed(v, 6 if prec is None else int(prec))
        if width and len(text) < int(width):
            if zero and conv != "s":
                sign = "-" if text.startswith("-") else ""
                text = sign + text[len(sign):].rjust(int(width) - len(sign), "0")
            else:
                text = text.ljust(int(width)) if left else text.rjust(int(width))
        return text

    return _SPEC.sub(one, fmt)


def fixed(x: float, precision: int) -> str:
    """Java ``%.<precision>f``: half-up rounding of the shortest decimal form of ``x``."""
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    shortest = _float32_str(x) if isinstance(x, JFloat) else repr(x)
    d = decimal.Decimal(shortest.replace("E", "e"))
    q = d.quantize(decimal.Decimal(1).scaleb(-precision), rounding=decimal.ROUND_HALF_UP)
    return f"{q:f}"  # keeps the sign of -0.0 ("-0.00"), as Java does


def front(s: str | None, size: int) -> str | None:
    """``UtilAll.frontStringAtLeast``: cut to ``size`` characters (it never pads)."""
    if s is not None and len(s) > size:
        return s[:size]
    return s


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: the name of a version ordinal (the newest for larger ones)."""
    return version_name(ordinal)


# ---- toString forms --------------------------------------------------------------------------------


def map_str(m: Mapping[Any, Any]) -> str:
    """``AbstractMap.toString``: ``{k=v, k2=v2}`` (in the mapping's order)."""
    return "{" + ", ".join(f"{jstr(k)}={jstr(v)}" for k, v in m.items()) + "}"


def human_time2(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{ms % 1000:03d}"


def format_date(ms: int) -> str:
    """``UtilAll.formatDate(new Date(ms), "yyyy-MM-dd HH:mm:ss")`` (local time)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000))


_DATE_SSS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")


def parse_timestamp(value: str) -> int:
    """mqadmin's ``timestampFormat``: millis, else ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time."""
    text = value.strip()
    try:
        return int(text)
    except ValueError:
        pass
    m = _DATE_SSS.match(text)
    if m is None:
        raise ValueError(f"{value!r} is neither milliseconds nor yyyy-MM-dd#HH:mm:ss:SSS")
    y, mo, d, h, mi, s, ms = (int(g) for g in m.groups())
    local = _dt.datetime(y, mo, d, h, mi, s).timestamp()
    return int(local) * 1000 + ms


# ---- fastjson PrettyFormat -------------------------------------------------------------------------


def pretty_json(tree: Any) -> str:
    """fastjson 1.2.83 ``toJSONString(obj, PrettyFormat)`` of a JSON tree (tabs, its line breaks).

    Objects with string keys (beans and maps) break the line before every entry; maps with
    numeric keys (``brokerAddrs``) only before the closing brace, as fastjson's MapSerializer does.
    """
    out: list[str] = []
    _pretty(tree, out, 0)
    return "".join(out)


def _pretty(v: Any, out: list[str], depth: int) -> None:
    if isinstance(v, Mapping):
        if not v:
            out.append("{}")
            return
        out.append("{")
        string_keys = all(isinstance(k, str) for k in v)
        first = True
        for k, item in v.items():
            if not first:
                out.append(",")
            first = False
            if string_keys:
                out.append("\n" + "\t" * (depth + 1))
                out.append(fastjson.dumps(k, standard=False))
            else:
                out.append(fastjson.dumps(k, standard=False) if isinstance(k, str) else jstr(k))
            out.append(":")
            _pretty(item, out, depth + 1)
        out.append("\n" + "\t" * depth + "}")
    elif isinstance(v, (list, tuple)):
        if not v:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            out.append("\n" + "\t" * (depth + 1))
            _pretty(item, out, depth + 1)
        out.append("\n" + "\t" * depth + "]")
    else:
        out.append(fastjson.dumps(v, standard=False))
