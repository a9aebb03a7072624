"""Typed custom headers: the ``extFields`` string map of a RemotingCommand, as dataclasses.

One declaration per header class drives both directions. Each field is declared with
``jfield(java_type, required=..., wire=...)``; the Java type decides the string form
(wire-format.md section 8.1) and whether the field is a primitive (always sent, never None) or a
boxed/String field (omitted when None). Class names are the Java names; attributes are snake_case
and the wire name defaults to their camelCase.

Decoding is by exact key. Keys that the class does not declare land in ``extra`` and are written
back by ``to_ext_fields`` (ACL ``AccessKey``/``Signature``, ``_UNIQUE_KEY_QUERY``, ``MSG_REGION``,
``TRACE_ON``, ...). The header classes themselves live beside their commands in
``rmqwire.codec.commands``.

Spec: shared/spec/wire-format.md section 8; Java classes under
``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/`` (5.3.3) and
``common/src/main/java/org/apache/rocketmq/common/protocol/header/`` (4.9.8).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, dataclass_transform

from rmqwire.codec.java import java_double_str
from rmqwire.errors import CodecError, HeaderDecodeError, MissingHeaderFieldError

if TYPE_CHECKING:
    pass


class BoundaryType(enum.Enum):
    """``org.apache.rocketmq.common.BoundaryType``; the wire form is the constant's name."""

    LOWER = "LOWER"
    UPPER = "UPPER"


# ---- Java value types ---------------------------------------------------------------------------

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Integer.parseInt / Long.parseLong: an optional sign and decimal digits, nothing else (no blanks,
# no "_", no "1.0"). Java's Character.digit also takes non-ASCII decimal digits of the BMP.
_JAVA_INT_RE = re.compile(r"[+-]?\d+")
# Double.parseDouble trims chars <= ' ' and accepts an optional f/F/d/D suffix (hex floats omitted).
_JAVA_DOUBLE_RE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)", re.ASCII
)
_JAVA_TRIM = "".join(map(chr, range(0x21)))  # the chars String.trim strips (all <= ' ')


def _parse_int(value: str, lo: int, hi: int) -> int:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    if not (value.isascii() and value.isdigit()):  # fast path: plain ASCII digits
        if _JAVA_INT_RE.fullmatch(value) is None or any(ord(c) > 0xFFFF for c in value):
            raise ValueError("not a decimal integer")
    n = int(value)
    if n < lo or n > hi:
        raise ValueError(f"out of range [{lo}, {hi}]")
    return n


def _parse_int32(value: str) -> int:
    return _parse_int(value, *_INT32)


def _parse_int64(value: str) -> int:
    return _parse_int(value, *_INT64)


def _parse_str(value: str) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _parse_bool(value: str) -> bool:
    # Boolean.parseBoolean: only a case-insensitive "true" is true; anything else is false.
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return len(value) == 4 and value.lower() == "true"


def _parse_double(value: str) -> float:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    text = value.strip(_JAVA_TRIM)
    if _JAVA_DOUBLE_RE.fullmatch(text) is None:
        raise ValueError("not a Java double")
    if text[-1] in "fFdD" and not text.endswith("Infinity"):
        text = text[:-1]
    return float(text.replace("Infinity", "inf").replace("NaN", "nan"))


def _parse_boundary(value: str) -> BoundaryType:
    # BoundaryType.getType: case-insensitive "upper" is UPPER, everything else LOWER.
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return BoundaryType.UPPER if value.lower() == "upper" else BoundaryType.LOWER


def _format_int(value: Any, lo: int, hi: int) -> str:
    if type(value) is not int:  # IntEnum/IntFlag members are fine, bool is not
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"expected int, got {type(value).__name__}")
        value = int(value)
    if value < lo or value > hi:
        raise ValueError(f"{value} out of range [{lo}, {hi}]")
    return str(value)


def _format_bool(value: Any) -> str:
    if not isinstance(value, bool):
        raise TypeError(f"expected bool, got {type(value).__name__}")
    return "true" if value else "false"


def _format_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return value


def _format_double(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"expected float, got {type(value).__name__}")
    return java_double_str(float(value))


