"""RemotingCommand framing: the length-prefixed frame, the JSON header and the ROCKETMQ header.

Construct schemas (``FRAME``, ``ROCKETMQ_HEADER``) are the schema of record. ``encode_frame`` and
``FrameDecoder`` use a hand-written path with the same bytes (struct + a small JSON writer), because
they sit on every request; tests/unit/codec/test_frame_schema.py property-tests that the two agree.
Spec: shared/spec/wire-format.md sections 1-5.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import construct as cs

from rmqwire.codec.codes import (
    DEFAULT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    SerializeType,
)
from rmqwire.codec.java import FASTJSON_ESCAPES, fastjson_quote
from rmqwire.errors import (
    CodecError,
    FrameTooLargeError,
    HeaderDecodeError,
    HeaderLengthError,
    UnknownSerializeTypeError,
)

#: Java's default ``com.rocketmq.remoting.frameMaxLength``: Netty compares length + 4 with it.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024

# ---- Construct schemas (schema of record) -------------------------------------------------------

class NullIfEmpty(cs.Adapter):  # type: ignore[misc]
    """Java's null on the wire: a zero-length value decodes as None, None encodes as ``empty``.

    RocketMQSerializable reads a string of length 0 as null, and writes null (and "") as length 0.
    """

    def __init__(self, subcon: cs.Construct, empty: Any = "") -> None:
        super().__init__(subcon)
        self.empty = empty

    def _decode(self, obj: Any, context: Any, path: str) -> Any:
        return None if len(obj) == 0 else obj

    def _encode(self, obj: Any, context: Any, path: str) -> Any:
        return self.empty if obj is None else obj


#: ``{keyLen:int16, key, valLen:int32, val}``; a zero length is null. An entry with a null key or
#: value carries nothing a header reads (Java's map holds it, ``extFields.get`` sees null), so it
#: is dropped from ``RemotingCommand.ext_fields``.
EXT_FIELD_ENTRY = cs.Struct(
    "key" / NullIfEmpty(cs.PascalString(cs.Int16sb, "utf8")),
    "value" / NullIfEmpty(cs.PascalString(cs.Int32sb, "utf8")),
)

#: The ROCKETMQ binary header (RocketMQSerializable): 21 fixed bytes + remark + ext entries. A
#: zero-length remark is null, and so is a zero-length extFields area (Java makes no map); the
#: entries must fill their area exactly. Bytes after the area are ignored, as Java does.
ROCKETMQ_HEADER = cs.Struct(
    "code" / cs.Int16sb,
    "language" / cs.Int8ub,
    "version" / cs.Int16sb,
    "opaque" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "remark" / NullIfEmpty(cs.PascalString(cs.Int32sb, "utf8")),
    "ext_fields" / NullIfEmpty(
        cs.Prefixed(
            cs.Int32sb,
            cs.FocusedSeq("entries", "entries" / cs.GreedyRange(EXT_FIELD_ENTRY), cs.Terminated),
        ),
        empty=[],
    ),
)

#: The header word: serialize type byte + 24-bit header length.
HEADER_WORD = cs.BitStruct(
    "serialize_type" / cs.Enum(cs.BitsInteger(8), SerializeType),
    "header_length" / cs.BitsInteger(24),
)

#: A whole frame. ``length`` counts everything after itself (header word + header + body).
FRAME = cs.Struct(
    "length" / cs.Rebuild(cs.Int32sb, 4 + cs.len_(cs.this.header) + cs.len_(cs.this.body)),
    "header_word" / cs.Rebuild(
        HEADER_WORD,
        lambda ctx: dict(serialize_type=ctx.serialize_type, header_length=len(ctx.header)),
    ),
    "header" / cs.Bytes(cs.this.header_word.header_length),
    "body" / cs.Bytes(cs.this.length - 4 - cs.this.header_word.header_length),
)


# ---- RemotingCommand ------------------------------------------------------------------------------


class HasExtFields(Protocol):
    """A typed custom header (rmqwire.codec.header) that flattens itself into extFields."""

    def to_ext_fields(self) -> dict[str, str]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class RemotingCommand:
    """One RocketMQ remoting frame, request or response.

    ``language`` is PYTHON unless given, on every constructor (a server that poses as Java passes
    JAVA); it is None when a JSON header named a language Java does not know (Java reads it as
    null). ``body`` is None for an absent or empty body (the wire cannot tell them apart).
    ``serialize_type`` records the header type the frame arrived in; it does not affect equality.
    """

    code: int
    language: LanguageCode | None = LanguageCode.PYTHON
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: SerializeType = dataclasses.field(default=SerializeType.JSON, compare=False)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        header: HasExtFields | Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        opaque: int = 0,
        oneway: bool = False,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = DEFAULT_VERSION,
        remark: str | None = None,
    ) -> RemotingCommand:
        """A request. ``header`` is a typed header or a ready extFields mapping.

        A typed header always yields an extFields object (``{}`` when all its fields are null), as
        Java does for a request that has a custom header.
        """
        return cls(
            code=int(code),
            language=language,
            version=version,
            opaque=opaque,
            flag=FLAG_ONEWAY if oneway else 0,
            remark=remark,
            ext_fields=_ext_fields_of(header),
            body=body or None,
        )

    def response_to(
        self,
        code: int = 0,
        remark: str | None = None,
        header: HasExtFields | Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = DEFAULT_VERSION,
    ) -> RemotingCommand:
        """The response to this request: same opaque, RESPONSE flag set."""
        return RemotingCommand(
            code=int(code),
            language=language,
            version=version,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=_ext_fields_of(header),
            body=body or None,
        )

    def with_opaque(self, opaque: int) -> RemotingCommand:
        # positional: dataclasses.replace looks the fields up on every call (one per request)
        return RemotingCommand(self.code, self.language, self.version, opaque, self.flag, self.remark,
                               self.ext_fields, self.body, self.serialize_type)


def _all_str(d: Mapping[Any, Any]) -> bool:
    """Every key and value is a str (join raises on anything else: a C-level type check)."""
    try:
        "".join(d)
        "".join(d.values())
    except TypeError:
        return False
    return True


def _ext_fields_of(header: HasExtFields | Mapping[str, str] | None) -> dict[str, str] | None:
    if header is None:
        return None
    if type(header) is dict and _all_str(header):
        return header.copy()
    if hasattr(header, "to_ext_fields"):
        return header.to_ext_fields()
    return {str(k): str(v) for k, v in header.items()}


# ---- JSON header ----------------------------------------------------------------------------------

_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(",", ":"))
_JSON_ENCODE = _JSON_ENCODER.encode
if json.encoder.c_make_encoder is not None:
    # The C encoder JSONEncoder.encode builds on every call, built once (same arguments: no
    # circular check, its default, ensure_ascii=False, compact separators, allow_nan): one per
    # frame sent.
    _C_ENCODE = json.encoder.c_make_encoder(
        None, _JSON_ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )

    def _JSON_ENCODE(o: Any) -> str:  # noqa: N802
        return "".join(_C_ENCODE(o, 0))
# The C encoder writes \u00XX with lowercase hex; fastjson uses uppercase. An escaped backslash is
# matched first so that a literal backslash followed by "u001b" is left alone.
_LOWER_HEX_ESCAPE = re.compile(r"\\\\|\\u00[01][0-9a-f]")


#: the C encoder's own string writer (ensure_ascii off), as it quotes map keys and values
_QUOTE = json.encoder.encode_basestring
_LOWER_HEX_ANY = re.compile(r"\\u00[01][a-f]")  # cheap pre-check; may over-match, never under
# Characters the C encoder leaves raw (it escapes only controls, quote and backslash) but fastjson
# escapes: DEL, U+2028, U+2029.
_RAW_SPECIAL_ESCAPES = {c: e for c, e in FASTJSON_ESCAPES.items() if c > 0x7E}


def _upper_escape(m: re.Match[str]) -> str:
    g = m.group()
    return g if len(g) == 2 else g[:5] + g[5].upper()


def _json_object(d: Mapping[str, str]) -> str:
    """A str->str map as fastjson writes it (insertion order, fastjson escapes): the C encoder's
    output with fix-ups, equal to ``fastjson_quote`` on every key and value but much faster."""
    return _fastjson_fixups(_JSON_ENCODE(d))


def json_quote(text: str) -> str:
    """A string as ``_json_object`` writes it as a value (quotes included): fastjson's escapes."""
    return _fastjson_fixups(_QUOTE(text))


