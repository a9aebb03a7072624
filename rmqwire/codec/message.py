"""Messages: properties string, sysFlag, compression, the stored record and the batch body.

Spec: shared/spec/wire-format.md section 10 (and broker-and-store.md section 1 for the commit log).
The Construct schemas ``STORED_MESSAGE`` and ``BATCH_ENTRY`` are the schema of record; the
hand-written ``decode_messages`` / ``encode_message`` / ``encode_batch`` / ``decode_batch`` give
the same bytes and values (tests/unit/codec/test_message_schema.py checks that with Hypothesis).

Decoding is stricter than Java's ``MessageDecoder`` in one way: Java swallows a malformed record and
returns the records before it; we raise ``MessageDecodeError`` (pass ``strict=False`` to
``decode_messages`` for Java's behaviour). We also insist that TOTALSIZE matches the fields, which
Java never checks.
"""

from __future__ import annotations

import dataclasses
import enum
import socket
import struct
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence

import construct as cs
import lz4.frame
import zstandard

from rmqwire.codec.ids import HEX2_BYTES, create_offset_msg_id
from rmqwire.codec.java import java_string_hash
from rmqwire.errors import CodecError, MessageDecodeError

# ---- constants ------------------------------------------------------------------------------------

#: Record magic codes as signed int32 (Java ``MessageDecoder``): V2 only for topics > 127 bytes.
MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
#: End-of-file filler in a commit-log segment (never inside a pull body).
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

#: Decompressed bodies larger than this are refused. Java's default maxMessageSize is 4 MiB of
#: *stored* (compressed) body; 64 MiB leaves room for very compressible bodies while keeping a
#: hostile "zip bomb" from taking the process down.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

#: Java's ``MessageExtEncoder`` refuses properties longer than Short.MAX_VALUE.
MAX_PROPERTIES_LENGTH = 32767


class PropertyKey:
    """Well-known property keys (Java ``MessageConst``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    INNER_NUM = "INNER_NUM"
    INNER_BASE = "INNER_BASE"
    DUP_INFO = "DUP_INFO"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_ID = "__transactionId__"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    INSTANCE_ID = "INSTANCE_ID"
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MESSAGE_TYPE = "MSG_TYPE"
    POP_CK = "POP_CK"
    POP_CK_OFFSET = "POP_CK_OFFSET"
    FIRST_POP_TIME = "1ST_POP_TIME"
    SHARDING_KEY = "__SHARDINGKEY"
    FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID"
    REDIRECT = "REDIRECT"
    INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    TRACE_CONTEXT = "TRACE_CONTEXT"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"
    BORN_HOST = "__BORNHOST"
    BORN_TIMESTAMP = "BORN_TIMESTAMP"
    TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
    TRANSIENT_TOPIC_CONFIG = "__RMQ.TRANSIENT.TOPIC_SYS_FLAG"
    TRANSIENT_GROUP_CONFIG = "__RMQ.TRANSIENT.GROUP_SYS_FLAG"
    CRC32 = "__CRC32#"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

    #: Separator between the values of KEYS.
    KEY_SEPARATOR = " "


# ---- sysFlag and compression ----------------------------------------------------------------------


class MessageSysFlag(enum.IntFlag):
    """Bits of the record's ``sysFlag`` (Java ``MessageSysFlag``)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6 = 0x10
    STOREHOSTADDRESS_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_LZ4_TYPE = 0x100
    COMPRESSION_ZSTD_TYPE = 0x200
    COMPRESSION_ZLIB_TYPE = 0x300
    COMPRESSION_TYPE_MASK = 0x700


TRANSACTION_NOT_TYPE = 0
TRANSACTION_TYPE_MASK = 0xC


class CompressionType(enum.IntEnum):
    """Java ``CompressionType``: the value lives in sysFlag bits 8-10."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def flag(self) -> int:
        """The sysFlag bits for this type (without the COMPRESSED bit)."""
        return int(self) << 8

    @classmethod
    def of(cls, name: str) -> CompressionType:
        """Parse a name as Java's ``CompressionType.of`` does (trimmed, case-insensitive)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise CodecError(f"unsupported compression type name: {name!r}") from None


def compression_type_of(sys_flag: int) -> CompressionType:
    """The compression type named by sysFlag bits 8-10; 0 means ZLIB (4.x clients set only bit 0)."""
    value = (sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK) >> 8
    if value == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(value)
    except ValueError:
        raise CodecError(f"unknown compression type value {value} in sysFlag {sys_flag:#x}") from None


def set_compression(sys_flag: int, ctype: CompressionType) -> int:
    """sysFlag with the COMPRESSED bit and ``ctype``'s type bits set (as a 5.x producer does)."""
    return (sys_flag & ~MessageSysFlag.COMPRESSION_TYPE_MASK) | MessageSysFlag.COMPRESSED | ctype.flag


def clear_compressed_flag(sys_flag: int) -> int:
    return sys_flag & ~MessageSysFlag.COMPRESSED


def transaction_type_of(sys_flag: int) -> int:
    """One of TRANSACTION_NOT_TYPE (0) / PREPARED (4) / COMMIT (8) / ROLLBACK (12)."""
    return sys_flag & TRANSACTION_TYPE_MASK


def reset_transaction_type(sys_flag: int, ttype: int) -> int:
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | (ttype & TRANSACTION_TYPE_MASK)


def compress(body: bytes, ctype: CompressionType = CompressionType.ZLIB, level: int = 5) -> bytes:
    """Compress as the Java producer does.

    ZLIB: a zlib-wrapped deflate stream (``java.util.zip.Deflater(level)``); same bytes as Java.
    LZ4: one LZ4 *frame* with independent 4 MiB blocks and no content size/checksum, which is what
    lz4-java's ``LZ4FrameOutputStream`` writes (byte-identical in our checks; lz4-java refuses linked
    blocks, python-lz4's default). The level is ignored for LZ4, as in Java.
    ZSTD: one streamed zstd frame at ``level`` (zstd-jni ``ZstdOutputStream``); not byte-identical to
    zstd-jni (it emits an extra empty block) but each side reads the other's.
    """
    try:
        ctype = CompressionType(ctype)
        data = _body_bytes(body)
        if ctype is CompressionType.ZLIB:
            return zlib.compress(data, level)
        if ctype is CompressionType.LZ4:
            c = lz4.frame.LZ4FrameCompressor(
                block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                block_linked=False,
                content_checksum=False,
                auto_flush=False,
            )
            return c.begin() + c.compress(data) + c.flush()
        co = zstandard.ZstdCompressor(level=level).compressobj()
        return co.compress(data) + co.flush()
    except CodecError:
        raise
    except Exception as e:  # unknown type, bad level: the codecs raise assorted types
        raise CodecError(f"cannot compress body as {ctype!r}: {e}") from None


