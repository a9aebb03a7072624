"""The NameServer service over in-memory channels and a fake reactor clock: brokers leave the routes
when their channel closes, when they stay silent past the timeout, or when they idle out; bad
input gets Java's answers and never stops the server."""

from __future__ import annotations

from typing import Any

import pytest
from namesrv_helpers import register_body
from twisted.internet.testing import MemoryReactorClock, StringTransport

from rmqwire.codec import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_frame,
)
from rmqwire.codec.codes import LanguageCode
from rmqwire.codec.commands.namesrv import (
    AddWritePermOfBroker,
    BrokerHeartbeat,
    DeleteKVConfig,
    DeleteTopicInNamesrv,
    PutKVConfig,
    RegisterBroker,
    RegisterBrokerBody,
    RegisterTopicInNamesrv,
    UnregisterBroker,
    UpdateNamesrvConfig,
    WipeWritePermOfBroker,
)
from rmqwire.codec.commands.route import GetRouteInfo, QueueData, TopicRouteData
from rmqwire.codec.commands.topic import (
    DataVersion,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
)
from rmqwire.codec.message import body_crc32
from rmqwire.remoting import RequestContext
from rmqwire.server.namesrv import NameServer, NamesrvSettings


class Peer:
    """One connection to the NameServer's protocol, over a StringTransport."""

    def __init__(self, ns: NameServer, port: int = 40000) -> None:
        from twisted.internet.address import IPv4Address

        self.proto = ns.server.build_protocol()
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port))
        self.proto.makeConnection(self.transport)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def send(self, cmd: RemotingCommand) -> list[RemotingCommand]:
        self.opaque += 1
        self.transport.clear()
        self.proto.dataReceived(encode_frame(cmd.with_opaque(self.opaque)))
        return self.decoder.feed(self.transport.value())

    def call(self, command: Any, *, body: Any = None, **fields: Any) -> RemotingCommand | None:
        replies = self.send(command.request(body=body, language=LanguageCode.JAVA, **fields))
        return replies[0] if replies else None

    def register(self, name: str, addr: str, *topics: str, counter: int = 1) -> RemotingCommand:
        body = register_body(*(topics or ("T1", "T2")), counter=counter).encode(standard=False)
        reply = self.call(RegisterBroker, body=body, broker_name=name, broker_addr=addr,
                          cluster_name="C", ha_server_addr=addr, broker_id=0,
                          enable_acting_master=False, compressed=False,
                          body_crc32=body_crc32(body))
        assert reply is not None and reply.code == ResponseCode.SUCCESS, reply
        return reply

    def lose(self) -> None:
        self.proto.connectionLost(None)


def start(props: dict[str, str] | None = None) -> tuple[NameServer, MemoryReactorClock]:
    reactor = MemoryReactorClock()
    settings = NamesrvSettings.from_properties(props or {})
    settings.namesrv.kv_config_path = None  # type: ignore[assignment]  # KV in memory only
    ns = NameServer(reactor, settings, port=0, interface="127.0.0.1")
    ns.startService()
    return ns, reactor


def has_route(ns: NameServer, topic: str) -> bool:
    return ns.routes.pickup_topic_route_data(topic) is not None


def test_listens_on_the_configured_address():
    reactor = MemoryReactorClock()
    ns = NameServer(reactor, NamesrvSettings.from_properties(
        {"listenPort": "19876", "bindAddress": "127.0.0.2"}))
    ns.kv.path = None
    ns.startService()
    (port, _factory, _backlog, interface) = reactor.tcpServers[0]
    assert (port, interface) == (19876, "127.0.0.2")
    ns.stopService()


def test_channel_close_unregisters_the_broker_at_once():
    ns, reactor = start()
    a, b = Peer(ns, 1), Peer(ns, 2)
    a.register("broker-a", "10.0.0.1:10911", "TA", "Shared")
    b.register("broker-b", "10.0.0.2:10911", "TB", "Shared")
    a.lose()
    assert not has_route(ns, "TA") and has_route(ns, "TB")
    assert [q.broker_name for q in ns.routes.pickup_topic_route_data("Shared").queue_datas] == ["broker-b"]
    ns.stopService()


