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
import struct
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from rmqwire.codec import fastjson
from rmqwire.codec.message import java_string_hash
from rmqwire.codec.codes import DEFAULT_VERSION, V5_0_0, LanguageCode
from rmqwire.errors import CodecError, MQClientError
from rmqwire.model import (
    ConsumeFromWhere,
    ConsumeType,
    ExpressionType,
    MessageModel,
    MessageQueue,
    TopicFilterType,
)

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "Connection",
    "ConsumeStats",
    "ConsumeStatus",
    "ConsumerConnection",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "ConsumerRunningInfo",
    "DataVersion",
    "FastjsonBody",
    "GetConsumerListByGroupResponseBody",
    "GroupList",
    "HeartbeatData",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "OffsetWrapper",
    "ProcessQueueInfo",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "SimpleSubscriptionData",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigAndMappingSerializeWrapper",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
    "build_subscription_data",
]


def now_ms() -> int:
    """Java ``System.currentTimeMillis()``: the default of DataVersion.timestamp, subVersion."""
    return time.time_ns() // 1_000_000


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
        "true": True, "false": False, "1": True, "0": False, "y": True, "n": False,
        "t": True, "f": False,
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
    return k.encode("utf-16-be", "surrogatepass") if isinstance(k, str) else k


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


# ---- route (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO) ------------------------------------


@dataclass
class QueueData(FastjsonBody):
    broker_name: str | None = prop("brokerName", STRING)
    read_queue_nums: int = prop("readQueueNums", INT, 0)
    write_queue_nums: int = prop("writeQueueNums", INT, 0)
    perm: int = prop("perm", INT, 0)
    topic_sys_flag: int = prop("topicSysFlag", INT, 0)


@dataclass
class BrokerData(FastjsonBody):
    cluster: str | None = prop("cluster", STRING)
    broker_name: str | None = prop("brokerName", STRING)
    #: broker id (0 = master) -> "ip:port"; fastjson's default style writes the ids unquoted.
    broker_addrs: dict[int, str] | None = prop("brokerAddrs", map_of(LONG_KEY, STRING))
    zone_name: str | None = prop("zoneName", STRING)
    enable_acting_master: bool = prop("enableActingMaster", BOOL, False)


@dataclass
class TopicRouteData(FastjsonBody):
    order_topic_conf: str | None = prop("orderTopicConf", STRING)
    queue_datas: list[QueueData] | None = prop(
        "queueDatas", list_of(body_of(QueueData)), factory=list
    )
    broker_datas: list[BrokerData] | None = prop(
        "brokerDatas", list_of(body_of(BrokerData)), factory=list
    )
    filter_server_table: dict[str, list[str]] | None = prop(
        "filterServerTable", map_of(STR_KEY, list_of(STRING)), factory=dict
    )
    #: 5.x static topics: brokerName -> TopicQueueMappingInfo, kept as generic data.
    topic_queue_mapping_by_broker: dict[str, Any] | None = prop(
        "topicQueueMappingByBroker", map_of(STR_KEY, ANY)
    )


@dataclass
class ClusterInfo(FastjsonBody):
    broker_addr_table: dict[str, BrokerData] | None = prop(
        "brokerAddrTable", map_of(STR_KEY, body_of(BrokerData))
    )
    cluster_addr_table: dict[str, list[str]] | None = prop(
        "clusterAddrTable", map_of(STR_KEY, list_of(STRING))
    )


# ---- REGISTER_BROKER --------------------------------------------------------------------------


@dataclass
class DataVersion(FastjsonBody):
    state_version: int = prop("stateVersion", LONG, 0)
    timestamp: int = prop("timestamp", LONG, factory=now_ms)
    counter: int = prop("counter", LONG, 0)


