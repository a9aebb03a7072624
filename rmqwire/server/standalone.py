"""A NameServer and a Broker in one process (``rmqwire standalone``, the ``rmqwire_cluster`` test
fixture).

``Standalone`` is a Twisted ``MultiService`` of an embedded ``NameServer`` and a ``Broker`` that
registers with it. By default the NameServer listens on 127.0.0.1:9876, the broker on 10911 (and
its fast port 10909) and the store lives in ``~/.rmqwire/standalone/store``; ports 0 pick free
ones. ``broker.conf`` / ``namesrv.properties`` (official keys) are applied first, then the
explicit arguments.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from twisted.application.service import MultiService
from twisted.internet import defer
from twisted.internet.defer import Deferred

from rmqwire.server.broker import Broker, BrokerSettings
from rmqwire.server.namesrv import NameServer, NamesrvSettings

__all__ = ["DEFAULT_STORE_DIR", "Standalone", "StandaloneOptions"]

DEFAULT_STORE_DIR = Path.home() / ".rmqwire" / "standalone" / "store"
LOOPBACK = "127.0.0.1"


@dataclasses.dataclass(slots=True)
class StandaloneOptions:
    """Where ``Standalone`` listens and stores; None keeps the config file's (or default) value."""

    namesrv_port: int | None = None
    broker_port: int | None = None
    store_dir: str | Path | None = None
    host: str = LOOPBACK
    broker_config: str | Path | None = None
    namesrv_config: str | Path | None = None
    broker_properties: dict[str, str] = dataclasses.field(default_factory=dict)
    namesrv_properties: dict[str, str] = dataclasses.field(default_factory=dict)


class Standalone(MultiService):
    """NameServer + Broker; ``namesrv_addr`` / ``broker_addr`` once started."""

    def __init__(self, reactor: Any, options: StandaloneOptions | None = None) -> None:
        super().__init__()
        self.reactor = reactor
        self.options = options = options if options is not None else StandaloneOptions()
        ns_settings = NamesrvSettings.load(options.namesrv_config)
        ns_props: dict[str, str] = {}
        if options.namesrv_config is None:
            ns_props["bindAddress"] = options.host
        if options.namesrv_port is not None:
            ns_props["listenPort"] = str(options.namesrv_port)
        store_dir = Path(options.store_dir) if options.store_dir is not None else None
        if store_dir is not None or options.namesrv_config is None:
            base = (store_dir or DEFAULT_STORE_DIR).parent
            ns_props.setdefault("kvConfigPath", str(base / "namesrv" / "kvConfig.json"))
        ns_props.update(options.namesrv_properties)
        ns_settings.apply(ns_props)
        ns_settings.file_properties.update(ns_props)
        self.namesrv = NameServer(reactor, ns_settings)
        self.namesrv.setServiceParent(self)

        settings = BrokerSettings.load(options.broker_config)
        props: dict[str, str] = {}
        if options.broker_config is None:
            props.update({"brokerIP1": options.host, "bindAddress": options.host,
                          "brokerName": "broker-a", "autoCreateTopicEnable": "true"})
        if options.broker_port is not None:
            props["listenPort"] = str(options.broker_port)
        if store_dir is not None or options.broker_config is None:
            root = store_dir or DEFAULT_STORE_DIR
            props["storePathRootDir"] = str(root)
            props["storePathCommitLog"] = str(root / "commitlog")
        props.update(options.broker_properties)
        settings.apply(props)
        self.broker_settings = settings
        self._broker: Broker | None = None

    @property
    def broker(self) -> Broker:
        if self._broker is None:
            raise RuntimeError("the standalone cluster is not started")
        return self._broker

    @property
    def namesrv_addr(self) -> str:
        host = self.namesrv.settings.server.bind_address
        if host in ("0.0.0.0", "::", ""):
            host = LOOPBACK
        return f"{host}:{self.namesrv.port}"

    @property
    def broker_addr(self) -> str:
        return self.broker.address

    @property
    def store_dir(self) -> Path:
        return Path(self.broker_settings.store.store_path_root_dir)

    def startService(self) -> None:
        """Start the NameServer, then the broker pointed at it (synchronous: a port in use or a
        locked store raises here, and nothing is left running)."""
        self.namesrv.startService()
        try:
            self.broker_settings.broker.namesrv_addr = self.namesrv_addr
            broker = Broker(self.reactor, self.broker_settings)
            broker.startService()
        except BaseException:
            self.namesrv.stopService()
            raise
        self._broker = broker
        broker.setServiceParent(self)  # parent already running: no second start
        self.running = 1

    def stopService(self) -> Deferred[None]:
        """The broker first (it unregisters and closes its store cleanly), then the NameServer."""
        self.running = 0
        d: Deferred[Any] = defer.succeed(None)
        if self._broker is not None and self._broker.running:
            d = defer.maybeDeferred(self._broker.stopService)
        d.addBoth(lambda _: self.namesrv.stopService() if self.namesrv.running else None)
        return d.addBoth(lambda _: None)

    def when_registered(self) -> Deferred[None]:
        """Fires once the broker's first registration round is over."""
        d: Deferred[None] = Deferred()
        self.broker.registered.addBoth(lambda r: (d.callback(None), r)[1])
        return d
