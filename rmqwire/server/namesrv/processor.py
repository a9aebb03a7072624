"""The NameServer's typed processors: what 5.3.3's ClientRequestProcessor and
DefaultRequestProcessor answer, code for code (shared/spec/wire-format.md section 8.8).

A missing ``@CFNotNull`` header field reaches a responder as None, as Java hands its processor a
null; each responder answers what the Java processor answers then (a NullPointerException there
becomes SYSTEM_ERROR; a lookup of a null key finds nothing). Codes not listed get the
dispatcher's REQUEST_CODE_NOT_SUPPORTED with Java's remark.

Deviations, on purpose: UNREGISTER_BROKER is applied at once (Java queues it, answering
SYSTEM_ERROR when its queue of 3000 is full); UPDATE_NAMESRV_CONFIG is refused unless enabled and
then limited to safe keys, and changes the running config only (Java rewrites the -c file); with
``clusterTest`` routes carry orderTopicConf in fastjson's default style as Java's
ClusterTestRequestProcessor writes them, but unknown topics are not looked up in a "product
environment" NameServer, and other request codes keep their own processors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from twisted.logger import Logger

from rmqwire.codec import RemotingCommand
from rmqwire.codec.codes import LanguageCode, ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.namesrv import (
    AddWritePermOfBroker,
    AddWritePermOfBrokerResponseHeader,
    BrokerHeartbeat,
    DeleteKVConfig,
    DeleteTopicInNamesrv,
    GetAllTopicListFromNameserver,
    GetBrokerMemberGroup,
    GetBrokerMemberGroupResponseBody,
    GetHasUnitSubTopicList,
    GetHasUnitSubUnUnitTopicList,
    GetKVConfig,
    GetKVConfigResponseHeader,
    GetKVListByNamespace,
    GetNamesrvConfig,
    GetSystemTopicListFromNs,
    GetTopicsByCluster,
    GetUnitTopicList,
    PutKVConfig,
    QueryDataVersion,
    QueryDataVersionResponseHeader,
    RegisterBroker,
    RegisterBrokerResponseHeader,
    RegisterTopicInNamesrv,
    UnregisterBroker,
    UpdateNamesrvConfig,
    WipeWritePermOfBroker,
    WipeWritePermOfBrokerResponseHeader,
)
from rmqwire.codec.commands.route import (
    GetBrokerClusterInfo,
    GetRouteInfo,
    TopicRouteData,
)
from rmqwire.codec.java import java_str
from rmqwire.codec.message import body_crc32
from rmqwire.errors import (
    BrokerSystemError,
    NoPermissionError,
    TopicNotExistError,
)
from rmqwire.remoting.dispatcher import Handler, Processor, RequestContext
from rmqwire.server.namesrv.config import (
    UPDATABLE_KEYS,
    NamesrvConfig,
    NamesrvSettings,
    parse_properties,
    parse_value,
)
from rmqwire.server.namesrv.kv import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rmqwire.server.namesrv.register_body import RegisterBodyReader
from rmqwire.server.namesrv.route_info import (
    BrokerAddrInfo,
    RouteInfoManager,
    UnregisterRequest,
)

#: Java ``FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)``.
APPLY_TOPIC_TIP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
#: ``MixAll.ZONE_MODE`` / ``MixAll.ZONE_NAME`` extFields.
ZONE_MODE = "__ZONE_MODE"
ZONE_NAME = "__ZONE_NAME"


def _npe(what: str) -> BrokerSystemError:
    """What a Java NullPointerException in a processor becomes: SYSTEM_ERROR."""
    return BrokerSystemError(remark=f"java.lang.NullPointerException: {what} is null")


def no_route_remark(topic: str | None) -> str:
    return f"No topic route info in name server for the topic: {java_str(topic)}{APPLY_TOPIC_TIP}"


class ClientRequestProcessor(Processor):
    """GET_ROUTEINFO_BY_TOPIC (Java runs it on its own thread pool).

    Encoded routes are cached per (topic, dialect) until the route tables, the KV table or the
    relevant switches change: a lookup is then a dict hit.
    """

    log = Logger()

    def __init__(
        self,
        settings: NamesrvSettings,
        routes: RouteInfoManager,
        kv: KVConfigManager,
        clock: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.routes = routes
        self.kv = kv
        self.clock = clock
        self.startup_millis = clock()
        self._cache: dict[tuple[str, bool], bytes] = {}
        self._cache_stamp: tuple[Any, ...] = ()

    def _stamp(self) -> tuple[Any, ...]:
        cfg = self.settings.namesrv
        return (self.routes.version, self.kv.version, cfg.order_message_enable,
                cfg.support_acting_master, cfg.cluster_test)

    @GetRouteInfo.responder
    def get_route_info(self, header: Any, body: None, context: RequestContext) -> Any:
        cfg = self.settings.namesrv
        if cfg.need_wait_for_service and (
            self.clock() - self.startup_millis < cfg.wait_seconds_for_service * 1000
        ):
            self.log.warn("name server not ready. request code {code}", code=GetRouteInfo.code)
            raise BrokerSystemError(remark="name server not ready")
        request = context.request
        version = request.version if request is not None else 0
        standard = (version >= 401 or bool(header.accept_standard_json_only)) and not cfg.cluster_test
        zone = _zone_filter(header.extra)
        topic = header.topic
        if zone is None and topic is not None:
            stamp = self._stamp()
            if stamp != self._cache_stamp:
                self._cache.clear()
                self._cache_stamp = stamp
            cached = self._cache.get((topic, standard))
            if cached is not None:
                return cached
        route = self.route_data(topic)
        if route is None:
            raise TopicNotExistError(remark=no_route_remark(topic))
        if zone is not None:
            # Java's ZoneRouteRPCHook re-encodes the filtered route in fastjson's default style.
            return _filter_by_zone(route, zone).encode(standard=False)
        content = route.encode(standard=standard)
        if topic is not None:
            self._cache[(topic, standard)] = content
        return content

    def cached_route_handler(self, typed: Handler) -> Handler:
        """A raw handler for GET_ROUTEINFO_BY_TOPIC answering cache hits directly (no header
        object, no Deferred of its own); everything else goes to ``typed``, the responder above.

        Route lookups are most of a NameServer's traffic, so this is its hot path."""
        cfg = self.settings.namesrv

        def handle(request: RemotingCommand, context: RequestContext) -> Any:
            ext = request.ext_fields
            topic = ext.get("topic") if ext else None
            if type(topic) is str and ZONE_MODE not in ext and not cfg.need_wait_for_service:  # type: ignore[operator]
                accept = ext.get("acceptStandardJsonOnly")  # type: ignore[union-attr]
                standard = (request.version >= 401 or (
                    type(accept) is str and accept.lower() == "true")) and not cfg.cluster_test
                if self._stamp() == self._cache_stamp:
                    cached = self._cache.get((topic, standard))
                    if cached is not None:
                        return request.response_to(ResponseCode.SUCCESS, None, None, cached,
                                                   language=LanguageCode.JAVA)
            return typed(request, context)

        return handle

    def route_data(self, topic: str | None) -> TopicRouteData | None:
        route = self.routes.pickup_topic_route_data(topic)
        cfg = self.settings.namesrv
        if route is not None and (cfg.order_message_enable or cfg.cluster_test):
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return route


