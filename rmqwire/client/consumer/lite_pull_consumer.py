"""The Twisted lite pull consumer core (Java ``DefaultLitePullConsumer`` +
``DefaultLitePullConsumerImpl`` + ``RebalanceLitePullImpl`` + ``AssignedMessageQueue``).

Either ``subscribe`` (the group rebalances queues among its consumers, as a push consumer's) or
``assign`` (this consumer reads the given queues, no group membership); the two do not mix. One
pull task per assigned queue long-polls its broker with LITE_PULL_MESSAGE (SUBSCRIPTION bit set,
so the broker filters by the expression in the request; suspend 20 s, RPC timeout 30 s) and puts
found messages into the process queue and the consume request cache, backing off as Java does
(50 ms over the cache thresholds, 1 s while paused, 20 ms after FLOW_CONTROL,
``pull_time_delay_mills_when_exception`` after other errors, 3 s when no start offset can be
found). ``poll(timeout)`` hands out one cached batch and moves that queue's consume offset past
it; with ``auto_commit`` the consume offsets go to the offset store every
``auto_commit_interval_millis`` (looked at in ``poll``), and the store persists them every
``persist_consumer_offset_interval`` and at shutdown. ``seek`` drops what is cached for the queue
and restarts its pull task from the offset.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import queue
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.config import ClientConfig, with_namespace, without_namespace
from rmqwire.client.consumer import mq_admin
from rmqwire.client.consumer.allocate import AllocateMessageQueueStrategy, strategy_of
from rmqwire.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from rmqwire.client.consumer.process_queue import ProcessQueue
from rmqwire.client.consumer.processor import (
    ConsumerClientProcessor,
    check_client_in_broker,
    running_info_properties,
)
from rmqwire.client.consumer.pull import PullAPIWrapper, PullResult, PullStatus
from rmqwire.client.consumer.push_consumer import (
    DEFAULT_CONSUMER_GROUP,
    ServiceState,
    _default_consume_timestamp,
    _enum,
    file_store_client_id,
    parse_consume_timestamp,
    split_options,
)
from rmqwire.client.consumer.rebalance import (
    PullRequest,
    RebalanceImpl,
    RebalanceService,
)
from rmqwire.client.consumer.subscription import (
    SUB_ALL,
    MessageSelector,
    is_retry_topic,
    subscription_for,
)
from rmqwire.client.instance import ClientInstance, ClientManager, suggest_todo
from rmqwire.client.metrics import metrics_for
from rmqwire.client.validators import check_group
from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.consumer import ConsumerRunningInfo
from rmqwire.codec.commands.heartbeat import ConsumerData, SubscriptionData
from rmqwire.codec.commands.pull import PullSysFlag
from rmqwire.codec.message import MessageExt
from rmqwire.errors import FlowControlError, MQClientError
from rmqwire.model import (
    ConsumeFromWhere,
    ConsumeType,
    ExpressionType,
    MessageModel,
    MessageQueue,
)

__all__ = ["LitePullConsumer", "LitePullConsumerConfig", "split_lite_options"]

PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MILLS_WHEN_PAUSE = 1000
PULL_TIME_DELAY_MILLS_ON_EXCEPTION = 3000
NOT_RUNNING = "The consumer not running, please start it first."
SUBSCRIPTION_CONFLICT = "Subscribe and assign are mutually exclusive."


class SubscriptionType(enum.Enum):
    NONE = "NONE"
    SUBSCRIBE = "SUBSCRIBE"
    ASSIGN = "ASSIGN"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LitePullConsumerConfig:
    """Java ``DefaultLitePullConsumer`` options in snake_case with Java's defaults (ms)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str | int | datetime.datetime = dataclasses.field(default_factory=_default_consume_timestamp)
    allocate_strategy: Any = None
    auto_commit: bool = True
    auto_commit_interval_millis: int = 5000
    pull_batch_size: int = 10
    pull_threshold_for_all: int = 10000
    consume_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    #: MiB
    pull_threshold_size_for_queue: int = 100
    poll_timeout_millis: int = 5000
    topic_metadata_check_interval_millis: int = 30_000
    broker_suspend_max_time_millis: int = 20_000
    consumer_timeout_millis_when_suspend: int = 30_000
    consumer_pull_timeout_millis: int = 10_000
    #: Java's pull thread count; pulls here are asynchronous (kept for configuration parity)
    pull_thread_nums: int = 20

    def __post_init__(self) -> None:
        object.__setattr__(self, "message_model", _enum(MessageModel, self.message_model))
        object.__setattr__(self, "consume_from_where", _enum(ConsumeFromWhere, self.consume_from_where))
        if self.auto_commit_interval_millis < 1000:
            object.__setattr__(self, "auto_commit_interval_millis", 1000)  # Java's minimum


