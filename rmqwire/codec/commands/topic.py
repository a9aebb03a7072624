"""Topic administration on a broker: create, delete, config, stats; TopicConfig and friends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqwire.codec import fastjson
from rmqwire.codec.body import (
    _INT,
    ANY,
    BOOL,
    DOUBLE,
    INT,
    LONG,
    MQ,
    STR_KEY,
    STRING,
    FastjsonBody,
    body_of,
    enum_of,
    list_of,
    map_of,
    prop,
)
from rmqwire.codec.codes import RequestCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.header import (
    TopicRequestHeader,
    jfield,
)
from rmqwire.codec.java import now_ms
from rmqwire.errors import CodecError
from rmqwire.model import (
    MessageQueue,
    TopicFilterType,
)


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


class GetTopicStatsInfoRequestHeader(TopicRequestHeader):
    topic: str | None = jfield("String", required=True)


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
    attributes: dict[str, str] | None = prop("attributes", map_of(STR_KEY, STRING), factory=dict)

    def encode_compact(self) -> str:
        """Java ``TopicConfig.encode()``: ``"<name> <read> <write> <perm> <filterType> <attrs>"``.

        Used only inside the compressed REGISTER_BROKER body; topicSysFlag and order are lost.
        """
        # Java's StringBuilder.append writes a null as "null".
        name = "null" if self.topic_name is None else self.topic_name
        ftype = "null" if self.topic_filter_type is None else self.topic_filter_type.name
        attrs = "" if self.attributes is None else fastjson.dumps(self.attributes, standard=False)
        return f"{name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {ftype} {attrs}"

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
        cfg = cls(
            topic_name=parts[0],
            read_queue_nums=read,
            write_queue_nums=write,
            perm=perm,
            topic_filter_type=ftype,
        )
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
class TopicList(FastjsonBody):
    topic_list: list[str] | None = prop("topicList", list_of(STRING), factory=list)
    broker_addr: str | None = prop("brokerAddr", STRING)


# ---- commands -----------------------------------------------------------------------------------


class UpdateAndCreateTopic(Command):
    code = RequestCode.UPDATE_AND_CREATE_TOPIC
    header = CreateTopicRequestHeader


class DeleteTopicInBroker(Command):
    code = RequestCode.DELETE_TOPIC_IN_BROKER
    header = DeleteTopicRequestHeader


class GetTopicConfig(Command):
    """The body is a TopicConfigAndQueueMapping (a TopicConfig plus 5.x static-topic fields)."""

    code = RequestCode.GET_TOPIC_CONFIG
    header = GetTopicConfigRequestHeader
    response_body = bytes


class GetAllTopicConfig(Command):
    code = RequestCode.GET_ALL_TOPIC_CONFIG
    response_body = TopicConfigSerializeWrapper


class GetTopicStatsInfo(Command):
    code = RequestCode.GET_TOPIC_STATS_INFO
    header = GetTopicStatsInfoRequestHeader
    response_body = TopicStatsTable
