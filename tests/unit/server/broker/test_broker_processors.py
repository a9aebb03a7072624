"""The broker's processors code by code, over a real store in a temporary directory, answered
through a Java-like dispatcher on a fake clock (no sockets): send checks and answers, pull
statuses, long polling (woken by an arrival, answered at its deadline, dropped with its channel),
offsets, heartbeats and NOTIFY_CONSUMER_IDS_CHANGED, admin codes, and malformed requests answered
with an error code instead of a crash."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from rmqwire.codec import (
    LanguageCode,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    fastjson,
)
from rmqwire.codec.commands.admin import (
    GetBrokerConfig,
    GetBrokerRuntimeInfo,
    GetConsumerConnectionList,
    SubscriptionGroupConfig,
    UpdateAndCreateSubscriptionGroup,
    UpdateBrokerConfig,
)
from rmqwire.codec.commands.consumer import (
    GetConsumerListByGroup,
    GetConsumerListByGroupResponseBody,
)
from rmqwire.codec.commands.heartbeat import (
    ConsumerData,
    HeartBeat,
    HeartbeatData,
    ProducerData,
    UnregisterClient,
    build_subscription_data,
)
from rmqwire.codec.commands.offset import (
    GetMaxOffset,
    QueryConsumerOffset,
    UpdateConsumerOffset,
)
from rmqwire.codec.commands.pull import PullMessage, PullSysFlag
from rmqwire.codec.commands.query import QueryMessage, ViewMessageById
from rmqwire.codec.commands.send import (
    SendBatchMessage,
    SendMessageRequestHeader,
    SendMessageV2,
)
from rmqwire.codec.commands.topic import (
    DeleteTopicInBroker,
    GetAllTopicConfig,
    TopicConfigSerializeWrapper,
    UpdateAndCreateTopic,
)
from rmqwire.codec.ids import parse_offset_msg_id
from rmqwire.codec.message import (
    Message,
    decode_messages,
    encode_batch,
    encode_properties,
)
from rmqwire.model import ConsumeFromWhere, ConsumeType, MessageModel
from rmqwire.remoting.config import JAVA_SERVER_CONFIG
from rmqwire.remoting.dispatcher import Dispatcher, RequestContext
from rmqwire.server.broker import Broker, BrokerSettings

PEER = "127.0.0.1:50000"


class FakeChannel:
    """A client connection: records what the broker sends it, closes on demand."""

    def __init__(self, peer: str = PEER) -> None:
        self.peer = peer
        self.is_open = True
        self.oneway: list[RemotingCommand] = []
        self._closed: list[Deferred[None]] = []

    def invoke(self, cmd: RemotingCommand, timeout: float) -> Deferred[RemotingCommand]:
        raise AssertionError("the broker made a two-way call")

    def invoke_oneway(self, cmd: RemotingCommand) -> Deferred[None]:
        self.oneway.append(cmd)
        return defer.succeed(None)

    def when_closed(self) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        self._closed.append(d)
        return d

    def close(self) -> None:
        self.is_open = False
        for d in self._closed:
            d.callback(None)


@dataclasses.dataclass
class Harness:
    broker: Broker
    clock: Clock
    dispatcher: Dispatcher
    channel: FakeChannel

    def raw(self, request: RemotingCommand, channel: FakeChannel | None = None) -> Deferred[Any]:
        ch = channel or self.channel
        return self.dispatcher.dispatch(request.with_opaque(7), RequestContext(peer=ch.peer, channel=ch))

    def pending(self, command: Any, header: Any = None, *, body: Any = None, channel: FakeChannel | None = None,
                **fields: Any) -> Deferred[Any]:
        req = command.request(header, body, language=LanguageCode.JAVA, **fields)
        return self.raw(req, channel)

    def answer(self, command: Any, header: Any = None, *, body: Any = None, channel: FakeChannel | None = None,
               **fields: Any) -> RemotingCommand:
        return result_of(self.pending(command, header, body=body, channel=channel, **fields))

    def send(self, topic: str, body: bytes = b"hello", *, tags: str | None = "TagA", queue_id: int = 0,
             default_topic: str = "TBW102", props: dict[str, str] | None = None) -> RemotingCommand:
        properties = {"WAIT": "true", **({"TAGS": tags} if tags else {}), **(props or {})}
        header = SendMessageRequestHeader(
            producer_group="pg", topic=topic, default_topic=default_topic, default_topic_queue_nums=4,
            queue_id=queue_id, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0,
            properties=encode_properties(properties), reconsume_times=0, unit_mode=False, batch=False,
        )
        return self.answer(SendMessageV2, header.to_v2(), body=body)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        r = self.answer(UpdateAndCreateTopic, topic=topic, default_topic="TBW102", read_queue_nums=queues,
                        write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0,
                        order=False)
        assert r.code == ResponseCode.SUCCESS, r.remark

    def pull(self, topic: str, offset: int, *, queue_id: int = 0, group: str = "cg", sub: str = "*",
             suspend: bool = False, timeout_ms: int = 15_000, commit_offset: int | None = None,
             channel: FakeChannel | None = None) -> Deferred[Any]:
        flag = PullSysFlag.build(subscription=True, suspend=suspend, commit_offset=commit_offset is not None)
        return self.pending(
            PullMessage, consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
            max_msg_nums=32, sys_flag=int(flag), commit_offset=commit_offset or 0,
            suspend_timeout_millis=timeout_ms, subscription=sub, sub_version=0, expression_type="TAG",
            channel=channel)


def result_of(d: Deferred[Any]) -> Any:
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "the answer is still pending"
    (r,) = results
    if hasattr(r, "raiseException"):
        r.raiseException()
    return r


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    clock = Clock()
    settings = BrokerSettings.from_properties({
        "brokerName": "broker-t", "brokerIP1": "127.0.0.1", "listenPort": "10911",
        "storePathRootDir": str(tmp_path / "store"), "mappedFileSizeCommitLog": str(1 << 20),
        "mappedFileSizeConsumeQueue": str(1000 * 20),
    })
    broker = Broker(clock, settings)
    broker.store.load()
    broker.topic_config_manager.load()
    broker.store.add_arrival_listener(broker.pull_hold_service.on_arrival, broker.pull_hold_service.on_arrival_batch)
    broker.store.start()
    broker.pull_hold_service.start()
    dispatcher = Dispatcher.for_config(
        JAVA_SERVER_CONFIG, broker.admin_processor, broker.send_processor, broker.pull_processor,
        broker.consumer_manage_processor, broker.client_manage_processor, broker.query_processor)
    try:
        yield Harness(broker, clock, dispatcher, FakeChannel())
    finally:
        broker.pull_hold_service.stop()
        broker.store.shutdown()


# --------------------------------------------------------------------------- send


def test_send_answers_as_java(h: Harness) -> None:
    h.create_topic("T1")
    r = h.send("T1", b"payload", queue_id=2)
    assert r.code == ResponseCode.SUCCESS
    ext = r.ext_fields
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    assert ext["queueId"] == "2" and ext["queueOffset"] == "0"
    oid = parse_offset_msg_id(ext["msgId"])
    assert oid.store_host == ("127.0.0.1", 10911) and oid.commit_log_offset == 0
    assert r.language == LanguageCode.JAVA and r.version == 479
    got = h.answer(ViewMessageById, offset=0)
    (m,) = decode_messages(got.body)
    assert m.body == b"payload" and m.topic == "T1" and m.queue_id == 2 and m.tags == "TagA"
    assert m.properties["CLUSTER"] == "DefaultCluster"
    assert ext["transactionId"] == m.properties["UNIQ_KEY"]  # stamped by the broker
    assert m.born_host == ("127.0.0.1", 50000) and m.born_timestamp == 1_700_000_000_000


@pytest.mark.parametrize(("topic", "code", "remark"), [
    ("bad/topic", ResponseCode.INVALID_PARAMETER, "contains illegal characters"),
    ("", ResponseCode.INVALID_PARAMETER, "The specified topic is blank."),
    ("x" * 128, ResponseCode.INVALID_PARAMETER, "longer than topic max length"),
    ("SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."),
])
def test_send_refusals(h: Harness, topic: str, code: int, remark: str) -> None:
    r = h.send(topic)
    assert (r.code, r.ext_fields["MSG_REGION"]) == (code, "DefaultRegion")
    assert remark in r.remark


def test_unknown_topic_without_inheritable_default(h: Harness) -> None:
    r = h.send("Nope", default_topic="NotATopic")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.remark.startswith("topic[Nope] not exist, apply first please!")
    h.create_topic("T2", queues=2)
    r = h.send("T2", queue_id=2)
    assert r.code == ResponseCode.INVALID_PARAMETER and r.remark.startswith("request queueId[2] is illegal")


def test_auto_create_from_tbw102_is_persisted(h: Harness) -> None:
    r = h.send("AutoT", queue_id=-1)
    assert r.code == ResponseCode.SUCCESS and 0 <= int(r.ext_fields["queueId"]) < 4
    cfg = h.broker.topic_config_manager.select("AutoT")
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (4, 4, 6)
    tree = fastjson.loads((h.broker.topic_config_manager.file.path).read_bytes())
    assert tree["topicConfigTable"]["AutoT"]["perm"] == 6


def test_batch_send(h: Harness) -> None:
    h.create_topic("TB")
    batch = encode_batch([Message("TB", b"m%d" % i, properties={"UNIQ_KEY": f"ID{i}"}) for i in range(3)])
    header = SendMessageRequestHeader(
        producer_group="pg", topic="TB", default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
        sys_flag=0, born_timestamp=1, flag=0, properties=encode_properties({"UNIQ_KEY": "BATCH"}),
        reconsume_times=0, unit_mode=False, batch=True)
    r = h.answer(SendBatchMessage, header.to_v2(), body=batch)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"
    assert len(r.ext_fields["msgId"].split(",")) == 3 and r.ext_fields["transactionId"] == "BATCH"
    found = h.pull("TB", 0, queue_id=1)
    msgs = decode_messages(result_of(found).body)
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"] and [m.queue_offset for m in msgs] == [0, 1, 2]
    assert {m.properties["UNIQ_KEY"] for m in msgs} == {"BATCH"}  # the batch's own, as 5.3.3


# --------------------------------------------------------------------------- pull


def test_pull_statuses(h: Harness) -> None:
    h.create_topic("TP")
    empty = result_of(h.pull("TP", 0))
    assert (empty.code, empty.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    moved = result_of(h.pull("TP", 5))
    assert (moved.code, moved.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "0")
    h.send("TP", tags="TagA")
    h.send("TP", tags="TagB")
    found = result_of(h.pull("TP", 0))
    assert (found.code, found.remark) == (ResponseCode.SUCCESS, "FOUND")
    assert found.ext_fields["nextBeginOffset"] == "2" and found.ext_fields["maxOffset"] == "2"
    assert found.ext_fields["suggestWhichBrokerId"] == "0"
    only_b = decode_messages(result_of(h.pull("TP", 0, sub="TagB")).body)
    assert [m.tags for m in only_b] == ["TagB"]
    none = result_of(h.pull("TP", 0, sub="TagC"))
    assert (none.code, none.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    at_end = result_of(h.pull("TP", 2))
    assert (at_end.code, at_end.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    far = result_of(h.pull("TP", 9))
    assert (far.code, far.remark, far.ext_fields["nextBeginOffset"]) == \
        (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", "2")
    bad_queue = result_of(h.pull("TP", 0, queue_id=7))
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER
    no_topic = result_of(h.pull("Unknown", 0))
    assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST


def test_long_polling_woken_by_arrival(h: Harness) -> None:
    h.create_topic("TL", queues=1)
    held = h.pull("TL", 0, suspend=True, sub="TagA")
    assert not held.called and h.broker.pull_hold_service.held_for("TL", 0) == 1
    h.send("TL", tags="TagZ")  # not for this subscription: stays held
    h.clock.advance(0)
    assert not held.called
    h.send("TL", tags="TagA")
    h.clock.advance(0)
    r = result_of(held)
    assert r.code == ResponseCode.SUCCESS
    assert [m.tags for m in decode_messages(r.body)] == ["TagA"]
    assert h.broker.pull_hold_service.woken_by_arrival == 1


def test_long_polling_woken_by_a_batch(h: Harness) -> None:
    """A batch is reported to the hold service in one call: a pull waiting for a tag that only
    the middle record carries wakes, a pull for a tag none carries stays held."""
    h.create_topic("TLB", queues=1)
    held = h.pull("TLB", 0, suspend=True, sub="TagB")
    other = h.pull("TLB", 0, suspend=True, sub="TagZ", group="cg2")
    batch = encode_batch([Message("TLB", b"m%d" % i, properties={"TAGS": "Tag" + t}) for i, t in enumerate("ABC")])
    header = SendMessageRequestHeader(
        producer_group="pg", topic="TLB", default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        sys_flag=0, born_timestamp=1, flag=0, properties="", reconsume_times=0, unit_mode=False, batch=True)
    assert h.answer(SendBatchMessage, header.to_v2(), body=batch).code == ResponseCode.SUCCESS
    h.clock.advance(0)
    r = result_of(held)
    assert r.code == ResponseCode.SUCCESS
    assert [m.tags for m in decode_messages(r.body)] == ["TagB"]
    assert not other.called and h.broker.pull_hold_service.woken_by_arrival == 1


def test_long_polling_answers_at_the_deadline(h: Harness) -> None:
    h.create_topic("TD", queues=1)
    held = h.pull("TD", 0, suspend=True, timeout_ms=2000)
    h.clock.advance(1.9)
    assert not held.called
    h.clock.advance(0.2)
    assert result_of(held).code == ResponseCode.PULL_NOT_FOUND
    assert h.broker.pull_hold_service.timed_out == 1


def test_held_pull_dropped_with_its_channel(h: Harness) -> None:
    h.create_topic("TC", queues=1)
    ch = FakeChannel("127.0.0.1:50001")
    held = h.pull("TC", 0, suspend=True, channel=ch)
    ch.close()
    assert result_of(held) is None  # no answer for a closed connection
    assert h.broker.pull_hold_service.held_for("TC", 0) == 0


def test_pull_commits_offset_on_first_pass_only(h: Harness) -> None:
    h.create_topic("TO", queues=1)
    h.send("TO")
    result_of(h.pull("TO", 1, commit_offset=1))
    assert h.broker.consumer_offset_manager.query_offset("cg", "TO", 0) == 1


# --------------------------------------------------------------------------- offsets


def test_consumer_offsets(h: Harness) -> None:
    h.create_topic("TQ", queues=1)
    r = h.answer(QueryConsumerOffset, consumer_group="cg", topic="TQ", queue_id=0)
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    h.send("TQ")
    r = h.answer(QueryConsumerOffset, consumer_group="cg", topic="TQ", queue_id=0)
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")  # message 0 in memory
    r = h.answer(QueryConsumerOffset, consumer_group="cg", topic="TQ", queue_id=0, set_zero_if_not_found=False)
    assert r.code == ResponseCode.QUERY_NOT_FOUND and "do not set to zero" in r.remark
    r = h.answer(UpdateConsumerOffset, consumer_group="nogroup", topic="TQ", queue_id=0, commit_offset=1)
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group nogroup not exist!")
    h.broker.subscription_group_manager.find("cg")
    r = h.answer(UpdateConsumerOffset, consumer_group="cg", topic="Nope", queue_id=0, commit_offset=1)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = h.answer(UpdateConsumerOffset, consumer_group="cg", topic="TQ", queue_id=0, commit_offset=1)
    assert r.code == ResponseCode.SUCCESS
    r = h.answer(QueryConsumerOffset, consumer_group="cg", topic="TQ", queue_id=0)
    assert r.ext_fields["offset"] == "1"
    assert h.answer(GetMaxOffset, topic="TQ", queue_id=0).ext_fields["offset"] == "1"
    h.broker.consumer_offset_manager.persist()
    text = h.broker.consumer_offset_manager.file.path.read_text()
    assert '"TQ@cg":{0:1\n\t\t}' in text and '"groupTopicMap":{\n\t\t"cg":["TQ"]\n\t}' in text


# --------------------------------------------------------------------------- client tables


def _heartbeat(h: Harness, client_id: str, channel: FakeChannel, group: str = "cg", topic: str = "TH",
               topics: tuple[str, ...] = ()) -> RemotingCommand:
    data = HeartbeatData(
        client_id=client_id,
        producer_data_set=[ProducerData(group_name="pg")],
        consumer_data_set=[ConsumerData(
            group_name=group, consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel.CLUSTERING, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscription_data_set=[build_subscription_data(t, "*") for t in topics or (topic,)])],
    )
    return h.answer(HeartBeat, body=data, channel=channel)


def test_heartbeats_and_notify_consumer_ids_changed(h: Harness) -> None:
    h.create_topic("TH")
    a, b = FakeChannel("127.0.0.1:50010"), FakeChannel("127.0.0.1:50011")
    r = _heartbeat(h, "10.0.0.1@a", a)
    assert r.code == ResponseCode.SUCCESS and r.version == 479
    assert r.ext_fields["IS_SUPPORT_HEART_BEAT_V2"] == "true"
    assert h.broker.topic_config_manager.select("%RETRY%cg") is not None
    assert h.broker.subscription_group_manager.get("cg") is not None
    _heartbeat(h, "10.0.0.2@b", b)
    assert [c.code for c in a.oneway] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] * 2
    assert a.oneway[-1].ext_fields["consumerGroup"] == "cg" and a.oneway[-1].is_oneway
    ids = GetConsumerListByGroupResponseBody.decode(h.answer(GetConsumerListByGroup, consumer_group="cg").body)
    assert sorted(ids.consumer_id_list) == ["10.0.0.1@a", "10.0.0.2@b"]
    _heartbeat(h, "10.0.0.2@b", b)  # nothing changed: no notification
    assert len(a.oneway) == 2
    b.close()
    assert len(a.oneway) == 3
    ids = GetConsumerListByGroupResponseBody.decode(h.answer(GetConsumerListByGroup, consumer_group="cg").body)
    assert ids.consumer_id_list == ["10.0.0.1@a"]
    assert h.answer(UnregisterClient, client_id="10.0.0.1@a", consumer_group="cg", channel=a).code == 0
    r = h.answer(GetConsumerListByGroup, consumer_group="cg")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, cg")
    assert "pg" in h.broker.producer_manager.group_channel_table


def test_consumer_connection_lists_subscriptions_in_javas_json_order(h: Harness) -> None:
    """issue 12: the topic and its group's %RETRY% topic share a bin of mqadmin's hash table, so
    it prints them in the body's order: the Java broker's (topic first, from the heartbeat's
    HashSet), not the client's nor String order."""
    topic, group = "AdmT_88058b88", "AdmG_88058b88"
    h.create_topic(topic)
    _heartbeat(h, "10.0.0.1@a", h.channel, group=group, topics=(f"%RETRY%{group}", topic))
    r = h.answer(GetConsumerConnectionList, consumer_group=group)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert list(fastjson.loads(r.body)["subscriptionTable"]) == [topic, f"%RETRY%{group}"]


