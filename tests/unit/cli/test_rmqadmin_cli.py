"""rmqadmin without a JVM: the Java behaviour it reproduces (golden values printed by JDK 17),
the command table, the one-line errors, and whole commands against an in-process fake
NameServer + Broker (rmqwire's RemotingServer with typed processors) on loopback.

The conformance suite (tests/conformance/test_rmqadmin.py) compares every command with the
official mqadmin; these tests pin the pieces and run in every CI job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from rmqwire.admin.javautil import (
    concurrent_hashmap_order,
    hashmap_order,
    hashmap_putall_order,
    load_properties,
)
from rmqwire.cli import base
from rmqwire.cli.javafmt import JFloat, pretty_json, printf
from rmqwire.cli.main import MODULE_OF, _load_commands, main

# ---- Java behaviour: values printed by the JDK 17 the reference runs on ---------------------------

KEYS = ["DefaultCluster", "broker-a", "TBW102", "%RETRY%G", "rmq_sys_wheel_timer",
        "SELF_TEST_TOPIC", "zeta", "alpha", "Aa", "BB"] + [f"topic-{i}" for i in range(1, 11)]
#: HashMap<String, ?> with KEYS put in order: keySet()
JAVA_HASHMAP = ("zeta,Aa,BB,topic-6,topic-7,topic-8,topic-9,%RETRY%G,TBW102,topic-1,topic-2,"
                "topic-3,topic-10,SELF_TEST_TOPIC,topic-4,DefaultCluster,topic-5,"
                "rmq_sys_wheel_timer,alpha,broker-a")
PROPERTIES_TEXT = ("".join(f"key{i * 7919 % 1000}Name=v{i}\n" for i in range(60))
                   + "spaced\\ key = a value\nx:y\n# comment\n! also\nlong=one\\\n   two\n"
                   + "uni=\\u0041B\n")
#: Properties.load(PROPERTIES_TEXT), then entrySet() (a ConcurrentHashMap that resized 3 times)
JAVA_PROPERTIES = (
    "key380Name=v20;key355Name=v45;key788Name=v52;key109Name=v11;key31Name=v49;key436Name=v44;"
    "key869Name=v51;key975Name=v25;key274Name=v46;key84Name=v36;key517Name=v43;key623Name=v17;"
    "key299Name=v21;key489Name=v31;key760Name=v40;key221Name=v59;key950Name=v50;key193Name=v47;"
    "key947Name=v13;key866Name=v14;key137Name=v23;key676Name=v4;key352Name=v8;key218Name=v22;"
    "key302Name=v58;key408Name=v32;key271Name=v9;key841Name=v39;key542Name=v18;key757Name=v3;"
    "key838Name=v2;key461Name=v19;key56Name=v24;key3Name=v37;key922Name=v38;key732Name=v28;"
    "key707Name=v53;key919Name=v1;key626Name=v54;key651Name=v29;key813Name=v27;key598Name=v42;"
    "key112Name=v48;key190Name=v10;long=onetwo;key246Name=v34;key570Name=v30;key464Name=v56;"
    "key785Name=v15;key679Name=v41;key327Name=v33;key383Name=v57;key433Name=v7;key28Name=v12;"
    "key595Name=v5;key704Name=v16;spaced key=a value;key0Name=v0;key514Name=v6;uni=AB;"
    "key545Name=v55;x=y;key165Name=v35;key894Name=v26;")


def test_hashmap_iteration_order() -> None:
    assert ",".join(hashmap_order(KEYS)) == JAVA_HASHMAP


def test_properties_load_and_concurrent_hashmap_order() -> None:
    props = load_properties(PROPERTIES_TEXT.encode())
    assert "".join(f"{k}={props[k]};" for k in concurrent_hashmap_order(props, 8)) == JAVA_PROPERTIES


def test_putall_into_a_new_hashmap_sizes_its_table_for_the_source() -> None:
    # new HashMap<>().putAll(4 entries) allocates 8 buckets, not 16
    assert hashmap_putall_order([[f"q{i}@b" for i in range(4)]]) == ["q3@b", "q0@b", "q1@b", "q2@b"]


def test_printf_rounds_half_up_on_the_shortest_decimal() -> None:
    assert (printf("%.2f|%.2f|%.1f|%.4f|%9.2f|%2.2f|%.2f", 0.125, 2.675, 0.05, 1.00005,
                   12345.678, 0.0, -0.0) == "0.13|2.68|0.1|1.0001| 12345.68|0.00|-0.00")
    assert printf("%.1f|%.1f", 0.15, 0.35) == "0.2|0.4"
    assert printf("%04d  %-4d|%5s|%-6s|%s%n", 7, 3, True, None, 1e7) == "0007  3   | true|null  |1.0E7\n"
    assert printf("%.1fw", JFloat(0) / JFloat(10000.0)) == "0.0w"


def test_pretty_json_as_fastjson_writes_a_route() -> None:
    route = {"brokerDatas": [{"brokerAddrs": {0: "127.0.0.1:10911"}, "brokerName": "broker-a",
                              "cluster": "DefaultCluster", "enableActingMaster": False}],
             "filterServerTable": {},
             "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                             "topicSysFlag": 0, "writeQueueNums": 4}]}
    assert pretty_json(route) == (
        '{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{0:"127.0.0.1:10911"\n\t\t\t},\n'
        '\t\t\t"brokerName":"broker-a",\n\t\t\t"cluster":"DefaultCluster",\n'
        '\t\t\t"enableActingMaster":false\n\t\t}\n\t],\n\t"filterServerTable":{},\n'
        '\t"queueDatas":[\n\t\t{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"perm":6,\n'
        '\t\t\t"readQueueNums":4,\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}\n\t]\n}')


# ---- the command table and errors ------------------------------------------------------------------


def test_every_command_is_found_in_its_module() -> None:
    _load_commands()
    names = {n.lower() for n in base.REGISTRY}
    aliases = {a for a, n in base.LOOKUP.items() if a != n.lower()}
    assert set(MODULE_OF) == names | aliases


def test_listing_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("The most commonly used rmqadmin commands are:\n")
    names = re.findall(r"^   (\S+)", listing, re.M)
    assert names.index("updateTopic") < names.index("topicRoute") < names.index("clusterList")
    assert main(["help", "CLUSTERLIST"]) == 0
    assert "-m, --moreStats" in capsys.readouterr().out


@pytest.mark.parametrize("argv,code,line", [
    (["nope"], 2, "rmqadmin: The sub command nope not exist."),
    (["topicRoute"], 2, "rmqadmin topicRoute: Missing option '-t' / '--topic'."),
    (["topicRoute", "-t", "T", "--bogus"], 2, "rmqadmin topicRoute: No such option '--bogus'."),
    (["topicRoute", "-t", "T"], 1,
     "rmqadmin topicRoute: no NameServer address: give -n host:port or set NAMESRV_ADDR"),
    (["updateTopic", "-t", "T", "-n", "127.0.0.1:1"], 1,
     "rmqadmin updateTopic: give exactly one of -b/--brokerAddr and -c/--clusterName"),
])
def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                             argv: list[str], code: int, line: str) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    assert main(argv) == code
    captured = capsys.readouterr()
    assert captured.err == line + "\n"
    assert captured.out == ""


def test_tools_yml_credentials(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text('accessKey: "ak"\nsecretKey: sk  # secret\n')
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    assert base.tools_yml_credentials() == ("ak", "sk")
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: ak\n")
    assert base.tools_yml_credentials() == (None, None)


# ---- whole commands against a fake cluster on loopback ---------------------------------------------


@pytest.fixture
def fake_cluster() -> Iterator[str]:
    """One RemotingServer answering as a NameServer and a Broker; yields its address."""
    from rmqwire.client.blocking import call, ensure_reactor
    from rmqwire.codec.commands.admin import GetBrokerRuntimeInfo
    from rmqwire.codec.commands.namesrv import KVTable
    from rmqwire.codec.commands.route import (
        BrokerData,
        ClusterInfo,
        GetBrokerClusterInfo,
        GetRouteInfo,
        QueueData,
        TopicRouteData,
    )
    from rmqwire.codec.commands.topic import GetTopicStatsInfo, TopicOffset, TopicStatsTable
    from rmqwire.errors import TopicNotExistError
    from rmqwire.model import MessageQueue
    from rmqwire.remoting import Processor, RemotingServer

    holder: dict[str, Any] = {}

    class Fake(Processor):
        @GetBrokerClusterInfo.responder
        def cluster(self, header: Any, body: Any, context: Any) -> ClusterInfo:
            bd = BrokerData(cluster="C1", broker_name="b1", broker_addrs={0: holder["addr"]})
            return ClusterInfo(broker_addr_table={"b1": bd}, cluster_addr_table={"C1": ["b1"]})

        @GetRouteInfo.responder
        def route(self, header: Any, body: Any, context: Any) -> TopicRouteData:
            if header.topic != "T":
                raise TopicNotExistError(
                    remark=f"No topic route info in name server for the topic: {header.topic}")
            return TopicRouteData(
                queue_datas=[QueueData(broker_name="b1", read_queue_nums=2, write_queue_nums=2, perm=6)],
                broker_datas=[BrokerData(cluster="C1", broker_name="b1",
                                         broker_addrs={0: holder["addr"]})])

        @GetTopicStatsInfo.responder
        def stats(self, header: Any, body: Any, context: Any) -> TopicStatsTable:
            return TopicStatsTable(offset_table={
                MessageQueue("T", "b1", 1): TopicOffset(0, 5, 0),
                MessageQueue("T", "b1", 0): TopicOffset(1, 3, 0)}, topic_put_tps=0.5)

        @GetBrokerRuntimeInfo.responder
        def runtime(self, header: Any, body: Any, context: Any) -> KVTable:
            return KVTable(table={"brokerVersionDesc": "V5_3_3", "putTps": "1.25 0.5 0.1",
                                  "getTransferredTps": "0.0 0.0 0.0", "brokerActive": "true",
                                  "sendThreadPoolQueueSize": "0",
                                  "sendThreadPoolQueueHeadWaitTimeMills": "0",
                                  "pullThreadPoolQueueSize": "0",
                                  "pullThreadPoolQueueHeadWaitTimeMills": "0",
                                  "pageCacheLockTimeMills": "0", "commitLogDiskRatio": "0.5"})

    reactor = ensure_reactor()

    def start() -> RemotingServer:
        server = RemotingServer(reactor, processors=(Fake(),))
        server.startService()
        return server

    server = call(start, timeout=30)
    holder["addr"] = server.address
    try:
        yield server.address
    finally:
        call(server.stopService, timeout=30)


def test_topic_status_and_route_against_a_fake_cluster(fake_cluster: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topicStatus", "-t", "T", "-n", fake_cluster]) == 0
    assert capsys.readouterr().out == (
        "#Broker Name                      #QID  #Min Offset           #Max Offset             "
        "#Last Updated\n"
        "b1                                0     1                     3                       \n"
        "b1                                1     0                     5                       \n"
        "\nTopic Put TPS: 0.0\n")  # as mqadmin: examineTopicStats does not add the brokers' TPS
    assert main(["topicRoute", "-t", "T", "-l", "-n", fake_cluster]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["C1", "b1", f"{{0={fake_cluster}}}", "2", "2", "6"]
    assert lines[3].split() == ["Total:", "1", "2", "2"]


def test_cluster_list_json_and_failover(fake_cluster: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # the first NameServer refuses connections: the next one answers
    assert main(["clusterList", "--json", "-n", f"127.0.0.1:1;{fake_cluster}"]) == 0
    (broker,) = json.loads(capsys.readouterr().out)["brokers"]
    assert (broker["cluster"], broker["brokerName"], broker["version"], broker["inTps"]) == (
        "C1", "b1", "V5_3_3", 1.25)
    assert main(["clusterList", "-n", fake_cluster]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[:5] == ["C1", "b1", "0", fake_cluster, "V5_3_3"]
    assert "1.25(0,0ms)" in row and "0.5000" in row and row.endswith("true")


def test_unknown_topic_is_one_line(fake_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topicStatus", "-t", "X", "-n", fake_cluster]) == 1
    captured = capsys.readouterr()
    assert captured.err == ("rmqadmin topicStatus: TOPIC_NOT_EXIST (17): No topic route info in "
                            "name server for the topic: X\n")


def test_console_script_exits_with_the_code_and_flushed_output() -> None:
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", "import sys; from rmqwire.cli.main import entry_point; "
                               "sys.argv = ['rmqadmin', 'nope']; entry_point()"],
        capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == "rmqadmin: The sub command nope not exist.\n"
    listing = subprocess.run(
        [sys.executable, "-c", "import sys; from rmqwire.cli.main import entry_point; "
                               "sys.argv = ['rmqadmin']; entry_point()"],
        capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and "clusterList" in listing.stdout
