"""rmqwire's NameServer (``rmqwire namesrv`` as a process) judged by the official RocketMQ.

- Alone: official 5.3.3 brokers (two masters and a slave) register with it and stay registered;
  the slave learns its master from it; the official Java client, ali-ons and the C++ client route
  through it; a frozen broker expires after the configured timeout and returns when it wakes; a
  killed broker leaves the routes at once (its connection closed) and comes back when restarted.
- Side by side with the official NameServer, both in every broker's namesrvAddr: the same
  requests get the same answers (byte for byte where Java's order is deterministic), official
  mqadmin prints the same against both, and clients keep working when either one stops.
- 4.9.7: an official 4.9.7 broker and the 4.9.7 Java client work through it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode, fastjson
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.namesrv import (
    GetAllTopicListFromNameserver,
    GetBrokerMemberGroup,
    GetHasUnitSubTopicList,
    GetHasUnitSubUnUnitTopicList,
    GetKVConfig,
    GetKVListByNamespace,
    GetSystemTopicListFromNs,
    GetTopicsByCluster,
    GetUnitTopicList,
    QueryDataVersion,
    WipeWritePermOfBroker,
)
from rmqwire.codec.commands.route import GetBrokerClusterInfo, GetRouteInfo
from rmqwire.codec.commands.topic import GetAllTopicConfig, TopicList
from rmqwire.server.namesrv.config import NamesrvConfig
from tools.peers.cpp_peer import CppPeer, CppPeerUnavailable
from tools.peers.java_peer import PEER_SOURCE, JavaPeer
from tools.peers.node_peer import NodePeer, NodePeerUnavailable
from tools.peers.process import PeerError
from tools.peers.topics import create_topic, wait_for_route
from tools.reference import jars, wire
from tools.reference.jars import ReferenceUnavailable
from tools.reference.mqadmin import parse_cluster_list, run_mqadmin
from tools.rmqwire_process import BrokersOnNamesrv, RmqwireNamesrv

pytestmark = pytest.mark.conformance

#: Broker expiry of the "alone" NameServer: past the brokers' registration period (10 s).
EXPIRY_MS = 25_000
PROBE_SOURCE = PEER_SOURCE.parent.parent / "route" / "RouteProbe.java"
#: Extension keys rmqwire adds to the NameServer config (not in the official one).
#: The keys our NameServer declares as rmqwire's own: getNamesrvConfig may show these and no
#: other key the official one lacks.
EXTENSION_KEYS = {name for name, _ in NamesrvConfig().values(extensions=True)}


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = cond()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(interval)


def cluster_info(addr: str) -> wire.ClusterInfo | None:
    try:
        return wire.get_cluster_info(addr, timeout=3)
    except (OSError, wire.WireError):
        return None


def registrations_current(setup: Setup, *namesrvs: str) -> bool:
    """Every broker's latest topic-config version has reached every NameServer (QUERY_DATA_VERSION,
    as the broker asks before re-registering). A broker registers asynchronously after a topic
    change; a route edit made on a NameServer before that lands is overwritten by it."""
    for b in setup.cluster.brokers:
        version = wire.call(b.addr, GetAllTopicConfig).body.data_version
        for ns in namesrvs:
            answer = wire.call(ns, QueryDataVersion, body=version, broker_name=b.name, broker_addr=b.addr,
                               cluster_name="DefaultCluster", broker_id=0)
            if answer.header.changed:
                return False
    return True


def registered(namesrv: str, addr: str) -> bool:
    info = cluster_info(namesrv)
    return info is not None and any(addr in a.values() for a in info.broker_addrs.values())


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def version_of(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--rocketmq-version") or jars.DEFAULT_VERSION


@dataclass
class Setup:
    ns: RmqwireNamesrv
    cluster: BrokersOnNamesrv

    def broker(self, name: str) -> Any:
        return next(b for b in self.cluster.brokers if b.name == name)


def start_setup(reference_unavailable: Callable[[str], None], ns_props: dict[str, str],
                cluster_kwargs: dict[str, Any], home: str | None = None) -> Setup:
    env = {"ROCKETMQ_HOME": home} if home else None
    ns = RmqwireNamesrv(ns_props, env=env).start()
    cluster = BrokersOnNamesrv(namesrv_addrs=(ns.addr,), **cluster_kwargs)
    try:
        cluster.start()
    except ReferenceUnavailable as e:
        ns.close()
        reference_unavailable(str(e))
    except BaseException:
        ns.close()
        raise
    return Setup(ns, cluster)


def stop_setup(setup: Setup) -> None:
    try:
        setup.cluster.stop()
    finally:
        rc = setup.ns.stop()
        output = setup.ns.output()
        setup.ns.close()
    assert rc == 0, f"rmqwire namesrv did not exit cleanly ({rc}):\n{output[-3000:]}"


# ==== rmqwire's NameServer alone ====================================================================


@pytest.fixture(scope="class")
def alone(request: pytest.FixtureRequest, reference_unavailable) -> Iterator[Setup]:
    setup = start_setup(
        reference_unavailable,
        {"scanNotActiveBrokerInterval": "1000", "brokerChannelExpiredTime": str(EXPIRY_MS)},
        {"version": version_of(request)},
    )
    try:
        setup.cluster.add_broker("broker-b")
        setup.cluster.add_slave("broker-a", 1)
        yield setup
    finally:
        stop_setup(setup)


def two_broker_topic(setup: Setup, namesrv: str, queues: int = 4) -> str:
    topic = unique("NsTopic")
    for name in ("broker-a", "broker-b"):
        create_topic(setup.broker(name).addr, topic, queues=queues)
    wait_for_route(namesrv, topic, queues=2 * queues)
    return topic


class TestRmqwireNamesrvAlone:
    def test_masters_and_slave_are_registered(self, alone: Setup):
        a, b, slave = (alone.broker(n).addr for n in ("broker-a", "broker-b", "broker-a-s1"))
        info = cluster_info(alone.ns.addr)
        assert info is not None
        assert info.broker_addrs == {"broker-a": {0: a, 1: slave}, "broker-b": {0: b}}
        assert info.clusters == {"DefaultCluster": frozenset({"broker-a", "broker-b"})}
        route = wire.get_route_info(alone.ns.addr, "TBW102")
        assert {bd.broker_name for bd in route.broker_datas} == {"broker-a", "broker-b"}
        a_data = next(bd for bd in route.broker_datas if bd.broker_name == "broker-a")
        assert a_data.broker_addrs == {0: a, 1: slave}

    def test_slave_learns_its_master_from_rmqwire(self, alone: Setup):
        master = alone.broker("broker-a")
        slave = alone.broker("broker-a-s1")
        master_ha = f"127.0.0.1:{master.listen_port + 1}"  # the master's haListenPort

        def ha_master() -> str | None:
            reply = wire.request(slave.addr, RequestCode.GET_BROKER_HA_STATUS, timeout=5)
            if reply.code != ResponseCode.SUCCESS or not reply.body:
                return None
            info = fastjson.loads(reply.body)
            return (info.get("haClientRuntimeInfo") or {}).get("masterAddr")

        # The slave is configured without haMasterAddress: only our REGISTER_BROKER answer
        # (masterAddr / haServerAddr) can have told it.
        assert wait_until(lambda: ha_master() == master_ha, 60, "slave HA client on the master")

    def test_official_java_client_routes_through_rmqwire(self, alone: Setup):
        topic = two_broker_topic(alone, alone.ns.addr)
        with JavaPeer(alone.ns.addr, version=alone.cluster.version) as peer:
            sent = peer.produce(topic, 20, tag="T", keys="k{i}")
            assert {r.status for r in sent} == {"SEND_OK"}
            assert {r.queue.broker_name for r in sent} == {"broker-a", "broker-b"}
            got = peer.consume(topic, 20, group=unique("ns_java"))
        assert {r.msg_id for r in got} == {r.msg_id for r in sent}

    def test_new_topic_through_tbw102(self, alone: Setup):
        topic = unique("NsAuto")
        assert wire.get_route_info(alone.ns.addr, topic) is None
        with JavaPeer(alone.ns.addr, version=alone.cluster.version) as peer:
            sent = peer.produce(topic, 4)
        assert {r.status for r in sent} == {"SEND_OK"}
        wait_for_route(alone.ns.addr, topic)  # the broker created it and registered it with us

    def test_ali_ons_routes_through_rmqwire(self, alone: Setup, reference_unavailable):
        topic = two_broker_topic(alone, alone.ns.addr)
        try:
            peer = NodePeer(alone.ns.addr)
        except NodePeerUnavailable as e:
            reference_unavailable(f"ali-ons peer unavailable: {e}")
        with peer:
            sent = peer.produce(topic, 10)
            got = peer.consume(topic, 10, group=unique("ns_node"))
        assert {r.status for r in sent} == {"SEND_OK"}
        # ali-ons reports the broker's offset message id as its msgId (it sends no UNIQ_KEY).
        assert {r.offset_msg_id for r in got} == {r.offset_msg_id for r in sent}

    def test_cpp_client_routes_through_rmqwire(self, alone: Setup, reference_unavailable):
        topic = two_broker_topic(alone, alone.ns.addr)
        try:
            peer = CppPeer(alone.ns.addr)
        except CppPeerUnavailable as e:
            reference_unavailable(f"C++ client peer unavailable: {e}")
        with peer:
            sent = peer.produce(topic, 10)
            got = peer.consume(topic, 10, group=unique("ns_cpp"))
        assert {r.status for r in sent} == {"SEND_OK"}
        assert {r.msg_id for r in got} == {r.msg_id for r in sent}

    def test_frozen_broker_expires_and_returns_when_it_wakes(self, alone: Setup):
        b = alone.broker("broker-b")
        a = alone.broker("broker-a")
        pid = alone.cluster.pid_of(b.addr)
        frozen_at = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        try:
            # Its connection stays open: only the expiry scan can remove it.
            wait_until(lambda: not registered(alone.ns.addr, b.addr), EXPIRY_MS / 1000 + 60,
                       "expiry of the frozen broker-b")
            assert time.monotonic() - frozen_at >= (EXPIRY_MS - 10_000) / 1000
            assert registered(alone.ns.addr, a.addr)  # the live one stayed registered meanwhile
            route = wire.get_route_info(alone.ns.addr, "TBW102")
            assert {bd.broker_name for bd in route.broker_datas} == {"broker-a"}
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_until(lambda: registered(alone.ns.addr, b.addr), 90, "broker-b back after waking")

    def test_killed_broker_leaves_at_once_and_comes_back(self, alone: Setup):
        b = alone.broker("broker-b")
        wait_until(lambda: registered(alone.ns.addr, b.addr), 90, "broker-b registered")
        alone.cluster.kill_broker("broker-b")
        # Well inside the expiry (25 s after its last registration, at most 10 s before the kill):
        # only the closed connection can remove it this soon.
        wait_until(lambda: not registered(alone.ns.addr, b.addr), 12, "broker-b gone at once")
        back = alone.cluster.add_broker("broker-b")  # restarted; returns once we list it again
        assert registered(alone.ns.addr, back.addr)
        route = wire.get_route_info(alone.ns.addr, "broker-b")
        assert route is not None and route.broker_datas[0].broker_addrs == {0: back.addr}


# ==== side by side with the official NameServer ===================================================


@pytest.fixture(scope="class")
def both(request: pytest.FixtureRequest, reference_unavailable, tmp_path_factory) -> Iterator[Setup]:
    home = str(tmp_path_factory.mktemp("rocketmq-home"))
    setup = start_setup(reference_unavailable, {},
                        {"version": version_of(request), "official_namesrv": True}, home=home)
    try:
        setup.cluster.add_broker("broker-b")
        yield setup
    finally:
        stop_setup(setup)


def _answer(addr: str, cmd: RemotingCommand) -> tuple[Any, ...]:
    r = wire.send(addr, cmd, timeout=5)
    return r.code, r.remark, r.ext_fields or {}, r.body


def _topic_set(addr: str, command: type[Command], **fields: Any) -> tuple[Any, ...]:
    r = wire.send(addr, command.request(**fields), timeout=5)
    body = TopicList.decode(r.body) if r.body else TopicList()
    return r.code, frozenset(body.topic_list or ()), body.broker_addr is not None


class TestSideBySide:
    def test_same_answers_as_the_official_namesrv(self, both: Setup):
        official, ours = both.cluster.official_namesrv_addr, both.ns.addr
        topic = two_broker_topic(both, official)
        wait_for_route(ours, topic, queues=8)
        requests = [
            GetBrokerClusterInfo.request(),
            GetRouteInfo.request(topic=topic),
            GetRouteInfo.request(topic=topic, version=317),  # fastjson's default dialect
            GetRouteInfo.request(topic="TBW102", accept_standard_json_only=True, version=317),
            GetRouteInfo.request(topic="NoSuchTopic"),
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}),  # topic missing
            GetBrokerMemberGroup.request(cluster_name="DefaultCluster", broker_name="broker-a"),
            GetKVConfig.request(namespace="NoNs", key="k"),
            GetKVListByNamespace.request(namespace="NoNs"),
            GetUnitTopicList.request(),
            GetHasUnitSubTopicList.request(),
            GetHasUnitSubUnUnitTopicList.request(),
            WipeWritePermOfBroker.request(broker_name="no-such-broker"),
            RemotingCommand.request(RequestCode.SEND_MESSAGE, {}),  # a broker's code
            RemotingCommand.request(4242, {}),
        ]
        for req in requests:
            theirs, mine = _answer(official, req), _answer(ours, req)
            assert mine == theirs, f"{req.code} {req.ext_fields}"
        # Topic lists come from hash sets (Java's order depends on their history): as sets.
        for command, fields in ((GetAllTopicListFromNameserver, {}),
                                (GetTopicsByCluster, {"cluster": "DefaultCluster"}),
                                (GetSystemTopicListFromNs, {})):
            assert _topic_set(ours, command, **fields) == _topic_set(official, command, **fields)

    @pytest.mark.timeout(1200)  # about 30 mqadmin JVMs, one after another
    def test_mqadmin_prints_the_same(self, both: Setup):
        official, ours = both.cluster.official_namesrv_addr, both.ns.addr
        version = both.cluster.version
        topic = two_broker_topic(both, official)
        wait_for_route(ours, topic, queues=8)
        labels = {official: "<namesrv>", ours: "<namesrv>"}

        def mqadmin(addr: str, *args: str) -> str:
            result = run_mqadmin(addr, *args, version=version).check()
            text = result.stdout
            for a, label in labels.items():
                text = text.replace(a, label)
            return text

        def same(*args: str) -> str:
            theirs, mine = mqadmin(official, *args), mqadmin(ours, *args)
            assert mine == theirs, f"mqadmin {' '.join(args)}"
            return mine

        # clusterList: the columns the NameServer decides (brokers' live stats change meanwhile)
        theirs, mine = mqadmin(official, "clusterList"), mqadmin(ours, "clusterList")
        assert parse_cluster_list(mine) == parse_cluster_list(theirs)
        assert mine.splitlines()[0] == theirs.splitlines()[0]
        assert {r.broker_name for r in parse_cluster_list(mine)} == {"broker-a", "broker-b"}

        same("topicList")
        same("topicList", "-c")
        assert '"brokerName":"broker-a"' in same("topicRoute", "-t", topic)
        same("topicClusterList", "-t", topic)

        # updateTopic / deleteTopic find the brokers through the NameServer
        new_topic = unique("NsAdminTopic")
        out = same("updateTopic", "-c", "DefaultCluster", "-t", new_topic, "-r", "3", "-w", "3")
        assert out.count("success") == 2
        wait_for_route(ours, new_topic, queues=6)
        wait_for_route(official, new_topic, queues=6)
        same("topicRoute", "-t", new_topic)
        same("deleteTopic", "-c", "DefaultCluster", "-t", new_topic)
        assert wire.get_route_info(ours, new_topic) is None

        # KV config
        ns_name = unique("NS")
        same("updateKvConfig", "-s", ns_name, "-k", "key1", "-v", "value1")
        for addr in (official, ours):
            assert wire.call(addr, GetKVConfig, namespace=ns_name, key="key1").header.value == "value1"
        same("deleteKvConfig", "-s", ns_name, "-k", "key1")
        for addr in (official, ours):
            assert wire.call(addr, GetKVConfig, namespace=ns_name, key="key1").code == \
                ResponseCode.QUERY_NOT_FOUND

        # order config lives in the ORDER_TOPIC_CONFIG namespace
        same("updateOrderConf", "-t", topic, "-v", "broker-a:4;broker-b:4", "-m", "put")
        assert "broker-a:4;broker-b:4" in same("updateOrderConf", "-t", topic, "-m", "get")
        same("updateOrderConf", "-t", topic, "-m", "delete")

        # write permissions (each NameServer changes only its own routes), once the brokers'
        # registrations after the topic changes above have reached both
        wait_until(lambda: registrations_current(both, official, ours), 60, "brokers' registrations")
        assert same("wipeWritePerm", "-b", "broker-a").strip().endswith(
            f"OK, {len(_topics_of(ours, 'broker-a'))}")
        assert '"perm":4' in same("topicRoute", "-t", topic)
        same("addWritePerm", "-b", "broker-a")
        assert '"perm":4' not in same("topicRoute", "-t", topic)

        # getNamesrvConfig: the same keys with the same values, but for paths and ports
        theirs = _config_lines(mqadmin(official, "getNamesrvConfig"))
        mine = _config_lines(mqadmin(ours, "getNamesrvConfig"))
        assert set(mine) - set(theirs) == EXTENSION_KEYS
        for key in set(theirs) - {"kvConfigPath", "configStorePath", "listenPort", "rocketmqHome"}:
            assert mine[key] == theirs[key], key
        assert mine["listenPort"] == ours.rsplit(":", 1)[1]

    @pytest.mark.timeout(1200)
    def test_clients_keep_working_when_either_namesrv_stops(self, both: Setup):
        official, ours = both.cluster.official_namesrv_addr, both.ns.addr
        topic = two_broker_topic(both, official)
        wait_for_route(ours, topic, queues=8)
        addrs = f"{official};{ours}"
        version = both.cluster.version
        per_phase = 6
        with JavaPeer(addrs, version=version) as peer, JavaPeer(addrs, version=version) as reader:
            # A running consumer that knows both NameServers sees every phase through.
            with reader.start_consumer(topic, 3 * per_phase, group=unique("ns_dual"),
                                       timeout_ms=240_000) as consumer:
                consumer.wait_started(timeout=90)
                sent = produce_tolerating_a_stopped_namesrv(peer, topic, per_phase)
                assert both.ns.stop() == 0
                sent += produce_tolerating_a_stopped_namesrv(peer, topic, per_phase)  # official alone
                both.ns.restart()  # same port
                for b in both.cluster.brokers:
                    wait_until(lambda b=b: registered(ours, b.addr), 60, f"{b.name} back with us")
                both.cluster.stop_official_namesrv()
                sent += produce_tolerating_a_stopped_namesrv(peer, topic, per_phase)  # rmqwire's alone
                consumer.wait_for(3 * per_phase, timeout=120)
                got = consumer.finish()
        assert {r.msg_id for r in got} == {r.msg_id for r in sent}
        wait_for_route(ours, topic, queues=8)


def produce_tolerating_a_stopped_namesrv(peer: JavaPeer, topic: str, count: int) -> list[Any]:
    """Produce with a fresh client. The official client fails the one call that picks a stopped
    NameServer ("connect to null failed") and takes the next one on its next call, as it does
    with two official NameServers; a new client process picks at random, so it may take a few."""
    failures = []
    for _ in range(10):
        try:
            sent = peer.produce(topic, count)
        except PeerError as e:
            assert "RemotingConnectException" in str(e), e  # never a wrong answer, only a dead NS
            failures.append(e)
            continue
        assert {r.status for r in sent} == {"SEND_OK"}
        return sent
    raise AssertionError(f"no producer got through: {failures[-1]}")


def _topics_of(namesrv: str, broker_name: str) -> list[str]:
    topics = wire.call(namesrv, GetAllTopicListFromNameserver).body.topic_list or []
    out = []
    for t in topics:
        route = wire.get_route_info(namesrv, t)
        if route is not None and any(q.broker_name == broker_name for q in route.queue_datas):
            out.append(t)
    return out


def _config_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("====") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


# ==== 4.9.7 ========================================================================================


@pytest.fixture(scope="class")
def alone_v4(reference_unavailable) -> Iterator[Setup]:
    version = os.environ.get("RMQWIRE_ROCKETMQ_V4_VERSION", jars.REFERENCE_4X)
    setup = start_setup(reference_unavailable, {}, {"version": version})
    try:
        setup.cluster.add_broker("broker-b")
        yield setup
    finally:
        stop_setup(setup)


@pytest.mark.slow
class TestRocketMQ4:
    def test_4x_brokers_register_and_clients_route(self, alone_v4: Setup):
        a, b = alone_v4.broker("broker-a").addr, alone_v4.broker("broker-b").addr
        v4 = alone_v4.cluster.version
        info = cluster_info(alone_v4.ns.addr)
        assert info.broker_addrs == {"broker-a": {0: a}, "broker-b": {0: b}}
        topic = two_broker_topic(alone_v4, alone_v4.ns.addr)
        # The 4.x Java client's own route lookup (MQClientInstance through fetchPublishMessageQueues).
        classes = jars.compile_java([PROBE_SOURCE], "route-probe", v4)
        java = [jars.java_bin(), "-Xmx128m", "-XX:+UseSerialGC",
                f"-Duser.home={alone_v4.ns.workdir}", "-cp",
                f"{classes}:{jars.lib_dir(v4)}/*", "RouteProbe", alone_v4.ns.addr, topic]
        out = subprocess.run(java, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "HOME": str(alone_v4.ns.workdir)},
                             cwd=alone_v4.ns.workdir)
        queues = sorted(line for line in out.stdout.splitlines() if line.startswith("QUEUE "))
        assert queues == sorted(f"QUEUE {topic} {n} {i}" for n in ("broker-a", "broker-b")
                                for i in range(4)), out.stdout + out.stderr
        # Messages through the 4.x brokers, routed by us (the peer is the 5.3.3 client).
        with JavaPeer(alone_v4.ns.addr) as peer:
            sent = peer.produce(topic, 10)
            assert {r.queue.broker_name for r in sent} == {"broker-a", "broker-b"}
            got = peer.consume(topic, 10, group=unique("ns_v4"))
        assert {r.msg_id for r in got} == {r.msg_id for r in sent}
        rows = parse_cluster_list(run_mqadmin(alone_v4.ns.addr, "clusterList", version=v4)
                                  .check().stdout)
        assert {(r.broker_name, r.addr, r.version) for r in rows} == {
            ("broker-a", a, "V4_9_7"), ("broker-b", b, "V4_9_7")}
