"""Commit log: record bytes, segment files, roll-over with the blank record, put refusals."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import BORN_HOST, STORE_HOST, make_msg, small_config

from rmqwire.codec.ids import create_offset_msg_id
from rmqwire.codec.message import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MessageExt,
    MessageSysFlag,
    body_crc32,
    decode_message,
    decode_messages,
    schema_decode_messages,
    schema_encode_message,
)
from rmqwire.server.store import MessageStoreConfig, PutMessageStatus
from rmqwire.server.store.commitlog import check_message_and_return_size, tags_code_of
from rmqwire.server.store.config import file_name, parse_delay_levels

DELAYS = parse_delay_levels(MessageStoreConfig().message_delay_level)


def test_append_and_read_back(store):
    results = [store.put_message(make_msg(body=f"m{i}".encode() * 10, queue_id=i % 2, keys=f"k{i}"))
               for i in range(10)]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    offsets = [r.commit_log_offset for r in results]
    assert offsets[0] == 0
    assert offsets == sorted(offsets)
    for i, r in enumerate(results):
        assert r.queue_offset == i // 2
        assert r.msg_id == create_offset_msg_id(STORE_HOST, r.commit_log_offset)
        raw = store.select_one_message_by_offset(r.commit_log_offset)
        m = decode_message(raw, check_crc=True)
        assert m.body == f"m{i}".encode() * 10
        assert m.commit_log_offset == r.commit_log_offset
        assert m.queue_offset == i // 2 and m.queue_id == i % 2
        assert m.store_timestamp == r.store_timestamp
        assert m.body_crc == body_crc32(m.body)
        assert m.keys == f"k{i}" and m.tags == "TagA"
        assert m.born_host == BORN_HOST and m.store_host == STORE_HOST
        assert m.magic == MAGIC_CODE_V1
        # next record starts right after this one
        if i + 1 < len(results):
            assert results[i + 1].commit_log_offset == r.commit_log_offset + m.store_size
    assert store.max_phy_offset == offsets[-1] + len(store.select_one_message_by_offset(offsets[-1]))
    assert store.min_phy_offset == 0
    assert store.look_message_by_offset(offsets[3]).body == b"m3" * 10
    assert store.look_message_by_offset(store.max_phy_offset) is None


def test_put_updates_the_inner_message_like_java(store):
    msg = make_msg(body=b"abc", born_host=("::1", 4000), store_host=("fe80::1", 10911))
    r = store.put_message(msg)
    assert r.is_ok
    assert msg.sys_flag & MessageSysFlag.BORNHOST_V6 and msg.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6
    assert msg.body_crc == body_crc32(b"abc")
    assert (msg.commit_log_offset, msg.queue_offset, msg.store_timestamp) == (0, 0, r.store_timestamp)
    m = decode_message(store.select_one_message_by_offset(0))
    assert m.born_host == ("::1", 4000) and m.store_host == ("fe80::1", 10911)
    assert r.msg_id == create_offset_msg_id(("fe80::1", 10911), 0)
    assert len(r.msg_id) == 2 * (16 + 4 + 8)


def test_segment_files_named_by_start_offset(store_factory, tmp_path):
    store = store_factory()
    body = b"x" * 1000
    for _ in range(200):
        assert store.put_message(make_msg(body=body)).is_ok
    names = sorted(p.name for p in (tmp_path / "store" / "commitlog").iterdir())
    size = 64 * 1024
    assert names[:3] == [file_name(0), file_name(size), file_name(2 * size)]
    assert all(len(n) == 20 for n in names)
    assert all((tmp_path / "store" / "commitlog" / n).stat().st_size == size for n in names)


def test_roll_over_writes_the_blank_end_of_file_record(store_factory, tmp_path):
    store = store_factory(small_config(tmp_path / "store", mapped_file_size_commit_log=4096))
    results = []
    while not results or results[-1].commit_log_offset < 4096:
        results.append(store.put_message(make_msg(body=b"y" * 700)))
    first_in_second = results[-1]
    last_in_first = results[-2]
    assert first_in_second.commit_log_offset == 4096  # the record went whole to the next file
    end_of_last = last_in_first.commit_log_offset + last_in_first.append_result.wrote_bytes
    assert end_of_last + first_in_second.append_result.wrote_bytes + 8 > 4096
    seg0 = (tmp_path / "store" / "commitlog" / file_name(0)).read_bytes()
    remaining, magic = struct.unpack_from(">ii", seg0, end_of_last)
    assert (remaining, magic) == (4096 - end_of_last, BLANK_MAGIC_CODE)
    assert seg0[end_of_last + 8:] == bytes(4096 - end_of_last - 8)  # the rest is left as it was
    r = store.get_message("g", "TopicTest", 0, 0, 64)
    assert [m.commit_log_offset for m in decode_messages(r.body)] == [x.commit_log_offset for x in results]


def test_record_that_cannot_fit_any_file_is_illegal(store_factory, tmp_path):
    store = store_factory(small_config(tmp_path / "store", mapped_file_size_commit_log=4096))
    assert store.put_message(make_msg(body=b"z" * 4000)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_phy_offset == 0


def test_put_refusals(store_factory, tmp_path):
    store = store_factory(small_config(tmp_path / "store", max_message_size=1000))
    assert store.put_message(make_msg(body=b"a" * 1001)).status is PutMessageStatus.MESSAGE_ILLEGAL
    big_props = {"p": "v" * 33000}
    assert store.put_message(make_msg(props=big_props)).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_message(make_msg(topic="T" * 128)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(make_msg(topic="../escape")).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(make_msg(topic="")).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(make_msg(body=None)).status is PutMessageStatus.MESSAGE_ILLEGAL
    bad_delay = make_msg(topic="SCHEDULE_TOPIC_XXXX", props={"DELAY": "soon"})
    assert store.put_message(bad_delay).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_phy_offset == 0
    assert store.put_message(make_msg(topic="SCHEDULE_TOPIC_XXXX", props={"DELAY": "2"})).is_ok
    store.shutdown()
    assert store.put_message(make_msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.get_message("g", "TopicTest", 0, 0, 1) is None


def test_retry_topics_up_to_255_bytes_use_the_v2_record(store):
    topic = "%RETRY%" + "g" * 200
    r = store.put_message(make_msg(topic=topic))
    assert r.is_ok
    m = decode_message(store.select_one_message_by_offset(0))
    assert m.topic == topic and m.magic == MAGIC_CODE_V2
    assert store.get_max_offset_in_queue(topic, 0) == 1


def test_prepared_and_rollback_records_stay_out_of_consume_queues(store):
    prepared = make_msg(sys_flag=0x4, queue_id=0)
    r = store.put_message(prepared)
    assert r.is_ok and r.queue_offset == 0
    assert store.get_max_offset_in_queue("TopicTest", 0) == 0
    committed = make_msg(sys_flag=0x8, queue_id=0)
    assert store.put_message(committed).queue_offset == 0
    rolled_back = make_msg(sys_flag=0xC, queue_id=0)
    assert store.put_message(rolled_back).is_ok
    assert store.put_message(make_msg(queue_id=0)).queue_offset == 1
    assert store.get_max_offset_in_queue("TopicTest", 0) == 2
    assert decode_message(store.select_one_message_by_offset(r.commit_log_offset)).queue_offset == 0


def test_batch_records_carry_the_batch_properties(store):
    from rmqwire.codec.message import Message, encode_batch

    inner = [
        Message("TopicTest", f"b{i}".encode(), properties={"TAGS": f"T{i}", "UNIQ_KEY": f"inner{i}", "x": str(i)})
        for i in range(5)
    ]
    inner[4].properties = {}  # an inner message without properties gets just the batch's
    batch = make_msg(body=encode_batch(inner), tags=None, queue_id=2,
                     props={"UNIQ_KEY": "BATCH", "CLUSTER": "c1", "WAIT": "true"})
    r = store.put_messages(batch)
    assert r.is_ok and r.append_result.msg_num == 5
    assert r.queue_offset == 0 and len(r.append_result.msg_ids) == 5
    assert r.append_result.msg_id == ",".join(r.append_result.msg_ids)
    got = store.get_message("g", "TopicTest", 2, 0, 32)
    msgs = decode_messages(got.body, check_crc=True)
    assert [m.queue_offset for m in msgs] == [0, 1, 2, 3, 4]
    assert [m.commit_log_offset for m in msgs] == list(r.append_result.record_offsets)
    assert len({m.store_timestamp for m in msgs}) == 1
    for i, m in enumerate(msgs[:4]):
        assert m.body == f"b{i}".encode()
        assert m.properties == {"TAGS": f"T{i}", "UNIQ_KEY": "BATCH", "x": str(i), "CLUSTER": "c1", "WAIT": "true"}
    assert msgs[4].properties == {"UNIQ_KEY": "BATCH", "CLUSTER": "c1", "WAIT": "true"}
    raw = store.select_one_message_by_offset(msgs[0].commit_log_offset)
    assert b"UNIQ_KEY\x01inner0\x02" in raw and raw.endswith(b"UNIQ_KEY\x01BATCH\x02CLUSTER\x01c1\x02WAIT\x01true\x02")
    # the tags code comes from each record's TAGS
    from rmqwire.codec.java import java_string_hash

    cq = store.find_consume_queue("TopicTest", 2)
    assert [cq.get(i).tags_code for i in range(5)] == [java_string_hash(f"T{i}") for i in range(4)] + [0]


def test_batch_refusals(store):
    from rmqwire.codec.message import Message, encode_batch

    body = encode_batch([Message("TopicTest", b"x")])
    assert store.put_messages(make_msg(body=body, sys_flag=0x4)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages(make_msg(body=body, props={"DELAY": "3"})).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages(make_msg(body=body[:-1])).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages(make_msg(body=b"")).status is PutMessageStatus.MESSAGE_ILLEGAL


# ---- hypothesis: the appended bytes are the schema's bytes ---------------------------------------

_hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535)),
)
_prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12)
_messages = st.builds(
    dict,
    topic=st.from_regex(r"[A-Za-z0-9_%|-]{1,127}", fullmatch=True),
    body=st.binary(max_size=300),
    flag=st.integers(-(2**31), 2**31 - 1),
    properties=st.dictionaries(_prop_text, _prop_text, max_size=5),
    queue_id=st.integers(0, 7),
    born_timestamp=st.integers(0, 2**62),
    born_host=_hosts,
    store_host=_hosts,
    reconsume_times=st.integers(0, 100),
    sys_flag=st.sampled_from([0, 0x8, 0x1 | 0x8]),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.lists(_messages, min_size=1, max_size=6))
def test_stored_records_equal_the_schema_encoding(store_factory, tmp_path_factory, fields):
    store = store_factory(small_config(tmp_path_factory.mktemp("h") / "store"))
    puts = []
    for f in fields:
        msg = MessageExt(**f)
        r = store.put_message(msg)
        assert r.is_ok, r
        puts.append((r, f))
    for r, f in puts:
        raw = store.select_one_message_by_offset(r.commit_log_offset)
        sys_flag = f["sys_flag"]
        if ":" in f["born_host"][0]:
            sys_flag |= MessageSysFlag.BORNHOST_V6
        if ":" in f["store_host"][0]:
            sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6
        expected = MessageExt(
            **{**f, "sys_flag": sys_flag},
            queue_offset=r.queue_offset,
            commit_log_offset=r.commit_log_offset,
            store_timestamp=r.store_timestamp,
            body_crc=body_crc32(f["body"]),
        )
        assert raw == schema_encode_message(expected)
        (decoded,) = schema_decode_messages(raw)
        req = check_message_and_return_size(raw, 0, len(raw), check_crc=True, delay_levels=DELAYS)
        assert req.success and req.msg_size == len(raw)
        assert (req.topic, req.queue_id, req.commit_log_offset, req.consume_queue_offset) == (
            decoded.topic, decoded.queue_id, decoded.commit_log_offset, decoded.queue_offset)
        assert req.store_timestamp == decoded.store_timestamp and req.sys_flag == decoded.sys_flag
        assert req.tags_code == tags_code_of(decoded.topic, decoded.properties, decoded.store_timestamp, DELAYS)
        assert (req.properties or {}) == decoded.properties
    store.shutdown()


@given(data=st.binary(min_size=0, max_size=200), cut=st.integers(0, 400))
def test_record_check_never_raises_on_garbage(data, cut):
    rec = schema_encode_message(dataclasses.replace(make_msg(body=b"payload"), body_crc=body_crc32(b"payload")))
    blob = rec[: cut % (len(rec) + 1)] + data
    for b in (blob, data):
        req = check_message_and_return_size(b, 0, len(b), check_crc=True, delay_levels=DELAYS)
        assert req.msg_size <= len(b)
        if req.success and req.msg_size > 0:  # the CRC covers the body only, as in Java
            assert b[: req.msg_size - 30] == rec[: req.msg_size - 30] or b is data


def test_record_check_outcomes():
    rec = schema_encode_message(dataclasses.replace(make_msg(body=b"abc"), body_crc=body_crc32(b"abc")))
    ok = check_message_and_return_size(rec + bytes(16), 0, len(rec) + 16, check_crc=True, delay_levels=DELAYS)
    assert ok.success and ok.msg_size == len(rec)
    blank = struct.pack(">ii", 100, BLANK_MAGIC_CODE)
    assert check_message_and_return_size(blank, 0, 100, check_crc=True, delay_levels=DELAYS).msg_size == 0
    zeros = bytes(64)
    r = check_message_and_return_size(zeros, 0, 64, check_crc=True, delay_levels=DELAYS)
    assert (r.msg_size, r.success) == (-1, False)
    bad_crc = bytearray(rec)
    bad_crc[-30] ^= 0xFF if len(rec) > 30 else 0
    body_at = rec.index(b"abc")
    bad_crc = bytearray(rec)
    bad_crc[body_at] ^= 0x01
    r = check_message_and_return_size(bytes(bad_crc), 0, len(rec), check_crc=True, delay_levels=DELAYS)
    assert (r.msg_size, r.success) == (-1, False)
    r = check_message_and_return_size(bytes(bad_crc), 0, len(rec), check_crc=False, delay_levels=DELAYS)
    assert r.success
    short = rec[:-5]
    r = check_message_and_return_size(short, 0, len(short), check_crc=True, delay_levels=DELAYS)
    assert not r.success


def test_schedule_topic_tags_code_is_the_delivery_time():
    props = {"TAGS": "A", "DELAY": "3"}
    assert tags_code_of("SCHEDULE_TOPIC_XXXX", props, 1000, DELAYS) == 1000 + 10_000
    assert tags_code_of("SCHEDULE_TOPIC_XXXX", {"DELAY": "99"}, 1000, DELAYS) == 1000 + 2 * 3_600_000
    assert tags_code_of("Other", props, 1000, DELAYS) != 11_000
    with pytest.raises(ValueError):
        tags_code_of("SCHEDULE_TOPIC_XXXX", {"DELAY": "x"}, 1000, DELAYS)


def test_batch_inner_properties_without_a_final_separator_get_one(store):
    # A batch entry whose properties string does not end with \x02 (Java's encoder tolerates it).
    props = b"a\x01b"
    body = b"inner"
    entry = struct.pack(">iiiii", 20 + len(body) + 2 + len(props), 0, 0, 7, len(body)) + body
    entry += struct.pack(">h", len(props)) + props
    r = store.put_messages(make_msg(body=entry, tags=None, props={"UNIQ_KEY": "B1"}))
    assert r.is_ok
    raw = store.select_one_message_by_offset(r.commit_log_offset)
    assert raw.endswith(b"a\x01b\x02UNIQ_KEY\x01B1\x02")
    m = decode_message(raw, check_crc=True)
    assert (m.flag, m.body, m.properties) == (7, b"inner", {"a": "b", "UNIQ_KEY": "B1"})


_keys = st.text(st.characters(min_codepoint=0x61, max_codepoint=0x7A), min_size=1, max_size=6)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    inner=st.lists(st.tuples(st.binary(max_size=100), st.integers(-(2**31), 2**31 - 1),
                             st.dictionaries(_keys.map(lambda k: "i" + k), _prop_text, max_size=3)),
                   min_size=1, max_size=5),
    batch_props=st.dictionaries(_keys.map(lambda k: "b" + k), _prop_text, max_size=3),
    born=_hosts,
    store_host=_hosts,
)
def test_batch_records_equal_the_schema_encoding(store_factory, tmp_path_factory, inner, batch_props, born, store_host):
    from rmqwire.codec.message import Message, encode_batch

    store = store_factory(small_config(tmp_path_factory.mktemp("b") / "store"))
    batch = MessageExt(topic="BatchTopic", body=encode_batch([Message("BatchTopic", b, f, p) for b, f, p in inner]),
                       properties=batch_props, queue_id=3, born_host=born, store_host=store_host,
                       born_timestamp=123, reconsume_times=2)
    r = store.put_messages(batch)
    assert r.is_ok, r
    for i, ((b, f, p), off) in enumerate(zip(inner, r.append_result.record_offsets, strict=True)):
        expected = MessageExt(
            topic="BatchTopic", body=b, flag=f, properties={**p, **batch_props}, queue_id=3,
            queue_offset=r.queue_offset + i, commit_log_offset=off, sys_flag=batch.sys_flag,
            born_timestamp=123, born_host=born, store_timestamp=r.store_timestamp, store_host=store_host,
            reconsume_times=2, body_crc=body_crc32(b),
        )
        assert store.select_one_message_by_offset(off) == schema_encode_message(expected)
    store.shutdown()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    inner=st.lists(st.fixed_dictionaries({}, optional={"TAGS": _prop_text, "KEYS": _prop_text,
                                                      "UNIQ_KEY": _prop_text, "ia": _prop_text}),
                   min_size=1, max_size=6),
    batch_props=st.fixed_dictionaries({}, optional={"UNIQ_KEY": _prop_text, "KEYS": _prop_text, "WAIT": _prop_text}),
)
def test_batch_dispatch_equals_the_single_message_path(store_factory, tmp_path_factory, inner, batch_props):
    """Tags code, keys and uniq key of each batch record, as dispatch sees them, are those of the
    record decoded by the schema of record (Construct) and run through the general rules."""
    from rmqwire.codec.message import Message, encode_batch

    store = store_factory(small_config(tmp_path_factory.mktemp("d") / "store"))
    seen = []
    store.add_dispatcher(seen.append)
    batch = MessageExt(topic="BatchTopic", body=encode_batch([Message("BatchTopic", b"b", 0, p) for p in inner]),
                       properties=batch_props, queue_id=1, born_host=BORN_HOST, store_host=STORE_HOST)
    r = store.put_messages(batch)
    assert r.is_ok, r
    assert len(seen) == len(inner)
    for req in seen:
        (stored,) = schema_decode_messages(store.select_one_message_by_offset(req.commit_log_offset))
        props = stored.properties
        assert req.tags_code == tags_code_of("BatchTopic", props, req.store_timestamp, {})
        assert req.keys == props.get("KEYS", "")
        assert req.uniq_key == props.get("UNIQ_KEY")
    store.shutdown()
