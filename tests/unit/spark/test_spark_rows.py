"""Messages as Arrow rows (source) and rows as messages (sink), without Spark or a broker."""

from __future__ import annotations

import concurrent.futures
import datetime
import threading
from typing import Any

import pyarrow as pa
import pytest

from rmqwire.client.message import Message
from rmqwire.codec.java import java_string_hash
from rmqwire.codec.message import MessageExt
from rmqwire.errors import MQClientError, SystemBusyError
from rmqwire.model import MessageQueue
from rmqwire.spark import sink
from rmqwire.spark.options import WriteOptions
from rmqwire.spark.schema import ARROW_SCHEMA, record_batch
from rmqwire.spark.sink import by_hash, check_columns, to_message


def _ext(i: int) -> MessageExt:
    m = MessageExt(topic="T", body=f"b{i}".encode(), properties={
        "TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": f"U{i}", "MIN_OFFSET": "0", "p": "välue"})
    m.queue_id, m.queue_offset, m.broker_name = 1, i, "broker-a"
    m.born_timestamp, m.store_timestamp = 1_700_000_000_123, 1_700_000_000_456
    m.born_host, m.store_host, m.commit_log_offset = ("10.0.0.1", 5000), ("::1", 10911), 99
    return m


def test_record_batch_columns() -> None:
    b = record_batch([_ext(0), _ext(1)])
    assert b.schema == ARROW_SCHEMA and b.num_rows == 2
    row = b.to_pylist()[1]
    assert (row["msgId"], row["tags"], row["keys"], row["body"]) == ("U1", "A", "k1 k2", b"b1")
    assert row["properties"] == [("p", "välue")]
    assert row["bornHost"] == "10.0.0.1:5000" and row["storeHost"] == "[::1]:10911"
    assert row["storeTimestamp"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=datetime.timezone.utc)
    allprops = dict(record_batch([_ext(0)], system_properties=True).to_pylist()[0]["properties"])
    assert allprops["UNIQ_KEY"] == "U0" and "MIN_OFFSET" not in allprops
    assert record_batch([]).num_rows == 0 and isinstance(record_batch([]), pa.RecordBatch)


def test_row_to_message_and_routing() -> None:
    opts = WriteOptions.parse({"nameServer": "h"})
    msg, route = to_message({"topic": "T", "body": "x", "tags": "A", "keys": ["a", "b"],
                             "properties": {"p": "v"}, "brokerName": "b", "queueId": 2}, opts)
    assert (msg.topic, msg.body, msg.tags, msg.keys, msg.user_properties) == ("T", b"x", "A", "a b", {"p": "v"})
    assert route == {"queue": MessageQueue("T", "b", 2)}
    msg, route = to_message({"body": b"y", "topic": "T", "shardingKey": "order-7", "delayLevel": 3}, opts)
    assert msg.delay_level == 3 and route["arg"] == "order-7"
    mqs = [MessageQueue("T", "b", i) for i in range(4)]
    assert route["selector"](mqs, msg, "order-7") == mqs[abs(java_string_hash("order-7") % 4)]
    assert by_hash(mqs, None, "x") == by_hash(mqs, None, "x")
    msg, _ = to_message({"body": b"z", "topic": "T", "deliveryTimestamp": 1_800_000_000_000}, opts)
    assert msg.deliver_time_ms == 1_800_000_000_000
    forced = WriteOptions.parse({"nameServer": "h", "topic": "Forced"})
    assert to_message({"body": b"z", "topic": "T"}, forced)[0].topic == "Forced"
    with pytest.raises(ValueError, match="no topic"):
        to_message({"body": b"z"}, opts)


@pytest.mark.parametrize("cols, match", [(["topic"], "body"), (["body"], "topic"), (["body", "topic", "x"], "unknown"),
                                         (["body", "topic", "queueId"], "together")])
def test_sink_columns_are_checked(cols: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_columns(cols, WriteOptions.parse({"nameServer": "h"}))


class FakeProducer:
    """send_async answering from a script: an exception instance to fail with, else success."""

    def __init__(self, script: list[BaseException | None]) -> None:
        self.script, self.calls = script, 0

    def send_async(self, msg: Any, **route: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        outcome = self.script[self.calls] if self.calls < len(self.script) else None
        self.calls += 1
        threading.Thread(target=lambda: fut.set_exception(outcome) if outcome else fut.set_result("ok")).start()
        return fut


def test_task_sender_resends_busy_and_fails_on_other_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink, "BUSY_PAUSE", 0.01)
    busy = SystemBusyError("[TIMEOUT_CLEAN_QUEUE]broker busy")
    s = sink._TaskSender(FakeProducer([busy, None, busy]))  # type: ignore[arg-type]
    for i in range(3):
        s.check()
        s.send(Message("T", str(i)), {})
    s.flush()
    assert s.sent == 3 and s.producer.calls == 5  # type: ignore[attr-defined]
    bad = sink._TaskSender(FakeProducer([None, MQClientError("no route")]))  # type: ignore[arg-type]
    bad.send(Message("T", "a"), {})
    bad.send(Message("T", "b"), {})
    with pytest.raises(MQClientError, match="no route"):
        bad.flush()
