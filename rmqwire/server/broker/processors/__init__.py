"""The broker's typed processors, one module per Java processor family."""

from rmqwire.server.broker.processors.admin import AdminBrokerProcessor
from rmqwire.server.broker.processors.client_manage import ClientManageProcessor
from rmqwire.server.broker.processors.consumer_manage import ConsumerManageProcessor
from rmqwire.server.broker.processors.pull import PullMessageProcessor
from rmqwire.server.broker.processors.query import QueryMessageProcessor
from rmqwire.server.broker.processors.send import SendMessageProcessor

__all__ = [
    "AdminBrokerProcessor",
    "ClientManageProcessor",
    "ConsumerManageProcessor",
    "PullMessageProcessor",
    "QueryMessageProcessor",
    "SendMessageProcessor",
]
