"""Rebalance: which queues this consumer works on, and the process queues that go with them
(Java ``RebalanceImpl`` and ``RebalanceService``).

``RebalanceImpl.do_rebalance`` goes topic by topic through the subscriptions:

- BROADCASTING: every readable queue of the topic;
- CLUSTERING: GET_CONSUMER_LIST_BY_GROUP from a broker of the topic, then the allocation
  strategy over the queues sorted as ``MessageQueue.compareTo`` and the client ids sorted as
  ``String.compareTo``; a retry topic that has no route yet is skipped quietly.

Queues no longer assigned (or not pulled for 120 s, push only) are dropped and removed once
``remove_unnecessary_message_queue`` agrees (an orderly queue waits until its listener is idle);
new queues are locked first when consuming orderly, get their start offset from
``compute_pull_from_where`` and a pull request. Process queues of topics no longer subscribed are
dropped. The result says whether the assignment is stable ("balanced"); the service then waits
20 s before the next round, else 1 s.

Everything here runs in the reactor thread; broker calls are Deferreds, so a round of rebalance
is itself a Deferred and the service never runs two rounds at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.consumer.allocate import AllocateMessageQueueStrategy
from rmqwire.client.consumer.mq_admin import find_broker_in_subscribe
from rmqwire.client.consumer.process_queue import ProcessQueue
from rmqwire.client.consumer.subscription import is_retry_topic
from rmqwire.client.instance import ClientInstance
from rmqwire.client.route import MASTER_ID
from rmqwire.codec.commands.consumer import (
    GetConsumerListByGroup,
    LockBatchMq,
    LockBatchRequestBody,
    UnlockBatchMq,
    UnlockBatchRequestBody,
)
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.java import java_string_sort_key
from rmqwire.model import ConsumeType, MessageModel, MessageQueue

__all__ = [
    "LOCK_TIMEOUT",
    "MIN_INTERVAL",
    "WAIT_INTERVAL",
    "PullRequest",
    "RebalanceImpl",
    "RebalanceService",
]

#: Java ``rocketmq.client.rebalance.waitInterval`` / ``minInterval`` (ms).
WAIT_INTERVAL = 20_000
MIN_INTERVAL = 1_000
#: Java's timeout of LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (s).
LOCK_TIMEOUT = 1.0


@dataclasses.dataclass(eq=False, slots=True)
class PullRequest:
    """Java ``PullRequest``: where the pull loop of one queue stands."""

    consumer_group: str
    message_queue: MessageQueue
    process_queue: ProcessQueue
    next_offset: int
    previously_locked: bool = False


@dataclasses.dataclass(slots=True)
class _TableUpdate:
    changed: bool = False
    all_locked: bool = True
    requests: list[PullRequest] = dataclasses.field(default_factory=list)


class RebalanceImpl:
    """Per consumer: the subscriptions, the topics' queues, and the process queue table.

    Subclasses (push, lite pull) say how a queue is added and removed.
    """

    log = Logger()

    def __init__(
        self,
        consumer_group: str,
        message_model: MessageModel,
        strategy: AllocateMessageQueueStrategy,
        instance: ClientInstance,
        now_ms: Callable[[], int],
    ) -> None:
        self.consumer_group = consumer_group
        self.message_model = message_model
        self.strategy = strategy
        self.instance = instance
        self.now_ms = now_ms
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.subscription_inner: dict[str, SubscriptionData] = {}

    # ---- what subclasses say ----------------------------------------------------------------

    def consume_type(self) -> ConsumeType:
        raise NotImplementedError

    def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        raise NotImplementedError

    def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> Deferred[bool]:
        raise NotImplementedError

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        raise NotImplementedError

    def compute_pull_from_where(self, mq: MessageQueue) -> Deferred[int]:
        """The offset a newly assigned queue starts from (fails when it cannot be known)."""
        raise NotImplementedError

    def dispatch_pull_requests(self, requests: list[PullRequest], delay_ms: int) -> None:
        raise NotImplementedError

    def create_process_queue(self) -> ProcessQueue:
        return ProcessQueue(self.now_ms)

    def rebalance_later(self, delay_ms: int) -> None:
        """Ask for another round soon (set by the owner to its RebalanceService)."""

    # ---- queue locks (orderly) --------------------------------------------------------------

    def _lock_body(self, mqs: Iterable[MessageQueue]) -> LockBatchRequestBody:
        return LockBatchRequestBody(consumer_group=self.consumer_group,
                                    client_id=self.instance.client_id, mq_set=list(mqs))

    def lock(self, mq: MessageQueue) -> Deferred[bool]:
        """LOCK_BATCH_MQ for one queue at its master; True when the broker granted it."""
        d = find_broker_in_subscribe(self.instance, mq, MASTER_ID, only_this_broker=True)

        def call(found: Any) -> Any:
            if found is None:
                return False
            return self.instance.broker_call(found.broker_addr, LockBatchMq, body=self._lock_body([mq]),
                                             timeout=LOCK_TIMEOUT).addCallback(got)

        def got(response: Any) -> bool:
            locked = set((response.body.lock_ok_mq_set if response.body else None) or ())
            now = self.now_ms()
            for m in locked:
                pq = self.process_queue_table.get(m)
                if pq is not None:
                    pq.locked = True
                    pq.last_lock_timestamp = now
            ok = mq in locked
            self.log.info("message queue lock {result}, {group} {mq}",
                          result="OK" if ok else "Failed", group=self.consumer_group, mq=mq)
            return ok

        def failed(f: Failure) -> bool:
            self.log.error("lockBatchMQ exception, {mq}: {why}", mq=mq, why=f.getErrorMessage())
            return False

        return d.addCallback(call).addErrback(failed)

    def _by_broker(self) -> dict[str, set[MessageQueue]]:
        out: dict[str, set[MessageQueue]] = {}
        for mq, pq in self.process_queue_table.items():
            if not pq.dropped:
                out.setdefault(mq.broker_name, set()).add(mq)
        return out

    def lock_all(self) -> Deferred[None]:
        """Relock every held queue, broker by broker; a queue the broker refuses is unlocked."""
        calls = []
        for name, mqs in self._by_broker().items():
            if mqs:
                calls.append(self._lock_broker(name, mqs))
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def _lock_broker(self, name: str, mqs: set[MessageQueue]) -> Deferred[None]:
        probe = next(iter(mqs))
        d = find_broker_in_subscribe(self.instance, probe, MASTER_ID, only_this_broker=True)

        def call(found: Any) -> Any:
            if found is None:
                return None
            return self.instance.broker_call(found.broker_addr, LockBatchMq, body=self._lock_body(sorted(mqs)),
                                             timeout=LOCK_TIMEOUT).addCallback(got)

        def got(response: Any) -> None:
            ok = set((response.body.lock_ok_mq_set if response.body else None) or ())
            now = self.now_ms()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in ok:
                    if not pq.locked:
                        self.log.info("the message queue locked OK, Group: {group} {mq}",
                                      group=self.consumer_group, mq=mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False
                    self.log.warn("the message queue locked Failed, Group: {group} {mq}",
                                  group=self.consumer_group, mq=mq)

        def failed(f: Failure) -> None:
            self.log.error("lockBatchMQ exception, {mqs}: {why}", mqs=mqs, why=f.getErrorMessage())

        return d.addCallback(call).addErrback(failed)

    def unlock(self, mq: MessageQueue, oneway: bool) -> Deferred[None]:
        return self._unlock(mq.broker_name, {mq}, oneway, mark=False)

    def unlock_all(self, oneway: bool) -> Deferred[None]:
        calls = [self._unlock(name, mqs, oneway, mark=True) for name, mqs in self._by_broker().items() if mqs]
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def _unlock(self, name: str, mqs: set[MessageQueue], oneway: bool, *, mark: bool) -> Deferred[None]:
        probe = next(iter(mqs))
        d = find_broker_in_subscribe(self.instance, probe, MASTER_ID, only_this_broker=True)
        body = UnlockBatchRequestBody(consumer_group=self.consumer_group,
                                      client_id=self.instance.client_id, mq_set=sorted(mqs))

        def call(found: Any) -> Any:
            if found is None:
                return None
            if oneway:
                sent = self.instance.broker_oneway(found.broker_addr, UnlockBatchMq, body=body)
            else:
                sent = self.instance.broker_call(found.broker_addr, UnlockBatchMq, body=body,
                                                 timeout=LOCK_TIMEOUT)
            return sent.addCallback(done)

        def done(_: Any) -> None:
            self.log.warn("unlock messageQueue. group:{group}, clientId:{cid}, mq:{mqs}",
                          group=self.consumer_group, cid=self.instance.client_id, mqs=sorted(mqs))
            if mark:
                for mq in mqs:
                    pq = self.process_queue_table.get(mq)
                    if pq is not None:
                        pq.locked = False

        def failed(f: Failure) -> None:
            self.log.error("unlockBatchMQ exception, {mqs}: {why}", mqs=mqs, why=f.getErrorMessage())

        return d.addCallback(call).addErrback(failed)

    # ---- a round of rebalance ---------------------------------------------------------------

    def do_rebalance(self, is_order: bool) -> Deferred[bool]:
        """One round over every subscribed topic; fires with True when balanced."""
        balanced = True

        def one(topic: str) -> Deferred[None]:
            def done(ok: bool) -> None:
                nonlocal balanced
                if not ok:
                    balanced = False

            def failed(f: Failure) -> None:
                nonlocal balanced
                if not is_retry_topic(topic):
                    self.log.warn("rebalance Exception: {why}", why=f.getErrorMessage())
                    balanced = False

            return defer.maybeDeferred(self._rebalance_by_topic, topic, is_order).addCallbacks(done, failed)

        d: Deferred[Any] = defer.succeed(None)
        for topic in list(self.subscription_inner):
            d.addCallback(lambda _, t=topic: one(t))

        def finish(_: Any) -> bool:
            self.truncate_message_queue_not_my_topic()
            return balanced

        return d.addCallback(finish)

    def _rebalance_by_topic(self, topic: str, is_order: bool) -> Deferred[bool]:
        mq_set = self.topic_subscribe_info_table.get(topic)
        if self.message_model is MessageModel.BROADCASTING:
            if mq_set is None:
                self.message_queue_changed(topic, set(), set())
                self.log.warn("doRebalance, {group}, but the topic[{topic}] not exist.",
                              group=self.consumer_group, topic=topic)
                return defer.succeed(True)

            def broadcast_done(changed: bool) -> bool:
                if changed:
                    self.message_queue_changed(topic, mq_set, mq_set)
                    self.log.info("messageQueueChanged {group} {topic} {mqs}", group=self.consumer_group,
                                  topic=topic, mqs=mq_set)
                return mq_set == self._working_message_queues(topic)

            return self._update_process_queue_table(topic, set(mq_set), False).addCallback(broadcast_done)

        if mq_set is None and not is_retry_topic(topic):
            self.message_queue_changed(topic, set(), set())
            self.log.warn("doRebalance, {group}, but the topic[{topic}] not exist.",
                          group=self.consumer_group, topic=topic)
        return self.find_consumer_id_list(topic).addCallback(self._allocate, topic, mq_set, is_order)

    def _allocate(self, cid_all: list[str] | None, topic: str, mq_set: set[MessageQueue] | None,
                  is_order: bool) -> Deferred[bool] | bool:
        if cid_all is None:
            self.log.warn("doRebalance, {group} {topic}, get consumer id list failed",
                          group=self.consumer_group, topic=topic)
        if mq_set is None or cid_all is None:
            return True
        mq_all = sorted(mq_set)
        cids = sorted(cid_all, key=java_string_sort_key)
        try:
            result = self.strategy.allocate(self.consumer_group, self.instance.client_id, mq_all, cids)
        except Exception as e:
            self.log.error("allocate message queue exception. strategy name: {name}, ex: {e}",
                           name=getattr(self.strategy, "name", self.strategy), e=e)
            return False
        allocated = set(result or ())

        def done(changed: bool) -> bool:
            if changed:
                self.log.info(
                    "client rebalanced result changed. allocateMessageQueueStrategyName={name}, "
                    "group={group}, topic={topic}, clientId={cid}, mqAllSize={n_mq}, cidAllSize={n_cid}, "
                    "rebalanceResultSize={n}, rebalanceResultSet={mqs}",
                    name=self.strategy.name, group=self.consumer_group, topic=topic,
                    cid=self.instance.client_id, n_mq=len(mq_set), n_cid=len(cids), n=len(allocated),
                    mqs=sorted(allocated))
                self.message_queue_changed(topic, mq_set, allocated)
            return allocated == self._working_message_queues(topic)

        return self._update_process_queue_table(topic, allocated, is_order).addCallback(done)

    def find_consumer_id_list(self, topic: str) -> Deferred[list[str] | None]:
        """GET_CONSUMER_LIST_BY_GROUP at a random broker of the topic (None on failure)."""
        addr = self.instance.routes.find_broker_addr_by_topic(topic, self.instance.rng)
        if addr is not None:
            ready: Deferred[str | None] = defer.succeed(addr)
        else:
            ready = self.instance.update_topic_route(topic).addErrback(lambda _f: False).addCallback(
                lambda _: self.instance.routes.find_broker_addr_by_topic(topic, self.instance.rng))

        def call(found: str | None) -> Any:
            if found is None:
                return None
            d = self.instance.broker_call(found, GetConsumerListByGroup,
                                          GetConsumerListByGroup.header(consumer_group=self.consumer_group),
                                          timeout=self.instance.api_timeout)

            def failed(f: Failure) -> None:
                self.log.warn("getConsumerIdListByGroup exception, {addr} {group}: {why}",
                              addr=found, group=self.consumer_group, why=f.getErrorMessage())

            return d.addCallbacks(lambda r: list((r.body.consumer_id_list if r.body else None) or []),
                                  failed)

        return ready.addCallback(call)

    def _working_message_queues(self, topic: str) -> set[MessageQueue]:
        return {mq for mq, pq in self.process_queue_table.items() if mq.topic == topic and not pq.dropped}

    def truncate_message_queue_not_my_topic(self) -> None:
        for mq in list(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                self.log.info("doRebalance, {group}, truncateMessageQueueNotMyTopic remove unnecessary mq, {mq}",
                              group=self.consumer_group, mq=mq)

    def _update_process_queue_table(self, topic: str, mq_set: set[MessageQueue], need_lock: bool) -> Deferred[bool]:
        """Java ``updateProcessQueueTableInRebalance``; fires with True when the table changed."""
        state = _TableUpdate()
        removals: list[tuple[MessageQueue, ProcessQueue]] = []
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                removals.append((mq, pq))
            elif pq.is_pull_expired() and self.consume_type() is ConsumeType.CONSUME_PASSIVELY:
                pq.dropped = True
                removals.append((mq, pq))
                self.log.error("[BUG]doRebalance, {group}, try remove unnecessary mq, {mq}, because "
                               "pull is pause, so try to fixed it", group=self.consumer_group, mq=mq)
        d: Deferred[Any] = defer.succeed(None)
        for mq, pq in removals:
            d.addCallback(lambda _, mq=mq, pq=pq: self._remove(mq, pq, state))
        for mq in sorted(mq_set):
            d.addCallback(lambda _, mq=mq: self._add(mq, need_lock, state))

        def finish(_: Any) -> bool:
            if not state.all_locked:
                self.rebalance_later(500)
            self.dispatch_pull_requests(state.requests, 500)
            return state.changed

        return d.addCallback(finish)

    def _remove(self, mq: MessageQueue, pq: ProcessQueue, state: _TableUpdate) -> Deferred[None]:
        def removed(ok: bool) -> None:
            if ok and self.process_queue_table.get(mq) is pq:
                del self.process_queue_table[mq]
                state.changed = True
                self.log.info("doRebalance, {group}, remove unnecessary mq, {mq}",
                              group=self.consumer_group, mq=mq)

        def failed(f: Failure) -> None:
            self.log.warn("remove unnecessary mq {mq} failed: {why}", mq=mq, why=f.getErrorMessage())

        return defer.maybeDeferred(self.remove_unnecessary_message_queue, mq, pq).addCallbacks(removed, failed)

    def _add(self, mq: MessageQueue, need_lock: bool, state: _TableUpdate) -> Deferred[None] | None:
        if mq in self.process_queue_table:
            return None
        if not need_lock:
            return self._start_queue(mq, state)

        def locked(ok: bool) -> Deferred[None] | None:
            if not ok:
                self.log.warn("doRebalance, {group}, add a new mq failed, {mq}, because lock failed",
                              group=self.consumer_group, mq=mq)
                state.all_locked = False
                return None
            return self._start_queue(mq, state)

        return self.lock(mq).addCallback(locked)

    def _start_queue(self, mq: MessageQueue, state: _TableUpdate) -> Deferred[None]:
        self.remove_dirty_offset(mq)
        pq = self.create_process_queue()
        pq.locked = True

        def computed(offset: int) -> None:
            if offset < 0:
                self.log.warn("doRebalance, {group}, add new mq failed, {mq}", group=self.consumer_group, mq=mq)
                return
            if mq in self.process_queue_table:
                self.log.info("doRebalance, {group}, mq already exists, {mq}", group=self.consumer_group, mq=mq)
                return
            self.process_queue_table[mq] = pq
            self.log.info("doRebalance, {group}, add a new mq, {mq}", group=self.consumer_group, mq=mq)
            state.requests.append(PullRequest(self.consumer_group, mq, pq, offset))
            state.changed = True

        def failed(f: Failure) -> None:
            self.log.info("doRebalance, {group}, compute offset failed, {mq}: {why}",
                          group=self.consumer_group, mq=mq, why=f.getErrorMessage())

        return defer.maybeDeferred(self.compute_pull_from_where, mq).addCallbacks(computed, failed)

    def remove_process_queue(self, mq: MessageQueue) -> Deferred[Any]:
        """Drop one queue now (after PULL_OFFSET_MOVED); the next round re-creates it."""
        pq = self.process_queue_table.pop(mq, None)
        if pq is None:
            return defer.succeed(None)
        was = pq.dropped
        pq.dropped = True
        self.log.info("Fix Offset, {group}, remove unnecessary mq, {mq} Droped: {was}",
                      group=self.consumer_group, mq=mq, was=was)
        return defer.maybeDeferred(self.remove_unnecessary_message_queue, mq, pq)

    def destroy(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()


class RebalanceService:
    """Runs a consumer's rebalance every 20 s (1 s after an unbalanced round), and at once when
    woken up (NOTIFY_CONSUMER_IDS_CHANGED, a new broker connection, start). One round at a time;
    a wakeup during a round runs another right after it (Java ``RebalanceService``)."""

    log = Logger()

    def __init__(self, reactor: Any, rebalance: Callable[[], Deferred[bool]],
                 wait_interval_ms: int = WAIT_INTERVAL, min_interval_ms: int = MIN_INTERVAL) -> None:
        self.reactor = reactor
        self._rebalance = rebalance
        self.wait_interval = wait_interval_ms / 1000
        self.min_interval = min_interval_ms / 1000
        self._call: Any = None
        self._running: Deferred[Any] | None = None
        self._again = False
        self._stopped = True
        self._last = reactor.seconds()
        self.rounds = 0

    def start(self) -> None:
        if not self._stopped:
            return
        self._stopped = False
        self._last = self.reactor.seconds()
        self._schedule(self.wait_interval)

    def stop(self) -> Deferred[None]:
        """Stop the timer; fires once a round in progress ended."""
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._running is None:
            return defer.succeed(None)
        d: Deferred[None] = Deferred()
        self._running.addBoth(lambda r: (d.callback(None), r)[1])
        return d

    def wakeup(self, delay_ms: int = 0) -> None:
        if self._stopped:
            return
        if self._running is not None:
            self._again = True
            return
        self._schedule(max(delay_ms / 1000, 0.0), only_if_sooner=True)

    def _schedule(self, seconds: float, *, only_if_sooner: bool = False) -> None:
        if self._call is not None and self._call.active():
            if only_if_sooner and self._call.getTime() <= self.reactor.seconds() + seconds:
                return
            self._call.cancel()
        self._call = self.reactor.callLater(seconds, self._run)

    def _run(self) -> None:
        self._call = None
        if self._stopped:
            return
        since = self.reactor.seconds() - self._last
        if since < self.min_interval:
            self._schedule(self.min_interval - since)
            return
        self._again = False
        self.rounds += 1
        d = defer.maybeDeferred(self._rebalance)
        self._running = d

        def done(balanced: Any) -> None:
            self._running = None
            self._last = self.reactor.seconds()
            if self._stopped:
                return
            if isinstance(balanced, Failure):
                self.log.failure("rebalance failed", balanced)
                balanced = False
            if self._again:
                self._schedule(self.min_interval)
            else:
                self._schedule(self.wait_interval if balanced else self.min_interval)

        d.addBoth(done)

