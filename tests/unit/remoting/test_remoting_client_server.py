"""RemotingClient and RemotingServer on a MemoryReactorClock, connected in memory by iosim:
raw and typed calls, and both as Services (start, stop with a grace for calls in flight)."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.test.iosim import ConnectionCompleter, IOPump
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.codec import (
    LanguageCode,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rmqwire.codec.codes import FLAG_ONEWAY
from rmqwire.codec.commands import (
    BrokerData,
    GetRouteInfo,
    GetRouteInfoRequestHeader,
    NotifyConsumerIdsChanged,
    PullMessage,
    PullMessageResponseHeader,
    QueryConsumerOffset,
    QueryConsumerOffsetResponseHeader,
    QueueData,
    Response,
    TopicRouteData,
    UpdateConsumerOffset,
)
from rmqwire.errors import (
    BrokerResponseError,
    ConnectionLostError,
    LocalProtocolError,
    MissingHeaderFieldError,
    RemotingConnectError,
    RemotingTimeoutError,
    TopicNotExistError,
    UnknownResponseCodeError,
)
from rmqwire.remoting import (
    Dispatcher,
    Processor,
    RemotingClient,
    RemotingConfig,
    RemotingServer,
    RequestContext,
)
from rmqwire.remoting.client import parse_address

_sync = SynchronousTestCase()
ADDR = "127.0.0.1:9876"
ROUTE = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})


def route_handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
    return cmd.response_to(0, body=b'{"brokerDatas":[]}')


class World:
    """A server listening on 9876 and a client, both started Services on one MemoryReactorClock.

    Keyword arguments are the client's RemotingConfig fields.
    """

    def __init__(
        self, *processors: Processor, server_config: RemotingConfig | None = None, **client_config: Any
    ) -> None:
        self.reactor = MemoryReactorClock()
        self.server = RemotingServer(
            self.reactor,
            server_config,
            dispatcher=Dispatcher({105: route_handler}),
            processors=processors,
            port=9876,
        )
        self.server.startService()
        self.client = RemotingClient(self.reactor, RemotingConfig(**client_config))
        self.client.startService()
        self.completer = ConnectionCompleter(self.reactor)

    def connect(self) -> IOPump:
        pump = self.completer.succeedOnce(greet=False)
        assert pump is not None, "no connection attempt to complete"
        return pump


def test_server_listens_on_loopback_by_default() -> None:
    w = World()
    (port, _factory, _backlog, interface) = w.reactor.tcpServers[0]
    assert (port, interface) == (9876, "127.0.0.1")
    assert w.server.running and w.server.address == "127.0.0.1:9876"


def test_invoke_connects_and_reuses_the_connection() -> None:
    w = World()
    d = w.client.invoke(ADDR, ROUTE, 3.0)
    host, port, _factory, timeout, _bind = w.reactor.tcpClients[0]
    assert (host, port, timeout) == ("127.0.0.1", 9876, 3.0)
    pump = w.connect()
    pump.flush()
    resp = _sync.successResultOf(d)
    assert resp.code == 0 and resp.body == b'{"brokerDatas":[]}'
    assert list(w.client.channels) == [ADDR]
    assert len(w.server.channels) == 1
    d2 = w.client.invoke(ADDR, ROUTE, 3.0)
    assert w.reactor.tcpClients == []  # no second connect
    pump.flush()
    assert _sync.successResultOf(d2).opaque == 1  # per-connection opaques keep counting


def test_concurrent_invokes_share_one_connect_attempt() -> None:
    w = World()
    calls = [w.client.invoke(ADDR, ROUTE, 3.0) for _ in range(3)]
    assert len(w.reactor.tcpClients) == 1
    w.connect().flush()
    assert sorted(_sync.successResultOf(d).opaque for d in calls) == [0, 1, 2]


def test_connect_failure_is_remoting_connect_error() -> None:
    w = World()
    d = w.client.invoke(ADDR, ROUTE, 3.0)
    o = w.client.invoke_oneway(ADDR, ROUTE)
    w.completer.failOnce(Failure(ConnectionRefusedError("refused")))
    err = _sync.failureResultOf(d, RemotingConnectError).value
    assert "connect to 127.0.0.1:9876 failed" in str(err)
    _sync.failureResultOf(o, RemotingConnectError)
    # the next call tries again
    w.client.invoke(ADDR, ROUTE, 3.0)
    assert len(w.reactor.tcpClients) == 1


@pytest.mark.parametrize("addr", ["nohost", "127.0.0.1:", "127.0.0.1:99999", ":9876", "h:x1"])
def test_bad_address_is_connect_error(addr: str) -> None:
    w = World()
    _sync.failureResultOf(w.client.invoke(addr, ROUTE, 3.0), RemotingConnectError)
    assert w.reactor.tcpClients == []


def test_parse_address() -> None:
    assert parse_address("10.0.0.1:10911") == ("10.0.0.1", 10911)
    assert parse_address("[::1]:9876") == ("::1", 9876)


def test_timeout_covers_connecting() -> None:
    w = World()
    d = w.client.invoke(ADDR, ROUTE, 1.0)
    w.reactor.advance(1.5)  # the connect takes longer than the call's timeout
    pump = w.connect()
    pump.flush()
    err = _sync.failureResultOf(d, RemotingTimeoutError).value
    assert "while connecting" in str(err)


def test_invoke_timeout_over_established_connection() -> None:
    w = World()
    w.server.dispatcher.register(105, lambda c, x: None)  # never answers
    d = w.client.invoke(ADDR, ROUTE, 2.0)
    pump = w.connect()
    pump.flush()
    w.reactor.advance(2.0)
    err = _sync.failureResultOf(d, RemotingTimeoutError).value
    assert "timed out after 2 s" in str(err) and "127.0.0.1" in str(err)


def test_drop_fails_pending_and_next_call_reconnects() -> None:
    w = World()
    w.server.dispatcher.register(105, lambda c, x: None)
    d = w.client.invoke(ADDR, ROUTE, 3.0)
    pump = w.connect()
    pump.flush()
    (server_side,) = w.server.channels
    server_side.close()  # the broker drops us
    pump.flush()
    _sync.failureResultOf(d, ConnectionLostError)
    assert w.client.channels == {} and w.server.channels == frozenset()
    w.server.dispatcher.register(105, route_handler)
    d2 = w.client.invoke(ADDR, ROUTE, 3.0)
    assert len(w.reactor.tcpClients) == 1  # reconnect on demand
    w.connect().flush()
    assert _sync.successResultOf(d2).code == 0


def test_server_calls_client_processor() -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED (oneway) and GET_CONSUMER_RUNNING_INFO from broker to client."""
    notified: list[dict[str, str] | None] = []
    w = World()
    w.client.register_processor(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda c, x: notified.append(c.ext_fields)
    )
    w.client.register_processor(
        RequestCode.GET_CONSUMER_RUNNING_INFO, lambda c, x: c.response_to(0, body=b"{}")
    )
    w.client.invoke(ADDR, ROUTE, 3.0)
    pump = w.connect()
    pump.flush()
    (to_client,) = w.server.channels
    to_client.invoke_oneway(RemotingCommand.request(40, {"consumerGroup": "g"}, language=LanguageCode.JAVA))
    info = to_client.invoke(RemotingCommand.request(307, {"consumerGroup": "g", "clientId": "c"}), 3.0)
    unknown = to_client.invoke(RemotingCommand.request(309), 3.0)
    pump.flush()
    assert notified == [{"consumerGroup": "g"}]
    resp = _sync.successResultOf(info)
    assert (resp.code, resp.body, resp.language) == (0, b"{}", LanguageCode.PYTHON)
    resp = _sync.successResultOf(unknown)
    assert (resp.code, resp.remark) == (3, " request type 309 not supported")


