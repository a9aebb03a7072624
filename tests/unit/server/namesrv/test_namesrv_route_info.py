"""RouteInfoManager as plain state: registration, DataVersion change detection, unregistration,
expiry with a fake clock, permissions, topic lists, and consistency under any interleaving."""

from __future__ import annotations

import copy

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from namesrv_helpers import FakeClock, table

from rmqwire.codec.commands.route import QueueData
from rmqwire.codec.commands.topic import DataVersion
from rmqwire.server.namesrv.config import NamesrvConfig
from rmqwire.server.namesrv.route_info import (
    BrokerAddrInfo,
    RouteInfoManager,
    TopicConfigTable,
    UnregisterRequest,
)

A = "10.0.0.1:10911"
A_SLAVE = "10.0.0.2:10911"
B = "10.0.0.3:10911"


def manager(**cfg) -> tuple[RouteInfoManager, FakeClock]:
    clock = FakeClock()
    return RouteInfoManager(NamesrvConfig(**cfg), clock), clock


def register(m: RouteInfoManager, name: str, addr: str, tc: TopicConfigTable, *, broker_id: int = 0,
             cluster: str = "C", acting: bool | None = False, channel: object = None,
             timeout: int | None = None, ha: str | None = None):
    return m.register_broker(cluster, addr, name, broker_id, ha or addr.replace("10911", "10912"),
                             None, timeout, acting, tc, [], channel)


def test_master_registration_builds_the_route():
    m, _ = manager()
    assert register(m, "broker-a", A, table("T1", "T2")) is not None
    route = m.pickup_topic_route_data("T1")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    (bd,) = route.broker_datas
    assert (bd.cluster, bd.broker_name, bd.broker_addrs) == ("C", "broker-a", {0: A})
    assert route.filter_server_table == {}
    assert m.pickup_topic_route_data("nope") is None
    assert m.pickup_topic_route_data(None) is None


def test_a_single_topic_from_an_unregistered_broker_id_is_refused():
    m, _ = manager()
    assert register(m, "broker-a", A, table("T1")) is None
    assert m.pickup_topic_route_data("T1") is None
    assert register(m, "broker-a", A, table("T1", "T2")) is not None
    # Once registered, incremental single-topic registrations are accepted.
    assert register(m, "broker-a", A, table("T3", counter=2)) is not None
    assert m.pickup_topic_route_data("T3") is not None


def test_topics_change_only_with_the_data_version():
    m, _ = manager()
    register(m, "broker-a", A, table(("T1", 4), "T2", counter=1))
    # Same DataVersion: a changed queue count is not taken (the broker did not say it changed).
    register(m, "broker-a", A, table(("T1", 8), "T2", counter=1))
    assert m.pickup_topic_route_data("T1").queue_datas[0].write_queue_nums == 4
    # ... but a topic the NameServer lacks is added even then.
    register(m, "broker-a", A, table(("T1", 8), "T2", "T3", counter=1))
    assert m.pickup_topic_route_data("T3") is not None
    assert m.pickup_topic_route_data("T1").queue_datas[0].write_queue_nums == 4
    register(m, "broker-a", A, table(("T1", 8), "T2", "T3", counter=2))
    assert m.pickup_topic_route_data("T1").queue_datas[0].write_queue_nums == 8
    assert m.is_broker_topic_config_changed("C", A, DataVersion(0, 1000, 2)) is False
    assert m.is_broker_topic_config_changed("C", A, DataVersion(0, 1000, 3)) is True
    assert m.is_broker_topic_config_changed("C", "unknown:1", DataVersion(0, 1000, 2)) is True


def test_slave_learns_master_and_ha_address_and_does_not_touch_routes():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"), ha="10.0.0.1:10912")
    result = register(m, "broker-a", A_SLAVE, table(("T1", 16), "T2", "S1", counter=9), broker_id=1)
    assert (result.master_addr, result.ha_server_addr) == (A, "10.0.0.1:10912")
    route = m.pickup_topic_route_data("T1")
    assert route.broker_datas[0].broker_addrs == {0: A, 1: A_SLAVE}
    assert route.queue_datas[0].write_queue_nums == 4  # routes come from the master only
    assert m.pickup_topic_route_data("S1") is None
    # A slave registering before its master learns nothing.
    m2, _ = manager()
    r = register(m2, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1)
    assert (r.master_addr, r.ha_server_addr) == (None, None)


