"""The Twisted push consumer core (Java ``DefaultMQPushConsumer`` + ``DefaultMQPushConsumerImpl``
+ ``RebalancePushImpl``).

``PushConsumer(reactor, "group", namesrv_addr=..., **options)``; ``subscribe``,
``register_listener``, then ``start()`` / ``shutdown()`` (Deferreds). Options are the fields of
``ClientConfig`` and ``PushConsumerConfig``, Java's names in snake_case with Java's defaults.

The pull loop per assigned queue (``pull_message``) long-polls the queue's broker (suspend
15 s, RPC timeout 30 s) and hands found messages to the process queue and the consume service.
It backs off as Java does: 50 ms while the queue holds more than ``pull_threshold_for_queue``
messages or ``pull_threshold_size_for_queue`` MiB (or, consuming concurrently, spans more than
``consume_concurrently_max_span`` offsets), 1 s while suspended, 20 ms after FLOW_CONTROL,
``pull_time_delay_mills_when_exception`` after other errors; after NO_NEW_MSG / NO_MATCHED_MSG it
pulls again at once. PULL_OFFSET_MOVED pins the queue's offset to the broker's next offset,
persists it and re-creates the queue. Clustering consumers also subscribe to ``%RETRY%<group>``
and commit offsets (oneway every ``persist_consumer_offset_interval``, piggybacked on pulls, at
shutdown); broadcasting consumers keep them in a local file.

Everything runs in the reactor thread except the listener (see ``consume_service``). The
blocking ``rmqwire.PushConsumer`` wraps this class.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.config import (
    ClientConfig,
    local_address,
    with_namespace,
    without_namespace,
)
from rmqwire.client.consumer import mq_admin
from rmqwire.client.consumer.allocate import AllocateMessageQueueStrategy, strategy_of
from rmqwire.client.consumer.consume_service import (
    ConsumeMessageConcurrentlyService,
    ConsumeMessageOrderlyService,
    ReactorRunner,
)
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
from rmqwire.client.consumer.pull import (
    BROKER_SUSPEND_MAX_TIME_MILLIS,
    CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND,
    PullAPIWrapper,
    PullResult,
    PullStatus,
    plain_records,
)
from rmqwire.client.consumer.rebalance import (
    PullRequest,
    RebalanceImpl,
    RebalanceService,
)
from rmqwire.client.consumer.stats import ConsumerStats
from rmqwire.client.consumer.subscription import (
    SUB_ALL,
    MessageSelector,
    is_retry_topic,
    retry_topic,
    subscription_for,
)
from rmqwire.client.instance import ClientInstance, ClientManager, suggest_todo
from rmqwire.client.message import Message
from rmqwire.client.metrics import metrics_for
from rmqwire.client.producer.producer import Producer
from rmqwire.client.validators import CLIENT_INNER_PRODUCER_GROUP, check_group
from rmqwire.codec.codes import ResponseCode
from rmqwire.codec.commands.consumer import ConsumerRunningInfo, ConsumerSendMsgBack
from rmqwire.codec.commands.heartbeat import ConsumerData
from rmqwire.codec.commands.pull import PullSysFlag
from rmqwire.codec.ids import build_client_id
from rmqwire.codec.message import MessageExt, PropertyKey
from rmqwire.errors import FlowControlError, MQClientError, SubscriptionNotLatestError
from rmqwire.model import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
)

__all__ = ["PushConsumer", "PushConsumerConfig", "ServiceState"]

#: Java ``MixAll.DEFAULT_CONSUMER_GROUP``: a group name users may not take.
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
#: Java: re-pull delays (ms) when the cache is full, the broker flow-controls, the consumer is
#: suspended.
PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MILLS_WHEN_SUSPEND = 1000
#: Java: CONSUMER_SEND_MSG_BACK timeout (s); reset-offset drain bound (s).
SEND_BACK_TIMEOUT = 5.0
RESET_OFFSET_WAIT = 10.0


class ServiceState(enum.Enum):
    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


def _default_consume_timestamp() -> str:
    # Java: UtilAll.timeMillisToHumanString3(now - 30 min), local time
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - 30 * 60))


def parse_consume_timestamp(value: str | int | float | datetime.datetime) -> int:
    """``yyyyMMddHHmmss`` (local time, as Java's ``UtilAll.parseDate``), epoch ms or a datetime
    -> epoch ms."""
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)):
        return int(value)
    try:
        return int(time.mktime(time.strptime(value, "%Y%m%d%H%M%S")) * 1000)
    except (TypeError, ValueError):
        raise MQClientError(
            f"consumeTimestamp is invalid, the valid format is yyyyMMddHHmmss,but received {value} "
            + suggest_todo()) from None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PushConsumerConfig:
    """Java ``DefaultMQPushConsumer`` options in snake_case with Java's defaults (ms unless said)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    #: ``yyyyMMddHHmmss`` local time, epoch ms or a datetime (default: 30 minutes ago)
    consume_timestamp: str | int | datetime.datetime = dataclasses.field(default_factory=_default_consume_timestamp)
    #: a strategy object or a name: "averagely" (default), "by_circle", "consistent_hash"
    allocate_strategy: Any = None
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    #: MiB
    pull_threshold_size_for_queue: int = 100
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic: int = -1
    pull_interval: int = 0
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_batch_size_in_bytes: int = 256 * 1024
    post_subscription_when_pull: bool = False
    #: -1: 16 for concurrent listeners, unlimited (local retries) for orderly ones
    max_reconsume_times: int = -1
    suspend_current_queue_time_millis: int = 1000
    #: minutes
    consume_timeout: int = 15
    await_termination_millis_when_shutdown: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "message_model", _enum(MessageModel, self.message_model))
        object.__setattr__(self, "consume_from_where", _enum(ConsumeFromWhere, self.consume_from_where))

    def check(self) -> None:
        """Java ``checkConfig``'s ranges."""
        def bad(what: str) -> MQClientError:
            return MQClientError(what + suggest_todo())

        parse_consume_timestamp(self.consume_timestamp)
        if not 1 <= self.consume_thread_min <= 1000:
            raise bad("consumeThreadMin Out of range [1, 1000]")
        if not 1 <= self.consume_thread_max <= 1000:
            raise bad("consumeThreadMax Out of range [1, 1000]")
        if self.consume_thread_min > self.consume_thread_max:
            raise MQClientError(f"consumeThreadMin ({self.consume_thread_min}) is larger than "
                                f"consumeThreadMax ({self.consume_thread_max})")
        if not 1 <= self.consume_concurrently_max_span <= 65535:
            raise bad("consumeConcurrentlyMaxSpan Out of range [1, 65535]")
        if not 1 <= self.pull_threshold_for_queue <= 65535:
            raise bad("pullThresholdForQueue Out of range [1, 65535]")
        if self.pull_threshold_for_topic != -1 and not 1 <= self.pull_threshold_for_topic <= 6553500:
            raise bad("pullThresholdForTopic Out of range [1, 6553500]")
        if not 1 <= self.pull_threshold_size_for_queue <= 1024:
            raise bad("pullThresholdSizeForQueue Out of range [1, 1024]")
        if self.pull_threshold_size_for_topic != -1 and not 1 <= self.pull_threshold_size_for_topic <= 102400:
            raise bad("pullThresholdSizeForTopic Out of range [1, 102400]")
        if not 0 <= self.pull_interval <= 65535:
            raise bad("pullInterval Out of range [0, 65535]")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise bad("consumeMessageBatchMaxSize Out of range [1, 1024]")
        if not 1 <= self.pull_batch_size <= 1024:
            raise bad("pullBatchSize Out of range [1, 1024]")


