"""Store compatibility with the official 5.3.3 broker, both directions.

1. The official broker stores what the official Java producer sends; after it stops, rmqwire's store
   opens that directory and reads every message back (by commit-log offset and through the consume
   queues) with the same msgId, queue offset, body, tags, keys and properties, and keeps appending.
2. rmqwire's store writes messages (single and batch) plus ``config/topics.json``; the official
   broker starts on that directory (after a clean shutdown, and after a crash: its abnormal
   recovery) and an official Java consumer receives every message with the same ids, offsets,
   bodies and properties.
3. rmqwire recovers the directory of an official broker killed with SIGKILL.

The index files too: rmqwire's store answers key and unique-key queries from the official
broker's ``index/`` files (and keeps adding to them), and the official broker answers the official
mqadmin's queryMsgByKey / queryMsgByUniqueKey from the files rmqwire wrote.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path

import pytest

from rmqwire.codec.ids import (
    UniqueIdGenerator,
    create_offset_msg_id,
    parse_offset_msg_id,
)
from rmqwire.codec.message import Message, MessageExt, decode_messages, encode_batch
from rmqwire.server.store import (
    DefaultMessageStore,
    GetMessageStatus,
    MessageStoreConfig,
    StoreLoadError,
)
from tools.peers.java_peer import JavaPeer
from tools.peers.records import RESERVED_PROPERTY_NAMES
from tools.peers.topics import create_topic
from tools.reference.mqadmin import parse_query_msg_by_key, run_mqadmin_retrying

pytestmark = pytest.mark.conformance

# The reference launcher's segment sizes (tools/reference/cluster.py) and small index files; both
# sides must agree.
SIZES = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(30_000 * 20),
         "maxHashSlotNum": "1000", "maxIndexNum": "4000"}
NO_END = 2**62
USER_PROPS = {"color": "c{i}", "lang": "\u00e9t\u00e9-{i}"}
STORE_HOST = ("127.0.0.1", 10911)
BORN_HOST = ("127.0.0.1", 50123)


def _store_conf(root: Path) -> dict[str, str]:
    return {"storePathRootDir": str(root), "storePathCommitLog": str(root / "commitlog"), **SIZES}


def _open_store(root: Path) -> DefaultMessageStore:
    store = DefaultMessageStore(MessageStoreConfig.from_properties(_store_conf(root)))
    store.load()
    store.start()
    return store


def _user_props(props: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k not in RESERVED_PROPERTY_NAMES}


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _topics_json(topics: dict[str, int]) -> str:
    """config/topics.json as the broker's TopicConfigManager persists it (fastjson pretty format:
    tab indentation, sorted keys, no spaces after colons)."""
    table = {
        t: {
            "attributes": {},
            "order": False,
            "perm": 6,
            "readQueueNums": n,
            "topicFilterType": "SINGLE_TAG",
            "topicName": t,
            "topicSysFlag": 0,
            "writeQueueNums": n,
        }
        for t, n in topics.items()
    }
    doc = {"dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 0}, "topicConfigTable": table}
    return json.dumps(doc, indent="\t", sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _read_all(store: DefaultMessageStore, topic: str) -> dict[int, list[MessageExt]]:
    """Every message of every queue of ``topic`` through the consume queues, decoded with CRC check."""
    out = {}
    for qid in store.queue_ids(topic):
        msgs: list[MessageExt] = []
        offset = 0
        while True:
            res = store.get_message("compat", topic, qid, offset, 32)
            assert res is not None
            if res.status is not GetMessageStatus.FOUND:
                assert res.status is GetMessageStatus.OFFSET_OVERFLOW_ONE, res.status
                break
            msgs.extend(decode_messages(res.body, check_crc=True, decompress=False))
            offset = res.next_begin_offset
        out[qid] = msgs
    return out


# ------------------------------------------------------------------ official broker -> rmqwire


def test_rmqwire_reads_official_broker_store(reference_cluster_factory, tmp_path):
    root = tmp_path / "store"
    cluster = reference_cluster_factory(broker_conf=_store_conf(root))
    topic = f"compat_j2r_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.broker_addr, topic, queues=4, namesrv_addr=cluster.namesrv_addr)
    with JavaPeer(cluster.namesrv_addr, version=cluster.version) as peer:
        sent = peer.produce(topic, 30, tag="TagA", keys="key-{i} other-{i}", props=USER_PROPS)
        sent += peer.produce(topic, 12, mode="batch", tag="TagB", keys="b-{i}", props=USER_PROPS)
        sent += peer.produce(topic, 4, tag="TagC", body_size=20_000, compress=True)
    assert {r.status for r in sent} == {"SEND_OK"}
    # While the official broker runs, its lock (Java FileLock on byte 0) keeps rmqwire out.
    with pytest.raises(StoreLoadError, match="locked"):
        DefaultMessageStore(MessageStoreConfig.from_properties(_store_conf(root))).load()
    cluster.stop()  # SIGTERM: the broker flushes, dispatches and removes its abort file

    store = _open_store(root)
    try:
        assert store.recovery_report is not None and not store.recovery_report.abnormal
        assert not store.recovery_report.torn_tail
        by_offset = {}
        for s in sent:
            assert s.offset_msg_id is not None and s.queue is not None
            phys = parse_offset_msg_id(s.offset_msg_id).commit_log_offset
            m = store.look_message_by_offset(phys)
            assert m is not None, s
            by_offset[phys] = m
            assert m.offset_msg_id == s.offset_msg_id
            assert m.topic == topic
            assert m.queue_id == s.queue.queue_id
            assert m.queue_offset == s.queue_offset
            assert m.tags == s.tags and m.keys == s.keys
            assert _user_props(m.properties) == s.user_properties
            body = decode_messages(store.select_one_message_by_offset(phys), decompress=True)[0].body
            assert _sha(body) == s.body_sha256 and len(body) == s.body_size
            # 5.3.3 appends a batch's own properties (its UNIQ_KEY) to every inner record, so only
            # single sends keep the client's per-message id.
            if s.tags != "TagB":
                assert m.msg_id == s.msg_id
        # Through the consume queues: the same records, offsets 0..n-1 per queue, CRCs intact.
        queues = _read_all(store, topic)
        got = {m.commit_log_offset: m for msgs in queues.values() for m in msgs}
        assert set(got) == set(by_offset)
        for qid, msgs in queues.items():
            assert [m.queue_offset for m in msgs] == list(range(len(msgs)))
            assert store.get_max_offset_in_queue(topic, qid) == len(msgs)
            assert all(m.queue_id == qid for m in msgs)
        # The official broker's index files answer rmqwire's queries: every KEYS value, and the
        # unique key of single sends.
        assert [p.name for p in (root / "index").iterdir()] == [f.file_name for f in store.index_service.files]
        for phys, m in by_offset.items():
            for key in (m.keys or "").split():
                q = store.query_message(topic, key, 32, 0, NO_END)
                assert [x.commit_log_offset for x in decode_messages(q.body)] == [phys], key
            q = store.query_message(topic, m.msg_id, 32, 0, NO_END)
            assert phys in [x.commit_log_offset for x in decode_messages(q.body)]
        # rmqwire keeps appending after the official broker's last record, and indexes it.
        end = store.max_phy_offset
        before = store.get_max_offset_in_queue(topic, 0)
        r = store.put_message(
            MessageExt(topic=topic, body=b"after", queue_id=0, born_host=BORN_HOST, store_host=STORE_HOST,
                       properties={"KEYS": "after-key"})
        )
        assert r.is_ok and r.commit_log_offset == end and r.queue_offset == before
        q = store.query_message(topic, "after-key", 32, 0, NO_END)
        assert [x.commit_log_offset for x in decode_messages(q.body)] == [end]
        assert q.index_last_update_phyoffset == end
    finally:
        store.shutdown()
    store = _open_store(root)
    try:
        assert not store.recovery_report.abnormal
        assert store.get_max_offset_in_queue(topic, 0) == before + 1
        assert store.look_message_by_offset(end).body == b"after"
        q = store.query_message(topic, "after-key", 32, 0, NO_END)
        assert [x.commit_log_offset for x in decode_messages(q.body)] == [end]
    finally:
        store.shutdown()


def test_rmqwire_recovers_a_store_left_by_a_killed_official_broker(reference_cluster_factory, tmp_path):
    root = tmp_path / "store"
    cluster = reference_cluster_factory(broker_conf=_store_conf(root))
    topic = f"compat_kill_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.broker_addr, topic, queues=2, namesrv_addr=cluster.namesrv_addr)
    with JavaPeer(cluster.namesrv_addr, version=cluster.version) as peer:
        sent = peer.produce(topic, 40, tag="TagK", keys="k-{i}", props=USER_PROPS)
    assert {r.status for r in sent} == {"SEND_OK"}
    cluster.kill_broker(cluster.broker_name)  # SIGKILL: abort file and Java's checkpoint stay
    assert (root / "abort").exists()

    store = _open_store(root)
    try:
        assert store.recovery_report.abnormal and not store.recovery_report.torn_tail
        queues = _read_all(store, topic)
        got = {m.msg_id: m for msgs in queues.values() for m in msgs}
        assert set(got) == {s.msg_id for s in sent}
        for s in sent:
            m = got[s.msg_id]
            assert (m.queue_id, m.queue_offset) == (s.queue.queue_id, s.queue_offset)
            assert m.offset_msg_id == s.offset_msg_id
            assert _sha(m.body) == s.body_sha256 and _user_props(m.properties) == s.user_properties
    finally:
        store.shutdown()


# ------------------------------------------------------------------ rmqwire -> official broker


@pytest.mark.parametrize("ending", ["shutdown", "crash"])
def test_official_broker_serves_rmqwire_store(reference_cluster_factory, tmp_path, ending):
    root = tmp_path / "store"
    topic = f"compat_r2j_{uuid.uuid4().hex[:8]}"
    ids = UniqueIdGenerator("127.0.0.1")
    expected: dict[str, dict] = {}  # offset msg id -> what the consumer must see

    store = _open_store(root)
    try:
        for i in range(40):
            props = {k: v.replace("{i}", str(i)) for k, v in USER_PROPS.items()}
            props.update({"TAGS": "TagA", "KEYS": f"key-{i}", "UNIQ_KEY": ids.next_id(), "WAIT": "true"})
            body = f"rmqwire message {i} ".encode() * (1 + i % 5)
            r = store.put_message(
                MessageExt(topic=topic, body=body, properties=props, queue_id=i % 4,
                           born_timestamp=1_700_000_000_000 + i, born_host=BORN_HOST, store_host=STORE_HOST)
            )
            assert r.is_ok
            expected[r.msg_id] = {"msg_id": props["UNIQ_KEY"], "body": body, "tags": "TagA",
                                  "keys": f"key-{i}", "user": _user_props(props), "queue": i % 4,
                                  "offset": r.queue_offset}
        inner = [
            Message(topic=topic, body=f"batch {j}".encode(),
                    properties={"TAGS": "TagB", "KEYS": f"b-{j}", "UNIQ_KEY": ids.next_id(), "color": f"b{j}"})
            for j in range(10)
        ]
        batch_uniq = ids.next_id()
        batch = MessageExt(topic=topic, body=encode_batch(inner), queue_id=1,
                           properties={"UNIQ_KEY": batch_uniq, "CLUSTER": "DefaultCluster", "WAIT": "true"},
                           born_host=BORN_HOST, store_host=STORE_HOST)
        r = store.put_messages(batch)
        assert r.is_ok and r.append_result is not None and r.append_result.msg_num == 10
        for j, (m, off) in enumerate(zip(inner, r.append_result.record_offsets, strict=True)):
            expected[create_offset_msg_id(STORE_HOST, off)] = {
                "msg_id": batch_uniq, "body": m.body, "tags": "TagB", "keys": f"b-{j}",
                "user": {"color": f"b{j}"}, "queue": 1, "offset": r.queue_offset + j,
            }
    finally:
        if ending == "crash":
            store.abandon()  # as a killed process: abort file stays, the official broker recovers
        else:
            store.shutdown()
    assert (root / "abort").exists() == (ending == "crash")
    config = root / "config"
    config.mkdir()
    (config / "topics.json").write_text(_topics_json({topic: 4}), encoding="utf-8")

    cluster = reference_cluster_factory(broker_conf=_store_conf(root))
    with JavaPeer(cluster.namesrv_addr, version=cluster.version) as peer:
        got = peer.consume(topic, len(expected), group=f"compat_{uuid.uuid4().hex[:8]}", timeout_ms=90_000)
    assert len(got) == len(expected)
    seen = {}
    for g in got:
        assert g.offset_msg_id in expected, g
        assert g.offset_msg_id not in seen, f"delivered twice: {g.offset_msg_id}"
        seen[g.offset_msg_id] = g
        e = expected[g.offset_msg_id]
        assert g.msg_id == e["msg_id"]
        assert g.body == e["body"]
        assert g.tags == e["tags"] and g.keys == e["keys"]
        assert g.user_properties == e["user"]
        assert g.queue is not None and g.queue.queue_id == e["queue"]
        assert g.queue_offset == e["offset"]
        assert g.store_host == f"{STORE_HOST[0]}:{STORE_HOST[1]}"
    assert set(seen) == set(expected)

    # The official broker answers key queries from rmqwire's index files (after a clean shutdown
    # it dispatches nothing again: the entries can only come from those files; after a crash it
    # drops them and rebuilds).
    by_key = {e["keys"]: (e["msg_id"], e["queue"], e["offset"]) for e in expected.values()}
    for key in ("key-7", "key-33", "b-4"):
        out = run_mqadmin_retrying(cluster, "queryMsgByKey", "-t", topic, "-k", key).check().stdout
        assert parse_query_msg_by_key(out) == [by_key[key]], out
    single = next(e for e in expected.values() if e["keys"] == "key-12")
    # (its consumer track names the group above, not online any more: not an error here)
    out = run_mqadmin_retrying(cluster, "queryMsgByUniqueKey", "-t", topic, "-i", single["msg_id"]).stdout
    assert re.search(r"^Keys:\s+\[key-12\]$", out, re.M) and re.search(r"^Queue Offset:\s+%d$" % single["offset"], out, re.M), out