# --------------------------------------------------------------------------- admin


def test_topic_admin(h: Harness) -> None:
    r = h.answer(UpdateAndCreateTopic, topic="bad topic", default_topic="TBW102", read_queue_nums=1,
                 write_queue_nums=1, perm=6, topic_filter_type="SINGLE_TAG", order=False)
    assert r.code == ResponseCode.INVALID_PARAMETER
    r = h.answer(UpdateAndCreateTopic, topic="TBW102", default_topic="TBW102", read_queue_nums=1,
                 write_queue_nums=1, perm=6, topic_filter_type="SINGLE_TAG", order=False)
    assert (r.code, r.remark) == (ResponseCode.INVALID_PARAMETER, "The topic[TBW102] is conflict with system topic.")
    h.create_topic("TA", queues=3)
    table = TopicConfigSerializeWrapper.decode(h.answer(GetAllTopicConfig).body).topic_config_table
    assert table["TA"].read_queue_nums == 3 and "TBW102" in table
    h.send("TA")
    assert h.answer(DeleteTopicInBroker, topic="TA").code == ResponseCode.SUCCESS
    assert h.broker.topic_config_manager.select("TA") is None
    assert h.broker.store.get_max_offset_in_queue("TA", 0) == 0


def test_subscription_group_admin_and_broker_info(h: Harness) -> None:
    r = h.answer(UpdateAndCreateSubscriptionGroup, body=SubscriptionGroupConfig(group_name="g2", retry_max_times=3))
    assert r.code == ResponseCode.SUCCESS and h.broker.subscription_group_manager.get("g2").retry_max_times == 3
    info = fastjson.loads(h.answer(GetBrokerRuntimeInfo).body)["table"]
    for key in ("brokerVersionDesc", "msgPutTotalTodayNow", "putTps", "commitLogMaxOffset", "bootTimestamp",
                "sendThreadPoolQueueSize", "earliestMessageTimeStamp", "commitLogDiskRatio", "runtime"):
        assert key in info
    assert info["brokerVersionDesc"] == "V5_3_3"
    conf = h.answer(GetBrokerConfig)
    assert "brokerName=broker-t\n" in conf.body.decode() and conf.ext_fields["version"].startswith("{")


