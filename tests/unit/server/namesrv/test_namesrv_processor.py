"""The NameServer processors called with typed requests: what each code answers, including the
answers Java gives to missing fields and malformed bodies."""

from __future__ import annotations

import json
import zlib

from namesrv_helpers import Namesrv, make_namesrv, register_body

from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.codes import V5_0_0
from rmqwire.codec.commands.namesrv import (
    AddWritePermOfBroker,
    BrokerHeartbeat,
    DeleteKVConfig,
    DeleteTopicInNamesrv,
    GetAllTopicListFromNameserver,
    GetBrokerMemberGroup,
    GetBrokerMemberGroupResponseBody,
    GetHasUnitSubUnUnitTopicList,
    GetKVConfig,
    GetKVListByNamespace,
    GetNamesrvConfig,
    GetSystemTopicListFromNs,
    GetTopicsByCluster,
    GetUnitTopicList,
    KVTable,
    PutKVConfig,
    QueryDataVersion,
    RegisterBroker,
    RegisterTopicInNamesrv,
    UnregisterBroker,
    UpdateNamesrvConfig,
    WipeWritePermOfBroker,
)
from rmqwire.codec.commands.route import (
    BrokerData,
    ClusterInfo,
    GetBrokerClusterInfo,
    GetRouteInfo,
    QueueData,
    TopicRouteData,
)
from rmqwire.codec.commands.topic import DataVersion, TopicList
from rmqwire.codec.message import body_crc32

A = "127.0.0.1:10911"
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def reg(ns: Namesrv, name: str = "broker-a", addr: str = A, *topics: str, broker_id: int = 0,
        counter: int = 1, channel: object = None, **header) -> RemotingCommand:
    body = register_body(*(topics or ("TopicA", "TopicB")), counter=counter).encode(standard=False)
    fields = dict(broker_name=name, broker_addr=addr, cluster_name="DefaultCluster",
                  ha_server_addr=addr.replace("10911", "10912"), broker_id=broker_id,
                  enable_acting_master=False, compressed=False, body_crc32=body_crc32(body))
    fields.update(header)
    return ns.answer(RegisterBroker, body=body, channel=channel, **fields)


# ---- GET_ROUTEINFO_BY_TOPIC ----------------------------------------------------------------------


def test_route_in_the_requested_json_dialect(namesrv):
    reg(namesrv)
    standard = namesrv.answer(GetRouteInfo, topic="TopicA")  # version 479 >= 401
    assert standard.code == ResponseCode.SUCCESS
    assert standard.body == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4}]}'
    )
    old = namesrv.answer(GetRouteInfo, topic="TopicA", version=317)
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in old.body
    asked = namesrv.answer(GetRouteInfo, topic="TopicA", version=317, accept_standard_json_only=True)
    assert asked.body == standard.body
    # served from the cache the second time, same bytes
    assert namesrv.answer(GetRouteInfo, topic="TopicA").body == standard.body


def test_unknown_topic_is_topic_not_exist_with_javas_remark(namesrv):
    r = namesrv.answer(GetRouteInfo, topic="Nope")
    assert (r.code, r.remark, r.body) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "No topic route info in name server for the topic: Nope" + FAQ, None)
    bare = namesrv.raw(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}))
    assert bare.code == ResponseCode.TOPIC_NOT_EXIST
    assert bare.remark.startswith("No topic route info in name server for the topic: null\n")


def test_route_cache_follows_changes(namesrv):
    reg(namesrv)
    before = namesrv.answer(GetRouteInfo, topic="TopicA").body
    namesrv.answer(WipeWritePermOfBroker, broker_name="broker-a")
    after = namesrv.answer(GetRouteInfo, topic="TopicA")
    assert b'"perm":4' in after.body and after.body != before
    reg(namesrv, counter=2)  # a newer DataVersion puts the broker's perm back
    assert b'"perm":6' in namesrv.answer(GetRouteInfo, topic="TopicA").body


def test_order_topic_conf_only_when_enabled(tmp_path):
    ns = make_namesrv()
    reg(ns)
    ns.answer(PutKVConfig, namespace="ORDER_TOPIC_CONFIG", key="TopicA", value="broker-a:4")
    assert b"orderTopicConf" not in ns.answer(GetRouteInfo, topic="TopicA").body
    ns.settings.namesrv.order_message_enable = True
    route = TopicRouteData.decode(ns.answer(GetRouteInfo, topic="TopicA").body)
    assert route.order_topic_conf == "broker-a:4"