def test_silent_broker_expires_after_the_configured_timeout():
    ns, reactor = start({"scanNotActiveBrokerInterval": "1000", "brokerChannelExpiredTime": "6000"})
    peer = Peer(ns)
    peer.register("broker-a", "10.0.0.1:10911")
    reactor.advance(3)
    peer.call(BrokerHeartbeat, cluster_name="C", broker_addr="10.0.0.1:10911", broker_name="broker-a")
    reactor.advance(5)
    assert has_route(ns, "T1")  # the heartbeat 5 s ago kept it alive
    reactor.advance(1)
    reactor.advance(1)
    assert not has_route(ns, "T1")
    assert peer.transport.disconnecting  # Java closes the expired broker's channel too
    peer.lose()
    ns.stopService()
    assert not reactor.getDelayedCalls() or all(not c.active() for c in reactor.getDelayedCalls())


def test_idle_channel_is_closed_and_its_broker_unregistered():
    ns, reactor = start({"serverChannelMaxIdleTimeSeconds": "30", "brokerChannelExpiredTime": "600000"})
    peer = Peer(ns)
    peer.register("broker-a", "10.0.0.1:10911")
    reactor.advance(31)
    assert peer.transport.disconnecting
    peer.lose()  # what the transport reports once closed
    assert not has_route(ns, "T1")
    ns.stopService()


def test_oneway_is_never_answered_and_unknown_codes_get_javas_answer():
    ns, _ = start()
    peer = Peer(ns)
    assert peer.call(BrokerHeartbeat, cluster_name="C", broker_addr="x:1", broker_name="b") is None
    (reply,) = peer.send(RemotingCommand.request(RequestCode.PULL_MESSAGE, {}))
    assert (reply.code, reply.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                          " request type 11 not supported")
    assert reply.language == LanguageCode.JAVA
    ns.stopService()


def test_garbage_closes_only_that_connection():
    ns, _ = start()
    good = Peer(ns, 1)
    good.register("broker-a", "10.0.0.1:10911")
    bad = Peer(ns, 2)
    bad.proto.dataReceived(b"\x00\x00\x00\x05\xff\xff\xff\xff\x00")
    assert bad.transport.disconnecting and bad.transport.value() == b""
    bad.lose()
    assert has_route(ns, "T1")
    reply = good.call(GetRouteInfo, topic="T1")
    assert reply.code == ResponseCode.SUCCESS
    ns.stopService()


def test_config_update_restarts_the_scan_with_the_new_interval():
    ns, reactor = start({"enableUpdateNamesrvConfig": "true", "brokerChannelExpiredTime": "1000",
                         "scanNotActiveBrokerInterval": "100000"})
    peer = Peer(ns)
    peer.register("broker-a", "10.0.0.1:10911")
    reply = peer.call(UpdateNamesrvConfig, body=b"scanNotActiveBrokerInterval=500\n")
    assert reply.code == ResponseCode.SUCCESS
    reactor.advance(1.0)
    reactor.advance(0.6)
    assert not has_route(ns, "T1")
    ns.stopService()


def test_min_broker_id_change_is_notified_when_enabled():
    ns, reactor = start({"notifyMinBrokerIdChanged": "true"})
    master, slave = Peer(ns, 1), Peer(ns, 2)
    body = register_body("T1", "T2").encode(standard=False)
    common = dict(body=body, cluster_name="C", broker_name="broker-a", enable_acting_master=True,
                  compressed=False)
    assert slave.call(RegisterBroker, broker_addr="10.0.0.2:10911", ha_server_addr="h2",
                      broker_id=1, **common).code == 0
    assert master.call(RegisterBroker, broker_addr="10.0.0.1:10911", ha_server_addr="h1",
                       broker_id=0, **common).code == 0
    # the master took the minimum id: the slave hears of it (a oneway over a new connection)
    assert [(host, port) for host, port, *_ in reactor.tcpClients] == [("10.0.0.2", 10911)]
    ns.stopService()