def test_update_broker_config_refused_by_default(h: Harness) -> None:
    r = h.answer(UpdateBrokerConfig, body=b"brokerPermission=4\n")
    assert r.code == ResponseCode.NO_PERMISSION
    assert h.broker.settings.broker.broker_permission == 6
    h.broker.settings.broker.enable_update_broker_config = True
    r = h.answer(UpdateBrokerConfig, body=b"storePathRootDir=/tmp/evil\n")
    assert r.code == ResponseCode.NO_PERMISSION
    r = h.answer(UpdateBrokerConfig, body=b"traceOn=false\n")
    assert r.code == ResponseCode.SUCCESS and h.send("TX").ext_fields["TRACE_ON"] == "false"
    # CVE-2023-33246's body: Java's black list answers first, with its remark
    r = h.answer(UpdateBrokerConfig, body=b"filterServerNums=1\nrocketmqHome=-c $@|sh . echo touch /tmp/x;\n")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    r = h.answer(UpdateBrokerConfig, body=b"filterServerNums=1\n")
    assert r.code == ResponseCode.NO_PERMISSION and "filterServerNums may not be updated" in r.remark
    r = h.answer(UpdateBrokerConfig, body=b"brokerPermission=rwx\n")
    assert r.code == ResponseCode.NO_PERMISSION and "brokerPermission" in r.remark
    assert h.broker.settings.broker.rocketmq_home != "-c $@|sh . echo touch /tmp/x;"
    assert h.broker.settings.broker.broker_permission == 6


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE, RequestCode.PULL_MESSAGE,
                                  RequestCode.HEART_BEAT, RequestCode.QUERY_CONSUMER_OFFSET,
                                  RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.UPDATE_AND_CREATE_TOPIC,
                                  RequestCode.SEND_BATCH_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID,
                                  RequestCode.GET_MAX_OFFSET, RequestCode.UNREGISTER_CLIENT,
                                  RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP])