_LITE_FIELDS = frozenset(f.name for f in dataclasses.fields(LitePullConsumerConfig))


def split_lite_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return split_options(options, _LITE_FIELDS, "pull consumer")


@dataclasses.dataclass(eq=False, slots=True)
class _QueueState:
    """Java ``AssignedMessageQueue.MessageQueueState``."""

    process_queue: ProcessQueue
    paused: bool = False
    pull_offset: int = -1
    consume_offset: int = -1
    seek_offset: int = -1


@dataclasses.dataclass(eq=False, slots=True)
class _PullTask:
    mq: MessageQueue
    cancelled: bool = False
    call: Any = None
    pull: Deferred[Any] | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self.call is not None and self.call.active():
            self.call.cancel()
        if self.pull is not None:
            self.pull.cancel()


@dataclasses.dataclass(eq=False, slots=True)
class _ConsumeRequest:
    msgs: list[MessageExt]
    mq: MessageQueue
    process_queue: ProcessQueue
    #: set by seek: the batch is from before the seek (a sink reader skips it)
    cancelled: bool = False

    @property
    def stale(self) -> bool:
        return self.cancelled or self.process_queue.dropped


class RebalanceLitePullImpl(RebalanceImpl):
    def __init__(self, consumer: LitePullConsumer, strategy: AllocateMessageQueueStrategy,
                 instance: ClientInstance) -> None:
        super().__init__(consumer.group, consumer.config.message_model, strategy, instance, consumer.now_ms)
        self.consumer = consumer

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    def rebalance_later(self, delay_ms: int) -> None:
        self.consumer.rebalance_service.wakeup(delay_ms)

    def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        c = self.consumer
        if c.metrics is not None:
            c.metrics.on_rebalance(topic, c.group, self.instance.client_id)
        try:
            c.update_assign_queue_and_start_pull_task(topic, mq_all, mq_divided)
        except Exception:
            self.log.failure("messageQueueChanged exception")

    def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> Deferred[bool]:
        self.consumer.offset_store.persist(mq)
        self.consumer.offset_store.remove_offset(mq)
        self.consumer.pull_api.forget(mq)
        return defer.succeed(True)

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.consumer.offset_store.remove_offset(mq)

    def compute_pull_from_where(self, mq: MessageQueue) -> Deferred[int]:
        return self.consumer.compute_pull_from_where(mq)

    def dispatch_pull_requests(self, requests: list[PullRequest], delay_ms: int) -> None:
        pass  # the pull tasks start from message_queue_changed


