"""RouteInfoManager: the NameServer's route tables, as plain state (no I/O, no Twisted).

Tables (shared/spec/broker-and-store.md section 7.1): topic -> {brokerName -> QueueData},
brokerName -> BrokerData, cluster -> broker names, (cluster, brokerAddr) -> BrokerLiveInfo, the
filter-server table and the 5.x static-topic mapping table. The clock is injected (milliseconds),
and a broker's channel is an opaque object the caller closes. Every method runs to completion
before another starts (the NameServer calls them from the reactor thread), so each registration,
unregistration or lookup sees a consistent state, as under Java's read/write lock.

``version`` counts changes to what routes are built from; the processor caches encoded routes
keyed on it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from twisted.logger import Logger

from rmqwire.codec.commands.namesrv import BrokerMemberGroup
from rmqwire.codec.commands.route import (
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
)
from rmqwire.codec.commands.topic import DataVersion, TopicConfig, TopicList
from rmqwire.model import PermName
from rmqwire.server.namesrv.config import NamesrvConfig
from rmqwire.server.namesrv.hash_order import (
    concurrent_capacity,
    concurrent_initial,
    copy_capacity,
    hashmap_capacity,
    java_long_hash,
    java_order,
    long_key_order,
)

MASTER_ID = 0
#: Java's ``TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX``.
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
#: ``TopicSysFlag`` bits.
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2
_PERM_WRITE = int(PermName.PERM_WRITE)
_PERM_READ = int(PermName.PERM_READ)

# Initial table sizes of the Java NameServer's ConcurrentHashMaps (for iteration order).
_TOPIC_TABLE_CAP = concurrent_initial(1024)
_BROKER_TABLE_CAP = concurrent_initial(128)
_CLUSTER_TABLE_CAP = concurrent_initial(32)


@dataclass(frozen=True, slots=True)
class BrokerAddrInfo:
    """Key of the live and filter-server tables."""

    cluster_name: str
    broker_addr: str


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str | None


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """What a registering slave learns: its master's address and HA address (None otherwise)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterRequest:
    cluster_name: str | None
    broker_addr: str | None
    broker_name: str | None
    broker_id: int | None


@dataclass(frozen=True, slots=True)
class MinBrokerIdChange:
    """A NOTIFY_MIN_BROKER_ID_CHANGE to send to ``notify`` (only with notifyMinBrokerIdChanged)."""

    broker_name: str
    min_broker_id: int
    min_broker_addr: str | None
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    notify: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ExpiredBroker:
    """A broker that stayed silent past its timeout; its channel is for the caller to close."""

    addr_info: BrokerAddrInfo
    channel: Any
    timeout_millis: int


class TopicQueueConfig(NamedTuple):
    """The part of a TopicConfig a route is built from (what REGISTER_BROKER bodies are read into
    on the fast path; a codec TopicConfig serves as well)."""

    topic_name: str | None
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


@dataclass
class TopicConfigTable:
    """What route updates need from a registration body (either wrapper class of the codec)."""

    topic_config_table: Mapping[str, TopicConfig | TopicQueueConfig] | None = field(
        default_factory=dict
    )
    data_version: DataVersion = field(default_factory=lambda: DataVersion(0, 0, 0))
    topic_queue_mapping_info_map: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, wrapper: Any) -> TopicConfigTable:
        dv = getattr(wrapper, "data_version", None)
        return cls(
            topic_config_table=getattr(wrapper, "topic_config_table", None),
            data_version=dv if dv is not None else DataVersion(),
            topic_queue_mapping_info_map=getattr(wrapper, "topic_queue_mapping_info_map", None)
            or {},
        )


