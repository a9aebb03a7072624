"""JSON bodies (Java ``RemotingSerializable`` subclasses) and the compressed REGISTER_BROKER body.

Each body is a dataclass whose fields carry their Java JSON property name and a type spec
(``prop("brokerName", STRING)``); that one declaration drives both ``encode`` and ``decode``.
Writing follows fastjson 1.2.83: properties sorted by name, null (None) properties omitted,
enums by name, map entries in the mapping's order (sorted for Java TreeMaps). Reading accepts
fastjson's non-standard output (see rmqwire.codec.fastjson), ignores unknown properties, lets
missing or null ones take the Java defaults, and converts values the way fastjson casts them.
Java Sets are Python lists (order kept, so re-encoding is byte-identical).
Spec: shared/spec/wire-format.md section 9.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from rmqwire.codec import fastjson
from rmqwire.codec.java import java_string_sort_key
from rmqwire.errors import CodecError
from rmqwire.model import (
    MessageQueue,
)

# ---- type specs: how one Java type maps to a JSON tree and back ----------------------------------


class Spec:
    """Converts one Java-typed value to the tree fastjson.dumps writes, and back (with casts)."""

    #: Java primitives (int, long, boolean, double) are never null: a JSON null keeps the default.
    primitive: ClassVar[bool] = False

    def to_tree(self, v: Any) -> Any:
        return v

    def from_tree(self, raw: Any) -> Any:
        return raw


def _kind(raw: Any) -> str:
    return type(raw).__name__


class _Str(Spec):
    def from_tree(self, raw: Any) -> Any:
        if isinstance(raw, str):
            return raw
        # fastjson casts any scalar into a String property (castToString).
        if isinstance(raw, bool):
            return "true" if raw else "false"
        if isinstance(raw, int):
            return str(raw)
        if isinstance(raw, float):
            return fastjson.java_double(raw)
        return fastjson.dumps(raw, standard=False)


class _Int(Spec):
    primitive = True

    def __init__(self, bits: int) -> None:
        self.lo, self.hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        self.java = "int" if bits == 32 else "long"

    def from_tree(self, raw: Any) -> Any:
        if isinstance(raw, bool):
            v = int(raw)
        elif isinstance(raw, int):
            v = raw
        elif isinstance(raw, float):
            if raw != raw or raw in (float("inf"), float("-inf")):
                raise CodecError(f"{raw!r} is not a Java {self.java}")
            v = int(raw)  # fastjson truncates decimals into integral properties
        elif isinstance(raw, str):
            try:
                v = int(raw.strip())
            except ValueError:
                raise CodecError(f"{raw!r} is not a Java {self.java}") from None
        else:
            raise CodecError(f"expected a number for a Java {self.java}, got {_kind(raw)}")
        if not self.lo <= v <= self.hi:
            raise CodecError(f"{v} overflows a Java {self.java}")
        return v


class _Bool(Spec):
    primitive = True
    _TEXT: ClassVar[dict[str, bool]] = {
        "true": True,
        "false": False,
        "1": True,
        "0": False,
        "y": True,
        "n": False,
        "t": True,
        "f": False,
    }

    def from_tree(self, raw: Any) -> Any:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, int):
            return raw != 0
        if isinstance(raw, str) and raw.strip().lower() in self._TEXT:
            return self._TEXT[raw.strip().lower()]
        raise CodecError(f"expected a boolean, got {raw!r}")


class _Double(Spec):
    primitive = True

    def from_tree(self, raw: Any) -> Any:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw)
            except ValueError:
                pass
        raise CodecError(f"expected a number for a Java double, got {raw!r}")


class EnumSpec(Spec):
    """Written by name; read by name (unknown name -> None, as fastjson) or by ordinal."""

    def __init__(self, cls: type[enum.Enum]) -> None:
        self.cls = cls
        self.members = list(cls)

    def to_tree(self, v: Any) -> Any:
        return v.name

    def from_tree(self, raw: Any) -> Any:
        if isinstance(raw, str):
            return self.cls.__members__.get(raw)
        if isinstance(raw, int) and not isinstance(raw, bool):
            if 0 <= raw < len(self.members):
                return self.members[raw]
            raise CodecError(f"{raw} is not an ordinal of {self.cls.__name__}")
        raise CodecError(f"expected a {self.cls.__name__} name or ordinal, got {_kind(raw)}")


class ListSpec(Spec):
    """Java List / Set / array: a Python list in the order written.

    ``sort_key`` is for a Java TreeSet, which writes its elements in compareTo order.
    """

    def __init__(self, item: Spec, sort_key: Callable[[Any], Any] | None = None) -> None:
        self.item = item
        self.sort_key = sort_key

    def to_tree(self, v: Any) -> Any:
        to = self.item.to_tree
        if self.sort_key is not None:
            v = sorted(v, key=self.sort_key)
        return [to(x) for x in v]

    def from_tree(self, raw: Any) -> Any:
        if not isinstance(raw, (list, tuple)):
            raise CodecError(f"expected a JSON array, got {_kind(raw)}")
        fr = self.item.from_tree
        return [None if x is None else fr(x) for x in raw]


class _LongKey(Spec):
    """Integer map keys: fastjson writes them unquoted; standard JSON has them quoted."""

    def from_tree(self, raw: Any) -> Any:
        v: Any = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            v = raw
        elif isinstance(raw, str):
            try:
                v = int(raw.strip())
            except ValueError:
                pass
        if v is None or not -(1 << 63) <= v < (1 << 63):
            raise CodecError(f"map key {raw!r} is not a Java long")
        return v


class _StrKey(Spec):
    def from_tree(self, raw: Any) -> Any:
        return raw if isinstance(raw, str) else _STR.from_tree(raw)


class _MessageQueue(Spec):
    """A MessageQueue value or map key: ``{"brokerName","queueId","topic"}``.

    As a map key it arrives as an object (fastjson default), or as a string holding that
    object (standard JSON, which Java also reads back into a MessageQueue).
    """

    def from_tree(self, raw: Any) -> Any:
        if isinstance(raw, str) and raw.lstrip().startswith("{"):
            raw = fastjson.loads(raw)
        if not isinstance(raw, Mapping):
            raise CodecError(f"expected a MessageQueue object, got {_kind(raw)}")
        topic = raw.get("topic")
        broker = raw.get("brokerName")
        qid = raw.get("queueId")
        return MessageQueue(
            "" if topic is None else _STR.from_tree(topic),
            "" if broker is None else _STR.from_tree(broker),
            0 if qid is None else _INT.from_tree(qid),
        )


class MapSpec(Spec):
    """Java Map; ``tree_map=True`` for a TreeMap, which Java writes in key order."""

    def __init__(self, key: Spec, value: Spec, *, tree_map: bool = False) -> None:
        self.key, self.value, self.tree_map = key, value, tree_map

    def to_tree(self, v: Any) -> Any:
        items = v.items()
        if self.tree_map:
            items = sorted(items, key=_tree_map_key)
        to = self.value.to_tree
        return {k: (None if x is None else to(x)) for k, x in items}

    def from_tree(self, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            raise CodecError(f"expected a JSON object, got {_kind(raw)}")
        kf, vf = self.key.from_tree, self.value.from_tree
        return {kf(k): (None if x is None else vf(x)) for k, x in raw.items()}


def _tree_map_key(item: tuple[Any, Any]) -> Any:
    k = item[0]
    # String.compareTo order is UTF-16 code unit order, i.e. the order of the UTF-16BE bytes.
    return java_string_sort_key(k) if isinstance(k, str) else k


class BodySpec(Spec):
    """A nested bean."""

    def __init__(self, cls: type[FastjsonBody]) -> None:
        self.cls = cls

    def to_tree(self, v: Any) -> Any:
        return v.to_fastjson()

    def from_tree(self, raw: Any) -> Any:
        return self.cls.from_fastjson(raw)


STRING: Spec = _Str()
INT: Spec = _Int(32)
LONG: Spec = _Int(64)
BOOL: Spec = _Bool()
DOUBLE: Spec = _Double()
#: Generic data kept as parsed (dicts, lists, scalars; FrozenObject for object keys).
ANY: Spec = Spec()
MQ: Spec = _MessageQueue()
STR_KEY: Spec = _StrKey()
LONG_KEY: Spec = _LongKey()
_STR, _INT = STRING, INT


def list_of(item: Spec, *, sort_key: Callable[[Any], Any] | None = None) -> ListSpec:
    return ListSpec(item, sort_key)


def map_of(key: Spec, value: Spec, *, tree_map: bool = False) -> MapSpec:
    return MapSpec(key, value, tree_map=tree_map)


def enum_of(cls: type[enum.Enum]) -> EnumSpec:
    return EnumSpec(cls)


def body_of(cls: type[FastjsonBody]) -> BodySpec:
    return BodySpec(cls)


_META = "rmqwire.fastjson"


def prop(
    name: str,
    spec: Spec,
    default: Any = None,
    *,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """Declare a dataclass field as the Java JSON property ``name`` of type ``spec``.

    ``default`` / ``factory`` are the Java field initialiser (None = Java null).
    """
    meta = {_META: (name, spec)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class Prop:
    """One declared property of a body class (what ``prop`` recorded)."""

    attr: str
    name: str
    spec: Spec
    #: True when the Java default is null (so None is a legal value that round-trips).
    nullable: bool


class _Layout:
    __slots__ = ("props", "by_name", "by_norm")

    def __init__(self, cls: type) -> None:
        props = []
        for f in dataclasses.fields(cls):
            if _META not in f.metadata:
                continue
            name, spec = f.metadata[_META]
            nullable = f.default is None and f.default_factory is dataclasses.MISSING
            props.append(Prop(f.name, name, spec, nullable))
        # fastjson writes bean properties sorted by name (String order; names are ASCII).
        props.sort(key=lambda p: p.name)
        self.props: tuple[Prop, ...] = tuple(props)
        self.by_name = {p.name: p for p in props}
        # fastjson's smart match: a property also matches ignoring case, '_' and '-'.
        self.by_norm = {_norm(p.name): p for p in props}


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


class FastjsonBody:
    """Base of every JSON body: ``encode`` / ``decode`` named after Java RemotingSerializable."""

    __slots__ = ()
    _layout_cache: ClassVar[dict[type, _Layout]] = {}

    @classmethod
    def _layout(cls) -> _Layout:
        lay = FastjsonBody._layout_cache.get(cls)
        if lay is None:
            lay = FastjsonBody._layout_cache[cls] = _Layout(cls)
        return lay

    @classmethod
    def json_properties(cls) -> tuple[Prop, ...]:
        """The declared JSON properties, in the order fastjson writes them.

        (Not ``properties``: ConsumerRunningInfo has a Java property of that name.)
        """
        return cls._layout().props

    def to_fastjson(self) -> dict[str, Any]:
        """The JSON tree (property name -> value) that fastjson.dumps writes."""
        out: dict[str, Any] = {}
        for p in self._layout().props:
            v = getattr(self, p.attr)
            if v is not None:
                out[p.name] = p.spec.to_tree(v)
        return out

    @classmethod
    def from_fastjson(cls, raw: Any) -> Self:
        """Build from a parsed JSON tree; unknown properties ignored, missing ones defaulted."""
        if not isinstance(raw, Mapping):
            raise CodecError(f"{cls.__name__}: expected a JSON object, got {_kind(raw)}")
        lay = cls._layout()
        kwargs: dict[str, Any] = {}
        for k, v in raw.items():
            if not isinstance(k, str):
                continue
            p = lay.by_name.get(k) or lay.by_norm.get(_norm(k))
            if p is None:
                continue
            if v is None:
                if not p.spec.primitive:
                    kwargs[p.attr] = None
                continue
            try:
                kwargs[p.attr] = p.spec.from_tree(v)
            except CodecError as e:
                raise CodecError(f"{cls.__name__}.{p.name}: {e}") from e
        return cls(**kwargs)

    def encode(self, *, standard: bool = True) -> bytes:
        """UTF-8 JSON; ``standard=False`` is fastjson's default (non-JSON) style, byte for byte."""
        # Java's getBytes(UTF-8) turns a lone surrogate into '?'; so does errors="replace".
        return fastjson.dumps(self.to_fastjson(), standard=standard).encode("utf-8", "replace")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse a body in any style fastjson writes (or standard JSON)."""
        return cls.from_fastjson(fastjson.loads(data))