def _format_boundary(value: Any) -> str:
    if not isinstance(value, BoundaryType):
        raise TypeError(f"expected BoundaryType, got {type(value).__name__}")
    return value.value


@dataclasses.dataclass(frozen=True, slots=True)
class JavaType:
    """How one Java field type is written to and read from its extFields string."""

    name: str
    primitive: bool
    zero: Any  # the Java default of a primitive field; None for reference types
    parse: Callable[[str], Any]
    format: Callable[[Any], str]


def _ints(bits: tuple[int, int]) -> Callable[[Any], str]:
    return lambda v: _format_int(v, *bits)


JAVA_TYPES: dict[str, JavaType] = {
    t.name: t
    for t in (
        JavaType("String", False, None, _parse_str, _format_str),
        JavaType("Integer", False, None, _parse_int32, _ints(_INT32)),
        JavaType("int", True, 0, _parse_int32, _ints(_INT32)),
        JavaType("Long", False, None, _parse_int64, _ints(_INT64)),
        JavaType("long", True, 0, _parse_int64, _ints(_INT64)),
        JavaType("Boolean", False, None, _parse_bool, _format_bool),
        JavaType("boolean", True, False, _parse_bool, _format_bool),
        JavaType("Double", False, None, _parse_double, _format_double),
        JavaType("double", True, 0.0, _parse_double, _format_double),
        JavaType("BoundaryType", False, None, _parse_boundary, _format_boundary),
    )
}


# ---- declarations -------------------------------------------------------------------------------

_META_KEY = "rmqwire.header"
_UNSET: Any = object()


@dataclasses.dataclass(frozen=True, slots=True)
class HeaderField:
    """One declared header field: the schema of record for its extFields entry."""

    attr: str
    wire: str
    java_type: JavaType
    required: bool  # Java @CFNotNull
    default: Any  # the Java field initializer (or a primitive's zero); None when absent


def jfield(
    java_type: str, *, required: bool = False, wire: str | None = None, default: Any = _UNSET
) -> Any:
    """Declare a header field of Java type ``java_type`` ("String", "Integer", "int", "Long", ...).

    ``required`` mirrors ``@CFNotNull``; ``wire`` overrides the camelCase key; ``default`` mirrors a
    Java field initializer (``Boolean order = false`` is always sent by Java, so it is here too).
    """
    try:
        jt = JAVA_TYPES[java_type]
    except KeyError:
        raise TypeError(f"unsupported Java header field type {java_type!r}") from None
    if default is _UNSET:
        default = jt.zero
    if jt.primitive and default is None:
        raise TypeError(f"a primitive {java_type} field cannot default to None")
    return dataclasses.field(default=default, metadata={_META_KEY: (jt, required, wire)})


def _camel(attr: str) -> str:
    head, *rest = attr.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclass_transform(kw_only_default=True, field_specifiers=(jfield, dataclasses.field))