def decompress(
    body: bytes,
    ctype: CompressionType = CompressionType.ZLIB,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress a message body; raise MessageDecodeError if it is malformed, truncated or larger
    than ``max_size`` once decompressed (checked while inflating, never after the fact)."""
    try:
        ctype = CompressionType(ctype)
    except ValueError:
        raise MessageDecodeError(f"unknown compression type {ctype!r}") from None
    try:
        if ctype is CompressionType.ZLIB:
            return _zlib_decompress(body, max_size)
        if ctype is CompressionType.LZ4:
            return _lz4_decompress(body, max_size)
        return _zstd_decompress(body, max_size)
    except MessageDecodeError:
        raise
    except Exception as e:  # third-party codecs raise assorted types (zlib.error, RuntimeError, ...)
        raise MessageDecodeError(f"cannot decompress {ctype.name} body: {e}") from None


_decompress = decompress  # decode_message's ``decompress`` flag shadows the function


def _too_large(ctype: str, max_size: int) -> MessageDecodeError:
    return MessageDecodeError(f"{ctype} body decompresses to more than {max_size} bytes")


def _zlib_decompress(data: bytes, max_size: int) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(data, max_size + 1)
    if len(out) > max_size:
        raise _too_large("ZLIB", max_size)
    if not d.eof:
        raise MessageDecodeError("truncated ZLIB body")
    # Bytes after the end of the zlib stream are ignored, as java.util.zip.InflaterInputStream does.
    return out


def _lz4_decompress(data: bytes, max_size: int) -> bytes:
    parts = []
    total = 0
    rest = bytes(data)
    while rest:  # lz4-java reads concatenated frames
        d = lz4.frame.LZ4FrameDecompressor()
        piece = d.decompress(rest, max_length=max_size - total + 1)
        total += len(piece)
        if total > max_size:
            raise _too_large("LZ4", max_size)
        if not d.eof:
            raise MessageDecodeError("truncated LZ4 frame")
        parts.append(piece)
        rest = d.unused_data or b""
    return parts[0] if len(parts) == 1 else b"".join(parts)


#: One compressed zstd byte can inflate to about 32 KiB (an RLE block: 4 bytes -> 128 KiB), so we
#: feed at most (budget left / 32 KiB) input bytes per call, but never under 256 bytes: a hostile
#: frame can make us hold at most about ``2 * max_size + 8 MiB`` before we notice.
_ZSTD_MAX_RATIO_SHIFT = 15
_ZSTD_MIN_CHUNK = 256
_ZSTD_MAX_CHUNK = 1 << 20


def _zstd_decompress(data: bytes, max_size: int) -> bytes:
    parts = []
    total = 0
    view = memoryview(bytes(data))
    pos, n = 0, len(view)
    dctx = zstandard.ZstdDecompressor()
    while pos < n:  # zstd-jni reads concatenated frames
        dobj = dctx.decompressobj(write_size=1 << 20)
        while not dobj.eof:
            if pos >= n:
                raise MessageDecodeError("truncated ZSTD frame")
            budget = (max_size - total) >> _ZSTD_MAX_RATIO_SHIFT
            step = max(_ZSTD_MIN_CHUNK, min(_ZSTD_MAX_CHUNK, budget))
            chunk = view[pos : pos + step]
            pos += len(chunk)
            piece = dobj.decompress(chunk)
            total += len(piece)
            if total > max_size:
                raise _too_large("ZSTD", max_size)
            parts.append(piece)
        pos -= len(dobj.unused_data)
    return b"".join(parts)


# ---- CRC and tag hash -----------------------------------------------------------------------------


def body_crc32(body: bytes | None) -> int:
    """The record BODYCRC: CRC-32 (IEEE) masked with 0x7FFFFFFF (Java ``UtilAll.crc32``)."""
    if not body:
        return 0
    return zlib.crc32(body) & 0x7FFFFFFF


def tags_hash(tags: str | None) -> int:
    """The consume-queue tags code of a TAGS value (0 when there are no tags)."""
    if not tags:
        return 0
    return java_string_hash(tags)


# ---- properties string ----------------------------------------------------------------------------


def encode_properties(properties: Mapping[str, str | None] | None) -> str:
    """``key\\x01value\\x02`` for every pair with a non-null value, in the mapping's order.

    Raises CodecError for a key that is empty or holds a separator, or a value that holds ``\\x02``:
    Java writes those too, but they would not read back as the same pairs.
    """
    if not properties:
        return ""
    # The usual map (str pairs, no separator inside, no empty key) joined and checked at C speed:
    # join raises TypeError on a non-str (or None) key or value; the separator counts are exactly
    # one per pair only when no key or value holds one; an empty key shows as a \x01 at the start
    # or right after a \x02. Anything else takes the pair-by-pair writer.
    try:
        out = "\x02".join(map("\x01".join, properties.items()))
    except TypeError:
        return _encode_properties_pairs(properties)
    n = len(properties)
    if out.count("\x01") != n or out.count("\x02") != n - 1 or out[0] == "\x01" or "\x02\x01" in out:
        return _encode_properties_pairs(properties)
    return out + "\x02"


def _encode_properties_pairs(properties: Mapping[str, str | None]) -> str:
    """``encode_properties`` pair by pair (the reference of its joined form)."""
    parts = []
    for k, v in properties.items():
        if v is None:
            continue
        if not isinstance(k, str) or not isinstance(v, str):
            raise CodecError(f"property {k!r}={v!r}: keys and values must be str")
        if not k or "\x01" in k or "\x02" in k:
            raise CodecError(f"property key {k!r} is empty or contains a separator")
        if "\x02" in v:
            raise CodecError(f"value of property {k!r} contains the property separator \\x02")
        parts.append(f"{k}\x01{v}\x02")
    return "".join(parts)


def decode_properties(s: str | None) -> dict[str, str]:
    """Parse a properties string with Java's acceptance rules (``string2messageProperties``).

    Segments are split on ``\\x02``; a segment counts only when its first ``\\x01`` leaves a
    non-empty key and a non-empty value (the value may hold further ``\\x01``). A missing final
    ``\\x02`` is fine; a repeated key keeps its last value.
    """
    result: dict[str, str] = {}
    if not s:
        return result
    for segment in s.split("\x02"):
        k, sep, v = segment.partition("\x01")
        if sep and k and v:
            result[k] = v
    return result


def java_hashmap_order(properties: Mapping[str, str], initial_capacity: int = 16) -> dict[str, str]:
    """The pairs re-ordered as a Java ``HashMap`` built by inserting them in order iterates them.

    Java clients build properties in a HashMap (``Message``: default capacity 16;
    ``string2messageProperties``: 128), so their properties strings follow this order. Useful only
    to reproduce Java's exact bytes; ignores tree bins (8+ keys in one bucket).
    """
    cap = 1
    while cap < max(initial_capacity, 1):
        cap <<= 1
    n = len(properties)
    while n > cap * 3 // 4:  # load factor 0.75; resizes keep the relative order inside a bucket
        cap <<= 1

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    ordered = sorted(enumerate(properties.items()), key=lambda it: (bucket(it[1][0]), it[0]))
    return {k: v for _, (k, v) in ordered}


# ---- messages -------------------------------------------------------------------------------------

Host = tuple[str, int]
_NO_HOST: Host = ("0.0.0.0", 0)


@dataclasses.dataclass(slots=True)
class Message:
    """A message as a producer builds it (Java ``Message``): topic, body, user flag, properties."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> Message:
        """Like Java's ``new Message(topic, tags, keys, flag, body, waitStoreMsgOK)``: WAIT is
        always set."""
        msg = cls(topic=topic, body=body, flag=flag)
        if tags:
            msg.tags = tags
        if keys:
            msg.keys = keys if isinstance(keys, str) else PropertyKey.KEY_SEPARATOR.join(keys)
        msg.wait_store_msg_ok = wait_store_msg_ok
        return msg

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PropertyKey.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(PropertyKey.TAGS, value)

    @property
    def keys(self) -> str | None:
        """The raw KEYS value (space-separated keys)."""
        return self.properties.get(PropertyKey.KEYS)

    @keys.setter
    def keys(self, value: str | None) -> None:
        self._set(PropertyKey.KEYS, value)

    @property
    def key_list(self) -> list[str]:
        return [k for k in (self.keys or "").split(PropertyKey.KEY_SEPARATOR) if k]

    @property
    def delay_time_level(self) -> int:
        v = self.properties.get(PropertyKey.DELAY_TIME_LEVEL)
        try:
            return int(v) if v is not None else 0
        except ValueError:
            return 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.properties[PropertyKey.DELAY_TIME_LEVEL] = str(int(level))

    @property
    def wait_store_msg_ok(self) -> bool:
        """Java: true when WAIT is absent, else ``Boolean.parseBoolean``."""
        v = self.properties.get(PropertyKey.WAIT_STORE_MSG_OK)
        return v is None or v.lower() == "true"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[PropertyKey.WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def unique_key(self) -> str | None:
        """UNIQ_KEY: the client-generated message id."""
        return self.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @unique_key.setter
    def unique_key(self, value: str | None) -> None:
        self._set(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, value)

    @property
    def buyer_id(self) -> str | None:
        return self.properties.get(PropertyKey.BUYER_ID)

    @property
    def instance_id(self) -> str | None:
        return self.properties.get(PropertyKey.INSTANCE_ID)

    @property
    def is_transaction_prepared(self) -> bool:
        return (self.properties.get(PropertyKey.TRANSACTION_PREPARED) or "").lower() == "true"

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value


#: Message's own slot for ``properties``; MessageExt's ``properties`` property stores through it.
_PROPS_SLOT = Message.__dict__["properties"]
_props_get = _PROPS_SLOT.__get__
_props_set = _PROPS_SLOT.__set__
#: Serialises the rare first parse of a message's properties (a listener thread and the reactor
#: may touch the same message).
_PARSE_LOCK = threading.Lock()


class _RawProperties(Message):
    """The slot that holds a decoded record's properties bytes until they are first read (not a
    dataclass field: equality, repr, pickling and ``dataclasses.fields`` see only the parsed map)."""

    __slots__ = ("_raw_properties",)


@dataclasses.dataclass(slots=True)
class MessageExt(_RawProperties):
    """A stored message (Java ``MessageExt``/``MessageClientExt``): one commit-log record.

    Hosts are ``(ip, port)`` with a dotted IPv4 or an IPv6 string; sysFlag bits 4/5 say which one the
    record holds. ``magic`` is MAGIC_CODE_V1/V2, or None to let ``encode_message`` choose as the
    broker does (V2 only for topics over 127 bytes). ``store_size`` is TOTALSIZE as read; the
    encoder always recomputes it.

    ``decode_messages`` leaves the properties string unparsed until ``properties`` is first read
    (most consumers never read it); ``put_property`` / ``get_property`` of a key already put work
    without parsing, and a parse applies those puts over the record's own pairs, so the map is
    the one an eager parse followed by the same puts gives.
    """

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = _NO_HOST
    store_timestamp: int = 0
    store_host: Host = _NO_HOST
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    magic: int | None = None
    #: The broker group the message was pulled from (Java ``MessageExt.brokerName``); not in the
    #: record, set by the consumer.
    broker_name: str | None = None

    def _parse_properties(self) -> dict[str, str]:
        with _PARSE_LOCK:
            raw = self._raw_properties
            if raw is None:  # another thread parsed them meanwhile
                return _props_get(self)
            props = decode_properties(_utf8(raw))
            put = _props_get(self)  # puts made before the parse win, as they came later
            if put:
                props.update(put)
            _props_set(self, props)
            self._raw_properties = None
            return props

    def get_property(self, name: str) -> str | None:
        if self._raw_properties is not None:
            put = _props_get(self)
            if name in put:
                return put[name]
        return self.properties.get(name)

    def put_property(self, name: str, value: str) -> None:
        # before the parse the slot holds the puts, applied over the parsed pairs later
        _props_get(self)[name] = value

    @property
    def offset_msg_id(self) -> str:
        """The offset message id: store host + commit-log offset (wire-format.md section 10.7)."""
        return create_offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """UNIQ_KEY when present, else the offset message id (Java ``MessageClientExt.getMsgId``)."""
        return self.unique_key or self.offset_msg_id


def _get_properties(self: MessageExt) -> dict[str, str]:
    if self._raw_properties is None:
        return _props_get(self)
    return self._parse_properties()


def _set_properties(self: MessageExt, value: dict[str, str]) -> None:
    _props_set(self, value)
    self._raw_properties = None


# Set after the class is built: dataclass(slots=True) drops class attributes named like fields.
MessageExt.properties = property(_get_properties, _set_properties)  # type: ignore[assignment]
#: Message's ``properties`` slot under another name, for the decoder: a plain attribute store
#: instead of a call of the slot's ``__set__``.
MessageExt._props = _PROPS_SLOT  # type: ignore[attr-defined]


def put_property_all(msgs: Iterable[Message], name: str, value: str) -> None:
    """``m.put_property(name, value)`` for each message, without a method call per message: both
    classes' put writes the map in the ``properties`` slot (MessageExt's holds the puts until a
    lazy parse applies them)."""
    for m in msgs:
        _props_get(m)[name] = value


# ---- host helpers ---------------------------------------------------------------------------------


def _host_bytes(host: Host, v6: bool, what: str) -> tuple[bytes, int]:
    try:
        ip, port = host
        port = int(port)
    except (TypeError, ValueError):
        raise CodecError(f"{what} must be an (ip, port) pair, not {host!r}") from None
    try:
        packed = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, ip)
    except (OSError, TypeError, ValueError):
        family = "IPv6" if v6 else "IPv4"
        raise CodecError(
            f"{what} {ip!r} is not an {family} address (sysFlag bit {5 if 'store' in what else 4})"
        ) from None
    if not 0 <= port <= 0xFFFF:
        raise CodecError(f"{what} port {port} is out of range")
    return packed, port


def _host_str(packed: bytes, port: int, pos: int) -> Host:
    if not 0 <= port <= 0xFFFF:
        # Java's InetSocketAddress rejects it, which makes MessageDecoder drop the record.
        raise MessageDecodeError(f"host port {port} is out of range", offset=pos)
    return (socket.inet_ntop(socket.AF_INET6 if len(packed) == 16 else socket.AF_INET, packed), port)


def _utf8(b: bytes) -> str:
    # Java's new String(bytes, UTF_8) replaces malformed input rather than failing.
    return b.decode("utf-8", "replace")


def _encode_str(s: str, what: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CodecError(f"{what} is not encodable as UTF-8: {e.reason}") from None


# ---- Construct schemas (schema of record) ---------------------------------------------------------


class _HostAdapter(cs.Adapter):
    def _decode(self, obj, context, path):
        return _host_str(obj.address, obj.port, 0)

    def _encode(self, obj, context, path):
        ip, port = obj
        v6 = ":" in ip
        packed, port = _host_bytes(obj, v6, "host")
        return dict(address=packed, port=port)


def _host(flag_bit: int) -> cs.Construct:
    v4 = cs.Struct("address" / cs.Bytes(4), "port" / cs.Int32sb)
    v6 = cs.Struct("address" / cs.Bytes(16), "port" / cs.Int32sb)
    return _HostAdapter(cs.IfThenElse(lambda ctx: ctx.sys_flag & flag_bit, v6, v4))


class _Utf8Adapter(cs.Adapter):
    def _decode(self, obj, context, path):
        return _utf8(obj)

    def _encode(self, obj, context, path):
        return _encode_str(obj, "string")


class _PropertiesAdapter(cs.Adapter):
    def _decode(self, obj, context, path):
        return decode_properties(_utf8(obj))

    def _encode(self, obj, context, path):
        return _encode_str(encode_properties(obj), "properties")


_NON_NEGATIVE_INT8 = cs.ExprValidator(cs.Int8sb, lambda obj, ctx: obj >= 0)
_NON_NEGATIVE_INT16 = cs.ExprValidator(cs.Int16sb, lambda obj, ctx: obj >= 0)
_NON_NEGATIVE_INT32 = cs.ExprValidator(cs.Int32sb, lambda obj, ctx: obj >= 0)

#: The properties field: int16 length (negative is malformed) + the properties string.
PROPERTIES_FIELD = _PropertiesAdapter(cs.Prefixed(_NON_NEGATIVE_INT16, cs.GreedyBytes))

#: One stored / pulled message record (wire-format.md section 10.4). TOTALSIZE counts itself and
#: must equal the fields' size (``Terminated``).
STORED_MESSAGE = cs.Prefixed(
    cs.Int32sb,
    cs.Struct(
        "magic" / cs.OneOf(cs.Int32sb, [MAGIC_CODE_V1, MAGIC_CODE_V2]),
        "body_crc" / cs.Int32sb,
        "queue_id" / cs.Int32sb,
        "flag" / cs.Int32sb,
        "queue_offset" / cs.Int64sb,
        "commit_log_offset" / cs.Int64sb,
        "sys_flag" / cs.Int32sb,
        "born_timestamp" / cs.Int64sb,
        "born_host" / _host(MessageSysFlag.BORNHOST_V6),
        "store_timestamp" / cs.Int64sb,
        "store_host" / _host(MessageSysFlag.STOREHOSTADDRESS_V6),
        "reconsume_times" / cs.Int32sb,
        "prepared_transaction_offset" / cs.Int64sb,
        "body" / cs.Prefixed(_NON_NEGATIVE_INT32, cs.GreedyBytes),
        "topic" / _Utf8Adapter(
            cs.IfThenElse(
                cs.this.magic == MAGIC_CODE_V2,
                cs.Prefixed(_NON_NEGATIVE_INT16, cs.GreedyBytes),
                cs.Prefixed(_NON_NEGATIVE_INT8, cs.GreedyBytes),
            )
        ),
        "properties" / PROPERTIES_FIELD,
        cs.Terminated,
    ),
    includelength=True,
)

#: One entry of a SEND_BATCH_MESSAGE body (wire-format.md section 10.5); magic and CRC are 0.
BATCH_ENTRY = cs.Prefixed(
    cs.Int32sb,
    cs.Struct(
        "magic" / cs.Default(cs.Int32sb, 0),
        "body_crc" / cs.Default(cs.Int32sb, 0),
        "flag" / cs.Int32sb,
        "body" / cs.Prefixed(_NON_NEGATIVE_INT32, cs.GreedyBytes),
        "properties" / PROPERTIES_FIELD,
        cs.Terminated,
    ),
    includelength=True,
)

_CONSTRUCT_ERRORS = (cs.ConstructError, CodecError, UnicodeError, OSError, ValueError, OverflowError)


def _parse_all(schema: cs.Construct, data: bytes, what: str) -> list[tuple[cs.Container, int]]:
    """Parse back-to-back ``schema`` items covering all of ``data`` (strict, unlike GreedyRange).

    Returns (item, size) pairs.
    """
    items = []
    pos = 0
    data = bytes(data)
    while pos < len(data):
        if len(data) - pos < 4:
            raise MessageDecodeError(f"truncated {what} size", offset=pos)
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 4 or size > len(data) - pos:
            raise MessageDecodeError(f"{what} size {size} overruns the body", offset=pos)
        try:
            items.append((schema.parse(data[pos : pos + size]), size))
        except MessageDecodeError:
            raise
        except _CONSTRUCT_ERRORS as e:
            raise MessageDecodeError(f"malformed {what}: {e}", offset=pos) from None
        pos += size
    return items


def schema_decode_messages(body: bytes) -> list[MessageExt]:
    """``decode_messages(body, decompress=False)`` through the Construct schema (for tests/debug)."""
    out = []
    for c, size in _parse_all(STORED_MESSAGE, body, "message record"):
        fields = {k: v for k, v in c.items() if not k.startswith("_")}
        out.append(MessageExt(store_size=size, **fields))
    return out


def schema_encode_message(msg: MessageExt) -> bytes:
    """``encode_message`` through the Construct schema (for tests/debug)."""
    fields = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}
    if fields["magic"] is None:
        fields["magic"] = _auto_magic(_encode_str(msg.topic, "topic"))
    try:
        return STORED_MESSAGE.build(fields)
    except CodecError:
        raise
    except _CONSTRUCT_ERRORS as e:
        raise CodecError(f"cannot encode message record: {e}") from None


def schema_encode_batch(messages: Iterable[Message]) -> bytes:
    parts = []
    for m in messages:
        try:
            parts.append(BATCH_ENTRY.build(dict(flag=m.flag, body=m.body, properties=m.properties)))
        except CodecError:
            raise
        except _CONSTRUCT_ERRORS as e:
            raise CodecError(f"cannot encode batch entry: {e}") from None
    return b"".join(parts)


def schema_decode_batch(body: bytes, *, topic: str = "") -> list[Message]:
    return [
        Message(topic=topic, body=c.body, flag=c.flag, properties=c.properties)
        for c, _ in _parse_all(BATCH_ENTRY, body, "batch entry")
    ]


# ---- fast paths -----------------------------------------------------------------------------------

# TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP
_HEAD = struct.Struct(">iiiiiqqiq")
# BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED_TX_OFFSET, BODY length; one struct
# per (born v6, store v6) combination.
_MIDDLE = {
    (bv6, sv6): struct.Struct(f">{16 if bv6 else 4}siq{16 if sv6 else 4}siiqi")
    for bv6 in (False, True)
    for sv6 in (False, True)
}
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
#: The smallest possible record: IPv4 hosts, V1, empty body/topic/properties.
MIN_RECORD_SIZE = _HEAD.size + _MIDDLE[(False, False)].size + 1 + 2
_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)
_STORE_V6 = int(MessageSysFlag.STOREHOSTADDRESS_V6)
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_HOST_V6_BITS = _BORN_V6 | _STORE_V6