def test_prime_slave_of_an_acting_master_group_serves_read_only_routes():
    m, _ = manager()
    register(m, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1, acting=True)
    assert m.pickup_topic_route_data("T1").queue_datas[0].perm == 4  # write bit wiped
    # An old broker (no enableActingMaster in its header) never acts as master.
    m2, _ = manager()
    register(m2, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1, acting=None)
    assert m2.pickup_topic_route_data("T1") is None


def test_support_acting_master_presents_the_lowest_slave_as_master():
    m, _ = manager(support_acting_master=True)
    register(m, "broker-a", A, table("T1", "T2"), acting=True)
    register(m, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1, acting=True)
    m.unregister_broker([UnregisterRequest("C", A, "broker-a", 0)])
    route = m.pickup_topic_route_data("T1")
    assert route.queue_datas[0].perm == 4  # the master left: write perm wiped
    assert route.broker_datas[0].broker_addrs == {0: A_SLAVE}
    # The stored table still has the slave under its own id.
    assert m.broker_addr_table["broker-a"].broker_addrs == {1: A_SLAVE}


def test_same_address_keeps_one_id_when_a_slave_becomes_master():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"))
    register(m, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1)
    m.unregister_broker([UnregisterRequest("C", A, "broker-a", 0)])
    register(m, "broker-a", A_SLAVE, table("T1", "T2", counter=5), broker_id=0)
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}


def test_conflicting_registration_with_an_older_state_version_is_ignored():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2", state=5))
    result = register(m, "broker-a", B, table("T1", "T2", state=3))
    assert result is not None and result.master_addr is None
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: A}
    assert BrokerAddrInfo("C", B) not in m.broker_live_table


def test_unregister_drops_the_broker_and_its_topics():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "Shared"))
    register(m, "broker-b", B, table("T2", "Shared"))
    m.unregister_broker([UnregisterRequest("C", A, "broker-a", 0)])
    assert m.pickup_topic_route_data("T1") is None
    shared = m.pickup_topic_route_data("Shared")
    assert [q.broker_name for q in shared.queue_datas] == ["broker-b"]
    assert list(m.cluster_addr_table["C"]) == ["broker-b"]
    m.unregister_broker([UnregisterRequest("C", B, "broker-b", 0)])
    assert m.cluster_addr_table == {} and m.topic_queue_table == {} and m.broker_live_table == {}
    # Missing fields (a malformed request) change nothing.
    register(m, "broker-a", A, table("T1", "T2"))
    m.unregister_broker([UnregisterRequest(None, A, "broker-a", 0)])
    assert m.pickup_topic_route_data("T1") is not None


def test_slave_leaving_keeps_the_master():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"))
    register(m, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1)
    m.unregister_broker([UnregisterRequest("C", A_SLAVE, "broker-a", 1)])
    assert m.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {0: A}


def test_expiry_after_the_timeout_and_not_before():
    m, clock = manager(broker_channel_expired_time=120_000)
    ch_a, ch_b = object(), object()
    register(m, "broker-a", A, table("T1", "T2"), channel=ch_a)
    register(m, "broker-b", B, table("T3", "T4"), channel=ch_b, timeout=10_000)
    clock.advance(10_000)
    assert m.scan_not_active_broker() == []  # exactly at the deadline: still alive
    clock.advance(1)
    (expired,) = m.scan_not_active_broker()
    assert expired.addr_info == BrokerAddrInfo("C", B) and expired.channel is ch_b
    assert m.pickup_topic_route_data("T3") is None
    clock.advance(100_000)
    m.update_broker_info_update_timestamp("C", A)  # a heartbeat / QUERY_DATA_VERSION
    clock.advance(100_000)
    assert m.scan_not_active_broker() == []
    clock.advance(20_001)
    assert [e.channel for e in m.scan_not_active_broker()] == [ch_a]
    assert m.broker_addr_table == {}


def test_channel_close_unregisters_at_once():
    m, _ = manager()
    ch = object()
    register(m, "broker-a", A, table("T1", "T2"), channel=ch)
    m.on_channel_destroy(object())  # some other connection: nothing happens
    assert m.pickup_topic_route_data("T1") is not None
    m.on_channel_destroy(ch)
    assert m.pickup_topic_route_data("T1") is None and m.broker_live_table == {}


def test_write_permission_wipe_and_add():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"))
    register(m, "broker-b", B, table("T1", "T3"))
    assert m.wipe_write_perm_of_broker("broker-a") == 2
    perms = {q.broker_name: q.perm for q in m.pickup_topic_route_data("T1").queue_datas}
    assert perms == {"broker-a": 4, "broker-b": 6}
    assert m.add_write_perm_of_broker("broker-a") == 2
    assert m.pickup_topic_route_data("T2").queue_datas[0].perm == 6
    assert m.wipe_write_perm_of_broker("nobody") == 0
    assert m.wipe_write_perm_of_broker(None) == 0