def test_zone_mode_filters_brokers_of_other_zones(namesrv):
    reg(namesrv, "broker-a", A, **{"extra": {"__ZONE_NAME": "z1"}})
    reg(namesrv, "broker-b", "127.0.0.2:10911", **{"extra": {"__ZONE_NAME": "z2"}})
    all_ = TopicRouteData.decode(namesrv.answer(GetRouteInfo, topic="TopicA").body)
    assert {b.broker_name for b in all_.broker_datas} == {"broker-a", "broker-b"}
    assert {b.zone_name for b in all_.broker_datas} == {"z1", "z2"}
    zoned = namesrv.answer(GetRouteInfo, topic="TopicA",
                           extra={"__ZONE_MODE": "true", "__ZONE_NAME": "Z1"})
    route = TopicRouteData.decode(zoned.body)
    assert [b.broker_name for b in route.broker_datas] == ["broker-a"]
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    assert b'{0:"' in zoned.body  # Java's hook re-encodes in fastjson's default style


def test_name_server_not_ready_while_waiting_for_service():
    ns = make_namesrv({"needWaitForService": "true", "waitSecondsForService": "10"})
    reg(ns)
    r = ns.answer(GetRouteInfo, topic="TopicA")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")
    ns.clock.advance(10_000)
    assert ns.answer(GetRouteInfo, topic="TopicA").code == ResponseCode.SUCCESS


# ---- REGISTER_BROKER -----------------------------------------------------------------------------


def test_register_answers_with_the_order_topic_kv_table(namesrv):
    r = reg(namesrv)
    assert (r.code, r.body, r.ext_fields or {}) == (ResponseCode.SUCCESS, None, {})
    namesrv.answer(PutKVConfig, namespace="ORDER_TOPIC_CONFIG", key="TopicA", value="broker-a:4")
    r = reg(namesrv)
    assert KVTable.decode(r.body).table == {"TopicA": "broker-a:4"}
    namesrv.settings.namesrv.return_order_topic_config_to_broker = False
    assert reg(namesrv).body is None


def test_slave_registration_answer_names_its_master(namesrv):
    reg(namesrv)
    r = reg(namesrv, "broker-a", "127.0.0.1:10921", broker_id=1)
    assert r.ext_fields == {"masterAddr": A, "haServerAddr": "127.0.0.1:10912"}


def test_register_records_the_channel(namesrv):
    channel = object()
    reg(namesrv, channel=channel)
    assert namesrv.channels == [channel]


def test_compressed_bodies_flagged_or_sniffed(namesrv):
    body = register_body("TopicA", "TopicB").encode_compressed(V5_0_0)
    assert body[:1] == b"\x78"
    fields = dict(broker_name="broker-a", broker_addr=A, cluster_name="DefaultCluster",
                  ha_server_addr="x", broker_id=0, enable_acting_master=False)
    # 5.x brokers send compressed=false with a compressed body: recognised by its zlib header.
    assert namesrv.answer(RegisterBroker, body=body, compressed=False, **fields).code == 0
    assert namesrv.answer(RegisterBroker, body=body, compressed=True, **fields).code == 0
    assert namesrv.routes.pickup_topic_route_data("TopicB") is not None


def test_crc_mismatch_and_bad_bodies(namesrv):
    body = register_body("TopicA", "TopicB").encode(standard=False)
    fields = dict(broker_name="broker-a", broker_addr=A, cluster_name="DefaultCluster",
                  ha_server_addr="x", broker_id=0, enable_acting_master=False, compressed=False)
    r = namesrv.answer(RegisterBroker, body=body, body_crc32=body_crc32(body) ^ 1, **fields)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    for bad in (b"{not json", b"[1,2]", zlib.compress(b"\x00\x00"), b'{"topicConfigSerializeWrapper":7}'):
        r = namesrv.answer(RegisterBroker, body=bad, body_crc32=0, **fields)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark.startswith("org.apache.rocketmq.remoting.exception.RemotingCommandException:"
                                   " Failed to decode RegisterBrokerBody")
    assert namesrv.routes.broker_addr_table == {}