def _zone_filter(extra: dict[str, str]) -> str | None:
    if extra.get(ZONE_MODE, "").lower() != "true":
        return None
    zone = extra.get(ZONE_NAME)
    return zone if zone is not None and zone.strip() else None


def _filter_by_zone(route: TopicRouteData, zone: str) -> TopicRouteData:
    """Keep brokers of ``zone`` (and brokers without a master: read from their slaves)."""
    kept, dropped = [], {}
    for bd in route.broker_datas or []:
        if bd.broker_addrs is None:
            continue
        same_zone = bd.zone_name is not None and bd.zone_name.lower() == zone.lower()
        if 0 not in bd.broker_addrs or same_zone:
            kept.append(bd)
        else:
            dropped[bd.broker_name] = bd
    filter_table = dict(route.filter_server_table or {})
    for bd in dropped.values():
        for addr in (bd.broker_addrs or {}).values():
            filter_table.pop(addr, None)
    return dataclasses.replace(
        route,
        broker_datas=kept,
        queue_datas=[qd for qd in route.queue_datas or [] if qd.broker_name not in dropped],
        filter_server_table=filter_table,
    )


class DefaultRequestProcessor(Processor):
    """Every other NameServer request code of 5.3.3."""

    log = Logger()

    def __init__(
        self,
        settings: NamesrvSettings,
        routes: RouteInfoManager,
        kv: KVConfigManager,
        *,
        on_broker_channel: Callable[[Any], None] = lambda channel: None,
        on_config_updated: Callable[[set[str]], None] = lambda keys: None,
    ) -> None:
        self.settings = settings
        self.routes = routes
        self.kv = kv
        #: Called with the channel of every registration (the controller watches it close).
        self.on_broker_channel = on_broker_channel
        self.on_config_updated = on_config_updated
        #: Each broker's last REGISTER_BROKER body, as read.
        self._bodies = RegisterBodyReader()

    # ---- KV config -------------------------------------------------------------------------------

    @PutKVConfig.responder
    def put_kv_config(self, header: Any, body: None, context: RequestContext) -> Any:
        if header.namespace is None or header.key is None:
            raise BrokerSystemError(remark="namespace or key is null")
        self.kv.put(header.namespace, header.key, header.value)
        return Response()

    @GetKVConfig.responder
    def get_kv_config(self, header: Any, body: None, context: RequestContext) -> Any:
        value = self.kv.get(header.namespace, header.key)
        if value is not None:
            return GetKVConfigResponseHeader(value=value)
        return Response(
            header=GetKVConfigResponseHeader(),
            code=ResponseCode.QUERY_NOT_FOUND,
            remark=f"No config item, Namespace: {java_str(header.namespace)} "
            f"Key: {java_str(header.key)}",
        )

    @DeleteKVConfig.responder
    def delete_kv_config(self, header: Any, body: None, context: RequestContext) -> Any:
        self.kv.delete(header.namespace, header.key)
        return Response()

    @GetKVListByNamespace.responder
    def get_kv_list_by_namespace(self, header: Any, body: None, context: RequestContext) -> Any:
        content = self.kv.get_kv_list(header.namespace)
        if content is not None:
            return content
        return Response(
            code=ResponseCode.QUERY_NOT_FOUND,
            remark=f"No config item, Namespace: {java_str(header.namespace)}",
        )

    # ---- brokers -------------------------------------------------------------------------------

    @RegisterBroker.responder
    def register_broker(self, header: Any, body: bytes | None, context: RequestContext) -> Any:
        crc = header.body_crc32 or 0
        if crc != 0 and body_crc32(body) != crc:
            self.log.warn("receive registerBroker request, crc32 not match, from {peer}",
                          peer=context.peer)
            raise BrokerSystemError(remark="crc32 not match")
        request = context.request
        version = request.version if request is not None else 0
        key = BrokerAddrInfo(header.cluster_name, header.broker_addr)
        table, filter_servers = self._bodies.read(key, body, bool(header.compressed), version)
        if len(self._bodies) > len(self.routes.broker_live_table) + 16:
            self._bodies.forget_all_but({*self.routes.broker_live_table, key})  # brokers gone
        if header.broker_id is None:
            raise _npe("brokerId")
        if header.cluster_name is None or header.broker_name is None or header.broker_addr is None:
            # Java's registerBroker swallows the NullPointerException and answers SUCCESS with an
            # empty result; nothing is registered.
            self.log.warn("REGISTER_BROKER from {peer} without cluster, name or address: ignored",
                          peer=context.peer)
            return self._register_answer(None, None)
        channel = context.channel
        result = self.routes.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            header.extra.get(ZONE_NAME),
            header.heartbeat_timeout_millis,
            header.enable_acting_master,
            table,
            filter_servers,
            channel,
        )
        if result is None:
            raise BrokerSystemError(remark="register broker failed")
        if channel is not None:
            self.on_broker_channel(channel)
        return self._register_answer(result.ha_server_addr, result.master_addr)

    def _register_answer(self, ha_addr: str | None, master_addr: str | None) -> Response[Any, Any]:
        kv_body = None
        if self.settings.namesrv.return_order_topic_config_to_broker:
            kv_body = self.kv.get_kv_list(NAMESPACE_ORDER_TOPIC_CONFIG)
        return Response(
            header=RegisterBrokerResponseHeader(ha_server_addr=ha_addr, master_addr=master_addr),
            body=kv_body,
        )

    @UnregisterBroker.responder
    def unregister_broker(self, header: Any, body: None, context: RequestContext) -> Any:
        self.routes.unregister_broker([UnregisterRequest(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
        )])
        return Response()

    @BrokerHeartbeat.responder
    def broker_heartbeat(self, header: Any, body: None, context: RequestContext) -> Any:
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        return Response()

    @QueryDataVersion.responder
    def query_data_version(self, header: Any, body: Any, context: RequestContext) -> Any:
        if body is None:
            raise _npe("body")
        if header.cluster_name is None:
            raise _npe("clusterName")
        if header.broker_addr is None:
            raise _npe("brokerAddr")
        changed = self.routes.is_broker_topic_config_changed(
            header.cluster_name, header.broker_addr, body
        )
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        ours = self.routes.query_broker_topic_config(header.cluster_name, header.broker_addr)
        return Response(
            header=QueryDataVersionResponseHeader(changed=changed),
            body=None if ours is None else ours.encode(standard=False),
        )

    @GetBrokerMemberGroup.responder
    def get_broker_member_group(self, header: Any, body: None, context: RequestContext) -> Any:
        group = self.routes.get_broker_member_group(header.cluster_name, header.broker_name)
        body = GetBrokerMemberGroupResponseBody(broker_member_group=group).encode(standard=False)
        # Java sets the code but keeps createResponseCommand's placeholder remark.
        return Response(body=body, remark="not set any response code")

    @GetBrokerClusterInfo.responder
    def get_broker_cluster_info(self, header: None, body: None, context: RequestContext) -> Any:
        return self.routes.get_all_cluster_info().encode(standard=False)

    @WipeWritePermOfBroker.responder
    def wipe_write_perm(self, header: Any, body: None, context: RequestContext) -> Any:
        count = self.routes.wipe_write_perm_of_broker(header.broker_name)
        self.log.info("wipe write perm of broker[{name}], client: {peer}, {count}",
                      name=header.broker_name, peer=context.peer, count=count)
        return WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count)

    @AddWritePermOfBroker.responder
    def add_write_perm(self, header: Any, body: None, context: RequestContext) -> Any:
        count = self.routes.add_write_perm_of_broker(header.broker_name)
        self.log.info("add write perm of broker[{name}], client: {peer}, {count}",
                      name=header.broker_name, peer=context.peer, count=count)
        return AddWritePermOfBrokerResponseHeader(add_topic_count=count)

    # ---- topics --------------------------------------------------------------------------------

    @GetAllTopicListFromNameserver.responder
    def get_all_topic_list(self, header: None, body: None, context: RequestContext) -> Any:
        enabled = self.settings.namesrv.enable_all_topic_list
        self.log.info("getAllTopicListFromNameserver {peer} enable {enabled}",
                      peer=context.peer, enabled=enabled)
        if not enabled:
            raise BrokerSystemError(remark="disable")
        return self.routes.get_all_topic_list().encode(standard=False)

    @DeleteTopicInNamesrv.responder
    def delete_topic(self, header: Any, body: None, context: RequestContext) -> Any:
        self.routes.delete_topic(header.topic, header.cluster_name or None)
        return Response()

    @RegisterTopicInNamesrv.responder
    def register_topic(self, header: Any, body: TopicRouteData | None, context: RequestContext) -> Any:
        if body is None:
            raise _npe("body")
        if header.topic is not None and body.queue_datas:
            self.routes.register_topic(header.topic, body.queue_datas)
        return Response()

    @GetTopicsByCluster.responder
    def get_topics_by_cluster(self, header: Any, body: None, context: RequestContext) -> Any:
        if not self.settings.namesrv.enable_topic_list:
            raise BrokerSystemError(remark="disable")
        return self.routes.get_topics_by_cluster(header.cluster).encode(standard=False)

    @GetSystemTopicListFromNs.responder
    def get_system_topic_list(self, header: None, body: None, context: RequestContext) -> Any:
        return self.routes.get_system_topic_list().encode(standard=False)

    @GetUnitTopicList.responder
    def get_unit_topic_list(self, header: None, body: None, context: RequestContext) -> Any:
        if not self.settings.namesrv.enable_topic_list:
            raise BrokerSystemError(remark="disable")
        return self.routes.get_unit_topics().encode(standard=False)

    @GetHasUnitSubTopicList.responder
    def get_has_unit_sub_topic_list(self, header: None, body: None, context: RequestContext) -> Any:
        if not self.settings.namesrv.enable_topic_list:
            raise BrokerSystemError(remark="disable")
        return self.routes.get_has_unit_sub_topic_list().encode(standard=False)

    @GetHasUnitSubUnUnitTopicList.responder
    def get_has_unit_sub_ununit_topic_list(
        self, header: None, body: None, context: RequestContext
    ) -> Any:
        if not self.settings.namesrv.enable_topic_list:
            raise BrokerSystemError(remark="disable")
        return self.routes.get_has_unit_sub_ununit_topic_list().encode(standard=False)

    # ---- config --------------------------------------------------------------------------------

    @UpdateNamesrvConfig.responder
    def update_config(self, header: None, body: bytes | None, context: RequestContext) -> Any:
        self.log.info("updateConfig called by {peer}", peer=context.peer)
        if body is None:
            return Response()
        props = parse_properties(body.decode("utf-8", "replace"))
        if not props:
            return Response()
        refused = self._refused_keys(props)
        if refused:
            self.log.warn("UPDATE_NAMESRV_CONFIG from {peer} refused: {why}",
                          peer=context.peer, why=refused)
            raise NoPermissionError(remark=refused)
        self.settings.apply(props)
        self.settings.file_properties.update(props)
        self.on_config_updated(set(props))
        return Response()

    def _refused_keys(self, props: dict[str, str]) -> str | None:
        """Why an update is refused (None when allowed): the black list as in Java, then
        rmqwire's switch and allow-list."""
        keys = set(props)
        black = sorted(keys & self.settings.black_list())
        if black:
            return f"Can not update config in black list. ({', '.join(black)})"
        if not self.settings.namesrv.enable_update_namesrv_config:
            return ("Updating the NameServer config remotely is disabled "
                    "(set enableUpdateNamesrvConfig=true to allow its safe keys)")
        not_allowed = sorted(keys - UPDATABLE_KEYS)
        if not_allowed:
            return (f"Config key(s) {', '.join(not_allowed)} may not be updated remotely; "
                    f"allowed: {', '.join(sorted(UPDATABLE_KEYS))}")
        for key, text in props.items():
            java_type = _item_type(key)
            try:
                parse_value(java_type, text)
            except ValueError:
                return f"Config key {key}: {text!r} is not a valid {java_type}"
        return None

    @GetNamesrvConfig.responder
    def get_config(self, header: None, body: None, context: RequestContext) -> Any:
        content = self.settings.all_configs_text()
        return content.encode("utf-8") if content.strip() else Response()


def _item_type(key: str) -> str:
    for it in NamesrvConfig.items():
        if it.key == key:
            return it.java_type
    return "String"
