"""END_TRANSACTION (Java ``EndTransactionProcessor``): a producer commits or rolls back a half
message, right after its local transaction or in answer to the broker's check.

The half message is read back by its commit-log offset and must match the request (producer
group, half-queue offset, commit-log offset: else 1 SYSTEM_ERROR). Commit stores it again in its
real topic and queue with sysFlag COMMIT; both then queue an op message that marks the half
resolved. UNKNOW (0) changes nothing and gets no answer. A half message with
CHECK_IMMUNITY_TIME_IN_SECONDS may no longer be resolved by the producer on its own once that
time passed (604 ILLEGAL_OPERATION): only a check answer may.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.base import Response
from rmqwire.codec.commands.transaction import (
    EndTransaction,
    EndTransactionRequestHeader,
)
from rmqwire.codec.message import (
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    java_hashmap_order,
    reset_transaction_type,
)
from rmqwire.errors import BrokerResponseError
from rmqwire.remoting.dispatcher import Processor, RequestContext
from rmqwire.server.broker.transaction.util import end_immunity_time
from rmqwire.server.store import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["EndTransactionProcessor"]

COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT_TYPE)
ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)

#: Java ``sendFinalMessage``: put statuses that are failures, with their code and remark.
_FINAL_FAILURES: dict[PutMessageStatus, tuple[int, str]] = {
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"),
}
_FINAL_OK = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                       PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})


class EndTransactionProcessor(Processor):
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @EndTransaction.responder
    def end_transaction(self, header: EndTransactionRequestHeader, body: Any, context: RequestContext) -> Any:
        broker = self.broker
        if broker.settings.store_extras.broker_role.upper() == "SLAVE":
            self.log.warn("Message store is slave mode, so end transaction is forbidden. ")
            return Response(code=ResponseCode.SLAVE_NOT_AVAILABLE)
        state = header.commit_or_rollback
        if state is None or header.commit_log_offset is None or header.tran_state_table_offset is None:
            raise BrokerResponseError(ResponseCode.SYSTEM_ERROR,
                                      "the custom field <commitOrRollback/commitLogOffset/tranStateTableOffset> "
                                      "is null")
        from_check = bool(header.from_transaction_check)
        request = context.request
        remark = request.remark if request is not None else None
        if state not in (COMMIT, ROLLBACK):
            # UNKNOW or a value Java does not know: nothing to do, no answer
            self.log.warn("{who}[{peer}] end transaction with state {s}, pending. header: {h} remark: {r}",
                          who="Check producer" if from_check else "The producer", peer=context.peer, s=state,
                          h=header, r=remark)
            return None
        if from_check or state == ROLLBACK:
            self.log.warn("{who}[{peer}] {what} the message. header: {h} remark: {r}",
                          who="Check producer" if from_check else "The producer", peer=context.peer,
                          what="commit" if state == COMMIT else "rollback", h=header, r=remark)
        service = broker.transactional_message_service
        half = service.bridge.look_message_by_offset(header.commit_log_offset)
        if half is None:
            return Response(code=ResponseCode.SYSTEM_ERROR, remark="Find prepared transaction message failed")
        if self._reject_commit_or_rollback(header, half):
            self.log.warn("Message {what} fail [producer end]. currentTimeMillis - bornTime > checkImmunityTime, "
                          "msgId={m},commitLogOffset={c}, wait check", what="commit" if state == COMMIT else "rollback",
                          m=header.msg_id, c=header.commit_log_offset)
            return Response(code=ResponseCode.ILLEGAL_OPERATION)
        wrong = _check_prepare_message(half, header)
        if wrong is not None:
            return Response(code=ResponseCode.SYSTEM_ERROR, remark=wrong)
        if state == ROLLBACK:
            service.delete_prepare_message(half)
            real_topic = half.properties.get(PropertyKey.REAL_TOPIC, "")
            broker.metrics.record_rollback(real_topic)
            broker.metrics.record_half(real_topic, -1)
            return Response()
        inner = _end_message_transaction(half)
        inner.prepared_transaction_offset = header.commit_log_offset

        def stored(result: PutMessageResult) -> Response[Any, Any]:
            response = self._final_response(inner.topic, result)
            if response.code == ResponseCode.SUCCESS:
                service.delete_prepare_message(half)
                broker.metrics.record_commit(inner.topic)
                broker.metrics.record_half(inner.topic, -1)
            return response

        return service.bridge.put(inner).addCallback(stored)

    def _reject_commit_or_rollback(self, header: EndTransactionRequestHeader, half: MessageExt) -> bool:
        """Past its custom immunity time a half message waits for the check (Java
        ``rejectCommitOrRollback``)."""
        if header.from_transaction_check:
            return False
        value = half.properties.get(PropertyKey.CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not value:
            return False
        timeout = self.broker.settings.broker.transaction_time_out
        return self.broker.now_ms() - half.born_timestamp > end_immunity_time(value, timeout)

    def _final_response(self, topic: str, result: PutMessageResult) -> Response[Any, Any]:
        """Java ``sendFinalMessage``'s answer for the put of the committed message."""
        status = result.status
        if status in _FINAL_OK:
            append = result.append_result
            if status is PutMessageStatus.PUT_OK and append is not None:
                self.broker.stats.on_put(topic, append.msg_num, append.wrote_bytes)
            return Response()
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            return Response(code=ResponseCode.MESSAGE_ILLEGAL, remark=(
                "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
                f"{self.broker.settings.store.max_message_size}B, msg properties length limit 32KB."))
        code, remark = _FINAL_FAILURES.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        return Response(code=code, remark=remark)


def _check_prepare_message(half: MessageExt, header: EndTransactionRequestHeader) -> str | None:
    """Java ``checkPrepareMessage``: the remark of the first mismatch, None when it matches."""
    if half.properties.get(PropertyKey.PRODUCER_GROUP) != header.producer_group:
        return "The producer group wrong"
    if half.queue_offset != header.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != header.commit_log_offset:
        return "The commit log offset wrong"
    return None


def _end_message_transaction(half: MessageExt) -> MessageExt:
    """Java ``endMessageTransaction``: the committed message for the real topic and queue.

    As the official broker, its stored properties are the half message's (REAL_TOPIC, REAL_QID
    and TRAN_MSG included): Java computes the properties string before clearing those keys."""
    props = half.properties
    try:
        queue_id = int(props.get(PropertyKey.REAL_QUEUE_ID, ""))
    except ValueError:
        raise BrokerResponseError(ResponseCode.SYSTEM_ERROR,
                                  f"the half message has no real queue id: {props.get(PropertyKey.REAL_QUEUE_ID)!r}") from None
    return MessageExt(
        topic=props.get(PropertyKey.REAL_TOPIC, ""),
        body=half.body,
        flag=half.flag,
        properties=java_hashmap_order(props, 128),
        queue_id=queue_id,
        sys_flag=reset_transaction_type(half.sys_flag, COMMIT),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_host=half.store_host,
        reconsume_times=half.reconsume_times,
    )