@dataclass
class TopicConfig(FastjsonBody):
    topic_name: str | None = prop("topicName", STRING)
    read_queue_nums: int = prop("readQueueNums", INT, 16)
    write_queue_nums: int = prop("writeQueueNums", INT, 16)
    perm: int = prop("perm", INT, 6)  # PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType | None = prop(
        "topicFilterType", enum_of(TopicFilterType), TopicFilterType.SINGLE_TAG
    )
    topic_sys_flag: int = prop("topicSysFlag", INT, 0)
    order: bool = prop("order", BOOL, False)
    #: 5.x only; keys and values must not contain spaces (compressed form splits on them).
    attributes: dict[str, str] | None = prop(
        "attributes", map_of(STR_KEY, STRING), factory=dict
    )

    def encode_compact(self) -> str:
        """Java ``TopicConfig.encode()``: ``"<name> <read> <write> <perm> <filterType> <attrs>"``.

        Used only inside the compressed REGISTER_BROKER body; topicSysFlag and order are lost.
        """
        # Java's StringBuilder.append writes a null as "null".
        name = "null" if self.topic_name is None else self.topic_name
        ftype = "null" if self.topic_filter_type is None else self.topic_filter_type.name
        attrs = "" if self.attributes is None else fastjson.dumps(self.attributes, standard=False)
        return (
            f"{name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{ftype} {attrs}"
        )

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        """Java ``TopicConfig.decode(String)``; unparsable attributes are ignored, as in Java."""
        parts = text.split(" ")
        while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
            parts.pop()
        if len(parts) < 5:
            raise CodecError(f"topic config {text[:80]!r} has fewer than 5 fields")
        try:
            read, write, perm = (_INT.from_tree(p) for p in parts[1:4])
        except CodecError as e:
            raise CodecError(f"topic config {text[:80]!r}: {e}") from None
        ftype = TopicFilterType.__members__.get(parts[4])
        if ftype is None:
            raise CodecError(f"topic config {text[:80]!r}: unknown filter type {parts[4]!r}")
        cfg = cls(topic_name=parts[0], read_queue_nums=read, write_queue_nums=write, perm=perm,
                  topic_filter_type=ftype)
        if len(parts) >= 6:
            try:
                cfg.attributes = map_of(STR_KEY, STRING).from_tree(fastjson.loads(parts[5]))
            except CodecError:
                pass  # Java swallows this: attribute values may contain spaces
        return cfg


@dataclass
class TopicConfigSerializeWrapper(FastjsonBody):
    topic_config_table: dict[str, TopicConfig] | None = prop(
        "topicConfigTable", map_of(STR_KEY, body_of(TopicConfig)), factory=dict
    )
    data_version: DataVersion | None = prop(
        "dataVersion", body_of(DataVersion), factory=DataVersion
    )


@dataclass
class TopicConfigAndMappingSerializeWrapper(TopicConfigSerializeWrapper):
    """5.x wrapper; mapping values (TopicQueueMappingInfo / Detail) are kept as generic data."""

    topic_queue_mapping_info_map: dict[str, Any] | None = prop(
        "topicQueueMappingInfoMap", map_of(STR_KEY, ANY), factory=dict
    )
    topic_queue_mapping_detail_map: dict[str, Any] | None = prop(
        "topicQueueMappingDetailMap", map_of(STR_KEY, ANY), factory=dict
    )
    mapping_data_version: DataVersion | None = prop(
        "mappingDataVersion", body_of(DataVersion), factory=DataVersion
    )


#: Inflated REGISTER_BROKER bodies larger than this are refused (a zlib bomb guard).
MAX_INFLATED_REGISTER_BODY = 256 * 1024 * 1024
_I32 = struct.Struct(">i")


