"""The producer: the Twisted core (``Producer``, ``TransactionProducer``), queue selection and
fault tolerance. The blocking classes users call are ``rmqwire.Producer`` / ``rmqwire.TransactionProducer``."""

from rmqwire.client.producer.producer import (
    RETRY_RESPONSE_CODES,
    CommunicationMode,
    Producer,
    ProducerConfig,
    ServiceState,
)
from rmqwire.client.producer.selector import (
    LatencyFaultTolerance,
    MQFaultStrategy,
    select_by_hash,
    select_by_random,
)

__all__ = [
    "RETRY_RESPONSE_CODES",
    "CommunicationMode",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "Producer",
    "ProducerConfig",
    "ServiceState",
    "select_by_hash",
    "select_by_random",
]