@pytest.mark.parametrize("body", [None, b"\xff\x00garbage"])
def test_malformed_requests_get_an_error_code(h: Harness, code: int, body: bytes | None) -> None:
    """No header fields, a garbage body: an answer with a RocketMQ code, and the broker goes on."""
    r = result_of(h.raw(RemotingCommand.request(code, None, body, language=LanguageCode.JAVA)))
    assert r is not None and ResponseCode(r.code) is not None
    if code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE,
                RequestCode.PULL_MESSAGE, RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.UPDATE_AND_CREATE_TOPIC,
                RequestCode.VIEW_MESSAGE_BY_ID):
        assert r.code != ResponseCode.SUCCESS
    h.create_topic("StillOk")
    assert h.send("StillOk").code == ResponseCode.SUCCESS


def test_unknown_code(h: Harness) -> None:
    r = result_of(h.raw(RemotingCommand.request(9999, None, None)))
    assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported")


class ThreadHopClock(Clock):
    """A Clock that also takes calls from other threads (the store's flush thread), run on demand."""

    def __init__(self) -> None:
        super().__init__()
        import queue

        self.from_threads: queue.Queue[Any] = queue.Queue()

    def callFromThread(self, f: Any, *args: Any, **kw: Any) -> None:  # noqa: N802 - Twisted's name
        self.from_threads.put((f, args, kw))

    def run_thread_calls(self, timeout: float = 30.0) -> None:
        f, args, kw = self.from_threads.get(timeout=timeout)
        f(*args, **kw)