def test_delete_topic_everywhere_or_per_cluster():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"), cluster="C1")
    register(m, "broker-b", B, table("T1", "T3"), cluster="C2")
    m.delete_topic("T1", "C1")
    assert [q.broker_name for q in m.pickup_topic_route_data("T1").queue_datas] == ["broker-b"]
    m.delete_topic("T1", "unknown-cluster")
    m.delete_topic("T1", "C2")
    assert m.pickup_topic_route_data("T1") is None
    m.delete_topic("T2")
    assert m.pickup_topic_route_data("T2") is None
    m.delete_topic(None)


def test_register_topic_needs_known_brokers():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"))
    assert not m.register_topic("X", [QueueData("ghost", 1, 1, 6, 0)])
    assert m.pickup_topic_route_data("X") is None
    assert m.register_topic("X", [QueueData("broker-a", 2, 2, 6, 0)])
    assert m.pickup_topic_route_data("X").queue_datas == [QueueData("broker-a", 2, 2, 6, 0)]


def test_topic_lists():
    m, _ = manager()
    unit = table("U1", "U2")
    for tc in unit.topic_config_table.values():
        tc.topic_sys_flag = 1
    register(m, "broker-a", A, table("T1", "T2"), cluster="C1")
    register(m, "broker-b", B, unit, cluster="C2")
    assert set(m.get_all_topic_list().topic_list) == {"T1", "T2", "U1", "U2"}
    assert set(m.get_topics_by_cluster("C1").topic_list) == {"T1", "T2"}
    assert m.get_topics_by_cluster("nope").topic_list == []
    assert set(m.get_unit_topics().topic_list) == {"U1", "U2"}
    assert m.get_has_unit_sub_topic_list().topic_list == []
    system = m.get_system_topic_list()
    assert set(system.topic_list) == {"C1", "C2", "broker-a", "broker-b"}
    assert system.broker_addr in (A, B)


