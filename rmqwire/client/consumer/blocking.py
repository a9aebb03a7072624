"""The blocking consumers users call: ``rmqwire.PushConsumer``, ``rmqwire.PullConsumer`` (Java's
``DefaultLitePullConsumer``) and ``QueuePuller`` (pull any queue from any offset).

The Twisted cores run in the reactor thread (crochet, through ``rmqwire.client.blocking``);
these classes hand calls to it and wait. Push listeners run in ``consume_thread_min`` consume
threads, never in the reactor thread. Consumers created here share the process's
``ClientManager`` with the blocking producers, so members with the same client id share one
client instance, as Java's ``MQClientManager`` does. ``shutdown()`` persists offsets, sends
UNREGISTER_CLIENT and waits for the consume threads (a listener still running after
``shutdown_timeout`` is left to finish on its own; the threads are daemons).
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rmqwire.client import blocking as _facade
from rmqwire.client.config import ClientConfig, without_namespace
from rmqwire.client.consumer.consume_service import ThreadRunner
from rmqwire.client.consumer.lite_pull_consumer import LitePullConsumer as _CoreLitePull
from rmqwire.client.consumer.lite_pull_consumer import split_lite_options
from rmqwire.client.consumer.pull import Puller, PullResult
from rmqwire.client.consumer.push_consumer import PushConsumer as _CorePush
from rmqwire.client.consumer.push_consumer import ServiceState, split_options
from rmqwire.client.consumer.subscription import SUB_ALL, MessageSelector
from rmqwire.client.instance import ClientInstance
from rmqwire.client.producer.blocking import shared_manager
from rmqwire.codec.message import MessageExt
from rmqwire.errors import MQClientError
from rmqwire.model import ExpressionType, MessageQueue

__all__ = ["PullConsumer", "PushConsumer", "QueuePuller"]

#: Bound on start and shutdown (route lookups, heartbeats, offsets, UNREGISTER_CLIENT).
LIFECYCLE_TIMEOUT = 30.0
#: Extra wait beyond a call's own timeout before the blocking caller gives up on the reactor.
WAIT_SLACK = 5.0


class PushConsumer:
    """A blocking push consumer (Java ``DefaultMQPushConsumer``)::

        c = PushConsumer("my_group", namesrv_addr="127.0.0.1:9876",
                         consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        c.subscribe("TopicTest", "TagA || TagB")
        c.register_listener(lambda msgs: ConsumeResult.SUCCESS)
        c.start(); ...; c.shutdown()

    Options: ``rmqwire.client.consumer.push_consumer.PushConsumerConfig`` and
    ``rmqwire.client.config.ClientConfig`` fields (Java's names in snake_case).
    """

    def __init__(self, group: str, namesrv_addr: str | Sequence[str] | None = None, **options: Any) -> None:
        split_options(options)  # unknown options fail here, in the caller's thread
        self.group = group
        self.namesrv_addr = namesrv_addr
        self._options = options
        self._subscriptions: dict[str, str | MessageSelector] = {}
        self._listener: Callable[..., Any] | None = None
        self._orderly = False
        self._core: _CorePush | None = None
        self._runner: ThreadRunner | None = None
        self._lock = threading.Lock()
        self.shutdown_timeout = LIFECYCLE_TIMEOUT

    @property
    def core(self) -> _CorePush:
        """The Twisted core (touch it only in the reactor thread)."""
        if self._core is None:
            raise RuntimeError("the consumer is not started")
        return self._core

    def subscribe(self, topic: str, expression: str | MessageSelector | None = SUB_ALL) -> None:
        self._subscriptions[topic] = expression or SUB_ALL
        if self._core is not None:
            _facade.call(self._core.subscribe, topic, expression, timeout=LIFECYCLE_TIMEOUT)

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        if self._core is not None:
            _facade.call(self._core.unsubscribe, topic, timeout=LIFECYCLE_TIMEOUT)

    def register_listener(self, listener: Callable[..., Any], orderly: bool = False) -> None:
        """``listener(msgs)`` or ``listener(msgs, context)`` -> ConsumeResult, run in the consume
        threads; ``orderly=True`` for per-queue order (Java ``MessageListenerOrderly``)."""
        if not callable(listener):
            raise TypeError("the listener must be callable")
        self._listener, self._orderly = listener, orderly

    def start(self) -> None:
        with self._lock:
            if self._core is not None:
                raise RuntimeError("the consumer was started already")
            reactor = _facade.ensure_reactor()
            self._core = _facade.call(self._build, reactor, timeout=LIFECYCLE_TIMEOUT)
        try:
            _facade.call(self._core.start, timeout=LIFECYCLE_TIMEOUT)
        except BaseException:
            self._join_runner()
            raise

    def _build(self, reactor: Any) -> _CorePush:
        client_opts, consumer_opts = split_options(dict(self._options))
        threads = consumer_opts.get("consume_thread_min", 20)
        self._runner = ThreadRunner(reactor, threads, f"ConsumeMessageThread_{self.group[:100]}")
        core = _CorePush(reactor, self.group, namesrv_addr=self.namesrv_addr,
                         manager=shared_manager(reactor), runner=self._runner, **self._options)
        for topic, expression in self._subscriptions.items():
            core.subscribe(topic, expression)
        if self._listener is not None:
            core.register_listener(self._listener, self._orderly)
        return core

    def shutdown(self) -> None:
        """Persist offsets, unregister from the brokers, stop the consume threads; idempotent."""
        core = self._core
        if core is None:
            return
        _facade.call(core.shutdown, timeout=self.shutdown_timeout)
        self._join_runner()

    def _join_runner(self) -> None:
        if self._runner is not None:
            self._runner.stop()
            self._runner.join(self.shutdown_timeout)

    def suspend(self) -> None:
        _facade.call(self.core.suspend, timeout=LIFECYCLE_TIMEOUT)

    def resume(self) -> None:
        _facade.call(self.core.resume, timeout=LIFECYCLE_TIMEOUT)

    @property
    def client_id(self) -> str:
        return self.core.instance.client_id if self._core and self._core.instance else ""

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class PullConsumer:
    """A blocking lite pull consumer (Java ``DefaultLitePullConsumer``)::

        with PullConsumer("my_group", namesrv_addr="127.0.0.1:9876") as pc:
            pc.subscribe("TopicTest", "*")          # group rebalance; or pc.assign([...])
            msgs = pc.poll(timeout=1.0)
            pc.commit()                             # auto-commit by default, as Java

    ``poll`` returns the messages of one pulled batch (at most ``pull_batch_size``, 10) and moves
    the consume offset past them; offsets are committed every ``auto_commit_interval_millis``
    (with ``auto_commit``) and persisted every ``persist_consumer_offset_interval`` and at
    shutdown.
    """

    def __init__(self, group: str, namesrv_addr: str | Sequence[str] | None = None, **options: Any) -> None:
        split_lite_options(options)
        self.group = group
        self.namesrv_addr = namesrv_addr
        self._options = options
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._core: _CoreLitePull | None = None
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._sink: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._reactor: Any = None
        self.timeout = LIFECYCLE_TIMEOUT

    @property
    def core(self) -> _CoreLitePull:
        if self._core is None:
            raise RuntimeError("the consumer is not started")
        return self._core

    def _do(self, name: str, *args: Any) -> Any:
        if self._core is None:
            self._pending.append((name, args))
            return None
        return _facade.call(getattr(self._core, name), *args, timeout=self.timeout)

    def subscribe(self, topic: str, expression: str | MessageSelector | None = SUB_ALL) -> None:
        self._do("subscribe", topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._do("unsubscribe", topic)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        self._do("assign", list(mqs))

    def set_sub_expression_for_assign(self, topic: str, expression: str) -> None:
        self._do("set_sub_expression_for_assign", topic, expression)

    def start(self) -> None:
        with self._lock:
            if self._core is not None:
                raise RuntimeError("the consumer was started already")
            reactor = _facade.ensure_reactor()
            self._core = _facade.call(self._build, reactor, timeout=LIFECYCLE_TIMEOUT)
        _facade.call(self._core.start, timeout=LIFECYCLE_TIMEOUT)

    def _build(self, reactor: Any) -> _CoreLitePull:
        core = _CoreLitePull(reactor, self.group, namesrv_addr=self.namesrv_addr,
                             manager=shared_manager(reactor), **self._options)
        core.deliver_to(self._sink)
        self._reactor = reactor
        for name, args in self._pending:
            getattr(core, name)(*args)
        self._pending.clear()
        return core

    def shutdown(self) -> None:
        core = self._core
        if core is not None:
            _facade.call(core.shutdown, timeout=LIFECYCLE_TIMEOUT)

    def __enter__(self) -> PullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The next batch of messages, waiting up to ``timeout`` seconds (default
        ``poll_timeout_millis``, 5 s); [] when none came."""
        core = self.core
        seconds = core.config.poll_timeout_millis / 1000 if timeout is None else timeout
        if seconds < 0:
            raise ValueError("Timeout must not be negative")
        # Batches come straight from the reactor through a thread-safe queue; the reactor is
        # told afterwards (callFromThread), so a poll costs no round trip.
        deadline = time.monotonic() + seconds
        with self._poll_lock:
            while True:
                if core.state is not ServiceState.RUNNING:
                    raise MQClientError("The consumer not running, please start it first.")
                try:
                    req = self._sink.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    self._reactor.callFromThread(core.discarded, None)
                    return []
                if req is None:  # closing
                    continue
                if req.stale:
                    self._reactor.callFromThread(core.discarded, req)
                    continue
                self._reactor.callFromThread(core.handed_out, req)
                msgs = req.msgs
                if core.namespace:
                    for m in msgs:
                        m.topic = without_namespace(m.topic, core.namespace)
                return msgs

    def seek(self, mq: MessageQueue, offset: int) -> None:
        _facade.call(self.core.seek, mq, offset, timeout=self.timeout)

    def seek_to_begin(self, mq: MessageQueue) -> None:
        _facade.call(self.core.seek_to_begin, mq, timeout=self.timeout)

    def seek_to_end(self, mq: MessageQueue) -> None:
        _facade.call(self.core.seek_to_end, mq, timeout=self.timeout)

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return _facade.call(self.core.offset_for_timestamp, mq, timestamp_ms, timeout=self.timeout)

    def committed(self, mq: MessageQueue) -> int:
        return _facade.call(self.core.committed, mq, timeout=self.timeout)

    def commit(self, offsets: Mapping[MessageQueue, int] | Iterable[MessageQueue] | None = None,
               persist: bool = False) -> None:
        """Commit the consume offsets of every assigned queue (``offsets=None``), of some queues,
        or the given offsets; ``persist=True`` also writes them to the broker now."""
        _facade.call(self.core.commit, offsets, persist, timeout=self.timeout)

    def commit_sync(self) -> None:
        self.commit()

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        _facade.call(self.core.pause, list(mqs), timeout=self.timeout)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        _facade.call(self.core.resume, list(mqs), timeout=self.timeout)

    def assignment(self) -> set[MessageQueue]:
        return _facade.call(self.core.assignment, timeout=self.timeout)

    def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        return _facade.call(self.core.fetch_message_queues, topic, timeout=self.timeout)


class QueuePuller:
    """Pull any queue from any offset, blocking (for tools such as ``tail`` and for Spark
    executors; nothing Twisted is kept by the caller)::

        with QueuePuller("my_group", namesrv_addr="127.0.0.1:9876") as p:
            for mq in p.fetch_message_queues("TopicTest"):
                r = p.pull(mq, p.min_offset(mq), 32)      # PullResult(status, messages, ...)
    """

    def __init__(self, group: str, namesrv_addr: str | Sequence[str] | None = None, **options: Any) -> None:
        self.group = group
        self.config = ClientConfig(namesrv_addr=namesrv_addr, **options)
        self._instance: ClientInstance | None = None
        self._puller: Puller | None = None
        self.timeout = LIFECYCLE_TIMEOUT

    def start(self) -> None:
        reactor = _facade.ensure_reactor()

        def build() -> None:
            self._instance = shared_manager(reactor).instance_for(self.config)
            self._instance.startService()
            self._puller = Puller(self._instance, self.group)

        _facade.call(build, timeout=self.timeout)

    def shutdown(self) -> None:
        instance = self._instance
        if instance is None:
            return
        self._instance = None
        reactor = _facade.ensure_reactor()
        _facade.call(lambda: shared_manager(reactor).release(instance), timeout=self.timeout)

    def __enter__(self) -> QueuePuller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def puller(self) -> Puller:
        if self._puller is None:
            raise RuntimeError("the puller is not started")
        return self._puller

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *,
             expression: str = SUB_ALL, expression_type: str = ExpressionType.TAG,
             suspend_millis: int = 0, timeout_millis: int | None = None) -> PullResult:
        """One pull of ``mq`` from ``offset``; with ``suspend_millis`` the broker may hold it
        (long polling) until a message arrives."""
        call = functools.partial(self.puller.pull, mq, offset, max_nums, expression=expression,
                                 expression_type=expression_type, suspend_millis=suspend_millis,
                                 timeout_millis=timeout_millis)
        wait = (timeout_millis or 30_000) / 1000 + WAIT_SLACK
        return _facade.call(call, timeout=wait)

    def max_offset(self, mq: MessageQueue) -> int:
        return _facade.call(self.puller.max_offset, mq, timeout=self.timeout)

    def min_offset(self, mq: MessageQueue) -> int:
        return _facade.call(self.puller.min_offset, mq, timeout=self.timeout)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return _facade.call(self.puller.search_offset, mq, timestamp_ms, timeout=self.timeout)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return _facade.call(self.puller.fetch_message_queues, topic, timeout=self.timeout)
