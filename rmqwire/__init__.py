"""rmqwire: a pure-Python implementation of the Apache RocketMQ remoting protocol.

The public client API is importable from here (``from rmqwire import Producer, Message``); it is
loaded on first use, so ``import rmqwire.codec`` stays free of Twisted.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module that defines it (imported lazily by __getattr__)
_EXPORTS = {
    "Producer": "rmqwire.client.producer.blocking",
    "TransactionProducer": "rmqwire.client.producer.blocking",
    "Message": "rmqwire.client.message",
    "SendResult": "rmqwire.client.message",
    "SendStatus": "rmqwire.client.message",
    "TransactionSendResult": "rmqwire.client.message",
    "LocalTransactionState": "rmqwire.client.message",
    "MessageQueue": "rmqwire.model",
    "Admin": "rmqwire.admin",
    # consumers
    "PushConsumer": "rmqwire.client.consumer.blocking",
    "PullConsumer": "rmqwire.client.consumer.blocking",
    "QueuePuller": "rmqwire.client.consumer.blocking",
    "MessageExt": "rmqwire.codec.message",
    "ConsumeResult": "rmqwire.client.consumer.listener",
    "ConsumeFromWhere": "rmqwire.model",
    "MessageModel": "rmqwire.model",
    "MessageSelector": "rmqwire.client.consumer.subscription",
    "create_reply_message": "rmqwire.client.consumer.reply",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from rmqwire.admin import Admin
    from rmqwire.client.consumer.blocking import PullConsumer, PushConsumer, QueuePuller
    from rmqwire.client.consumer.listener import ConsumeResult
    from rmqwire.client.consumer.reply import create_reply_message
    from rmqwire.client.consumer.subscription import MessageSelector
    from rmqwire.client.message import (
        LocalTransactionState,
        Message,
        SendResult,
        SendStatus,
        TransactionSendResult,
    )
    from rmqwire.client.producer.blocking import Producer, TransactionProducer
    from rmqwire.codec.message import MessageExt
    from rmqwire.model import ConsumeFromWhere, MessageModel, MessageQueue


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rmqwire' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
