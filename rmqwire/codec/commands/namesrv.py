"""NameServer requests: broker registration and liveness, KV config, permissions, topics."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmqwire.codec import fastjson
from rmqwire.codec.body import (
    _STR,
    LONG_KEY,
    STR_KEY,
    STRING,
    FastjsonBody,
    body_of,
    list_of,
    map_of,
    prop,
)
from rmqwire.codec.codes import DEFAULT_VERSION, V5_0_0, RequestCode, ResponseCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.route import TopicRouteData
from rmqwire.codec.commands.topic import (
    DataVersion,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
    TopicList,
)
from rmqwire.codec.header import (
    CommandHeader,
    TopicRequestHeader,
    jfield,
)
from rmqwire.errors import CodecError


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


MAX_INFLATED_REGISTER_BODY = 256 * 1024 * 1024


_I32 = struct.Struct(">i")


@dataclass
class RegisterBrokerBody(FastjsonBody):
    topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper | None = prop(
        "topicConfigSerializeWrapper",
        body_of(TopicConfigAndMappingSerializeWrapper),
        factory=TopicConfigAndMappingSerializeWrapper,
    )
    filter_server_list: list[str] | None = prop("filterServerList", list_of(STRING), factory=list)

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


@dataclass
class KVTable(FastjsonBody):
    table: dict[str, str] | None = prop("table", map_of(STR_KEY, STRING), factory=dict)


# ---- commands -----------------------------------------------------------------------------------


class RegisterBroker(Command):
    """Body: a RegisterBrokerBody, plain JSON or ``encode_compressed`` per the header's
    ``compressed`` flag, so it travels as bytes; the answer carries the order-topic KV table."""

    code = RequestCode.REGISTER_BROKER
    header = RegisterBrokerRequestHeader
    body = bytes
    response_header = RegisterBrokerResponseHeader
    response_body = KVTable


class UnregisterBroker(Command):
    code = RequestCode.UNREGISTER_BROKER
    header = UnRegisterBrokerRequestHeader


class BrokerHeartbeat(Command):
    code = RequestCode.BROKER_HEARTBEAT
    header = BrokerHeartbeatRequestHeader
    oneway = True


class QueryDataVersion(Command):
    code = RequestCode.QUERY_DATA_VERSION
    header = QueryDataVersionRequestHeader
    body = DataVersion
    response_header = QueryDataVersionResponseHeader
    response_body = DataVersion


class PutKVConfig(Command):
    code = RequestCode.PUT_KV_CONFIG
    header = PutKVConfigRequestHeader


class GetKVConfig(Command):
    code = RequestCode.GET_KV_CONFIG
    header = GetKVConfigRequestHeader
    response_header = GetKVConfigResponseHeader
    statuses = frozenset({ResponseCode.QUERY_NOT_FOUND})


class DeleteKVConfig(Command):
    code = RequestCode.DELETE_KV_CONFIG
    header = DeleteKVConfigRequestHeader


class GetKVListByNamespace(Command):
    code = RequestCode.GET_KVLIST_BY_NAMESPACE
    header = GetKVListByNamespaceRequestHeader
    response_body = KVTable
    statuses = frozenset({ResponseCode.QUERY_NOT_FOUND})


class WipeWritePermOfBroker(Command):
    code = RequestCode.WIPE_WRITE_PERM_OF_BROKER
    header = WipeWritePermOfBrokerRequestHeader
    response_header = WipeWritePermOfBrokerResponseHeader


class AddWritePermOfBroker(Command):
    code = RequestCode.ADD_WRITE_PERM_OF_BROKER
    header = AddWritePermOfBrokerRequestHeader
    response_header = AddWritePermOfBrokerResponseHeader


class DeleteTopicInNamesrv(Command):
    code = RequestCode.DELETE_TOPIC_IN_NAMESRV
    header = DeleteTopicFromNamesrvRequestHeader


class RegisterTopicInNamesrv(Command):
    code = RequestCode.REGISTER_TOPIC_IN_NAMESRV
    header = RegisterTopicRequestHeader
    body = TopicRouteData


class GetTopicsByCluster(Command):
    code = RequestCode.GET_TOPICS_BY_CLUSTER
    header = GetTopicsByClusterRequestHeader
    response_body = TopicList


class GetAllTopicListFromNameserver(Command):
    code = RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER
    response_body = TopicList


class GetSystemTopicListFromNs(Command):
    code = RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS
    response_body = TopicList


class GetBrokerMemberGroup(Command):
    code = RequestCode.GET_BROKER_MEMBER_GROUP
    header = GetBrokerMemberGroupRequestHeader
    response_body = bytes


# ---- added for the NameServer (issue 10) ------------------------------------------------------


@dataclass
class BrokerMemberGroup(FastjsonBody):
    """The addresses of one broker name: GET_BROKER_MEMBER_GROUP's answer."""

    cluster: str | None = prop("cluster", STRING)
    broker_name: str | None = prop("brokerName", STRING)
    broker_addrs: dict[int, str] | None = prop(
        "brokerAddrs", map_of(LONG_KEY, STRING), factory=dict
    )


@dataclass
class GetBrokerMemberGroupResponseBody(FastjsonBody):
    broker_member_group: BrokerMemberGroup | None = prop(
        "brokerMemberGroup", body_of(BrokerMemberGroup)
    )


class GetUnitTopicList(Command):
    code = RequestCode.GET_UNIT_TOPIC_LIST
    response_body = TopicList


class GetHasUnitSubTopicList(Command):
    code = RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST
    response_body = TopicList


class GetHasUnitSubUnUnitTopicList(Command):
    code = RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
    response_body = TopicList


class UpdateNamesrvConfig(Command):
    """Body: ``java.util.Properties`` text (``key=value`` lines, UTF-8)."""

    code = RequestCode.UPDATE_NAMESRV_CONFIG
    body = bytes


class GetNamesrvConfig(Command):
    """Answer body: every config item as sorted ``key=value`` lines (UTF-8), or none."""

    code = RequestCode.GET_NAMESRV_CONFIG
    response_body = bytes


class NotifyMinBrokerIdChangeRequestHeader(CommandHeader):
    min_broker_id: int | None = jfield("Long")
    broker_name: str | None = jfield("String")
    min_broker_addr: str | None = jfield("String")
    offline_broker_addr: str | None = jfield("String")
    ha_broker_addr: str | None = jfield("String")


class NotifyMinBrokerIdChange(Command):
    """NameServer -> broker, oneway (only with the NameServer's notifyMinBrokerIdChanged)."""

    code = RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE
    header = NotifyMinBrokerIdChangeRequestHeader
    oneway = True