def _sync_flush_channel(tmp_path: Path, **props: str) -> tuple[Broker, ThreadHopClock, Any, list[int]]:
    """A SYNC_FLUSH broker's send processor behind a real channel on a StringTransport; the
    list gets the commit log's flushed offset at each write on the channel."""
    from twisted.internet.testing import StringTransport

    from rmqwire.remoting.protocol import RemotingProtocol

    clock = ThreadHopClock()
    settings = BrokerSettings.from_properties({
        "brokerIP1": "127.0.0.1", "listenPort": "10911", "storePathRootDir": str(tmp_path / "store"),
        "flushDiskType": "SYNC_FLUSH", "mappedFileSizeCommitLog": str(1 << 20), **props})
    broker = Broker(clock, settings)
    broker.store.load()
    broker.store.start()
    dispatcher = Dispatcher.for_config(JAVA_SERVER_CONFIG, broker.send_processor, broker.admin_processor)
    Harness(broker, clock, dispatcher, FakeChannel()).create_topic("TS", queues=1)
    proto = RemotingProtocol(clock, dispatcher, JAVA_SERVER_CONFIG)
    transport = StringTransport()
    flushed_at_write: list[int] = []
    write = transport.write

    def recording_write(data: bytes) -> None:
        flushed_at_write.append(broker.store.commit_log.flushed_where)
        write(data)

    transport.write = recording_write  # type: ignore[method-assign]
    proto.makeConnection(transport)
    return broker, clock, proto, flushed_at_write


def _sync_send_frame(i: int, *, batch: bool = False) -> bytes:
    from rmqwire.codec.frame import encode_frame

    header = SendMessageRequestHeader(
        producer_group="pg", topic="TS", default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        sys_flag=0, born_timestamp=1, flag=0, properties=encode_properties({"WAIT": "true"}),
        reconsume_times=0, unit_mode=False, batch=batch)
    command = SendBatchMessage if batch else SendMessageV2
    body = encode_batch([Message(topic="TS", body=b"b%d-%d" % (i, k)) for k in range(3)]) if batch else b"m%d" % i
    return encode_frame(command.request(header.to_v2(), body=body).with_opaque(100 + i))