def test_register_with_missing_fields_as_java_answers(namesrv):
    body = register_body("TopicA", "TopicB").encode(standard=False)
    # brokerId null: Java unboxes it and throws -> SYSTEM_ERROR.
    r = namesrv.unchecked(RegisterBroker, body=body, broker_name="b", broker_addr=A,
                          cluster_name="C", ha_server_addr="x", compressed=False)
    assert r.code == ResponseCode.SYSTEM_ERROR
    # clusterName null: Java's registerBroker swallows the exception -> SUCCESS, nothing stored.
    r = namesrv.unchecked(RegisterBroker, body=body, broker_name="b", broker_addr=A, broker_id=0,
                          ha_server_addr="x", compressed=False)
    assert r.code == ResponseCode.SUCCESS
    assert namesrv.routes.broker_addr_table == {}
    # No body at all: an empty registration (DataVersion zero), accepted.
    r = namesrv.answer(RegisterBroker, broker_name="b", broker_addr=A, broker_id=0,
                       cluster_name="C", ha_server_addr="x", compressed=False)
    assert r.code == ResponseCode.SUCCESS
    assert "b" in namesrv.routes.broker_addr_table


def test_single_topic_from_unknown_broker_is_refused(namesrv):
    r = reg(namesrv, "broker-a", A, "OnlyOne")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "register broker failed")


def test_old_broker_versions_send_a_bare_topic_config_wrapper(namesrv):
    wrapper = register_body("TopicA", "TopicB").topic_config_serialize_wrapper
    r = namesrv.answer(RegisterBroker, body=wrapper.encode(standard=False), version=30,
                       broker_name="old", broker_addr=A, cluster_name="C", ha_server_addr="x",
                       broker_id=0, compressed=False)
    assert r.code == ResponseCode.SUCCESS
    assert namesrv.routes.pickup_topic_route_data("TopicB") is not None


# ---- liveness ------------------------------------------------------------------------------------


def test_unregister_heartbeat_and_query_data_version(namesrv):
    reg(namesrv, counter=3)
    namesrv.clock.advance(100_000)
    hb = namesrv.answer(BrokerHeartbeat, cluster_name="DefaultCluster", broker_addr=A,
                        broker_name="broker-a")
    assert hb is None  # oneway: never answered
    dv = namesrv.answer(QueryDataVersion, body=DataVersion(0, 1000, 3), cluster_name="DefaultCluster",
                        broker_addr=A, broker_name="broker-a", broker_id=0)
    assert dv.ext_fields == {"changed": "false"}
    assert DataVersion.decode(dv.body) == DataVersion(0, 1000, 3)
    namesrv.clock.advance(100_000)
    assert namesrv.routes.scan_not_active_broker() == []  # both refreshed the timestamp
    changed = namesrv.answer(QueryDataVersion, body=DataVersion(0, 1000, 4),
                             cluster_name="DefaultCluster", broker_addr=A, broker_name="broker-a",
                             broker_id=0)
    assert changed.ext_fields == {"changed": "true"}
    unknown = namesrv.answer(QueryDataVersion, body=DataVersion(0, 1, 1), cluster_name="X",
                             broker_addr="nope:1", broker_name="x", broker_id=0)
    assert (unknown.ext_fields, unknown.body) == ({"changed": "true"}, None)
    no_body = namesrv.unchecked(QueryDataVersion, cluster_name="X", broker_addr="n:1",
                                broker_name="x", broker_id=0)
    assert no_body.code == ResponseCode.SYSTEM_ERROR
    r = namesrv.answer(UnregisterBroker, cluster_name="DefaultCluster", broker_addr=A,
                       broker_name="broker-a", broker_id=0)
    assert r.code == ResponseCode.SUCCESS
    assert namesrv.answer(GetRouteInfo, topic="TopicA").code == ResponseCode.TOPIC_NOT_EXIST


# ---- cluster, topics, permissions ---------------------------------------------------------------


def test_cluster_info_is_always_fastjson_style(namesrv):
    reg(namesrv)
    r = namesrv.answer(GetBrokerClusterInfo)
    assert r.body == (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},'
                      b'"brokerName":"broker-a","cluster":"DefaultCluster",'
                      b'"enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":'
                      b'["broker-a"]}}')
    assert ClusterInfo.decode(r.body).cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    empty = make_namesrv().answer(GetBrokerClusterInfo)
    assert empty.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


def test_member_group(namesrv):
    reg(namesrv)
    r = namesrv.answer(GetBrokerMemberGroup, cluster_name="DefaultCluster", broker_name="broker-a")
    group = GetBrokerMemberGroupResponseBody.decode(r.body).broker_member_group
    assert group.broker_addrs == {0: A}


