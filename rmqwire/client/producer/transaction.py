"""Transactional messages (Java ``TransactionMQProducer`` / ``sendMessageInTransaction``).

1. The half message: the message with TRAN_MSG=true and PGROUP=<group>, sent as a sync send (the
   kernel sets sysFlag PREPARED); the broker parks it in RMQ_SYS_TRANS_HALF_TOPIC.
2. The local transaction runs: ``local_transaction(msg, arg)`` returns a LocalTransactionState
   (an exception or None counts as UNKNOW); a FLUSH_*/SLAVE_NOT_AVAILABLE send status means
   ROLLBACK, as Java.
3. END_TRANSACTION, oneway, to the broker that stored the half message: commit (8), rollback
   (12) or unknown (0), with the send result's queue offset and the commit-log offset from its
   offset message id.
4. Later the broker may ask CHECK_TRANSACTION_STATE about an unresolved one, on this client's
   connection; ``check_listener(msg)`` answers (a state or a Deferred of one), and the answer
   goes back as END_TRANSACTION (``fromTransactionCheck=true``) to the broker that asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from rmqwire.client.message import (
    LocalTransactionState,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from rmqwire.client.producer.producer import Producer
from rmqwire.client.validators import check_message
from rmqwire.codec.commands.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransaction,
    EndTransactionRequestHeader,
)
from rmqwire.codec.ids import parse_offset_msg_id
from rmqwire.codec.message import Message, MessageExt, PropertyKey
from rmqwire.errors import MQClientError
from rmqwire.remoting.dispatcher import exception_simple_desc

LocalTransaction = Callable[[Message, Any], "LocalTransactionState | Deferred[LocalTransactionState] | None"]
CheckListener = Callable[[MessageExt], "LocalTransactionState | Deferred[LocalTransactionState] | None"]

#: MessageSysFlag transaction types carried in END_TRANSACTION's commitOrRollback.
COMMIT_OR_ROLLBACK = {
    LocalTransactionState.COMMIT_MESSAGE: 8,
    LocalTransactionState.ROLLBACK_MESSAGE: 12,
    LocalTransactionState.UNKNOW: 0,
}


def _state(value: Any) -> LocalTransactionState:
    if value is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(value, LocalTransactionState):
        raise TypeError(f"a transaction callback returned {value!r}, not a LocalTransactionState")
    return value


class TransactionProducer(Producer):
    """The transactional producer core. ``check_listener`` answers the broker's checks;
    ``local_transaction`` is the default for ``send_message_in_transaction``."""

    def __init__(
        self,
        reactor: Any,
        group: str,
        *,
        check_listener: CheckListener | None = None,
        local_transaction: LocalTransaction | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(reactor, group, **kwargs)
        self.check_listener = check_listener
        self.local_transaction = local_transaction

    # ---- the three steps, usable one by one (the blocking layer runs step 2 in its own thread) --

    def send_half_message(self, msg: Message) -> Deferred[SendResult]:
        """Step 1: mark ``msg`` as a half message of this group and send it (sync send)."""
        try:
            if msg.delay_time_level:  # Java ignores the delay of a transactional message
                msg.properties.pop(PropertyKey.DELAY_TIME_LEVEL, None)
            check_message(msg, self.config.max_message_size)
        except Exception as e:
            return defer.fail(e)
        msg.properties[PropertyKey.TRANSACTION_PREPARED] = "true"
        msg.properties[PropertyKey.PRODUCER_GROUP] = self.namespaced_group

        def failed(f: Failure) -> Failure:
            raise MQClientError("send message Exception") from f.value

        return self.send(msg).addErrback(failed)

    def end_transaction(
        self,
        msg: Message,
        result: SendResult,
        state: LocalTransactionState,
        local_exception: BaseException | None = None,
    ) -> Deferred[None]:
        """Step 3: END_TRANSACTION, oneway, to the master of the broker that stored the half."""
        instance = self._instance()
        offset_id = parse_offset_msg_id(result.offset_msg_id or result.msg_id or "")
        broker_name = result.message_queue.broker_name
        addr = instance.routes.find_broker_address_in_publish(broker_name)
        if addr is None:
            return defer.fail(MQClientError(f"The broker[{broker_name}] not exist"))
        header = EndTransactionRequestHeader(
            topic=msg.topic,
            transaction_id=result.transaction_id,
            commit_log_offset=offset_id.commit_log_offset,
            bname=broker_name,
            commit_or_rollback=COMMIT_OR_ROLLBACK[state],
            producer_group=self.namespaced_group,
            tran_state_table_offset=result.queue_offset,
            msg_id=result.msg_id,
        )
        remark = None
        if local_exception is not None:
            remark = f"executeLocalTransactionBranch exception: {exception_simple_desc(local_exception)}"
        return instance.broker_oneway(addr, EndTransaction, header, remark=remark)

    @staticmethod
    def result_for(result: SendResult, state: LocalTransactionState) -> TransactionSendResult:
        return TransactionSendResult(
            status=result.status, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id,
            message_queue=result.message_queue, queue_offset=result.queue_offset,
            transaction_id=result.transaction_id, region_id=result.region_id,
            trace_on=result.trace_on, local_transaction_state=state,
        )

    def prepare_local(self, msg: Message, result: SendResult) -> None:
        """What Java does to the message between steps 1 and 2 (transaction id properties)."""
        if result.transaction_id is not None:
            msg.properties[PropertyKey.TRANSACTION_ID] = result.transaction_id

    # ---- all three ---------------------------------------------------------------------------

    def send_message_in_transaction(
        self, msg: Message, local_transaction: LocalTransaction | None = None, arg: Any = None
    ) -> Deferred[TransactionSendResult]:
        """Half message, local transaction, END_TRANSACTION; fires with the TransactionSendResult."""
        local = local_transaction or self.local_transaction
        if local is None and self.check_listener is None:
            return defer.fail(MQClientError("tranExecutor is null"))

        def sent(result: SendResult) -> Deferred[TransactionSendResult]:
            if result.status is not SendStatus.SEND_OK:
                return self._finish(msg, result, LocalTransactionState.ROLLBACK_MESSAGE, None)
            self.prepare_local(msg, result)
            if local is None:
                return self._finish(msg, result, LocalTransactionState.UNKNOW, None)
            d = defer.maybeDeferred(local, msg, arg)
            d.addCallback(_state)

            def outcome(value: LocalTransactionState | Failure) -> Deferred[TransactionSendResult]:
                if isinstance(value, Failure):
                    self.log.error("executeLocalTransactionBranch exception: {e}", e=value.value)
                    return self._finish(msg, result, LocalTransactionState.UNKNOW, value.value)
                return self._finish(msg, result, value, None)

            return d.addBoth(outcome)

        return self.send_half_message(msg).addCallback(sent)

    def end_transaction_logged(self, msg: Message, result: SendResult, state: LocalTransactionState,
                               exc: BaseException | None = None) -> Deferred[None]:
        """``end_transaction`` whose failure is logged, not raised (Java's behaviour)."""
        d = defer.maybeDeferred(self.end_transaction, msg, result, state, exc)
        d.addErrback(lambda f: self.log.warn(
            "local transaction execute {state}, but end broker transaction failed: {why}",
            state=state.value, why=f.getErrorMessage()))
        return d

    def _finish(self, msg: Message, result: SendResult, state: LocalTransactionState,
                exc: BaseException | None) -> Deferred[TransactionSendResult]:
        d = self.end_transaction_logged(msg, result, state, exc)
        return d.addCallback(lambda _: self.result_for(result, state))

    # ---- the broker's checks -----------------------------------------------------------------

    def check_transaction_state(
        self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        listener = self.check_listener
        if listener is None:
            self.log.warn("CheckTransactionState, pick transactionCheckListener by group[{group}] "
                          "failed", group=self.group)
            return
        uniq = msg.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        d = defer.maybeDeferred(listener, msg).addCallback(_state)

        def answer(value: LocalTransactionState | Failure) -> Deferred[None]:
            remark = None
            state = value
            if isinstance(value, Failure):
                self.log.error("Broker call checkTransactionState, but checkLocalTransactionState "
                               "exception: {e}", e=value.value)
                remark = f"checkLocalTransactionState Exception: {exception_simple_desc(value)}"
                state = LocalTransactionState.UNKNOW
            end = EndTransactionRequestHeader(
                topic=header.topic,
                commit_log_offset=header.commit_log_offset,
                producer_group=self.namespaced_group,
                tran_state_table_offset=header.tran_state_table_offset,
                from_transaction_check=True,
                bname=header.bname,
                msg_id=uniq if uniq is not None else msg.offset_msg_id,
                transaction_id=header.transaction_id,
                commit_or_rollback=COMMIT_OR_ROLLBACK[state],
            )
            return self._instance().broker_oneway(addr, EndTransaction, end, remark=remark)

        d.addBoth(answer).addErrback(
            lambda f: self.log.failure("endTransactionOneway exception", f))
