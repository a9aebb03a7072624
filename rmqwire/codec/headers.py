"""Typed custom headers: the ``extFields`` string map of a RemotingCommand, as dataclasses.

One declaration per header class drives both directions. Each field is declared with
``jfield(java_type, required=..., wire=...)``; the Java type decides the string form
(wire-format.md section 8.1) and whether the field is a primitive (always sent, never None) or a
boxed/String field (omitted when None). Class names are the Java names; attributes are snake_case
and the wire name defaults to their camelCase.

Decoding is by exact key. Keys that the class does not declare land in ``extra`` and are written
back by ``to_ext_fields`` (ACL ``AccessKey``/``Signature``, ``_UNIQUE_KEY_QUERY``, ``MSG_REGION``,
``TRACE_ON``, ...). ``REQUEST_HEADERS`` / ``RESPONSE_HEADERS`` map request codes to classes.

Spec: shared/spec/wire-format.md section 8; Java classes under
``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/`` (5.3.3) and
``common/src/main/java/org/apache/rocketmq/common/protocol/header/`` (4.9.8).
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, dataclass_transform

from rmqwire.codec.codes import RequestCode
from rmqwire.errors import CodecError, HeaderDecodeError, MissingHeaderFieldError

if TYPE_CHECKING:
    from rmqwire.codec.frame import RemotingCommand


class BoundaryType(enum.Enum):
    """``org.apache.rocketmq.common.BoundaryType``; the wire form is the constant's name."""

    LOWER = "LOWER"
    UPPER = "UPPER"


class PullSysFlag(enum.IntFlag):
    """Bits of ``PullMessageRequestHeader.sysFlag`` (wire-format.md section 8.6)."""

    COMMIT_OFFSET = 0x01
    SUSPEND = 0x02
    SUBSCRIPTION = 0x04
    CLASS_FILTER = 0x08
    LITE_PULL = 0x10

    @classmethod
    def build(
        cls,
        *,
        commit_offset: bool = False,
        suspend: bool = False,
        subscription: bool = False,
        class_filter: bool = False,
        lite_pull: bool = False,
    ) -> PullSysFlag:
        flag = cls(0)
        if commit_offset:
            flag |= cls.COMMIT_OFFSET
        if suspend:
            flag |= cls.SUSPEND
        if subscription:
            flag |= cls.SUBSCRIPTION
        if class_filter:
            flag |= cls.CLASS_FILTER
        if lite_pull:
            flag |= cls.LITE_PULL
        return flag

    @classmethod
    def clear_commit_offset(cls, sys_flag: int) -> int:
        """What the Java client does before pulling from a slave."""
        return sys_flag & ~cls.COMMIT_OFFSET


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


