"""PullAPIWrapper.process_pull_result: MIN/MAX_OFFSET, broker name, queue id and offset delta on
every message kept (plain and inner-batch records), as Java's ``processPullResult``."""

from __future__ import annotations

from rmqwire.client.consumer.pull import PullAPIWrapper, PullResult, PullStatus
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.message import (
    Message,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
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
