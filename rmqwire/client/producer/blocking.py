"""The blocking producers users call: ``rmqwire.Producer`` and ``rmqwire.TransactionProducer``.

Each method hands the work to the Twisted core in the reactor thread (crochet, through
``rmqwire.client.blocking``) and waits for the result; any number of threads may call one
producer at once. Nothing Twisted is touched outside the reactor thread but by a plain ``send``
that its caller writes itself while the reactor waits for I/O (holding the reactor lock: see
``submit_to(..., here=True)``), and user code (selectors excepted, which must be quick) never
runs in it: ``send_async`` callbacks and transaction check listeners run in the reactor's thread
pool, local transactions in the calling thread.

Producers created here share one ``ClientManager`` per process, so producers with the same client
id (an explicit ``instance_name``) share one client instance, as Java's ``MQClientManager`` does.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.logger import Logger, LogLevel
from twisted.python import threadable
from twisted.python.failure import Failure

from rmqwire.client import blocking as _facade
from rmqwire.client.config import with_namespace
from rmqwire.client.instance import ClientManager
from rmqwire.client.message import (
    LocalTransactionState,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from rmqwire.client.producer.producer import Producer as _CoreProducer
from rmqwire.client.producer.producer import ServiceState, split_options
from rmqwire.client.producer.selector import MessageQueueSelector
from rmqwire.client.producer.transaction import (
    TransactionProducer as _CoreTransactionProducer,
)
from rmqwire.client.validators import check_message
from rmqwire.codec.message import Message, MessageExt, PropertyKey
from rmqwire.errors import MQClientError, RemotingTooManyRequestsError
from rmqwire.model import MessageQueue

#: Extra wait beyond a call's own timeout before the blocking caller gives up on the reactor.
WAIT_SLACK = 5.0
#: At most this many returned ``send_oneway`` calls wait for the reactor thread to write them
#: (the core's ``max_inflight_oneway`` caps the writes after). The reactor encodes more slowly than
#: callers queue: 65535 queued messages were seconds of backlog that starved heartbeats and
#: timed out (measured at load 20 on 2 cores); 1024 is about 50 ms of the reactor's work.
ONEWAY_HANDOFF_WINDOW = 1024
#: Bound on start (no network) and shutdown (UNREGISTER_CLIENT calls, then closing connections).
LIFECYCLE_TIMEOUT = 30.0

UNIQ_KEY = PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_log = Logger(namespace="rmqwire.client.producer")
_manager_lock = threading.Lock()
_managers: dict[int, ClientManager] = {}


def shared_manager(reactor: Any) -> ClientManager:
    """The process's ClientManager for ``reactor`` (one reactor per process in practice)."""
    with _manager_lock:
        m = _managers.get(id(reactor))
        if m is None:
            m = _managers[id(reactor)] = ClientManager(reactor)
        return m


class _OnewaySink:
    """The outcome of a queued ``send_oneway``: its slot is given back, a failure logged."""

    __slots__ = ("slots", "deferred")

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self.slots = slots
        self.deferred: Deferred[Any] | None = None

    def ok(self, result: Any) -> None:
        self.slots.release()

    def fail(self, failure: Failure) -> None:
        self.slots.release()
        if not failure.check(_facade.ReactorStoppedError):
            _log.failure("send_oneway failed after it returned", failure, level=LogLevel.warn)


