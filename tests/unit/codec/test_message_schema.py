"""Hypothesis: the hand-written message codecs agree with the Construct schemas, and round-trip."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rmqwire.codec.message import (
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    CompressionType,
    Message,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    _encode_batch_entries,
    _encode_properties_pairs,
    compress,
    compression_type_of,
    decode_batch,
    decode_messages,
    decode_properties,
    decompress,
    encode_batch,
    encode_batch_alike,
    encode_batch_run,
    encode_message,
    encode_properties,
    schema_decode_batch,
    schema_decode_messages,
    schema_encode_batch,
    schema_encode_message,
    set_compression,
)
from rmqwire.errors import CodecError, MessageDecodeError

UNIQ = PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
HEAVY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIGHT = settings(max_examples=300, deadline=None)

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
prop_key = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), min_size=1, max_size=12
)
prop_value = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x02"), min_size=1, max_size=24
)
properties = st.dictionaries(prop_key, prop_value, max_size=6)
ipv4 = st.binary(min_size=4, max_size=4).map(lambda b: socket.inet_ntop(socket.AF_INET, b))
ipv6 = st.binary(min_size=16, max_size=16).map(lambda b: socket.inet_ntop(socket.AF_INET6, b))
port = st.integers(0, 65535)


def batch_messages(topic: str, max_body: int):
    return st.builds(
        Message, topic=st.just(topic), body=st.binary(max_size=max_body), flag=int32,
        properties=properties,
    )


@st.composite
def message_exts(draw, *, body=st.binary(max_size=64)):
    born_v6 = draw(st.booleans())
    store_v6 = draw(st.booleans())
    sys_flag = draw(int32) & ~0x30
    sys_flag |= (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    magic = draw(st.sampled_from([None, MAGIC_CODE_V1, MAGIC_CODE_V2]))
    topic = draw(st.one_of(text, st.text(min_size=120, max_size=140, alphabet="abcXYZ%_-")))
    if magic == MAGIC_CODE_V1:
        assume(len(topic.encode()) <= 127)
    return MessageExt(
        topic=topic,
        body=draw(body),
        flag=draw(int32),
        properties=draw(properties),
        queue_id=draw(int32),
        queue_offset=draw(int64),
        sys_flag=sys_flag,
        born_timestamp=draw(int64),
        born_host=(draw(ipv6 if born_v6 else ipv4), draw(port)),
        store_timestamp=draw(int64),
        store_host=(draw(ipv6 if store_v6 else ipv4), draw(port)),
        commit_log_offset=draw(int64),
        body_crc=draw(int32),
        reconsume_times=draw(int32),
        prepared_transaction_offset=draw(int64),
        magic=magic,
    )


def _as_decoded(m: MessageExt, data: bytes) -> MessageExt:
    magic = m.magic
    if magic is None:
        magic = MAGIC_CODE_V2 if len(m.topic.encode()) > 127 else MAGIC_CODE_V1
    return MessageExt(**{**_fields(m), "store_size": len(data), "magic": magic})


def _fields(m) -> dict:
    return {f: getattr(m, f) for f in m.__dataclass_fields__}


@HEAVY
@given(st.lists(message_exts(), min_size=1, max_size=3))
def test_stored_message_fast_equals_schema(msgs):
    fast = b"".join(encode_message(m) for m in msgs)
    schema = b"".join(schema_encode_message(m) for m in msgs)
    assert fast == schema
    expected = []
    pos = 0
    for m in msgs:
        size = int.from_bytes(fast[pos : pos + 4], "big")
        expected.append(_as_decoded(m, fast[pos : pos + size]))
        pos += size
    assert decode_messages(fast, decompress=False) == expected
    assert schema_decode_messages(fast) == expected


@HEAVY
@given(st.lists(message_exts(), min_size=1, max_size=3), properties, st.sampled_from([None, "TAGS", "k"]))
def test_decode_with_puts_equals_schema_then_put_property(msgs, puts, own_key):
    """``put_properties`` (fast and checked records alike) give the map, key order included, of the
    schema's decode followed by a ``put_property`` of each; a put wins over the record's own pair."""
    if own_key is not None:
        puts = {**puts, own_key: "put"}
        for m in msgs:
            m.properties = {own_key: "own", **m.properties}
    data = b"".join(encode_message(m) for m in msgs)
    expected = schema_decode_messages(data)
    for m in expected:
        for k, v in puts.items():
            m.put_property(k, v)
    got = decode_messages(data, decompress=False, put_properties=puts)
    assert got == expected
    assert [list(m.properties.items()) for m in got] == [list(m.properties.items()) for m in expected]
    assert b"".join(map(encode_message, got)) == b"".join(map(encode_message, expected))
    # before the lazy parse, reads of a put key see the put
    for m in decode_messages(data, decompress=False, put_properties=puts):
        for k, v in puts.items():
            assert m.get_property(k) == v


@HEAVY
@given(
    message_exts(body=st.binary(max_size=3000)),
    st.sampled_from(list(CompressionType)),
    st.integers(1, 9),
)
def test_compressed_records_round_trip(m, ctype, level):
    raw = m.body
    m.sys_flag = set_compression(m.sys_flag, ctype)
    m.body = compress(raw, ctype, level)
    data = encode_message(m)
    [d] = decode_messages(data)
    if m.body:
        assert d.body == raw
        assert d.sys_flag == m.sys_flag & ~MessageSysFlag.COMPRESSED
    [stored] = decode_messages(data, decompress=False)
    assert stored.body == m.body and stored.sys_flag == m.sys_flag


@HEAVY
@given(
    st.lists(message_exts(body=st.binary(max_size=400)), min_size=1, max_size=4),
    st.lists(st.sampled_from([None, *CompressionType]), min_size=4, max_size=4),
    properties,
    st.one_of(st.none(), text),
    st.one_of(st.none(), int32),
)
def test_pull_decode_equals_schema_then_java_steps(msgs, ctypes, puts, broker_name, queue_id):
    """What the consumer asks of ``decode_messages`` (inflate, puts, its queue's broker name and id)
    equals the Construct schema's decode followed by Java's steps one by one: inflate a compressed
    body and clear COMPRESSED, put each property, set brokerName and queueId. V1/V2, IPv4/IPv6
    hosts, empty and compressed bodies, fast and checked records mixed in one body."""
    for m, ctype in zip(msgs, ctypes):
        m.sys_flag &= ~(MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_TYPE_MASK)
        if ctype is not None:
            m.sys_flag = set_compression(m.sys_flag, ctype)
            m.body = compress(m.body, ctype)
    data = b"".join(encode_message(m) for m in msgs)
    expected = schema_decode_messages(data)
    for m in expected:
        if m.sys_flag & MessageSysFlag.COMPRESSED and m.body:
            m.body = decompress(m.body, compression_type_of(m.sys_flag))
            m.sys_flag &= ~MessageSysFlag.COMPRESSED
        for k, v in puts.items():
            m.put_property(k, v)
        m.broker_name = broker_name
        if queue_id is not None:
            m.queue_id = queue_id
    got = decode_messages(data, put_properties=puts, broker_name=broker_name, queue_id=queue_id)
    assert got == expected
    assert [m.broker_name for m in got] == [broker_name] * len(msgs)
    assert [list(m.properties.items()) for m in got] == [list(m.properties.items()) for m in expected]
    # the stored form is untouched without inflating
    stored = decode_messages(data, decompress=False, broker_name=broker_name)
    want = schema_decode_messages(data)
    assert [(m.body, m.sys_flag) for m in stored] == [(m.body, m.sys_flag) for m in want]


@LIGHT
@given(st.lists(batch_messages("T", 50), max_size=4))
def test_batch_fast_equals_schema_and_round_trips(msgs):
    fast = encode_batch(msgs)
    assert fast == schema_encode_batch(msgs)
    assert decode_batch(fast, topic="T") == msgs
    assert schema_decode_batch(fast, topic="T") == msgs


def assert_same_result_or_error(fast: Callable[[], Any], reference: Callable[[], Any]) -> None:
    """``fast`` returns what ``reference`` returns, or raises a CodecError with the same message."""
    try:
        expected = reference()
    except CodecError as e:
        with pytest.raises(CodecError) as info:
            fast()
        assert str(info.value) == str(e)
    else:
        assert fast() == expected


# any map, separators, empty keys, None and non-str values included
odd_text = st.text(st.sampled_from("ab\x01\x02\u00e9"), max_size=4)
odd_properties = st.dictionaries(
    st.one_of(odd_text, st.integers(0, 3)), st.one_of(odd_text, st.none(), st.integers(0, 3)), max_size=4
)


@LIGHT
@given(st.one_of(properties, odd_properties))
def test_properties_joined_writer_equals_pair_by_pair(props):
    # encode_properties joins the usual map at C speed: the same text, or the same error
    assert_same_result_or_error(lambda: encode_properties(props), lambda: _encode_properties_pairs(props))


@LIGHT
@given(st.lists(st.builds(Message, topic=st.just("T"), body=st.binary(max_size=8), flag=int32,
                          properties=st.one_of(properties, odd_properties)), max_size=4))
def test_batch_encoder_equals_schema_for_any_properties(msgs):
    # encode_batch writes encode_properties' joined form inline: for any map (separators, empty
    # keys, None and non-str values) the same bytes as the Construct schema, or the same error
    assert_same_result_or_error(lambda: encode_batch(msgs), lambda: schema_encode_batch(msgs))


ascii_properties = st.dictionaries(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=6),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=6), min_size=1, max_size=4)


@LIGHT
@given(st.lists(st.builds(Message, topic=st.just("T"), body=st.binary(max_size=8), flag=int32,
                          properties=ascii_properties), max_size=5))
def test_usual_batch_is_encoded_whole_as_the_schema(msgs):
    # the usual batch (ASCII str maps, no separators, bytes bodies) is checked once for all its
    # messages, never entry by entry, and gives the schema's bytes
    import rmqwire.codec.message as codec_message

    def refused(_: Any) -> bytes:
        raise AssertionError("the usual batch went entry by entry")

    saved = codec_message._encode_batch_entries
    codec_message._encode_batch_entries = refused
    try:
        fast = encode_batch(msgs)
        whole = encode_batch(iter(msgs))  # any iterable
    finally:
        codec_message._encode_batch_entries = saved
    assert fast == whole == schema_encode_batch(msgs)


@LIGHT
@given(st.lists(st.builds(Message, topic=st.just("T"), body=st.binary(max_size=8), flag=int32,
                          properties=ascii_properties), max_size=4),
       st.integers(0, 4),
       st.builds(Message, topic=st.just("T"),
                 body=st.one_of(st.binary(max_size=8), st.binary(max_size=8).map(bytearray)),
                 flag=st.one_of(int32, st.integers(2**31, 2**33), st.integers(-(2**33), -(2**31) - 1)),
                 properties=st.one_of(properties, odd_properties, st.just({}))))
def test_batch_with_one_odd_message_equals_schema(msgs, at, odd):
    # one message out of the usual case anywhere in a batch (separators, an empty key or map,
    # None or non-str values, non-ASCII, a bytearray body, a flag out of range, properties over
    # the 2-byte length): the schema's bytes, or the entry-by-entry encoder's error (whose words
    # differ from the schema's for a field out of range)
    msgs.insert(min(at, len(msgs)), odd)
    assert_same_result_or_error(lambda: encode_batch(msgs), lambda: _encode_batch_entries(msgs))
    try:
        expected = schema_encode_batch(msgs)
    except CodecError:
        with pytest.raises(CodecError):
            encode_batch(msgs)
    else:
        assert encode_batch(msgs) == expected
    msgs.append(Message(topic="T", body=b"x", properties={"k": "v" * 40000}))
    assert_same_result_or_error(lambda: encode_batch(msgs), lambda: _encode_batch_entries(msgs))
    with pytest.raises(CodecError):
        schema_encode_batch(msgs)


@LIGHT
@given(properties)
def test_properties_round_trip(props):
    s = encode_properties(props)
    assert decode_properties(s) == props
    assert list(decode_properties(s)) == list(props)
    assert decode_properties(s.rstrip("\x02")) == props  # the final separator is optional


@LIGHT
@given(st.text(st.sampled_from("ab\x01\x02"), max_size=30))
def test_decode_properties_matches_java_algorithm(s):
    # a direct transcription of Java's index-walking loop, as an oracle
    expected = {}
    index, n = 0, len(s)
    while index < n:
        new_index = s.find("\x02", index)
        if new_index < 0:
            new_index = n
        if new_index - index >= 3:
            kv = s.find("\x01", index)
            if index < kv < new_index - 1:
                expected[s[index:kv]] = s[kv + 1 : new_index]
        index = new_index + 1
    assert decode_properties(s) == expected


def _same_outcome(fast_fn, schema_fn, data):
    try:
        fast = fast_fn(data)
    except MessageDecodeError:
        fast = MessageDecodeError
    try:
        schema = schema_fn(data)
    except MessageDecodeError:
        schema = MessageDecodeError
    assert fast == schema


@HEAVY
@given(st.binary(max_size=300))
def test_random_bytes_fast_and_schema_agree(data):
    _same_outcome(lambda d: decode_messages(d, decompress=False), schema_decode_messages, data)
    _same_outcome(decode_batch, schema_decode_batch, data)
    try:
        decode_messages(data)
    except CodecError:
        pass


@HEAVY
@given(message_exts(), st.data())
def test_mutated_records_fast_and_schema_agree(m, data):
    rec = bytearray(encode_message(m))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(rec) - 1))
        rec[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(rec)))
    for mutated in (bytes(rec), bytes(rec[:cut])):
        _same_outcome(lambda d: decode_messages(d, decompress=False), schema_decode_messages, mutated)
        try:
            decode_messages(mutated)  # decompression of a garbage body must fail cleanly too
        except CodecError:
            pass


@HEAVY
@given(st.lists(batch_messages("", 20), min_size=1, max_size=3), st.data())
def test_mutated_batches_fast_and_schema_agree(msgs, data):
    body = bytearray(encode_batch(msgs))
    i = data.draw(st.integers(0, len(body) - 1))
    body[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    for mutated in (bytes(body), bytes(body[:cut])):
        _same_outcome(decode_batch, schema_decode_batch, mutated)


def _eager(data: bytes) -> list[MessageExt]:
    """The records through the Construct schema, properties parsed at once."""
    return schema_decode_messages(data)


@HEAVY
@given(
    st.lists(message_exts(), min_size=1, max_size=3),
    st.sampled_from([bytes, bytearray, memoryview]),
    st.data(),
)
def test_lazy_properties_equal_the_schema_after_the_same_puts(msgs, kind, data_):
    # decode_messages leaves the properties string unparsed: puts and reads of put keys before
    # the parse, then the map, must equal the schema's map with the same puts applied, in order
    # (puts of the record's own keys included).
    data = b"".join(encode_message(m) for m in msgs)
    lazy = decode_messages(kind(data), decompress=False)
    eager = _eager(data)
    for got, want in zip(lazy, eager, strict=True):
        own = sorted(want.properties)
        keys = st.one_of(prop_key, st.sampled_from(own)) if own else prop_key
        for k, v in data_.draw(st.lists(st.tuples(keys, prop_value), max_size=4)):
            got.put_property(k, v)
            want.properties[k] = v
            assert got.get_property(k) == v
        assert list(got.properties.items()) == list(want.properties.items())
        assert got == want


@LIGHT
@given(message_exts(), st.sampled_from(["get", "pickle", "repr", "tags", "set", "clear"]))
def test_lazy_properties_parse_on_any_read(m, how):
    import pickle

    [want] = _eager(encode_message(m))
    [got] = decode_messages(encode_message(m), decompress=False)
    if how == "get":
        assert all(got.get_property(k) == v for k, v in want.properties.items())
    elif how == "pickle":
        got = pickle.loads(pickle.dumps(got))
    elif how == "repr":
        assert repr(got) == repr(want)
    elif how == "tags":
        assert got.tags == want.tags and got.msg_id == want.msg_id and got.keys == want.keys
    elif how == "set":
        got.properties = {"a": "1"}
        want.properties = {"a": "1"}
    else:
        got.clear_property("UNIQ_KEY")
        want.clear_property("UNIQ_KEY")
    assert got == want and list(got.properties.items()) == list(want.properties.items())


uniq_ids = st.text(st.sampled_from("0123456789ABCDEFaz\x01é"), max_size=32)


@LIGHT
@given(st.one_of(properties, odd_properties, st.just({})),
       st.lists(st.tuples(st.binary(max_size=8), st.one_of(int32, int32, st.integers(2**31, 2**32)),
                          uniq_ids), max_size=5),
       st.sampled_from(["ok", "odd id", "odd body", "one id short"]))
def test_batch_alike_equals_the_schema_of_the_tagged_maps(base, entries, odd):
    # encode_batch_alike writes each entry from the shared map's text and its id: the schema's
    # bytes of the maps a batch's tagging leaves (the map, then UNIQ_KEY), or None for what it
    # does not take (which encode_batch then writes or refuses)
    base.pop(UNIQ, None)
    try:
        text = encode_properties(base)
    except CodecError:
        return  # a map the producer does not take this way
    msgs = [Message(topic="T", body=body, flag=flag, properties={**base, UNIQ: uid})
            for body, flag, uid in entries]
    ids = [uid for _, _, uid in entries]
    if odd == "odd id" and msgs:
        ids[-1] = msgs[-1].properties[UNIQ] = ids[-1] + "\x02"
    elif odd == "odd body" and msgs:
        msgs[0].body = bytearray(msgs[0].body)
    elif odd == "one id short" and msgs:
        ids.pop()
    alike = encode_batch_alike(msgs, text, ids)
    usual = (odd == "ok" or not msgs) and all(uid.isascii() for uid in ids)
    if usual and all(-(2**31) <= m.flag < 2**31 for m in msgs):
        assert alike is not None  # the usual batch is taken
    if alike is not None:
        assert usual
        assert alike == schema_encode_batch(msgs) == encode_batch(msgs)


@LIGHT
@given(st.one_of(properties, odd_properties, st.just({})), st.integers(0, 6), st.binary(min_size=1, max_size=8),
       st.one_of(int32, int32, st.integers(2**31, 2**32)),
       st.text(st.sampled_from("0123456789ABCDEF\x01\x02é"), max_size=30),
       st.integers(-2, 258))
def test_batch_run_equals_the_schema_of_the_tagged_maps(base, n, body, flag, id_text, low):
    # encode_batch_run writes n entries of one body size and flag whose ids are id_text and the
    # hex of low, low + 1, ... from one join: the schema's bytes of the maps a batch's tagging
    # leaves, or None for what it does not take (encode_batch_alike then writes or refuses it)
    base.pop(UNIQ, None)
    try:
        text = encode_properties(base)
    except CodecError:
        return  # a map the producer does not take this way
    bodies = [bytes([i]) * len(body) for i in range(n)]  # one size, each its own bytes
    ids = [f"{id_text}{low + i:02X}" for i in range(n)]
    msgs = [Message(topic="T", body=b, flag=flag, properties={**base, UNIQ: uid})
            for b, uid in zip(bodies, ids)]
    run = encode_batch_run(bodies, flag, text, id_text, low)
    usual = (not n or (0 <= low <= 256 - n and id_text.isascii() and "\x02" not in id_text
                       and -(2**31) <= flag < 2**31))
    assert (run is not None) == usual  # the usual batch is taken, and only it
    if run is not None:
        assert run == schema_encode_batch(msgs) == encode_batch(msgs)