def test_write_perm_counts(namesrv):
    reg(namesrv)
    r = namesrv.answer(WipeWritePermOfBroker, broker_name="broker-a")
    assert r.ext_fields == {"wipeTopicCount": "2"}
    r = namesrv.answer(AddWritePermOfBroker, broker_name="broker-a")
    assert r.ext_fields == {"addTopicCount": "2"}
    bare = namesrv.raw(RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {}))
    assert bare.ext_fields == {"wipeTopicCount": "0"}


def test_topic_lists_and_their_switches(namesrv):
    reg(namesrv)
    all_ = TopicList.decode(namesrv.answer(GetAllTopicListFromNameserver).body)
    assert set(all_.topic_list) == {"TopicA", "TopicB"} and all_.broker_addr is None
    by_cluster = namesrv.answer(GetTopicsByCluster, cluster="DefaultCluster")
    assert set(TopicList.decode(by_cluster.body).topic_list) == {"TopicA", "TopicB"}
    assert TopicList.decode(namesrv.answer(GetTopicsByCluster, cluster="x").body).topic_list == []
    system = TopicList.decode(namesrv.answer(GetSystemTopicListFromNs).body)
    assert set(system.topic_list) == {"DefaultCluster", "broker-a"} and system.broker_addr == A
    assert TopicList.decode(namesrv.answer(GetUnitTopicList).body).topic_list == []
    namesrv.settings.namesrv.enable_all_topic_list = False
    namesrv.settings.namesrv.enable_topic_list = False
    for cmd, fields in ((GetAllTopicListFromNameserver, {}), (GetTopicsByCluster, {"cluster": "c"}),
                        (GetUnitTopicList, {}), (GetHasUnitSubUnUnitTopicList, {})):
        r = namesrv.answer(cmd, **fields)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


def test_delete_and_register_topic(namesrv):
    reg(namesrv)
    assert namesrv.answer(DeleteTopicInNamesrv, topic="TopicA").code == 0
    assert namesrv.answer(GetRouteInfo, topic="TopicA").code == ResponseCode.TOPIC_NOT_EXIST
    body = TopicRouteData(queue_datas=[QueueData("broker-a", 2, 2, 6, 0)],
                          broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: A})])
    assert namesrv.answer(RegisterTopicInNamesrv, topic="NewTopic", body=body).code == 0
    route = TopicRouteData.decode(namesrv.answer(GetRouteInfo, topic="NewTopic").body)
    assert route.queue_datas == [QueueData("broker-a", 2, 2, 6, 0)]
    assert namesrv.answer(DeleteTopicInNamesrv, topic="NewTopic", cluster_name="DefaultCluster").code == 0
    assert namesrv.answer(GetRouteInfo, topic="NewTopic").code == ResponseCode.TOPIC_NOT_EXIST
    no_body = namesrv.raw(RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "x"}))
    assert no_body.code == ResponseCode.SYSTEM_ERROR


# ---- KV config -----------------------------------------------------------------------------------