class Producer:
    """A blocking producer (Java ``DefaultMQProducer``)::

        with Producer("my_group", namesrv_addr="127.0.0.1:9876") as p:
            r = p.send(Message("TopicTest", b"hello", tags="TagA"))

    Options are Java's in snake_case (``send_msg_timeout=3000``, ``retry_times_when_send_failed``,
    ``compress_type="LZ4"``, ``access_key``/``secret_key``, ``serialize_type``, ...): see
    ``rmqwire.client.producer.ProducerConfig`` and ``rmqwire.client.config.ClientConfig``.
    """

    _core_class: type[_CoreProducer] = _CoreProducer

    def __init__(self, group: str, namesrv_addr: str | Sequence[str] | None = None, **options: Any) -> None:
        split_options(options)  # unknown options fail here, in the caller's thread
        self.group = group
        self.namesrv_addr = namesrv_addr
        self._options = options
        self._core: _CoreProducer | None = None
        self._lock = threading.Lock()
        self._async_window: _facade.Window | None = None
        self._oneway_slots: threading.BoundedSemaphore | None = None
        self._reactor: Any = None
        self._here = False  # sync sends may be written by the caller (see start)

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def core(self) -> _CoreProducer:
        """The Twisted core (touch it only in the reactor thread)."""
        if self._core is None:
            raise RuntimeError("the producer is not started")
        return self._core

    def start(self) -> None:
        with self._lock:
            if self._core is not None:
                raise RuntimeError("the producer was started already")
            self._reactor = reactor = _facade.ensure_reactor()
            self._core = _facade.call(self._build, reactor, timeout=LIFECYCLE_TIMEOUT)
            self._async_window = _facade.Window(self._core.config.max_inflight_async)
            self._oneway_slots = threading.BoundedSemaphore(
                min(self._core.config.max_inflight_oneway, ONEWAY_HANDOFF_WINDOW))
        _facade.call(self._core.start, timeout=LIFECYCLE_TIMEOUT)
        # A sync send is written by its caller while the reactor waits for I/O, but for user code
        # (RPC hooks: they would run there holding the reactor) and TLS (kept to the reactor)
        instance = self._core.instance
        rc = instance.remoting.config if instance is not None else None
        self._here = rc is not None and not rc.rpc_hooks and rc.tls is None

    def _build(self, reactor: Any) -> _CoreProducer:
        return self._core_class(reactor, self.group, namesrv_addr=self.namesrv_addr,
                                manager=shared_manager(reactor), **self._core_options())

    def _core_options(self) -> dict[str, Any]:
        return dict(self._options)

    def shutdown(self) -> None:
        """Unregister from the brokers and close connections; idempotent."""
        core = self._core
        if core is None:
            return
        _facade.call(core.shutdown, timeout=LIFECYCLE_TIMEOUT)

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---- sending -------------------------------------------------------------------------------

    def _wait(self, timeout: float | None) -> float:
        budget = self.core.config.send_msg_timeout / 1000 if timeout is None else timeout
        return budget + WAIT_SLACK

    def send(
        self,
        msg: Message | Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (retrying as Java's sync send); ``timeout`` is the
        whole budget in seconds (default ``send_msg_timeout``). A list sends one batch."""
        core = self.core
        if threadable.isInIOThread():
            raise _facade.ReactorThreadError(
                "blocking send from the reactor thread would deadlock; use the core's Deferred API")
        waiter = _facade.Waiter("Producer.send")
        if queue is None and selector is None and timeout is None:
            # the common case settles the waiter from the response: no Deferred per send
            _facade.submit_to(core.send_to, msg, sink=waiter, here=self._here)
            if waiter._done and waiter.error is None:
                # the usual sync send: this thread read its answer (run_here), nothing to wait for
                return waiter.result
        else:
            _facade.submit(core.send, msg, sink=waiter, queue=queue, selector=selector, arg=arg,
                           timeout=timeout)
        return waiter.wait(self._wait(timeout))

    def send_oneway(
        self,
        msg: Message | Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for the broker.

        As Java's ``invokeOneway`` (which returns after queueing the write): once the topic's
        route is known, a single message is validated here and queued for the reactor thread, and
        the call returns; a failure after that is logged. At most ``ONEWAY_HANDOFF_WINDOW`` (or
        ``max_inflight_oneway`` when smaller) are queued or being written; a caller beyond that
        waits up to ``send_msg_timeout``. A first
        send to a topic, a batch, a queue or a selector wait for the write, so a missing route
        raises here as in Java.
        """
        core = self.core
        if (queue is None and selector is None and isinstance(msg, Message)
                and core.state is ServiceState.RUNNING and self._route_known(core, msg.topic)):
            check_message(msg, core.config.max_message_size)
            instance = core.instance
            if instance is not None and UNIQ_KEY not in msg.properties:
                # as Java, the id is set before the call returns (msg.unique_key is read after)
                msg.properties[UNIQ_KEY] = instance.unique_ids.next_id()  # generator is locked
            slots = self._oneway_slots
            assert slots is not None
            if not slots.acquire(timeout=core.config.send_msg_timeout / 1000):
                raise RemotingTooManyRequestsError(
                    "send_oneway tryAcquire semaphore timeout, waiting thread nums: "
                    f"{core.config.max_inflight_oneway}")
            _facade.submit(core.send_oneway_written, msg, sink=_OnewaySink(slots))
            return
        _facade.call(core.send_oneway, msg, queue=queue, selector=selector, arg=arg,
                     timeout=self._wait(None))

    @staticmethod
    def _route_known(core: _CoreProducer, topic: str) -> bool:
        # a read of the core's cache from this thread: a stale answer only picks the slow path,
        # or queues a send whose failure is then logged (the route went away meanwhile)
        namespace = core.client_config.namespace
        info = core.publish_info.get(with_namespace(namespace, topic) if namespace else topic)
        return info is not None and info.ok()

    def send_async(
        self,
        msg: Message | Sequence[Message],
        callback: Callable[[concurrent.futures.Future[SendResult]], Any] | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return at once with a Future of its SendResult.

        ``callback(future)`` runs in a worker thread when the send ends. At most
        ``max_inflight_async`` sends are pending; a caller beyond that waits (up to the timeout)
        for one to end, so a fast sender cannot queue without bound.
        """
        core = self.core
        window = self._async_window
        assert window is not None
        # the future is the send's sink too; its window slot is set once taken
        fut: _facade.SinkFuture = _facade.SinkFuture()
        if callback is not None:
            reactor = self._reactor
            fut.add_done_callback(lambda f: reactor.callFromThread(reactor.callInThread, callback, f))
        budget = core.config.send_msg_timeout / 1000 if timeout is None else timeout
        if not window.acquire(budget):
            fut.set_exception(RemotingTooManyRequestsError(
                "send message tryAcquire semaphoreAsyncNum timeout"))
            return fut
        # the slot goes back when the send ends (not when a caller cancels the future)
        fut.window = window
        try:
            if queue is None and selector is None and arg is None and timeout is None:
                # the common case settles the sink from the response: no Deferred per send
                _facade.submit_to(core.send_async_to, msg, sink=fut)
            else:
                _facade.submit(core.send_async, msg, sink=fut, queue=queue, selector=selector,
                               arg=arg, timeout=timeout)
        except BaseException:
            fut.window = None
            window.release()
            raise
        return fut

    def request(self, msg: Message, timeout: float = 3.0, *, queue: MessageQueue | None = None,
                selector: MessageQueueSelector | None = None, arg: Any = None) -> MessageExt:
        """Send a request message and wait for its reply (Java ``DefaultMQProducer.request``)."""
        request = functools.partial(self.core.request, msg, timeout, queue=queue,
                                    selector=selector, arg=arg)
        return _facade.call(request, timeout=timeout + WAIT_SLACK)


class TransactionProducer(Producer):
    """A blocking transactional producer (Java ``TransactionMQProducer``)::

        def check(msg):                      # the broker asks about an unresolved transaction
            return LocalTransactionState.COMMIT_MESSAGE
        with TransactionProducer("tx_group", namesrv_addr=ns, check_listener=check) as p:
            r = p.send_message_in_transaction(msg, lambda msg, arg: LocalTransactionState.COMMIT_MESSAGE)

    The local transaction runs in the calling thread; ``check_listener(msg)`` runs in a worker
    thread of the reactor's pool whenever a broker sends CHECK_TRANSACTION_STATE.
    """

    _core_class = _CoreTransactionProducer

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        check_listener: Callable[[MessageExt], LocalTransactionState | None] | None = None,
        local_transaction: Callable[[Message, Any], LocalTransactionState | None] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.check_listener = check_listener
        self.local_transaction = local_transaction

    def _core_options(self) -> dict[str, Any]:
        listener = self.check_listener
        reactor = self._reactor
        check = None
        if listener is not None:
            def check(msg: MessageExt) -> Deferred[LocalTransactionState | None]:
                return threads.deferToThreadPool(reactor, reactor.getThreadPool(), listener, msg)
        return {**self._options, "check_listener": check}

    def send_message_in_transaction(
        self,
        msg: Message,
        local_transaction: Callable[[Message, Any], LocalTransactionState | None] | None = None,
        arg: Any = None,
    ) -> TransactionSendResult:
        """Send the half message, run ``local_transaction(msg, arg)`` here, then commit, roll back
        or leave it to the broker's check (UNKNOW), as the returned state says."""
        core = self.core
        local = local_transaction or self.local_transaction
        if local is None and self.check_listener is None:
            raise MQClientError("tranExecutor is null")
        result = _facade.call(core.send_half_message, msg, timeout=self._wait(None))
        state = LocalTransactionState.ROLLBACK_MESSAGE
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            _facade.call(core.prepare_local, msg, result, timeout=self._wait(None))
            state = LocalTransactionState.UNKNOW
            if local is not None:
                try:
                    state = local(msg, arg) or LocalTransactionState.UNKNOW
                except Exception as e:  # Java: logged, the transaction stays unknown
                    error = e
                    state = LocalTransactionState.UNKNOW
        # as Java: a failed END_TRANSACTION is logged (by the core); the broker's check resolves it
        _facade.call(core.end_transaction_logged, msg, result, state, error, timeout=self._wait(None))
        return core.result_for(result, state)