def test_client_close_closes_connections_and_refuses_new_calls() -> None:
    w = World()
    w.client.invoke(ADDR, ROUTE, 3.0)
    pump = w.connect()
    pump.flush()
    closed = w.client.close()
    pump.flush()
    assert _sync.successResultOf(closed) is None
    assert w.client.channels == {} and w.server.channels == frozenset()
    _sync.failureResultOf(w.client.invoke(ADDR, ROUTE, 3.0), RemotingConnectError)
    assert [c for c in w.reactor.getDelayedCalls() if c.active()] == []


def test_client_close_abandons_connect_in_progress() -> None:
    w = World()
    d = w.client.invoke(ADDR, ROUTE, 3.0)
    closed = w.client.close()
    assert w.reactor.connectors[0].stoppedConnecting
    _sync.failureResultOf(d, RemotingConnectError)
    assert _sync.successResultOf(closed) is None


def test_server_close_stops_listening_and_drops_clients() -> None:
    w = World()
    d = w.client.invoke(ADDR, RemotingCommand.request(9999), 3.0)
    pump = w.connect()
    pump.flush()
    _sync.successResultOf(d)
    closed = w.server.close()
    pump.flush()
    assert _sync.successResultOf(closed) is None
    assert w.client.channels == {}


@pytest.mark.parametrize("fixed", [None, SerializeType.JSON])
def test_server_response_type_modes_end_to_end(fixed: SerializeType | None) -> None:
    reactor = MemoryReactorClock()
    server = RemotingServer(
        reactor,
        RemotingConfig(language=LanguageCode.JAVA, response_serialize_type=fixed),
        dispatcher=Dispatcher({105: route_handler}),
        port=10911,
    )
    server.startService()
    client = RemotingClient(reactor, RemotingConfig(serialize_type=SerializeType.ROCKETMQ))
    d = client.invoke("127.0.0.1:10911", ROUTE, 3.0)
    pump = ConnectionCompleter(reactor).succeedOnce(greet=False)
    assert pump is not None
    pump.flush()
    expected = SerializeType.ROCKETMQ if fixed is None else fixed  # 4.x follows, 5.x fixed
    assert _sync.successResultOf(d).serialize_type == expected


