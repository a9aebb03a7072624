"""``NameServer``: the embeddable NameServer service (Java's NamesrvController).

A Twisted ``Service`` holding the route tables, the KV config, the two processors, a
``RemotingServer`` and the housekeeping:

- every ``scanNotActiveBrokerInterval`` ms, brokers silent past their timeout are unregistered and
  their channels closed;
- a broker whose channel closes (or idles out after ``serverChannelMaxIdleTimeSeconds``) is
  unregistered at once (Java's BrokerHousekeepingService);
- with ``notifyMinBrokerIdChanged``, brokers of an acting-master group hear of their new minimum
  broker id (NOTIFY_MIN_BROKER_ID_CHANGE, oneway).

The reactor is injected; timestamps come from ``reactor.seconds()``, so tests drive expiry with
``twisted.internet.task.Clock``.
"""

from __future__ import annotations

from typing import Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from rmqwire.codec.commands.namesrv import NotifyMinBrokerIdChange
from rmqwire.codec.commands.route import GetRouteInfo
from rmqwire.remoting.client import RemotingClient
from rmqwire.remoting.config import JAVA_SERVER_CONFIG, RemotingConfig
from rmqwire.remoting.server import RemotingServer
from rmqwire.server.namesrv.config import NamesrvSettings
from rmqwire.server.namesrv.kv import KVConfigManager
from rmqwire.server.namesrv.metrics import NamesrvMetrics
from rmqwire.server.namesrv.processor import ClientRequestProcessor, DefaultRequestProcessor
from rmqwire.server.namesrv.route_info import RouteInfoManager
from rmqwire.server.tls import TlsSystemConfig

#: Java's timeout for NOTIFY_MIN_BROKER_ID_CHANGE (oneway, 300 ms).
NOTIFY_TIMEOUT = 0.3


class NameServer(Service):
    """The NameServer. ``port`` / ``interface`` override ``listenPort`` / ``bindAddress``
    (port 0 picks a free one: see ``port`` once started)."""

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        settings: NamesrvSettings | None = None,
        *,
        remoting_config: RemotingConfig | None = None,
        port: int | None = None,
        interface: str | None = None,
    ) -> None:
        self.reactor = reactor
        self.settings = settings if settings is not None else NamesrvSettings()
        cfg = self.settings.namesrv

        def clock() -> int:
            return int(reactor.seconds() * 1000)

        self.kv = KVConfigManager(cfg.kv_config_path)
        self.routes = RouteInfoManager(cfg, clock)
        self.client_processor = ClientRequestProcessor(self.settings, self.routes, self.kv, clock)
        self.default_processor = DefaultRequestProcessor(
            self.settings, self.routes, self.kv,
            on_broker_channel=self._watch_channel,
            on_config_updated=self._config_updated,
        )
        server_cfg = self.settings.server
        idle = server_cfg.server_channel_max_idle_time_seconds
        base = remoting_config if remoting_config is not None else JAVA_SERVER_CONFIG
        self.tls = TlsSystemConfig.from_properties(self.settings.file_properties)
        if base.tls is None:
            base = base.replace(tls=self.tls.server_context())
        self.remoting_config = base.replace(idle_timeout=float(idle) if idle > 0 else None)
        self.server = RemotingServer(
            reactor,
            self.remoting_config,
            processors=(self.default_processor, self.client_processor),
            port=server_cfg.listen_port if port is None else port,
            interface=server_cfg.bind_address if interface is None else interface,
            tls_mode=self.tls.mode,
        )
        # Route lookups answered from the cache skip the typed layer (the typed responder stays
        # the reference and answers every other case).
        dispatcher = self.server.dispatcher
        typed = dispatcher.handler_for(GetRouteInfo.code)
        assert typed is not None
        dispatcher.register(GetRouteInfo.code, self.client_processor.cached_route_handler(typed))
        self._watched: set[Any] = set()
        self._scan: LoopingCall | None = None
        self._notifier: RemotingClient | None = None
        self.metrics = NamesrvMetrics(self)

    # ---- Service -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return self.server.address

    def startService(self) -> None:
        """Load the KV table, listen (a port in use raises here) and start the expiry scan."""
        self.kv.load()
        self.server.startService()
        if self.settings.server.listen_port == 0:
            # As Java does, so GET_NAMESRV_CONFIG shows the port actually listened on.
            self.settings.server.listen_port = self.server.port
        try:
            self.metrics.start()
        except BaseException:
            self.server.stopService()
            raise
        self._start_scan()
        super().startService()
        self.log.info(
            "The Name Server boot success. serializeType=JSON, address {addr}", addr=self.address
        )

    def stopService(self) -> Deferred[None]:
        super().stopService()
        if self._scan is not None and self._scan.running:
            self._scan.stop()
        self._scan = None
        waits = [defer.maybeDeferred(self.server.stopService), defer.maybeDeferred(self.metrics.stop)]
        if self._notifier is not None:
            waits.append(defer.maybeDeferred(self._notifier.stopService))
            self._notifier = None
        return defer.gatherResults(waits, consumeErrors=True).addCallback(lambda _: None)

    # ---- housekeeping --------------------------------------------------------------------------

    def _start_scan(self) -> None:
        if self._scan is not None and self._scan.running:
            self._scan.stop()
        interval = max(self.settings.namesrv.scan_not_active_broker_interval, 1) / 1000.0
        self._scan = LoopingCall(self.scan_not_active_brokers)
        self._scan.clock = self.reactor
        self._scan.start(interval, now=False).addErrback(
            lambda f: self.log.failure("the broker expiry scan stopped", f)
        )

    def scan_not_active_brokers(self) -> None:
        for expired in self.routes.scan_not_active_broker():
            channel = expired.channel
            if channel is not None and getattr(channel, "is_open", False):
                channel.close()
        self._send_notifications()

    def _watch_channel(self, channel: Any) -> None:
        if channel in self._watched or not hasattr(channel, "when_closed"):
            self._send_notifications()
            return
        self._watched.add(channel)
        channel.when_closed().addCallback(lambda _: self._channel_closed(channel))
        self._send_notifications()

    def _channel_closed(self, channel: Any) -> None:
        self._watched.discard(channel)
        self.routes.on_channel_destroy(channel)
        self._send_notifications()

    def _config_updated(self, keys: set[str]) -> None:
        if "scanNotActiveBrokerInterval" in keys and self.running:
            self._start_scan()

    def _send_notifications(self) -> None:
        pending, self.routes.notifications = self.routes.notifications, []
        if not pending or not self.running:
            return
        if self._notifier is None:
            self._notifier = RemotingClient(
                self.reactor, RemotingConfig(language=self.remoting_config.language,
                                             call_timeout=NOTIFY_TIMEOUT,
                                             connect_timeout=NOTIFY_TIMEOUT)
            )
            self._notifier.startService()
        for change in pending:
            self.log.info("min broker id changed to {id}, notify {addrs}, offline broker addr {off}",
                          id=change.min_broker_id, addrs=change.notify,
                          off=change.offline_broker_addr)
            for addr in change.notify:
                d = self._notifier.oneway(
                    addr, NotifyMinBrokerIdChange,
                    min_broker_id=change.min_broker_id,
                    broker_name=change.broker_name,
                    min_broker_addr=change.min_broker_addr,
                    offline_broker_addr=change.offline_broker_addr,
                    ha_broker_addr=change.ha_broker_addr,
                )
                d.addErrback(lambda f, a=addr: self.log.warn(
                    "NOTIFY_MIN_BROKER_ID_CHANGE to {addr} failed: {why}",
                    addr=a, why=f.getErrorMessage()))
