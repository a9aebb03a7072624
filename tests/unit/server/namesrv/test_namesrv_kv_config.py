"""KVConfigManager persistence (the official kvConfig.json, atomic, with a backup) and the
NameServer config: java.util.Properties parsing, typed keys, -p output, GET_NAMESRV_CONFIG."""

from __future__ import annotations

import json
import os

import pytest

from rmqwire.server.namesrv.config import NamesrvSettings, parse_properties
from rmqwire.server.namesrv.kv import KVConfigError, KVConfigManager

# ---- KV ------------------------------------------------------------------------------------------


def test_kv_file_is_the_official_format_and_reloads(tmp_path):
    path = tmp_path / "sub" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.load()  # no file yet: empty
    kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
    kv.put("NS", "k", "v")
    kv.put("NS", "k", "v2")
    assert json.loads(path.read_text()) == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4"}, "NS": {"k": "v2"}}}
    assert path.read_text().startswith('{"configTable":{')
    # the previous content is kept as .bak, as Java's MixAll.string2File does
    assert json.loads((tmp_path / "sub" / "kvConfig.json.bak").read_text())["configTable"]["NS"] == {"k": "v"}
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    again = KVConfigManager(path)
    again.load()
    assert again.get("NS", "k") == "v2"
    assert again.get_kv_list("ORDER_TOPIC_CONFIG") == b'{"table":{"TopicA":"broker-a:4"}}'
    assert again.get_kv_list("missing") is None


def test_kv_reads_a_file_written_by_java(tmp_path):
    # fastjson's default style, as the Java NameServer writes it
    path = tmp_path / "kvConfig.json"
    path.write_text('{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"b:8"},"x":{}}}')
    kv = KVConfigManager(path)
    kv.load()
    assert kv.get("ORDER_TOPIC_CONFIG", "T") == "b:8"
    assert kv.get_kv_list("x") == b'{"table":{}}'


def test_null_values_are_stored_but_never_returned_or_written(tmp_path):
    kv = KVConfigManager(tmp_path / "kv.json")
    kv.put("NS", "k", None)
    assert kv.get("NS", "k") is None
    assert kv.get_kv_list("NS") == b'{"table":{}}'
    assert json.loads((tmp_path / "kv.json").read_text()) == {"configTable": {"NS": {}}}


def test_corrupt_file_falls_back_to_the_backup(tmp_path):
    path = tmp_path / "kv.json"
    kv = KVConfigManager(path)
    kv.put("NS", "a", "1")
    kv.put("NS", "b", "2")
    path.write_text('{"configTable":{"NS":')  # torn by something else
    recovered = KVConfigManager(path)
    recovered.load()
    assert recovered.get("NS", "a") == "1"
    (tmp_path / "kv.json.bak").write_text("garbage")
    with pytest.raises(KVConfigError):
        KVConfigManager(path).load()


def test_in_memory_kv_has_no_file(tmp_path):
    kv = KVConfigManager(None)
    kv.load()
    kv.put("NS", "k", "v")
    kv.delete("NS", "k")
    kv.delete(None, None)
    assert kv.config_table == {"NS": {}}


def test_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "kv.json"
    kv = KVConfigManager(path)
    kv.put("NS", "k", "v")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        kv.put("NS", "k", "new")
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"configTable": {"NS": {"k": "v"}}}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ---- properties ----------------------------------------------------------------------------------


def test_java_properties_syntax():
    text = (
        "# comment\n! also a comment\n  listenPort = 9999\nbindAddress:127.0.0.1\n"
        "kvConfigPath /tmp/a\\ b.json\nmulti=one \\\n    two\nunicode=caf\\u00e9\\tend\n"
        "empty=\n=novalue\ndup=1\ndup=2\n"
    )
    assert parse_properties(text) == {
        "listenPort": "9999", "bindAddress": "127.0.0.1", "kvConfigPath": "/tmp/a b.json",
        "multi": "one two", "unicode": "caf\u00e9\tend", "empty": "", "": "novalue", "dup": "2",
    }
    # bytes are ISO-8859-1, as Properties.load(InputStream) reads them
    assert parse_properties("k=é".encode("latin-1")) == {"k": "é"}


