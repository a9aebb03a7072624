"""The transaction service's access to the store and the broker tables (Java
``TransactionalMessageBridge``): the CID_RMQ_SYS_TRANS offsets of the half and op queues, reads
of those queues as decoded messages, and the puts (re-stored halves, op messages), each
answered as a Deferred on the reactor so a SYNC_FLUSH store never blocks it."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import enum
from typing import TYPE_CHECKING

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.codec.message import (
    MessageDecodeError,
    MessageExt,
    PropertyKey,
    decode_message,
    java_hashmap_order,
)
from rmqwire.model import PermName
from rmqwire.server.broker.topic_config import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rmqwire.server.broker.transaction.util import CHECK_GROUP, REMOVE_TAG
from rmqwire.server.store import PutMessageResult, PutMessageStatus
from rmqwire.server.store.results import GetMessageStatus

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["QueueRead", "ReadStatus", "TransactionalMessageBridge", "put_message"]

#: Java's HashMap capacity in ``MessageDecoder.string2messageProperties``: re-stored messages
#: list their properties in that map's order, as the official broker writes them.
_DECODED_MAP_CAPACITY = 128


class ReadStatus(enum.Enum):
    """Java ``PullStatus`` as the bridge maps the store's GetMessageStatus onto it."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_READ_STATUS = {
    GetMessageStatus.FOUND: ReadStatus.FOUND,
    GetMessageStatus.NO_MATCHED_MESSAGE: ReadStatus.NO_MATCHED_MSG,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ReadStatus.NO_NEW_MSG,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ReadStatus.NO_NEW_MSG,
}


@dataclasses.dataclass(slots=True)
class QueueRead:
    """What one read of the half or op queue found (Java ``PullResult``): ``messages`` is None
    unless something was found."""

    status: ReadStatus
    next_begin_offset: int
    max_offset: int
    messages: list[MessageExt] | None = None


class TransactionalMessageBridge:
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    # ---- offsets of the check group ------------------------------------------------------------

    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self.broker.consumer_offset_manager.query_offset(CHECK_GROUP, topic, queue_id)
        if offset == -1:
            offset = self.broker.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        host, port = self.broker.store_host
        self.broker.consumer_offset_manager.commit_offset(f"{host}:{port}", CHECK_GROUP, topic, queue_id, offset)

    def half_queue_ids(self) -> list[int]:
        """Java ``fetchMessageQueues``: the half topic's read queues (the topic is created when
        missing)."""
        topics = self.broker.topic_config_manager
        cfg = topics.select(TRANS_HALF_TOPIC)
        if cfg is None:
            cfg = topics.create_in_send_back(TRANS_HALF_TOPIC, 1, int(PermName.PERM_READ | PermName.PERM_WRITE))
        if cfg is None:
            return []
        return list(range(cfg.read_queue_nums))

    # ---- reads -----------------------------------------------------------------------------------

    def get_half_message(self, queue_id: int, offset: int, nums: int) -> QueueRead | None:
        return self._read(TRANS_HALF_TOPIC, queue_id, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int) -> QueueRead | None:
        return self._read(TRANS_OP_HALF_TOPIC, queue_id, offset, nums)

    def _read(self, topic: str, queue_id: int, offset: int, nums: int) -> QueueRead | None:
        result = self.broker.store.get_message(CHECK_GROUP, topic, queue_id, offset, nums)
        if result is None:
            return None
        status = _READ_STATUS.get(result.status, ReadStatus.OFFSET_ILLEGAL)
        messages = None
        if status is ReadStatus.FOUND:
            messages = []
            for record in result.message_buffers:
                try:
                    messages.append(decode_message(record, decompress=False))
                except MessageDecodeError:
                    self.log.warn("undecodable record in {topic}:{q}", topic=topic, q=queue_id)
            messages = messages or None
        return QueueRead(status, result.next_begin_offset, result.max_offset, messages)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        return self.broker.store.look_message_by_offset(commit_log_offset)

    # ---- puts ------------------------------------------------------------------------------------

    def put(self, msg: MessageExt) -> Deferred[PutMessageResult]:
        return put_message(self.broker, msg)

    def put_ok(self, msg: MessageExt) -> Deferred[bool]:
        """``put``, True when stored; a failure is logged (Java ``putMessage``)."""

        def judged(result: PutMessageResult) -> bool:
            if result.status is PutMessageStatus.PUT_OK:
                self.broker.stats.on_put(msg.topic, result.append_result.msg_num if result.append_result else 1,
                                         result.append_result.wrote_bytes if result.append_result else 0)
                return True
            self.log.error("Put message failed, topic: {t}, queueId: {q}, status: {s}",
                           t=msg.topic, q=msg.queue_id, s=result.status.name)
            return False

        return self.put(msg).addCallback(judged)

    def renew_half_message(self, msg: MessageExt) -> MessageExt:
        """Java ``renewHalfMessageInner``: the same half message, to be stored again at the end of
        the half queue."""
        return MessageExt(
            topic=msg.topic,
            body=msg.body,
            flag=0,
            properties=java_hashmap_order(msg.properties, _DECODED_MAP_CAPACITY),
            queue_id=msg.queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=msg.store_host,
        )

    def renew_immunity_half_message(self, msg: MessageExt) -> MessageExt:
        """``renewHalfMessageInner`` plus TRAN_PREPARED_QUEUE_OFFSET: the offset of the first copy,
        so a later op for it still resolves this one."""
        inner = self.renew_half_message(msg)
        props = dict(inner.properties)
        props[PropertyKey.TRANSACTION_PREPARED_QUEUE_OFFSET] = props.get(
            PropertyKey.TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        inner.properties = java_hashmap_order(props, _DECODED_MAP_CAPACITY)
        return inner

    def write_op(self, queue_id: int, body: str) -> Deferred[bool]:
        """Java ``writeOp``: an op message (tag ``d``) into the op queue of half queue ``queue_id``."""
        host = self.broker.store_host
        msg = MessageExt(
            topic=TRANS_OP_HALF_TOPIC,
            body=body.encode(),
            properties=java_hashmap_order({PropertyKey.TAGS: REMOVE_TAG, PropertyKey.WAIT_STORE_MSG_OK: "true"}),
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=self.broker.now_ms(),
            born_host=host,
            store_host=host,
        )
        return self.put_ok(msg)


def put_message(broker: Broker, msg: MessageExt) -> Deferred[PutMessageResult]:
    """Store a message the broker makes itself; fires on the reactor once the store answered
    (after the flush under SYNC_FLUSH), so the reactor never waits for the disk."""
    try:
        future = broker.store.async_put_message(msg)
    except Exception:  # a bad record must not stop the caller's loop
        TransactionalMessageBridge.log.failure("put of an internal message to {t} failed", Failure(), t=msg.topic)
        return defer.succeed(PutMessageResult(PutMessageStatus.UNKNOWN_ERROR))
    if future.done():
        return defer.succeed(_result(future))
    d: Deferred[PutMessageResult] = Deferred()
    future.add_done_callback(lambda f: broker.reactor.callFromThread(d.callback, _result(f)))
    return d


def _result(future: concurrent.futures.Future[PutMessageResult]) -> PutMessageResult:
    try:
        return future.result()
    except Exception:
        return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR)
