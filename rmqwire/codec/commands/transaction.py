"""Transactions: END_TRANSACTION and the broker's CHECK_TRANSACTION_STATE."""

from __future__ import annotations

from rmqwire.codec.codes import RequestCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.header import (
    CommandHeader,
    RpcRequestHeader,
    jfield,
)


class EndTransactionRequestHeader(RpcRequestHeader):
    topic: str | None = jfield("String")  # 5.x
    producer_group: str | None = jfield("String", required=True)
    tran_state_table_offset: int | None = jfield("Long", required=True)
    commit_log_offset: int | None = jfield("Long", required=True)
    commit_or_rollback: int | None = jfield("Integer", required=True)  # 0 / 8 COMMIT / 12 ROLLBACK
    from_transaction_check: bool | None = jfield("Boolean", default=False)
    msg_id: str | None = jfield("String", required=True)
    transaction_id: str | None = jfield("String")


class EndTransactionResponseHeader(CommandHeader):
    pass


class CheckTransactionStateRequestHeader(RpcRequestHeader):
    topic: str | None = jfield("String")  # 5.x
    tran_state_table_offset: int | None = jfield("Long", required=True)
    commit_log_offset: int | None = jfield("Long", required=True)
    msg_id: str | None = jfield("String")
    transaction_id: str | None = jfield("String")
    offset_msg_id: str | None = jfield("String")


class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    topic: str | None = jfield("String")  # 5.x
    msg_id: str | None = jfield("String")


# ---- commands -----------------------------------------------------------------------------------


class EndTransaction(Command):
    """Producer -> broker, oneway in the Java client."""

    code = RequestCode.END_TRANSACTION
    header = EndTransactionRequestHeader
    response_header = EndTransactionResponseHeader
    oneway = True


class CheckTransactionState(Command):
    """Broker -> producer, oneway; the body is the half message's stored record."""

    code = RequestCode.CHECK_TRANSACTION_STATE
    header = CheckTransactionStateRequestHeader
    body = bytes
    oneway = True


class ResumeCheckHalfMessage(Command):
    code = RequestCode.RESUME_CHECK_HALF_MESSAGE
    header = ResumeCheckHalfMessageRequestHeader