class LitePullConsumer:
    log = Logger()

    def __init__(
        self,
        reactor: Any,
        group: str,
        *,
        namesrv_addr: str | Sequence[str] | None = None,
        client_config: ClientConfig | None = None,
        config: LitePullConsumerConfig | None = None,
        manager: ClientManager | None = None,
        **options: Any,
    ) -> None:
        client_opts, consumer_opts = split_lite_options(options)
        if namesrv_addr is not None:
            client_opts["namesrv_addr"] = namesrv_addr
        cc = client_config or ClientConfig()
        self.client_config = cc.replace(**client_opts) if client_opts else cc
        lc = config or LitePullConsumerConfig()
        self.config = dataclasses.replace(lc, **consumer_opts) if consumer_opts else lc
        self.reactor = reactor
        self.namespace = self.client_config.namespace
        self.group = with_namespace(self.namespace, group)
        self.manager = manager if manager is not None else ClientManager(reactor)
        self.message_model: MessageModel = self.config.message_model
        self.strategy = strategy_of(self.config.allocate_strategy)
        self.state = ServiceState.CREATE_JUST
        self.subscription_type = SubscriptionType.NONE
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.topic_to_sub_expression: dict[str, str] = {}
        self.assigned: dict[MessageQueue, _QueueState] = {}
        self.tasks: dict[MessageQueue, _PullTask] = {}
        self.consume_request_cache: deque[_ConsumeRequest] = deque()
        self._poll_waiters: deque[Deferred[_ConsumeRequest | None]] = deque()
        #: set by ``deliver_to``: batches go to this thread-safe queue instead of the cache
        self.sink: queue.SimpleQueue[_ConsumeRequest | None] | None = None
        self._in_sink: dict[MessageQueue, list[_ConsumeRequest]] = {}
        self._sink_count = 0
        self.instance: ClientInstance | None = None
        self.rebalance: RebalanceImpl | None = None
        self.rebalance_service = RebalanceService(reactor, self._do_rebalance)
        self.offset_store: OffsetStore = None  # type: ignore[assignment]
        self.pull_api: PullAPIWrapper = None  # type: ignore[assignment]
        self.next_auto_commit_deadline = -1
        self.start_timestamp = self.now_ms()
        self._timers: set[Any] = set()
        self._persist_call: Any = None
        self.flow_control_times = 0
        self.metrics = metrics_for(self.client_config.metrics)
        if self.metrics is not None:
            self.metrics.watch_consumer(self)

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def _check_running(self) -> None:
        if self.state is not ServiceState.RUNNING:
            raise MQClientError(NOT_RUNNING)

    def _set_subscription_type(self, kind: SubscriptionType) -> None:
        if self.subscription_type is SubscriptionType.NONE:
            self.subscription_type = kind
        elif self.subscription_type is not kind:
            raise MQClientError(SUBSCRIPTION_CONFLICT)

    # ---- subscribe / assign -----------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = SUB_ALL) -> None:
        if not topic:
            raise ValueError("Topic can not be null or empty.")
        self._set_subscription_type(SubscriptionType.SUBSCRIBE)
        topic = with_namespace(self.namespace, topic)
        sd = subscription_for(topic, expression)
        self.subscription_inner[topic] = sd
        if self.rebalance is not None:
            self.rebalance.subscription_inner[topic] = sd
        if self.state is ServiceState.RUNNING and self.instance is not None:
            self.instance.send_heartbeat_to_all_brokers()
            self.instance.update_topic_route(topic).addErrback(lambda _f: None)

    def unsubscribe(self, topic: str) -> None:
        topic = with_namespace(self.namespace, topic)
        self.subscription_inner.pop(topic, None)
        if self.rebalance is not None:
            self.rebalance.subscription_inner.pop(topic, None)
        for mq in [m for m in self.tasks if m.topic == topic]:
            self.tasks.pop(mq).cancel()
        for mq in [m for m in self.assigned if m.topic == topic]:
            del self.assigned[mq]

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        mqs = [MessageQueue(with_namespace(self.namespace, m.topic), m.broker_name, m.queue_id) for m in mqs]
        if not mqs:
            raise ValueError("Message queues can not be null or empty.")
        self._set_subscription_type(SubscriptionType.ASSIGN)
        self._update_assigned(mqs, None)
        if self.state is ServiceState.RUNNING:
            self._update_assign_pull_task(mqs)

    def set_sub_expression_for_assign(self, topic: str, expression: str) -> None:
        if not expression or not expression.strip():
            raise ValueError("subExpression can not be null or empty.")
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError("setAssignTag only can be called before start.")
        self._set_subscription_type(SubscriptionType.ASSIGN)
        self.topic_to_sub_expression[with_namespace(self.namespace, topic)] = expression

    def assignment(self) -> set[MessageQueue]:
        return set(self.assigned)

    def _update_assigned(self, mqs: Iterable[MessageQueue], topic: str | None) -> None:
        mqs = set(mqs)
        for mq in list(self.assigned):
            if (topic is None or mq.topic == topic) and mq not in mqs:
                self.assigned.pop(mq).process_queue.dropped = True
        for mq in mqs:
            if mq not in self.assigned:
                pq = self.rebalance.process_queue_table.get(mq) if self.rebalance is not None else None
                self.assigned[mq] = _QueueState(pq if pq is not None else ProcessQueue(self.now_ms))

    def update_assign_queue_and_start_pull_task(self, topic: str, mq_all: set[MessageQueue],
                                                mq_divided: set[MessageQueue]) -> None:
        mqs = mq_all if self.message_model is MessageModel.BROADCASTING else mq_divided
        self._update_assigned(mqs, topic)
        for mq in [m for m in self.tasks if m.topic == topic and m not in mqs]:
            self.tasks.pop(mq).cancel()
        self._start_pull_tasks(mqs)

    def _update_assign_pull_task(self, mqs: Iterable[MessageQueue]) -> None:
        mqs = set(mqs)
        for mq in [m for m in self.tasks if m not in mqs]:
            self.tasks.pop(mq).cancel()
        self._start_pull_tasks(mqs)

    def _start_pull_tasks(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in sorted(mqs):
            if mq not in self.tasks:
                task = self.tasks[mq] = _PullTask(mq)
                self._schedule(task, 0)

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> Deferred[None]:
        if self.state is not ServiceState.CREATE_JUST:
            return defer.fail(MQClientError(
                f"The PullConsumer service state not OK, maybe started once, {self.state.value}" + suggest_todo()))
        self.state = ServiceState.START_FAILED
        try:
            check_group(self.group)
            if self.group == DEFAULT_CONSUMER_GROUP:
                raise MQClientError(f"consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify "
                                    "another one." + suggest_todo())
            if self.config.consumer_timeout_millis_when_suspend < self.config.broker_suspend_max_time_millis:
                raise MQClientError("Long polling mode, the consumer consumerTimeoutMillisWhenSuspend must "
                                    "greater than brokerSuspendMaxTimeMillis" + suggest_todo())
            parse_consume_timestamp(self.config.consume_timestamp)
            file_cid = file_store_client_id(self.client_config)
            cc = self.client_config = self.client_config.resolved()
            instance = self.manager.instance_for(cc)
            if not instance.register_consumer(self.group, self):
                self.state = ServiceState.CREATE_JUST
                raise MQClientError(f"The consumer group[{self.group}] has been created before, specify "
                                    "another name please." + suggest_todo())
        except Exception as e:
            return defer.fail(e)
        self.instance = instance
        self.rebalance = RebalanceLitePullImpl(self, self.strategy, instance)
        self.rebalance.subscription_inner.update(self.subscription_inner)
        self.subscription_inner = self.rebalance.subscription_inner
        self.pull_api = PullAPIWrapper(instance, self.group, cc.unit_mode)
        if self.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(file_cid, self.group)
        else:
            self.offset_store = RemoteBrokerOffsetStore(instance, self.group)
        self.offset_store.load()
        instance.add_processor(ConsumerClientProcessor(instance))
        instance.channel_active_listeners.append(self._channel_active)
        instance.startService()
        self.rebalance_service.start()
        self._persist_call = self.reactor.callLater(10.0, self._persist_tick)
        self.state = ServiceState.RUNNING
        d: Deferred[Any] = defer.succeed(None)
        if self.subscription_type is SubscriptionType.SUBSCRIBE:
            d.addCallback(lambda _: self._update_subscribe_routes())
        elif self.subscription_type is SubscriptionType.ASSIGN:
            d.addCallback(lambda _: self._update_assign_pull_task(list(self.assigned)))
        d.addCallback(lambda _: check_client_in_broker(instance, self.group, list(self.subscription_inner.values())))
        d.addCallback(lambda _: instance.send_heartbeat_to_all_brokers())
        d.addCallback(lambda sent: self.rebalance_service.wakeup() if sent else None)

        def failed(f: Failure) -> Any:
            return self.shutdown().addCallback(lambda _: f)

        return d.addCallbacks(lambda _: None, failed)

    def _channel_active(self, broker_name: str, broker_id: int, addr: str) -> None:
        self.rebalance_service.wakeup()

    def _update_subscribe_routes(self) -> Deferred[None]:
        assert self.instance is not None
        calls = [self.instance.update_topic_route(t).addErrback(lambda _f: False)
                 for t in list(self.subscription_inner)]
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def shutdown(self) -> Deferred[None]:
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.START_FAILED:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return defer.succeed(None)
        instance = self.instance
        assert instance is not None
        d = self.rebalance_service.stop()
        d.addCallback(lambda _: self._stop_tasks())
        d.addCallback(lambda _: self.persist_consumer_offset())
        d.addCallback(lambda _: setattr(self, "state", ServiceState.SHUTDOWN_ALREADY))
        d.addCallback(lambda _: instance.unregister_consumer(self.group))
        d.addCallback(lambda _: self._leave(instance))
        return d

    def _stop_tasks(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()
        for call in list(self._timers):
            if call.active():
                call.cancel()
        self._timers.clear()
        if self._persist_call is not None and self._persist_call.active():
            self._persist_call.cancel()
        while self._poll_waiters:
            self._poll_waiters.popleft().callback(None)
        if self.sink is not None:
            self.sink.put(None)  # wakes a blocked reader: the consumer is closing

    def _leave(self, instance: ClientInstance) -> Deferred[None]:
        if self.rebalance is not None:
            self.rebalance.destroy()
        if self._channel_active in instance.channel_active_listeners:
            instance.channel_active_listeners.remove(self._channel_active)
        return self.manager.release(instance)

    def _persist_tick(self) -> None:
        self._persist_call = None
        if self.state is not ServiceState.RUNNING:
            return
        self.persist_consumer_offset()
        self._persist_call = self.reactor.callLater(
            self.client_config.persist_consumer_offset_interval / 1000, self._persist_tick)

    def persist_consumer_offset(self) -> Deferred[None]:
        if self.state is not ServiceState.RUNNING or self.offset_store is None:
            return defer.succeed(None)
        if self.subscription_type is SubscriptionType.SUBSCRIBE and self.rebalance is not None:
            mqs = list(self.rebalance.process_queue_table)
        else:
            mqs = list(self.assigned)
        return self.offset_store.persist_all(mqs).addErrback(
            lambda f: self.log.error("Persist consumer offset error for group: {group}: {why}",
                                     group=self.group, why=f.getErrorMessage()))

    def _do_rebalance(self) -> Deferred[bool]:
        if self.rebalance is None or self.state is not ServiceState.RUNNING:
            return defer.succeed(True)
        return self.rebalance.do_rebalance(False)

    def rebalance_immediately(self) -> None:
        self.rebalance_service.wakeup()

    # ---- offsets ----------------------------------------------------------------------------

    def compute_pull_from_where(self, mq: MessageQueue) -> Deferred[int]:
        """Java ``RebalanceLitePullImpl.computePullFromWhereWithException`` (-1: unknown)."""
        assert self.instance is not None
        cfw, instance = self.config.consume_from_where, self.instance

        def decide(last: int) -> Any:
            if last >= 0:
                return last
            if last != -1:
                return -1
            if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
                if is_retry_topic(mq.topic):
                    return mq_admin.max_offset(instance, mq)
                return mq_admin.search_offset(instance, mq, parse_consume_timestamp(self.config.consume_timestamp))
            if is_retry_topic(mq.topic):
                return 0
            return mq_admin.max_offset(instance, mq)

        return self.offset_store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE).addCallback(decide)

    def _next_pull_offset(self, mq: MessageQueue, st: _QueueState) -> Deferred[int]:
        if st.seek_offset != -1:
            offset = st.seek_offset
            st.consume_offset = offset
            st.seek_offset = -1
            return defer.succeed(offset)
        if st.pull_offset != -1:
            return defer.succeed(st.pull_offset)

        def check(offset: int) -> int:
            if offset < 0:
                raise MQClientError(f"no start offset for {mq}", response_code=ResponseCode.QUERY_NOT_FOUND)
            return offset

        return self.compute_pull_from_where(mq).addCallback(check)

    def commit(self, offsets: Mapping[MessageQueue, int] | Iterable[MessageQueue] | None = None,
               persist: bool = False) -> Deferred[None]:
        self._check_running()
        if offsets is None:
            self.commit_all()
            keys = list(self.assigned)
        elif isinstance(offsets, Mapping):
            keys = []
            for mq, offset in offsets.items():
                mq = MessageQueue(with_namespace(self.namespace, mq.topic), mq.broker_name, mq.queue_id)
                keys.append(mq)
                st = self.assigned.get(mq)
                if offset != -1 and st is not None and not st.process_queue.dropped:
                    self.offset_store.update_offset(mq, offset, False)
        else:
            keys = [MessageQueue(with_namespace(self.namespace, m.topic), m.broker_name, m.queue_id) for m in offsets]
            for mq in keys:
                self._commit_one(mq)
        if persist:
            return self.offset_store.persist_all(keys)
        return defer.succeed(None)

    def commit_all(self) -> None:
        for mq in list(self.assigned):
            self._commit_one(mq)

    def _commit_one(self, mq: MessageQueue) -> None:
        st = self.assigned.get(mq)
        if st is None or st.consume_offset == -1:
            self.log.debug("consumerOffset is -1 in messageQueue [{mq}].", mq=mq)
            return
        if not st.process_queue.dropped:
            self.offset_store.update_offset(mq, st.consume_offset, False)

    def committed(self, mq: MessageQueue) -> Deferred[int]:
        self._check_running()
        mq = MessageQueue(with_namespace(self.namespace, mq.topic), mq.broker_name, mq.queue_id)

        def check(offset: int) -> int:
            if offset == -2:
                raise MQClientError("Fetch consume offset from broker exception")
            return offset

        return self.offset_store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE).addCallback(check)

    def _maybe_auto_commit(self) -> None:
        now = self.now_ms()
        if now >= self.next_auto_commit_deadline:
            self.commit_all()
            self.next_auto_commit_deadline = now + self.config.auto_commit_interval_millis

    # ---- polling ----------------------------------------------------------------------------

    def poll(self, timeout: float) -> Deferred[list[MessageExt]]:
        """The next cached batch (waiting up to ``timeout`` seconds); [] when none came."""
        try:
            self._check_running()
        except MQClientError as e:
            return defer.fail(e)
        if timeout < 0:
            return defer.fail(ValueError("Timeout must not be negative"))
        if self.config.auto_commit:
            self._maybe_auto_commit()
        req = self._take_request()
        if req is not None or timeout == 0:
            return defer.succeed(self._hand_out(req))
        waiter: Deferred[_ConsumeRequest | None] = Deferred(
            canceller=lambda d: self._poll_waiters.remove(d) if d in self._poll_waiters else None)
        self._poll_waiters.append(waiter)
        call = self.reactor.callLater(timeout, self._poll_timeout, waiter)

        def settle(r: Any) -> Any:
            if call.active():
                call.cancel()
            return r

        return waiter.addBoth(settle).addCallback(self._hand_out)

    def _poll_timeout(self, waiter: Deferred[_ConsumeRequest | None]) -> None:
        if waiter in self._poll_waiters:
            self._poll_waiters.remove(waiter)
            waiter.callback(None)

    def _take_request(self) -> _ConsumeRequest | None:
        cache = self.consume_request_cache
        while cache:
            req = cache.popleft()
            if not req.process_queue.dropped:
                return req
        return None

    def _hand_out(self, req: _ConsumeRequest | None) -> list[MessageExt]:
        if req is None or req.process_queue.dropped:
            return []
        offset = req.process_queue.remove_messages(req.msgs)
        st = self.assigned.get(req.mq)
        if st is not None:
            st.consume_offset = offset
        if self.namespace:
            for m in req.msgs:
                m.topic = without_namespace(m.topic, self.namespace)
        req.process_queue.last_consume_timestamp = self.now_ms()
        return req.msgs

    # ---- the blocking facade's hand-off: no reactor round trip per poll ----------------------

    def deliver_to(self, sink: queue.SimpleQueue[_ConsumeRequest | None]) -> None:
        """Hand found batches to ``sink`` (read by another thread, which reports each batch back
        with ``handed_out`` or ``discarded``) instead of the ``poll`` cache. Set before start."""
        self.sink = sink

    def handed_out(self, req: _ConsumeRequest) -> None:
        """A sink reader gave ``req``'s messages to the application: its offsets move on."""
        self._left_sink(req)
        if self.state is not ServiceState.RUNNING:
            return
        if self.config.auto_commit:
            self._maybe_auto_commit()
        if not req.stale:
            self._hand_out(req)

    def discarded(self, req: _ConsumeRequest | None) -> None:
        """A sink reader skipped ``req`` (stale), or found nothing (None)."""
        if req is not None:
            self._left_sink(req)
        elif self.state is ServiceState.RUNNING and self.config.auto_commit:
            self._maybe_auto_commit()

    def _left_sink(self, req: _ConsumeRequest) -> None:
        self._sink_count -= 1
        pending = self._in_sink.get(req.mq)
        if pending is not None:
            try:
                pending.remove(req)
            except ValueError:
                pass
            if not pending:
                del self._in_sink[req.mq]

    def _cached(self) -> int:
        return self._sink_count if self.sink is not None else len(self.consume_request_cache)

    def _offer(self, req: _ConsumeRequest) -> None:
        if self.sink is not None:
            self._sink_count += 1
            self._in_sink.setdefault(req.mq, []).append(req)
            self.sink.put(req)
            return
        while self._poll_waiters:
            waiter = self._poll_waiters.popleft()
            if not waiter.called:
                waiter.callback(req)
                return
        self.consume_request_cache.append(req)

    # ---- seeking ----------------------------------------------------------------------------

    def _assigned_or_fail(self, mq: MessageQueue) -> MessageQueue:
        mq = MessageQueue(with_namespace(self.namespace, mq.topic), mq.broker_name, mq.queue_id)
        if mq not in self.assigned:
            if self.subscription_type is SubscriptionType.SUBSCRIBE:
                raise MQClientError(f"The message queue is not in assigned list, may be rebalancing, "
                                    f"message queue: {mq}")
            raise MQClientError(f"The message queue is not in assigned list, message queue: {mq}")
        return mq

    def seek(self, mq: MessageQueue, offset: int) -> Deferred[None]:
        try:
            self._check_running()
            mq = self._assigned_or_fail(mq)
        except MQClientError as e:
            return defer.fail(e)
        assert self.instance is not None
        instance = self.instance
        d = defer.gatherResults([mq_admin.min_offset(instance, mq), mq_admin.max_offset(instance, mq)],
                                consumeErrors=True)

        def go(bounds: list[int]) -> None:
            lo, hi = bounds
            if offset < lo or offset > hi:
                raise MQClientError(f"Seek offset illegal, seek offset = {offset}, min offset = {lo}, "
                                    f"max offset = {hi}")
            self._seek_now(mq, offset)

        return d.addCallback(go).addErrback(_first_error)

    def _seek_now(self, mq: MessageQueue, offset: int) -> None:
        st = self.assigned.get(mq)
        if st is None:
            raise MQClientError(f"The message queue is not in assigned list, message queue: {mq}")
        st.process_queue.clear()
        self.consume_request_cache = deque(r for r in self.consume_request_cache if r.mq != mq)
        for req in self._in_sink.get(mq, ()):
            req.cancelled = True
        old = self.tasks.pop(mq, None)
        if old is not None:
            old.cancel()
        st.seek_offset = offset
        task = self.tasks[mq] = _PullTask(mq)
        self._schedule(task, 0)

    def seek_to_begin(self, mq: MessageQueue) -> Deferred[None]:
        assert self.instance is not None
        return mq_admin.min_offset(self.instance, self._ns(mq)).addCallback(lambda o: self.seek(mq, o))

    def seek_to_end(self, mq: MessageQueue) -> Deferred[None]:
        assert self.instance is not None
        return mq_admin.max_offset(self.instance, self._ns(mq)).addCallback(lambda o: self.seek(mq, o))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> Deferred[int]:
        self._check_running()
        assert self.instance is not None
        return mq_admin.search_offset(self.instance, self._ns(mq), timestamp_ms)

    def fetch_message_queues(self, topic: str) -> Deferred[set[MessageQueue]]:
        self._check_running()
        assert self.instance is not None
        d = mq_admin.fetch_subscribe_message_queues(self.instance, with_namespace(self.namespace, topic))
        return d.addCallback(lambda mqs: {MessageQueue(without_namespace(m.topic, self.namespace),
                                                       m.broker_name, m.queue_id) for m in mqs})

    def _ns(self, mq: MessageQueue) -> MessageQueue:
        return MessageQueue(with_namespace(self.namespace, mq.topic), mq.broker_name, mq.queue_id)

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            st = self.assigned.get(self._ns(mq))
            if st is not None:
                st.paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            st = self.assigned.get(self._ns(mq))
            if st is not None:
                st.paused = False

    # ---- the pull tasks ---------------------------------------------------------------------

    def _schedule(self, task: _PullTask, delay_ms: float) -> None:
        if task.cancelled or self.state not in (ServiceState.RUNNING, ServiceState.CREATE_JUST):
            return

        def run() -> None:
            self._timers.discard(task.call)
            task.call = None
            self._pull_task(task)

        task.call = self.reactor.callLater(delay_ms / 1000, run)
        self._timers.add(task.call)

    def _pull_task(self, task: _PullTask) -> None:
        if task.cancelled or self.state is not ServiceState.RUNNING:
            return
        mq = task.mq
        st = self.assigned.get(mq)
        if st is None or st.paused:
            self._schedule(task, PULL_TIME_DELAY_MILLS_WHEN_PAUSE)
            return
        pq = st.process_queue
        if pq.dropped:
            return
        pq.last_pull_timestamp = self.now_ms()
        cfg = self.config
        if self._cached() * cfg.pull_batch_size > cfg.pull_threshold_for_all or \
                pq.msg_count > cfg.pull_threshold_for_queue or \
                pq.msg_size // (1024 * 1024) > cfg.pull_threshold_size_for_queue or \
                pq.max_span() > cfg.consume_max_span:
            if self.flow_control_times % 1000 == 0:
                self.log.warn("The consume request count, cached message count, size or span exceeds "
                              "its threshold, so do flow control, mq={mq}, flowControlTimes={n}",
                              mq=mq, n=self.flow_control_times)
            self.flow_control_times += 1
            self._schedule(task, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
            return

        def pull(offset: int) -> Deferred[Any] | None:
            if task.cancelled or pq.dropped:
                return None
            if self.subscription_type is SubscriptionType.SUBSCRIBE:
                sd = self.subscription_inner.get(mq.topic)
                if sd is None:
                    raise MQClientError(f"no subscription of {mq.topic}")
            else:
                sd = subscription_for(mq.topic, self.topic_to_sub_expression.get(mq.topic, SUB_ALL))
            is_tag = sd.expression_type in (None, ExpressionType.TAG)
            flag = PullSysFlag.build(suspend=True, subscription=True, lite_pull=True)
            begin = self.now_ms() if self.metrics is not None else 0
            d = self.pull_api.pull_kernel(
                mq, sd.sub_string, sd.expression_type, 0 if is_tag else sd.sub_version, offset,
                cfg.pull_batch_size, None, flag, 0, cfg.broker_suspend_max_time_millis,
                cfg.consumer_timeout_millis_when_suspend)
            task.pull = d

            def processed(result: PullResult) -> None:
                task.pull = None
                result = self.pull_api.process_pull_result(mq, result, sd)
                if task.cancelled or pq.dropped:
                    return
                if result.status is PullStatus.FOUND:
                    if result.messages and st.seek_offset == -1:
                        if self.metrics is not None and self.instance is not None:
                            now = self.now_ms()
                            self.metrics.on_pull(mq.topic, self.group, self.instance.client_id, now - begin,
                                                 result.messages, now)
                        pq.put_messages(result.messages)
                        self._offer(_ConsumeRequest(result.messages, mq, pq))
                elif result.status is PullStatus.OFFSET_ILLEGAL:
                    self.log.warn("The pull request offset illegal, {mq} {result}", mq=mq, result=result)
                if st.seek_offset == -1 and self.assigned.get(mq) is st:
                    st.pull_offset = result.next_begin_offset
                self._schedule(task, 0)

            return d.addCallback(processed)

        def failed(f: Failure) -> None:
            task.pull = None
            if task.cancelled or f.check(CancelledError):
                return
            self.log.error("An error occurred in pull message process of {mq}: {why}", mq=mq,
                           why=f.getErrorMessage())
            if f.check(FlowControlError):
                self._schedule(task, PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL)
            else:
                self._schedule(task, self.client_config.pull_time_delay_mills_when_exception)

        def no_offset(f: Failure) -> None:
            self.log.error("Failed to get next pull offset of {mq}: {why}", mq=mq, why=f.getErrorMessage())
            self._schedule(task, PULL_TIME_DELAY_MILLS_ON_EXCEPTION)

        if st.seek_offset == -1 and st.pull_offset != -1:  # the usual case: the offset is known
            try:
                d = pull(st.pull_offset)
            except Exception:
                failed(Failure())
                return
            if d is not None:
                d.addErrback(failed)
            return
        self._next_pull_offset(mq, st).addCallbacks(
            lambda o: defer.maybeDeferred(pull, o).addErrback(failed), no_offset)

    # ---- what the client instance and the broker's requests use -----------------------------

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.message_model,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,  # Java reports this
            subscription_data_set=list(self.subscription_inner.values()),
            unit_mode=self.client_config.unit_mode,
        )

    def cached_queues(self) -> list[tuple[MessageQueue, ProcessQueue]]:
        """The assigned queues and their process queues (the client metrics' cached gauges)."""
        return [(mq, st.process_queue) for mq, st in list(self.assigned.items())]

    def subscribed_topics(self) -> Iterable[str]:
        return list(self.subscription_inner)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        r = self.rebalance
        return r is not None and topic in self.subscription_inner and topic not in r.topic_subscribe_info_table

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        r = self.rebalance
        if r is not None and topic in self.subscription_inner:
            r.topic_subscribe_info_table[topic] = mqs

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    def consumer_running_info(self) -> ConsumerRunningInfo:
        info = ConsumerRunningInfo()
        props = running_info_properties(self, "DefaultLitePullConsumer")
        props["PROP_CONSUMER_START_TIMESTAMP"] = str(self.start_timestamp)
        info.properties = props
        info.subscription_set = list(self.subscription_inner.values())
        for mq, st in self.assigned.items():
            info.mq_table[mq] = st.process_queue.fill_process_queue_info(self.offset_store.memory_offset(mq))
        return info

    def consumer_status(self, topic: str | None) -> dict[MessageQueue, int]:
        return {}  # Java answers an empty table for lite pull consumers


def _first_error(f: Failure) -> Failure:
    if isinstance(f.value, defer.FirstError):
        return f.value.subFailure
    return f
