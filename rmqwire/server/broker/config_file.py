"""The broker's JSON config files (Java ``ConfigManager``): fastjson's pretty format, atomic
writes, the previous content kept as ``<file>.bak`` and read back when the file is unusable.

A write goes to a temporary file in the same directory, is fsync-ed and renamed over the file
(then the directory is fsync-ed), so a crash leaves either the old or the new content, never a
torn one. Before that the current content is copied to ``<file>.bak``, as Java's
``MixAll.string2File`` does.

``pretty_json`` writes what fastjson's ``toJSONString(obj, PrettyFormat)`` writes for the beans
the broker persists (checked against files an official 5.3.3 broker wrote): tab indentation, no
space after colons, an empty object as ``{}``, an object with integer keys on one line with only
its closing brace on the next (``{0:5,1:7\\n\\t\\t}``), arrays on one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twisted.logger import Logger

from rmqwire.codec import fastjson
from rmqwire.codec.java import fastjson_quote, java_double_str
from rmqwire.errors import CodecError
from rmqwire.server.files import write_with_backup

__all__ = ["ConfigFile", "pretty_json"]


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_double_str(v)
    return fastjson_quote(str(v))


def _write(v: Any, out: list[str], depth: int) -> None:
    if isinstance(v, Mapping):
        if not v:
            out.append("{}")
            return
        if all(isinstance(k, int) and not isinstance(k, bool) for k in v):
            out.append("{")
            out.append(",".join(f"{k}:{_inline(x)}" for k, x in v.items()))
            out.append("\n" + "\t" * depth + "}")
            return
        inner = "\t" * (depth + 1)
        out.append("{")
        first = True
        for k, x in v.items():
            out.append("\n" if first else ",\n")
            first = False
            out.append(f"{inner}{fastjson_quote(str(k))}:")
            _write(x, out, depth + 1)
        out.append("\n" + "\t" * depth + "}")
        return
    if isinstance(v, (list, tuple, set, frozenset)):
        out.append("[" + ",".join(_inline(x) for x in v) + "]")
        return
    out.append(_scalar(v))


def _inline(v: Any) -> str:
    if isinstance(v, (Mapping, list, tuple, set, frozenset)):
        return fastjson.dumps(v, standard=False)
    return _scalar(v)


def pretty_json(tree: Mapping[str, Any]) -> str:
    """``tree`` (plain dicts, lists and scalars) in fastjson's pretty format."""
    out: list[str] = []
    _write(tree, out, 0)
    return "".join(out)


class ConfigFile:
    """One JSON config file with its ``.bak``: ``load()`` returns the parsed tree of the file, or
    of the backup when the file is missing, empty or corrupt, or None when neither is usable."""

    log = Logger()

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    def load(self) -> Any:
        for candidate in (self.path, self.backup_path):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as e:
                self.log.warn("cannot read {path}: {why}", path=str(candidate), why=str(e))
                continue
            if not data.strip():
                continue
            try:
                return fastjson.loads(data)
            except CodecError as e:
                self.log.warn("{path} is corrupt ({why}); trying its backup",
                              path=str(candidate), why=str(e))
        return None

    def save(self, tree: Mapping[str, Any]) -> None:
        data = pretty_json(tree).encode("utf-8", "surrogatepass")
        write_with_backup(self.path, data, self.backup_path)