def test_sync_flush_answers_after_the_flush(tmp_path: Path) -> None:
    """Each answer is written only once the flush covered its message: held until the flush
    thread's one call per round reaches the reactor, then written straight on the channel."""
    from rmqwire.codec.frame import FrameDecoder

    broker, clock, proto, flushed_at_write = _sync_flush_channel(tmp_path)
    try:
        proto.dataReceived(b"".join(_sync_send_frame(i, batch=i == 2) for i in range(5)))
        assert proto.transport.value() == b"" and not proto.drained  # nothing before the reactor hears of a flush
        while len(FrameDecoder().feed(proto.transport.value())) < 5:
            clock.run_thread_calls()
        answers = FrameDecoder().feed(proto.transport.value())
        assert [a.opaque for a in answers] == [100, 101, 102, 103, 104]
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 5
        assert [a.ext_fields["queueOffset"] for a in answers] == ["0", "1", "2", "5", "6"]
        ends = []
        for a in answers:
            last = parse_offset_msg_id(a.ext_fields["msgId"].split(",")[-1]).commit_log_offset
            msg = broker.store.look_message_by_offset(last)
            assert msg is not None
            ends.append(last + msg.store_size)
        assert len(flushed_at_write) == 5 and all(f >= e for f, e in zip(flushed_at_write, ends, strict=True))
        assert proto.drained
    finally:
        broker.store.shutdown()


def test_sync_flush_timeout_answers_java_code_once(tmp_path: Path) -> None:
    """A flush stuck past syncFlushTimeout: FLUSH_DISK_TIMEOUT with the send's header (Java's
    sendOK answer); the flush completing later writes nothing more."""
    import threading

    from rmqwire.codec.frame import FrameDecoder

    broker, clock, proto, _ = _sync_flush_channel(tmp_path, syncFlushTimeout="200")
    service = broker.store._group_commit
    assert service is not None
    stuck, real_flush = threading.Event(), service._flush

    def stuck_flush() -> int:
        stuck.wait(30)
        return real_flush()

    round_done, real_on_flushed = threading.Event(), service._on_flushed

    def on_flushed(offset: int) -> None:
        real_on_flushed(offset)
        if stuck.is_set():
            round_done.set()

    service._flush = stuck_flush  # type: ignore[method-assign]
    service._on_flushed = on_flushed  # type: ignore[method-assign]
    try:
        proto.dataReceived(_sync_send_frame(0))
        clock.run_thread_calls()   # the watcher's call, the flush still stuck
        (answer,) = FrameDecoder().feed(proto.transport.value())
        assert (answer.opaque, answer.code, answer.remark) == (100, ResponseCode.FLUSH_DISK_TIMEOUT, None)
        assert answer.ext_fields["queueOffset"] == "0" and answer.ext_fields["msgId"]
        stuck.set()
        assert round_done.wait(30)  # the stuck round completed its writers (none left to answer)
        assert broker.store.commit_log.flushed_where >= broker.store.max_phy_offset
        while not clock.from_threads.empty():
            clock.run_thread_calls()
        assert len(FrameDecoder().feed(proto.transport.value())) == 1 and proto.drained
    finally:
        stuck.set()
        broker.store.shutdown()


def test_held_pulls_are_bounded(h: Harness) -> None:
    h.create_topic("TM", queues=1)
    h.broker.pull_hold_service.max_held = 2
    held = [h.pull("TM", 0, suspend=True) for _ in range(3)]
    assert [d.called for d in held] == [False, False, True]
    assert result_of(held[2]).code == ResponseCode.PULL_NOT_FOUND


# --------------------------------------------------------------------------- admin: stats, relays, resets


class AnsweringChannel(FakeChannel):
    """A client that answers the broker's two-way calls with ``reply(cmd)`` (a RemotingCommand
    or an exception), and records them."""

    def __init__(self, peer: str, reply: Any) -> None:
        super().__init__(peer)
        self.calls: list[RemotingCommand] = []
        self.reply = reply

    def invoke(self, cmd: RemotingCommand, timeout: float) -> Deferred[RemotingCommand]:
        self.calls.append(cmd)
        r = self.reply(cmd)
        return defer.fail(r) if isinstance(r, Exception) else defer.succeed(r)


def _consume_some(h: Harness, topic: str = "TH", n: int = 3) -> None:
    for i in range(n):
        assert h.send(topic, b"m%d" % i, queue_id=0).code == ResponseCode.SUCCESS
    r = result_of(h.pull(topic, 0, group="cg"))
    assert r.code == ResponseCode.SUCCESS
    assert h.answer(UpdateConsumerOffset, consumer_group="cg", topic=topic, queue_id=0, commit_offset=n).code == 0