def _enum(cls: type[enum.Enum], value: Any) -> Any:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        name = value.upper()
        if name in cls.__members__:
            return cls.__members__[name]
        if f"CONSUME_FROM_{name}" in cls.__members__:
            return cls.__members__[f"CONSUME_FROM_{name}"]
    return cls(value)


_CLIENT_FIELDS = frozenset(f.name for f in dataclasses.fields(ClientConfig))
_PUSH_FIELDS = frozenset(f.name for f in dataclasses.fields(PushConsumerConfig))


def split_options(options: dict[str, Any], fields: frozenset[str] = _PUSH_FIELDS,
                  what: str = "push consumer") -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword options -> (ClientConfig fields, consumer config fields); TypeError for others."""
    unknown = set(options) - _CLIENT_FIELDS - fields
    if unknown:
        raise TypeError(f"unknown {what} option(s): {', '.join(sorted(unknown))}")
    return ({k: v for k, v in options.items() if k in _CLIENT_FIELDS},
            {k: v for k, v in options.items() if k in fields})


def file_store_client_id(config: ClientConfig) -> str:
    """The client id Java's broadcasting consumer has, which names its local offsets directory:
    the instance name is not replaced by the pid there, so ``ip@DEFAULT`` survives restarts."""
    ip = config.client_ip or local_address()
    return build_client_id(ip, config.instance_name, config.unit_name)


class RebalancePushImpl(RebalanceImpl):
    """How a push consumer adds and removes queues (Java ``RebalancePushImpl``)."""

    #: Java ``rocketmq.client.unlockDelayTimeMills``: a dropped orderly queue is unlocked by force
    #: after this long without a lock renewal (ms).
    UNLOCK_DELAY_TIME_MILLS = 20_000

    def __init__(self, consumer: PushConsumer, strategy: AllocateMessageQueueStrategy,
                 instance: ClientInstance) -> None:
        super().__init__(consumer.group, consumer.config.message_model, strategy, instance, consumer.now_ms)
        self.consumer = consumer

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    def rebalance_later(self, delay_ms: int) -> None:
        self.consumer.rebalance_service.wakeup(delay_ms)

    def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        sd = self.subscription_inner.get(topic)
        if sd is not None:
            # a new subscription version tells the brokers this client's view changed
            sd.sub_version = self.now_ms()
        c = self.consumer
        if c.metrics is not None:
            c.metrics.on_rebalance(topic, c.group, self.instance.client_id)
        n = len(self.process_queue_table)
        if n:
            if c.config.pull_threshold_for_topic != -1:
                c.pull_threshold_for_queue = max(1, c.config.pull_threshold_for_topic // n)
            if c.config.pull_threshold_size_for_topic != -1:
                c.pull_threshold_size_for_queue = max(1, c.config.pull_threshold_size_for_topic // n)
        self.instance.send_heartbeat_to_all_brokers()
        if c.message_queue_listener is not None:
            try:
                c.message_queue_listener(topic, mq_all, mq_divided)
            except Exception:
                self.log.failure("messageQueueChanged listener failed")

    def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> Deferred[bool]:
        store = self.consumer.offset_store
        if self.consumer.orderly and self.message_model is MessageModel.CLUSTERING:
            store.persist(mq)
            force = pq.dropped and self.now_ms() > pq.last_lock_timestamp + self.UNLOCK_DELAY_TIME_MILLS
            if force or pq.consuming_tasks == 0:
                store.persist(mq)
                store.remove_offset(mq)
                pq.locked = False
                self.unlock(mq, True)
                self.consumer.pull_api.forget(mq)
                return defer.succeed(True)
            pq.try_unlock_times += 1
            return defer.succeed(False)
        store.persist(mq)
        store.remove_offset(mq)
        self.consumer.pull_api.forget(mq)
        return defer.succeed(True)

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.consumer.offset_store.remove_offset(mq)

    def compute_pull_from_where(self, mq: MessageQueue) -> Deferred[int]:
        return self.consumer.compute_pull_from_where(mq)

    def dispatch_pull_requests(self, requests: list[PullRequest], delay_ms: int) -> None:
        for req in requests:
            if delay_ms <= 0:
                self.consumer.execute_pull_request_immediately(req)
            else:
                self.consumer.execute_pull_request_later(req, delay_ms)


class PushConsumer:
    """The push consumer core; see the module doc. ``runner`` runs listeners (default: in the
    reactor thread; the blocking facade passes a ``ThreadRunner``)."""

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        group: str,
        *,
        namesrv_addr: str | Sequence[str] | None = None,
        client_config: ClientConfig | None = None,
        config: PushConsumerConfig | None = None,
        manager: ClientManager | None = None,
        runner: Any = None,
        **options: Any,
    ) -> None:
        client_opts, consumer_opts = split_options(options)
        if namesrv_addr is not None:
            client_opts["namesrv_addr"] = namesrv_addr
        cc = client_config or ClientConfig()
        self.client_config = cc.replace(**client_opts) if client_opts else cc
        pc = config or PushConsumerConfig()
        self.config = dataclasses.replace(pc, **consumer_opts) if consumer_opts else pc
        self.reactor = reactor
        self.namespace = self.client_config.namespace
        self.group = with_namespace(self.namespace, group)
        self.manager = manager if manager is not None else ClientManager(reactor)
        self.runner = runner if runner is not None else ReactorRunner(reactor)
        self.state = ServiceState.CREATE_JUST
        self.message_model: MessageModel = self.config.message_model
        self.strategy = strategy_of(self.config.allocate_strategy)
        self.pull_threshold_for_queue = self.config.pull_threshold_for_queue
        self.pull_threshold_size_for_queue = self.config.pull_threshold_size_for_queue
        self.subscription: dict[str, str | MessageSelector] = {}
        self.listener: Callable[..., Any] | None = None
        self.orderly = False
        self.message_queue_listener: Callable[[str, set[MessageQueue], set[MessageQueue]], None] | None = None
        self.paused = False
        self.stats = ConsumerStats(reactor.seconds)
        self.metrics = metrics_for(self.client_config.metrics)
        if self.metrics is not None:
            self.metrics.watch_consumer(self)
        self.start_timestamp = self.now_ms()
        self.instance: ClientInstance | None = None
        self.rebalance: RebalanceImpl = None  # type: ignore[assignment]  # set at start
        self.rebalance_service = RebalanceService(reactor, self._do_rebalance)
        self.offset_store: OffsetStore = None  # type: ignore[assignment]
        self.pull_api: PullAPIWrapper = None  # type: ignore[assignment]
        self.consume_service: Any = None
        self.inner_producer: Any = None
        self._owns_inner_producer = False
        self._timers: set[Any] = set()
        self._pulls: set[Deferred[Any]] = set()
        #: answers whose next pull went out before their decode, decoded after the read
        self._decodes: list[tuple[PullResult, PullRequest, Any, float, int]] = []
        self._persist_call: Any = None
        self._closing = False
        self.queue_flow_control_times = 0
        self.queue_max_span_flow_control_times = 0

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    # ---- configuration ----------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = SUB_ALL) -> None:
        """Subscribe to ``topic`` with a tag expression or a ``MessageSelector`` (SQL92)."""
        topic = with_namespace(self.namespace, topic)
        try:
            sd = subscription_for(topic, expression)
        except Exception as e:
            raise MQClientError("subscription exception") from e
        self.subscription[topic] = expression if isinstance(expression, MessageSelector) else (expression or SUB_ALL)
        if self.rebalance is not None:
            self.rebalance.subscription_inner[topic] = sd
            if self.instance is not None and self.state is ServiceState.RUNNING:
                self.instance.send_heartbeat_to_all_brokers()

    def unsubscribe(self, topic: str) -> None:
        topic = with_namespace(self.namespace, topic)
        self.subscription.pop(topic, None)
        if self.rebalance is not None:
            self.rebalance.subscription_inner.pop(topic, None)

    def register_listener(self, listener: Callable[..., Any], orderly: bool = False) -> None:
        """``listener(msgs)`` or ``listener(msgs, context)`` returning a ConsumeResult;
        ``orderly=True`` consumes each queue in order (Java ``MessageListenerOrderly``)."""
        if not callable(listener):
            raise TypeError("the listener must be callable")
        self.listener = listener
        self.orderly = orderly

    # ---- lifecycle --------------------------------------------------------------------------

    def _check_config(self) -> None:
        check_group(self.group)
        if self.group == DEFAULT_CONSUMER_GROUP:
            raise MQClientError(f"consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify "
                                "another one." + suggest_todo())
        if self.listener is None:
            raise MQClientError("messageListener is null" + suggest_todo())
        self.config.check()

    def _copy_subscription(self) -> None:
        inner = self.rebalance.subscription_inner
        for topic, expression in self.subscription.items():
            inner[topic] = subscription_for(topic, expression)
        if self.message_model is MessageModel.CLUSTERING:
            rt = retry_topic(self.group)
            inner[rt] = subscription_for(rt, SUB_ALL)

    def start(self) -> Deferred[None]:
        """Register with the client instance, announce the subscriptions and rebalance."""
        if self.state is not ServiceState.CREATE_JUST:
            return defer.fail(MQClientError(
                f"The PushConsumer service state not OK, maybe started once, {self.state.value}"
                + suggest_todo()))
        self.state = ServiceState.START_FAILED
        try:
            self._check_config()
            # Java keeps "DEFAULT" as a broadcasting consumer's instance name, and its offsets file
            # is named after that; the wire client id gets a unique instance name here.
            file_cid = file_store_client_id(self.client_config)
            cc = self.client_config = self.client_config.resolved()
            instance = self.manager.instance_for(cc)
            self.instance = instance
            self.rebalance = RebalancePushImpl(self, self.strategy, instance)
            self._copy_subscription()
            self.pull_api = PullAPIWrapper(instance, self.group, cc.unit_mode)
            if self.message_model is MessageModel.BROADCASTING:
                self.offset_store = LocalFileOffsetStore(file_cid, self.group)
            else:
                self.offset_store = RemoteBrokerOffsetStore(instance, self.group)
            self.offset_store.load()
            service = ConsumeMessageOrderlyService if self.orderly else ConsumeMessageConcurrentlyService
            assert self.listener is not None
            self.consume_service = service(self, self.listener, self.runner)
            self.consume_service.start()
            if not instance.register_consumer(self.group, self):
                self.state = ServiceState.CREATE_JUST
                self.consume_service.shutdown()
                raise MQClientError(f"The consumer group[{self.group}] has been created before, specify "
                                    "another name please." + suggest_todo())
        except Exception as e:
            return defer.fail(e)
        instance.add_processor(ConsumerClientProcessor(instance))
        instance.channel_active_listeners.append(self._channel_active)
        instance.startService()
        self.rebalance_service.start()
        self._schedule_persist(10.0)
        self.state = ServiceState.RUNNING
        self.log.info("the consumer [{group}] start OK. messageModel={model}, isUnitMode={unit}",
                      group=self.group, model=self.message_model.name, unit=cc.unit_mode)
        d = self._start_inner_producer()
        d.addCallback(lambda _: self._update_subscribe_routes())
        d.addCallback(lambda _: self._check_client_in_broker())
        d.addCallback(lambda _: instance.send_heartbeat_to_all_brokers())
        d.addCallback(lambda sent: self.rebalance_service.wakeup() if sent else None)

        def failed(f: Failure) -> Any:
            self.log.warn("Start the consumer {group} fail: {why}", group=self.group, why=f.getErrorMessage())
            return self.shutdown().addCallback(lambda _: f)

        return d.addCallbacks(lambda _: None, failed)

    def _channel_active(self, broker_name: str, broker_id: int, addr: str) -> None:
        self.rebalance_service.wakeup()

    def _start_inner_producer(self) -> Deferred[None]:
        """Java's instance-wide CLIENT_INNER_PRODUCER, for retries that cannot go back with
        CONSUMER_SEND_MSG_BACK (and orderly consumption's give-ups)."""
        assert self.instance is not None
        existing = self.instance.producers.get(CLIENT_INNER_PRODUCER_GROUP)
        if existing is not None:
            self.inner_producer = existing
            return defer.succeed(None)
        producer = Producer(self.reactor, CLIENT_INNER_PRODUCER_GROUP, client_config=self.client_config,
                            manager=self.manager)
        self.inner_producer = producer
        self._owns_inner_producer = True
        return producer.start().addErrback(
            lambda f: self.log.warn("inner producer did not start: {why}", why=f.getErrorMessage()))

    def _update_subscribe_routes(self) -> Deferred[None]:
        assert self.instance is not None
        calls = []
        for topic in list(self.rebalance.subscription_inner):
            calls.append(self.instance.update_topic_route(topic).addErrback(
                lambda f, t=topic: self.log.warn("route of {topic} not updated: {why}", topic=t,
                                                 why=f.getErrorMessage())))
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def _check_client_in_broker(self) -> Deferred[None]:
        assert self.instance is not None
        return check_client_in_broker(self.instance, self.group, list(self.rebalance.subscription_inner.values()))

    def shutdown(self) -> Deferred[None]:
        """Stop pulling and consuming, persist offsets, unregister (UNREGISTER_CLIENT) and stop
        the client instance when it has no other members. Idempotent."""
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.START_FAILED:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return defer.succeed(None)
        instance = self.instance
        assert instance is not None
        self._closing = True
        d = defer.succeed(None)
        d.addCallback(lambda _: self.rebalance_service.stop())
        d.addCallback(lambda _: self._stop_pulling())
        d.addCallback(lambda _: self.consume_service.shutdown())
        d.addCallback(lambda _: self.persist_consumer_offset())
        d.addCallback(lambda _: self._set_state(ServiceState.SHUTDOWN_ALREADY))
        d.addCallback(lambda _: instance.unregister_consumer(self.group))
        d.addCallback(lambda _: self._stop_inner_producer())
        d.addCallback(lambda _: self.rebalance.destroy())
        d.addCallback(lambda _: self._leave(instance))
        d.addCallback(lambda _: self.log.info("the consumer [{group}] shutdown OK", group=self.group))
        return d

    def _set_state(self, state: ServiceState) -> None:
        self.state = state

    def _stop_pulling(self) -> None:
        for call in list(self._timers):
            if call.active():
                call.cancel()
        self._timers.clear()
        # never put in their queues: their offsets are not committed, they come again
        self._decodes.clear()
        if self._persist_call is not None and self._persist_call.active():
            self._persist_call.cancel()
        self._persist_call = None
        for d in list(self._pulls):
            d.cancel()  # long polls would otherwise hold the connection for up to 30 s

    def _stop_inner_producer(self) -> Deferred[None]:
        assert self.instance is not None
        if not self._owns_inner_producer or self.inner_producer is None:
            return defer.succeed(None)
        others = [c for c in self.instance.consumers.values() if c is not self]
        if others:  # another consumer of this instance still needs it: hand it over
            for c in others:
                if getattr(c, "inner_producer", None) is self.inner_producer:
                    c._owns_inner_producer = True
                    return defer.succeed(None)
        return self.inner_producer.shutdown()

    def _leave(self, instance: ClientInstance) -> Deferred[None]:
        if self._channel_active in instance.channel_active_listeners:
            instance.channel_active_listeners.remove(self._channel_active)
        return self.manager.release(instance)

    def _make_sure_state_ok(self) -> None:
        if self.state is not ServiceState.RUNNING:
            raise MQClientError(f"The consumer service state not OK, {self.state.value}" + suggest_todo())

    def suspend(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self.rebalance_service.wakeup()

    # ---- timers -----------------------------------------------------------------------------

    def _later(self, ms: float, fn: Callable[..., Any], *args: Any) -> None:
        if self.state is not ServiceState.RUNNING or self._closing:
            return

        def run() -> None:
            self._timers.discard(call)
            fn(*args)

        call = self.reactor.callLater(ms / 1000, run)
        self._timers.add(call)

    def _schedule_persist(self, seconds: float) -> None:
        self._persist_call = self.reactor.callLater(seconds, self._persist_tick)

    def _persist_tick(self) -> None:
        self._persist_call = None
        if self.state is not ServiceState.RUNNING:
            return
        self.persist_consumer_offset()
        self._schedule_persist(self.client_config.persist_consumer_offset_interval / 1000)

    def persist_consumer_offset(self) -> Deferred[None]:
        if self.offset_store is None or self.state is not ServiceState.RUNNING:
            return defer.succeed(None)
        d = self.offset_store.persist_all(list(self.rebalance.process_queue_table))
        return d.addErrback(lambda f: self.log.error("group: {group} persistConsumerOffset exception: {why}",
                                                     group=self.group, why=f.getErrorMessage()))

    # ---- rebalance --------------------------------------------------------------------------

    def _do_rebalance(self) -> Deferred[bool]:
        if self.paused or self.state is not ServiceState.RUNNING:
            return defer.succeed(not self.paused)
        return self.rebalance.do_rebalance(self.orderly)

    def rebalance_immediately(self) -> None:
        self.rebalance_service.wakeup()

    def compute_pull_from_where(self, mq: MessageQueue) -> Deferred[int]:
        """Java ``RebalancePushImpl.computePullFromWhereWithException``."""
        assert self.instance is not None
        cfw = self.config.consume_from_where
        instance = self.instance

        def decide(last: int) -> Any:
            if last >= 0:
                return last
            if last != -1:
                raise MQClientError("Failed to query consume offset from offset store",
                                    response_code=ResponseCode.QUERY_NOT_FOUND)
            if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0  # an illegal 0 is fixed by PULL_OFFSET_MOVED
            if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
                if is_retry_topic(mq.topic):
                    return mq_admin.max_offset(instance, mq)
                return mq_admin.search_offset(instance, mq, parse_consume_timestamp(self.config.consume_timestamp))
            if is_retry_topic(mq.topic):
                return 0
            return mq_admin.max_offset(instance, mq)

        def check(result: int) -> int:
            if result < 0:
                raise MQClientError(f"Found unexpected result {result}", response_code=ResponseCode.SYSTEM_ERROR)
            return result

        return self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE).addCallback(decide).addCallback(check)

    # ---- the pull loop ----------------------------------------------------------------------

    def execute_pull_request_immediately(self, req: PullRequest) -> None:
        self._later(0, self.pull_message, req)

    def execute_pull_request_later(self, req: PullRequest, delay_ms: float) -> None:
        self._later(delay_ms, self.pull_message, req)

    def pull_message(self, req: PullRequest) -> None:
        pq = req.process_queue
        if pq.dropped:
            self.log.info("the pull request[{mq}] is dropped.", mq=req.message_queue)
            return
        pq.last_pull_timestamp = self.now_ms()
        delay_ex = self.client_config.pull_time_delay_mills_when_exception
        if self.state is not ServiceState.RUNNING:
            self.execute_pull_request_later(req, delay_ex)
            return
        if self.paused:
            self.execute_pull_request_later(req, PULL_TIME_DELAY_MILLS_WHEN_SUSPEND)
            return
        if pq.msg_count > self.pull_threshold_for_queue or \
                pq.msg_size // (1024 * 1024) > self.pull_threshold_size_for_queue:
            self.execute_pull_request_later(req, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
            if self.queue_flow_control_times % 1000 == 0:
                self.log.warn("the cached message count or size exceeds the threshold, so do flow "
                              "control, count={count}, size={size} MiB, mq={mq}, flowControlTimes={n}",
                              count=pq.msg_count, size=pq.msg_size // (1024 * 1024), mq=req.message_queue,
                              n=self.queue_flow_control_times)
            self.queue_flow_control_times += 1
            return
        if not self.orderly:
            if pq.max_span() > self.config.consume_concurrently_max_span:
                self.execute_pull_request_later(req, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
                if self.queue_max_span_flow_control_times % 1000 == 0:
                    self.log.warn("the queue's messages, span too long, so do flow control, maxSpan={span}, "
                                  "mq={mq}", span=pq.max_span(), mq=req.message_queue)
                self.queue_max_span_flow_control_times += 1
                return
        elif not pq.locked:
            self.execute_pull_request_later(req, delay_ex)
            self.log.info("pull message later because not locked in broker, {mq}", mq=req.message_queue)
            return
        elif not req.previously_locked:
            # first pull after the lock: start from the broker's offset for this group
            def fixed(offset: int) -> None:
                self.log.info("the first time to pull message, so fix offset from broker. {mq} "
                              "NewOffset: {offset} brokerBusy: {busy}", mq=req.message_queue,
                              offset=offset, busy=offset < req.next_offset)
                req.previously_locked = True
                req.next_offset = offset
                self._pull(req)

            def failed(f: Failure) -> None:
                self.execute_pull_request_later(req, delay_ex)
                self.log.error("Failed to compute pull offset, {mq}: {why}", mq=req.message_queue,
                               why=f.getErrorMessage())

            self.compute_pull_from_where(req.message_queue).addCallbacks(fixed, failed)
            return
        self._pull(req)

    def _pull(self, req: PullRequest) -> None:
        mq = req.message_queue
        sd = self.rebalance.subscription_inner.get(mq.topic)
        delay_ex = self.client_config.pull_time_delay_mills_when_exception
        if sd is None:
            self.execute_pull_request_later(req, delay_ex)
            self.log.warn("find the consumer's subscription failed, {mq}", mq=mq)
            return
        commit_offset = 0
        if self.message_model is MessageModel.CLUSTERING:
            commit_offset = self.offset_store.memory_offset(mq)
        sub_expression = None
        if self.config.post_subscription_when_pull and not sd.class_filter_mode:
            sub_expression = sd.sub_string
        sys_flag = PullSysFlag.build(commit_offset=commit_offset > 0, suspend=True,
                                     subscription=sub_expression is not None,
                                     class_filter=sd.class_filter_mode)
        begin = self.reactor.seconds()
        d = self.pull_api.pull_kernel(
            mq, sub_expression, sd.expression_type, sd.sub_version, req.next_offset,
            self.config.pull_batch_size, self.config.pull_batch_size_in_bytes, sys_flag,
            max(commit_offset, 0), BROKER_SUSPEND_MAX_TIME_MILLIS, CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND,
        )
        self._pulls.add(d)

        def settled(result: Any) -> Any:
            self._pulls.discard(d)
            return result

        d.addBoth(settled)
        d.addCallbacks(self._arrived, self._pull_failed, callbackArgs=(req, sd, begin), errbackArgs=(req,))
        d.addErrback(lambda f: self.log.failure("pull callback of {mq} failed", f, mq=mq))

    def _arrived(self, raw: PullResult, req: PullRequest, sd: Any, begin: float) -> None:
        """A pull's answer: the next pull goes out before the records are decoded when the flow
        control checks would pass even with all of them put (``_pull_early``)."""
        if self._decodes and any(queued[1] is req for queued in self._decodes):
            # the queue's previous batch first (its decode waits for the next reactor pass, which
            # normally comes before the next read), so that counts and order stay as Java's
            self._decode_early()
        prev = req.next_offset
        early = raw.status is PullStatus.FOUND and self._pull_early(req, raw)
        if early:
            # decoded after this read's other answers have sent their next pulls (a read holds
            # several answers: the last one's pull would otherwise wait for every decode before)
            decodes = self._decodes
            decodes.append((raw, req, sd, begin, prev))
            if len(decodes) == 1:
                self._later(0, self._decode_early)
            return
        try:
            result = self.pull_api.process_pull_result(req.message_queue, raw, sd)
        except Exception:
            self._pull_failed(Failure(), req)
            return
        self._pulled(result, req, begin, prev)

    def _decode_early(self) -> None:
        """Decode the answers whose next pull went out early (``_arrived``), in arrival order."""
        decodes, self._decodes = self._decodes, []
        # the early pulls of one read leave in one write
        self.instance.remoting.flush_writes()
        service = self.consume_service  # concurrent: early pulls are never orderly
        service.gather()
        try:
            for raw, req, sd, begin, prev in decodes:
                try:
                    result = self.pull_api.process_pull_result(req.message_queue, raw, sd)
                except Exception:
                    # the next pull is out already: the batch is skipped, as Java's decoder,
                    # which stops at a malformed record, would skip what follows it
                    self.log.failure("decoding the pull result of {mq} failed", mq=req.message_queue)
                    continue
                try:
                    self._pulled(result, req, begin, prev, True)
                except Exception:
                    self.log.failure("pull callback of {mq} failed", mq=req.message_queue)
        finally:
            service.hand_off()

    def _pull_early(self, req: PullRequest, raw: PullResult) -> bool:
        """Send the next pull of ``req`` now, before ``raw`` is decoded, if ``pull_message`` would
        send it at once after the batch is put: concurrent consumption, no pull interval, and the
        queue's count, size and span still within the thresholds with every record of the batch
        added (plain records only, whose count and body sizes are read off the record heads),
        and listeners in consume threads (a listener run in the reactor has consumed the batch
        before the usual next pull, which then carries the new offset). Java pulls again after
        decoding; here the decode overlaps the next pull's round trip."""
        nxt, prev = raw.next_begin_offset, req.next_offset
        if (self.orderly or nxt <= prev or getattr(self.consume_service.runner, "runs_in_reactor", True)
                or raw.offset_delta is not None or self.paused
                or self.config.pull_interval > 0 or self.state is not ServiceState.RUNNING
                or self._closing):
            return False
        plain = plain_records(raw.body)
        if plain is None or plain[0] == 0:
            return False
        pq = req.process_queue
        if pq.dropped or pq.msg_count + plain[0] > self.pull_threshold_for_queue or \
                (pq.msg_size + plain[1]) // (1024 * 1024) > self.pull_threshold_size_for_queue:
            return False
        # the batch's offsets lie in [prev, nxt)
        first, last = pq.first_offset(), pq.last_offset()
        low = prev if first is None else min(first, prev)
        high = nxt - 1 if last is None else max(last, nxt - 1)
        if high - low > self.config.consume_concurrently_max_span:
            return False
        self.pull_api.pull_from_which_node[req.message_queue] = raw.suggest_which_broker_id
        req.next_offset = nxt
        self.pull_message(req)
        return True

    def _pulled(self, result: PullResult, req: PullRequest, begin: float, prev: int,
                pulled_early: bool = False) -> None:
        mq, pq = req.message_queue, req.process_queue
        status = result.status
        if status is PullStatus.FOUND:
            req.next_offset = result.next_begin_offset
            self.stats.inc_pull_rt(self.group, mq.topic, int((self.reactor.seconds() - begin) * 1000))
            msgs = result.messages
            first = 2**63
            if not msgs:
                if not pulled_early:
                    self.execute_pull_request_immediately(req)
            else:
                first = msgs[0].queue_offset
                self.stats.inc_pull_tps(self.group, mq.topic, len(msgs))
                if self.metrics is not None and self.instance is not None:
                    now = self.now_ms()
                    self.metrics.on_pull(mq.topic, self.group, self.instance.client_id, now - int(begin * 1000),
                                         msgs, now)
                dispatch = pq.put_messages(msgs)
                self.consume_service.submit_consume_request(msgs, pq, mq, dispatch)
                if pulled_early:
                    pass
                elif self.config.pull_interval > 0:
                    self.execute_pull_request_later(req, self.config.pull_interval)
                elif self.state is ServiceState.RUNNING and not self._closing:
                    # the next pull goes out now, not after a timer turn: Java's pull thread takes
                    # the request at once, and the consumer idles while every queue's pull is out
                    self.pull_message(req)
            if result.next_begin_offset < prev or first < prev:
                self.log.warn("[BUG] pull message result maybe data wrong, nextBeginOffset: {nxt} "
                              "firstMsgOffset: {first} prevRequestOffset: {prev}",
                              nxt=result.next_begin_offset, first=first, prev=prev)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            req.next_offset = result.next_begin_offset
            if pq.msg_count == 0 and not pq.dropped:
                # nothing in flight: the offset may move past filtered-out messages
                self.offset_store.update_offset(mq, req.next_offset, True)
            self.execute_pull_request_immediately(req)
        elif status is PullStatus.OFFSET_ILLEGAL:
            self.log.warn("the pull request offset illegal, {mq} {result}", mq=mq, result=result)
            req.next_offset = result.next_begin_offset
            pq.dropped = True
            self._later(0, self._fix_offset, req)

    def _fix_offset(self, req: PullRequest) -> None:
        mq = req.message_queue
        self.offset_store.update_and_freeze_offset(mq, req.next_offset)
        self.offset_store.persist(mq)
        # removing the queue also removes its frozen offset
        self.rebalance.remove_process_queue(mq)
        self.rebalance_service.wakeup()
        self.log.warn("fix the pull request offset, {mq} {offset}", mq=mq, offset=req.next_offset)

    def _pull_failed(self, f: Failure, req: PullRequest) -> None:
        if f.check(CancelledError) and self._closing:
            return
        mq = req.message_queue
        if not is_retry_topic(mq.topic):
            if f.check(SubscriptionNotLatestError):
                self.log.warn("the subscription is not latest, group={group}, messageQueue={mq}",
                              group=self.group, mq=mq)
            else:
                self.log.warn("execute the pull request exception, group={group}, messageQueue={mq}: {why}",
                              group=self.group, mq=mq, why=f.getErrorMessage())
        if f.check(FlowControlError):
            self.execute_pull_request_later(req, PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL)
        else:
            self.execute_pull_request_later(req, self.client_config.pull_time_delay_mills_when_exception)

    # ---- retries ----------------------------------------------------------------------------

    @property
    def max_reconsume_times(self) -> int:
        return 16 if self.config.max_reconsume_times == -1 else self.config.max_reconsume_times

    def reset_retry_and_namespace(self, msgs: Iterable[MessageExt]) -> None:
        """Messages from ``%RETRY%<group>`` show their original topic (RETRY_TOPIC)."""
        group_topic = retry_topic(self.group)
        ns = self.namespace
        for m in msgs:
            if m.topic == group_topic:  # the topic first: most messages need no property parse
                rt = m.get_property(PropertyKey.RETRY_TOPIC)
                if rt is not None:
                    m.topic = rt
            if ns:
                m.topic = without_namespace(m.topic, ns)

    def send_message_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue | None = None) -> Deferred[bool]:
        """CONSUMER_SEND_MSG_BACK to the message's broker; on failure a normal send to
        ``%RETRY%<group>`` (Java ``sendMessageBack``). Fires with False when both failed."""
        assert self.instance is not None
        msg.topic = with_namespace(self.namespace, msg.topic)
        broker_name = (mq.broker_name if mq is not None else None) or msg.broker_name
        if broker_name is not None:
            addr = self.instance.find_broker_address_in_publish(broker_name)
        else:
            addr = "%s:%d" % msg.store_host
        if not addr:
            d: Deferred[Any] = defer.fail(MQClientError(f"Broker[{broker_name}] master node does not exist"))
        else:
            header = ConsumerSendMsgBack.header(
                offset=msg.commit_log_offset, group=self.group, delay_level=delay_level,
                origin_msg_id=msg.msg_id, origin_topic=msg.topic, unit_mode=self.client_config.unit_mode,
                max_reconsume_times=self.max_reconsume_times, bname=broker_name)
            d = self.instance.broker_call(addr, ConsumerSendMsgBack, header, timeout=SEND_BACK_TIMEOUT)
            d.addCallback(lambda _: True)

        def fallback(f: Failure) -> Deferred[bool]:
            self.log.error("Failed to send message back, consumerGroup={group}, brokerName={name}, "
                           "msgId={id}: {why}", group=self.group, name=broker_name, id=msg.msg_id,
                           why=f.getErrorMessage())
            return self.send_message_back_as_normal(msg, self.max_reconsume_times)

        def restore(result: Any) -> Any:
            msg.topic = without_namespace(msg.topic, self.namespace)
            return result

        return d.addErrback(fallback).addBoth(restore)

    def send_message_back_as_normal(self, msg: MessageExt, max_reconsume_times: int) -> Deferred[bool]:
        """A normal send of a copy to ``%RETRY%<group>`` with DELAY = 3 + reconsume times."""
        if self.inner_producer is None:
            return defer.succeed(False)
        new = Message(retry_topic(self.group), msg.body, flag=msg.flag)
        props = dict(msg.properties)
        origin = props.get(PropertyKey.ORIGIN_MESSAGE_ID)
        props[PropertyKey.ORIGIN_MESSAGE_ID] = origin if origin and origin.strip() else msg.msg_id
        props[PropertyKey.RETRY_TOPIC] = msg.topic
        props[PropertyKey.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[PropertyKey.MAX_RECONSUME_TIMES] = str(max_reconsume_times)
        props.pop(PropertyKey.TRANSACTION_PREPARED, None)
        props[PropertyKey.DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        new.properties.clear()
        new.properties.update(props)

        def failed(f: Failure) -> bool:
            self.log.error("sendMessageBack as a normal message failed, group: {group} msg: {id}: {why}",
                           group=self.group, id=msg.msg_id, why=f.getErrorMessage())
            return False

        return self.inner_producer.send(new).addCallbacks(lambda _: True, failed)

    def clean_expired_messages(self) -> Deferred[None]:
        """Java ``cleanExpiredMsg``: a message consumed for longer than ``consume_timeout``
        minutes is sent back (delay level 3) and dropped from its queue (at most 16 per queue)."""
        if self.orderly or self.rebalance is None:
            return defer.succeed(None)
        limit = self.config.consume_timeout * 60 * 1000
        d: Deferred[Any] = defer.succeed(None)
        for pq in list(self.rebalance.process_queue_table.values()):
            for _ in range(min(len(pq.msg_tree), 16)):
                first = pq.first_offset()
                msg = pq.msg_tree.get(first) if first is not None else None
                started = msg.properties.get(PropertyKey.CONSUME_START_TIMESTAMP) if msg else None
                if msg is None or not started or self.now_ms() - int(started) <= limit:
                    break

                def back(_: Any, msg: MessageExt = msg, pq: ProcessQueue = pq) -> Deferred[None]:
                    def sent(_: Any) -> None:
                        if pq.first_offset() == msg.queue_offset:
                            pq.remove_messages([msg])

                    return self.send_message_back(msg, 3).addCallback(sent)

                d.addCallback(back)
                break  # the next expired message is looked at after this one left the queue
        return d.addErrback(lambda f: self.log.error("send expired msg exception: {why}", why=f.getErrorMessage()))

    # ---- what the client instance and the broker's requests use -----------------------------

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.message_model,
            consume_from_where=self.config.consume_from_where,
            subscription_data_set=list(self.rebalance.subscription_inner.values()) if self.rebalance else [],
            unit_mode=self.client_config.unit_mode,
        )

    def cached_queues(self) -> list[tuple[MessageQueue, ProcessQueue]]:
        """The assigned queues and their process queues (the client metrics' cached gauges)."""
        return list(self.rebalance.process_queue_table.items()) if self.rebalance is not None else []

    def subscribed_topics(self) -> Iterable[str]:
        return list(self.rebalance.subscription_inner) if self.rebalance else []

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        r = self.rebalance
        return r is not None and topic in r.subscription_inner and topic not in r.topic_subscribe_info_table

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        r = self.rebalance
        if r is not None and topic in r.subscription_inner:
            r.topic_subscribe_info_table[topic] = mqs

    def consumer_running_info(self) -> ConsumerRunningInfo:
        info = ConsumerRunningInfo()
        props = running_info_properties(self, "DefaultMQPushConsumer")
        props["PROP_CONSUMEORDERLY"] = "true" if self.orderly else "false"
        props["PROP_THREADPOOL_CORE_SIZE"] = str(self.consume_service.core_pool_size if self.consume_service else 0)
        props["PROP_CONSUMER_START_TIMESTAMP"] = str(self.start_timestamp)
        info.properties = props
        subs = list(self.rebalance.subscription_inner.values())
        info.subscription_set = subs
        for mq, pq in self.rebalance.process_queue_table.items():
            info.mq_table[mq] = pq.fill_process_queue_info(self.offset_store.memory_offset(mq))
        for sd in subs:
            if sd.topic is not None:
                info.status_table[sd.topic] = self.stats.consume_status(self.group, sd.topic)
        return info

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    def consumer_status(self, topic: str | None) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic) if self.offset_store else {}

    def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> Deferred[dict[str, Any]]:
        return self.consume_service.consume_message_directly(msg, broker_name)

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> Deferred[None]:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the topic's queues, wait until their listeners are
        idle (at most 10 s, Java's fixed wait), set the offsets and rebalance from them."""
        self.suspend()
        table = self.rebalance.process_queue_table
        affected = {mq: pq for mq, pq in table.items() if mq.topic == topic and mq in offsets}
        for pq in affected.values():
            pq.dropped = True
            pq.clear()
        deadline = self.reactor.seconds() + RESET_OFFSET_WAIT
        done: Deferred[None] = Deferred()

        def idle() -> None:
            busy = any(pq.consuming_tasks for pq in affected.values())
            if busy and self.reactor.seconds() < deadline and self.state is ServiceState.RUNNING:
                self.reactor.callLater(0.05, idle)
                return
            try:
                for mq, pq in affected.items():
                    self.offset_store.update_offset(mq, offsets[mq], False)
                    self.rebalance.remove_unnecessary_message_queue(mq, pq)
                    if table.get(mq) is pq:
                        del table[mq]
            finally:
                self.resume()
            done.callback(None)

        idle()
        return done

