"""Reading REGISTER_BROKER bodies (Java's ``RegisterBrokerBody``) into what route updates need.

The codec's ``RegisterBrokerBody`` is the schema of record; ``read_register_body`` reads any body
through it (plain or zlib, 3.x bare wrappers too), with a shortcut from the parsed JSON tree.
A broker re-registers every 30 s with thousands of topics, so ``RegisterBodyReader`` keeps each
broker's last body: the same bytes again are not read again, and a plain body in the exact shape
a Java broker writes (fastjson, sorted keys, no escapes) is read by ``read_canonical`` without a
JSON tree, reusing the previous body's topic table when its text did not change (a new
DataVersion with the same topics: a restarted broker, or a bumped version) and each unchanged
topic's entry otherwise. Anything else goes the general way; tests/unit/server/namesrv/
test_namesrv_register_body.py property-tests that both ways give the same tables.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rmqwire.codec import fastjson
from rmqwire.codec.commands.namesrv import RegisterBrokerBody
from rmqwire.codec.commands.topic import DataVersion, TopicConfigSerializeWrapper
from rmqwire.errors import BrokerSystemError, CodecError
from rmqwire.server.namesrv.route_info import TopicConfigTable, TopicQueueConfig

#: ``MQVersion.Version.V3_0_11``: older brokers send a bare TopicConfigSerializeWrapper.
V3_0_11 = 39
_REMOTING_COMMAND_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"

#: What a body is read into: the topic configs (with DataVersion and static-topic mapping) and
#: the filter servers (None: the body does not say, as a 3.x one).
RegisterBodyTables = tuple[TopicConfigTable, list[str] | None]


def read_register_body(body: bytes | None, compressed: bool, version: int) -> RegisterBodyTables:
    """The topic configs and filter servers of a REGISTER_BROKER body (Java's defaults when none)."""
    if body is None:
        return TopicConfigTable(), ([] if version >= V3_0_11 else None)
    try:
        if version < V3_0_11:  # a bare TopicConfigSerializeWrapper
            return TopicConfigTable.of(TopicConfigSerializeWrapper.decode(body)), None
        # The 5.x broker always says compressed=false, even when compressedRegister=true made it
        # send a zlib stream; JSON starts with '{', zlib with 0x78.
        if compressed or body[:1] == b"\x78":
            decoded = RegisterBrokerBody.decode_compressed(body, version)
        else:
            tree = fastjson.loads(body)
            fast = tables_from_tree(tree)
            if fast is not None:
                return fast
            decoded = RegisterBrokerBody.from_fastjson(tree)
    except (CodecError, UnicodeDecodeError, ValueError) as e:
        raise BrokerSystemError(
            remark=f"{_REMOTING_COMMAND_EXCEPTION}: Failed to decode RegisterBrokerBody ({e})"
        ) from e
    return TopicConfigTable.of(decoded.topic_config_serialize_wrapper), decoded.filter_server_list


def tables_from_tree(tree: Any) -> RegisterBodyTables | None:
    """A plain REGISTER_BROKER body read straight from its JSON tree (building a codec
    TopicConfig per topic dominated the cost). Returns None for anything unusual (casts, nulls,
    odd types): the codec then reads it with all of fastjson's leniency."""
    if not isinstance(tree, dict):
        return None
    wrapper = tree.get("topicConfigSerializeWrapper")
    filters = tree.get("filterServerList", [])
    if not isinstance(wrapper, dict) or not isinstance(filters, list):
        return None
    if not all(type(f) is str for f in filters):
        return None
    table = wrapper.get("topicConfigTable", {})
    mapping = wrapper.get("topicQueueMappingInfoMap", {})
    if not isinstance(table, dict) or not isinstance(mapping, dict):
        return None
    configs: dict[str, TopicQueueConfig] = {}
    for key, tc in table.items():
        if type(tc) is not dict:
            return None
        get = tc.get
        name, read, write = get("topicName"), get("readQueueNums", 16), get("writeQueueNums", 16)
        perm, flag = get("perm", 6), get("topicSysFlag", 0)
        if (type(name) is not str or type(read) is not int or type(write) is not int
                or type(perm) is not int or type(flag) is not int):
            return None
        configs[key] = TopicQueueConfig(name, read, write, perm, flag)
    dv_tree = wrapper.get("dataVersion")
    try:
        dv = DataVersion() if dv_tree is None else DataVersion.from_fastjson(dv_tree)
    except CodecError:
        return None
    return TopicConfigTable(configs, dv, mapping), filters


# ---- the shape a Java broker writes ---------------------------------------------------------------

_S = r'[^"\\\x00-\x1f]*'  # a string's content without escapes: the text is the value
_INT = r"-?(?:0|[1-9][0-9]{0,8})"  # JSON ints within Java's int (longer ones go the general way)
_FLAT = rf'\{{(?:"{_S}":[-+.0-9a-zA-Z]*(?:,"{_S}":[-+.0-9a-zA-Z]*)*)?\}}'  # a DataVersion
#: Everything before the topic table: filter servers, DataVersion, 5.x mapping DataVersion.
_HEAD = re.compile(
    rf'\{{"filterServerList":(\[(?:"{_S}"(?:,"{_S}")*)?\]),'
    rf'"topicConfigSerializeWrapper":\{{"dataVersion":({_FLAT}),'
    rf'(?:"mappingDataVersion":({_FLAT}),)?"topicConfigTable":\{{'
)
#: Everything after it: a 5.x wrapper has empty static-topic maps, a 4.x one ends there.
_TAILS = ('},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}', "}}}")
#: One topic's entry as fastjson writes a TopicConfig (sorted keys; 4.x has no attributes):
#: the whole entry, its key, perm, read and write queues, name and sys flag.
_ENTRY = re.compile(
    rf'("({_S})":\{{(?:"attributes":\{{(?:"{_S}":"{_S}"(?:,"{_S}":"{_S}")*)?\}},)?'
    rf'"order":(?:true|false),"perm":({_INT}),"readQueueNums":({_INT}),'
    rf'"topicFilterType":"(?:SINGLE_TAG|MULTI_TAG)","topicName":"({_S})",'
    rf'"topicSysFlag":({_INT}),"writeQueueNums":({_INT})\}})'
)


@dataclass
class CanonicalBody:
    """A body read by ``read_canonical``: its tables, and its topic table's text and entries
    (what the broker's next body is compared with)."""

    tables: RegisterBodyTables
    table_text: str
    entries: dict[str, tuple[str, TopicQueueConfig]] = field(default_factory=dict)


def read_canonical(body: bytes, previous: CanonicalBody | None = None) -> CanonicalBody | None:
    """Read a plain body in exactly the shape a Java broker writes, without a JSON tree; None
    for anything else (read it with ``read_register_body``, which gives the same tables for
    every body this reads). ``previous``, the same broker's last body, lends what did not
    change."""
    if body[:2] != b'{"':
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = _HEAD.match(text)
    if head is None:
        return None
    start = head.end()
    tail = next((t for t in _TAILS if text.endswith(t)), None)
    if tail is None or len(text) - len(tail) < start:
        return None
    table_text = text[start:len(text) - len(tail)]
    try:
        filters = json.loads(head.group(1))
        dv = DataVersion.from_fastjson(json.loads(head.group(2)))
        if head.group(3) is not None:
            json.loads(head.group(3))  # not used, but it must be JSON
    except (ValueError, CodecError):
        return None
    if previous is not None and previous.table_text == table_text:
        configs = previous.tables[0].topic_config_table
        return CanonicalBody((TopicConfigTable(configs, dv, {}), filters), table_text,
                             previous.entries)
    rows = _ENTRY.findall(table_text)
    if ",".join([row[0] for row in rows]) != table_text:
        return None  # something between or inside the entries is not in the Java shape
    known = previous.entries if previous is not None else {}
    entries: dict[str, tuple[str, TopicQueueConfig]] = {}
    configs = {}
    for row in rows:
        entry = known.get(row[0])
        if entry is None:
            _, key, perm, read, name, flag, write = row
            entry = (key, TopicQueueConfig(name, int(read), int(write), int(perm), int(flag)))
        entries[row[0]] = entry
        configs[entry[0]] = entry[1]
    return CanonicalBody((TopicConfigTable(configs, dv, {}), filters), table_text, entries)


@dataclass
class _LastBody:
    body: bytes
    how: tuple[int, bool]
    tables: RegisterBodyTables
    canonical: CanonicalBody | None


class RegisterBodyReader:
    """Reads REGISTER_BROKER bodies, remembering each broker's last one (keyed by the caller,
    e.g. cluster and broker address)."""

    #: Smaller bodies are cheap to read again.
    MIN_REMEMBERED = 4096

    def __init__(self) -> None:
        self._last: dict[Any, _LastBody] = {}

    def read(self, key: Any, body: bytes | None, compressed: bool, version: int) -> RegisterBodyTables:
        last = self._last.get(key)
        how = (version, compressed)
        if last is not None and last.body == body and last.how == how:
            return last.tables  # a broker re-registers every 30 s with the same bytes
        canonical = None
        if body is not None and not compressed and version >= V3_0_11:
            canonical = read_canonical(body, last.canonical if last is not None else None)
        tables = canonical.tables if canonical is not None else read_register_body(
            body, compressed, version)
        if body is not None and len(body) >= self.MIN_REMEMBERED:
            self._last[key] = _LastBody(body, how, tables, canonical)
        return tables

    def forget_all_but(self, keep: Any) -> None:
        """Forget every broker but those ``keep`` contains (``in``)."""
        for k in [k for k in self._last if k not in keep]:
            del self._last[k]

    def __len__(self) -> int:
        return len(self._last)