@dataclass
class RegisterBrokerBody(FastjsonBody):
    topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper | None = prop(
        "topicConfigSerializeWrapper",
        body_of(TopicConfigAndMappingSerializeWrapper),
        factory=TopicConfigAndMappingSerializeWrapper,
    )
    filter_server_list: list[str] | None = prop(
        "filterServerList", list_of(STRING), factory=list
    )

    def encode_compressed(self, broker_version: int = DEFAULT_VERSION) -> bytes:
        """The ``compressed=true`` form: zlib (level 9) over length-prefixed parts (spec 9.4).

        The topic-queue-mapping section is written for brokers >= V5_0_0, as a 5.x broker does;
        a 4.x broker's body ends after the filter server list.
        """
        wrapper = self.topic_config_serialize_wrapper or TopicConfigAndMappingSerializeWrapper()
        parts: list[bytes] = []

        def chunk(b: bytes) -> None:
            parts.append(_I32.pack(len(b)))
            parts.append(b)

        dv = wrapper.data_version if wrapper.data_version is not None else DataVersion()
        chunk(dv.encode(standard=False))
        table = wrapper.topic_config_table or {}
        parts.append(_I32.pack(len(table)))
        for cfg in table.values():
            chunk(cfg.encode_compact().encode("utf-8", "replace"))
        chunk(fastjson.dumps(self.filter_server_list, standard=False).encode("utf-8", "replace"))
        if broker_version >= V5_0_0:
            infos = wrapper.topic_queue_mapping_info_map or {}
            parts.append(_I32.pack(len(infos)))
            for info in infos.values():
                chunk(fastjson.dumps(info, standard=False).encode("utf-8", "replace"))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode_compressed(
        cls, data: bytes | bytearray | memoryview, broker_version: int = DEFAULT_VERSION
    ) -> RegisterBrokerBody:
        """Inverse of :meth:`encode_compressed`; ``broker_version`` is the sender's ordinal."""
        d = zlib.decompressobj()
        try:
            raw = d.decompress(bytes(data), MAX_INFLATED_REGISTER_BODY)
        except zlib.error as e:
            raise CodecError(f"compressed REGISTER_BROKER body: {e}") from None
        if d.unconsumed_tail:
            raise CodecError("compressed REGISTER_BROKER body inflates past the size limit")
        r = _Reader(raw)
        dv = DataVersion.decode(r.chunk())
        table: dict[str, TopicConfig] = {}
        for _ in range(r.count()):
            try:
                text = r.chunk().decode("utf-8")
            except UnicodeDecodeError as e:
                raise CodecError(f"topic config is not UTF-8: {e.reason}") from None
            cfg = TopicConfig.decode_compact(text)
            table[cfg.topic_name or ""] = cfg
        filter_json = r.chunk()
        try:
            servers = list_of(STRING).from_tree(fastjson.loads(filter_json))
        except CodecError:
            servers = []  # Java logs and keeps an empty list
        wrapper = TopicConfigAndMappingSerializeWrapper(topic_config_table=table, data_version=dv)
        if broker_version >= V5_0_0:
            infos: dict[str, Any] = {}
            for _ in range(r.count()):
                info = fastjson.loads(r.chunk())
                if not isinstance(info, Mapping):
                    raise CodecError("TopicQueueMappingInfo is not a JSON object")
                topic = info.get("topic")
                if topic is None:  # Java's ConcurrentHashMap.put(null, ...) throws
                    raise CodecError("TopicQueueMappingInfo has no topic")
                infos[_STR.from_tree(topic)] = info
            wrapper.topic_queue_mapping_info_map = infos
        return cls(topic_config_serialize_wrapper=wrapper, filter_server_list=servers)