def java_double_str(value: float) -> str:
    """``Double.toString``: plain decimal for 1e-3 <= |x| < 1e7, else ``d.dddE±n``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        if "e" not in text:
            return text
        return format(decimal.Decimal(text), "f")
    sign, digits, exp = decimal.Decimal(repr(float(value))).as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) - 1 + exp
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exponent}"


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
        return tuple(
            s.wire for s in self.__header_fields__ if s.required and getattr(self, s.attr) is None
        )

    def validate(self) -> None:
        """Raise MissingHeaderFieldError if a required field is None (Java's senders fill them)."""
        missing = self.missing_required()
        if missing:
            raise _missing_error(type(self).__name__, list(missing))


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


# ---- send ---------------------------------------------------------------------------------------


class SendMessageRequestHeader(TopicQueueRequestHeader):
    """SEND_MESSAGE (10), SEND_REPLY_MESSAGE (324). ``bname`` is the target broker name."""

    producer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    default_topic: str | None = jfield("String", required=True)
    default_topic_queue_nums: int | None = jfield("Integer", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    sys_flag: int | None = jfield("Integer", required=True)
    born_timestamp: int | None = jfield("Long", required=True)
    flag: int | None = jfield("Integer", required=True)
    properties: str | None = jfield("String")
    reconsume_times: int | None = jfield("Integer")
    unit_mode: bool | None = jfield("Boolean")  # 4.x: primitive boolean, always sent
    batch: bool | None = jfield("Boolean")  # 4.x: primitive boolean, always sent
    max_reconsume_times: int | None = jfield("Integer")

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """Java ``createSendMessageRequestHeaderV2``: ``bname`` becomes ``n``; ns/nsd/oway/lo drop.

        ``k``/``m`` come from Java's ``isUnitMode()``/``isBatch()``, which turn null into false, so
        V2 always carries them. Unknown extra keys are carried over (ACL keys etc.), except a..n.
        """
        return SendMessageRequestHeaderV2(
            a=self.producer_group,
            b=self.topic,
            c=self.default_topic,
            d=self.default_topic_queue_nums,
            e=self.queue_id,
            f=self.sys_flag,
            g=self.born_timestamp,
            h=self.flag,
            i=self.properties,
            j=self.reconsume_times,
            k=bool(self.unit_mode),
            l=self.max_reconsume_times,  # noqa: E741 - Java's name
            m=bool(self.batch),
            n=self.bname,
            extra={k: v for k, v in self.extra.items() if k not in _V2_WIRE},
        )


class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325).

    Java's class inherits the rpc fields, but its FastCodesHeader codec reads and writes only a..n,
    so here any other key (``bname`` included) stays in ``extra``.
    """

    a: str | None = jfield("String", required=True)  # producerGroup
    b: str | None = jfield("String", required=True)  # topic
    c: str | None = jfield("String", required=True)  # defaultTopic
    d: int | None = jfield("Integer", required=True)  # defaultTopicQueueNums
    e: int | None = jfield("Integer", required=True)  # queueId
    f: int | None = jfield("Integer", required=True)  # sysFlag
    g: int | None = jfield("Long", required=True)  # bornTimestamp
    h: int | None = jfield("Integer", required=True)  # flag
    i: str | None = jfield("String")  # properties
    j: int | None = jfield("Integer")  # reconsumeTimes
    k: bool | None = jfield("Boolean")  # unitMode
    l: int | None = jfield("Integer")  # noqa: E741 - maxReconsumeTimes
    m: bool | None = jfield("Boolean")  # batch
    n: str | None = jfield("String")  # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        """Java ``createSendMessageRequestHeaderV1`` (what the broker does with every V2 send)."""
        return SendMessageRequestHeader(
            producer_group=self.a,
            topic=self.b,
            default_topic=self.c,
            default_topic_queue_nums=self.d,
            queue_id=self.e,
            sys_flag=self.f,
            born_timestamp=self.g,
            flag=self.h,
            properties=self.i,
            reconsume_times=self.j,
            unit_mode=self.k,
            max_reconsume_times=self.l,
            batch=self.m,
            bname=self.n,
            extra={
                k: v
                for k, v in self.extra.items()
                if k not in SendMessageRequestHeader.__wire_names__
            },
        )


_V2_WIRE = frozenset("abcdefghijklmn")


class SendMessageResponseHeader(CommandHeader):
    """Response to every send code. The broker also puts MSG_REGION and TRACE_ON (kept in extra)."""

    msg_id: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    queue_offset: int | None = jfield("Long", required=True)
    transaction_id: str | None = jfield("String")
    batch_uniq_id: str | None = jfield("String")  # 5.x
    recall_handle: str | None = jfield("String")  # 5.x


class ReplyMessageRequestHeader(TopicQueueRequestHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> requesting producer."""

    producer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    default_topic: str | None = jfield("String", required=True)
    default_topic_queue_nums: int | None = jfield("Integer", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    sys_flag: int | None = jfield("Integer", required=True)
    born_timestamp: int | None = jfield("Long", required=True)
    flag: int | None = jfield("Integer", required=True)
    properties: str | None = jfield("String")
    reconsume_times: int | None = jfield("Integer")
    unit_mode: bool = jfield("boolean")
    born_host: str | None = jfield("String", required=True)
    store_host: str | None = jfield("String", required=True)
    store_timestamp: int = jfield("long", required=True)


# ---- pull ---------------------------------------------------------------------------------------


class PullMessageRequestHeader(TopicQueueRequestHeader):
    """PULL_MESSAGE (11), LITE_PULL_MESSAGE (361). ``sys_flag`` holds PullSysFlag bits."""

    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    queue_offset: int | None = jfield("Long", required=True)
    max_msg_nums: int | None = jfield("Integer", required=True)
    sys_flag: int | None = jfield("Integer", required=True)
    commit_offset: int | None = jfield("Long", required=True)
    suspend_timeout_millis: int | None = jfield("Long", required=True)
    subscription: str | None = jfield("String")
    sub_version: int | None = jfield("Long", required=True)
    expression_type: str | None = jfield("String")
    max_msg_bytes: int | None = jfield("Integer")  # 5.x
    request_source: int | None = jfield("Integer")  # 5.x
    proxy_forward_client_id: str | None = jfield("String", wire="proxyFrowardClientId")  # sic


class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int | None = jfield("Long", required=True)
    next_begin_offset: int | None = jfield("Long", required=True)
    min_offset: int | None = jfield("Long", required=True)
    max_offset: int | None = jfield("Long", required=True)
    offset_delta: int | None = jfield("Long")  # 5.x
    topic_sys_flag: int | None = jfield("Integer")  # 5.x
    group_sys_flag: int | None = jfield("Integer")  # 5.x
    forbidden_type: int | None = jfield("Integer")  # 5.x


# ---- offsets ------------------------------------------------------------------------------------


class QueryConsumerOffsetRequestHeader(TopicQueueRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    set_zero_if_not_found: bool | None = jfield("Boolean")  # 5.x


class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class UpdateConsumerOffsetRequestHeader(TopicQueueRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    commit_offset: int | None = jfield("Long", required=True)


class UpdateConsumerOffsetResponseHeader(CommandHeader):
    pass


class GetMaxOffsetRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    committed: bool = jfield("boolean", default=True)  # 5.x primitive: always sent


class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class GetMinOffsetRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)


class GetMinOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class SearchOffsetRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    timestamp: int | None = jfield("Long", required=True)
    boundary_type: BoundaryType | None = jfield("BoundaryType")  # 5.x; None means LOWER


class SearchOffsetResponseHeader(CommandHeader):
    offset: int | None = jfield("Long", required=True)


class GetEarliestMsgStoretimeRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)


class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int | None = jfield("Long", required=True)


class ResetOffsetRequestHeader(TopicQueueRequestHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int = jfield("int", default=-1)  # 5.x
    offset: int | None = jfield("Long")  # 5.x
    timestamp: int = jfield("long", required=True)
    is_force: bool = jfield("boolean", required=True)


class QueryConsumeTimeSpanRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)
    group: str | None = jfield("String", required=True)


class QueryTopicConsumeByWhoRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)


class QueryCorrectionOffsetHeader(TopicRequestHeader):
    filter_groups: str | None = jfield("String")
    compare_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)