def test_settings_from_a_file(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=19876\norderMessageEnable=TRUE\nscanNotActiveBrokerInterval=abc\n"
                    "writeBufferHighWaterMark=65536\nproductEnvName=  test  \nscanAvailableNameSrv=false\n"
                    "custom.key=kept\n")
    s = NamesrvSettings.load(conf)
    assert s.server.listen_port == 19876
    assert s.namesrv.order_message_enable is True
    assert s.namesrv.scan_not_active_broker_interval == 5000  # did not parse: Java ignores it
    assert s.ignored == ["scanNotActiveBrokerInterval"]
    assert s.server.write_buffer_high_water_mark == s.client.write_buffer_high_water_mark == 65536
    assert s.namesrv.product_env_name == "test"
    assert s.client.scan_available_name_srv is False
    assert s.namesrv.config_store_path == str(conf)
    configs = s.all_configs()
    assert configs["custom.key"] == "kept" and configs["listenPort"] == "19876"
    assert list(configs) == sorted(configs)
    assert "clientWorkerThreads" not in configs  # the client group is not registered in Java


#: `mqnamesrv -p` of the official 5.3.3 (key order as printed).
OFFICIAL_PRINT_KEYS = """rocketmqHome kvConfigPath configStorePath productEnvName clusterTest
orderMessageEnable returnOrderTopicConfigToBroker clientRequestThreadPoolNums defaultThreadPoolNums
clientRequestThreadPoolQueueCapacity defaultThreadPoolQueueCapacity scanNotActiveBrokerInterval
unRegisterBrokerQueueCapacity supportActingMaster enableAllTopicList enableTopicList
notifyMinBrokerIdChanged enableControllerInNamesrv needWaitForService waitSecondsForService
deleteTopicWithBrokerRegistration configBlackList bindAddress listenPort serverWorkerThreads
serverCallbackExecutorThreads serverSelectorThreads serverOnewaySemaphoreValue
serverAsyncSemaphoreValue serverChannelMaxIdleTimeSeconds serverSocketSndBufSize
serverSocketRcvBufSize writeBufferHighWaterMark writeBufferLowWaterMark serverSocketBacklog
serverNettyWorkerGroupEnable serverPooledByteBufAllocatorEnable enableShutdownGracefully
shutdownWaitTimeSeconds useEpollNativeSelector clientWorkerThreads clientCallbackExecutorThreads
clientOnewaySemaphoreValue clientAsyncSemaphoreValue connectTimeoutMillis channelNotActiveInterval
isScanAvailableNameSrv clientChannelMaxIdleTimeSeconds clientSocketSndBufSize clientSocketRcvBufSize
clientPooledByteBufAllocatorEnable clientCloseSocketIfTimeout useTLS socksProxyConfig
writeBufferHighWaterMark writeBufferLowWaterMark disableCallbackExecutor disableNettyWorkerGroup
maxReconnectIntervalTimeSeconds enableReconnectForGoAway""".split()


def test_print_config_lines_follow_mqnamesrv(monkeypatch):
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    lines = NamesrvSettings().print_lines(now=0)
    keys = [line.split(" - ", 1)[1].split("=", 1)[0] for line in lines]
    assert keys[: len(OFFICIAL_PRINT_KEYS)] == OFFICIAL_PRINT_KEYS
    assert keys[len(OFFICIAL_PRINT_KEYS):] == ["brokerChannelExpiredTime", "enableUpdateNamesrvConfig",
                                               "metricsExporterType", "metricsPromExporterPort",
                                               "metricsPromExporterHost", "metricsLabel"]
    first = lines[0]
    assert first.endswith(" INFO main - rocketmqHome=")
    assert "INFO main - listenPort=9876" in "\n".join(lines)
    assert "INFO main - socksProxyConfig={}" in "\n".join(lines)
