"""The Broker: send, pull with long polling, offsets, client tables, topic and group admin,
registration with the NameServers, over the RocketMQ-compatible store.

    from rmqwire.server.broker import Broker, BrokerSettings

    broker = Broker(reactor, BrokerSettings.from_properties({
        "namesrvAddr": "127.0.0.1:9876", "listenPort": "0", "storePathRootDir": "/tmp/store"}))
    broker.startService()      # broker.address -> "<brokerIP1>:<port>"

``rmqwire broker -c broker.conf`` runs one from the command line (``-p`` prints the effective
config as ``mqbroker -p`` does). Behaviour follows the official 5.3.3 broker
(shared/spec/broker-and-store.md Part A).
"""

from rmqwire.server.broker.config import (
    UPDATABLE_KEYS,
    BrokerConfig,
    BrokerSettings,
    StoreExtras,
)
from rmqwire.server.broker.controller import Broker

__all__ = ["UPDATABLE_KEYS", "Broker", "BrokerConfig", "BrokerSettings", "StoreExtras"]