def _fastjson_fixups(out: str) -> str:
    """The C encoder's strings made fastjson's (each fix-up stays within one string)."""
    if "\\u00" in out and _LOWER_HEX_ANY.search(out) is not None:
        out = _LOWER_HEX_ESCAPE.sub(_upper_escape, out)
    # Substring tests are far cheaper than a regex scan; U+2028/9 can only occur in non-ASCII text.
    if "\x7f" in out or (not out.isascii() and ("\u2028" in out or "\u2029" in out)):
        out = out.translate(_RAW_SPECIAL_ESCAPES)
    return out


@functools.lru_cache(maxsize=1024)
def _plain_json_header(code: int, flag: int, language: LanguageCode | None,
                       version: int) -> tuple[bytes, bytes]:
    """The JSON header of a command without extFields and remark, split at its opaque."""
    lang = "" if language is None else f',"language":"{language.name}"'
    return (f'{{"code":{code},"flag":{flag}{lang},"opaque":'.encode(),
            f',"serializeTypeCurrentRPC":"JSON","version":{version}}}'.encode())


@functools.lru_cache(maxsize=1024)
def _ext_json_header(code: int, flag: int, language: LanguageCode | None,
                     version: int) -> tuple[str, str, str]:
    """The JSON header of a command with extFields and no remark, split around both."""
    lang = "" if language is None else f',"language":"{language.name}"'
    return (f'{{"code":{code},"extFields":', f',"flag":{flag}{lang},"opaque":',
            f',"serializeTypeCurrentRPC":"JSON","version":{version}}}')


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header exactly as Java's fastjson writes it: top-level keys sorted, null members
    omitted, extFields in the map's own order (Java writes its HashMap's order)."""
    if cmd.remark is None:
        if cmd.ext_fields is None:  # most responses: a cached frame around the opaque
            head, tail = _plain_json_header(cmd.code, cmd.flag, cmd.language, cmd.version)
            return b"%s%d%s" % (head, cmd.opaque, tail)
        # most requests (every send): cached text around the extFields and the opaque
        head, mid, tail = _ext_json_header(cmd.code, cmd.flag, cmd.language, cmd.version)
        return f"{head}{_json_object(cmd.ext_fields)}{mid}{cmd.opaque}{tail}".encode()
    return _json_header_text(cmd)


def json_request_template(cmd: RemotingCommand, open_fields: tuple[str, ...],
                          text_fields: tuple[str, ...] = ()) -> tuple[bytes, tuple[str, ...]]:
    """``encode_json_header(cmd)`` as a bytes %-template: the extFields values named in
    ``open_fields`` (integers, written as Java writes a number in a String field) and then the
    opaque are ``%d`` slots; those named in ``text_fields`` are ``%s`` slots for the value as
    ``json_quote(value).encode()`` writes it. Returns the template and the open and text fields in
    the order of their slots (the opaque's slot comes last). For a request sent again and again
    with only those values changed (a queue's pulls): ``template % (*values, opaque)`` is its
    header."""
    ext = cmd.ext_fields
    if (cmd.remark is not None or not ext or any(f not in ext for f in open_fields)
            or any(f not in ext for f in text_fields)):
        raise CodecError("a request template needs extFields holding every open field and no remark")
    head, mid, tail = _ext_json_header(cmd.code, cmd.flag, cmd.language, cmd.version)
    items, order = [], []
    for k, v in ext.items():
        if k in open_fields:
            # the key as the encoder writes it; the value's quotes kept around the slot
            items.append(_json_object({k: ""})[1:-3].replace("%", "%%") + '"%d"')
            order.append(k)
        elif k in text_fields:
            items.append(_json_object({k: ""})[1:-3].replace("%", "%%") + "%s")
            order.append(k)
        else:
            # each member as the encoder writes it (its output for a map is its members joined)
            items.append(_json_object({k: v})[1:-1].replace("%", "%%"))
    text = f"{head.replace('%', '%%')}{{{','.join(items)}}}{mid.replace('%', '%%')}%d{tail.replace('%', '%%')}"
    return text.encode("utf-8"), tuple(order)


class PreparedRequest:
    """A two-way request framed but for a few integers and its opaque (``json_request_template``),
    sent as JSON. ``command()`` builds the same request as a ``RemotingCommand`` for a connection
    that needs one (RPC hooks that sign or change it, a ROCKETMQ header)."""

    __slots__ = ("code", "template", "values", "command", "body")

    def __init__(self, code: int, template: bytes, values: tuple[int | bytes, ...],
                 command: Any, body: bytes | None = None) -> None:
        self.code = code
        self.template = template
        self.values = values
        #: () -> RemotingCommand: the typed request this frame stands for
        self.command = command
        self.body = body

    def frame(self, opaque: int) -> bytes:
        header = self.template % (*self.values, opaque)
        if len(header) > 0xFFFFFF:
            raise CodecError(f"header of {len(header)} bytes does not fit the 24-bit header length")
        body = self.body
        if not body:
            return _FRAME_PREFIX.pack(4 + len(header), len(header)) + header
        return b"".join((_FRAME_PREFIX.pack(4 + len(header) + len(body), len(header)), header, body))


def _json_header_text(cmd: RemotingCommand) -> bytes:
    """``encode_json_header`` for any command (the reference of its cached form)."""
    parts = [f'{{"code":{cmd.code}']
    if cmd.ext_fields is not None:
        parts.append(',"extFields":')
        parts.append(_json_object(cmd.ext_fields))
    parts.append(f',"flag":{cmd.flag}')
    if cmd.language is not None:
        parts.append(f',"language":"{cmd.language.name}"')
    parts.append(f',"opaque":{cmd.opaque}')
    if cmd.remark is not None:
        parts.append(f',"remark":{fastjson_quote(cmd.remark)}')
    parts.append(f',"serializeTypeCurrentRPC":"JSON","version":{cmd.version}}}')
    return "".join(parts).encode("utf-8")


def _java_string(value: Any) -> str:
    """How fastjson turns a non-string JSON value into a Java String field value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if value is None:
        return "null"
    return str(value)


def _lenient_int(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise HeaderDecodeError(f"JSON header field {key!r} is a boolean, expected a number")
    if isinstance(value, int):
        return value
    try:
        return int(value)  # fastjson coerces numeric strings ("105")
    except (TypeError, ValueError):
        raise HeaderDecodeError(f"JSON header field {key!r} is not a number: {value!r}") from None


def _lenient_language(value: Any) -> LanguageCode | None:
    if value is None:
        return LanguageCode.JAVA
    if isinstance(value, str):
        try:
            return LanguageCode[value.upper()]
        except KeyError:
            if not value.strip().lstrip("-").isdigit():
                return None  # fastjson reads an unknown enum name as null
            value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return LanguageCode(value)
        except ValueError:
            raise HeaderDecodeError(f"language ordinal {value} is out of range") from None
    raise HeaderDecodeError(f"bad language value in JSON header: {value!r}")


_JSON_DECODE = json.JSONDecoder().decode
_JSON_SCAN = json.JSONDecoder().scan_once
_LANGUAGE_BY_NAME = {lc.name: lc for lc in LanguageCode}
_NO_LANGUAGE = object()


def _json_header_object(text: str) -> Any:
    """The header's JSON value: the standard parse, else fastjson's lenient one."""
    try:
        # Java writes no whitespace around the header: the C scanner alone reads it (what
        # JSONDecoder.decode adds is skipping and checking whitespace); anything else goes on.
        try:
            obj, end = _JSON_SCAN(text, 0)
        except StopIteration:
            end = -1
        return obj if end == len(text) else _JSON_DECODE(text)
    except (ValueError, RecursionError):  # JSONDecodeError, or an int past Python's digit limit
        from rmqwire.codec import (
            fastjson,  # lenient fallback: unquoted keys, single quotes
        )

        try:
            return fastjson.loads_lenient(text)
        except CodecError as e:
            raise HeaderDecodeError(f"JSON header is not valid JSON: {e}") from None


def decode_json_header(data: bytes, body: bytes | None = None) -> RemotingCommand:
    """Read a JSON header as leniently as fastjson does (wire-format.md section 2)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HeaderDecodeError(f"JSON header is not valid UTF-8: {e.reason}", offset=e.start) from None
    obj = _json_header_object(text)
    if not isinstance(obj, dict):
        raise HeaderDecodeError(f"JSON header is a {type(obj).__name__}, expected an object")
    if "code" not in obj:
        raise HeaderDecodeError("JSON header has no 'code'")
    ext = obj.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise HeaderDecodeError(f"extFields is a {type(ext).__name__}, expected an object")
        # Java clients send only string values: then the parsed dict is already the answer.
        if ext and not _all_str(ext):
            ext = {str(k): _java_string(v) for k, v in ext.items() if v is not None}
    get = obj.get
    # Same checking order as the general path (code, language, version, opaque, flag).
    code, lang = get("code"), get("language")
    if type(code) is not int:
        code = _lenient_int(obj, "code", 0)
    language = _LANGUAGE_BY_NAME.get(lang, _NO_LANGUAGE) if type(lang) is str else _NO_LANGUAGE
    if language is _NO_LANGUAGE:
        language = _lenient_language(lang)
    version, opaque, flag = get("version"), get("opaque"), get("flag")
    if type(version) is not int:
        version = _lenient_int(obj, "version", 0)
    if type(opaque) is not int:
        opaque = _lenient_int(obj, "opaque", 0)
    if type(flag) is not int:
        flag = _lenient_int(obj, "flag", 0)
    remark = get("remark")
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=None if remark is None else _java_string(remark),
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.JSON,
    )


# ---- ROCKETMQ header ------------------------------------------------------------------------------

_RMQ_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_RMQ_FIXED_REMARK = struct.Struct(">hBhiii")


@functools.lru_cache(maxsize=4096)
def _key_prefix(k: str) -> bytes:
    """Encoded "keyLen key": header keys come from a small fixed vocabulary (a..n, topic, ...)."""
    kb = k.encode("utf-8")
    return _I16.pack(len(kb)) + kb


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ binary header; codes and versions keep only their low 16 bits, as in Java."""
    language = 0 if cmd.language is None else int(cmd.language)
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts = []
    if cmd.ext_fields:
        key_prefix = _key_prefix
        pack32 = _I32.pack
        append = parts.append
        for k, v in cmd.ext_fields.items():
            if k is None or v is None:
                continue
            append(key_prefix(k))
            vb = v.encode("utf-8")
            append(pack32(len(vb)))
            append(vb)
    entries = b"".join(parts)
    return b"".join(
        (
            _RMQ_FIXED.pack(
                _to_int16(cmd.code),
                language,
                _to_int16(cmd.version),
                _to_int32(cmd.opaque),
                _to_int32(cmd.flag),
            ),
            _I32.pack(len(remark)),
            remark,
            _I32.pack(len(entries)),
            entries,
        )
    )


def _to_int16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v >= 0x8000 else v


def _to_int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v >= 0x80000000 else v


_LANGUAGE_BY_CODE = {int(lc): lc for lc in LanguageCode}


def decode_rocketmq_header(data: bytes | memoryview, body: bytes | None = None) -> RemotingCommand:
    """Read a ROCKETMQ header. Zero-length remark, keys and values decode as null (Java does);
    entries with a null key or value are left out (see ``EXT_FIELD_ENTRY``)."""
    if type(data) is not bytes:
        data = bytes(data)  # slicing bytes is much cheaper than slicing a memoryview
    n = len(data)
    if n < 21:
        raise HeaderDecodeError(f"ROCKETMQ header is {n} bytes, shorter than the 21 fixed bytes")
    code, lang, version, opaque, flag, remark_len = _RMQ_FIXED_REMARK.unpack_from(data, 0)
    pos = 17
    if remark_len < 0 or remark_len > n - pos:
        raise HeaderDecodeError(f"remark length {remark_len} exceeds the header", offset=pos - 4)
    remark = _utf8(data[pos : pos + remark_len], pos) if remark_len else None
    pos += remark_len
    if n - pos < 4:
        raise HeaderDecodeError("ROCKETMQ header ends before the extFields length", offset=pos)
    (ext_len,) = _I32.unpack_from(data, pos)
    pos += 4
    if ext_len < 0 or ext_len > n - pos:
        raise HeaderDecodeError(f"extFields length {ext_len} exceeds the header", offset=pos - 4)
    ext: dict[str, str] | None = None
    end = pos + ext_len
    if ext_len:
        ext = {}
        i16 = _I16.unpack_from
        i32 = _I32.unpack_from
        spos = pos  # start of the string being decoded, for the error offset
        try:
            while pos < end:
                if end - pos < 2:
                    raise HeaderDecodeError("truncated extFields key length", offset=pos)
                (klen,) = i16(data, pos)
                pos += 2
                if klen < 0 or klen > end - pos:
                    raise HeaderDecodeError(f"extFields key length {klen} overruns", offset=pos - 2)
                key = None
                if klen:
                    spos = pos
                    key = data[pos : pos + klen].decode()
                pos += klen
                if end - pos < 4:
                    raise HeaderDecodeError("truncated extFields value length", offset=pos)
                (vlen,) = i32(data, pos)
                pos += 4
                if vlen < 0 or vlen > end - pos:
                    raise HeaderDecodeError(f"extFields value length {vlen} overruns", offset=pos - 4)
                if vlen:
                    spos = pos
                    value = data[pos : pos + vlen].decode()
                    if key is not None:
                        ext[key] = value
                elif key is not None:
                    ext.pop(key, None)  # Java's put(key, null) hides an earlier value of the key
                pos += vlen
        except UnicodeDecodeError as e:
            raise HeaderDecodeError(f"invalid UTF-8: {e.reason}", offset=spos + e.start) from None
    return RemotingCommand(
        code=code,
        language=_LANGUAGE_BY_CODE.get(lang),  # Java's LanguageCode.valueOf(byte): null if unknown
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _utf8(b: bytes | memoryview, offset: int) -> str:
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError as e:
        raise HeaderDecodeError(f"invalid UTF-8: {e.reason}", offset=offset + e.start) from None


# ---- frames ---------------------------------------------------------------------------------------

_FRAME_PREFIX = struct.Struct(">ii")


def encode_header(cmd: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    if serialize_type == SerializeType.JSON:
        return encode_json_header(cmd)
    if serialize_type == SerializeType.ROCKETMQ:
        return encode_rocketmq_header(cmd)
    raise CodecError(f"unknown serialize type {serialize_type!r}")


def encode_frame(cmd: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    """The whole frame: length prefix, header word, header, body."""
    header = encode_json_header(cmd) if serialize_type == SerializeType.JSON else encode_header(
        cmd, serialize_type)
    body = cmd.body or b""
    if len(header) > 0xFFFFFF:
        raise CodecError(f"header of {len(header)} bytes does not fit the 24-bit header length")
    prefix = _FRAME_PREFIX.pack(4 + len(header) + len(body), (int(serialize_type) << 24) | len(header))
    return b"".join((prefix, header, body))


def decode_frame_payload(payload: bytes | memoryview) -> RemotingCommand:
    """Decode what follows the length prefix: header word, header and body."""
    n = len(payload)
    if n < 4:
        raise HeaderLengthError(f"frame of {n} bytes has no header word")
    (word,) = _I32.unpack_from(payload, 0)
    stype = (word >> 24) & 0xFF
    header_length = word & 0xFFFFFF
    if header_length > n - 4:
        raise HeaderLengthError(
            f"header length {header_length} exceeds the frame's {n - 4} bytes after the header word"
        )
    header = payload[4 : 4 + header_length]
    body_len = n - 4 - header_length
    body = bytes(payload[4 + header_length :]) if body_len else None
    if stype == SerializeType.ROCKETMQ:
        return decode_rocketmq_header(header, body)
    if stype == SerializeType.JSON:
        return decode_json_header(bytes(header), body)
    raise UnknownSerializeTypeError(f"unknown serialize type {stype} in header word")


class FrameDecoder:
    """Incremental frame reassembly over arbitrary chunk boundaries (sans-IO).

    An oversize length prefix is rejected as soon as its 4 bytes arrive, before any buffering.
    After a CodecError the stream is unusable (the caller closes the connection, as Java does);
    the error's ``frames`` attribute holds the good frames decoded before the bad one in the same
    ``feed`` call, which Java would still have handed to its processors.
    """

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._failed: CodecError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """The commands of the frames ``data`` completes."""
        return self.feed_peeking(data, None)

    def feed_peeking(self, data: bytes, peek: Callable[[bytearray, int, int], Any] | None) -> list[Any]:
        """``feed``, each whole frame's payload (``buf[start:end]``: what follows the length
        prefix) offered to ``peek(buf, start, end)`` first: what it returns, unless None, stands
        for that frame in the list (undecoded; ``buf`` is valid during the call only)."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        buf += data
        out: list[Any] = []
        pos = 0
        size = len(buf)
        try:
            while size - pos >= 4:
                (length,) = _I32.unpack_from(buf, pos)
                if length < 4:
                    raise HeaderLengthError(f"frame length {length} is smaller than the header word")
                if length + 4 > self.max_frame_length:
                    raise FrameTooLargeError(
                        f"frame of {length + 4} bytes exceeds the maximum frame length "
                        f"{self.max_frame_length}"
                    )
                end = pos + 4 + length
                if end > size:
                    break
                if peek is not None:
                    item = peek(buf, pos + 4, end)
                    if item is not None:
                        out.append(item)
                        pos = end
                        continue
                out.append(decode_frame_payload(memoryview(buf)[pos + 4 : end]))
                pos = end
        except CodecError as e:
            e.frames = out
            self._failed = e
            self._buf = bytearray()
            raise
        if pos:
            del buf[:pos]
        return out


def decode_frame(data: bytes) -> RemotingCommand:
    """Decode exactly one whole frame (length prefix included)."""
    dec = FrameDecoder(max_frame_length=max(DEFAULT_MAX_FRAME_LENGTH, len(data)))
    cmds = dec.feed(data)
    if len(cmds) != 1 or dec.buffered:
        raise CodecError(f"expected exactly one frame, got {len(cmds)} with {dec.buffered} bytes left")
    return cmds[0]