@dataclasses.dataclass(kw_only=True)
class CommandHeader:
    """Base of every typed custom header (Java ``CommandCustomHeader``).

    Subclasses are dataclasses automatically (keyword-only); every field must be a ``jfield``.
    ``extra`` keeps extFields keys the class does not declare, so they survive a round trip.
    """

    extra: dict[str, str] = dataclasses.field(default_factory=dict)

    __header_fields__: ClassVar[tuple[HeaderField, ...]] = ()
    __wire_names__: ClassVar[frozenset[str]] = frozenset()
    __decode_plan__: ClassVar[tuple[tuple[str, str, Callable[[str], Any], bool], ...]] = ()
    __encode_plan__: ClassVar[tuple[tuple[str, str, Callable[[Any], str], JavaType], ...]] = ()
    __required__: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(kw_only=True)(cls)
        specs = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            meta = f.metadata.get(_META_KEY)
            if meta is None:
                raise TypeError(f"{cls.__name__}.{f.name} must be declared with jfield()")
            jt, required, wire = meta
            specs.append(HeaderField(f.name, wire or _camel(f.name), jt, required, f.default))
        names = [s.wire for s in specs]
        if len(set(names)) != len(names):
            raise TypeError(f"{cls.__name__} declares a wire name twice: {names}")
        cls.__header_fields__ = tuple(specs)
        cls.__wire_names__ = frozenset(names)
        # Flattened per-class plans keep the per-field loop cheap (SEND/PULL headers are hot).
        cls.__decode_plan__ = tuple((s.attr, s.wire, s.java_type.parse, s.required) for s in specs)
        cls.__encode_plan__ = tuple(
            (s.attr, s.wire, s.java_type.format, s.java_type) for s in specs
        )
        cls.__required__ = tuple((s.attr, s.wire) for s in specs if s.required)
        # Straight-line codecs compiled from the plans (same results as the plan loops below,
        # which stay as the reference; the headers of every pull and send go through these).
        # Compiled on a class's first use: a process uses few of the ~300 header classes, and
        # compiling them all was a third of the codec's import time (rmqadmin's start-up).
        cls.to_ext_fields = _encode_then_compile  # type: ignore[method-assign]
        cls.from_ext_fields = classmethod(_decode_then_compile)  # type: ignore[method-assign,assignment]
        if "validate" not in cls.__dict__:  # a header with checks of its own keeps them
            cls.validate = _compile_validator(cls)  # type: ignore[method-assign]

    @classmethod
    def header_fields(cls) -> tuple[HeaderField, ...]:
        """The declared fields, inherited ones first (the data the codec is driven by)."""
        return cls.__header_fields__

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields map Java would send: every non-None field in Java string form, then extra.

        Declared fields win over an ``extra`` entry with the same key.
        """
        out = dict(self.extra) if self.extra else {}
        for attr, wire, fmt, jt in self.__encode_plan__:
            value = getattr(self, attr)
            if value is None:
                if jt.primitive:
                    raise CodecError(
                        f"{type(self).__name__}.{attr} is a primitive {jt.name} and cannot be None"
                    )
                continue
            try:
                out[wire] = fmt(value)
            except (TypeError, ValueError) as e:
                raise CodecError(f"{type(self).__name__}.{attr} ({jt.name}): {e}") from None
        return out

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str] | None, *, strict: bool = True) -> Self:
        """Decode extFields by exact key.

        ``strict`` raises MissingHeaderFieldError when a required (``@CFNotNull``) field is absent;
        ``strict=False`` leaves it at its default (None for reference types), as Java servers do.
        A value that does not parse as its Java type raises HeaderDecodeError in both modes (the
        FastCodesHeader behaviour; the reflective Java decoder would log and leave the field null).
        """
        ext = ext or {}
        kwargs: dict[str, Any] = {}
        missing: list[str] = []
        found = 0
        for attr, wire, parse, required in cls.__decode_plan__:
            raw = ext.get(wire)
            if raw is None:
                if required:
                    missing.append(wire)
                continue
            found += 1
            try:
                kwargs[attr] = parse(raw)
            except (ValueError, TypeError) as e:
                raise cls._bad_value(wire, raw, e) from None
        if missing and strict:
            raise _missing_error(cls.__name__, missing)
        extra: dict[str, str] = {}
        if found != len(ext):  # some keys are not ours: keep them
            wire_names = cls.__wire_names__
            for k, v in ext.items():
                if k not in wire_names and v is not None:  # a null value is an absent key
                    if not isinstance(k, str) or not isinstance(v, str):
                        raise HeaderDecodeError(
                            f"{cls.__name__}: extFields entry {k!r} is not a string pair"
                        )
                    extra[k] = v
        return cls(extra=extra, **kwargs)

    @classmethod
    def _bad_value(cls, wire: str, raw: Any, e: Exception) -> HeaderDecodeError:
        jt = next(s.java_type.name for s in cls.__header_fields__ if s.wire == wire)
        if not isinstance(raw, str):
            return HeaderDecodeError(
                f"{cls.__name__} field {wire!r}: expected a string, got {type(raw).__name__}"
            )
        return HeaderDecodeError(
            f"{cls.__name__} field {wire!r}: {raw[:64]!r} is not a valid Java {jt} ({e})"
        )

    def missing_required(self) -> tuple[str, ...]:
        """Wire names of required fields that are None."""
        return tuple(wire for attr, wire in self.__required__ if getattr(self, attr) is None)

    def validate(self) -> None:
        """Raise MissingHeaderFieldError if a required field is None (Java's senders fill them)."""
        missing = self.missing_required()
        if missing:
            raise _missing_error(type(self).__name__, list(missing))


# ---- compiled codecs ----------------------------------------------------------------------------

#: Inline fast paths per Java type name: the common value handled without the type's formatter /
#: parser (anything else goes through them, and through their errors).
_INT_BOUNDS = {"Integer": _INT32, "int": _INT32, "Long": _INT64, "long": _INT64}


def _encode_value(header: CommandHeader, attr: str, fmt: Callable[[Any], str], jt: JavaType, value: Any) -> str:
    try:
        return fmt(value)
    except (TypeError, ValueError) as e:
        raise CodecError(f"{type(header).__name__}.{attr} ({jt.name}): {e}") from None


def _primitive_none(header: CommandHeader, attr: str, jt: JavaType) -> None:
    raise CodecError(f"{type(header).__name__}.{attr} is a primitive {jt.name} and cannot be None")


def _decode_value(cls: type[CommandHeader], wire: str, parse: Callable[[str], Any], raw: Any) -> Any:
    try:
        return parse(raw)
    except (ValueError, TypeError) as e:
        raise cls._bad_value(wire, raw, e) from None


def _encode_then_compile(self: CommandHeader) -> dict[str, str]:
    """A header class's first encode: compile its encoder, install it on the class, use it."""
    cls = type(self)
    fn = _compile_encoder(cls)
    cls.to_ext_fields = fn  # type: ignore[method-assign]
    return fn(self)


def _decode_then_compile(
    cls: type[CommandHeader], ext: Mapping[str, str] | None, *, strict: bool = True
) -> CommandHeader:
    """A header class's first decode: compile its decoder, install it on the class, use it."""
    fn = _compile_decoder(cls)
    cls.from_ext_fields = classmethod(fn)  # type: ignore[method-assign,assignment]
    return fn(cls, ext, strict=strict)


def _compile(name: str, lines: list[str], env: dict[str, Any]) -> Callable[..., Any]:
    exec("\n".join(lines), env)  # noqa: S102 - code built from the class's own declarations
    return env[name]


def _compile_encoder(cls: type[CommandHeader]) -> Callable[[CommandHeader], dict[str, str]]:
    env: dict[str, Any] = {"_enc": _encode_value, "_none": _primitive_none}
    lines = ["def to_ext_fields(self):", "    extra = self.extra", "    out = dict(extra) if extra else {}"]
    for i, (attr, wire, fmt, jt) in enumerate(cls.__encode_plan__):
        env[f"f{i}"], env[f"t{i}"] = fmt, jt
        w, slow = repr(wire), f"_enc(self, {attr!r}, f{i}, t{i}, v)"
        lines.append(f"    v = self.{attr}")
        if jt.primitive:
            lines += ["    if v is None:", f"        _none(self, {attr!r}, t{i})", "    if True:"]
        else:
            lines.append("    if v is not None:")
        bounds = _INT_BOUNDS.get(jt.name)
        if jt.name == "String":
            lines.append(f"        out[{w}] = v if type(v) is str else {slow}")
        elif bounds is not None:
            lo, hi = bounds
            lines.append(f"        out[{w}] = str(v) if type(v) is int and {lo} <= v <= {hi} else {slow}")
        elif jt.name in ("Boolean", "boolean"):
            lines.append(f"        out[{w}] = 'true' if v is True else 'false' if v is False else {slow}")
        else:
            lines.append(f"        out[{w}] = {slow}")
    lines.append("    return out")
    fn = _compile("to_ext_fields", lines, env)
    fn.__doc__ = CommandHeader.to_ext_fields.__doc__
    fn.__qualname__ = f"{cls.__qualname__}.to_ext_fields"
    return fn


def _compile_validator(cls: type[CommandHeader]) -> Callable[[CommandHeader], None]:
    # one `is None` test per required field, no generator: every request validates its header
    lines = ["def validate(self):"]
    if cls.__required__:
        test = " or ".join(f"self.{attr} is None" for attr, _ in cls.__required__)
        lines += [f"    if {test}:",
                  "        raise _missing_error(type(self).__name__, list(self.missing_required()))"]
    else:
        lines.append("    pass")
    fn = _compile("validate", lines, {"_missing_error": _missing_error})
    fn.__doc__ = CommandHeader.validate.__doc__
    fn.__qualname__ = f"{cls.__qualname__}.validate"
    return fn


def _compile_decoder(cls: type[CommandHeader]) -> Callable[..., CommandHeader]:
    env: dict[str, Any] = {"_dec": _decode_value, "_missing_error": _missing_error,
                           "HeaderDecodeError": HeaderDecodeError}
    lines = [
        "def from_ext_fields(cls, ext, *, strict=True):",
        "    ext = ext or {}",
        "    get = ext.get",
        "    kwargs = {}",
        "    missing = []",
        "    found = 0",
    ]
    for i, (attr, wire, parse, required) in enumerate(cls.__decode_plan__):
        env[f"p{i}"] = parse
        jt = cls.__header_fields__[i].java_type
        w, slow = repr(wire), f"_dec(cls, {wire!r}, p{i}, raw)"
        lines.append(f"    raw = get({w})")
        lines.append("    if raw is None:")
        lines.append(f"        missing.append({w})" if required else "        pass")
        lines.append("    else:")
        lines.append("        found += 1")
        bounds = _INT_BOUNDS.get(jt.name)
        if jt.name == "String":
            lines.append(f"        kwargs[{attr!r}] = raw if type(raw) is str else {slow}")
        elif bounds is not None:
            lo, hi = bounds
            lines += [
                "        if type(raw) is str and raw.isascii() and raw.isdigit():",
                "            n = int(raw)",
                f"            kwargs[{attr!r}] = n if n <= {hi} else {slow}",  # digits: never < lo
                "        else:",
                f"            kwargs[{attr!r}] = {slow}",
            ]
            assert lo < 0
        else:
            lines.append(f"        kwargs[{attr!r}] = {slow}")
    lines += [
        "    if missing and strict:",
        f"        raise _missing_error({cls.__name__!r}, missing)",
        "    extra = {}",
        "    if found != len(ext):  # some keys are not ours: keep them",
        "        wire_names = cls.__wire_names__",
        "        for k, v in ext.items():",
        "            if k not in wire_names and v is not None:  # a null value is an absent key",
        "                if not isinstance(k, str) or not isinstance(v, str):",
        "                    raise HeaderDecodeError(",
        f"                        f'{cls.__name__}: extFields entry {{k!r}} is not a string pair'",
        "                    )",
        "                extra[k] = v",
        "    return cls(extra=extra, **kwargs)",
    ]
    fn = _compile("from_ext_fields", lines, env)
    fn.__doc__ = CommandHeader.from_ext_fields.__doc__
    fn.__qualname__ = f"{cls.__qualname__}.from_ext_fields"
    return fn


def _missing_error(header: str, missing: list[str]) -> MissingHeaderFieldError:
    names = ", ".join(missing)
    err = MissingHeaderFieldError(f"{header}: required field(s) missing: {names}")
    err.header = header  # type: ignore[attr-defined]
    err.fields = tuple(missing)  # type: ignore[attr-defined]
    return err


# ---- 5.x RPC bases (remoting/rpc) ---------------------------------------------------------------


class RpcRequestHeader(CommandHeader):
    """Fields 5.x request headers inherit (4.9.x has only ``bname``)."""

    ns: str | None = jfield("String")
    nsd: bool | None = jfield("Boolean")
    bname: str | None = jfield("String")
    oway: bool | None = jfield("Boolean")


class TopicRequestHeader(RpcRequestHeader):
    lo: bool | None = jfield("Boolean")


class TopicQueueRequestHeader(TopicRequestHeader):
    pass
