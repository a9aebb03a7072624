"""Transactional messages on the broker (spec broker-and-store.md section 6.9): half messages in
RMQ_SYS_TRANS_HALF_TOPIC, their resolution by op messages in RMQ_SYS_TRANS_OP_HALF_TOPIC, and
the periodic check-back of unresolved ones (CHECK_TRANSACTION_STATE to a producer of the group).
END_TRANSACTION is answered by ``processors/end_transaction.py``."""

from rmqwire.server.broker.transaction.bridge import TransactionalMessageBridge
from rmqwire.server.broker.transaction.check import (
    TransactionalMessageCheckService,
    TransactionCheckListener,
)
from rmqwire.server.broker.transaction.service import TransactionalMessageService

__all__ = [
    "TransactionCheckListener",
    "TransactionalMessageBridge",
    "TransactionalMessageCheckService",
    "TransactionalMessageService",
]