class CloneGroupOffsetRequestHeader(RpcRequestHeader):
    src_group: str | None = jfield("String", required=True)
    dest_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String")
    offline: bool = jfield("boolean")


class QueryConsumeQueueRequestHeader(TopicQueueRequestHeader):
    topic: str | None = jfield("String")
    queue_id: int = jfield("int")
    index: int = jfield("long")
    count: int = jfield("int")
    consumer_group: str | None = jfield("String")


# ---- NameServer ---------------------------------------------------------------------------------


class GetRouteInfoRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)
    accept_standard_json_only: bool | None = jfield("Boolean")  # 4.9.4+


class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str | None = jfield("String", required=True)
    broker_addr: str | None = jfield("String", required=True)
    cluster_name: str | None = jfield("String", required=True)
    ha_server_addr: str | None = jfield("String", required=True)
    broker_id: int | None = jfield("Long", required=True)
    heartbeat_timeout_millis: int | None = jfield("Long")  # 5.x
    enable_acting_master: bool | None = jfield("Boolean")  # 5.x; absent marks an old broker
    compressed: bool = jfield("boolean")
    body_crc32: int | None = jfield("Integer", default=0)


class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = jfield("String")
    master_addr: str | None = jfield("String")


class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str | None = jfield("String", required=True)
    broker_addr: str | None = jfield("String", required=True)
    cluster_name: str | None = jfield("String", required=True)
    broker_id: int | None = jfield("Long", required=True)


class BrokerHeartbeatRequestHeader(CommandHeader):
    """BROKER_HEARTBEAT (904, 5.x only)."""

    cluster_name: str | None = jfield("String", required=True)
    broker_addr: str | None = jfield("String", required=True)
    broker_name: str | None = jfield("String", required=True)
    broker_id: int | None = jfield("Long")
    epoch: int | None = jfield("Integer")
    max_offset: int | None = jfield("Long")
    confirm_offset: int | None = jfield("Long")
    heartbeat_timeout_mills: int | None = jfield("Long")  # sic: "Mills"
    election_priority: int | None = jfield("Integer")


