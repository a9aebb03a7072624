"""The broker's config files in the official formats (checked against files an official 5.3.3
broker wrote), written atomically with the previous content in ``.bak``, read back from the
backup when the file is unusable, and never trusted for path-unsafe topic names."""

from __future__ import annotations

from pathlib import Path

from rmqwire.codec import fastjson
from rmqwire.codec.commands.admin import SubscriptionGroupConfig
from rmqwire.codec.commands.topic import TopicConfig
from rmqwire.server.broker.config import BrokerConfig, BrokerSettings, StoreExtras
from rmqwire.server.broker.config_file import ConfigFile, pretty_json
from rmqwire.server.broker.consumer_offset import ConsumerOffsetManager
from rmqwire.server.broker.subscription_group import (
    SYSTEM_GROUPS,
    SubscriptionGroupManager,
)
from rmqwire.server.broker.topic_config import TopicConfigManager

# Written by the official 5.3.3 broker (tools.reference, 4 queues, one group consuming 8 messages).
OFFICIAL_CONSUMER_OFFSET = (
    '{\n\t"dataVersion":{\n\t\t"counter":0,\n\t\t"stateVersion":0,\n\t\t"timestamp":1795485682977\n\t},\n'
    '\t"groupTopicMap":{\n\t\t"GoldGroup":["GoldTopic"]\n\t},\n'
    '\t"offsetTable":{\n\t\t"GoldTopic@GoldGroup":{0:2,1:2,2:2,3:2\n\t\t}\n\t}\n}'
)
OFFICIAL_TOPIC = (
    '\t\t"GoldTopic":{\n\t\t\t"attributes":{},\n\t\t\t"order":false,\n\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":4,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"GoldTopic",\n'
    '\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}'
)
OFFICIAL_GROUP = (
    '\t\t"GoldGroup":{\n\t\t\t"attributes":{},\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":true,\n'
    '\t\t\t"consumeEnable":true,\n\t\t\t"consumeFromMinEnable":true,\n\t\t\t"consumeMessageOrderly":false,\n'
    '\t\t\t"consumeTimeoutMinute":15,\n\t\t\t"groupName":"GoldGroup",\n\t\t\t"groupRetryPolicy":{\n'
    '\t\t\t\t"type":"CUSTOMIZED"\n\t\t\t},\n\t\t\t"groupSysFlag":0,\n\t\t\t"notifyConsumerIdsChangedEnable":true,\n'
    '\t\t\t"retryMaxTimes":16,\n\t\t\t"retryQueueNums":1,\n\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}'
)


def test_consumer_offset_file_is_byte_for_byte_official(tmp_path: Path) -> None:
    com = ConsumerOffsetManager(tmp_path / "consumerOffset.json", clock=lambda: 1795485682977)
    for q in range(4):
        com.commit_offset("peer", "GoldGroup", "GoldTopic", q, 2)
    com.persist()
    assert (tmp_path / "consumerOffset.json").read_text() == OFFICIAL_CONSUMER_OFFSET
    again = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    again.load()
    assert again.query_offsets("GoldGroup", "GoldTopic") == {0: 2, 1: 2, 2: 2, 3: 2}
    assert again.data_version.timestamp == 1795485682977


def test_official_offset_file_loads(tmp_path: Path) -> None:
    (tmp_path / "consumerOffset.json").write_text(OFFICIAL_CONSUMER_OFFSET)
    com = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    com.load()
    assert com.query_offset("GoldGroup", "GoldTopic", 3) == 2 and com.query_offset("GoldGroup", "GoldTopic", 4) == -1


def test_topics_and_groups_are_written_as_java_writes_them(tmp_path: Path) -> None:
    tcm = TopicConfigManager(BrokerConfig(broker_name="b"), StoreExtras(), tmp_path / "topics.json")
    tcm.update(TopicConfig(topic_name="GoldTopic", read_queue_nums=4, write_queue_nums=4))
    text = (tmp_path / "topics.json").read_text()
    assert OFFICIAL_TOPIC in text and text.startswith('{\n\t"dataVersion":{\n\t\t"counter":1,')
    sgm = SubscriptionGroupManager(BrokerConfig(), tmp_path / "subscriptionGroup.json")
    sgm.find("GoldGroup")
    text = (tmp_path / "subscriptionGroup.json").read_text()
    assert OFFICIAL_GROUP in text and '\t"forbiddenTable":{},\n' in text
    loaded = SubscriptionGroupManager(BrokerConfig(auto_create_subscription_group=False),
                                      tmp_path / "subscriptionGroup.json")
    loaded.load()
    assert loaded.get("GoldGroup") == SubscriptionGroupConfig(group_name="GoldGroup")
    assert set(SYSTEM_GROUPS) <= set(loaded.table)