def test_stats_consume_stats_and_who_consumes(h: Harness) -> None:
    from rmqwire.codec.commands.admin import (
        BrokerStatsData,
        ConsumeStats,
        ConsumeStatsList,
        GetBrokerConsumeStats,
        GetConsumeStats,
        GroupList,
        QueryTopicConsumeByWho,
        QueryTopicsByConsumer,
        ViewBrokerStatsData,
    )
    from rmqwire.codec.commands.topic import TopicList

    h.create_topic("TH")
    _heartbeat(h, "10.0.0.1@a", h.channel)
    _consume_some(h)
    h.broker.stats_manager.sample(0)
    put = BrokerStatsData.decode(h.answer(ViewBrokerStatsData, stats_name="TOPIC_PUT_NUMS", stats_key="TH").body)
    assert put.stats_minute.sum == 3 and put.stats_minute.tps == 0.3 and put.stats_day.sum == 0
    got = BrokerStatsData.decode(h.answer(ViewBrokerStatsData, stats_name="GROUP_GET_NUMS", stats_key="TH@cg").body)
    assert got.stats_minute.sum == 3
    r = h.answer(ViewBrokerStatsData, stats_name="TOPIC_PUT_NUMS", stats_key="Nope")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <Nope> not exist")

    stats = ConsumeStats.decode(h.answer(GetConsumeStats, consumer_group="cg", topic="TH").body)
    q0 = next(w for mq, w in stats.offset_table.items() if mq.queue_id == 0)
    assert (q0.broker_offset, q0.consumer_offset, q0.pull_offset) == (3, 3, 3) and q0.last_timestamp > 0
    assert stats.consume_tps == 0.3 and len(stats.offset_table) == 4
    # a topic the (online) group does not subscribe is left out, as Java does
    assert ConsumeStats.decode(h.answer(GetConsumeStats, consumer_group="cg", topic="TBW102").body).offset_table == {}
    every = ConsumeStatsList.decode(h.answer(GetBrokerConsumeStats, is_order=False).body)
    (cg,) = [e["cg"] for e in every.consume_stats_list if "cg" in e]
    assert [len(s.offset_table) for s in cg] == [4] and every.total_diff == 0
    assert every.broker_addr == "127.0.0.1:10911"
    ordered = ConsumeStatsList.decode(h.answer(GetBrokerConsumeStats, is_order=True).body)
    assert all(not v for e in ordered.consume_stats_list for v in e.values())

    # Java's table of who consumes a topic records the topic's own name (see the responder)
    who = GroupList.decode(h.answer(QueryTopicConsumeByWho, topic="TH").body)
    assert sorted(who.group_list) == ["TH", "cg"]
    topics = TopicList.decode(h.answer(QueryTopicsByConsumer, group="cg").body)
    assert topics.topic_list == ["TH"] and topics.broker_addr == "127.0.0.1:10911"


def test_running_info_and_consume_directly_are_relayed_to_the_client(h: Harness) -> None:
    from rmqwire.codec.commands.consumer import (
        ConsumeMessageDirectly,
        GetConsumerRunningInfo,
    )
    from rmqwire.errors import RemotingTimeoutError

    h.create_topic("TH")
    client = AnsweringChannel("127.0.0.1:50020", lambda cmd: RemotingCommand(
        code=ResponseCode.SUCCESS, body=b'{"answer":' + str(cmd.code).encode() + b"}", flag=1))
    _heartbeat(h, "10.0.0.9@x", client)
    r = h.answer(GetConsumerRunningInfo, consumer_group="cg", client_id="10.0.0.9@x", jstack_enable=True)
    assert r.code == ResponseCode.SUCCESS and r.body == b'{"answer":307}' and r.opaque == 7
    (fwd,) = client.calls
    assert fwd.code == RequestCode.GET_CONSUMER_RUNNING_INFO and fwd.ext_fields["jstackEnable"] == "true"
    assert not fwd.is_response

    sent = h.send("TH", b"direct")
    r = h.answer(ConsumeMessageDirectly, consumer_group="cg", client_id="10.0.0.9@x", msg_id=sent.ext_fields["msgId"],
                 topic="TH", body=b"")
    assert r.body == b'{"answer":309}'
    fwd = client.calls[-1]
    assert fwd.ext_fields["brokerName"] == "broker-t" and fwd.ext_fields["topicSysFlag"] == "0"
    assert fwd.ext_fields["groupSysFlag"] == "0"
    (m,) = decode_messages(fwd.body)  # the stored message travels to the client
    assert m.body == b"direct"

    r = h.answer(GetConsumerRunningInfo, consumer_group="cg", client_id="nobody")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <cg> <nobody> not online")
    client.reply = lambda cmd: RemotingTimeoutError("no answer in time")
    r = h.answer(GetConsumerRunningInfo, consumer_group="cg", client_id="10.0.0.9@x")
    assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT and r.remark.startswith("consumer <cg> <10.0.0.9@x> Timeout")
    client.reply = lambda cmd: ConnectionError("gone")
    r = h.answer(GetConsumerRunningInfo, consumer_group="cg", client_id="10.0.0.9@x")
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith("invoke consumer <cg> <10.0.0.9@x> Exception")


def test_consumer_status_asks_every_member(h: Harness) -> None:
    from rmqwire.codec.commands.consumer import (
        GetConsumerStatusBody,
        InvokeBrokerToGetConsumerStatus,
    )
    from rmqwire.model import MessageQueue

    h.create_topic("TH")
    mq = MessageQueue("TH", "broker-t", 1)
    client = AnsweringChannel("127.0.0.1:50021", lambda cmd: RemotingCommand(
        code=ResponseCode.SUCCESS, flag=1, body=GetConsumerStatusBody(message_queue_table={mq: 5}).encode()))
    _heartbeat(h, "10.0.0.9@x", client)
    body = GetConsumerStatusBody.decode(h.answer(InvokeBrokerToGetConsumerStatus, topic="TH", group="cg").body)
    assert body.consumer_table == {"10.0.0.9@x": {mq: 5}}
    assert client.calls[0].code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT
    r = h.answer(InvokeBrokerToGetConsumerStatus, topic="TH", group="nogroup")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "No Any Consumer online in the consumer group: [nogroup]")


