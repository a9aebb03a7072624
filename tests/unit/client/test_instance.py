"""The client instance's timers: heartbeat and route refresh (Clock-driven, fake_cluster)."""

from __future__ import annotations

from fake_cluster import World
from twisted.trial.unittest import SynchronousTestCase

from rmqwire.client.message import Message
from rmqwire.client.producer import Producer

_t = SynchronousTestCase()


def test_heartbeat_every_interval_to_masters_of_known_routes() -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T", brokers=("broker-a",))
    p = Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr, client_ip="10.0.0.1")
    _t.successResultOf(p.start())
    w.run()
    w.advance(1.0)  # first heartbeat tick: no route known yet, nothing to send
    assert all(not b.heartbeats for b in w.brokers.values())
    d = p.send(Message("T", b"x"))
    w.run()
    _t.successResultOf(d)
    a = w.brokers["broker-a"]
    assert len(a.heartbeats) == 1  # on the new connection
    w.advance(30.0)
    assert len(a.heartbeats) == 2 and not w.brokers["broker-b"].heartbeats
    w.advance(30.0)
    assert len(a.heartbeats) == 3


def test_route_refresh_follows_the_name_server() -> None:
    w = World(("broker-a", "broker-b"))
    w.add_topic("T", brokers=("broker-a",))
    p = Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr, client_ip="10.0.0.1",
                 poll_name_server_interval=5000)
    _t.successResultOf(p.start())
    w.run()
    d = p.send(Message("T", b"x"))
    w.run()
    _t.successResultOf(d)
    assert {q.broker_name for q in p.publish_info["T"].message_queues} == {"broker-a"}
    w.add_topic("T", brokers=("broker-a", "broker-b"))
    lookups = len(w.namesrv.lookups)
    w.advance(5.0)
    assert len(w.namesrv.lookups) == lookups + 1
    assert {q.broker_name for q in p.publish_info["T"].message_queues} == {"broker-a", "broker-b"}
    assert p.instance.routes.find_broker_address_in_publish("broker-b") == w.brokers["broker-b"].addr


def test_concurrent_lookups_of_one_topic_share_one_request() -> None:
    w = World()
    w.add_topic("T")
    p = Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr, client_ip="10.0.0.1")
    _t.successResultOf(p.start())
    ds = [p.send(Message("T", b"x")) for _ in range(5)]
    w.run()
    for d in ds:
        _t.successResultOf(d)
    assert w.namesrv.lookups == ["T"]


def test_shutdown_stops_timers_and_closes_connections() -> None:
    w = World()
    w.add_topic("T")
    p = Producer(w.reactor, "pg", namesrv_addr=w.namesrv_addr, client_ip="10.0.0.1")
    _t.successResultOf(p.start())
    d = p.send(Message("T", b"x"))
    w.run()
    _t.successResultOf(d)
    d = p.shutdown()
    w.run()
    _t.successResultOf(d)
    assert p.instance.remoting.channels == {}
    assert [c for c in w.reactor.getDelayedCalls() if c.active()] == []