# Every fixed field of a record whose two hosts are IPv4, each host as its 8 raw bytes (address,
# port): one unpack up to the body length.
_FIXED_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
_FIXED_V4_SIZE = _FIXED_V4.size

#: (address, port) of raw IPv4 host fields already seen: a pull body repeats a few hosts.
_V4_HOSTS: dict[bytes, Host] = {}
_V4_HOSTS_MAX = 4096


def _v4_host(raw: bytes) -> Host | None:
    """The host of 8 raw bytes (cached); None for a port out of range (the checked path reports
    it)."""
    port = int.from_bytes(raw[4:], "big", signed=True)
    if not 0 <= port <= 0xFFFF:
        return None
    if len(_V4_HOSTS) >= _V4_HOSTS_MAX:
        _V4_HOSTS.clear()
    host = _V4_HOSTS[raw] = (socket.inet_ntop(socket.AF_INET, raw[:4]), port)
    return host


#: Topic strings of raw topic fields already seen: a pull body holds one topic (a lookup costs
#: less than a UTF-8 decode, and the messages share one string).
_TOPICS: dict[bytes, str] = {}
_TOPICS_MAX = 4096


def _topic_str(raw: bytes) -> str:
    if len(_TOPICS) >= _TOPICS_MAX:
        _TOPICS.clear()
    topic = _TOPICS[raw] = raw.decode("utf-8", "replace")
    return topic