class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str | None = jfield("String", required=True)
    broker_addr: str | None = jfield("String", required=True)
    cluster_name: str | None = jfield("String", required=True)
    broker_id: int | None = jfield("Long", required=True)


class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool | None = jfield("Boolean", required=True)


class PutKVConfigRequestHeader(CommandHeader):
    namespace: str | None = jfield("String", required=True)
    key: str | None = jfield("String", required=True)
    value: str | None = jfield("String", required=True)


class GetKVConfigRequestHeader(CommandHeader):
    namespace: str | None = jfield("String", required=True)
    key: str | None = jfield("String", required=True)


class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = jfield("String")


class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str | None = jfield("String", required=True)
    key: str | None = jfield("String", required=True)


class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str | None = jfield("String", required=True)


class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str | None = jfield("String", required=True)


class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int | None = jfield("Integer", required=True)


class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str | None = jfield("String", required=True)


class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int | None = jfield("Integer", required=True)


class DeleteTopicFromNamesrvRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)
    cluster_name: str | None = jfield("String")


class RegisterTopicRequestHeader(TopicRequestHeader):
    """REGISTER_TOPIC_IN_NAMESRV (217)."""

    topic: str | None = jfield("String", required=True)


class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str | None = jfield("String", required=True)


class GetBrokerMemberGroupRequestHeader(CommandHeader):
    cluster_name: str | None = jfield("String", required=True)
    broker_name: str | None = jfield("String", required=True)


# ---- client <-> broker management ---------------------------------------------------------------


class HeartbeatRequestHeader(RpcRequestHeader):
    """HEART_BEAT (34): rpc fields only (4.9.x sends no header at all)."""


class UnregisterClientRequestHeader(RpcRequestHeader):
    client_id: str | None = jfield("String", required=True, wire="clientID")
    producer_group: str | None = jfield("String")
    consumer_group: str | None = jfield("String")


class UnregisterClientResponseHeader(CommandHeader):
    pass


class GetConsumerListByGroupRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)


class GetConsumerListByGroupResponseHeader(CommandHeader):
    pass


class ConsumerSendMsgBackRequestHeader(RpcRequestHeader):
    offset: int | None = jfield("Long", required=True)  # commit-log physical offset
    group: str | None = jfield("String", required=True)
    delay_level: int | None = jfield("Integer", required=True)
    origin_msg_id: str | None = jfield("String")
    origin_topic: str | None = jfield("String")
    unit_mode: bool = jfield("boolean")
    max_reconsume_times: int | None = jfield("Integer")


class EndTransactionRequestHeader(RpcRequestHeader):
    topic: str | None = jfield("String")  # 5.x
    producer_group: str | None = jfield("String", required=True)
    tran_state_table_offset: int | None = jfield("Long", required=True)
    commit_log_offset: int | None = jfield("Long", required=True)
    commit_or_rollback: int | None = jfield("Integer", required=True)  # 0 / 8 COMMIT / 12 ROLLBACK
    from_transaction_check: bool | None = jfield("Boolean", default=False)
    msg_id: str | None = jfield("String", required=True)
    transaction_id: str | None = jfield("String")


class EndTransactionResponseHeader(CommandHeader):
    pass


class CheckTransactionStateRequestHeader(RpcRequestHeader):
    topic: str | None = jfield("String")  # 5.x
    tran_state_table_offset: int | None = jfield("Long", required=True)
    commit_log_offset: int | None = jfield("Long", required=True)
    msg_id: str | None = jfield("String")
    transaction_id: str | None = jfield("String")
    offset_msg_id: str | None = jfield("String")


class NotifyConsumerIdsChangedRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)


class LockBatchMqRequestHeader(RpcRequestHeader):
    """LOCK_BATCH_MQ (41): rpc fields only; the queues travel in the body."""


class UnlockBatchMqRequestHeader(RpcRequestHeader):
    """UNLOCK_BATCH_MQ (42): rpc fields only."""


class CreateTopicRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)
    default_topic: str | None = jfield("String", required=True)
    read_queue_nums: int | None = jfield("Integer", required=True)
    write_queue_nums: int | None = jfield("Integer", required=True)
    perm: int | None = jfield("Integer", required=True)
    topic_filter_type: str | None = jfield("String", required=True)
    topic_sys_flag: int | None = jfield("Integer")
    order: bool | None = jfield("Boolean", required=True, default=False)
    attributes: str | None = jfield("String")  # 5.x
    force: bool | None = jfield("Boolean", default=False)  # 5.x