def test_system_topics_of_a_broker(tmp_path: Path) -> None:
    tcm = TopicConfigManager(BrokerConfig(broker_name="broker-a", broker_cluster_name="C1"), StoreExtras(), None)
    perms = {name: (cfg.read_queue_nums, cfg.perm) for name, cfg in tcm.table.items()}
    assert perms == {
        "SELF_TEST_TOPIC": (1, 6), "TBW102": (8, 7), "BenchmarkTest": (1024, 6), "C1": (16, 7),
        "broker-a": (1, 7), "OFFSET_MOVED_EVENT": (1, 6), "SCHEDULE_TOPIC_XXXX": (18, 6),
        "C1_REPLY_TOPIC": (1, 6), "rmq_sys_REVIVE_LOG_C1": (8, 6), "rmq_sys_SYNC_BROKER_MEMBER_broker-a": (1, 1),
        "RMQ_SYS_TRANS_HALF_TOPIC": (1, 6), "RMQ_SYS_TRANS_OP_HALF_TOPIC": (1, 6), "rmq_sys_wheel_timer": (1, 6),
    }
    no_auto = TopicConfigManager(BrokerConfig(auto_create_topic_enable=False), StoreExtras(timer_wheel_enable=False), None)
    assert "TBW102" not in no_auto.table and "rmq_sys_wheel_timer" not in no_auto.table


def test_backup_kept_and_used(tmp_path: Path) -> None:
    f = ConfigFile(tmp_path / "x.json")
    f.save({"a": 1})
    f.save({"a": 2})
    assert fastjson.loads((tmp_path / "x.json.bak").read_bytes()) == {"a": 1}
    (tmp_path / "x.json").write_text('{"a":')  # torn by something else: the backup answers
    assert f.load() == {"a": 1}
    (tmp_path / "x.json").write_text("")
    assert f.load() == {"a": 1}
    assert not list(tmp_path.glob(".x.json.*"))  # no temporary file left


def test_unsafe_topic_names_in_topics_json_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text(pretty_json({"topicConfigTable": {
        "../../etc": TopicConfig(topic_name="../../etc").to_fastjson(),
        "Fine": TopicConfig(topic_name="Fine").to_fastjson(),
    }}))
    tcm = TopicConfigManager(BrokerConfig(), StoreExtras(), tmp_path / "topics.json")
    tcm.load()
    assert "Fine" in tcm.table and "../../etc" not in tcm.table
    assert tcm.create_in_send("a/b", "TBW102", "peer", 4, 0) is None
    assert tcm.create_in_send_back("%RETRY%../x", 1, 6) is None


def test_settings_from_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# a comment\nbrokerName=b1\nlistenPort=20911\nbrokerRole=SLAVE\nbrokerId=2\n"
                    "namesrvAddr=127.0.0.1:1;127.0.0.1:2\nmaxMessageSize=1024\nflushDiskType=SYNC_FLUSH\n"
                    "defaultTopicQueueNums=x\n")
    s = BrokerSettings.load(conf)
    assert (s.broker.broker_name, s.listen_port, s.fast_listen_port, s.ha_listen_port) == ("b1", 20911, 20909, 20912)
    assert s.broker.broker_id == 2 and s.namesrv_addrs == ["127.0.0.1:1", "127.0.0.1:2"]
    assert s.store.max_message_size == 1024 and s.is_sync_flush
    assert s.ignored == ["defaultTopicQueueNums"] and s.broker.default_topic_queue_nums == 8
    master = BrokerSettings.from_properties({"brokerId": "3"})
    assert master.broker.broker_id == 0  # a master's id is 0, as Java sets it
    assert master.all_configs()["brokerId"] == "0"
