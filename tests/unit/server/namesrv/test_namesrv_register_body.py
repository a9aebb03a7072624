"""REGISTER_BROKER bodies: the hand-written reader of the Java broker's shape (read_canonical) gives
the tables the codec's RegisterBrokerBody (the schema of record) gives, field for field and in
the same order, or steps aside (None); so does RegisterBodyReader with a previous body to
borrow from."""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqwire.codec import fastjson
from rmqwire.codec.commands.namesrv import RegisterBrokerBody
from rmqwire.codec.commands.topic import (
    DataVersion,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
    TopicConfigSerializeWrapper,
)
from rmqwire.errors import BrokerSystemError
from rmqwire.model import TopicFilterType
from rmqwire.server.namesrv.register_body import (
    RegisterBodyReader,
    read_canonical,
    read_register_body,
)

VERSION = 493  # a 5.3.3 broker
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
# Names with quotes, backslashes, controls and non-ASCII text too: escaped ones go the general way.
names = st.text(max_size=12) | st.from_regex(r"[A-Za-z0-9_%|-]{1,20}", fullmatch=True)
data_versions = st.builds(DataVersion, state_version=int64, timestamp=int64, counter=int64)


@st.composite
def topic_configs(draw: Any) -> TopicConfig:
    return TopicConfig(
        topic_name=draw(st.none() | names),
        read_queue_nums=draw(int32), write_queue_nums=draw(int32), perm=draw(int32),
        topic_filter_type=draw(st.sampled_from(TopicFilterType)),
        topic_sys_flag=draw(int32), order=draw(st.booleans()),
        attributes=draw(st.none() | st.dictionaries(names, names, max_size=2)),
    )


@st.composite
def bodies(draw: Any) -> RegisterBrokerBody:
    table = draw(st.dictionaries(names, topic_configs(), max_size=6))
    if draw(st.booleans()):  # a 5.x broker's wrapper, static-topic maps mostly empty
        maps = st.just({}) | st.dictionaries(names, st.dictionaries(names, st.integers(), max_size=2),
                                              max_size=2)
        wrapper: TopicConfigSerializeWrapper = TopicConfigAndMappingSerializeWrapper(
            topic_config_table=table, data_version=draw(data_versions),
            topic_queue_mapping_info_map=draw(maps), topic_queue_mapping_detail_map=draw(maps),
            mapping_data_version=draw(data_versions))
    else:  # a 4.x broker's
        wrapper = TopicConfigSerializeWrapper(topic_config_table=table, data_version=draw(data_versions))
    return RegisterBrokerBody(topic_config_serialize_wrapper=wrapper,
                              filter_server_list=draw(st.lists(names, max_size=3)))


def schema_tables(body: bytes) -> tuple[list[tuple[str, tuple[Any, ...]]], DataVersion, Any, Any]:
    """What the schema of record reads: each topic's key and route fields, in order, the
    DataVersion, the static-topic mapping and the filter servers."""
    decoded = RegisterBrokerBody.from_fastjson(fastjson.loads(body))
    wrapper = decoded.topic_config_serialize_wrapper
    assert wrapper is not None
    table = [(k, (tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag))
             for k, tc in (wrapper.topic_config_table or {}).items()]
    mapping = getattr(wrapper, "topic_queue_mapping_info_map", None) or {}
    return table, _stable(wrapper.data_version), mapping, decoded.filter_server_list


def fields(tables: Any) -> tuple[list[tuple[str, tuple[Any, ...]]], DataVersion, Any, Any]:
    t, filters = tables
    return ([(k, (tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag))
             for k, tc in t.topic_config_table.items()], _stable(t.data_version),
            dict(t.topic_queue_mapping_info_map), filters)


def _stable(dv: DataVersion) -> DataVersion:
    """A DataVersion without a timestamp takes the current time (Java's default): equal enough."""
    if abs(dv.timestamp - time.time() * 1000) < 600_000:
        return dataclasses.replace(dv, timestamp=-1)
    return dv


def general(body: bytes) -> Any:
    try:
        return read_register_body(body, False, VERSION)
    except BrokerSystemError:
        return BrokerSystemError


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies(), bodies())
def test_canonical_reader_equals_the_schema(body: RegisterBrokerBody, before: RegisterBrokerBody) -> None:
    data = body.encode(standard=False)  # byte for byte what a Java broker writes
    expected = schema_tables(data)
    assert fields(read_register_body(data, False, VERSION)) == expected
    for previous in (None, read_canonical(before.encode(standard=False))):
        got = read_canonical(data, previous)
        if got is not None:
            assert fields(got.tables) == expected
    # Names without escapes and empty static-topic maps: the shape of every Java broker's body.
    plain = all(isinstance(k, str) and k.isprintable() and '"' not in k and "\\" not in k
                for k in _strings(body))
    wrapper = body.topic_config_serialize_wrapper
    maps_empty = not getattr(wrapper, "topic_queue_mapping_info_map", None) and not getattr(
        wrapper, "topic_queue_mapping_detail_map", None)
    if plain and maps_empty and _ints_fit(body):
        assert read_canonical(data) is not None


def _strings(body: RegisterBrokerBody) -> list[Any]:
    wrapper = body.topic_config_serialize_wrapper
    out: list[Any] = list(body.filter_server_list or [])
    for k, tc in (wrapper.topic_config_table or {}).items():
        out += [k, tc.topic_name, *(tc.attributes or {}).keys(), *(tc.attributes or {}).values()]
    return out