class DeleteTopicRequestHeader(TopicRequestHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str | None = jfield("String", required=True)


class GetTopicConfigRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)


class GetSubscriptionGroupConfigRequestHeader(RpcRequestHeader):
    group: str | None = jfield("String", required=True)


class DeleteSubscriptionGroupRequestHeader(RpcRequestHeader):
    group_name: str | None = jfield("String", required=True)
    clean_offset: bool = jfield("boolean")  # 5.x (4.x: removeOffset)


class ViewMessageRequestHeader(CommandHeader):
    topic: str | None = jfield("String")  # 5.x
    offset: int | None = jfield("Long", required=True)  # commit-log offset


class ViewMessageResponseHeader(CommandHeader):
    pass


class QueryMessageRequestHeader(TopicRequestHeader):
    """QUERY_MESSAGE (12). ``_UNIQUE_KEY_QUERY`` travels as an extra key."""

    topic: str | None = jfield("String", required=True)
    key: str | None = jfield("String", required=True)
    max_num: int | None = jfield("Integer", required=True)
    begin_timestamp: int | None = jfield("Long", required=True)
    end_timestamp: int | None = jfield("Long", required=True)


class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int | None = jfield("Long", required=True)
    index_last_update_phyoffset: int | None = jfield("Long", required=True)


class GetTopicStatsInfoRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)


class GetConsumeStatsRequestHeader(TopicRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String")
    topic_list: str | None = jfield("String")  # 5.x, ";"-separated


class GetConsumerRunningInfoRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)
    client_id: str | None = jfield("String", required=True)
    jstack_enable: bool = jfield("boolean")


class ConsumeMessageDirectlyResultRequestHeader(TopicRequestHeader):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str | None = jfield("String", required=True)
    client_id: str | None = jfield("String")
    msg_id: str | None = jfield("String")
    broker_name: str | None = jfield("String")
    topic: str | None = jfield("String")  # 5.x
    topic_sys_flag: int | None = jfield("Integer")  # 5.x
    group_sys_flag: int | None = jfield("Integer")  # 5.x


class GetConsumerConnectionListRequestHeader(RpcRequestHeader):
    consumer_group: str | None = jfield("String", required=True)


class GetProducerConnectionListRequestHeader(RpcRequestHeader):
    producer_group: str | None = jfield("String", required=True)