def test_reset_offset_server_side_and_pushed_to_clients(h: Harness) -> None:
    from rmqwire.codec.commands.consumer import ResetOffsetBodyForClient
    from rmqwire.codec.commands.offset import InvokeBrokerToResetOffset, ResetOffsetBody

    h.create_topic("TH")
    _heartbeat(h, "10.0.0.1@a", h.channel)
    _consume_some(h)
    # server side (Java 5.x's default): offsets assigned and kept for the next pull
    r = h.answer(InvokeBrokerToResetOffset, topic="TH", group="cg", timestamp=0, is_force=True)
    table = ResetOffsetBody.decode(r.body).offset_table
    assert sorted((mq.queue_id, o) for mq, o in table.items()) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert h.broker.consumer_offset_manager.query_offset("cg", "TH", 0) == 0
    moved = result_of(h.pull("TH", 3, group="cg"))
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "0"
    r = h.answer(InvokeBrokerToResetOffset, topic="TH", group="cg", timestamp=0, is_force=True, queue_id=0,
                 offset=9)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "Target offset 9 not in consume queue range [0-3]")
    r = h.answer(InvokeBrokerToResetOffset, topic="Nope", group="cg", timestamp=0, is_force=True)
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "Topic Nope does not exist")

    # client side: RESET_CONSUMER_CLIENT_OFFSET pushed (oneway) to each member
    h.broker.settings.broker.use_server_side_reset_offset = False
    h.answer(UpdateConsumerOffset, consumer_group="cg", topic="TH", queue_id=0, commit_offset=3)
    h.channel.oneway.clear()
    r = h.answer(InvokeBrokerToResetOffset, topic="TH", group="cg", timestamp=-1, is_force=False)
    assert r.code == ResponseCode.SUCCESS
    (push,) = h.channel.oneway
    assert push.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET and push.ext_fields["group"] == "cg"
    pushed = ResetOffsetBodyForClient.decode(push.body).offset_table
    assert pushed == ResetOffsetBody.decode(r.body).offset_table
    assert {mq.queue_id: o for mq, o in pushed.items()}[0] == 3  # not forced: never past the consumer
    r = h.answer(InvokeBrokerToResetOffset, topic="TH", group="gone", timestamp=0, is_force=True)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <gone> not exist")


def test_store_maintenance_codes(h: Harness) -> None:
    from rmqwire.codec.commands.admin import (
        CleanExpiredConsumeQueue,
        DeleteExpiredCommitLog,
    )

    assert h.answer(CleanExpiredConsumeQueue).code == ResponseCode.SUCCESS
    assert h.answer(DeleteExpiredCommitLog).code == ResponseCode.SUCCESS
    info = fastjson.loads(h.answer(GetBrokerRuntimeInfo).body)["table"]
    assert any(k.startswith("commitLogDiskRatio_") for k in info)


# --------------------------------------------------------------------------- QUERY_MESSAGE


def _query(h: Harness, key: str, max_num: int = 32, *, unique: bool = False, topic: str = "TQ") -> RemotingCommand:
    req = QueryMessage.request(language=LanguageCode.JAVA, topic=topic, key=key, max_num=max_num,
                               begin_timestamp=0, end_timestamp=2**62)
    if unique:
        req = dataclasses.replace(req, ext_fields={**(req.ext_fields or {}), "_UNIQUE_KEY_QUERY": "true"})
    return result_of(h.raw(req))


def test_query_message_by_key_and_unique_key(h: Harness) -> None:
    h.create_topic("TQ")
    sent = [h.send("TQ", b"q%d" % i, props={"KEYS": f"k{i} shared"}) for i in range(40)]
    r = _query(h, "k3")
    assert r.code == ResponseCode.SUCCESS
    (m,) = decode_messages(r.body)
    assert m.body == b"q3" and m.msg_id == sent[3].ext_fields["transactionId"]
    last = parse_offset_msg_id(sent[-1].ext_fields["msgId"]).commit_log_offset
    assert r.ext_fields["indexLastUpdatePhyoffset"] == str(last)
    assert int(r.ext_fields["indexLastUpdateTimestamp"]) > 0
    # by unique key: the request's maxNum is replaced by defaultQueryMaxNum (32)
    r = _query(h, sent[5].ext_fields["transactionId"], max_num=1, unique=True)
    assert [m.body for m in decode_messages(r.body)] == [b"q5"]
    assert len(decode_messages(_query(h, "shared", max_num=3).body)) == 3
    assert len(decode_messages(_query(h, "shared", max_num=1000).body)) == 40  # under maxMsgsNumBatch
    h.broker.store.config.max_msgs_num_batch = 10
    assert [m.body for m in decode_messages(_query(h, "shared", max_num=1000).body)] == \
        [b"q%d" % i for i in range(30, 40)]  # the newest, oldest first
    r = _query(h, "shared", max_num=5, unique=True)
    assert len(decode_messages(r.body)) == 10  # 32, capped by maxMsgsNumBatch


def test_query_message_not_found(h: Harness) -> None:
    h.create_topic("TQ")
    h.send("TQ", props={"KEYS": "present"})
    r = _query(h, "absent")
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    assert r.remark == "can not find message, maybe time range not correct"
    assert r.ext_fields["indexLastUpdatePhyoffset"] == "0" and not r.body
    assert _query(h, "present", topic="OtherTopic").code == ResponseCode.QUERY_NOT_FOUND


def test_view_message_by_id_unknown_offset(h: Harness) -> None:
    r = h.answer(ViewMessageById, offset=123_456)
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == "can not find message by the offset, 123456"