def test_cluster_info_and_member_group():
    m, _ = manager()
    register(m, "broker-a", A, table("T1", "T2"))
    register(m, "broker-a", A_SLAVE, table("T1", "T2"), broker_id=1)
    info = m.get_all_cluster_info()
    assert info.cluster_addr_table == {"C": ["broker-a"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: A, 1: A_SLAVE}
    group = m.get_broker_member_group("C", "broker-a")
    assert group.broker_addrs == {0: A, 1: A_SLAVE}
    assert m.get_broker_member_group("C", "nope").broker_addrs == {}


def test_route_lists_brokers_in_java_hashmap_order():
    # Java lists a topic's QueueData in HashMap order of the broker names: bucket = spread(hash)
    # & 15. "broker-b" (hash 0x... ) lands before "broker-a" here; registration order is ignored.
    m, _ = manager()
    names = ["broker-c", "broker-a", "broker-b"]
    for i, name in enumerate(names):
        register(m, name, f"10.0.1.{i}:10911", table("T1", "T2"))
    route = m.pickup_topic_route_data("T1")
    from rmqwire.server.namesrv.hash_order import hashmap_order

    assert [q.broker_name for q in route.queue_datas] == hashmap_order(names)
    assert [b.broker_name for b in route.broker_datas] == hashmap_order(names)


def test_version_counts_route_changes_only():
    m, clock = manager()
    register(m, "broker-a", A, table("T1", "T2"))
    v = m.version
    clock.advance(1000)
    register(m, "broker-a", A, table("T1", "T2"))  # the periodic re-registration
    m.update_broker_info_update_timestamp("C", A)
    assert m.version == v
    register(m, "broker-a", A, table("T1", "T2", "T3", counter=2))
    assert m.version > v


# ---- consistency under any interleaving -----------------------------------------------------

BROKERS = [("broker-a", 0, "10.1.0.1:1"), ("broker-a", 1, "10.1.0.2:1"), ("broker-b", 0, "10.1.0.3:1")]
TOPICS = ["T1", "T2", "T3"]


class RouteTables(RuleBasedStateMachine):
    """Random registrations, unregistrations, expiries and lookups keep the tables consistent."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.m = RouteInfoManager(NamesrvConfig(), self.clock)
        self.counter = 0

    @rule(b=st.sampled_from(BROKERS), topics=st.sets(st.sampled_from(TOPICS), min_size=2),
          bump=st.booleans())
    def register(self, b, topics, bump):
        self.counter += int(bump)
        name, bid, addr = b
        self.m.register_broker("C", addr, name, bid, addr, None, None, False,
                               table(*sorted(topics), counter=self.counter), [], object())

    @rule(b=st.sampled_from(BROKERS))
    def unregister(self, b):
        name, bid, addr = b
        self.m.unregister_broker([UnregisterRequest("C", addr, name, bid)])

    @rule(ms=st.integers(0, 200_000))
    def scan(self, ms):
        self.clock.advance(ms)
        self.m.scan_not_active_broker()

    @rule(topic=st.sampled_from(TOPICS))
    def lookup(self, topic):
        route = self.m.pickup_topic_route_data(topic)
        if route is not None:
            names = {q.broker_name for q in route.queue_datas}
            assert {b.broker_name for b in route.broker_datas} <= names

    @invariant()
    def tables_agree(self):
        m = self.m
        for name, bd in m.broker_addr_table.items():
            assert bd.broker_addrs, f"{name} has no address left"
            assert name in m.cluster_addr_table.get(bd.cluster, {})
            for addr in bd.broker_addrs.values():
                assert BrokerAddrInfo(bd.cluster, addr) in m.broker_live_table
        for info in m.broker_live_table:
            assert any(info.broker_addr in bd.broker_addrs.values()
                       for bd in m.broker_addr_table.values())
        for topic, queues in m.topic_queue_table.items():
            assert queues, f"{topic} has no queues"
            assert set(queues) <= set(m.broker_addr_table), topic
        for names in m.cluster_addr_table.values():
            assert names and set(names) <= set(m.broker_addr_table)


TestRouteTables = RouteTables.TestCase


class ReusedTopicConfigs(RuleBasedStateMachine):
    """A broker's topic configs object given again (RegisterBodyReader hands back the same one
    for the same topic table) leaves the tables exactly as a fresh copy of it does, whatever
    changed in between: registrations skip their pass over the topics only when nothing did."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.m = RouteInfoManager(NamesrvConfig(), self.clock)
        self.ref = RouteInfoManager(NamesrvConfig(), self.clock)
        self.tables = {(topics, perm): table(*topics, perm=perm)
                       for topics in (("T1", "T2"), ("T1", "T2", "T3")) for perm in (6, 4)}
        self.counter = 0

    def both(self, fn) -> None:
        fn(self.m)
        fn(self.ref)

    @rule(b=st.sampled_from(BROKERS), key=st.sampled_from([(("T1", "T2"), 6), (("T1", "T2"), 4),
                                                           (("T1", "T2", "T3"), 6)]),
          bump=st.booleans(), acting=st.booleans())
    def register(self, b, key, bump, acting):
        self.counter += int(bump)
        name, bid, addr = b
        reused = self.tables[key]
        reused.data_version = DataVersion(0, 1000, self.counter)
        fresh = copy.deepcopy(reused)
        self.m.register_broker("C", addr, name, bid, addr, None, None, acting, reused, [], None)
        self.ref.register_broker("C", addr, name, bid, addr, None, None, acting, fresh, [], None)

    @rule(b=st.sampled_from(BROKERS))
    def unregister(self, b):
        name, bid, addr = b
        self.both(lambda m: m.unregister_broker([UnregisterRequest("C", addr, name, bid)]))

    @rule(name=st.sampled_from(["broker-a", "broker-b"]), wipe=st.booleans())
    def write_perm(self, name, wipe):
        self.both(lambda m: m.wipe_write_perm_of_broker(name) if wipe
                  else m.add_write_perm_of_broker(name))

    @rule(topic=st.sampled_from(TOPICS))
    def delete_topic(self, topic):
        self.both(lambda m: m.delete_topic(topic))

    @rule(topic=st.sampled_from(TOPICS), name=st.sampled_from(["broker-a", "broker-b"]))
    def register_topic(self, topic, name):
        self.both(lambda m: m.register_topic(topic, [QueueData(name, 1, 1, 2, 0)]))

    @invariant()
    def same_tables(self):
        assert self.m.topic_queue_table == self.ref.topic_queue_table
        for topic in TOPICS:
            assert self.m.pickup_topic_route_data(topic) == self.ref.pickup_topic_route_data(topic)


TestReusedTopicConfigs = ReusedTopicConfigs.TestCase
TestReusedTopicConfigs.settings = settings(max_examples=400, deadline=None)