class GetConsumerStatusRequestHeader(TopicRequestHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str | None = jfield("String", required=True)
    group: str | None = jfield("String", required=True)
    client_addr: str | None = jfield("String")


class QueryTopicsByConsumerRequestHeader(RpcRequestHeader):
    group: str | None = jfield("String", required=True)


class QuerySubscriptionByConsumerRequestHeader(TopicRequestHeader):
    group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String")


class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str | None = jfield("String", required=True)
    stats_key: str | None = jfield("String", required=True)


class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    topic: str | None = jfield("String")  # 5.x
    msg_id: str | None = jfield("String")


class GetAllProducerInfoRequestHeader(CommandHeader):
    pass


class GetBrokerConfigResponseHeader(CommandHeader):
    """GET_BROKER_CONFIG (26) answer; the request has no header (UPDATE_BROKER_CONFIG neither)."""

    version: str | None = jfield("String", required=True)


# ---- registry -----------------------------------------------------------------------------------

_RC = RequestCode

#: Request code -> the class of its request header (codes without a request header are absent).
REQUEST_HEADERS: dict[int, type[CommandHeader]] = {
    _RC.SEND_MESSAGE: SendMessageRequestHeader,
    _RC.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    _RC.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    _RC.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    _RC.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeaderV2,
    _RC.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    _RC.PULL_MESSAGE: PullMessageRequestHeader,
    _RC.LITE_PULL_MESSAGE: PullMessageRequestHeader,
    _RC.QUERY_MESSAGE: QueryMessageRequestHeader,
    _RC.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    _RC.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    _RC.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    _RC.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    _RC.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    _RC.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    _RC.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    _RC.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    _RC.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    _RC.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    _RC.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    _RC.QUERY_CORRECTION_OFFSET: QueryCorrectionOffsetHeader,
    _RC.CLONE_GROUP_OFFSET: CloneGroupOffsetRequestHeader,
    _RC.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    _RC.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    _RC.REGISTER_BROKER: RegisterBrokerRequestHeader,
    _RC.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    _RC.BROKER_HEARTBEAT: BrokerHeartbeatRequestHeader,
    _RC.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    _RC.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    _RC.GET_KV_CONFIG: GetKVConfigRequestHeader,
    _RC.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    _RC.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    _RC.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    _RC.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
    _RC.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    _RC.REGISTER_TOPIC_IN_NAMESRV: RegisterTopicRequestHeader,
    _RC.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    _RC.GET_BROKER_MEMBER_GROUP: GetBrokerMemberGroupRequestHeader,
    _RC.HEART_BEAT: HeartbeatRequestHeader,
    _RC.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    _RC.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    _RC.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    _RC.END_TRANSACTION: EndTransactionRequestHeader,
    _RC.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    _RC.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    _RC.LOCK_BATCH_MQ: LockBatchMqRequestHeader,
    _RC.UNLOCK_BATCH_MQ: UnlockBatchMqRequestHeader,
    _RC.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    _RC.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    _RC.GET_TOPIC_CONFIG: GetTopicConfigRequestHeader,
    _RC.GET_SUBSCRIPTIONGROUP_CONFIG: GetSubscriptionGroupConfigRequestHeader,
    _RC.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    _RC.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    _RC.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    _RC.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    _RC.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    _RC.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    _RC.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    _RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
    _RC.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader,
    _RC.QUERY_TOPICS_BY_CONSUMER: QueryTopicsByConsumerRequestHeader,
    _RC.QUERY_SUBSCRIPTION_BY_CONSUMER: QuerySubscriptionByConsumerRequestHeader,
    _RC.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    _RC.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    _RC.GET_ALL_PRODUCER_INFO: GetAllProducerInfoRequestHeader,
}

#: Request code -> the class of the header of its (success) response.
RESPONSE_HEADERS: dict[int, type[CommandHeader]] = {
    _RC.SEND_MESSAGE: SendMessageResponseHeader,
    _RC.SEND_MESSAGE_V2: SendMessageResponseHeader,
    _RC.SEND_BATCH_MESSAGE: SendMessageResponseHeader,
    _RC.SEND_REPLY_MESSAGE: SendMessageResponseHeader,
    _RC.SEND_REPLY_MESSAGE_V2: SendMessageResponseHeader,
    _RC.PULL_MESSAGE: PullMessageResponseHeader,
    _RC.LITE_PULL_MESSAGE: PullMessageResponseHeader,
    _RC.QUERY_MESSAGE: QueryMessageResponseHeader,
    _RC.VIEW_MESSAGE_BY_ID: ViewMessageResponseHeader,
    _RC.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
    _RC.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetResponseHeader,
    _RC.GET_MAX_OFFSET: GetMaxOffsetResponseHeader,
    _RC.GET_MIN_OFFSET: GetMinOffsetResponseHeader,
    _RC.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetResponseHeader,
    _RC.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeResponseHeader,
    _RC.REGISTER_BROKER: RegisterBrokerResponseHeader,
    _RC.QUERY_DATA_VERSION: QueryDataVersionResponseHeader,
    _RC.GET_KV_CONFIG: GetKVConfigResponseHeader,
    _RC.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader,
    _RC.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader,
    _RC.UNREGISTER_CLIENT: UnregisterClientResponseHeader,
    _RC.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupResponseHeader,
    _RC.END_TRANSACTION: EndTransactionResponseHeader,
    _RC.GET_BROKER_CONFIG: GetBrokerConfigResponseHeader,
}


def decode_request_header(cmd: RemotingCommand, *, strict: bool = True) -> CommandHeader | None:
    """The typed header of a request, or None when its code has no registered header class."""
    cls = REQUEST_HEADERS.get(cmd.code)
    if cls is None:
        return None
    return cls.from_ext_fields(cmd.ext_fields, strict=strict)


def decode_response_header(
    request_code: int, cmd: RemotingCommand, *, strict: bool = True
) -> CommandHeader | None:
    """The typed header of a response to ``request_code``, or None if that code has none.

    Java clients decode it only for success codes; error responses usually lack the required
    fields, so decode those with ``strict=False`` (or not at all).
    """
    cls = RESPONSE_HEADERS.get(request_code)
    if cls is None:
        return None
    return cls.from_ext_fields(cmd.ext_fields, strict=strict)
