"""RemotingClient and RemotingServer on a MemoryReactorClock, connected in memory by iosim."""

from __future__ import annotations

import pytest
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.test.iosim import ConnectionCompleter, IOPump
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.codec import LanguageCode, RemotingCommand, RequestCode, SerializeType
from rmqwire.errors import ConnectionLostError, RemotingConnectError, RemotingTimeoutError
from rmqwire.remoting import Dispatcher, RemotingClient, RemotingServer, RequestContext
from rmqwire.remoting.client import parse_address

_sync = SynchronousTestCase()
ADDR = "127.0.0.1:9876"
ROUTE = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})


def route_handler(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
    return cmd.response_to(0, body=b'{"brokerDatas":[]}')


class World:
    """A server listening on 9876 and a client, both on one MemoryReactorClock."""

    def __init__(self, **client_kwargs: object) -> None:
        self.reactor = MemoryReactorClock()
        self.server = RemotingServer(Dispatcher({105: route_handler}))
        self.port = self.server.listen(self.reactor, 9876)
        self.client = RemotingClient(self.reactor, **client_kwargs)  # type: ignore[arg-type]
        self.completer = ConnectionCompleter(self.reactor)

    def connect(self) -> IOPump:
        pump = self.completer.succeedOnce(greet=False)
        assert pump is not None, "no connection attempt to complete"
        return pump


def test_server_listens_on_loopback_by_default() -> None:
    w = World()
    (port, _factory, _backlog, interface) = w.reactor.tcpServers[0]
    assert (port, interface) == (9876, "127.0.0.1")


def test_invoke_connects_and_reuses_the_connection() -> None:
    w = World()
    d = w.client.invoke(ADDR, ROUTE, 3.0)
    host, port, _factory, timeout, _bind = w.reactor.tcpClients[0]
    assert (host, port, timeout) == ("127.0.0.1", 9876, 3.0)
    pump = w.connect()
    pump.flush()
    resp = _sync.successResultOf(d)
    assert resp.code == 0 and resp.body == b'{"brokerDatas":[]}'
    assert list(w.client.connections) == [ADDR]
    assert len(w.server.connections) == 1
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
    (server_side,) = w.server.connections
    server_side.close()  # the broker drops us
    pump.flush()
    _sync.failureResultOf(d, ConnectionLostError)
    assert w.client.connections == {} and w.server.connections == frozenset()
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
    (to_client,) = w.server.connections
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
    assert w.client.connections == {} and w.server.connections == frozenset()
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
    assert w.client.connections == {}


@pytest.mark.parametrize("fixed", [None, SerializeType.JSON])
def test_server_response_type_modes_end_to_end(fixed: SerializeType | None) -> None:
    reactor = MemoryReactorClock()
    server = RemotingServer(Dispatcher({105: route_handler}), response_serialize_type=fixed)
    server.listen(reactor, 10911)
    client = RemotingClient(reactor, serialize_type=SerializeType.ROCKETMQ)
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
    assert w.client.connections == {}
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
    client_side = w.client.connections[ADDR]
    client_side.dataReceived = received.append  # type: ignore[method-assign]
    pump.flush()
    assert [c.is_oneway for c in got] == [True]
    assert received == []  # the handler returned a response, but a oneway request gets none
