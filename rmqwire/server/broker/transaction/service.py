"""Half messages resolved and checked (Java ``TransactionalMessageServiceImpl`` with its
``TransactionalOpBatchService``).

Resolving: END_TRANSACTION's commit or rollback calls ``delete_prepare_message``, which queues the
half message's queue offset; the offsets of one half queue go out together as one op message
(tag ``d``, body ``"12,13,"``) once ``transactionOpMsgMaxSize`` bytes are pending or
``transactionOpBatchInterval`` ms passed since the queue's last op message.

Checking (``check``), per half queue, from the CID_RMQ_SYS_TRANS offsets of the half queue and
its op queue, as Java:

- op messages are read (32 at a time) into ``remove_map`` {half offset -> op offset}; half
  offsets below the half queue's offset are ignored;
- walking the half queue from its offset: a resolved offset is skipped; a half message checked
  ``transactionCheckMax`` times (TRANSACTION_CHECK_TIMES) or older than the store's
  ``fileReservedTime`` is discarded to TRANS_CHECK_MAX_TIME_TOPIC; one stored after the check
  began, or younger than ``transactionTimeOut`` (or its CHECK_IMMUNITY_TIME_IN_SECONDS), ends the
  walk; otherwise, unless newer op messages may still resolve it, it is stored again at the end
  of the half queue (check times + 1) and CHECK_TRANSACTION_STATE goes to a producer of its
  group about that new copy;
- the half and op offsets advance past what was handled.

The walk runs on the reactor as a coroutine: it gives the reactor a turn every few messages, and
Java's one-second sleeps (waiting for op messages) are timed waits, not blocking ones.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet import task
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from rmqwire.codec.message import MessageExt, PropertyKey
from rmqwire.server.broker.topic_config import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rmqwire.server.broker.transaction.bridge import (
    QueueRead,
    ReadStatus,
    TransactionalMessageBridge,
)
from rmqwire.server.broker.transaction.util import (
    REMOVE_TAG,
    check_immunity_time,
    op_body,
    parse_op_body,
)

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["CheckListener", "TransactionalMessageService"]

#: Java's limits of one check walk.
MAX_PROCESS_TIME_LIMIT = 60_000
OP_MSG_PULL_NUMS = 32
SLEEP_WHILE_NO_OP = 1.0
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
#: Queued op offsets per half queue before an op message is written at once (Java's queue size).
OP_CONTEXT_CAPACITY = 20_000
#: Half messages walked between two reactor turns.
_YIELD_EVERY = 64


class CheckListener(Protocol):
    """What ``check`` does with a half message: ask its producer, or park it."""

    def resolve_half_msg(self, msg: MessageExt) -> None: ...

    def resolve_discard_msg(self, msg: MessageExt) -> Deferred[bool]: ...


@dataclasses.dataclass(slots=True)
class _OpContext:
    """The offsets of one half queue waiting for their op message (Java ``MessageQueueOpContext``)."""

    last_write: int
    pending: list[str] = dataclasses.field(default_factory=list)
    total: int = 0


@dataclasses.dataclass(slots=True)
class _OpState:
    """The op side of one walk: resolved half offsets and op messages not yet fully used."""

    remove_map: dict[int, int] = dataclasses.field(default_factory=dict)
    op_msg_map: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    done_op_offsets: list[int] = dataclasses.field(default_factory=list)


class TransactionalMessageService:
    log = Logger()

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.bridge = TransactionalMessageBridge(broker)
        self._ops: dict[int, _OpContext] = {}
        self._op_call: Any = None
        self.checks_sent = 0
        #: Set at broker shutdown: a running walk stops at its next step.
        self.stopped = False

    def now(self) -> int:
        return self.broker.now_ms()

    def _reactor_ms(self) -> int:
        """Op batching runs on the reactor's timers, so it measures with the reactor's clock."""
        return int(self.broker.reactor.seconds() * 1000)

    # ---- resolving: op messages ----------------------------------------------------------------

    def delete_prepare_message(self, half: MessageExt) -> None:
        """Record that the half message at ``half.queue_offset`` is resolved (committed or rolled
        back); the op message follows in a batch."""
        settings = self.broker.settings.broker
        ctx = self._ops.get(half.queue_id)
        if ctx is None:
            ctx = self._ops[half.queue_id] = _OpContext(last_write=self._reactor_ms())
        data = op_body([half.queue_offset])
        if len(ctx.pending) >= OP_CONTEXT_CAPACITY:
            # Java writes at once when its queue is full
            self.bridge.write_op(half.queue_id, self._drain(ctx, data))
            return
        ctx.pending.append(data)
        ctx.total += len(data)
        if ctx.total > settings.transaction_op_msg_max_size:
            self._wake_at(self._reactor_ms())
        else:
            self._wake_at(ctx.last_write + settings.transaction_op_batch_interval)

    def _drain(self, ctx: _OpContext, more: str = "") -> str:
        """Java ``getOpMessage``: ``more`` and pending offsets up to about the size limit."""
        max_size = self.broker.settings.broker.transaction_op_msg_max_size
        parts = [more] if more else []
        size = len(more)
        taken = 0
        while taken < len(ctx.pending) and size < max_size:
            parts.append(ctx.pending[taken])
            size += len(ctx.pending[taken])
            taken += 1
        drained = ctx.pending[:taken]
        del ctx.pending[:taken]
        ctx.total -= sum(len(p) for p in drained)
        ctx.last_write = self._reactor_ms()
        return "".join(parts)

    def _wake_at(self, when_ms: int) -> None:
        delay = max(0.0, (when_ms - self._reactor_ms()) / 1000.0)
        call = self._op_call
        if call is not None and call.active():
            if call.getTime() - self.broker.reactor.seconds() <= delay:
                return
            call.cancel()
        self._op_call = self.broker.reactor.callLater(delay, self.batch_send_op_messages)

    def batch_send_op_messages(self) -> None:
        """Java ``batchSendOpMessage``: one op message per half queue that is due."""
        self._op_call = None
        settings = self.broker.settings.broker
        now = self._reactor_ms()
        next_wake: int | None = None
        for queue_id, ctx in self._ops.items():
            if not ctx.pending:
                continue
            if ctx.total < settings.transaction_op_msg_max_size and \
                    now - ctx.last_write < settings.transaction_op_batch_interval:
                due = ctx.last_write + settings.transaction_op_batch_interval
                next_wake = due if next_wake is None else min(next_wake, due)
                continue
            body = self._drain(ctx)
            if body:
                self.bridge.write_op(queue_id, body)
            if ctx.pending:
                next_wake = now
        if next_wake is not None:
            self._wake_at(next_wake)

    def shutdown(self) -> None:
        """Stop a running check walk and write every pending op message now."""
        self.stopped = True
        self.flush_op_messages()

    def flush_op_messages(self) -> None:
        """Write every pending op message now."""
        call, self._op_call = self._op_call, None
        if call is not None and call.active():
            call.cancel()
        for queue_id, ctx in self._ops.items():
            while ctx.pending:
                self.bridge.write_op(queue_id, self._drain(ctx))

    @property
    def pending_op_offsets(self) -> int:
        return sum(len(ctx.pending) for ctx in self._ops.values())

    # ---- checking --------------------------------------------------------------------------------

    def check(self, transaction_timeout: int, check_max: int, listener: CheckListener) -> Deferred[None]:
        """One check round over every half queue; fires when done (never fails: errors are logged)."""
        d = ensureDeferred(self._check(transaction_timeout, check_max, listener))
        d.addErrback(lambda f: self.log.failure("Check error", f))
        return d

    async def _check(self, transaction_timeout: int, check_max: int, listener: CheckListener) -> None:
        queue_ids = self.bridge.half_queue_ids()
        if not queue_ids:
            self.log.warn("The queue of topic is empty :{t}", t=TRANS_HALF_TOPIC)
            return
        for queue_id in queue_ids:
            await self._check_queue(queue_id, transaction_timeout, check_max, listener)

    async def _check_queue(self, queue_id: int, timeout: int, check_max: int, listener: CheckListener) -> None:
        bridge = self.bridge
        start = self.now()
        half_offset = bridge.fetch_consume_offset(TRANS_HALF_TOPIC, queue_id)
        op_offset = bridge.fetch_consume_offset(TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            self.log.error("half queue {q}: illegal offset {h}, op offset {o}; skipped", q=queue_id,
                           h=half_offset, o=op_offset)
            return
        ops = _OpState()
        pull = self._fill_op_remove_map(ops, queue_id, op_offset, half_offset)
        if pull is None:
            self.log.error("half queue {q}: reading op messages at {o} failed", q=queue_id, o=op_offset)
            return
        null_count = 1
        new_offset = i = half_offset
        next_op_offset = pull.next_begin_offset
        put_in_queue = 0
        walked = 0
        while not self.stopped:
            if self.now() - start > MAX_PROCESS_TIME_LIMIT:
                self.log.info("half queue {q}: check time reached {ms} ms", q=queue_id, ms=MAX_PROCESS_TIME_LIMIT)
                break
            walked += 1
            if walked % _YIELD_EVERY == 0:
                await task.deferLater(self.broker.reactor, 0, lambda: None)
            removed_op = ops.remove_map.pop(i, None)
            if removed_op is not None:
                pending = ops.op_msg_map.get(removed_op)
                if pending is not None:
                    pending.discard(i)
                    if not pending:
                        del ops.op_msg_map[removed_op]
                        ops.done_op_offsets.append(removed_op)
            else:
                got = bridge.get_half_message(queue_id, i, 1)
                msg = got.messages[0] if got is not None and got.messages else None
                if msg is None:
                    null_count += 1
                    if null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                        break
                    if got is None or got.status is ReadStatus.NO_NEW_MSG:
                        break
                    self.log.info("half queue {q}: illegal offset {i}, continue at {n}", q=queue_id, i=i,
                                  n=got.next_begin_offset)
                    i = new_offset = got.next_begin_offset
                    continue
                if self._need_discard(msg, check_max) or self._need_skip(msg):
                    await listener.resolve_discard_msg(msg)
                    i += 1
                    new_offset = i
                    continue
                if msg.store_timestamp >= start:
                    break  # stored after this round began: next round
                age = self.now() - msg.born_timestamp
                immunity = timeout
                immunity_str = msg.properties.get(PropertyKey.CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity_str is not None:
                    immunity = check_immunity_time(immunity_str, timeout)
                    if age < immunity:
                        if await self._check_prepare_queue_offset(ops, msg):
                            i += 1
                            new_offset = i
                            continue
                elif 0 <= age < immunity:
                    break  # too young: neither this nor any later one is due
                op_msgs = pull.messages if pull is not None else None
                need_check = (op_msgs is None and age > immunity) or \
                    (op_msgs is not None and op_msgs[-1].born_timestamp - start > timeout) or age <= -1
                if need_check:
                    if not await self._put_back_half_msg_queue(msg):
                        # Java retries at once; a pause keeps a failing store from spinning the reactor
                        await task.deferLater(self.broker.reactor, 0.1, lambda: None)
                        continue
                    put_in_queue += 1
                    self.log.info("Check transaction. real_topic={t}, uniqKey={u}, offset={o}, commitLogOffset={c}",
                                  t=msg.properties.get(PropertyKey.REAL_TOPIC),
                                  u=msg.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                                  o=msg.queue_offset, c=msg.commit_log_offset)
                    listener.resolve_half_msg(msg)
                    self.checks_sent += 1
                else:
                    next_op_offset = pull.next_begin_offset if pull is not None else next_op_offset
                    pull = self._fill_op_remove_map(ops, queue_id, next_op_offset, half_offset)
                    if pull is None or pull.status is not ReadStatus.FOUND:
                        await task.deferLater(self.broker.reactor, SLEEP_WHILE_NO_OP, lambda: None)
                    continue
            i += 1
            new_offset = i
        if new_offset != half_offset:
            bridge.update_consume_offset(TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _calculate_op_offset(ops.done_op_offsets, op_offset)
        if new_op_offset != op_offset:
            bridge.update_consume_offset(TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)
        self.log.info("After check, half queue {q} msgOffset={h} opOffset={o} putInQueueCount={n}",
                      q=queue_id, h=new_offset, o=new_op_offset, n=put_in_queue)

    def _fill_op_remove_map(self, ops: _OpState, queue_id: int, op_offset: int, mini_offset: int) -> QueueRead | None:
        """Read op messages from ``op_offset``: each names resolved half offsets."""
        pull = self.bridge.get_op_message(queue_id, op_offset, OP_MSG_PULL_NUMS)
        if pull is None:
            return None
        if pull.status in (ReadStatus.OFFSET_ILLEGAL, ReadStatus.NO_MATCHED_MSG):
            self.log.warn("op queue {q}: offset {o} is illegal ({s})", q=queue_id, o=op_offset, s=pull.status.name)
            self.bridge.update_consume_offset(TRANS_OP_HALF_TOPIC, queue_id, pull.next_begin_offset)
            return pull
        if pull.messages is None:
            return pull
        for op in pull.messages:
            if op.body is None:
                ops.done_op_offsets.append(op.queue_offset)
                continue
            offsets: set[int] = set()
            if op.tags == REMOVE_TAG:
                for half in parse_op_body(op.body.decode("utf-8", "replace")):
                    if half < mini_offset:
                        continue
                    ops.remove_map[half] = op.queue_offset
                    offsets.add(half)
            else:
                self.log.error("illegal tag {t} in op message at {o}", t=op.tags, o=op.queue_offset)
            if offsets:
                ops.op_msg_map[op.queue_offset] = offsets
            else:
                ops.done_op_offsets.append(op.queue_offset)
        return pull

    async def _check_prepare_queue_offset(self, ops: _OpState, msg: MessageExt) -> bool:
        """An immune half message: True (skip it) when its first copy was resolved, else store it
        again with the first copy's offset (True when stored)."""
        prepared = msg.properties.get(PropertyKey.TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepared is None:
            return await self.bridge.put_ok(self.bridge.renew_immunity_half_message(msg))
        try:
            prepared_offset = int(prepared)
        except ValueError:
            prepared_offset = -1
        if prepared_offset == -1:
            return False
        op = ops.remove_map.pop(prepared_offset, None)
        if op is not None:
            ops.done_op_offsets.append(op)
            return True
        return await self.bridge.put_ok(self.bridge.renew_immunity_half_message(msg))

    async def _put_back_half_msg_queue(self, msg: MessageExt) -> bool:
        """Store the half message again; ``msg`` then names the new copy (its offsets and id)."""
        result = await self.bridge.put(self.bridge.renew_half_message(msg))
        append = result.append_result
        if not result.is_ok or append is None:
            self.log.error("re-storing half message {u} failed: {s}", s=result.status.name,
                           u=msg.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
            return False
        msg.queue_offset = append.logics_offset
        msg.commit_log_offset = append.wrote_offset
        msg.store_host = append.store_host
        return True

    def _need_discard(self, msg: MessageExt, check_max: int) -> bool:
        """Java ``needDiscard``: checked ``check_max`` times already; otherwise counts this check."""
        times = msg.properties.get(PropertyKey.TRANSACTION_CHECK_TIMES)
        check_time = 1
        if times is not None:
            try:
                check_time = int(times)
            except ValueError:
                check_time = -1
            if check_time >= check_max:
                return True
            check_time += 1
        msg.properties[PropertyKey.TRANSACTION_CHECK_TIMES] = str(check_time)
        return False

    def _need_skip(self, msg: MessageExt) -> bool:
        """Java ``needSkip``: older than the commit log's retention."""
        reserved = self.broker.settings.store.file_reserved_time * 3600 * 1000
        return self.now() - msg.born_timestamp > reserved


def _calculate_op_offset(done: list[int], old_offset: int) -> int:
    """The op queue's offset moves over the consecutive op messages fully used."""
    new_offset = old_offset
    for offset in sorted(done):
        if offset != new_offset:
            break
        new_offset += 1
    return new_offset