_NO_PUTS: dict[str, str] = {}
_new_message_ext = object.__new__


def _decode_fast(
    buf: bytes, offset: int, n: int, decompress: bool, check_crc: bool, puts: dict[str, str] = _NO_PUTS,
) -> MessageExt | None:
    """The common record (IPv4 hosts, body not to inflate, nothing malformed) from a ``bytes``
    buffer, its properties left unparsed and ``puts`` already put; None sends the record down the
    checked path, which decodes the rest and reports every malformation."""
    if n - offset < MIN_RECORD_SIZE:
        return None
    (
        total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
        born_timestamp, born_raw, store_timestamp, store_raw, reconsume_times,
        prepared_transaction_offset, body_len,
    ) = _FIXED_V4.unpack_from(buf, offset)
    end = offset + total
    if total < MIN_RECORD_SIZE or end > n or sys_flag & _HOST_V6_BITS:
        return None
    pos = offset + _FIXED_V4_SIZE
    if body_len < 0 or body_len > end - pos - 3 or (decompress and body_len and sys_flag & _COMPRESSED):
        return None
    body = buf[pos : pos + body_len]
    pos += body_len
    if magic == MAGIC_CODE_V1:
        topic_len = buf[pos]
        if topic_len > 127:  # a negative int8
            return None
        pos += 1
    elif magic == MAGIC_CODE_V2:
        topic_len = (buf[pos] << 8) | buf[pos + 1]
        if topic_len > 0x7FFF:
            return None
        pos += 2
    else:
        return None
    if topic_len > end - pos - 2:
        return None
    topic = buf[pos : pos + topic_len].decode("utf-8", "replace")
    pos += topic_len
    props_len = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    if props_len != end - pos:  # a negative length (> 0x7FFF here) never matches
        return None
    born_host = _V4_HOSTS.get(born_raw) or _v4_host(born_raw)
    store_host = _V4_HOSTS.get(store_raw) or _v4_host(store_raw)
    if born_host is None or store_host is None:
        return None
    if check_crc and body_len and (zlib.crc32(body) & 0x7FFFFFFF) != body_crc:
        return None
    # every slot written here instead of the dataclass __init__ (no frame for it nor for the
    # ``properties`` setter); the schema property tests compare every field
    msg = _new_message_ext(MessageExt)
    msg.topic = topic
    msg.body = body
    msg.flag = flag
    _props_set(msg, puts.copy())
    msg._raw_properties = buf[pos:end] if props_len else None
    msg.queue_id = queue_id
    msg.store_size = total
    msg.queue_offset = queue_offset
    msg.sys_flag = sys_flag
    msg.born_timestamp = born_timestamp
    msg.born_host = born_host
    msg.store_timestamp = store_timestamp
    msg.store_host = store_host
    msg.commit_log_offset = commit_log_offset
    msg.body_crc = body_crc
    msg.reconsume_times = reconsume_times
    msg.prepared_transaction_offset = prepared_transaction_offset
    msg.magic = magic
    msg.broker_name = None
    return msg