def test_cached_route_answers_match_the_typed_responder():
    ns, _ = start()
    broker, client = Peer(ns, 1), Peer(ns, 2)
    broker.register("broker-a", "10.0.0.1:10911")
    typed = ns.client_processor.handlers()[RequestCode.GET_ROUTEINFO_BY_TOPIC]
    for version, accept in ((479, None), (317, None), (317, "true"), (317, "TRUE")):
        ext = {"topic": "T1"} if accept is None else {"topic": "T1", "acceptStandardJsonOnly": accept}
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=version)
        first = client.send(request)[0]  # fills the cache
        again = client.send(request)[0]  # answered from it
        assert (first.code, first.body) == (again.code, again.body) == (0, first.body)
        answer = typed(request.with_opaque(99), RequestContext(peer="test"))  # synchronous
        assert isinstance(answer, RemotingCommand) and answer.body == again.body
    broker.call(UpdateNamesrvConfig, body=b"x=1\n")  # refused: nothing changes
    broker.register("broker-a", "10.0.0.1:10911", "T1", "T2", "T3", counter=2)
    assert b"T3" not in client.send(RemotingCommand.request(105, {"topic": "T1"}))[0].body
    ns.routes.wipe_write_perm_of_broker("broker-a")
    assert b'"perm":4' in client.send(RemotingCommand.request(105, {"topic": "T1"}))[0].body
    ns.stopService()


# ---- any input gets an answer --------------------------------------------------------------------

import hypothesis.strategies as st  # noqa: E402
from hypothesis import given  # noqa: E402

NAMESRV_CODES = [100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 217, 219, 224, 304, 311, 312,
                 313, 318, 319, 322, 327, 901, 9999]
_TEXT = st.text(max_size=12)
_FIELDS = st.dictionaries(
    st.sampled_from(["topic", "brokerName", "brokerAddr", "clusterName", "brokerId", "namespace",
                     "key", "value", "haServerAddr", "compressed", "bodyCrc32", "cluster",
                     "acceptStandardJsonOnly", "__ZONE_MODE", "__ZONE_NAME", "heartbeatTimeoutMillis"]),
    st.one_of(_TEXT, st.integers(-5, 5).map(str)), max_size=8)


@given(code=st.sampled_from(NAMESRV_CODES), fields=_FIELDS,
       body=st.one_of(st.none(), st.binary(max_size=64), st.just(b'{"topicConfigSerializeWrapper":{}}'),
                      st.just(b"x\x9c\x00")))
def test_any_request_is_answered_and_the_server_keeps_serving(code, fields, body):
    ns, _ = start()
    good = Peer(ns, 1)
    good.register("broker-a", "10.0.0.1:10911")
    peer = Peer(ns, 2)
    (reply,) = peer.send(RemotingCommand.request(code, fields, body))
    assert reply.is_response and isinstance(reply.code, int)
    assert reply.code == ResponseCode.SUCCESS or reply.remark  # every error says why
    assert good.call(GetRouteInfo, topic="T1").code == ResponseCode.SUCCESS or code in (104, 216, 205)
    ns.stopService()


# ---- the route cache follows every change of what a route is built from --------------------------

A, B = "10.0.0.1:10911", "10.0.0.2:10911"
MANY = [f"M{i}" for i in range(60)]  # a body over RegisterBodyReader's size to remember


def _register(peer: Peer, name: str, addr: str, topics: list[str], *, counter: int = 1,
              perm: int = 6, broker_id: int = 0, filters: list[str] | None = None,
              zone: str | None = None, perms: dict[str, int] | None = None) -> None:
    table = {t: TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4,
                            perm=(perms or {}).get(t, perm)) for t in topics}
    body = RegisterBrokerBody(
        topic_config_serialize_wrapper=TopicConfigAndMappingSerializeWrapper(
            topic_config_table=table, data_version=DataVersion(0, 1000, counter)),
        filter_server_list=filters or []).encode(standard=False)
    extra = {"__ZONE_NAME": zone} if zone else {}
    reply = peer.call(RegisterBroker, body=body, broker_name=name, broker_addr=addr,
                      cluster_name="C", ha_server_addr=addr, broker_id=broker_id,
                      enable_acting_master=False, compressed=False, body_crc32=body_crc32(body),
                      extra=extra)
    assert reply is not None and reply.code == ResponseCode.SUCCESS, reply


def _answers(peer: Peer, topic: str) -> list[tuple[int, bytes | None]]:
    """The route as a 5.x client (standard JSON) and as a 4.x one (fastjson's style) get it."""
    out = []
    for version in (479, 317):
        (reply,) = peer.send(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                     {"topic": topic}, version=version))
        out.append((reply.code, reply.body))
    return out


