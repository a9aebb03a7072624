"""Registration with the NameServers over loopback: REGISTER_BROKER at start (every topic, the
topic table's DataVersion), a topic created later registered at once, periodic re-registration,
and UNREGISTER_BROKER at shutdown."""

from __future__ import annotations

from pathlib import Path

from rmqwire.client.blocking import call, ensure_reactor
from rmqwire.codec.commands.route import GetBrokerClusterInfo, GetRouteInfo
from rmqwire.errors import TopicNotExistError
from rmqwire.remoting import RemotingClient
from rmqwire.server.broker.register import register_period_ms
from rmqwire.testing import start_cluster


def _client() -> RemotingClient:
    reactor = ensure_reactor()
    client = call(RemotingClient, reactor, timeout=10)
    call(client.startService, timeout=10)
    return client


def test_register_at_start_incremental_and_unregister(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "store")
    client = _client()
    try:
        info = call(client.call, cluster.namesrv_addr, GetBrokerClusterInfo, timeout=10).body
        assert info.broker_addr_table["broker-a"].broker_addrs == {0: cluster.broker_addr}
        route = call(client.call, cluster.namesrv_addr, GetRouteInfo, topic="TBW102", timeout=10).body
        assert [(q.broker_name, q.perm, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 7, 8)]
        cluster.create_topic("Fresh", queues=3)  # answered after the NameServers have it
        route = call(client.call, cluster.namesrv_addr, GetRouteInfo, topic="Fresh", timeout=10).body
        assert route.queue_datas[0].read_queue_nums == 3
        registrar = cluster.standalone.broker.registrar
        before = registrar.registrations
        call(registrar.register_all, timeout=10)
        assert registrar.registrations == before + 1
        call(cluster.standalone.broker.stopService, timeout=30)
        info = call(client.call, cluster.namesrv_addr, GetBrokerClusterInfo, timeout=10).body
        assert "broker-a" not in (info.broker_addr_table or {})
        try:
            call(client.call, cluster.namesrv_addr, GetRouteInfo, topic="Fresh", timeout=10)
        except TopicNotExistError:
            pass
        else:
            raise AssertionError("the route outlived the broker's unregistration")
    finally:
        call(client.stopService, timeout=10)
        cluster.stop()


def test_register_period_is_clamped_as_java_clamps_it() -> None:
    assert [register_period_ms(p) for p in (1000, 30_000, 90_000)] == [10_000, 30_000, 60_000]


def test_fast_port_serves_all_but_pulls(tmp_path: Path) -> None:
    """The VIP channel (listenPort - 2) answers sends and admin codes, not pulls (Java's fast
    server has no pull processor)."""
    from rmqwire.codec import RequestCode, ResponseCode
    from tools.reference.wire import request

    cluster = start_cluster(tmp_path / "store")
    try:
        host, port = cluster.broker_addr.rsplit(":", 1)
        fast = f"{host}:{int(port) - 2}"
        assert request(fast, RequestCode.GET_BROKER_RUNTIME_INFO).code == ResponseCode.SUCCESS
        reply = request(fast, RequestCode.PULL_MESSAGE, {"consumerGroup": "g", "topic": "TBW102", "queueId": "0",
                                                         "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0",
                                                         "commitOffset": "0", "suspendTimeoutMillis": "0",
                                                         "subVersion": "0"})
        assert (reply.code, reply.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 11 not supported")
        reply = request(cluster.broker_addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": "g", "topic": "TBW102", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
            "subscription": "*", "expressionType": "TAG"})
        assert reply.code == ResponseCode.PULL_NOT_FOUND
    finally:
        cluster.stop()
