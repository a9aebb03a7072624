"""Registration with the NameServers (Java ``BrokerController.registerBrokerAll`` and
``BrokerOuterAPI``).

REGISTER_BROKER goes to every NameServer at start and then every ``registerNameServerPeriod`` ms
(clamped to 10..60 s, as Java clamps it), carrying every topic and the topic table's DataVersion;
a topic the broker creates by itself (or an admin creates) is registered at once on its own
(Java's incremental registration). The body is the JSON RegisterBrokerBody, or its zlib form with
``compressedRegister``, with the CRC32 Java puts in the header. The NameServer's answer may list
order topics (ORDER_TOPIC_CONFIG), which become ``order`` here. At shutdown UNREGISTER_BROKER goes
to every NameServer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from rmqwire.codec.codes import LanguageCode
from rmqwire.codec.commands.namesrv import (
    RegisterBroker,
    RegisterBrokerBody,
    UnregisterBroker,
)
from rmqwire.codec.commands.topic import TopicConfig
from rmqwire.codec.message import body_crc32
from rmqwire.remoting.client import RemotingClient
from rmqwire.remoting.config import RemotingConfig

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["BrokerRegistrar", "register_period_ms"]


def register_period_ms(configured: int) -> int:
    """Java: ``Math.max(10000, Math.min(registerNameServerPeriod, 60000))``."""
    return max(10_000, min(configured, 60_000))


class BrokerRegistrar:
    log = Logger()

    def __init__(self, reactor: Any, broker: Broker) -> None:
        self.reactor = reactor
        self.broker = broker
        timeout = broker.settings.broker.register_broker_timeout_mills / 1000.0
        tls = None
        if broker.settings.client.use_tls or broker.tls.client_uses_tls:
            from twisted.internet.ssl import CertificateOptions

            tls = CertificateOptions(verify=False)   # Java's client test mode: any certificate
        self.client = RemotingClient(
            reactor, RemotingConfig(language=LanguageCode.JAVA, call_timeout=max(timeout, 0.001),
                                    connect_timeout=3.0, tls=tls)
        )
        self._loop: LoopingCall | None = None
        self.registrations = 0  # successful REGISTER_BROKER answers (any NameServer)

    @property
    def namesrv_addrs(self) -> list[str]:
        return self.broker.settings.namesrv_addrs

    def start(self) -> Deferred[None]:
        """Register now, then periodically; fires after the first round."""
        self.client.startService()
        first = self.register_all()
        period = register_period_ms(self.broker.settings.broker.register_name_server_period) / 1000.0
        self._loop = LoopingCall(self._periodic)
        self._loop.clock = self.reactor
        self._loop.start(period, now=False).addErrback(
            lambda f: self.log.failure("periodic registration stopped", f))
        return first

    def _periodic(self) -> None:
        self.register_all()

    def stop(self) -> Deferred[None]:
        """Stop the timer, unregister from every NameServer, close the connections."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        d = self.unregister_all()
        d.addBoth(lambda _: self.client.stopService())
        return d.addBoth(lambda _: None)

    # ---- REGISTER_BROKER -------------------------------------------------------------------------

    def register_all(self) -> Deferred[None]:
        return self._register(self.broker.topic_config_manager.serialize_wrapper(), check_order=True)

    def register_incremental(self, configs: Iterable[TopicConfig]) -> Deferred[None]:
        return self._register(self.broker.topic_config_manager.serialize_wrapper(configs), check_order=True)

    def _register(self, wrapper: Any, *, check_order: bool) -> Deferred[None]:
        addrs = self.namesrv_addrs
        if not addrs or self.broker.shutting_down:
            return defer.succeed(None)
        settings = self.broker.settings
        body_obj = RegisterBrokerBody(topic_config_serialize_wrapper=wrapper, filter_server_list=[])
        compressed = settings.broker.compressed_register
        body = body_obj.encode_compressed() if compressed else body_obj.encode()
        header = dict(
            broker_addr=settings.broker_addr,
            broker_id=settings.broker.broker_id,
            broker_name=settings.broker.broker_name,
            cluster_name=settings.broker.broker_cluster_name,
            ha_server_addr=settings.ha_server_addr,
            enable_acting_master=False,
            compressed=compressed,
            body_crc32=body_crc32(body),
        )
        calls = []
        for addr in addrs:
            d = self.client.call(addr, RegisterBroker, body=body, **header)
            d.addCallback(self._registered, addr, check_order)
            d.addErrback(lambda f, a=addr: self.log.warn(
                "Failed to register current broker to name server. TargetHost={addr}: {why}",
                addr=a, why=f.getErrorMessage()))
            calls.append(d)
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def _registered(self, response: Any, addr: str, check_order: bool) -> None:
        self.registrations += 1
        self.log.debug("Registering current broker to name server completed. TargetHost={addr}", addr=addr)
        kv = response.body
        if check_order and kv is not None and kv.table:
            self.broker.topic_config_manager.update_order_topic_config(kv.table)

    # ---- UNREGISTER_BROKER -----------------------------------------------------------------------

    def unregister_all(self) -> Deferred[None]:
        settings = self.broker.settings
        calls = []
        for addr in self.namesrv_addrs:
            d = self.client.call(
                addr, UnregisterBroker, timeout=3.0,
                broker_name=settings.broker.broker_name, broker_addr=settings.broker_addr,
                cluster_name=settings.broker.broker_cluster_name, broker_id=settings.broker.broker_id,
            )
            d.addErrback(lambda f, a=addr: self.log.warn(
                "unregisterBroker Exception, NamesrvAddr: {addr}: {why}", addr=a, why=f.getErrorMessage()))
            calls.append(d)
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)