def test_idle_client_connection_closes_and_reopens() -> None:
    w = World(idle_timeout=30.0)
    w.client.invoke(ADDR, ROUTE, 3.0)
    pump = w.connect()
    pump.flush()
    w.reactor.advance(30.0)
    pump.flush()
    assert w.client.channels == {}
    w.client.invoke(ADDR, ROUTE, 3.0)
    assert len(w.reactor.tcpClients) == 1


def test_client_oneway_reaches_server_without_reply() -> None:
    got: list[RemotingCommand] = []
    w = World()
    w.server.dispatcher.register(
        RequestCode.UPDATE_CONSUMER_OFFSET, lambda c, x: got.append(c) or c.response_to(0)
    )
    d = w.client.invoke_oneway(ADDR, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"q": "1"}))
    pump = w.connect()
    assert _sync.successResultOf(d) is None
    received: list[bytes] = []
    client_side = w.client.channels[ADDR]
    client_side.dataReceived = received.append  # type: ignore[method-assign]
    pump.flush()
    assert [c.is_oneway for c in got] == [True]
    assert received == []  # the handler returned a response, but a oneway request gets none


# ---- typed calls ------------------------------------------------------------------------------------

ROUTE_T = TopicRouteData(
    queue_datas=[QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6)],
    broker_datas=[BrokerData(cluster="DefaultCluster", broker_name="broker-a", broker_addrs={0: "10.0.0.2:10911"})],
)
PULL_FIELDS = {
    "consumer_group": "g", "topic": "T", "queue_id": 0, "queue_offset": 0, "max_msg_nums": 32, "sys_flag": 0,
    "commit_offset": 0, "suspend_timeout_millis": 0, "sub_version": 0,
}


class Broker(Processor):
    """Typed answers for the typed-call tests."""

    def __init__(self) -> None:
        self.headers: list[Any] = []

    @GetRouteInfo.responder
    def route(self, header: GetRouteInfoRequestHeader, body: None, context: RequestContext) -> Any:
        self.headers.append(header)
        if header.topic == "T":
            return ROUTE_T
        raise TopicNotExistError(remark=f"No topic route info in name server for the topic: {header.topic}")

    @QueryConsumerOffset.responder
    def offset(self, header: Any, body: None, context: RequestContext) -> Any:
        return QueryConsumerOffsetResponseHeader(offset=42)

    @PullMessage.responder
    def pull(self, header: Any, body: None, context: RequestContext) -> Any:
        if header.queue_offset >= 10:
            # Java's not-found answer carries only some of the success fields
            return Response(
                header=PullMessageResponseHeader(next_begin_offset=10, min_offset=0, max_offset=10),
                code=ResponseCode.PULL_NOT_FOUND,
                remark="no new message",
            )
        return Response(
            header=PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=1, min_offset=0, max_offset=10),
            body=b"\x00stored-records",
        )


