"""rmqwire.codec + rmqwire.remoting against the official RocketMQ NameServer and Broker.

No rmqwire client yet: every request is one typed call (a ``Command`` declaration from
rmqwire.codec.commands through ``RemotingClient.call``), in both serialize types, against the
official 5.3.3 and 4.9.7 servers. Then the official Java client consumes what we sent raw, and we
decode what the Java client sent (compressed included).

trial TestCases run under pytest: trial drives the real reactor and fails a test that leaves
sockets or delayed calls behind. The session's reference cluster is injected by a fixture.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import pytest
from polling import wait_until
from twisted.internet import defer
from twisted.trial import unittest

from rmqwire.codec import RemotingCommand, ResponseCode, SerializeType
from rmqwire.codec.codes import version_ordinal
from rmqwire.codec.commands import (
    ConsumerData,
    GetBrokerClusterInfo,
    GetMaxOffset,
    GetRouteInfo,
    HeartBeat,
    HeartbeatData,
    ProducerData,
    PullMessage,
    PullSysFlag,
    QueryConsumerOffset,
    SendBatchMessage,
    SendMessage,
    SendMessageRequestHeader,
    SendMessageV2,
    UpdateAndCreateTopic,
    UpdateConsumerOffset,
    ViewMessageById,
    build_subscription_data,
)
from rmqwire.codec.ids import UniqueIdGenerator, parse_offset_msg_id
from rmqwire.codec.message import (
    Message,
    PropertyKey,
    decode_messages,
    encode_batch,
    encode_properties,
)
from rmqwire.errors import RemotingTimeoutError, TopicNotExistError
from rmqwire.model import ConsumeFromWhere, ConsumeType, MessageModel
from rmqwire.remoting import RemotingClient, RemotingConfig
from tools.reference import jars

pytestmark = pytest.mark.conformance

TIMEOUT = 15.0
IDS = UniqueIdGenerator()


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class _ClusterTestCase(unittest.TestCase):
    """Base: a RemotingClient on the real reactor, sending in ``serialize_type``."""

    timeout = 120
    serialize_type = SerializeType.JSON
    cluster_fixture = "reference_cluster"

    @pytest.fixture(autouse=True)
    def _inject_cluster(self, request: pytest.FixtureRequest) -> None:
        self.cluster = request.getfixturevalue(self.cluster_fixture)

    @property
    def v4(self) -> bool:
        return self.cluster.version.startswith("4.")

    @property
    def peer_version(self) -> str:
        # Our Java peer is written against the 5.x client API; a 5.x client talks to 4.x servers.
        return jars.DEFAULT_VERSION if self.v4 else self.cluster.version

    def setUp(self) -> None:
        from twisted.internet import (
            reactor,  # tests own the reactor; library code never does
        )

        self.reactor: Any = reactor
        self.config = RemotingConfig(serialize_type=self.serialize_type, call_timeout=TIMEOUT)
        self.client = self.new_client(self.config)

    def new_client(self, config: RemotingConfig) -> RemotingClient:
        client = RemotingClient(self.reactor, config)
        client.startService()
        self.addCleanup(client.stopService)
        return client

    @property
    def ns(self) -> str:
        return self.cluster.namesrv_addr

    @property
    def broker(self) -> str:
        return self.cluster.broker_addr

    def wait_until(self, probe: Any, what: str, timeout: float = 30.0) -> Any:
        return wait_until(self.reactor, probe, what, timeout)

    @defer.inlineCallbacks
    def create_topic(self, topic: str, queues: int = 4) -> Any:
        yield self.client.call(
            self.broker, UpdateAndCreateTopic, topic=topic, default_topic="TBW102",
            read_queue_nums=queues, write_queue_nums=queues, perm=6,
            topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False,
        )
        route = yield self.wait_until(lambda: self.route_or_none(topic), f"a route for {topic}")
        return route

    def route_or_none(self, topic: str) -> defer.Deferred[Any]:
        d = self.client.call(self.ns, GetRouteInfo, topic=topic)
        d.addCallback(lambda r: r.body)
        d.addErrback(lambda f: f.trap(TopicNotExistError) and None)
        return d

    def message(self, topic: str, i: int, **props: str) -> Message:
        msg = Message.create(topic, f"rmqwire body {i} ✓".encode(), tags=f"Tag{i % 2}",
                             keys=[f"k{i}", f"kk{i}"])
        msg.unique_key = IDS.next_id()
        for k, v in props.items():
            msg.put_property(k, v)
        return msg

    def send_header(self, msg: Message, group: str, queue_id: int, *, batch: bool = False
                    ) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=group, topic=msg.topic, default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
            born_timestamp=int(time.time() * 1000), flag=msg.flag,
            properties=encode_properties(msg.properties), reconsume_times=0, unit_mode=False,
            batch=batch, bname=self.cluster.broker_name,
        )

    @defer.inlineCallbacks
    def send(self, msg: Message, *, v2: bool, queue_id: int = 0, group: str = "rmqwire_pg") -> Any:
        header = self.send_header(msg, group, queue_id)
        if v2:
            resp = yield self.client.call(self.broker, SendMessageV2, header.to_v2(), body=msg.body)
        else:
            resp = yield self.client.call(self.broker, SendMessage, header, body=msg.body)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        # Java's client reads these two straight from extFields: they must be there.
        self.assertEqual(resp.header.extra.get("MSG_REGION"), "DefaultRegion")
        self.assertIn(resp.header.extra.get("TRACE_ON"), ("true", "false"))
        return resp.header

    def heartbeat(self, group: str, topic: str) -> defer.Deferred[Any]:
        data = HeartbeatData(
            client_id=f"127.0.0.1@rmqwire-{uuid.uuid4().hex[:6]}",
            producer_data_set=[ProducerData(group_name="rmqwire_pg")],
            consumer_data_set=[ConsumerData(
                group_name=group, consume_type=ConsumeType.CONSUME_ACTIVELY,
                message_model=MessageModel.CLUSTERING,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                subscription_data_set=[build_subscription_data(topic, "*")],
            )],
        )
        return self.client.call(self.broker, HeartBeat, body=data)

    def pull(self, topic: str, group: str, queue_id: int, offset: int, max_nums: int = 32
             ) -> defer.Deferred[Any]:
        return self.client.call(
            self.broker, PullMessage, consumer_group=group, topic=topic, queue_id=queue_id,
            queue_offset=offset, max_msg_nums=max_nums, sys_flag=int(PullSysFlag.SUBSCRIPTION),
            commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
            expression_type="TAG",
        )


class NameServerTests(_ClusterTestCase):
    @defer.inlineCallbacks
    def test_broker_cluster_info(self) -> Any:
        resp = yield self.client.call(self.ns, GetBrokerClusterInfo)
        # ClusterInfo always comes in fastjson's default style: unquoted Long keys, not JSON.
        self.assertRaises(json.JSONDecodeError, json.loads, resp.command.body)
        broker = resp.body.broker_addr_table[self.cluster.broker_name]
        self.assertEqual(broker.broker_addrs, {0: self.broker})
        self.assertIn(self.cluster.broker_name, resp.body.cluster_addr_table[self.cluster.cluster_name])

    @defer.inlineCallbacks
    def test_route_in_both_json_dialects(self) -> Any:
        topic = _unique("rmqwire_route")
        yield self.create_topic(topic, queues=4)
        for version, accept_standard, standard in ((479, None, True), (317, None, False),
                                                   (317, True, True)):
            client = self.new_client(self.config.replace(version=version))
            resp = yield client.call(self.ns, GetRouteInfo, topic=topic,
                                     accept_standard_json_only=accept_standard)
            if standard:
                self.assertEqual(json.loads(resp.command.body)["brokerDatas"][0]["brokerAddrs"],
                                 {"0": self.broker})
            else:
                self.assertRaises(json.JSONDecodeError, json.loads, resp.command.body)
            (qd,) = resp.body.queue_datas
            self.assertEqual((qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm),
                             (self.cluster.broker_name, 4, 4, 6))
            (bd,) = resp.body.broker_datas
            self.assertEqual(bd.broker_addrs, {0: self.broker})

    @defer.inlineCallbacks
    def test_unknown_topic_is_topic_not_exist(self) -> Any:
        topic = _unique("rmqwire_nosuch")
        err = yield self.assertFailure(self.client.call(self.ns, GetRouteInfo, topic=topic),
                                       TopicNotExistError)
        self.assertEqual(err.code, ResponseCode.TOPIC_NOT_EXIST)
        self.assertTrue(err.refresh_route and err.retriable)
        self.assertTrue(err.remark.startswith(
            f"No topic route info in name server for the topic: {topic}"), err.remark)

    @defer.inlineCallbacks
    def test_unknown_request_code(self) -> Any:
        # No declaration for 4242: the raw invoke path.
        if self.v4:
            # 4.9.7's DefaultRequestProcessor returns null for unknown codes: no answer at all.
            yield self.assertFailure(
                self.client.invoke(self.ns, RemotingCommand.request(4242), timeout=2.0),
                RemotingTimeoutError)
            return
        resp = yield self.client.invoke(self.ns, RemotingCommand.request(4242))
        self.assertEqual((resp.code, resp.remark),
                         (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 4242 not supported"))


class BrokerTests(_ClusterTestCase):
    @defer.inlineCallbacks
    def test_send_pull_view_offsets_and_java_consumes(self) -> Any:
        topic = _unique("rmqwire_flow")
        group = _unique("rmqwire_cg")
        yield self.create_topic(topic, queues=2)
        sent: list[Message] = []
        results = []
        # SEND_MESSAGE (10) and SEND_MESSAGE_V2 (310), all to queue 0 so offsets are known.
        for i, v2 in enumerate((False, True, False, True)):
            msg = self.message(topic, i, user_prop=f"v{i}")
            sent.append(msg)
            results.append((yield self.send(msg, v2=v2)))
        # SEND_BATCH_MESSAGE (320): three messages with their own UNIQ_KEYs.
        batch = [self.message(topic, i, user_prop=f"v{i}") for i in range(4, 7)]
        outer = Message(topic=topic, properties={PropertyKey.WAIT_STORE_MSG_OK: "true"})
        outer.unique_key = IDS.next_id()
        bheader = self.send_header(outer, "rmqwire_pg", 0, batch=True).to_v2()
        bresult = (yield self.client.call(self.broker, SendBatchMessage, bheader,
                                          body=encode_batch(batch))).header
        self.assertEqual(len(bresult.msg_id.split(",")), 3)
        sent += batch
        # The store (5.3.3 and 4.9.7 alike) appends the batch's own properties (WAIT, CLUSTER and,
        # as the Java client sets one, the batch's UNIQ_KEY) after each inner record's; the last
        # UNIQ_KEY wins when Java parses properties, so inner messages read back with the batch's.
        expected_uniq = [m.unique_key for m in sent[:4]] + [outer.unique_key] * 3
        self.assertEqual([r.queue_offset for r in results] + [bresult.queue_offset], [0, 1, 2, 3, 4])
        self.assertTrue(all(r.queue_id == 0 for r in results))

        # GET_MAX_OFFSET: the next offset to be written, once the broker's dispatch (asynchronous
        # after the append) has reached the consume queue.
        @defer.inlineCallbacks
        def max_offset_7() -> Any:
            r = yield self.client.call(self.broker, GetMaxOffset, topic=topic, queue_id=0,
                                       committed=True)
            self.assertLessEqual(r.header.offset, 7)
            return r.header.offset == 7

        yield self.wait_until(max_offset_7, "GET_MAX_OFFSET to reach 7")

        # HEART_BEAT: the broker answers with its own version (5.3.3 -> 479).
        resp = yield self.heartbeat(group, topic)
        self.assertEqual(resp.command.version, version_ordinal(self.cluster.version))

        # PULL_MESSAGE: the records the broker stored, decoded.
        resp = yield self.pull(topic, group, 0, 0)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        self.assertEqual((resp.header.next_begin_offset, resp.header.max_offset), (7, 7))
        pulled = decode_messages(resp.body)
        self.assertEqual([m.queue_offset for m in pulled], list(range(7)))
        for want, uniq, got in zip(sent, expected_uniq, pulled):
            self.assertEqual(got.topic, topic)
            self.assertEqual(got.body, want.body)
            self.assertEqual(got.tags, want.tags)
            self.assertEqual(got.keys, want.keys)
            self.assertEqual(got.unique_key, uniq)
            self.assertEqual(got.get_property("user_prop"), want.get_property("user_prop"))
            self.assertEqual(got.get_property("CLUSTER"), self.cluster.cluster_name)
        # The offset message ids of the send responses point at these records.
        for r, got in zip(results, pulled):
            self.assertEqual(r.msg_id, got.offset_msg_id)
        # Past the end: PULL_OFFSET_MOVED or PULL_NOT_FOUND is an outcome, not an error.
        resp = yield self.pull(topic, group, 0, 7)
        self.assertIn(resp.code, (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED))
        self.assertEqual(resp.header.next_begin_offset, 7)

        # VIEW_MESSAGE_BY_ID with the commit-log offset from the offset message id.
        offset = parse_offset_msg_id(results[1].msg_id).commit_log_offset
        resp = yield self.client.call(self.broker, ViewMessageById, topic=topic, offset=offset)
        (viewed,) = decode_messages(resp.body)
        self.assertEqual((viewed.body, viewed.commit_log_offset), (sent[1].body, offset))

        # Offsets: QUERY before any commit -> 22 (an outcome); UPDATE (normal, then oneway) ->
        # QUERY sees it.
        resp = yield self.client.call(self.broker, QueryConsumerOffset, consumer_group=group,
                                      topic=topic, queue_id=1, set_zero_if_not_found=False)
        if self.v4:
            # 4.9.7 has no setZeroIfNotFound: an empty queue with min offset 0 answers offset 0.
            self.assertEqual((resp.code, resp.header.offset), (ResponseCode.SUCCESS, 0))
        else:
            self.assertEqual(resp.code, ResponseCode.QUERY_NOT_FOUND)
        offsets = dict(consumer_group=group, topic=topic, queue_id=0)
        yield self.client.call(self.broker, UpdateConsumerOffset, commit_offset=3, **offsets)
        resp = yield self.client.call(self.broker, QueryConsumerOffset, **offsets)
        self.assertEqual(resp.header.offset, 3)
        yield self.client.oneway(self.broker, UpdateConsumerOffset, commit_offset=5, **offsets)

        @defer.inlineCallbacks
        def committed_5() -> Any:
            r = yield self.client.call(self.broker, QueryConsumerOffset, **offsets)
            return r.header.offset == 5

        yield self.wait_until(committed_5, "the oneway offset update")

        # The official Java client consumes what we sent raw: same bodies, tags, keys, props.
        from tools.peers.java_peer import JavaPeer

        with JavaPeer(self.cluster.namesrv_addr, version=self.peer_version) as peer:
            got = yield defer.maybeDeferred(
                peer.consume, topic, len(sent), group=_unique("java_cg"), from_where="first",
                timeout_ms=60000)
        by_body = {r.body_sha256: r for r in got}
        self.assertEqual(len(by_body), len(sent))
        for msg, uniq in zip(sent, expected_uniq):
            rec = by_body[_sha(msg.body)]
            self.assertEqual(rec.msg_id, uniq)
            self.assertEqual((rec.tags, rec.keys), (msg.tags, msg.keys))
            self.assertEqual(rec.user_properties, {"user_prop": msg.get_property("user_prop")})

    @defer.inlineCallbacks
    def test_pull_decodes_what_the_java_client_sent_compressed(self) -> Any:
        from tools.peers.java_peer import JavaPeer

        topic = _unique("rmqwire_jz")
        group = _unique("rmqwire_cg")
        yield self.create_topic(topic, queues=1)
        with JavaPeer(self.cluster.namesrv_addr, version=self.peer_version) as peer:
            records = peer.produce(topic, 3, body_size=8192, compress=True, tag="TagZ",
                                   keys="key{i}", props={"p": "v{i}"})
        yield self.heartbeat(group, topic)
        resp = yield self.pull(topic, group, 0, 0)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        raw = decode_messages(resp.body, decompress=False)
        self.assertTrue(all(m.sys_flag & 0x1 for m in raw), "Java compresses bodies over 4 KiB")
        pulled = decode_messages(resp.body)
        self.assertEqual(len(pulled), 3)
        for rec, msg in zip(records, pulled):
            self.assertEqual(_sha(msg.body), rec.body_sha256)
            self.assertEqual(len(msg.body), 8192)
            self.assertFalse(msg.sys_flag & 0x1)
            self.assertEqual(msg.unique_key, rec.msg_id)
            self.assertEqual((msg.tags, msg.keys, msg.get_property("p")),
                             ("TagZ", f"key{rec.index}", f"v{rec.index}"))


class NameServerRocketmqHeaderTests(NameServerTests):
    serialize_type = SerializeType.ROCKETMQ


class BrokerRocketmqHeaderTests(BrokerTests):
    serialize_type = SerializeType.ROCKETMQ


# ---- the 4.x reference (4.9.7), both serialize types ----------------------------------------------


@pytest.mark.slow
class NameServerV4Tests(NameServerTests):
    cluster_fixture = "reference_cluster_v4"


@pytest.mark.slow
class BrokerV4Tests(BrokerTests):
    cluster_fixture = "reference_cluster_v4"


@pytest.mark.slow
class NameServerV4RocketmqHeaderTests(NameServerV4Tests):
    serialize_type = SerializeType.ROCKETMQ


@pytest.mark.slow
class BrokerV4RocketmqHeaderTests(BrokerV4Tests):
    serialize_type = SerializeType.ROCKETMQ