def decode_message(
    buf: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    decompress: bool = True,
    check_crc: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> MessageExt:
    """Decode the record starting at ``offset``; the next one starts at ``offset + store_size``.

    With ``decompress`` a compressed body is inflated and the COMPRESSED bit cleared (the type bits
    and properties are left alone), as Java's ``MessageDecoder.decode(.., deCompressBody=true)``.
    ``check_crc`` compares BODYCRC with the stored body, as Java's ``checkCRC``.
    """
    if type(buf) is bytes and offset >= 0:
        msg = _decode_fast(buf, offset, len(buf), decompress, check_crc)
        if msg is not None:
            return msg
    return _decode_checked(buf, offset, decompress, check_crc, max_decompressed_size)


def _decode_checked(
    buf: bytes | bytearray | memoryview,
    offset: int,
    decompress: bool,
    check_crc: bool,
    max_decompressed_size: int,
) -> MessageExt:
    """Every record, field by field, with a precise error for each malformation."""
    n = len(buf)
    if offset < 0 or n - offset < 4:
        raise MessageDecodeError("truncated message record size", offset=offset)
    (total,) = _I32.unpack_from(buf, offset)
    if total < MIN_RECORD_SIZE or total > n - offset:
        raise MessageDecodeError(
            f"record size {total} is below the minimum {MIN_RECORD_SIZE} or overruns the "
            f"{n - offset} bytes left",
            offset=offset,
        )
    end = offset + total
    (
        _,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
    ) = _HEAD.unpack_from(buf, offset)
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        raise MessageDecodeError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", offset=offset + 4)
    pos = offset + _HEAD.size
    middle = _MIDDLE[(bool(sys_flag & _BORN_V6), bool(sys_flag & _STORE_V6))]
    if end - pos < middle.size:
        raise MessageDecodeError("record too short for its host fields", offset=pos)
    (
        born_ip,
        born_port,
        store_timestamp,
        store_ip,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        body_len,
    ) = middle.unpack_from(buf, pos)
    born_host = _host_str(born_ip, born_port, pos)
    store_host = _host_str(store_ip, store_port, pos)
    pos += middle.size
    if body_len < 0 or body_len > end - pos:
        raise MessageDecodeError(f"body length {body_len} overruns the record", offset=pos - 4)
    body = bytes(buf[pos : pos + body_len])
    pos += body_len
    if magic == MAGIC_CODE_V1:
        if end - pos < 1:
            raise MessageDecodeError("truncated topic length", offset=pos)
        (topic_len,) = _I8.unpack_from(buf, pos)
        pos += 1
    else:
        if end - pos < 2:
            raise MessageDecodeError("truncated topic length", offset=pos)
        (topic_len,) = _I16.unpack_from(buf, pos)
        pos += 2
    if topic_len < 0 or topic_len > end - pos:
        raise MessageDecodeError(f"topic length {topic_len} overruns the record", offset=pos)
    topic = _utf8(bytes(buf[pos : pos + topic_len]))
    pos += topic_len
    if end - pos < 2:
        raise MessageDecodeError("truncated properties length", offset=pos)
    (props_len,) = _I16.unpack_from(buf, pos)
    pos += 2
    if props_len < 0 or props_len != end - pos:
        raise MessageDecodeError(
            f"properties length {props_len} does not end the record at TOTALSIZE {total}",
            offset=pos - 2,
        )
    properties = decode_properties(_utf8(bytes(buf[pos:end]))) if props_len else {}
    if check_crc and body_len and (zlib.crc32(body) & 0x7FFFFFFF) != body_crc:
        raise MessageDecodeError(f"body CRC mismatch (record says {body_crc})", offset=offset)
    if decompress and body_len and sys_flag & _COMPRESSED:
        try:
            ctype = compression_type_of(sys_flag)
        except CodecError as e:
            raise MessageDecodeError(str(e), offset=offset + 36) from None
        body = _decompress(body, ctype, max_size=max_decompressed_size)
        sys_flag &= ~_COMPRESSED
    return MessageExt(
        topic=topic,
        body=body,
        flag=flag,
        properties=properties,
        queue_id=queue_id,
        store_size=total,
        queue_offset=queue_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        commit_log_offset=commit_log_offset,
        body_crc=body_crc,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        magic=magic,
    )


def decode_messages(
    body: bytes | bytearray | memoryview,
    *,
    decompress: bool = True,
    check_crc: bool = False,
    strict: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    put_properties: Mapping[str, str] | None = None,
    broker_name: str | None = None,
    queue_id: int | None = None,
) -> list[MessageExt]:
    """Decode a PULL_MESSAGE / QUERY_MESSAGE body: records back to back.

    ``strict=False`` mirrors Java's ``MessageDecoder.decodes``: stop at the first malformed record
    and return the ones before it. ``put_properties`` are put on every message, with the result of
    a ``put_property`` of each after the decode (the consumer's MIN/MAX_OFFSET: one dict copy per
    record instead of a call per property). ``broker_name`` and ``queue_id`` (unless None) are set
    on every message: the consumer's queue, as Java's ``processPullResult`` sets them after the
    decode.
    """
    out: list[MessageExt] = []
    if not body:
        return out
    if type(body) is not bytes:
        body = bytes(body)  # one copy; then each record's body is one slice of it
    pos, n = 0, len(body)
    append = out.append
    puts = dict(put_properties) if put_properties else _NO_PUTS
    copy_puts = puts.copy
    # _decode_fast inlined (a call and 18 global loads less per record); the schema property
    # tests compare both paths with the Construct schema
    unpack, fixed_size, min_size = _FIXED_V4.unpack_from, _FIXED_V4_SIZE, MIN_RECORD_SIZE
    hosts, topics, new, cls = _V4_HOSTS, _TOPICS, _new_message_ext, MessageExt
    qid = queue_id
    v1, v2, crc32 = MAGIC_CODE_V1, MAGIC_CODE_V2, zlib.crc32
    not_fast = _HOST_V6_BITS | _COMPRESSED if decompress else _HOST_V6_BITS
    while pos < n:
        msg = None
        if n - pos >= min_size:
            (
                total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
                born_timestamp, born_raw, store_timestamp, store_raw, reconsume_times,
                prepared_transaction_offset, body_len,
            ) = unpack(body, pos)
            if qid is not None:
                queue_id = qid
            end = pos + total
            p = pos + fixed_size
            # a compressed empty body stays as it is (nothing to inflate): the fast path takes it
            if (total >= min_size and end <= n and 0 <= body_len <= end - p - 3
                    and not (sys_flag & not_fast and (sys_flag & _HOST_V6_BITS or body_len))):
                q = p + body_len
                if magic == v1:
                    topic_len = body[q]
                    q += 1
                    ok = topic_len <= 127  # not a negative int8
                elif magic == v2:
                    topic_len = (body[q] << 8) | body[q + 1]
                    q += 2
                    ok = topic_len <= 0x7FFF
                else:
                    ok = False
                if ok and topic_len <= end - q - 2:
                    t = q + topic_len
                    # a negative length (> 0x7FFF here) never matches
                    props_len = (body[t] << 8) | body[t + 1]
                    born_host = hosts.get(born_raw) or _v4_host(born_raw)
                    store_host = hosts.get(store_raw) or _v4_host(store_raw)
                    if (props_len == end - t - 2 and born_host is not None and store_host is not None
                            and not (check_crc and body_len
                                     and (crc32(body[p:p + body_len]) & 0x7FFFFFFF) != body_crc)):
                        topic_raw = body[q:t]
                        topic = topics.get(topic_raw)
                        if topic is None:
                            topic = _topic_str(topic_raw)
                        msg = new(cls)
                        msg.topic = topic
                        msg.body = body[p:p + body_len]
                        msg.flag = flag
                        msg._props = copy_puts()
                        msg._raw_properties = body[t + 2:end] if props_len else None
                        msg.queue_id = queue_id
                        msg.store_size = total
                        msg.queue_offset = queue_offset
                        msg.sys_flag = sys_flag
                        msg.born_timestamp = born_timestamp
                        msg.born_host = born_host
                        msg.store_timestamp = store_timestamp
                        msg.store_host = store_host
                        msg.commit_log_offset = commit_log_offset
                        msg.body_crc = body_crc
                        msg.reconsume_times = reconsume_times
                        msg.prepared_transaction_offset = prepared_transaction_offset
                        msg.magic = magic
                        msg.broker_name = broker_name
                        append(msg)
                        pos = end
                        continue
        try:
            msg = _decode_checked(body, pos, decompress, check_crc, max_decompressed_size)
        except MessageDecodeError:
            if strict:
                raise
            break
        for name, value in puts.items():
            msg.put_property(name, value)
        msg.broker_name = broker_name
        if qid is not None:
            msg.queue_id = qid
        append(msg)
        pos += msg.store_size
    return out


def _body_bytes(body: bytes | None) -> bytes:
    if body is None:
        return b""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise CodecError(f"message body must be bytes, not {type(body).__name__}")
    return bytes(body)


def _auto_magic(topic: bytes) -> int:
    return MAGIC_CODE_V2 if len(topic) > 127 else MAGIC_CODE_V1


def encode_message(msg: MessageExt) -> bytes:
    """A full stored record for ``msg`` (commit log, pull bodies, CHECK_TRANSACTION_STATE body).

    The body and BODYCRC are written as given (compress and CRC beforehand: ``compress``,
    ``body_crc32``); TOTALSIZE is computed. The host address families must match sysFlag bits 4/5.
    """
    topic = _encode_str(msg.topic, "topic")
    magic = _auto_magic(topic) if msg.magic is None else msg.magic
    if magic == MAGIC_CODE_V1:
        if len(topic) > 127:
            raise CodecError(f"topic of {len(topic)} bytes needs the V2 record (V1 allows 127)")
        topic_field = _I8.pack(len(topic))
    elif magic == MAGIC_CODE_V2:
        if len(topic) > 32767:
            raise CodecError(f"topic of {len(topic)} bytes is too long for a record")
        topic_field = _I16.pack(len(topic))
    else:
        raise CodecError(f"unknown magic code {magic}")
    props = _encode_str(encode_properties(msg.properties), "properties")
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise CodecError(f"properties of {len(props)} bytes exceed {MAX_PROPERTIES_LENGTH}")
    sys_flag = msg.sys_flag
    born_v6 = bool(sys_flag & _BORN_V6)
    store_v6 = bool(sys_flag & _STORE_V6)
    born_ip, born_port = _host_bytes(msg.born_host, born_v6, "born host")
    store_ip, store_port = _host_bytes(msg.store_host, store_v6, "store host")
    body = _body_bytes(msg.body)
    middle = _MIDDLE[(born_v6, store_v6)]
    total = _HEAD.size + middle.size + len(body) + len(topic_field) + len(topic) + 2 + len(props)
    try:
        return b"".join(
            (
                _HEAD.pack(
                    total,
                    magic,
                    msg.body_crc,
                    msg.queue_id,
                    msg.flag,
                    msg.queue_offset,
                    msg.commit_log_offset,
                    sys_flag,
                    msg.born_timestamp,
                ),
                middle.pack(
                    born_ip,
                    born_port,
                    msg.store_timestamp,
                    store_ip,
                    store_port,
                    msg.reconsume_times,
                    msg.prepared_transaction_offset,
                    len(body),
                ),
                body,
                topic_field,
                topic,
                _I16.pack(len(props)),
                props,
            )
        )
    except struct.error as e:
        raise CodecError(f"message field out of range: {e}") from None


_BATCH_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGIC (0), BODYCRC (0), FLAG, BODY length
_BATCH_MIN = _BATCH_HEAD.size + 2
_JOIN_PAIRS = "\x02".join
_JOIN_PAIR = "\x01".join


def encode_batch(messages: Iterable[Message]) -> bytes:
    """A SEND_BATCH_MESSAGE body (Java ``MessageDecoder.encodeMessages``).

    The usual batch (str properties, ASCII, no separator inside a key or value, no empty key or
    map, bytes bodies) is checked once for all its messages: every map's joined form, one string
    of them all joined by \\x02, the separators counted there (each pair gives one \\x01, and
    one \\x02 stands between two pairs; a separator inside a key or value, or an empty map's
    text between two \\x02, only adds: the totals match exactly when there is none) and its
    length is its UTF-8 length. Anything else goes through
    ``_encode_batch_entries``."""
    msgs = messages if type(messages) is list else list(messages)
    if not msgs:
        return b""
    try:
        maps = [m.properties for m in msgs]
        # each entry's text without its closing \x02, which is written as a part of its own (no
        # string made per entry to append it)
        texts = [_JOIN_PAIRS(map(_JOIN_PAIR, p.items())) for p in maps]
    except (TypeError, AttributeError):  # a None or non-str key or value (or no map)
        return _encode_batch_entries(msgs)
    whole = "\x02".join(texts)
    pairs = sum(map(len, maps))
    if (not whole.isascii() or whole.count("\x01") != pairs or whole.count("\x02") != pairs - 1
            or "\x02\x01" in whole or whole[:1] == "\x01"):
        return _encode_batch_entries(msgs)
    parts: list[bytes] = []
    extend = parts.extend
    pack_head = _BATCH_HEAD.pack
    pack_len = _I16.pack
    # a batch's entries mostly share body size, properties length and flag: their head and
    # length bytes are packed again only when one of them changes
    size = length = flag = -1
    head = length_bytes = b""
    try:
        for m, text in zip(msgs, texts):
            body = m.body
            n = len(text) + 1
            if type(body) is not bytes or n > MAX_PROPERTIES_LENGTH:
                return _encode_batch_entries(msgs)
            b = len(body)
            f = m.flag
            if b != size or n != length or f != flag:
                head = pack_head(_BATCH_MIN + b + n, 0, 0, f, b)
                length_bytes = pack_len(n)
                size, length, flag = b, n, f
            extend((head, body, length_bytes, text.encode(), b"\x02"))
    except struct.error:
        return _encode_batch_entries(msgs)  # raises its CodecError
    return b"".join(parts)


_UNIQ_PAIR_HEAD = f"{PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01"


def encode_batch_alike(messages: Sequence[Message], text: str, ids: Sequence[str]) -> bytes | None:
    """``encode_batch`` of messages whose properties are each one map with no UNIQ_KEY (``text``:
    its ``encode_properties``) and then their own UNIQ_KEY (``ids``, in order), as a batch's
    tagging leaves them (``Producer._batch``), without reading their maps: the shared text is
    encoded once, each entry only writes its id. None when it does not apply (not one id per
    message, an id that is not ASCII or holds \\x02, a body that is not bytes, a flag out of
    int32, properties over the 2-byte length): ``encode_batch`` then writes (or refuses) it."""
    if len(ids) != len(messages):
        return None
    joined = "".join(ids)
    if not joined.isascii() or "\x02" in joined:
        return None  # encode_properties refuses the pair separator in a value
    head = f"{text}{_UNIQ_PAIR_HEAD}".encode()
    fixed = len(head) + 1  # an entry's text but its id: the map's text, UNIQ_KEY\x01, \x02
    parts: list[bytes] = []
    extend = parts.extend
    pack_head = _BATCH_HEAD.pack
    # an entry's head and its text's length and shared part (length + map's text + UNIQ_KEY's
    # key) are packed again only when its body size, flag or id length changes
    size = flag = length = -1
    entry_head = shared = b""
    try:
        for m, uid in zip(messages, ids):
            body = m.body
            f = m.flag
            if type(body) is not bytes or type(f) is not int:
                return None
            b = len(body)
            n = fixed + len(uid)  # ASCII: as many bytes as characters
            if b != size or f != flag or n != length:
                if n > MAX_PROPERTIES_LENGTH:
                    return None
                entry_head = pack_head(_BATCH_MIN + b + n, 0, 0, f, b)
                shared = _I16.pack(n) + head
                size, flag, length = b, f, n
            extend((entry_head, body, shared, uid.encode(), b"\x02"))
    except struct.error:  # a flag out of int32
        return None
    return b"".join(parts)


def encode_batch_run(bodies: Sequence[bytes], flag: int, text: str, id_text: str, low: int) -> bytes | None:
    """``encode_batch_alike`` of messages that also share one body size and one flag, whose ids
    are one text followed by the hex digits of consecutive low bytes (``UniqueIdGenerator.
    next_id_run``'s): ``bodies`` (bytes, all of ``len(bodies[0])``), ``flag`` each message's,
    ``text`` the shared map's ``encode_properties``, the ids ``id_text`` + ``%02X`` of ``low``,
    ``low + 1``, ... Every entry then has the same head and the same text but for its last two
    characters: the entries are one join of the bodies and those characters between the shared
    parts, no work per entry in Python. None when it does not apply (a run past FF, an id text
    that is not ASCII or holds \x02, a flag out of int32, properties over the 2-byte length):
    ``encode_batch_alike`` then writes (or refuses) it."""
    n = len(bodies)
    if not n:
        return b""
    if not 0 <= low <= 256 - n or not id_text.isascii() or "\x02" in id_text:
        return None
    head = f"{text}{_UNIQ_PAIR_HEAD}{id_text}".encode()
    length = len(head) + 3  # and two hex digits, \x02
    if length > MAX_PROPERTIES_LENGTH:
        return None
    size = len(bodies[0])
    try:
        entry_head = _BATCH_HEAD.pack(_BATCH_MIN + size + length, 0, 0, flag, size)
    except struct.error:  # a flag out of int32
        return None
    # per entry: its head, body, the text's length and its part shared by all, two hex digits, \x02
    parts = [entry_head, b"", _I16.pack(length) + head, b"", b"\x02"] * n
    parts[1::5] = bodies
    parts[3::5] = HEX2_BYTES[low:low + n]
    return b"".join(parts)


def _encode_batch_entries(messages: Iterable[Message]) -> bytes:
    """``encode_batch`` entry by entry: each entry's properties string is ``encode_properties``'s
    joined form written out here; a map it does not cover goes to the reference."""
    parts: list[bytes] = []
    append = parts.append
    pack_head = _BATCH_HEAD.pack
    pack_len = _I16.pack
    for m in messages:
        props = m.properties
        if props:
            try:
                text = "\x02".join(map("\x01".join, props.items()))
            except TypeError:
                text = _encode_properties_pairs(props)
            else:
                n = len(props)
                if (text.count("\x01") != n or text.count("\x02") != n - 1 or text[0] == "\x01"
                        or "\x02\x01" in text):
                    text = _encode_properties_pairs(props)
                else:
                    text += "\x02"
            try:
                encoded = text.encode()
            except UnicodeEncodeError:
                encoded = _encode_str(text, "properties")  # raises its CodecError
        else:
            encoded = b""
        n = len(encoded)
        if n > MAX_PROPERTIES_LENGTH:
            raise CodecError(f"properties of {n} bytes exceed {MAX_PROPERTIES_LENGTH}")
        body = m.body
        if type(body) is not bytes:
            body = _body_bytes(body)
        try:
            append(pack_head(_BATCH_MIN + len(body) + n, 0, 0, m.flag, len(body)))
        except struct.error as e:
            raise CodecError(f"batch entry field out of range: {e}") from None
        append(body)
        append(pack_len(n))
        append(encoded)
    return b"".join(parts)


def decode_batch(body: bytes | bytearray | memoryview, *, topic: str = "") -> list[Message]:
    """Split a SEND_BATCH_MESSAGE body into messages (topic comes from the request header)."""
    out: list[Message] = []
    if not body:
        return out
    pos, n = 0, len(body)
    while pos < n:
        if n - pos < _BATCH_MIN:
            raise MessageDecodeError("truncated batch entry", offset=pos)
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        if total < _BATCH_MIN or total > n - pos:
            raise MessageDecodeError(f"batch entry size {total} overruns the body", offset=pos)
        end = pos + total
        p = pos + _BATCH_HEAD.size
        if body_len < 0 or body_len > end - p - 2:
            raise MessageDecodeError(f"batch body length {body_len} overruns the entry", offset=p - 4)
        data = bytes(body[p : p + body_len])
        p += body_len
        (props_len,) = _I16.unpack_from(body, p)
        p += 2
        if props_len < 0 or props_len != end - p:
            raise MessageDecodeError(
                f"batch properties length {props_len} does not end the entry at size {total}",
                offset=p - 2,
            )
        props = decode_properties(_utf8(bytes(body[p:end]))) if props_len else {}
        out.append(Message(topic=topic, body=data, flag=flag, properties=props))
        pos = end
    return out


def unwrap_inner_batch(outer: MessageExt) -> list[MessageExt]:
    """Split a 5.x inner-batch record (sysFlag INNER_BATCH|NEED_UNWRAP) into its messages, as Java's
    ``MessageDecoder.decodeMessage(MessageExt, List)`` does for pulled records: each inner message
    gets the outer record's WAIT value (Java calls ``setWaitStoreMsgOK`` on it)."""
    inner = decode_batch(outer.body, topic=outer.topic)
    wait = "true" if outer.wait_store_msg_ok else "false"
    return [
        MessageExt(
            topic=outer.topic,
            body=m.body,
            flag=m.flag,
            properties={**m.properties, PropertyKey.WAIT_STORE_MSG_OK: wait},
            queue_id=outer.queue_id,
            queue_offset=outer.queue_offset + i,
            sys_flag=outer.sys_flag,
            born_timestamp=outer.born_timestamp,
            born_host=outer.born_host,
            store_timestamp=outer.store_timestamp,
            store_host=outer.store_host,
            commit_log_offset=outer.commit_log_offset,
            magic=outer.magic,
        )
        for i, m in enumerate(inner)
    ]