def _fresh(ns: NameServer, topic: str) -> list[tuple[int, bytes | None]]:
    """The route built now, without any cache."""
    route = ns.client_processor.route_data(topic)
    if route is None:
        return [(ResponseCode.TOPIC_NOT_EXIST, None)] * 2
    return [(0, route.encode(standard=True)), (0, route.encode(standard=False))]


_MUTATIONS: dict[str, Any] = {
    "register another broker": lambda ns, r, a, b, c: _register(b, "broker-b", B, ["T1", "T3"]),
    "register with a new perm": lambda ns, r, a, b, c: _register(a, "broker-a", A, ["T1", "T2"],
                                                                 counter=2, perm=4),
    "register without the topic": lambda ns, r, a, b, c: (
        setattr(ns.settings.namesrv, "delete_topic_with_broker_registration", True),
        _register(a, "broker-a", A, ["T2"], counter=2)),
    "register a slave": lambda ns, r, a, b, c: _register(b, "broker-a", B, ["T1", "T2"],
                                                         broker_id=1),
    "register filter servers": lambda ns, r, a, b, c: _register(a, "broker-a", A, ["T1", "T2"],
                                                                filters=["10.0.0.9:1"]),
    "register in a zone": lambda ns, r, a, b, c: _register(a, "broker-a", A, ["T1", "T2"],
                                                           zone="z1"),
    "unregister": lambda ns, r, a, b, c: a.call(UnregisterBroker, cluster_name="C", broker_addr=A,
                                                broker_name="broker-a", broker_id=0),
    "channel closed": lambda ns, r, a, b, c: a.lose(),
    "expired": lambda ns, r, a, b, c: r.advance(200),
    "wipe write perm": lambda ns, r, a, b, c: c.call(WipeWritePermOfBroker, broker_name="broker-a"),
    "add write perm": lambda ns, r, a, b, c: c.call(AddWritePermOfBroker, broker_name="broker-a"),
    "delete topic": lambda ns, r, a, b, c: c.call(DeleteTopicInNamesrv, topic="T1"),
    "delete topic in the cluster": lambda ns, r, a, b, c: c.call(DeleteTopicInNamesrv, topic="T1",
                                                                 cluster_name="C"),
    "register topic": lambda ns, r, a, b, c: c.call(
        RegisterTopicInNamesrv, topic="T1", body=TopicRouteData(queue_datas=[QueueData(
            broker_name="broker-a", read_queue_nums=1, write_queue_nums=1, perm=2)])),
    "order conf put": lambda ns, r, a, b, c: c.call(PutKVConfig, namespace="ORDER_TOPIC_CONFIG",
                                                    key="T1", value="broker-a:8"),
    "order conf deleted": lambda ns, r, a, b, c: c.call(DeleteKVConfig,
                                                        namespace="ORDER_TOPIC_CONFIG", key="T1"),
    "orderMessageEnable switched off": lambda ns, r, a, b, c: setattr(
        ns.settings.namesrv, "order_message_enable", False),
    "one of many topics changed": lambda ns, r, a, b, c: _register(
        a, "broker-a", A, ["T1", "T2", *MANY], counter=2, perms={"T1": 2}),
}


@pytest.mark.parametrize("mutation", list(_MUTATIONS))
def test_cached_routes_follow_every_change(mutation: str) -> None:
    ns, reactor = start({"orderMessageEnable": "true", "scanNotActiveBrokerInterval": "5000",
                         "brokerChannelExpiredTime": "120000",
                         "serverChannelMaxIdleTimeSeconds": "100000"})
    a, b, client = Peer(ns, 1), Peer(ns, 2), Peer(ns, 3)
    _register(a, "broker-a", A, ["T1", "T2", *MANY])
    if mutation in ("add write perm",):
        client.call(WipeWritePermOfBroker, broker_name="broker-a")
    if mutation in ("order conf deleted", "orderMessageEnable switched off"):
        client.call(PutKVConfig, namespace="ORDER_TOPIC_CONFIG", key="T1", value="broker-a:4")
    before = _answers(client, "T1")
    assert _answers(client, "T1") == before == _fresh(ns, "T1")  # the second from the cache
    _MUTATIONS[mutation](ns, reactor, a, b, client)
    after = _answers(client, "T1")
    assert after == _fresh(ns, "T1")
    assert after != before, "the mutation changed nothing: the test would not see a stale route"
    ns.stopService()