class RouteInfoManager:
    log = Logger()

    def __init__(self, config: NamesrvConfig, clock: Callable[[], int]) -> None:
        self.config = config
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, dict[str, None]] = {}  # ordered sets
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddrInfo, list[str]] = {}
        self.topic_queue_mapping_info_table: dict[str, dict[str, Any]] = {}
        #: Changes of anything a route, the cluster info or a topic list is built from.
        self.version = 0
        #: NOTIFY_MIN_BROKER_ID_CHANGE requests to send (drained by the caller).
        self.notifications: list[MinBrokerIdChange] = []
        #: broker name -> the topic configs last applied to its queues, whether read-only,
        #: whether in full (a new DataVersion: every queue set; else only missing ones added) and
        #: ``version`` after that registration.
        self._applied: dict[str, tuple[Any, bool, bool, int]] = {}

    def _changed(self) -> None:
        self.version += 1

    # ---- registration ------------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        zone_name: str | None,
        timeout_millis: int | None,
        enable_acting_master: bool | None,
        topic_config: TopicConfigTable,
        filter_server_list: list[str] | None,
        channel: Any,
    ) -> RegisterBrokerResult | None:
        """Register or refresh one broker; None refuses a single-topic registration from a broker
        id not registered yet (the processor answers "register broker failed")."""
        result = RegisterBrokerResult()
        names = self.cluster_addr_table.setdefault(cluster_name, {})
        if broker_name not in names:
            names[broker_name] = None
            self._changed()

        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster=cluster_name, broker_name=broker_name, broker_addrs={})
            self.broker_addr_table[broker_name] = broker_data
            self._changed()
        old_version_broker = enable_acting_master is None
        acting = not old_version_broker and bool(enable_acting_master)
        if (broker_data.enable_acting_master, broker_data.zone_name) != (acting, zone_name):
            broker_data.enable_acting_master = acting
            broker_data.zone_name = zone_name
            self._changed()
        addrs = broker_data.broker_addrs
        assert addrs is not None
        prev_min_id = min(addrs) if addrs else 0
        min_id_changed = broker_id < prev_min_id

        # One address has one id: a slave promoted to master re-registers as id 0 on its address.
        for bid in [b for b, a in addrs.items() if a == broker_addr and b != broker_id]:
            del addrs[bid]
            self._changed()

        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            old_live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, old_addr))
            if old_live is not None:
                old_state = old_live.data_version.state_version
                new_state = topic_config.data_version.state_version
                if old_state > new_state:
                    self.log.warn(
                        "registering broker {name} id {id} at {addr} conflicts with {old} "
                        "(state version {ov} > {nv}): ignored",
                        name=broker_name, id=broker_id, addr=broker_addr, old=old_addr,
                        ov=old_state, nv=new_state,
                    )
                    self.broker_live_table.pop(BrokerAddrInfo(cluster_name, broker_addr), None)
                    return result

        table = topic_config.topic_config_table
        if broker_id not in addrs and table is not None and len(table) == 1:
            self.log.warn(
                "cannot register a single topic from broker {name} id {id} at {addr}: "
                "it has not registered yet",
                name=broker_name, id=broker_id, addr=broker_addr,
            )
            return None

        if addrs.get(broker_id) != broker_addr:
            self._changed()
        old = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or not old

        is_master = broker_id == MASTER_ID
        is_prime_slave = not old_version_broker and not is_master and broker_id == min(addrs)
        addr_info = BrokerAddrInfo(cluster_name, broker_addr)
        applied: tuple[Any, bool, bool] | None = None
        if (is_master or is_prime_slave) and table is not None:
            mapping = topic_config.topic_queue_mapping_info_map
            if self.config.delete_topic_with_broker_registration and not mapping:
                self._delete_topics_missing_from(broker_name, set(table))
            # The live entry is replaced after this loop, so "changed" is the same for every topic.
            changed = register_first or self.is_broker_topic_config_changed(
                cluster_name, broker_addr, topic_config.data_version
            )
            queue_table = self.topic_queue_table
            read_only = is_prime_slave and broker_data.enable_acting_master  # an acting master
            last = self._applied.get(broker_name)
            # The same topic configs again, and nothing changed since they were applied (in full,
            # if this is a full application): the queues are as this pass would leave them.
            same = (last is not None and last[0] is table and last[1] == read_only
                    and last[3] == self.version and (last[2] or not changed))
            topics = () if same else table.values()
            applied = (table, read_only, last[2] if same else changed)  # type: ignore[index]
            for tc in topics:
                queue_map = queue_table.get(tc.topic_name)  # type: ignore[arg-type]
                existed = queue_map.get(broker_name) if queue_map is not None else None
                if existed is not None:
                    if not changed:
                        continue
                    perm = tc.perm & ~_PERM_WRITE if read_only else tc.perm
                    if (existed.perm == perm and existed.read_queue_nums == tc.read_queue_nums
                            and existed.write_queue_nums == tc.write_queue_nums
                            and existed.topic_sys_flag == tc.topic_sys_flag):
                        continue  # unchanged (the usual case), checked inline: thousands per body
                else:
                    perm = tc.perm & ~_PERM_WRITE if read_only else tc.perm
                self._create_and_update_queue_data(broker_name, tc, perm)
            if changed:
                for topic, info in mapping.items():
                    bname = info.get("bname") if isinstance(info, Mapping) else None
                    self.topic_queue_mapping_info_table.setdefault(topic, {})[bname] = info
                    self._changed()

        timeout = (
            timeout_millis if timeout_millis is not None else self.config.broker_channel_expired_time
        )
        prev_live = self.broker_live_table.get(addr_info)
        self.broker_live_table[addr_info] = BrokerLiveInfo(
            self.clock(), timeout, topic_config.data_version, channel, ha_server_addr
        )
        if prev_live is None:
            self.log.info(
                "new broker registered, {addr} HAService: {ha}", addr=addr_info, ha=ha_server_addr
            )

        if filter_server_list is not None:
            before = self.filter_server_table.get(addr_info)
            if filter_server_list:
                self.filter_server_table[addr_info] = list(filter_server_list)
            else:
                self.filter_server_table.pop(addr_info, None)
            if before != self.filter_server_table.get(addr_info):
                self._changed()

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, master_addr))
                if master_live is not None:
                    result = RegisterBrokerResult(master_live.ha_server_addr, master_addr)

        if applied is not None:
            self._applied[broker_name] = (*applied, self.version)
        if min_id_changed and self.config.notify_min_broker_id_changed:
            self._notify_min_broker_id(broker_data, None, ha_server_addr)
        return result

    def _delete_topics_missing_from(self, broker_name: str, topics: set[str]) -> None:
        for topic in [t for t, q in self.topic_queue_table.items() if broker_name in q]:
            if topic in topics:
                continue
            queue_map = self.topic_queue_table[topic]
            queue_map.pop(broker_name, None)
            if not queue_map:
                del self.topic_queue_table[topic]
            self._changed()

    def _create_and_update_queue_data(
        self, broker_name: str, tc: TopicConfig | TopicQueueConfig, perm: int
    ) -> None:
        topic = tc.topic_name
        queue_map = self.topic_queue_table.get(topic)  # type: ignore[arg-type]
        existed = queue_map.get(broker_name) if queue_map is not None else None
        if (existed is not None and existed.perm == perm
                and existed.read_queue_nums == tc.read_queue_nums
                and existed.write_queue_nums == tc.write_queue_nums
                and existed.topic_sys_flag == tc.topic_sys_flag):
            return  # unchanged (the usual case): no new object
        queue_data = QueueData(
            broker_name=broker_name,
            read_queue_nums=tc.read_queue_nums,
            write_queue_nums=tc.write_queue_nums,
            perm=perm,
            topic_sys_flag=tc.topic_sys_flag,
        )
        if queue_map is None:
            self.topic_queue_table[topic] = {broker_name: queue_data}  # type: ignore[index]
            self.log.info("new topic registered, {topic} {qd}", topic=topic, qd=queue_data)
            self._changed()
        elif queue_map.get(broker_name) != queue_data:
            if broker_name in queue_map:
                self.log.info("topic changed, {topic} OLD: {old} NEW: {new}", topic=topic,
                              old=queue_map[broker_name], new=queue_data)
            queue_map[broker_name] = queue_data
            self._changed()

    def is_broker_topic_config_changed(
        self, cluster_name: str | None, broker_addr: str | None, data_version: DataVersion | None
    ) -> bool:
        prev = self.query_broker_topic_config(cluster_name, broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(
        self, cluster_name: str | None, broker_addr: str | None
    ) -> DataVersion | None:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))  # type: ignore[arg-type]
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(
        self, cluster_name: str | None, broker_addr: str | None
    ) -> None:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))  # type: ignore[arg-type]
        if live is not None:
            live.last_update_timestamp = self.clock()

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> bool:
        """REGISTER_TOPIC_IN_NAMESRV: all-or-nothing; False if a queue names an unknown broker."""
        if not queue_datas:
            return False
        if any(qd.broker_name not in self.broker_addr_table for qd in queue_datas):
            self.log.warn("register topic {topic} names an unknown broker: {qds}",
                          topic=topic, qds=queue_datas)
            return False
        queue_map = self.topic_queue_table.setdefault(topic, {})
        for qd in queue_datas:
            queue_map[qd.broker_name] = copy.copy(qd)  # type: ignore[index]
        self._changed()
        return True

    # ---- unregistration and expiry -----------------------------------------------------------

    def unregister_broker(self, requests: Iterable[UnregisterRequest]) -> None:
        removed: dict[str, None] = {}
        reduced: dict[str, None] = {}
        pending_notify: dict[str, tuple[BrokerData, str]] = {}
        for req in requests:
            if req.cluster_name is None or req.broker_addr is None or req.broker_name is None:
                self.log.warn("unregister request with a missing field ignored: {req}", req=req)
                continue
            addr_info = BrokerAddrInfo(req.cluster_name, req.broker_addr)
            live = self.broker_live_table.pop(addr_info, None)
            self.log.info("unregisterBroker, remove from brokerLiveTable {ok}, {addr}",
                          ok="OK" if live else "Failed", addr=addr_info)
            if self.filter_server_table.pop(addr_info, None) is not None:
                self._changed()
            remove_name = False
            broker_data = self.broker_addr_table.get(req.broker_name)
            if broker_data is not None:
                addrs = broker_data.broker_addrs or {}
                min_changed = bool(addrs) and req.broker_id == min(addrs)
                for bid in [b for b, a in addrs.items() if a == req.broker_addr]:
                    del addrs[bid]
                    self._changed()
                if not addrs:
                    del self.broker_addr_table[req.broker_name]
                    self._applied.pop(req.broker_name, None)
                    self._changed()
                    remove_name = True
                elif min_changed:
                    pending_notify[req.broker_name] = (broker_data, req.broker_addr)
            if remove_name:
                names = self.cluster_addr_table.get(req.cluster_name)
                if names is not None:
                    names.pop(req.broker_name, None)
                    if not names:
                        del self.cluster_addr_table[req.cluster_name]
                removed[req.broker_name] = None
            else:
                reduced[req.broker_name] = None
        self._clean_topics(removed, reduced)
        if pending_notify and self.config.notify_min_broker_id_changed:
            for broker_data, offline in pending_notify.values():
                if broker_data.enable_acting_master:
                    self._notify_min_broker_id(broker_data, offline, None)

    def _clean_topics(self, removed: Mapping[str, None], reduced: Mapping[str, None]) -> None:
        for topic in list(self.topic_queue_table):
            queue_map = self.topic_queue_table[topic]
            for name in removed:
                if queue_map.pop(name, None) is not None:
                    self._changed()
            if not queue_map:
                del self.topic_queue_table[topic]
                self._changed()
                continue
            for name in reduced:
                qd = queue_map.get(name)
                broker_data = self.broker_addr_table.get(name)
                if qd is not None and broker_data is not None and broker_data.enable_acting_master:
                    if self._no_master(name):  # the master left: nobody may write
                        qd.perm &= ~_PERM_WRITE
                        self._changed()

    def _no_master(self, broker_name: str) -> bool:
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or not broker_data.broker_addrs:
            return True
        return min(broker_data.broker_addrs) > MASTER_ID

    def scan_not_active_broker(self) -> list[ExpiredBroker]:
        """Unregister every broker silent past its timeout; return them (close their channels)."""
        now = self.clock()
        expired = [
            ExpiredBroker(addr_info, live.channel, live.heartbeat_timeout_millis)
            for addr_info, live in self.broker_live_table.items()
            if live.last_update_timestamp + live.heartbeat_timeout_millis < now
        ]
        for e in expired:
            self.log.warn("The broker channel expired, {addr} {timeout}ms",
                          addr=e.addr_info, timeout=e.timeout_millis)
            self.on_broker_destroy(e.addr_info)
        return expired

    def on_broker_destroy(self, addr_info: BrokerAddrInfo) -> None:
        request = self._unregister_request_for(addr_info)
        if request is not None:
            self.unregister_broker([request])

    def on_channel_destroy(self, channel: Any) -> None:
        """A broker's connection closed (or went idle): unregister the broker that used it."""
        for addr_info, live in self.broker_live_table.items():
            if live.channel is channel:
                self.log.info("the broker's channel destroyed, unregister {addr}", addr=addr_info)
                self.on_broker_destroy(addr_info)
                return

    def _unregister_request_for(self, addr_info: BrokerAddrInfo) -> UnregisterRequest | None:
        for broker_data in self.broker_addr_table.values():
            if broker_data.cluster != addr_info.cluster_name:
                continue
            for bid, addr in (broker_data.broker_addrs or {}).items():
                if addr == addr_info.broker_addr:
                    return UnregisterRequest(
                        addr_info.cluster_name, addr_info.broker_addr, broker_data.broker_name, bid
                    )
        return None

    def _notify_min_broker_id(
        self, broker_data: BrokerData, offline_addr: str | None, ha_addr: str | None
    ) -> None:
        addrs = broker_data.broker_addrs or {}
        if not addrs:
            return
        min_id = min(addrs)
        if offline_addr is not None or len(addrs) == 1:
            notify = tuple(addrs.values())
        else:  # a new broker took the minimum id: tell the others
            notify = tuple(a for b, a in addrs.items() if b != min_id)
        self.notifications.append(MinBrokerIdChange(
            broker_data.broker_name or "", min_id, addrs.get(min_id), offline_addr, ha_addr, notify
        ))

    # ---- permissions and topics --------------------------------------------------------------

    def wipe_write_perm_of_broker(self, broker_name: str | None) -> int:
        return self._operate_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str | None) -> int:
        return self._operate_write_perm(broker_name, wipe=False)

    def _operate_write_perm(self, broker_name: str | None, *, wipe: bool) -> int:
        count = 0
        for queue_map in self.topic_queue_table.values():
            qd = queue_map.get(broker_name)  # type: ignore[arg-type]
            if qd is None:
                continue
            qd.perm = qd.perm & ~_PERM_WRITE if wipe else _PERM_READ | _PERM_WRITE
            count += 1
        if count:
            self._changed()
        return count

    def delete_topic(self, topic: str | None, cluster_name: str | None = None) -> None:
        """Remove a topic everywhere, or (with ``cluster_name``) from that cluster's brokers."""
        if topic is None:
            return
        if cluster_name is None:
            if self.topic_queue_table.pop(topic, None) is not None:
                self._changed()
            return
        names = self.cluster_addr_table.get(cluster_name)
        queue_map = self.topic_queue_table.get(topic)
        if not names or queue_map is None:
            return
        for name in names:
            if queue_map.pop(name, None) is not None:
                self._changed()
        if not queue_map:
            del self.topic_queue_table[topic]
            self._changed()

    # ---- lookups -----------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str | None) -> TopicRouteData | None:
        """The topic's route (copies), in the order Java's tables list it; None if it has none."""
        queue_map = self.topic_queue_table.get(topic)  # type: ignore[arg-type]
        if not queue_map:
            return None
        names = java_order(queue_map, hashmap_capacity(len(queue_map)))
        queue_datas = [copy.copy(queue_map[n]) for n in names]
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, list[str]] = {}
        for name in java_order(names, copy_capacity(len(names))):
            broker_data = self.broker_addr_table.get(name)
            if broker_data is None:
                continue
            clone = _clone_broker_data(broker_data)
            broker_datas.append(clone)
            if not self.filter_server_table:
                continue
            for addr in (clone.broker_addrs or {}).values():
                servers = self.filter_server_table.get(BrokerAddrInfo(clone.cluster, addr))  # type: ignore[arg-type]
                if servers is not None:  # a null map value is not written
                    filter_servers[addr] = list(servers)
        if not broker_datas:
            return None
        route = TopicRouteData(
            queue_datas=queue_datas,
            broker_datas=broker_datas,
            filter_server_table=filter_servers,
            topic_queue_mapping_by_broker=(
                dict(m) if (m := self.topic_queue_mapping_info_table.get(topic)) is not None  # type: ignore[arg-type]
                else None
            ),
        )
        if self.config.support_acting_master and not topic.startswith(  # type: ignore[union-attr]
            SYNC_BROKER_MEMBER_GROUP_PREFIX
        ):
            self._present_acting_masters(route)
        return route

    def _present_acting_masters(self, route: TopicRouteData) -> None:
        """A broker without a master whose queues are read-only shows its lowest slave as id 0."""
        broker_datas = route.broker_datas or []
        if not any(bd.broker_addrs and MASTER_ID not in bd.broker_addrs for bd in broker_datas):
            return
        for bd in broker_datas:
            addrs = bd.broker_addrs
            if not addrs or MASTER_ID in addrs or not bd.enable_acting_master:
                continue
            for qd in route.queue_datas or []:
                if qd.broker_name == bd.broker_name:
                    if not qd.perm & _PERM_WRITE:
                        acting = addrs.pop(min(addrs))
                        addrs[MASTER_ID] = acting
                        bd.broker_addrs = {k: addrs[k] for k in long_key_order(addrs)}
                    break

    def get_all_cluster_info(self) -> ClusterInfo:
        brokers = {
            name: _clone_broker_data(self.broker_addr_table[name])
            for name in java_order(self.broker_addr_table, concurrent_capacity(
                len(self.broker_addr_table), _BROKER_TABLE_CAP))
        }
        clusters = {
            name: java_order(self.cluster_addr_table[name], hashmap_capacity(
                len(self.cluster_addr_table[name])))
            for name in java_order(self.cluster_addr_table, concurrent_capacity(
                len(self.cluster_addr_table), _CLUSTER_TABLE_CAP))
        }
        return ClusterInfo(broker_addr_table=brokers, cluster_addr_table=clusters)

    def get_broker_member_group(self, cluster_name: str | None, broker_name: str | None) -> BrokerMemberGroup:
        group = BrokerMemberGroup(cluster=cluster_name, broker_name=broker_name, broker_addrs={})
        broker_data = self.broker_addr_table.get(broker_name)  # type: ignore[arg-type]
        if broker_data is not None and broker_data.broker_addrs:
            group.broker_addrs = dict(broker_data.broker_addrs)
        return group

    def _topic_list(self, topics: Iterable[str], broker_addr: str | None = None) -> TopicList:
        topics = list(topics)
        ordered = java_order(topics, concurrent_capacity(len(topics)))
        return TopicList(topic_list=ordered, broker_addr=broker_addr)

    def get_all_topic_list(self) -> TopicList:
        topics = java_order(self.topic_queue_table, concurrent_capacity(
            len(self.topic_queue_table), _TOPIC_TABLE_CAP))
        return self._topic_list(topics)

    def get_topics_by_cluster(self, cluster: str | None) -> TopicList:
        names = self.cluster_addr_table.get(cluster)  # type: ignore[arg-type]
        found: dict[str, None] = {}
        for name in names or ():
            for topic, queue_map in self.topic_queue_table.items():
                if name in queue_map:
                    found[topic] = None
        return self._topic_list(found)

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (they are system topics too) and one broker address."""
        topics: dict[str, None] = {}
        for cluster, names in self.cluster_addr_table.items():
            topics[cluster] = None
            topics.update(names)
        broker_addr = None
        for broker_data in self.broker_addr_table.values():
            if broker_data.broker_addrs:
                first = long_key_order(broker_data.broker_addrs)[0]
                broker_addr = broker_data.broker_addrs[first]
                break
        return self._topic_list(topics, broker_addr)

    def _topics_by_sys_flag(self, wanted: Callable[[int], bool]) -> TopicList:
        found = []
        for topic, queue_map in self.topic_queue_table.items():
            if queue_map:
                first = queue_map[java_order(queue_map, hashmap_capacity(len(queue_map)))[0]]
                if wanted(first.topic_sys_flag):
                    found.append(topic)
        return self._topic_list(found)

    def get_unit_topics(self) -> TopicList:
        return self._topics_by_sys_flag(lambda f: bool(f & FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_by_sys_flag(lambda f: bool(f & FLAG_UNIT_SUB))

    def get_has_unit_sub_ununit_topic_list(self) -> TopicList:
        return self._topics_by_sys_flag(lambda f: not f & FLAG_UNIT and bool(f & FLAG_UNIT_SUB))


def _clone_broker_data(bd: BrokerData) -> BrokerData:
    addrs = bd.broker_addrs or {}
    ordered = {k: addrs[k] for k in java_order(addrs, copy_capacity(len(addrs)), java_long_hash)}
    return dataclasses.replace(bd, broker_addrs=ordered)