class RecordingPulls(Broker):
    """The broker that also records each pull's header."""

    @PullMessage.responder
    def pull(self, header: Any, body: None, context: RequestContext) -> Any:
        self.headers.append(header)
        return super().pull(header, body, context)


def typed_world(**client_config: Any) -> tuple[World, Broker, IOPump]:
    broker = Broker()
    w = World(broker, **client_config)
    first = w.client.call(ADDR, GetRouteInfo, topic="T")  # connect once
    pump = w.connect()
    pump.flush()
    _sync.successResultOf(first)
    return w, broker, pump


def test_call_returns_the_typed_response_on_success() -> None:
    w, _broker, pump = typed_world()
    d = w.client.call(ADDR, GetRouteInfo, topic="T")
    pump.flush()
    resp = _sync.successResultOf(d)
    assert isinstance(resp, Response) and resp.ok and resp.code == ResponseCode.SUCCESS
    assert resp.body == ROUTE_T and resp.header is None  # no response header declared
    assert resp.command is not None and resp.command.language == LanguageCode.JAVA
    d = w.client.call(ADDR, QueryConsumerOffset, consumer_group="g", topic="T", queue_id=1)
    pump.flush()
    resp = _sync.successResultOf(d)
    assert resp.header == QueryConsumerOffsetResponseHeader(offset=42) and resp.body is None


@pytest.mark.parametrize(
    "how",
    [
        lambda c: c.call(ADDR, GetRouteInfo, {"topic": "T"}),
        lambda c: c.call(ADDR, GetRouteInfo, GetRouteInfoRequestHeader(topic="T")),
    ],
    ids=["mapping", "header-object"],
)
def test_call_takes_a_header_object_a_mapping_or_keywords(how: Any) -> None:
    w, broker, pump = typed_world()
    d = how(w.client)
    pump.flush()
    assert _sync.successResultOf(d).body == ROUTE_T
    assert broker.headers[-1] == GetRouteInfoRequestHeader(topic="T")


def test_declared_status_is_a_response_not_an_error() -> None:
    w, _, pump = typed_world()
    d = w.client.call(ADDR, PullMessage, **{**PULL_FIELDS, "queue_offset": 10})
    pump.flush()
    resp = _sync.successResultOf(d)
    assert (resp.code, resp.remark, resp.ok, resp.body) == (ResponseCode.PULL_NOT_FOUND, "no new message", False, None)
    assert resp.header == PullMessageResponseHeader(next_begin_offset=10, min_offset=0, max_offset=10)
    d = w.client.call(ADDR, PullMessage, **PULL_FIELDS)
    pump.flush()
    resp = _sync.successResultOf(d)
    assert resp.ok and resp.body == b"\x00stored-records" and resp.header.next_begin_offset == 1


def test_other_codes_fail_with_the_typed_error() -> None:
    w, _, pump = typed_world()
    d = w.client.call(ADDR, GetRouteInfo, topic="Nope")
    pump.flush()
    err = _sync.failureResultOf(d, TopicNotExistError).value
    assert isinstance(err, BrokerResponseError)
    assert (err.code, err.remark) == (17, "No topic route info in name server for the topic: Nope")
    assert err.retriable and err.refresh_route
    assert str(err) == "TOPIC_NOT_EXIST (17): No topic route info in name server for the topic: Nope"


def test_unknown_code_keeps_the_number() -> None:
    w = World()
    w.server.dispatcher.register(105, lambda c, x: c.response_to(777, remark="from the future"))
    d = w.client.call(ADDR, GetRouteInfo, topic="T")
    w.connect().flush()
    err = _sync.failureResultOf(d, UnknownResponseCodeError).value
    assert (err.code, err.remark) == (777, "from the future")
    assert not err.retriable and not err.refresh_route


def test_a_status_of_another_command_is_an_error_here() -> None:
    w = World()
    w.server.dispatcher.register(105, lambda c, x: c.response_to(ResponseCode.PULL_NOT_FOUND))
    d = w.client.call(ADDR, GetRouteInfo, topic="T")
    w.connect().flush()
    assert _sync.failureResultOf(d, BrokerResponseError).value.code == ResponseCode.PULL_NOT_FOUND


