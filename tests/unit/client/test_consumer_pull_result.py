"""PullAPIWrapper.process_pull_result: MIN/MAX_OFFSET, broker name, queue id and offset delta on
every message kept (plain and inner-batch records), as Java's ``processPullResult``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.client.consumer.pull import (
    PullAPIWrapper,
    PullResult,
    PullStatus,
    plain_records,
)
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.message import (
    Message,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    decode_messages,
    encode_batch,
    encode_message,
)
from rmqwire.model import MessageQueue

HOSTS = dict(born_host=("10.0.0.1", 4000), store_host=("10.0.0.2", 10911))


def _record(offset: int, props: dict[str, str], **kw) -> bytes:
    return encode_message(MessageExt(topic="T", body=b"b%d" % offset, queue_offset=offset,
                                     properties=props, **HOSTS, **kw))


def test_every_kept_message_gets_the_offsets_after_its_own_properties() -> None:
    inner = encode_batch([Message(topic="T", body=b"i0", properties={"TAGS": "a"}),
                          Message(topic="T", body=b"i1", properties={"TAGS": "b"})])
    batch_flag = int(MessageSysFlag.INNER_BATCH | MessageSysFlag.NEED_UNWRAP)
    bodies = {
        "plain": _record(7, {"TAGS": "a", "MAX_OFFSET": "own"}) + _record(8, {}) + _record(9, {"TAGS": "b"}),
        "inner": encode_message(MessageExt(topic="T", body=inner, queue_offset=7, sys_flag=batch_flag,
                                           properties={"WAIT": "true"}, **HOSTS)),
    }
    for kind, body in bodies.items():
        for tags in ([], ["a"]):
            result = PullResult(PullStatus.FOUND, 10, 3, 42, offset_delta=100, body=body)
            sd = SubscriptionData(topic="T", sub_string="||".join(tags) or "*", tags_set=tags,
                                  code_set=[hash(t) for t in tags])
            mq = MessageQueue("T", "broker-a", 5)
            msgs = PullAPIWrapper(None, "g").process_pull_result(mq, result, sd).messages
            assert result.body is None
            mn, mx = (PropertyKey.MIN_OFFSET, "3"), (PropertyKey.MAX_OFFSET, "42")
            # the record's own pairs first, then the puts (a key the record had keeps its place)
            want = {
                "plain": [[("TAGS", "a"), mx, mn], [mn, mx], [("TAGS", "b"), mn, mx]],
                "inner": [[("TAGS", "a"), ("WAIT", "true"), mn, mx], [("TAGS", "b"), ("WAIT", "true"), mn, mx]],
            }[kind]
            if tags:
                want = want[:1]
            assert [list(m.properties.items()) for m in msgs] == want, kind
            assert [(m.broker_name, m.queue_id, m.queue_offset) for m in msgs] == [
                ("broker-a", 5, o) for o in ([107] if tags else [107, 108] if kind == "inner" else [107, 108, 109])]


_KINDS = ("plain", "zlib", "born_v6", "store_v6", "inner")
# property values encode_message accepts (no separators, valid UTF-8)
_VALUES = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.binary(max_size=300),
                          st.dictionaries(st.sampled_from(["TAGS", "KEYS", "a"]), _VALUES)),
                max_size=6),
       st.integers(0, 1))
def test_plain_records_counts_what_the_decode_adds(records: list[tuple[str, bytes, dict[str, str]]],
                                                    magic_v2: int) -> None:
    """plain_records (read off the record heads for the early pull) against the decoded messages:
    the same count and body bytes for uncompressed IPv4 single-message records, None as soon as
    one record is anything else."""
    from rmqwire.codec.message import (
        MAGIC_CODE_V2,
        CompressionType,
        compress,
        set_compression,
    )

    body = b""
    for i, (kind, data, props) in enumerate(records):
        kw: dict[str, Any] = dict(HOSTS)
        flag, payload = 0, data
        if kind == "zlib":
            flag, payload = int(set_compression(0, CompressionType.ZLIB)), compress(data)
        elif kind == "born_v6":
            flag, kw["born_host"] = int(MessageSysFlag.BORNHOST_V6), ("::1", 4000)
        elif kind == "store_v6":
            flag, kw["store_host"] = int(MessageSysFlag.STOREHOSTADDRESS_V6), ("::2", 10911)
        elif kind == "inner":
            flag = int(MessageSysFlag.INNER_BATCH | MessageSysFlag.NEED_UNWRAP)
            payload = encode_batch([Message(topic="T", body=data or b"x")])
        body += encode_message(MessageExt(topic="T", body=payload, queue_offset=i, sys_flag=flag,
                                          properties=props, magic=MAGIC_CODE_V2 if magic_v2 else None,
                                          **kw))
    got = plain_records(body)
    if any(kind != "plain" for kind, _, _ in records):
        assert got is None
        return
    msgs = decode_messages(body)
    assert got == (len(msgs), sum(len(m.body or b"") for m in msgs))


def test_plain_records_refuses_a_truncated_body() -> None:
    whole = _record(1, {"TAGS": "a"}) + _record(2, {})
    assert plain_records(whole) == (2, 4)
    assert plain_records(whole[:-1]) is None and plain_records(whole[:50]) is None