def test_kv_requests(namesrv):
    assert namesrv.answer(PutKVConfig, namespace="NS", key="k", value="v").code == 0
    assert namesrv.answer(GetKVConfig, namespace="NS", key="k").ext_fields == {"value": "v"}
    miss = namesrv.answer(GetKVConfig, namespace="NS", key="other")
    assert (miss.code, miss.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                        "No config item, Namespace: NS Key: other")
    listed = namesrv.answer(GetKVListByNamespace, namespace="NS")
    assert listed.body == b'{"table":{"k":"v"}}'
    gone = namesrv.answer(GetKVListByNamespace, namespace="none")
    assert (gone.code, gone.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: none")
    assert namesrv.answer(DeleteKVConfig, namespace="NS", key="k").code == 0
    assert namesrv.answer(GetKVConfig, namespace="NS", key="k").code == ResponseCode.QUERY_NOT_FOUND
    assert json.loads(namesrv.kv.path.read_text()) == {"configTable": {"NS": {}}}
    no_key = namesrv.raw(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "NS"}))
    assert (no_key.code, no_key.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    bare_get = namesrv.raw(RemotingCommand.request(RequestCode.GET_KV_CONFIG, {}))
    assert bare_get.remark == "No config item, Namespace: null Key: null"


# ---- NameServer config ----------------------------------------------------------------------------


def test_get_config_lists_sorted_items(namesrv):
    text = namesrv.answer(GetNamesrvConfig).body.decode()
    lines = text.splitlines()
    assert lines == sorted(lines)
    keys = dict(line.split("=", 1) for line in lines)
    assert keys["listenPort"] == "9876" and keys["orderMessageEnable"] == "false"
    assert "rocketmqHome" not in keys or keys["rocketmqHome"]  # null items are left out


def test_update_config_is_refused_by_default(namesrv, ns_log):
    r = namesrv.answer(UpdateNamesrvConfig, body=b"orderMessageEnable=true\n")
    assert r.code == ResponseCode.NO_PERMISSION
    assert "enableUpdateNamesrvConfig" in r.remark
    assert namesrv.settings.namesrv.order_message_enable is False
    assert any("refused" in f for f in ns_log.formats())


def test_update_config_black_list_and_allow_list():
    ns = make_namesrv({"enableUpdateNamesrvConfig": "true"})
    for body in (b"configStorePath=/etc/cron.d/x\n", b"kvConfigPath=/tmp/x\n",
                 b"rocketmqHome=/x\n", b"configBlackList=\n"):
        r = ns.answer(UpdateNamesrvConfig, body=body)
        assert r.code == ResponseCode.NO_PERMISSION
        assert r.remark.startswith("Can not update config in black list.")
    for body in (b"productEnvName=x\n", b"listenPort=1\n", b"clusterTest=true\n"):
        r = ns.answer(UpdateNamesrvConfig, body=body)
        assert r.code == ResponseCode.NO_PERMISSION and "may not be updated" in r.remark
    assert ns.answer(UpdateNamesrvConfig, body=b"waitSecondsForService=soon\n").code == \
        ResponseCode.NO_PERMISSION
    ok = ns.answer(UpdateNamesrvConfig, body=b"orderMessageEnable=true\nwaitSecondsForService=3\n")
    assert ok.code == ResponseCode.SUCCESS
    assert ns.settings.namesrv.order_message_enable is True
    assert ns.settings.namesrv.wait_seconds_for_service == 3
    assert b"orderMessageEnable=true" in ns.answer(GetNamesrvConfig).body
    assert ns.answer(UpdateNamesrvConfig).code == ResponseCode.SUCCESS  # no body: nothing to do


def test_unknown_codes_are_not_supported(namesrv):
    r = namesrv.raw(RemotingCommand.request(RequestCode.SEND_MESSAGE, {}))
    assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                  " request type 10 not supported")
    r = namesrv.raw(RemotingCommand.request(9999, {}))
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_unparsable_header_values_answer_system_error(namesrv):
    r = namesrv.raw(RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": "b", "brokerAddr": A, "clusterName": "C", "haServerAddr": "x",
        "brokerId": "zero", "compressed": "false"}))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "RemotingCommandException" in r.remark


def test_lenient_bodies_take_the_generic_reader(namesrv):
    # fastjson casts "8" into an int property; the fast reader leaves such bodies to the codec.
    body = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
            b'"stateVersion":0,"timestamp":5},"topicConfigTable":{'
            b'"T1":{"perm":6,"readQueueNums":"8","topicName":"T1","writeQueueNums":8},'
            b'"T2":{"perm":6,"readQueueNums":4,"topicName":"T2","writeQueueNums":4}}}}')
    r = namesrv.answer(RegisterBroker, body=body, broker_name="b", broker_addr=A, cluster_name="C",
                       ha_server_addr="x", broker_id=0, enable_acting_master=False, compressed=False)
    assert r.code == ResponseCode.SUCCESS
    assert namesrv.routes.pickup_topic_route_data("T1").queue_datas[0].read_queue_nums == 8


def test_the_same_body_again_still_restores_deleted_topics(namesrv):
    big = [f"Topic{i}" for i in range(200)]  # large enough to be remembered
    reg(namesrv, "broker-a", A, *big)
    namesrv.answer(DeleteTopicInNamesrv, topic="Topic7")
    assert namesrv.answer(GetRouteInfo, topic="Topic7").code == ResponseCode.TOPIC_NOT_EXIST
    reg(namesrv, "broker-a", A, *big)  # the periodic re-registration, byte for byte the same
    assert namesrv.answer(GetRouteInfo, topic="Topic7").code == ResponseCode.SUCCESS
    # a changed body is read again
    reg(namesrv, "broker-a", A, *big[:150], counter=2)
    assert namesrv.routes.pickup_topic_route_data("Topic199") is not None  # Java keeps old topics
    assert namesrv.routes.query_broker_topic_config("DefaultCluster", A).counter == 2