def test_oneway_sets_the_flag_and_gets_no_reply() -> None:
    got: list[RemotingCommand] = []
    w = World()
    w.server.dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda c, x: got.append(c) or c.response_to(0))
    w.server.dispatcher.register(RequestCode.UPDATE_CONSUMER_OFFSET, lambda c, x: got.append(c) or c.response_to(0))
    d1 = w.client.oneway(ADDR, NotifyConsumerIdsChanged, consumer_group="g")
    # a two-way declaration sent oneway (Java's offset store persists offsets oneway)
    d2 = w.client.oneway(ADDR, UpdateConsumerOffset, consumer_group="g", topic="T", queue_id=0, commit_offset=5)
    pump = w.connect()
    assert _sync.successResultOf(d1) is None and _sync.successResultOf(d2) is None
    received: list[bytes] = []
    w.client.channels[ADDR].dataReceived = received.append  # type: ignore[method-assign]
    pump.flush()
    assert [(c.code, c.flag & FLAG_ONEWAY) for c in got] == [(40, FLAG_ONEWAY), (15, FLAG_ONEWAY)]
    assert got[1].ext_fields == {"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "5"}
    assert received == []
    assert w.client.channels[ADDR].pending_count == 0


def test_missing_required_field_fails_locally_before_anything_is_sent() -> None:
    w = World()
    _sync.failureResultOf(w.client.call(ADDR, GetRouteInfo), MissingHeaderFieldError)
    _sync.failureResultOf(w.client.oneway(ADDR, NotifyConsumerIdsChanged), MissingHeaderFieldError)
    assert w.reactor.tcpClients == []  # not even a connect
    w2, broker, pump = typed_world()
    before = len(broker.headers)
    err = _sync.failureResultOf(
        w2.client.call(ADDR, QueryConsumerOffset, consumer_group="g", topic="T"), MissingHeaderFieldError
    ).value
    assert "queueId" in str(err)
    pump.flush()
    assert len(broker.headers) == before and w2.client.channels[ADDR].pending_count == 0


def test_wrong_header_type_or_both_forms_fail_locally() -> None:
    w = World()
    wrong = QueryConsumerOffsetResponseHeader(offset=1)
    _sync.failureResultOf(w.client.call(ADDR, GetRouteInfo, wrong), TypeError)
    _sync.failureResultOf(w.client.call(ADDR, GetRouteInfo, {"topic": "A"}, topic="B"), TypeError)
    assert w.reactor.tcpClients == []



def test_call_on_a_oneway_command_fails_locally() -> None:
    w = World()
    f = _sync.failureResultOf(
        w.client.call(ADDR, NotifyConsumerIdsChanged, consumer_group="g"), LocalProtocolError
    )
    assert "use oneway()" in str(f.value)
    assert w.reactor.tcpClients == []

def test_typed_call_timeout() -> None:
    w = World()
    w.server.dispatcher.register(105, lambda c, x: Deferred())  # never answers
    d = w.client.call(ADDR, GetRouteInfo, topic="T", timeout=2.0)
    w.connect().flush()
    w.reactor.advance(1.9)
    _sync.assertNoResult(d)
    w.reactor.advance(0.1)
    assert "timed out after 2 s" in str(_sync.failureResultOf(d, RemotingTimeoutError).value)


def test_default_call_timeout_comes_from_the_config() -> None:
    w = World(call_timeout=4.0)
    w.server.dispatcher.register(105, lambda c, x: Deferred())
    d = w.client.call(ADDR, GetRouteInfo, topic="T")
    w.connect().flush()
    w.reactor.advance(3.9)
    _sync.assertNoResult(d)
    w.reactor.advance(0.1)
    _sync.failureResultOf(d, RemotingTimeoutError)


def test_client_processors_answer_the_server() -> None:
    class ConsumerSide(Processor):
        @GetRouteInfo.responder
        def route(self, header: Any, body: None, context: RequestContext) -> Any:
            return ROUTE_T

    reactor = MemoryReactorClock()
    server = RemotingServer(reactor, port=9876)
    server.startService()
    client = RemotingClient(reactor, processors=(ConsumerSide(),))
    client.startService()
    client.invoke(ADDR, RemotingCommand.request(9999), 3.0)
    pump = ConnectionCompleter(reactor).succeedOnce(greet=False)
    assert pump is not None
    pump.flush()
    (to_client,) = server.channels
    d = to_client.invoke(GetRouteInfo.request(topic="T"), 3.0)
    pump.flush()
    resp = GetRouteInfo.parse_response(_sync.successResultOf(d))
    assert resp.body == ROUTE_T
    assert resp.command.language == LanguageCode.PYTHON  # the client answers as itself


# ---- services ----------------------------------------------------------------------------------------


class Gated(Processor):
    """GetRouteInfo answered when the test says so."""

    def __init__(self) -> None:
        self.gates: list[Deferred[Any]] = []

    @GetRouteInfo.responder
    def route(self, header: Any, body: None, context: RequestContext) -> Deferred[Any]:
        gate: Deferred[Any] = Deferred()
        self.gates.append(gate)
        return gate


def gated_world(close_grace: float = 5.0) -> tuple[World, Gated, IOPump, Deferred[Any]]:
    gated = Gated()
    server_config = RemotingConfig(language=LanguageCode.JAVA, close_grace=close_grace)
    w = World(gated, server_config=server_config, close_grace=close_grace)
    call = w.client.call(ADDR, GetRouteInfo, topic="T", timeout=60.0)
    pump = w.connect()
    pump.flush()
    assert len(gated.gates) == 1 and len(w.server.channels) == 1
    return w, gated, pump, call


def test_client_stop_waits_for_a_call_answered_within_the_grace() -> None:
    w, gated, pump, call = gated_world()
    stopped = w.client.stopService()
    assert not w.client.running
    pump.flush()
    _sync.assertNoResult(stopped)
    _sync.assertNoResult(call)
    assert len(w.client.channels) == 1  # still open for the answer
    # no new calls while stopping
    _sync.failureResultOf(w.client.call(ADDR, GetRouteInfo, topic="T"), RemotingConnectError)
    w.reactor.advance(4.9)
    gated.gates[0].callback(ROUTE_T)
    pump.flush()
    assert _sync.successResultOf(call).body == ROUTE_T
    pump.flush()
    assert _sync.successResultOf(stopped) is None
    assert w.client.channels == {} and w.server.channels == frozenset()
    assert [c for c in w.reactor.getDelayedCalls() if c.active()] == []


def test_client_stop_closes_after_the_grace_when_unanswered() -> None:
    w, gated, pump, call = gated_world(close_grace=2.0)
    stopped = w.client.stopService()
    w.reactor.advance(1.9)
    pump.flush()
    _sync.assertNoResult(stopped)
    _sync.assertNoResult(call)
    w.reactor.advance(0.1)
    pump.flush()
    _sync.failureResultOf(call, ConnectionLostError)
    assert _sync.successResultOf(stopped) is None
    assert w.client.channels == {} and w.server.channels == frozenset()
    assert [c for c in w.reactor.getDelayedCalls() if c.active()] == []
    gated.gates[0].callback(ROUTE_T)  # too late: dropped on the server, nothing raised
    pump.flush()


def test_client_stop_with_nothing_in_flight_closes_at_once() -> None:
    w, gated, pump, call = gated_world()
    gated.gates[0].callback(ROUTE_T)
    pump.flush()
    _sync.successResultOf(call)
    stopped = w.client.stopService()
    pump.flush()
    assert _sync.successResultOf(stopped) is None
    assert w.client.channels == {}


def test_client_restarts_after_stop() -> None:
    w, gated, pump, _call = gated_world()
    gated.gates[0].callback(ROUTE_T)
    pump.flush()
    stopped = w.client.stopService()
    pump.flush()
    _sync.successResultOf(stopped)
    w.client.startService()
    d = w.client.call(ADDR, GetRouteInfo, topic="T")
    pump = w.connect()  # a new channel
    pump.flush()
    gated.gates[1].callback(ROUTE_T)
    pump.flush()
    assert _sync.successResultOf(d).body == ROUTE_T


def test_server_stop_waits_for_a_request_being_processed() -> None:
    w, gated, pump, call = gated_world()
    stopped = w.server.stopService()
    assert not w.server.running
    with pytest.raises(RuntimeError):
        _ = w.server.port  # no longer listening
    pump.flush()
    _sync.assertNoResult(stopped)
    gated.gates[0].callback(ROUTE_T)
    pump.flush()
    assert _sync.successResultOf(call).body == ROUTE_T  # answered before the channel closed
    pump.flush()
    assert _sync.successResultOf(stopped) is None
    assert w.server.channels == frozenset() and w.client.channels == {}


def test_server_stop_closes_after_the_grace_when_unanswered() -> None:
    w, gated, pump, call = gated_world(close_grace=3.0)
    stopped = w.server.stopService()
    w.reactor.advance(2.9)
    pump.flush()
    _sync.assertNoResult(stopped)
    w.reactor.advance(0.1)
    pump.flush()
    _sync.failureResultOf(call, ConnectionLostError)
    assert _sync.successResultOf(stopped) is None
    assert w.server.channels == frozenset() and w.client.channels == {}
    gated.gates[0].callback(ROUTE_T)  # too late: dropped, nothing raised
    assert [c for c in w.reactor.getDelayedCalls() if c.active()] == []


def test_server_stop_before_any_connection() -> None:
    reactor = MemoryReactorClock()
    server = RemotingServer(reactor, port=9876)
    server.startService()
    built = server.build_protocol()  # built but never connected
    assert _sync.successResultOf(server.stopService()) is None
    assert built not in server.channels


def test_call_prepared_waits_for_the_channel_then_writes_the_frame() -> None:
    """A prepared pull (cached frame) to an address without an open channel goes out as its typed
    command once connected; over the open channel its frame is written; both are typed answers."""
    from rmqwire.codec.commands.pull import (
        PullMessageRequestHeader,
        PullRequestTemplate,
    )

    broker = RecordingPulls()
    w = World(broker)
    template = PullRequestTemplate(PullMessage, PullMessageRequestHeader(**PULL_FIELDS))
    d = w.client.call_prepared(ADDR, PullMessage, template.request(3, 0, 0), timeout=3.0)
    pump = w.connect()
    pump.flush()
    first = _sync.successResultOf(d)
    d = w.client.call_prepared(ADDR, PullMessage, template.request(12, 0, 0), timeout=3.0)
    pump.flush()
    second = _sync.successResultOf(d)
    assert first.ok and first.header.next_begin_offset == 1
    assert second.code == ResponseCode.PULL_NOT_FOUND and second.header.next_begin_offset == 10
    assert [h.queue_offset for h in broker.headers] == [3, 12]
    assert broker.headers[1] == PullMessageRequestHeader(**{**PULL_FIELDS, "queue_offset": 12})


@pytest.mark.parametrize("timeout", [0.0, -0.5])
def test_a_call_with_its_budget_spent_times_out_unwritten(timeout: float) -> None:
    """Every typed and raw call of the client on an open channel with no time left fails as a
    timeout (Java's invokeSync, left <= 0) and the peer never sees the request; the channel
    serves the next call as before."""
    from rmqwire.codec.commands.pull import PullMessageRequestHeader, PullRequestTemplate

    broker = RecordingPulls()
    w = World(broker)
    d = w.client.call(ADDR, GetRouteInfo, topic="T", timeout=3.0)
    pump = w.connect()
    pump.flush()
    assert _sync.successResultOf(d).ok and len(broker.headers) == 1
    template = PullRequestTemplate(PullMessage, PullMessageRequestHeader(**PULL_FIELDS))
    spent = [
        w.client.call(ADDR, GetRouteInfo, topic="T", timeout=timeout),
        w.client.call_prepared(ADDR, PullMessage, template.request(3, 0, 0), timeout=timeout),
        w.client.invoke(ADDR, ROUTE, timeout),
    ]
    pump.flush()
    for call in spent:
        assert "no time left" in str(_sync.failureResultOf(call, RemotingTimeoutError).value)
    assert len(broker.headers) == 1 and w.client.channels[ADDR].pending_count == 0
    d = w.client.call(ADDR, GetRouteInfo, topic="T", timeout=3.0)
    pump.flush()
    assert _sync.successResultOf(d).ok and len(broker.headers) == 2
