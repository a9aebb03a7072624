"""The NameServer: route tables, KV config, processors and the embeddable service.

    from rmqwire.server.namesrv import NameServer, NamesrvSettings

    ns = NameServer(reactor, NamesrvSettings.from_properties({"listenPort": "0"}))
    ns.startService()          # ns.address -> "0.0.0.0:<port>"

``rmqwire namesrv -c namesrv.properties`` runs one from the command line (``-p`` prints the
effective config as ``mqnamesrv -p`` does). Behaviour follows the official 5.3.3 NameServer
(shared/spec/broker-and-store.md Part B).
"""

from rmqwire.server.namesrv.config import (
    NamesrvConfig,
    NamesrvSettings,
    NettyClientConfig,
    NettyServerConfig,
    parse_properties,
)
from rmqwire.server.namesrv.controller import NameServer
from rmqwire.server.namesrv.kv import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigError, KVConfigManager
from rmqwire.server.namesrv.processor import ClientRequestProcessor, DefaultRequestProcessor
from rmqwire.server.namesrv.route_info import (
    BrokerAddrInfo,
    BrokerLiveInfo,
    RegisterBrokerResult,
    RouteInfoManager,
    TopicConfigTable,
    UnregisterRequest,
)

__all__ = [
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "BrokerAddrInfo",
    "BrokerLiveInfo",
    "ClientRequestProcessor",
    "DefaultRequestProcessor",
    "KVConfigError",
    "KVConfigManager",
    "NameServer",
    "NamesrvConfig",
    "NamesrvSettings",
    "NettyClientConfig",
    "NettyServerConfig",
    "RegisterBrokerResult",
    "RouteInfoManager",
    "TopicConfigTable",
    "UnregisterRequest",
    "parse_properties",
]
