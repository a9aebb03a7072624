"""The broker's message store: a RocketMQ-compatible CommitLog + ConsumeQueue on disk.

The official 5.3.3 broker can open a directory written here and this store can open one written
by the official broker. No networking and no Twisted: see ``message_store.DefaultMessageStore``.
"""

from rmqwire.server.store.config import FlushDiskType, MessageStoreConfig
from rmqwire.server.store.consume_queue import BoundaryType, ConsumeQueue, CqUnit
from rmqwire.server.store.filter import MessageFilter, TagsMessageFilter
from rmqwire.server.store.mapped_file import StoreLoadError
from rmqwire.server.store.message_store import DefaultMessageStore
from rmqwire.server.store.recovery import RecoveryReport
from rmqwire.server.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    DispatchBatch,
    DispatchRequest,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)

__all__ = [
    "AppendMessageResult",
    "AppendMessageStatus",
    "BoundaryType",
    "ConsumeQueue",
    "CqUnit",
    "DefaultMessageStore",
    "DispatchBatch",
    "DispatchRequest",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageFilter",
    "MessageStoreConfig",
    "PutMessageResult",
    "PutMessageStatus",
    "RecoveryReport",
    "StoreLoadError",
    "TagsMessageFilter",
]