def _ints_fit(body: RegisterBrokerBody) -> bool:
    return all(abs(v) < 10**9 for tc in body.topic_config_serialize_wrapper.topic_config_table.values()
               for v in (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag))


def java_body(topics: int, counter: int, perm: int = 6) -> bytes:
    table = {f"T{i}": TopicConfig(topic_name=f"T{i}", read_queue_nums=8, write_queue_nums=8, perm=perm,
                                  attributes={"+message.type": "NORMAL"} if i % 2 else {})
             for i in range(topics)}
    return RegisterBrokerBody(topic_config_serialize_wrapper=TopicConfigAndMappingSerializeWrapper(
        topic_config_table=table, data_version=DataVersion(0, 1_700_000_000_000, counter))).encode(
        standard=False)


BASE = java_body(40, 1)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_bodies_read_alike_or_go_the_general_way(data: Any) -> None:
    """Bytes changed anywhere: what the canonical reader accepts, with or without the previous
    body to borrow from, is what the general reader reads."""
    raw = bytearray(BASE)
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["set", "delete", "insert"]))
        at = data.draw(st.integers(0, len(raw) - 1))
        byte = data.draw(st.sampled_from(b'{}[]",:0123456789-aetrufl \\x'))
        if op == "set":
            raw[at] = byte
        elif op == "delete":
            del raw[at]
        else:
            raw.insert(at, byte)
    body = bytes(raw)
    expected = general(body)
    for previous in (None, read_canonical(BASE)):
        got = read_canonical(body, previous)
        if got is not None:
            assert expected is not BrokerSystemError
            assert fields(got.tables) == fields(expected)


def test_java_broker_bodies_are_read_canonically_and_borrow_what_did_not_change() -> None:
    first = read_canonical(BASE)
    assert first is not None and fields(first.tables) == fields(read_register_body(BASE, False, VERSION))
    # A new DataVersion, the same topics: the table itself is borrowed.
    bumped = java_body(40, 2)
    again = read_canonical(bumped, first)
    assert again is not None and fields(again.tables) == fields(read_register_body(bumped, False, VERSION))
    assert again.tables[0].topic_config_table is first.tables[0].topic_config_table
    assert again.tables[0].data_version == DataVersion(0, 1_700_000_000_000, 2)
    # One topic changed: its entry is read, the others borrowed.
    changed = bumped.replace(b'"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T7"',
                             b'"perm":2,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T7"')
    third = read_canonical(changed, again)
    assert third is not None and fields(third.tables) == fields(read_register_body(changed, False, VERSION))
    assert third.tables[0].topic_config_table["T7"].perm == 2
    assert third.tables[0].topic_config_table["T6"] is first.tables[0].topic_config_table["T6"]


def test_reader_remembers_each_broker_and_reads_every_body_right() -> None:
    reader = RegisterBodyReader()
    rng = random.Random(7)
    shapes = [java_body(300, c, perm) for c in (1, 2) for perm in (6, 4)]
    for _ in range(40):
        broker = rng.choice(["a", "b"])
        body = rng.choice(shapes)
        got = reader.read(broker, body, False, VERSION)
        assert fields(got) == fields(read_register_body(body, False, VERSION))
    assert len(reader) == 2
    reader.forget_all_but({"b"})
    assert len(reader) == 1


@pytest.mark.parametrize("body", [
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":x},'
    b'"topicConfigTable":{}}}',
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{},'
    b'"topicConfigTable":{"a":{"order":false,"perm":6,"readQueueNums":01,"topicFilterType":'
    b'"SINGLE_TAG","topicName":"a","topicSysFlag":0,"writeQueueNums":8}}}}',
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{},'
    b'"topicConfigTable":{"a":{"order":false,"perm":6,"readQueueNums":1,"topicFilterType":'
    b'"SINGLE_TAG","topicName":"a","topicSysFlag":0,"writeQueueNums":8}}},"x":1}',
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{},'
    b'"topicConfigTable":{},"topicConfigTable":{"a":{}}}}',
])
def test_bodies_not_in_the_java_shape_go_the_general_way(body: bytes) -> None:
    assert read_canonical(body) is None


def test_a_table_with_a_later_duplicate_key_reads_as_json_does() -> None:
    entry = ('"{k}":{{"order":false,"perm":{p},"readQueueNums":1,"topicFilterType":"SINGLE_TAG",'
             '"topicName":"{k}","topicSysFlag":0,"writeQueueNums":1}}')
    table = ",".join([entry.format(k="a", p=6), entry.format(k="b", p=6), entry.format(k="a", p=2)])
    body = ('{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1},'
            f'"topicConfigTable":{{{table}}}}}}}').encode()
    got = read_canonical(body)
    assert got is not None
    assert fields(got.tables) == fields(read_register_body(body, False, VERSION))
    assert [(k, tc.perm) for k, tc in got.tables[0].topic_config_table.items()] == [("a", 2), ("b", 6)]


def test_compressed_and_old_bodies_are_not_canonical() -> None:
    reader = RegisterBodyReader()
    body = RegisterBrokerBody(topic_config_serialize_wrapper=TopicConfigAndMappingSerializeWrapper(
        topic_config_table={"T": TopicConfig(topic_name="T")})).encode_compressed()
    got = reader.read("a", body, True, VERSION)
    assert [k for k in got[0].topic_config_table] == ["T"]
    old = dataclasses.replace(DataVersion(1, 2, 3))
    wrapper = TopicConfigSerializeWrapper(topic_config_table={"T": TopicConfig(topic_name="T")},
                                          data_version=old).encode(standard=False)
    assert reader.read("b", wrapper, False, 38)[1] is None  # a 3.x broker: no filter server list