class _Reader:
    """Reads the int32-length-prefixed parts of an inflated REGISTER_BROKER body."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def count(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise CodecError("compressed REGISTER_BROKER body ends early", offset=self.pos)
        (n,) = _I32.unpack_from(self.buf, self.pos)
        if n < 0:
            raise CodecError(f"negative length {n}", offset=self.pos)
        self.pos += 4
        return n

    def chunk(self) -> bytes:
        n = self.count()
        if self.pos + n > len(self.buf):
            raise CodecError("compressed REGISTER_BROKER body ends early", offset=self.pos)
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b


# ---- HEART_BEAT -------------------------------------------------------------------------------


@dataclass
class SubscriptionData(FastjsonBody):
    # filterClassSource is @JSONField(serialize=false) in Java and unused since 4.x: not declared.
    class_filter_mode: bool = prop("classFilterMode", BOOL, False)
    topic: str | None = prop("topic", STRING)
    sub_string: str | None = prop("subString", STRING)
    tags_set: list[str] | None = prop("tagsSet", list_of(STRING), factory=list)
    #: String.hashCode() of each tag (int32), parallel to tags_set.
    code_set: list[int] | None = prop("codeSet", list_of(INT), factory=list)
    sub_version: int = prop("subVersion", LONG, factory=now_ms)
    expression_type: str | None = prop("expressionType", STRING, ExpressionType.TAG)


@dataclass
class ProducerData(FastjsonBody):
    group_name: str | None = prop("groupName", STRING)


@dataclass
class ConsumerData(FastjsonBody):
    group_name: str | None = prop("groupName", STRING)
    consume_type: ConsumeType | None = prop("consumeType", enum_of(ConsumeType))
    message_model: MessageModel | None = prop("messageModel", enum_of(MessageModel))
    consume_from_where: ConsumeFromWhere | None = prop(
        "consumeFromWhere", enum_of(ConsumeFromWhere)
    )
    subscription_data_set: list[SubscriptionData] | None = prop(
        "subscriptionDataSet", list_of(body_of(SubscriptionData)), factory=list
    )
    unit_mode: bool = prop("unitMode", BOOL, False)


@dataclass
class HeartbeatData(FastjsonBody):
    client_id: str | None = prop("clientID", STRING)
    producer_data_set: list[ProducerData] | None = prop(
        "producerDataSet", list_of(body_of(ProducerData)), factory=list
    )
    consumer_data_set: list[ConsumerData] | None = prop(
        "consumerDataSet", list_of(body_of(ConsumerData)), factory=list
    )
    heartbeat_fingerprint: int = prop("heartbeatFingerprint", INT, 0)  # 5.x
    without_sub: bool = prop("withoutSub", BOOL, False)  # 5.x (Java getter isWithoutSub)


def build_subscription_data(
    topic: str, expression: str | None, expression_type: str | None = ExpressionType.TAG
) -> SubscriptionData:
    """Java ``FilterAPI.build``: parse a tag expression (``"TagA || TagB"``, ``"*"``).

    For TAG (or None): an empty expression or ``*`` subscribes to everything; otherwise the
    expression is split on ``||``, each tag trimmed, empties dropped, and tag + hashCode added.
    Other types (SQL92) keep the expression verbatim and must not be empty.
    """
    if expression_type is None or expression_type == ExpressionType.TAG:
        sd = SubscriptionData(topic=topic, sub_string=expression)
        if not expression or expression == "*":
            sd.sub_string = "*"
            return sd
        pieces = expression.split("||")
        while pieces and pieces[-1] == "":
            pieces.pop()  # Java's split drops trailing empty strings
        if not pieces:
            raise MQClientError(f"tag expression {expression!r} has no tags")
        for piece in pieces:
            tag = piece.strip()
            # Java adds to HashSets: a repeated tag (or hash code) is kept once.
            if tag and tag not in sd.tags_set:
                sd.tags_set.append(tag)
                code = java_string_hash(tag)
                if code not in sd.code_set:
                    sd.code_set.append(code)
        return sd
    if not expression:
        raise MQClientError(f"a {expression_type} expression cannot be empty")
    return SubscriptionData(topic=topic, sub_string=expression, expression_type=expression_type)


# ---- LOCK_BATCH_MQ / UNLOCK_BATCH_MQ ----------------------------------------------------------


@dataclass
class LockBatchRequestBody(FastjsonBody):
    consumer_group: str | None = prop("consumerGroup", STRING)
    client_id: str | None = prop("clientId", STRING)
    only_this_broker: bool = prop("onlyThisBroker", BOOL, False)
    mq_set: list[MessageQueue] | None = prop("mqSet", list_of(MQ), factory=list)


@dataclass
class UnlockBatchRequestBody(FastjsonBody):
    consumer_group: str | None = prop("consumerGroup", STRING)
    client_id: str | None = prop("clientId", STRING)
    only_this_broker: bool = prop("onlyThisBroker", BOOL, False)
    mq_set: list[MessageQueue] | None = prop("mqSet", list_of(MQ), factory=list)


@dataclass
class LockBatchResponseBody(FastjsonBody):
    lock_ok_mq_set: list[MessageQueue] | None = prop("lockOKMQSet", list_of(MQ), factory=list)


# ---- consumer management / admin ---------------------------------------------------------------


@dataclass
class Connection(FastjsonBody):
    client_id: str | None = prop("clientId", STRING)
    client_addr: str | None = prop("clientAddr", STRING)
    language: LanguageCode | None = prop("language", enum_of(LanguageCode))
    version: int = prop("version", INT, 0)


@dataclass
class ConsumerConnection(FastjsonBody):
    connection_set: list[Connection] | None = prop(
        "connectionSet", list_of(body_of(Connection)), factory=list
    )
    subscription_table: dict[str, SubscriptionData] | None = prop(
        "subscriptionTable", map_of(STR_KEY, body_of(SubscriptionData)), factory=dict
    )
    consume_type: ConsumeType | None = prop("consumeType", enum_of(ConsumeType))
    message_model: MessageModel | None = prop("messageModel", enum_of(MessageModel))
    consume_from_where: ConsumeFromWhere | None = prop(
        "consumeFromWhere", enum_of(ConsumeFromWhere)
    )


@dataclass
class OffsetWrapper(FastjsonBody):
    broker_offset: int = prop("brokerOffset", LONG, 0)
    consumer_offset: int = prop("consumerOffset", LONG, 0)
    pull_offset: int = prop("pullOffset", LONG, 0)
    last_timestamp: int = prop("lastTimestamp", LONG, 0)


@dataclass
class ConsumeStats(FastjsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] | None = prop(
        "offsetTable", map_of(MQ, body_of(OffsetWrapper)), factory=dict
    )
    consume_tps: float = prop("consumeTps", DOUBLE, 0.0)


@dataclass
class TopicOffset(FastjsonBody):
    min_offset: int = prop("minOffset", LONG, 0)
    max_offset: int = prop("maxOffset", LONG, 0)
    last_update_timestamp: int = prop("lastUpdateTimestamp", LONG, 0)


@dataclass
class TopicStatsTable(FastjsonBody):
    offset_table: dict[MessageQueue, TopicOffset] | None = prop(
        "offsetTable", map_of(MQ, body_of(TopicOffset)), factory=dict
    )
    topic_put_tps: float = prop("topicPutTps", DOUBLE, 0.0)


@dataclass
class KVTable(FastjsonBody):
    table: dict[str, str] | None = prop("table", map_of(STR_KEY, STRING), factory=dict)


@dataclass
class TopicList(FastjsonBody):
    topic_list: list[str] | None = prop("topicList", list_of(STRING), factory=list)
    broker_addr: str | None = prop("brokerAddr", STRING)


@dataclass
class GroupList(FastjsonBody):
    group_list: list[str] | None = prop("groupList", list_of(STRING), factory=list)


@dataclass
class GetConsumerListByGroupResponseBody(FastjsonBody):
    consumer_id_list: list[str] | None = prop("consumerIdList", list_of(STRING))


@dataclass
class ConsumerOffsetSerializeWrapper(FastjsonBody):
    """GET_ALL_CONSUMER_OFFSET: ``"topic@group" -> {queueId: offset}`` (ids unquoted by Java)."""

    offset_table: dict[str, dict[int, int]] | None = prop(
        "offsetTable", map_of(STR_KEY, map_of(LONG_KEY, LONG)), factory=dict
    )
    data_version: DataVersion | None = prop("dataVersion", body_of(DataVersion))


@dataclass
class SimpleSubscriptionData(FastjsonBody):
    topic: str | None = prop("topic", STRING)
    expression_type: str | None = prop("expressionType", STRING)
    expression: str | None = prop("expression", STRING)
    version: int = prop("version", LONG, 0)


def _default_retry_policy() -> dict[str, Any]:
    return {"type": "CUSTOMIZED"}


@dataclass
class SubscriptionGroupConfig(FastjsonBody):
    group_name: str | None = prop("groupName", STRING)
    consume_enable: bool = prop("consumeEnable", BOOL, True)
    consume_from_min_enable: bool = prop("consumeFromMinEnable", BOOL, True)
    consume_broadcast_enable: bool = prop("consumeBroadcastEnable", BOOL, True)
    consume_message_orderly: bool = prop("consumeMessageOrderly", BOOL, False)
    retry_queue_nums: int = prop("retryQueueNums", INT, 1)
    retry_max_times: int = prop("retryMaxTimes", INT, 16)
    #: GroupRetryPolicy kept as generic data (``{"type":"CUSTOMIZED"}`` by default).
    group_retry_policy: Any = prop("groupRetryPolicy", ANY, factory=_default_retry_policy)
    broker_id: int = prop("brokerId", LONG, 0)
    which_broker_when_consume_slowly: int = prop("whichBrokerWhenConsumeSlowly", LONG, 1)
    notify_consumer_ids_changed_enable: bool = prop("notifyConsumerIdsChangedEnable", BOOL, True)
    group_sys_flag: int = prop("groupSysFlag", INT, 0)
    consume_timeout_minute: int = prop("consumeTimeoutMinute", INT, 15)
    subscription_data_set: list[SimpleSubscriptionData] | None = prop(
        "subscriptionDataSet", list_of(body_of(SimpleSubscriptionData))
    )
    attributes: dict[str, str] | None = prop("attributes", map_of(STR_KEY, STRING), factory=dict)


@dataclass
class SubscriptionGroupWrapper(FastjsonBody):
    subscription_group_table: dict[str, SubscriptionGroupConfig] | None = prop(
        "subscriptionGroupTable", map_of(STR_KEY, body_of(SubscriptionGroupConfig)), factory=dict
    )
    data_version: DataVersion | None = prop(
        "dataVersion", body_of(DataVersion), factory=DataVersion
    )


@dataclass
class ConsumeStatus(FastjsonBody):
    pull_rt: float = prop("pullRT", DOUBLE, 0.0)
    pull_tps: float = prop("pullTPS", DOUBLE, 0.0)
    consume_rt: float = prop("consumeRT", DOUBLE, 0.0)
    consume_ok_tps: float = prop("consumeOKTPS", DOUBLE, 0.0)
    consume_failed_tps: float = prop("consumeFailedTPS", DOUBLE, 0.0)
    consume_failed_msgs: int = prop("consumeFailedMsgs", LONG, 0)


@dataclass
class ProcessQueueInfo(FastjsonBody):
    commit_offset: int = prop("commitOffset", LONG, 0)
    cached_msg_min_offset: int = prop("cachedMsgMinOffset", LONG, 0)
    cached_msg_max_offset: int = prop("cachedMsgMaxOffset", LONG, 0)
    cached_msg_count: int = prop("cachedMsgCount", INT, 0)
    cached_msg_size_in_mib: int = prop("cachedMsgSizeInMiB", INT, 0)
    transaction_msg_min_offset: int = prop("transactionMsgMinOffset", LONG, 0)
    transaction_msg_max_offset: int = prop("transactionMsgMaxOffset", LONG, 0)
    transaction_msg_count: int = prop("transactionMsgCount", INT, 0)
    locked: bool = prop("locked", BOOL, False)
    try_unlock_times: int = prop("tryUnlockTimes", LONG, 0)
    last_lock_timestamp: int = prop("lastLockTimestamp", LONG, 0)
    droped: bool = prop("droped", BOOL, False)  # sic: the Java property name
    last_pull_timestamp: int = prop("lastPullTimestamp", LONG, 0)
    last_consume_timestamp: int = prop("lastConsumeTimestamp", LONG, 0)


def _subscription_order(sd: SubscriptionData) -> bytes:
    # SubscriptionData.compareTo: String order of topic + "@" + subString (null -> "null").
    topic = "null" if sd.topic is None else sd.topic
    sub = "null" if sd.sub_string is None else sd.sub_string
    return f"{topic}@{sub}".encode("utf-16-be", "surrogatepass")


@dataclass
class ConsumerRunningInfo(FastjsonBody):
    """GET_CONSUMER_RUNNING_INFO reply. Java keeps the tables in TreeMaps (written key-sorted)
    and the subscriptions in a TreeSet (written in SubscriptionData.compareTo order)."""

    properties: dict[str, Any] | None = prop("properties", map_of(STR_KEY, ANY), factory=dict)
    subscription_set: list[SubscriptionData] | None = prop(
        "subscriptionSet",
        list_of(body_of(SubscriptionData), sort_key=_subscription_order),
        factory=list,
    )
    mq_table: dict[MessageQueue, ProcessQueueInfo] | None = prop(
        "mqTable", map_of(MQ, body_of(ProcessQueueInfo), tree_map=True), factory=dict
    )
    #: PopProcessQueueInfo values kept as generic data.
    mq_pop_table: dict[MessageQueue, Any] | None = prop(
        "mqPopTable", map_of(MQ, ANY, tree_map=True), factory=dict
    )
    status_table: dict[str, ConsumeStatus] | None = prop(
        "statusTable", map_of(STR_KEY, body_of(ConsumeStatus), tree_map=True), factory=dict
    )
    user_consumer_info: dict[str, str] | None = prop(
        "userConsumerInfo", map_of(STR_KEY, STRING, tree_map=True), factory=dict
    )
    jstack: str | None = prop("jstack", STRING)
