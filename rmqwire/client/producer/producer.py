"""The Twisted producer core: every send mode of Java's ``DefaultMQProducer``, as Deferreds.

Behaviour of ``DefaultMQProducerImpl`` / ``MQClientAPIImpl`` (5.3.3):

- ``send`` (Java's sync send): route lookup as ``tryToFindTopicPublishInfo`` (cache, else the
  NameServer, else the TBW102 route for auto-creation), then up to 1 + ``retry_times_when_send_
  failed`` attempts, each on a queue picked by ``MQFaultStrategy`` (another broker than the last
  attempt's), all within one ``send_msg_timeout`` budget. A remoting failure or a response code in
  ``retry_response_codes`` tries again; any other broker error is raised at once. When every
  attempt failed: ``MQClientError("Send [n] times, still failed, ...")`` whose ``__cause__`` is the
  last error; a spent budget: ``RemotingTimeoutError("sendDefaultImpl call timeout")``.
- ``send_async``: one attempt; a transport failure retries (``retry_times_when_send_async_failed``
  times, on another broker when there is one) as ``onExceptionImpl``; a broker error does not.
  At most ``max_inflight_async`` are pending (Java's async semaphore; waiting counts against the
  timeout).
- ``send_oneway``: one attempt, nothing awaited but the write; at most ``max_inflight_oneway``
  waiting for a full connection to drain.
- ``queue=``: that queue only, no retry; ``selector=``: ``selector(queues, message, arg)`` picks a
  queue of the route (ordered messages), no retry; a list of messages: one SEND_BATCH_MESSAGE.

Each message gets its UNIQ_KEY (Java's id layout) once, on the caller's Message, so ``msg_id`` is
the same on every attempt; bodies of at least ``compress_msg_body_over_howmuch`` bytes are sent
compressed (zlib level 5 by default, lz4/zstd selectable) with Java's sysFlag bits; the caller's
body is never changed. Validation (``rmqwire.client.validators``) fails before anything is sent.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter, setitem
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.config import (
    RETRY_GROUP_TOPIC_PREFIX,
    ClientConfig,
    with_namespace,
    without_namespace,
)
from rmqwire.client.instance import ClientInstance, ClientManager, suggest_todo
from rmqwire.client.message import (
    REPLY_MESSAGE_FLAG,
    Message,
    SendResult,
    SendStatus,
    new_send_result,
)
from rmqwire.client.metrics import metrics_for
from rmqwire.client.producer.selector import (
    LATENCY_MAX,
    NOT_AVAILABLE_DURATION,
    MessageQueueSelector,
    MQFaultStrategy,
)
from rmqwire.client.route import TopicPublishInfo
from rmqwire.client.validators import (
    check_message,
    check_message_body,
    check_not_allowed_send_topic,
    check_producer_group,
    check_topic,
)
from rmqwire.codec.codes import ResponseCode, SerializeType
from rmqwire.codec.commands import Response
from rmqwire.codec.commands.send import (
    SendBatchMessage,
    SendMessage,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageV2,
    SendPrepared,
    SendReplyMessage,
    SendReplyMessageV2,
    SendRequestTemplate,
)
from rmqwire.codec.commands.transaction import CheckTransactionStateRequestHeader
from rmqwire.codec.frame import RemotingCommand, json_quote
from rmqwire.codec.header_scan import (
    CODE,
    SEND_OK_FIELDS,
    SEND_OK_QUEUE_ID,
    scanned_command,
    scanned_ext_fields,
)
from rmqwire.codec.message import (
    CompressionType,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    compress,
    encode_batch,
    encode_batch_alike,
    encode_batch_run,
    encode_properties,
)
from rmqwire.codec.message import Message as CodecMessage
from rmqwire.errors import (
    BrokerResponseError,
    ClientErrorCode,
    MQClientError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
    RequestTimeoutError,
)
from rmqwire.model import MessageQueue
from rmqwire.remoting.connection import PendingCall

#: Java ``DefaultMQProducer.retryResponseCodes``.
RETRY_RESPONSE_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY,
    ResponseCode.NO_PERMISSION,
    ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT,
    ResponseCode.GO_AWAY,
})

_STATUS_OF = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

_TRAN_PREPARED = int(MessageSysFlag.TRANSACTION_PREPARED_TYPE)
_UNIQ = PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_WAIT = PropertyKey.WAIT_STORE_MSG_OK
_DELAY = PropertyKey.DELAY_TIME_LEVEL
#: Java MessageConst.PROPERTY_INNER_MULTI_DISPATCH, which check_message_body looks at
_LMQ = "INNER_MULTI_DISPATCH"
_props_of = attrgetter("properties")
_uniq_of = itemgetter(_UNIQ)


def _batch_ids(messages: list[CodecMessage]) -> str:
    """A batch's msg_id (Java ``MessageBatch``'s uniq ids joined): each message's UNIQ_KEY, ""
    for a missing or empty one. The usual batch (every message tagged) is joined at C speed."""
    try:
        return ",".join(map(_uniq_of, map(_props_of, messages)))
    except (KeyError, TypeError):  # a message without its id, a None value: one by one
        return ",".join(m.properties.get(_UNIQ) or "" for m in messages)


class CommunicationMode(enum.Enum):
    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


class ServiceState(enum.Enum):
    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    """Java ``DefaultMQProducer`` options in snake_case, with Java's defaults (times in ms)."""

    send_msg_timeout: int = 3000
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    compress_msg_body_over_howmuch: int = 4096
    compress_type: CompressionType | str = CompressionType.ZLIB
    compress_level: int = 5
    max_message_size: int = 4 * 1024 * 1024
    default_topic_queue_nums: int = 4
    create_topic_key: str = "TBW102"
    send_latency_fault_enable: bool = False
    latency_max: tuple[int, ...] = LATENCY_MAX
    not_available_duration: tuple[int, ...] = NOT_AVAILABLE_DURATION
    retry_response_codes: frozenset[int] = RETRY_RESPONSE_CODES
    #: per-attempt cap while retries remain (-1: none), Java ``sendMsgMaxTimeoutPerRequest``
    send_msg_max_timeout_per_request: int = -1
    #: SEND_MESSAGE_V2 (Java ``sendSmartMsg``, default true); False sends SEND_MESSAGE (V1)
    send_smart_msg: bool = True
    max_inflight_async: int = 65535
    max_inflight_oneway: int = 65535

    def __post_init__(self) -> None:
        ct = self.compress_type
        object.__setattr__(
            self, "compress_type",
            CompressionType.of(ct) if isinstance(ct, str) else CompressionType(ct),
        )
        object.__setattr__(self, "retry_response_codes", frozenset(int(c) for c in self.retry_response_codes))
        if self.send_msg_timeout <= 0:
            raise ValueError(f"send_msg_timeout must be positive, got {self.send_msg_timeout}")
        if self.retry_times_when_send_failed < 0 or self.retry_times_when_send_async_failed < 0:
            raise ValueError("retry times must not be negative")
        if self.max_inflight_async < 1 or self.max_inflight_oneway < 1:
            raise ValueError("in-flight limits must be at least 1")


_CLIENT_FIELDS = frozenset(f.name for f in dataclasses.fields(ClientConfig))
_PRODUCER_FIELDS = frozenset(f.name for f in dataclasses.fields(ProducerConfig))


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword options -> (ClientConfig fields, ProducerConfig fields); TypeError for others."""
    unknown = set(options) - _CLIENT_FIELDS - _PRODUCER_FIELDS
    if unknown:
        raise TypeError(f"unknown producer option(s): {', '.join(sorted(unknown))}")
    client = {k: v for k, v in options.items() if k in _CLIENT_FIELDS}
    producer = {k: v for k, v in options.items() if k in _PRODUCER_FIELDS}
    return client, producer


class _Semaphore:
    """A counting semaphore whose waits can be cancelled (a timed-out send gives up its turn)."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self._waiting: list[Deferred[None]] = []

    def acquire(self) -> Deferred[None] | None:
        """None when a token was taken at once; else a Deferred that fires with it."""
        if self.tokens > 0:
            self.tokens -= 1
            return None
        d: Deferred[None] = Deferred(canceller=lambda d: self._waiting.remove(d) if d in self._waiting else None)
        self._waiting.append(d)
        return d

    def release(self) -> None:
        if self._waiting:
            self._waiting.pop(0).callback(None)
        else:
            self.tokens += 1


class _Batch(CodecMessage):
    """A batch as one message (Java ``MessageBatch``): the encoded batch body, the batch's own
    WAIT and UNIQ_KEY properties, and the messages it holds. ``text``: when ``_batch_alike`` made
    it, the send plan's text of its properties (``_planned_batch_text``'s value), and its topic
    and body passed ``check_message`` but for the body's size. ``ids``: when ``_batch_alike``
    made it, its messages' ids joined (``_batch_ids``) as it tagged them, which a send result
    takes instead of reading every message again."""

    __slots__ = ("messages", "text", "ids")

    def __init__(self, topic: str, body: bytes, properties: dict[str, str], messages: list[CodecMessage],
                 text: tuple[str, bytes] | None = None, ids: str | None = None) -> None:
        super().__init__(topic=topic, body=body, flag=0, properties=properties)
        self.messages = messages
        self.text = text
        self.ids = ids


def _bounded(reactor: Any, d: Deferred[Any], seconds: float, what: str) -> Deferred[Any]:
    """``d`` with a deadline: cancelled and failed with RemotingTooManyRequestsError after it."""
    if d.called:
        return d
    call = reactor.callLater(max(seconds, 0), d.cancel)

    def settle(result: Any) -> Any:
        if call.active():
            call.cancel()
        elif isinstance(result, Failure) and result.check(defer.CancelledError):
            raise RemotingTooManyRequestsError(what)
        return result

    return d.addBoth(settle)


def _release(result: Any, tokens: _Semaphore) -> Any:
    tokens.release()
    return result


def _batch_properties(wait_raw: str | None, batch_id: str) -> dict[str, str]:
    """A batch's own properties, as Java's MessageBatch carries them: the first message's
    WAIT_STORE_MSG_OK (true unless it says otherwise) and the batch's UNIQ_KEY."""
    wait = wait_raw is None or wait_raw.lower() == "true"
    return {PropertyKey.WAIT_STORE_MSG_OK: "true" if wait else "false", _UNIQ: batch_id}


class Producer:
    """The producer core (Java ``DefaultMQProducer`` + ``DefaultMQProducerImpl``).

    ``Producer(reactor, "group", namesrv_addr="127.0.0.1:9876", **options)``; options are the
    fields of ``ClientConfig`` and ``ProducerConfig`` (or pass ``client_config``/``config``).
    Producers sharing a ``manager`` and a client id share one ``ClientInstance``; without a
    manager every producer gets its own.
    """

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        group: str,
        *,
        namesrv_addr: str | Sequence[str] | None = None,
        client_config: ClientConfig | None = None,
        config: ProducerConfig | None = None,
        manager: ClientManager | None = None,
        **options: Any,
    ) -> None:
        client_opts, producer_opts = split_options(options)
        if namesrv_addr is not None:
            client_opts["namesrv_addr"] = namesrv_addr
        cc = client_config or ClientConfig()
        self.client_config = cc.replace(**client_opts) if client_opts else cc
        pc = config or ProducerConfig()
        self.config = dataclasses.replace(pc, **producer_opts) if producer_opts else pc
        self.reactor = reactor
        self.group = group
        self.manager = manager if manager is not None else ClientManager(reactor)
        self.instance: ClientInstance | None = None
        self.state = ServiceState.CREATE_JUST
        self.publish_info: dict[str, TopicPublishInfo] = {}
        self.fault_strategy = MQFaultStrategy(
            send_latency_fault_enable=self.config.send_latency_fault_enable,
            latency_max=self.config.latency_max,
            not_available_duration=self.config.not_available_duration,
            clock=self._now_ms,
        )
        self._async_tokens = _Semaphore(self.config.max_inflight_async)
        self._oneway_tokens = _Semaphore(self.config.max_inflight_oneway)
        self._send_templates: dict[tuple[Any, str, str, bool], SendRequestTemplate] = {}
        #: properties text without the UNIQ_KEY -> its quoted form, no closing quote (_with_new_id)
        self._quoted_heads: dict[str, str] = {}
        #: topic -> its send plan (_send_planned), remade when the route or the configuration changes
        self._plans: dict[str, _SendPlan] = {}
        #: properties text without the UNIQ_KEY -> (that text, its quoted form without the closing
        #: quote) when a send plan may frame it; () when not (a reply or transaction property:
        #: _plain_head). A tuple kept, not one made per send
        self._plain_heads: dict[str, tuple[str, str] | tuple[()]] = {}
        self._namespace = self.client_config.namespace
        self.metrics = metrics_for(self.client_config.metrics)

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def namespaced_group(self) -> str:
        return with_namespace(self._namespace, self.group)

    def start(self) -> Deferred[None]:
        """Register with the client instance (starting it) and announce the group to brokers."""
        if self.state is not ServiceState.CREATE_JUST:
            return defer.fail(MQClientError(
                f"The producer service state not OK, maybe started once, {self.state.value}"
                + suggest_todo()))
        self.state = ServiceState.START_FAILED
        try:
            check_producer_group(self.group)
            instance = self.manager.instance_for(self.client_config)
            if not instance.register_producer(self.namespaced_group, self):
                self.state = ServiceState.CREATE_JUST
                raise MQClientError(
                    f"The producer group[{self.group}] has been created before, specify another "
                    "name please." + suggest_todo())
        except Exception as e:
            return defer.fail(e)
        self.instance = instance
        self._plans.clear()  # made for no instance
        instance.startService()
        self.state = ServiceState.RUNNING
        self.log.info("the producer [{group}] start OK", group=self.group)
        return instance.send_heartbeat_to_all_brokers().addCallback(lambda _: None)

    def shutdown(self) -> Deferred[None]:
        """Unregister from every broker (UNREGISTER_CLIENT) and stop the instance if unused."""
        if self.state is not ServiceState.RUNNING or self.instance is None:
            self.state = ServiceState.SHUTDOWN_ALREADY if self.state is ServiceState.RUNNING else self.state
            return defer.succeed(None)
        self.state = ServiceState.SHUTDOWN_ALREADY
        instance = self.instance
        d = instance.unregister_producer(self.namespaced_group)
        d.addCallback(lambda _: self.manager.release(instance))
        return d.addCallback(lambda _: self.log.info("the producer [{group}] shutdown OK", group=self.group))

    # ---- ProducerMember ------------------------------------------------------------------------

    def publish_topics(self) -> Iterable[str]:
        return list(self.publish_info)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self.publish_info.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        if topic is not None and info is not None:
            self.publish_info[topic] = info

    def check_transaction_state(
        self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        self.log.warn("CheckTransactionState for group {group}, but this is not a transaction "
                      "producer", group=self.group)

    # ---- public send API -----------------------------------------------------------------------

    def send(
        self,
        msg: CodecMessage | Sequence[CodecMessage],
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> Deferred[SendResult]:
        """Java's sync send (the retry loop); fires with the SendResult. ``timeout`` in seconds
        (default ``send_msg_timeout``)."""
        if queue is None and selector is None:
            d = _SendDeferred(_cancel_send)
            out = self._send(msg, CommunicationMode.SYNC, None, None, arg, timeout, d)
            return d if out is None else out
        return self._send(msg, CommunicationMode.SYNC, queue, selector, arg, timeout)

    def send_async(
        self,
        msg: CodecMessage | Sequence[CodecMessage],
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> Deferred[SendResult]:
        """Java's async send (transport failures retried as ``onExceptionImpl``, capped in flight)."""
        if queue is None and selector is None:
            d = _SendDeferred(_cancel_send)
            out = self._send(msg, CommunicationMode.ASYNC, None, None, arg, timeout, d)
            return d if out is None else out
        return self._send(msg, CommunicationMode.ASYNC, queue, selector, arg, timeout)

    def send_async_to(self, sink: Any, msg: CodecMessage | Sequence[CodecMessage]) -> Deferred[SendResult] | None:
        """``send_async(msg)`` whose outcome goes to ``sink.ok(result)`` / ``sink.fail(failure)``
        (called once, in the reactor thread): None when the send settles the sink itself (its
        first attempt went out), else a Deferred of the outcome for the caller to hand on."""
        return self._send(msg, CommunicationMode.ASYNC, None, None, None, None, sink)

    def send_to(self, sink: Any, msg: CodecMessage | Sequence[CodecMessage]) -> Deferred[SendResult] | None:
        """``send(msg)`` whose outcome goes to ``sink.ok(result)`` / ``sink.fail(failure)`` (once,
        in the reactor thread): None when the send settles the sink itself (its first attempt
        went out; a sink with an ``attempt`` attribute gets that attempt, whose ``cancel()`` drops
        the send), else a Deferred of the outcome for the caller to hand on."""
        return self._send(msg, CommunicationMode.SYNC, None, None, None, None, sink)

    def send_oneway(
        self,
        msg: CodecMessage | Sequence[CodecMessage],
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> Deferred[None]:
        """Write the message without waiting for an answer; fires once written."""
        out = self._send(msg, CommunicationMode.ONEWAY, queue, selector, arg, None)
        return defer.succeed(None) if out is None else out

    def send_oneway_written(self, msg: CodecMessage | Sequence[CodecMessage]) -> Deferred[None] | None:
        """``send_oneway(msg)`` that returns None when the message was written at once (the
        common case: no Deferred made), else the Deferred ``send_oneway`` would return."""
        return self._send(msg, CommunicationMode.ONEWAY, None, None, None, None)

    def request(
        self,
        msg: CodecMessage,
        timeout: float = 3.0,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> Deferred[MessageExt]:
        """Send a request message and fire with its reply (Java ``DefaultMQProducer.request``).

        The message gets CORRELATION_ID (a random UUID), REPLY_TO_CLIENT (this client id) and TTL
        (the timeout in ms); the replier's reply comes back as PUSH_REPLY_MESSAGE_TO_CLIENT. Fails
        with ``RequestTimeoutError`` when the request went out but no reply came in time, and with
        ``MQClientError`` (cause attached) when the request could not be sent.
        """
        begin = self.reactor.seconds()
        try:
            self._make_sure_state_ok()
            instance = self._instance()
        except Exception as e:
            return defer.fail(e)
        cid = instance.new_correlation_id()
        props = msg.properties
        props[PropertyKey.CORRELATION_ID] = cid
        props[PropertyKey.MESSAGE_REPLY_TO_CLIENT] = instance.client_id
        props[PropertyKey.MESSAGE_TTL] = str(int(timeout * 1000))
        topic = with_namespace(self._namespace, msg.topic)
        if topic in instance.routes.topic_routes:
            ready: Deferred[Any] = defer.succeed(None)
        else:
            # the broker pushes the reply over a connection it knows this client id on
            ready = self.find_publish_info(topic)
            ready.addCallback(lambda _: instance.send_heartbeat_to_all_brokers())
        reply = instance.expect_reply(cid)
        outcome: dict[str, Any] = {"sent": False, "error": None}

        def send(_: Any) -> Deferred[Any]:
            remaining = timeout - (self.reactor.seconds() - begin)
            return self._send(msg, CommunicationMode.ASYNC, queue, selector, arg, remaining)

        def send_ok(_: Any) -> None:
            outcome["sent"] = True

        def send_failed(f: Failure) -> None:
            outcome["error"] = f.value
            if not reply.called:
                reply.cancel()

        ready.addCallback(send).addCallbacks(send_ok, send_failed)
        remaining = max(timeout - (self.reactor.seconds() - begin), 0)
        timer = self.reactor.callLater(remaining, reply.cancel)

        def settle(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            if isinstance(result, Failure) and result.check(defer.CancelledError):
                if outcome["sent"]:
                    raise RequestTimeoutError(
                        f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                        f"{int(timeout * 1000)} ms.")
                raise MQClientError(f"send request message to <{msg.topic}> fail") from outcome["error"]
            return result

        return reply.addBoth(settle)

    # ---- internals: entry ----------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def _send(
        self,
        msg: CodecMessage | Sequence[CodecMessage],
        mode: CommunicationMode,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        timeout: float | None,
        sink: Any = None,
    ) -> Deferred[Any] | None:
        """The send of every mode. With a ``sink`` (only without queue or selector), the common
        case settles it directly and returns None; otherwise the outcome is the Deferred returned."""
        begin = self._now_ms()
        timeout_ms = self.config.send_msg_timeout if timeout is None else int(timeout * 1000)
        try:
            if queue is not None and selector is not None:
                raise TypeError("give queue or selector, not both")
            if self.state is not ServiceState.RUNNING:
                self._make_sure_state_ok()
            if not isinstance(msg, CodecMessage):
                msg = self._batch(msg)
                # a batch _batch_alike made has passed check_message but for its size
                if msg.text is None or len(msg.body) > self.config.max_message_size:
                    check_message(msg, self.config.max_message_size)
            else:
                check_message(msg, self.config.max_message_size)
            if self._namespace and not isinstance(msg, _Batch):
                # Java wraps the topic on the caller's message for the send and unwraps it after;
                # here the send uses a view sharing the properties (UNIQ_KEY lands on the caller's)
                props = msg.properties
                if PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:
                    props[PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._instance().unique_ids.next_id()
                msg = CodecMessage(topic=with_namespace(self._namespace, msg.topic), body=msg.body,
                                   flag=msg.flag, properties=props)
        except Exception as e:
            return defer.fail(e)
        direct = sink is not None and self.metrics is None
        if mode is CommunicationMode.SYNC:
            if direct:
                try:
                    return self._send_planned(msg, mode, begin, timeout_ms, sink, None)
                except Exception:
                    return defer.fail()
            return self._dispatch(msg, mode, queue, selector, arg, begin, timeout_ms)
        tokens = self._async_tokens if mode is CommunicationMode.ASYNC else self._oneway_tokens
        wait = tokens.acquire()
        if wait is None:
            if direct and mode is CommunicationMode.ASYNC:
                try:
                    d = self._send_planned(msg, mode, begin, timeout_ms, sink, tokens)
                except Exception:
                    d = defer.fail()
                if d is None:
                    return None  # the first attempt gives the token back when the send ends
            elif (mode is CommunicationMode.ONEWAY and queue is None and selector is None
                  and self.metrics is None):
                d = self._oneway_planned(msg, begin, timeout_ms)
                if d is None:  # written: the token is back as soon as the write is queued
                    tokens.release()
                    return None
            else:
                d = self._dispatch(msg, mode, queue, selector, arg, begin, timeout_ms)
            return d.addBoth(_release, tokens)
        remaining = (timeout_ms - (self._now_ms() - begin)) / 1000
        what = "send message tryAcquire semaphoreAsyncNum timeout"
        d = _bounded(self.reactor, wait, remaining, what)

        def acquired(_: None) -> Deferred[Any]:
            # the token is ours from here on: give it back however the send ends
            return self._dispatch(msg, mode, queue, selector, arg, begin, timeout_ms).addBoth(
                _release, tokens)

        return d.addCallback(acquired)

    def _dispatch(
        self,
        msg: CodecMessage,
        mode: CommunicationMode,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        begin: int,
        timeout_ms: int,
    ) -> Deferred[Any]:
        try:
            if queue is not None:
                d = self._send_to_queue(msg, mode, queue, begin, timeout_ms)
            elif selector is not None:
                d = self._send_select(msg, mode, selector, arg, begin, timeout_ms)
            else:
                d = self._send_default(msg, mode, begin, timeout_ms)
        except Exception:
            d = defer.fail()
        if self.metrics is not None:
            d.addBoth(self._metered, msg, begin)
        return d

    def _send_default(
        self, msg: CodecMessage, mode: CommunicationMode, begin: int, timeout_ms: int,
        sink: Any = None, tokens: _Semaphore | None = None, now: int | None = None,
    ) -> Deferred[Any] | None:
        """Java ``sendDefaultImpl``. Its common case (the route cached, the broker's connection
        open, no latency fault strategy) is the first attempt written straight on the connection,
        whose response settles ``sink`` directly (``_FirstAttempt``, the channel's receiver: no
        Deferred between); a failure of it, and every other case, goes on in the general retry
        loop (``_DefaultSend``), which then behaves as if it made that attempt.

        With a ``sink``: None when the first attempt went out (it settles the sink and gives
        ``tokens`` back when the send ends), else the Deferred of the general path. Without one,
        always a Deferred. ``now``: the clock as the caller just read it (``begin``, in the same
        call), so the first attempt does not read it again."""
        pick = None if mode is CommunicationMode.ONEWAY else self._first_pick(msg.topic)
        if pick is None:
            return _DefaultSend(self, msg, mode, begin, timeout_ms).start()
        info, mq, instance, addr = pick
        return self._first_attempt(msg, mode, info, mq, instance, addr, begin, timeout_ms, sink,
                                   tokens, now)

    def _first_attempt(
        self, msg: CodecMessage, mode: CommunicationMode, info: TopicPublishInfo, mq: MessageQueue,
        instance: ClientInstance, addr: str | None, begin: int, timeout_ms: int, sink: Any,
        tokens: _Semaphore | None, now: int | None,
    ) -> Deferred[Any] | None:
        """``_send_default`` once its first queue is picked (``_first_pick``'s values)."""
        channel = instance.open_broker_channel(addr) if addr is not None else None
        if now is None:
            now = self._now_ms()
        cur = timeout_ms - (now - begin)
        if channel is None or cur <= 0:
            return _DefaultSend(self, msg, mode, begin, timeout_ms, info, mq).start()
        own = sink is None
        if own:
            sink = _SendDeferred(_cancel_send)
        attempt = _FirstAttempt(self, msg, mode, info, mq, addr, begin, timeout_ms, now, sink, tokens)
        if type(sink) is _SendDeferred or hasattr(sink, "attempt"):
            sink.attempt = attempt  # for its canceller; the attempt drops the sink when it ends
        cap = self.config.send_msg_max_timeout_per_request
        if (mode is CommunicationMode.SYNC and cap > -1 and self.config.retry_times_when_send_failed > 0
                and cur > cap):
            cur = cap
        attempt.cur = cur
        try:
            request = self._first_request(msg, mq, now, instance, attempt)
        except Exception:
            # as a failed send_kernel: the sync loop judges it, an async send fails with it
            if mode is CommunicationMode.SYNC:
                attempt.fall_back(Failure())
            else:
                attempt.settle(Failure())
            return sink if own else None
        try:
            seconds = (cur if mode is CommunicationMode.SYNC else max(cur, 1)) / 1000
            if type(request) is SendPrepared:
                attempt.opaque = channel.invoke_direct_prepared(request, seconds, attempt, True)
            else:
                attempt.opaque = channel.invoke_direct(request, seconds, attempt)
        except Exception:
            attempt.fall_back(Failure())  # as the channel's failed call
            return sink if own else None
        attempt.channel = channel
        return sink if own else None

    def _oneway_direct(self, msg: CodecMessage, begin: int, timeout_ms: int) -> Deferred[Any] | None:
        """``sendDefaultImpl`` of a oneway send: None when it was written at once on the open
        connection of the route's next queue (the route cached, that connection open and not
        full, no latency fault strategy), else the Deferred of the general path, which then
        behaves as if it picked that queue (a failed write: as its failed attempt)."""
        try:
            pick = self._first_pick(msg.topic)
            if pick is None:
                return _DefaultSend(self, msg, CommunicationMode.ONEWAY, begin, timeout_ms).start()
        except Exception:
            return defer.fail()
        info, mq, instance, addr = pick
        return self._oneway_at(msg, info, mq, instance, addr, begin, timeout_ms)

    def _oneway_at(self, msg: CodecMessage, info: TopicPublishInfo, mq: MessageQueue,
                   instance: ClientInstance, addr: str | None, begin: int,
                   timeout_ms: int) -> Deferred[Any] | None:
        """``_oneway_direct`` once its queue is picked (``_first_pick``'s values)."""
        try:
            gated = instance.oneway_broker_channel(addr) if addr is not None else None
            if gated is None:
                return _DefaultSend(self, msg, CommunicationMode.ONEWAY, begin, timeout_ms, info, mq).start()
            channel, gate = gated
        except Exception:
            return defer.fail()
        try:
            # begin was read by _send in this same call: the budget is whole
            request = self._first_request(msg, mq, begin, instance, oneway=True)
            if type(request) is SendPrepared:
                channel.write_oneway_prepared(request)
            else:
                channel.write_oneway(request)
        except Exception:
            return self._oneway_write_failed(msg, mq, info, begin, timeout_ms)
        # the general path's update_fault_item after the write is a no-op without the strategy;
        # past a full connection's gate the send (its in-flight slot) ends when the gate opens:
        # memory stays bounded by the slots, and no general path (a Deferred chain) per send
        # while the socket catches up
        return gate.written_past() if gate.paused else None

    # ---- internals: the send plan --------------------------------------------------------------

    def _plan_of(self, topic: str) -> _SendPlan | None:
        """The topic's send plan as it stands (made again when its route or the configuration it
        was made from changed); None when its sends take ``_send_default``'s path."""
        plan = self._plans.get(topic)
        info = self.publish_info.get(topic)
        if (plan is None or plan.info is not info or plan.config is not self.config
                or plan.client_config is not self.client_config or plan.rc is not plan.remoting.config
                or plan.fault != self.fault_strategy.send_latency_fault_enable
                or info.message_queues is not plan.mqs):
            plan = self._make_plan(topic, info)
        return plan if plan.ok else None

    def _make_plan(self, topic: str, info: TopicPublishInfo | None) -> _SendPlan:
        plans = self._plans
        if len(plans) >= 1024:  # a long-lived producer of ever new topics: start over
            plans.clear()
        instance = self.instance
        remoting = instance.remoting if instance is not None else None
        plan = _SendPlan(info, self.config, self.client_config, remoting)
        plan.fault = self.fault_strategy.send_latency_fault_enable
        if info is None or instance is None:
            return plan  # kept by nobody: the next send looks again
        plans[topic] = plan
        config = self.config
        if (not info.message_queues or self._namespace or plan.fault
                or plan.rc.rpc_hooks or plan.rc.serialize_type is not SerializeType.JSON
                or not config.send_smart_msg or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)):
            return plan
        vip = self.client_config.vip_channel_enabled
        queues = []
        for mq in info.message_queues:
            qid = mq.queue_id
            if type(qid) is not int or not -(2**31) <= qid < 2**31:
                return plan  # the template refuses it: the typed path says why
            raw = instance.routes.find_broker_address_in_publish(mq.broker_name)
            addr = _vip_address(raw) if raw is not None and vip else raw
            templates = []
            for command, oneway in ((SendMessageV2, False), (SendMessageV2, True),
                                    (SendBatchMessage, False)):
                key = (command, topic, mq.broker_name, oneway)
                template = self._send_templates.get(key)
                if template is None:
                    template = self._send_template(command, topic, mq.broker_name, oneway, instance)
                templates.append(template)
            queues.append((mq, mq.broker_name, raw, addr, *templates))
        plan.queues = queues
        plan.n = len(queues)
        plan.instance = instance
        plan.broker_addrs = instance.routes.broker_addrs
        plan.compress_over = config.compress_msg_body_over_howmuch
        plan.cap = (config.send_msg_max_timeout_per_request
                    if config.retry_times_when_send_failed > 0 else -1)
        plan.ok = True
        return plan

    def _plain_head(self, base: str) -> tuple[str, str] | tuple[()]:
        """``base`` (a properties text without the UNIQ_KEY) and that text quoted as the template
        writes it, without its closing quote; () when a send plan does not frame it: a reply
        (MSG_TYPE: its own command) or a transaction (TRAN_MSG: its sysFlag) property. A key is
        followed by \x01 in the text and nowhere else, so a substring test finds every such key."""
        heads = self._plain_heads
        if len(heads) >= 256:  # an application with ever new texts: start over
            heads.clear()
        plain = not (f"{PropertyKey.MESSAGE_TYPE}\x01" in base
                     or f"{PropertyKey.TRANSACTION_PREPARED}\x01" in base)
        text = heads[base] = (base, json_quote(base)[:-1]) if plain else ()
        return text

    def _send_planned(self, msg: CodecMessage, mode: CommunicationMode, begin: int, timeout_ms: int,
                      sink: Any, tokens: _Semaphore | None) -> Deferred[Any] | None:
        """``_send_default`` of a sync or async send with a sink (``begin`` read in this same
        call) through the topic's send plan: ``_first_pick``, ``_first_request`` (the template's
        request of a message with no UNIQ_KEY yet, under the compression threshold, of plain
        properties, or of a batch as ``_batch`` made it) and the first attempt's write in one step, with the queue's address, broker
        and template worked out when the plan was made. Any other message takes
        ``_send_default`` before anything changed; a queue whose broker address moved, or whose
        connection is not open, ``_first_attempt`` after the pick, as ``_send_default``."""
        plan = self._plan_of(msg.topic)
        text: Any
        batch = type(msg) is _Batch
        if plan is None:
            return self._send_default(msg, mode, begin, timeout_ms, sink, tokens, begin)
        if batch:
            text = msg.text or _planned_batch_text(msg.properties)  # type: ignore[attr-defined]
        else:
            text = self._planned_text(msg, plan)
        if text is None:
            return self._send_default(msg, mode, begin, timeout_ms, sink, tokens, begin)
        info = plan.info
        # MQFaultStrategy's first pick without the latency strategy (TopicPublishInfo.select_one)
        mq, broker, raw, addr, template, _, batch_template = plan.queues[
            info.index.increment_and_get() % plan.n]
        instance = plan.instance
        addrs = plan.broker_addrs.get(broker)
        channel = None
        if raw is not None and addrs is not None and addrs.get(0) == raw and timeout_ms > 0:
            channel = instance.open_broker_channel(addr)
        if channel is None:  # the general path judges it, as after _first_pick
            return self._first_attempt(msg, mode, info, mq, instance,
                                       _publish_address(self, instance, broker), begin, timeout_ms,
                                       sink, tokens, begin)
        attempt = _FirstAttempt(self, msg, mode, info, mq, addr, begin, timeout_ms, begin, sink, tokens)
        if type(sink) is _SendDeferred or hasattr(sink, "attempt"):
            sink.attempt = attempt  # for its canceller; the attempt drops the sink when it ends
        cur = timeout_ms
        if mode is CommunicationMode.SYNC:
            cap = plan.cap
            if cap > -1 and cur > cap:
                cur = cap
            seconds = cur / 1000
        else:
            seconds = (cur if cur > 1 else 1) / 1000
        attempt.cur = cur
        try:
            attempt.body = msg.body
            if batch:
                # _prepare_send's request of a batch: its ids are set, no compression, flag 0
                attempt.command = SendBatchMessage
                request = SendPrepared(batch_template, (mq.queue_id, 0, begin, 0, text[1]), text[0],
                                       msg.body)
            else:
                attempt.command = SendMessageV2
                request = self._planned_request(msg, template, mq, begin, text, instance)
        except Exception:  # as _first_attempt's failed request
            if mode is CommunicationMode.SYNC:
                attempt.fall_back(Failure())
            else:
                attempt.settle(Failure())
            return None
        try:
            attempt.opaque = channel.invoke_direct_prepared(request, seconds, attempt, True)
        except Exception:
            attempt.fall_back(Failure())  # as the channel's failed call
            return None
        attempt.channel = channel
        return None

    def _oneway_planned(self, msg: CodecMessage, begin: int, timeout_ms: int) -> Deferred[Any] | None:
        """``_oneway_direct`` through the topic's send plan (as ``_send_planned``)."""
        try:
            plan = self._plan_of(msg.topic)
        except Exception:  # nothing changed yet: _oneway_direct's path reports it
            return self._oneway_direct(msg, begin, timeout_ms)
        text = None if plan is None else self._planned_text(msg, plan)
        if text is None:
            return self._oneway_direct(msg, begin, timeout_ms)
        info = plan.info
        mq, broker, raw, addr, _, template, _ = plan.queues[info.index.increment_and_get() % plan.n]
        instance = plan.instance
        addrs = plan.broker_addrs.get(broker)
        gated = None
        if raw is not None and addrs is not None and addrs.get(0) == raw and timeout_ms >= 0:
            gated = instance.oneway_broker_channel(addr)
        if gated is None:  # the general path judges it, as after _first_pick
            return self._oneway_at(msg, info, mq, instance, _publish_address(self, instance, broker),
                                   begin, timeout_ms)
        channel, gate = gated
        try:
            channel.write_oneway_prepared(self._planned_request(msg, template, mq, begin, text, instance))
        except Exception:
            return self._oneway_write_failed(msg, mq, info, begin, timeout_ms)
        return gate.written_past() if gate.paused else None

    def _planned_text(self, msg: CodecMessage, plan: _SendPlan) -> tuple[str, str] | None:
        """What a send plan frames of ``msg``: its properties text (no UNIQ_KEY yet) and that
        text quoted without its closing quote (``_plain_head``); None for a message the plan does
        not frame (a batch, a UNIQ_KEY already set, a body at the compression threshold, a flag
        out of int32, a properties map encode_properties refuses, a reply or transaction
        property), which then takes the general path before anything changed."""
        try:
            props = msg.properties
            flag = msg.flag
            if (isinstance(msg, _Batch) or _UNIQ in props or len(msg.body) >= plan.compress_over
                    or type(flag) is not int or not -2147483648 <= flag <= 2147483647):
                return None
            base = encode_properties(props)
            text = self._plain_heads.get(base)
            if text is None:
                text = self._plain_head(base)
        except Exception:  # the general path reports it
            return None
        return text or None

    def _planned_request(self, msg: CodecMessage, template: SendRequestTemplate, mq: MessageQueue,
                         begin: int, text: tuple[str, str], instance: ClientInstance) -> SendPrepared:
        """The planned first attempt's request of ``msg`` (its UNIQ_KEY set here). The values
        SendRequestTemplate.request checks are known in range: queue ids when the plan was made,
        the flag by ``_planned_text``, sysFlag 0, the born timestamp an int of ms."""
        base, head = text
        uid = instance.unique_ids.next_id()
        msg.properties[_UNIQ] = uid
        return SendPrepared(template, (mq.queue_id, 0, begin, msg.flag,
                                       f'{head}{_UNIQ}\\u0001{uid}\\u0002"'.encode()),
                            f"{base}{_UNIQ}\x01{uid}\x02", msg.body)

    def _oneway_write_failed(self, msg: CodecMessage, mq: MessageQueue, info: TopicPublishInfo,
                             begin: int, timeout_ms: int) -> Deferred[Any]:
        """A direct oneway write that raised (the exception being handled) ends as the general
        path's failed send_kernel would: its fault item and the "Send [1] times" error."""
        loop = _DefaultSend(self, msg, CommunicationMode.ONEWAY, begin, timeout_ms, info)
        loop.mq = mq
        loop.brokers_sent.append(mq.broker_name)
        loop.prev = begin
        return defer.maybeDeferred(loop._failed, Failure())

    def _first_pick(self, topic: str) -> tuple[TopicPublishInfo, MessageQueue, ClientInstance, str | None] | None:
        """``sendDefaultImpl``'s first queue in its common case (the route cached, no latency
        fault strategy): the route, the queue, the client instance and the address of the
        queue's master (VIP port when enabled; None when the route has none); else None."""
        info = self.publish_info.get(topic)
        if info is None or not info.message_queues or self.fault_strategy.send_latency_fault_enable:
            return None
        mq = info.select_one()  # MQFaultStrategy's first pick without the latency strategy
        assert mq is not None
        instance = self._instance()
        return info, mq, instance, _publish_address(self, instance, mq.broker_name)

    def _metered(self, result: Any, msg: CodecMessage, begin: int) -> Any:
        assert self.metrics is not None
        ok = not isinstance(result, Failure) and (
            result is None or getattr(result, "status", SendStatus.SEND_OK) is SendStatus.SEND_OK)
        messages = len(msg.messages) if isinstance(msg, _Batch) else 1
        client_id = self.instance.client_id if self.instance is not None else ""
        self.metrics.on_send(msg.topic, client_id, ok, self._now_ms() - begin, messages, len(msg.body or b""))
        return result

    def _make_sure_state_ok(self) -> None:
        if self.state is not ServiceState.RUNNING:
            raise MQClientError(
                f"The producer service state not OK, {self.state.value}" + suggest_todo()
            )

    def _batch(self, messages: Sequence[CodecMessage]) -> _Batch:
        """Java ``DefaultMQProducer.batch`` + ``MessageBatch.generateFromList``.

        The usual batch (every message of the first's topic, not a retry topic, no delay
        property, the first's WAIT, a non-empty bytes body within the limit, no LMQ) is checked
        and tagged in one pass; a batch with anything else goes through ``_batch_checked``,
        which raises Java's error for it in Java's order."""
        msgs = list(messages)
        first = msgs[0] if msgs else None
        if not isinstance(first, CodecMessage) or first.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return self._batch_checked(msgs)
        alike = self._batch_alike(msgs, first)
        if alike is not None:
            return alike
        topic = first.topic
        wait_raw = first.properties.get(_WAIT)
        max_size = self.config.max_message_size
        uniq = _UNIQ
        untagged: list[dict[str, str]] = []
        usual = True
        try:
            for m in msgs:
                if not isinstance(m, CodecMessage):
                    usual = False
                    break
                props = m.properties
                body = m.body
                if (m.topic != topic or _DELAY in props or props.get(_WAIT) != wait_raw
                        or type(body) is not bytes or not body or len(body) > max_size
                        or _LMQ in props):
                    usual = False
                    break
                if uniq not in props:
                    props[uniq] = ""  # a place in the map's order; the id comes below
                    untagged.append(props)
        except Exception:  # not a map, ...: raised below in Java's order
            usual = False
        if usual:
            try:
                # every message passed Java's per-message checks: the topic's are what it raises
                check_topic(topic)
                check_not_allowed_send_topic(topic)
                ids = self._instance().unique_ids
            except Exception:
                for props in untagged:
                    del props[uniq]  # the place only: the map's order as it was
                raise
            # Java tags each message right after checking it, then the batch: the ids in one step
            # afterwards, in that order (a message listed twice is tagged once, as in Java)
            new_ids = ids.next_ids(len(untagged) + 1)
            for props, uid in zip(untagged, new_ids):
                props[uniq] = uid
            if self._namespace:
                topic = with_namespace(self._namespace, topic)
                for m in msgs:
                    m.topic = topic
            return _Batch(topic, encode_batch(msgs), _batch_properties(wait_raw, new_ids[-1]), msgs)
        for props in untagged:
            del props[uniq]
        return self._batch_checked(msgs)

    def _batch_alike(self, msgs: list[CodecMessage], first: CodecMessage) -> _Batch | None:
        """``_batch`` of the usual batch whose messages' maps are all alike (equal to the first's,
        each its own, no UNIQ_KEY yet, no delay or LMQ property), no namespace: checked in one
        pass without touching a map, then tagged, and encoded with the shared map's text made
        once (``encode_batch_alike``); None, with nothing changed, for any other batch."""
        base = first.properties
        if (type(base) is not dict or _UNIQ in base or _DELAY in base or _LMQ in base
                or self._namespace):
            return None
        topic = first.topic
        max_size = self.config.max_message_size
        # equal maps of two keys or more may still list them in another order (another text)
        keys = list(base) if len(base) > 1 else None
        maps: list[dict[str, str]] = []
        append = maps.append
        bodies: list[bytes] = []
        add_body = bodies.append
        # one body size and one flag (the first's int object: an equal int that is another
        # object only takes encode_batch_alike) let encode_batch_run write the entries
        flag = first.flag
        uniform = type(flag) is int
        size = -1
        try:
            for m in msgs:
                if not isinstance(m, CodecMessage):
                    return None
                props = m.properties
                body = m.body
                if m.topic != topic or type(body) is not bytes:
                    return None
                b = len(body)
                if (not 0 < b <= max_size
                        or (props is not base and (props != base
                                                   or (keys is not None and list(props) != keys)))):
                    return None
                append(props)
                add_body(body)
                if b != size or m.flag is not flag:
                    if size >= 0:
                        uniform = False
                    size = b
        except Exception:  # a map that cannot be compared: _batch's general pass judges it
            return None
        if len(set(map(id, maps))) != len(maps):
            return None  # a map listed twice is tagged once: the general pass does that
        try:
            text = encode_properties(base)
        except Exception:  # a map the codec refuses: the general pass raises it in Java's order
            return None
        # every message passed Java's per-message checks: the topic's are what it raises
        check_topic(topic)
        check_not_allowed_send_topic(topic)
        new_ids, id_text, low = self._instance().unique_ids.next_id_run(len(maps) + 1)
        # Java tags each message after checking it, then the batch: the same ids in that order
        # (map stops at the shorter: the batch's own id goes on no message)
        any(map(setitem, maps, repeat(_UNIQ), new_ids))
        batch_id = new_ids.pop()
        body = encode_batch_run(bodies, flag, text, id_text, low) if uniform and low >= 0 else None
        if body is None:
            body = encode_batch_alike(msgs, text, new_ids)
            if body is None:
                body = encode_batch(msgs)
        props = _batch_properties(base.get(_WAIT), batch_id)
        # the send plan's text of these properties (_planned_batch_text's, whose checks hold:
        # the id is hex); every map is its own and was untagged: the messages' ids are new_ids
        return _Batch(topic, body, props, msgs, _batch_text(props[_WAIT], batch_id),
                      ",".join(new_ids))

    def _batch_checked(self, msgs: list[CodecMessage]) -> _Batch:
        """``_batch`` of any batch: Java's checks written out one by one, in its order."""
        if not msgs:
            raise MQClientError("Failed to initiate the MessageBatch: the batch is empty")
        first = msgs[0]
        if not isinstance(first, CodecMessage):
            raise MQClientError(f"Failed to initiate the MessageBatch: {type(first).__name__} is not a Message")
        topic = first.topic
        wait_raw = first.properties.get(_WAIT)
        wait = wait_raw is None or wait_raw.lower() == "true"
        retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        for m in msgs:
            if not isinstance(m, CodecMessage):
                raise MQClientError(f"Failed to initiate the MessageBatch: {type(m).__name__} is not a Message")
            props = m.properties
            if _DELAY in props and m.delay_time_level > 0:
                raise MQClientError("Failed to initiate the MessageBatch: TimeDelayLevel is not "
                                    "supported for batching")
            if retry or m.topic != topic:
                if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    raise MQClientError("Failed to initiate the MessageBatch: Retry Group is not "
                                        "supported for batching")
                raise MQClientError("Failed to initiate the MessageBatch: The topic of the "
                                    "messages in one batch should be the same")
            w = props.get(_WAIT)
            if w is not wait_raw and w != wait_raw and (w is None or w.lower() == "true") != wait:
                raise MQClientError("Failed to initiate the MessageBatch: The waitStoreMsgOK of "
                                    "the messages in one batch should the same")
        # Java checks every message (topic first) and then tags it; every topic equals the first
        # here, so the first's topic check stands for all and only the bodies are checked per message
        max_size = self.config.max_message_size
        check_topic(topic)
        check_not_allowed_send_topic(topic)
        ids = self._instance().unique_ids
        namespaced = with_namespace(self._namespace, topic) if self._namespace else None
        uniq = _UNIQ
        # Java tags each message right after checking it, then the batch: the ids are made in one
        # step afterwards, in that order (a message listed twice is tagged once, as in Java)
        untagged: list[dict[str, str]] = []
        try:
            for m in msgs:
                body = m.body
                props = m.properties
                # check_message_body's common case: a non-empty bytes body within the limit, no LMQ
                if (type(body) is not bytes or not body or len(body) > max_size
                        or _LMQ in props):
                    check_message_body(m, max_size)
                if uniq not in props:
                    props[uniq] = ""  # a place in the map's order; the id comes below
                    untagged.append(props)
                if namespaced is not None:
                    m.topic = namespaced
        except Exception:
            for props, uid in zip(untagged, ids.next_ids(len(untagged))):
                props[uniq] = uid  # the messages before the bad one keep their ids, as in Java
            raise
        new_ids = ids.next_ids(len(untagged) + 1)
        for props, uid in zip(untagged, new_ids):
            props[uniq] = uid
        return _Batch(first.topic, encode_batch(msgs), _batch_properties(wait_raw, new_ids[-1]), msgs)

    def _instance(self) -> ClientInstance:
        if self.instance is None:
            raise MQClientError(f"The producer service state not OK, {self.state.value}")
        return self.instance

    # ---- internals: routes ---------------------------------------------------------------------

    def find_publish_info(self, topic: str) -> Deferred[TopicPublishInfo]:
        """Java ``tryToFindTopicPublishInfo``: the cache, else the NameServer, else TBW102's route."""
        info = self.publish_info.get(topic)
        if info is not None and info.ok():
            return defer.succeed(info)
        if info is None:
            self.publish_info[topic] = TopicPublishInfo(topic)
        instance = self._instance()

        def after_lookup(_: bool) -> Any:
            info = self.publish_info[topic]
            if info.have_topic_router_info or info.ok():
                return info
            d = instance.update_topic_route(
                topic, default_topic_queue_nums=self.config.default_topic_queue_nums
            )
            return d.addCallback(lambda _: self.publish_info[topic])

        return instance.update_topic_route(topic).addCallback(after_lookup)

    def _no_route(self, topic: str) -> MQClientError:
        instance = self._instance()
        if not instance.namesrv_addrs:
            return MQClientError("No name server address, please set it." + suggest_todo(),
                                 response_code=ClientErrorCode.NO_NAME_SERVER_EXCEPTION)
        return MQClientError(
            f"No route info of this topic: {topic}" + suggest_todo(),
            response_code=ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
        )

    # ---- internals: queue / selector sends -----------------------------------------------------

    def _send_to_queue(
        self, msg: CodecMessage, mode: CommunicationMode, queue: MessageQueue, begin: int,
        timeout_ms: int,
    ) -> Deferred[Any]:
        mq = queue
        if self._namespace:
            mq = MessageQueue(with_namespace(self._namespace, queue.topic), queue.broker_name,
                              queue.queue_id)
        if msg.topic != mq.topic:
            return defer.fail(MQClientError("message's topic not equal mq's topic"))
        return self.send_kernel(msg, mq, mode, None, timeout_ms - (self._now_ms() - begin))

    def _send_select(
        self, msg: CodecMessage, mode: CommunicationMode, selector: MessageQueueSelector, arg: Any,
        begin: int, timeout_ms: int,
    ) -> Deferred[Any]:
        def with_info(info: TopicPublishInfo | None) -> Deferred[Any]:
            if info is None or not info.ok():
                raise MQClientError(f"No route info for this topic, {msg.topic}")
            ns = self._namespace
            queues = [MessageQueue(without_namespace(q.topic, ns), q.broker_name, q.queue_id)
                      for q in info.message_queues]
            user_msg = Message.of(msg)
            user_msg.topic = without_namespace(msg.topic, ns)
            try:
                chosen = selector(queues, user_msg, arg)
            except Exception as e:
                raise MQClientError("select message queue threw exception.") from e
            if chosen is None:
                raise MQClientError("select message queue return null.")
            if ns:
                chosen = MessageQueue(with_namespace(ns, chosen.topic), chosen.broker_name, chosen.queue_id)
            cost = self._now_ms() - begin
            if timeout_ms < cost:
                raise RemotingTimeoutError("sendSelectImpl call timeout")
            return self.send_kernel(msg, chosen, mode, None, timeout_ms - cost)

        return self.find_publish_info(msg.topic).addCallback(with_info)

    # ---- internals: one attempt ----------------------------------------------------------------

    def send_kernel(
        self,
        msg: CodecMessage,
        mq: MessageQueue,
        mode: CommunicationMode,
        info: TopicPublishInfo | None,
        timeout_ms: int,
    ) -> Deferred[Any]:
        """One send to the master of ``mq``'s broker (Java ``sendKernelImpl``)."""
        instance = self._instance()
        addr = instance.routes.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            start = self._now_ms()
            d = self.find_publish_info(mq.topic)
            return d.addCallback(lambda _: self._kernel(
                msg, mq, mode, info, timeout_ms - (self._now_ms() - start)))
        return self._kernel(msg, mq, mode, info, timeout_ms, addr)

    def _kernel(
        self, msg: CodecMessage, mq: MessageQueue, mode: CommunicationMode,
        info: TopicPublishInfo | None, timeout_ms: int, addr: str | None = None,
    ) -> Deferred[Any]:
        # one clock read serves the born timestamp and the timeout: nothing here waits
        now = self._now_ms()
        instance = self._instance()
        broker_name = mq.broker_name
        if addr is None:
            addr = instance.routes.find_broker_address_in_publish(broker_name)
            if addr is None:
                return defer.fail(MQClientError(f"The broker[{broker_name}] not exist"))
        if self.client_config.vip_channel_enabled:
            addr = _vip_address(addr)
        command, header, body = self._send_request(msg, mq, now, instance)
        if timeout_ms < 0:
            return defer.fail(RemotingTimeoutError("sendKernelImpl call timeout"))
        remaining = timeout_ms / 1000
        if mode is CommunicationMode.ONEWAY:
            d = instance.when_writable(addr)
            if d.called:
                return instance.broker_oneway(addr, command, header, body=body)
            d = _bounded(self.reactor, d, remaining, "oneway send: connection stays full")
            return d.addCallback(lambda _: instance.broker_oneway(addr, command, header, body=body))
        if mode is CommunicationMode.ASYNC:
            return _AsyncSend(self, msg, info, addr, broker_name, command, header, body,
                              timeout_ms, now).start()
        d = instance.broker_call(addr, command, header, body=body, timeout=remaining)
        return d.addCallback(self.process_send_response, msg, broker_name, addr)

    def _first_request(
        self, msg: CodecMessage, mq: MessageQueue, now: int, instance: ClientInstance,
        attempt: _FirstAttempt | None = None, oneway: bool = False,
    ) -> SendPrepared | RemotingCommand:
        """The request of a send's first attempt (``_send_request``'s): framed from the topic's
        template (``SendRequestTemplate``, one per command, topic, broker and oneway flag: only
        the queue id, sysFlag, born timestamp, flag, properties and body change from one send to
        the next) when the connection writes JSON headers without RPC hooks, else the typed
        command (also for what the template does not cover: V1 headers, a retry topic's
        reconsume fields, a flag out of the int32 range). Sets ``attempt``'s command and body,
        and its header when typed (a template's is built only if a retry needs it)."""
        rc = instance.remoting.config
        batch = isinstance(msg, _Batch)
        config = self.config
        topic = msg.topic
        if (rc.rpc_hooks or rc.serialize_type is not SerializeType.JSON
                or not (config.send_smart_msg or batch) or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)):
            return self._typed_request(msg, mq, now, instance, attempt)
        try:
            properties, quoted, sys_flag, body = self._prepare_send(msg, batch, instance)
        except ValueError:
            # a map encode_properties refuses: the typed path raises it
            return self._typed_request(msg, mq, now, instance, attempt)
        props = msg.properties
        command: Any = (SendReplyMessageV2 if props.get(PropertyKey.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG
                        else SendBatchMessage if batch else SendMessageV2)
        broker = mq.broker_name
        template = self._send_templates.get((command, topic, broker, oneway))
        if template is None:
            template = self._send_template(command, topic, broker, oneway, instance)
        try:
            prepared = template.request(mq.queue_id, sys_flag, now, msg.flag, properties, body, quoted)
        except ValueError:
            return self._typed_request(msg, mq, now, instance, attempt)
        if attempt is not None:
            attempt.command = command
            attempt.body = body
        return prepared

    def _typed_request(self, msg: CodecMessage, mq: MessageQueue, now: int, instance: ClientInstance,
                       attempt: _FirstAttempt | None) -> RemotingCommand:
        command, header, body = self._send_request(msg, mq, now, instance)
        if attempt is not None:
            attempt.command, attempt.header, attempt.body = command, header, body
        rc = instance.remoting.config
        return command.request(header, body, language=rc.language, version=rc.version)  # type: ignore[no-any-return]

    def _prepare_send(
        self, msg: CodecMessage, batch: bool, instance: ClientInstance
    ) -> tuple[str, bytes | None, int, bytes]:
        """What every request of a send carries whatever its header: the message's UNIQ_KEY (and
        the namespace's INSTANCE_ID) set on the first attempt, the properties string (and its
        quoted form when the id was made here), the sysFlag (compression, transaction) and the
        body as sent. CodecError (a ValueError) for a map encode_properties refuses."""
        props = msg.properties
        quoted = None
        if batch or _UNIQ in props or self._namespace:
            if not batch and _UNIQ not in props:
                props[_UNIQ] = instance.unique_ids.next_id()
            if self._namespace:
                props[PropertyKey.INSTANCE_ID] = self._namespace
            properties = encode_properties(props)
        else:
            properties, quoted = self._with_new_id(props, instance.unique_ids.next_id())
        sys_flag, body = self._send_body(msg, batch)
        tran = props.get(PropertyKey.TRANSACTION_PREPARED)
        if tran is not None and tran.lower() == "true":
            sys_flag |= _TRAN_PREPARED
        return properties, quoted, sys_flag, body

    def _with_new_id(self, props: dict[str, str], uid: str) -> tuple[str, bytes]:
        """A message's properties string and its quoted form (as the template writes it) once
        ``uid`` is its UNIQ_KEY, set here as the map's last key. The text before the id is the
        same for most sends of an application (tags, keys, WAIT): quoted once per distinct text;
        JSON quotes character by character, so the quoted whole is the quoted parts joined."""
        try:
            base = encode_properties(props)
        finally:
            props[_UNIQ] = uid  # on the message even when its map cannot be written, as before
        head = self._quoted_heads.get(base)
        if head is None:
            if len(self._quoted_heads) >= 256:  # an application with ever new texts: start over
                self._quoted_heads.clear()
            head = self._quoted_heads[base] = json_quote(base)[:-1]
        return (f"{base}{_UNIQ}\x01{uid}\x02",
                f'{head}{_UNIQ}\\u0001{uid}\\u0002"'.encode())

    def _send_template(self, command: Any, topic: str, broker: str, oneway: bool,
                       instance: ClientInstance) -> SendRequestTemplate:
        templates = self._send_templates
        if len(templates) >= 1024:  # topics x brokers of a long-lived producer: start over
            templates.clear()
        rc = instance.remoting.config
        header = SendMessageRequestHeaderV2(
            a=self.namespaced_group if self._namespace else self.group, b=topic,
            c=self.config.create_topic_key, d=self.config.default_topic_queue_nums,
            e=0, f=0, g=0, h=0, i="", j=0, k=self.client_config.unit_mode, l=None,
            m=command is SendBatchMessage, n=broker,
        )
        template = templates[(command, topic, broker, oneway)] = SendRequestTemplate(
            command, header, language=rc.language, version=rc.version, oneway=oneway)
        return template

    def _send_body(self, msg: CodecMessage, batch: bool) -> tuple[int, bytes]:
        """The sysFlag of the compression and the body as sent (compressed when over the
        threshold; Java logs a failed compression and sends the body as it is)."""
        config = self.config
        body = msg.body
        if not batch and len(body) >= config.compress_msg_body_over_howmuch:
            try:
                return (int(MessageSysFlag.COMPRESSED) | config.compress_type.flag,
                        compress(body, config.compress_type, config.compress_level))
            except Exception as e:
                self.log.error("tryToCompressMessage exception: {e}", e=e)
        return 0, body

    def _send_request(
        self, msg: CodecMessage, mq: MessageQueue, now: int, instance: ClientInstance
    ) -> tuple[Any, Any, bytes]:
        """Java ``sendKernelImpl``'s request: (command, header, body) of one attempt; sets the
        message's UNIQ_KEY (and the namespace's INSTANCE_ID) on the first attempt."""
        batch = isinstance(msg, _Batch)
        properties, _, sys_flag, body = self._prepare_send(msg, batch, instance)
        props = msg.properties
        config = self.config
        reconsume_times = 0
        max_reconsume_times = None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            rt = props.pop(PropertyKey.RECONSUME_TIME, None)
            if rt is not None:
                reconsume_times = int(rt)
            mrt = props.pop(PropertyKey.MAX_RECONSUME_TIMES, None)
            if mrt is not None:
                max_reconsume_times = int(mrt)
        reply = props.get(PropertyKey.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG
        header: Any
        if config.send_smart_msg or batch:
            header = SendMessageRequestHeaderV2(
                a=self.namespaced_group if self._namespace else self.group, b=msg.topic,
                c=config.create_topic_key,
                d=config.default_topic_queue_nums, e=mq.queue_id, f=sys_flag,
                g=now,
                h=msg.flag, i=properties, j=reconsume_times, k=self.client_config.unit_mode,
                l=max_reconsume_times, m=batch, n=mq.broker_name,
            )
            command: Any = SendReplyMessageV2 if reply else (SendBatchMessage if batch else SendMessageV2)
        else:
            header = SendMessageRequestHeader(
                producer_group=self.namespaced_group, topic=msg.topic,
                default_topic=config.create_topic_key,
                default_topic_queue_nums=config.default_topic_queue_nums,
                queue_id=mq.queue_id, sys_flag=sys_flag, born_timestamp=now, flag=msg.flag,
                properties=properties, reconsume_times=reconsume_times,
                unit_mode=self.client_config.unit_mode, batch=batch,
                max_reconsume_times=max_reconsume_times, bname=mq.broker_name,
            )
            command = SendReplyMessage if reply else SendMessage
        return command, header, body

    def send_result_of(self, response: RemotingCommand, msg: CodecMessage, broker_name: str) -> SendResult | None:
        """``process_send_response`` of ``parse_response`` straight from the response's fields in
        the common case (a send status code, integers as plain digits in range; other keys, which
        the typed header keeps in ``extra``, are not read): no typed header or Response per send.
        None for anything else, which the typed path then reads (and fails on) as the schema of
        record."""
        return self.send_result_from(response.code, response.ext_fields, msg, broker_name)

    def send_result_from(self, code: int, ext: dict[str, str] | None, msg: CodecMessage,
                         broker_name: str, sent_to: MessageQueue | None = None) -> SendResult | None:
        """``send_result_of`` from a response's code and extFields alone; ``sent_to`` (the queue
        the request went to) is the result's queue when it is that one (as a rule), not a copy."""
        status = _STATUS_OF.get(code)
        if status is None or ext is None:
            return None
        get = ext.get
        queue_id = get("queueId")
        offset = get("queueOffset")
        msg_id = get("msgId")
        if queue_id is not None:
            if not (queue_id.isascii() and queue_id.isdigit()):
                return None
            queue_id = int(queue_id)
            if queue_id > 2147483647:
                return None
        if offset is not None:
            if not (offset.isascii() and offset.isdigit()):
                return None
            offset = int(offset)
            if offset > 9223372036854775807:
                return None
        if status is SendStatus.SEND_OK and (msg_id is None or queue_id is None or offset is None):
            return None  # strict: the typed path raises the missing field
        topic = without_namespace(msg.topic, self._namespace) if self._namespace else msg.topic
        if isinstance(msg, _Batch) and get("batchUniqId") is None:
            uniq: str | None = msg.ids or _batch_ids(msg.messages)
        else:
            uniq = msg.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        mq = sent_to
        if mq is None or mq.queue_id != queue_id or mq.topic != topic or mq.broker_name != broker_name:
            mq = MessageQueue(topic, broker_name, queue_id)
        return new_send_result(status, uniq, msg_id, mq, offset, get("transactionId"),
                               get(PropertyKey.MSG_REGION) or "DefaultRegion",
                               get(PropertyKey.TRACE_SWITCH) != "false", get("recallHandle"))

    def send_ok_from(self, usual: tuple[str, ...], msg: CodecMessage, sent_to: MessageQueue) -> SendResult | None:
        """``send_result_from`` of a SUCCESS answer to a send of ``msg`` (a message or a batch) to
        ``sent_to`` whose extFields text is the broker's usual one (``SEND_OK_EXT``'s values, as
        the header scan read them: no batchUniqId, so a batch's msg_id is its messages' ids
        joined): no dict per answer; None when the values are out of range
        (``send_result_from`` judges those)."""
        queue_id, transaction_id, msg_id, trace_on, region, offset = usual
        queue_id = int(queue_id)
        if queue_id > 2147483647:
            return None
        topic = without_namespace(msg.topic, self._namespace) if self._namespace else msg.topic
        mq = sent_to
        if mq.queue_id != queue_id or mq.topic != topic:
            mq = MessageQueue(topic, sent_to.broker_name, queue_id)
        uniq = (msg.ids or _batch_ids(msg.messages)) if isinstance(msg, _Batch) else msg.properties.get(_UNIQ)
        return new_send_result(SendStatus.SEND_OK, uniq, msg_id, mq, int(offset), transaction_id,
                               region or "DefaultRegion", trace_on != "false", None)

    def process_send_response(
        self, response: Response[Any, Any], msg: CodecMessage, broker_name: str, addr: str
    ) -> SendResult:
        """Java ``processSendResponse``: the SendResult of a SUCCESS or flush/slave status."""
        status = _STATUS_OF[response.code]
        h = response.header
        topic = without_namespace(msg.topic, self._namespace) if self._namespace else msg.topic
        props = msg.properties
        if isinstance(msg, _Batch) and h.batch_uniq_id is None:
            msg_id: str | None = ",".join(
                m.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "" for m in msg.messages
            )
        else:
            msg_id = props.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        extra = h.extra
        region = extra.get(PropertyKey.MSG_REGION) or "DefaultRegion"
        return SendResult(
            status=status,
            msg_id=msg_id,
            offset_msg_id=h.msg_id,
            message_queue=MessageQueue(topic, broker_name, h.queue_id),
            queue_offset=h.queue_offset,
            transaction_id=h.transaction_id,
            region_id=region,
            trace_on=extra.get(PropertyKey.TRACE_SWITCH) != "false",
            recall_handle=h.recall_handle,
        )


class _SendPlan:
    """A topic's first attempts in their common case, worked out once (``Producer._send_planned``):
    per queue of the route, in its order, the queue, its broker, the broker's master address as
    the route table had it (``raw``) and as dialled (VIP port when enabled), and the topic's
    SEND_MESSAGE_V2 templates to that broker (two-way, oneway) and its SEND_BATCH_MESSAGE one
    (two-way). Valid while the route's
    TopicPublishInfo (its queue list), the producer's and the client's configuration and the
    remoting configuration are the objects it was made from and the latency fault strategy's
    switch is as it was (``Producer._plan_of`` remakes it otherwise); ``ok`` is False when they
    call for the general path (a namespace, the latency fault strategy, RPC hooks, ROCKETMQ
    headers, V1 sends, a retry topic, no route)."""

    __slots__ = ("info", "mqs", "config", "client_config", "remoting", "rc", "fault", "ok", "queues",
                 "n", "instance", "broker_addrs", "compress_over", "cap")

    def __init__(self, info: TopicPublishInfo | None, config: ProducerConfig,
                 client_config: ClientConfig, remoting: Any) -> None:
        self.info = info
        self.mqs = info.message_queues if info is not None else None
        self.config = config
        self.client_config = client_config
        self.remoting = remoting
        self.rc = remoting.config if remoting is not None else None
        #: the latency fault strategy's switch when the plan was made
        self.fault = False
        self.ok = False
        self.queues: list[tuple[MessageQueue, str, str | None, str | None, SendRequestTemplate,
                                SendRequestTemplate, SendRequestTemplate]] = []
        self.n = 0
        self.instance: Any = None
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.compress_over = 0
        self.cap = -1


class _DefaultSend:
    """One run of Java's ``sendDefaultImpl`` retry loop."""

    __slots__ = ("p", "msg", "mode", "begin", "timeout", "info", "mq", "times", "times_total",
                 "brokers_sent", "exception", "send_result", "call_timeout", "prev", "first")

    def __init__(self, p: Producer, msg: CodecMessage, mode: CommunicationMode, begin: int,
                 timeout_ms: int, info: TopicPublishInfo | None = None,
                 first: MessageQueue | None = None) -> None:
        self.p = p
        self.msg = msg
        self.mode = mode
        self.begin = begin
        self.timeout = timeout_ms
        self.info = info
        self.mq: MessageQueue | None = None
        #: the first attempt's queue when already picked (by _send_default)
        self.first = first
        self.times = 0
        self.times_total = 1 + p.config.retry_times_when_send_failed if mode is CommunicationMode.SYNC else 1
        self.brokers_sent: list[str] = []
        self.exception: BaseException | None = None
        self.send_result: SendResult | None = None
        self.call_timeout = False
        self.prev = begin

    def start(self) -> Deferred[Any]:
        info = self.info or self.p.publish_info.get(self.msg.topic)
        if info is not None and info.ok():
            return self._with_info(info)
        return self.p.find_publish_info(self.msg.topic).addCallback(self._with_info)

    def _with_info(self, info: TopicPublishInfo | None) -> Deferred[Any]:
        if info is None or not info.ok():
            raise self.p._no_route(self.msg.topic)
        self.info = info
        return self._attempt()

    def _attempt(self) -> Deferred[Any]:
        p = self.p
        assert self.info is not None
        while self.times < self.times_total:
            last = self.mq.broker_name if self.mq is not None else None
            mq = self.first
            if mq is not None:
                self.first = None
            else:
                mq = p.fault_strategy.select_one_message_queue(self.info, last, self.times > 0)
            if mq is None:
                break
            self.mq = mq
            self.brokers_sent.append(mq.broker_name)
            self.prev = now = p._now_ms()
            cost = now - self.begin
            if self.timeout < cost:
                self.call_timeout = True
                break
            cur = self.timeout - cost
            cap = p.config.send_msg_max_timeout_per_request
            if cap > -1 and self.times + 1 < self.times_total and cur > cap:
                cur = cap
            try:
                d = p.send_kernel(self.msg, mq, self.mode, self.info, cur)
            except Exception:
                d = defer.fail()
            if self.mode is CommunicationMode.ASYNC:
                # one attempt: _AsyncSend retries and records fault items itself (Java hands the
                # attempt's own error to the callback)
                return d
            return d.addCallbacks(self._sent, self._failed)
        return self._give_up()

    def _sent(self, result: SendResult | None) -> Any:
        assert self.mq is not None
        self.p.fault_strategy.update_fault_item(self.mq.broker_name, self.p._now_ms() - self.prev, False, True)
        if self.mode is not CommunicationMode.SYNC:
            return result
        assert result is not None
        if result.status is not SendStatus.SEND_OK and self.p.config.retry_another_broker_when_not_store_ok:
            self.send_result = result
            self.times += 1
            return self._attempt()
        return result

    def _failed(self, failure: Failure) -> Any:
        assert self.mq is not None
        p = self.p
        latency = p._now_ms() - self.prev
        exc = failure.value
        broker = self.mq.broker_name
        if isinstance(exc, MQClientError):
            p.fault_strategy.update_fault_item(broker, latency, False, True)
        elif isinstance(exc, RemotingError):
            p.fault_strategy.update_fault_item(broker, latency, True, True)
        elif isinstance(exc, BrokerResponseError):
            p.fault_strategy.update_fault_item(broker, latency, True, False)
            if exc.code not in p.config.retry_response_codes:
                if self.send_result is not None:
                    return self.send_result
                return failure
        else:
            return failure  # a bug or a codec error: no retry hides it
        p.log.warn("send to {broker} failed, attempt {n} of {total}: {why}", broker=broker,
                   n=self.times + 1, total=self.times_total, why=failure.getErrorMessage())
        self.exception = exc
        self.times += 1
        return self._attempt()

    def _give_up(self) -> Any:
        if self.send_result is not None:
            return self.send_result
        if self.call_timeout:
            raise RemotingTimeoutError("sendDefaultImpl call timeout") from self.exception
        cost = self.p._now_ms() - self.begin
        info = (f"Send [{self.times}] times, still failed, cost [{cost}]ms, Topic: {self.msg.topic}, "
                f"BrokersSent: [{', '.join(self.brokers_sent)}]") + suggest_todo(
                    "https://rocketmq.apache.org/docs/bestPractice/06FAQ")
        exc = self.exception
        code = -1
        if isinstance(exc, BrokerResponseError):
            code = exc.code
        elif isinstance(exc, RemotingConnectError):
            code = ClientErrorCode.CONNECT_BROKER_EXCEPTION
        elif isinstance(exc, RemotingTimeoutError):
            code = ClientErrorCode.ACCESS_BROKER_TIMEOUT
        elif isinstance(exc, MQClientError):
            code = ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
        raise MQClientError(info, response_code=code) from exc


class _SendDeferred(Deferred):  # type: ignore[type-arg]
    """The Deferred a send returns when its first attempt settles it directly (a sink)."""

    attempt: _FirstAttempt | None = None

    ok = Deferred.callback
    fail = Deferred.errback


def _cancel_send(d: _SendDeferred) -> None:
    """Canceller of a ``_SendDeferred``: the attempt (or the retries it handed on to) is dropped."""
    attempt = d.attempt
    if attempt is not None:
        attempt.cancel()


class _FirstAttempt(PendingCall):
    """The first attempt of ``_send_default``'s common case, the channel's receiver: the response
    straight to the SendResult and into the sink (``ok``/``fail``); a failure handed to the general
    path as the outcome of its own first attempt, whose outcome then settles the sink. Whatever
    the outcome, the send's in-flight token (if any) is given back first.

    It is also its own pending call on the connection (``invoke_direct_prepared``: the opaque,
    deadline and timeout slots are the connection's), so an in-flight send holds one object
    here, not two."""

    __slots__ = ("p", "msg", "mode", "info", "mq", "addr", "begin", "timeout_ms", "now", "cur",
                 "command", "header", "body", "sink", "tokens", "channel", "fallback", "request")

    __repr__ = object.__repr__  # the dataclass's would read call slots that may be unset

    def __init__(self, p: Producer, msg: CodecMessage, mode: CommunicationMode,
                 info: TopicPublishInfo, mq: MessageQueue, addr: str, begin: int, timeout_ms: int,
                 now: int, sink: Any, tokens: _Semaphore | None) -> None:
        self.p = p
        self.msg = msg
        self.mode = mode
        self.info = info
        self.mq = mq
        self.addr = addr
        self.begin = begin
        self.timeout_ms = timeout_ms
        self.now = now
        self.cur = timeout_ms
        self.command: Any = None
        self.header: Any = None
        self.body = b""
        self.sink = sink
        self.tokens = tokens
        self.channel: Any = None  # set while the call is pending on it
        self.opaque = 0
        self.fallback: Deferred[Any] | None = None
        self.request: RemotingCommand | None = None  # set by the channel when it has RPC hooks

    # ---- the channel's receiver ----------------------------------------------------------------

    def answered_scan(self, scan: re.Match[str], body: bytes | None) -> None:
        """The response as the channel's fast scan of its header: a send status read from the
        code and extFields alone, anything else decoded and read as ``answered`` reads it."""
        self.channel = None
        try:
            mq = self.mq
            # the scan read the usual send-OK extFields (SEND_OK_EXT) in its one pass
            if scan[SEND_OK_QUEUE_ID] is not None and scan[CODE] == "0":
                fast = self.p.send_ok_from(scan.group(*SEND_OK_FIELDS), self.msg, mq)
            else:
                fast = self.p.send_result_from(int(scan[CODE]), scanned_ext_fields(scan), self.msg,
                                               mq.broker_name, mq)
        except Exception:
            fast = None
        if fast is None:
            try:
                response = scanned_command(scan, body)
            except Exception:
                self.fall_back(Failure())  # as a frame the channel could not decode
                return
            self.answered(response)
            return
        self._fast(fast)

    def answered(self, response: RemotingCommand) -> None:
        self.channel = None
        p = self.p
        try:
            fast = p.send_result_of(response, self.msg, self.mq.broker_name)
        except Exception:
            fast = None  # the typed path below judges it
        if fast is not None:
            self._fast(fast)
            return
        if self.mode is CommunicationMode.SYNC:
            try:
                result = p.process_send_response(
                    self.command.parse_response(response), self.msg, self.mq.broker_name, self.addr)
            except Exception:
                self.fall_back(Failure())
                return
            if result.status is not SendStatus.SEND_OK and p.config.retry_another_broker_when_not_store_ok:
                self._resume(lambda: self._loop()._sent(result))
                return
            self.settle(result)
            return
        try:
            typed = self.command.parse_response(response)
        except Exception:
            self.fall_back(Failure())
            return
        try:
            result = p.process_send_response(typed, self.msg, self.mq.broker_name, self.addr)
        except Exception:
            self.settle(Failure())  # as Java, a response that cannot be read is not retried
            return
        self.settle(result)

    def _fast(self, fast: SendResult) -> None:
        if (fast.status is not SendStatus.SEND_OK and self.mode is CommunicationMode.SYNC
                and self.p.config.retry_another_broker_when_not_store_ok):
            self._resume(lambda: self._loop()._sent(fast))
            return
        self.settle(fast)

    def failed(self, error: Exception) -> None:
        self.channel = None
        self.fall_back(Failure(error))

    # ---- outcome -------------------------------------------------------------------------------

    def fall_back(self, failure: Failure) -> None:
        """The attempt failed: the general path judges it (retries, fault items, Java's errors)."""
        if self.mode is CommunicationMode.SYNC:
            self._resume(lambda: self._loop()._failed(failure))
            return
        if self.header is None:  # framed from a template: the same request, typed, for the retries
            try:
                self.command, self.header, self.body = self.p._send_request(
                    self.msg, self.mq, self.now, self.p._instance())
            except Exception:
                self.settle(Failure())
                return
        retry = _AsyncSend(self.p, self.msg, self.info, self.addr, self.mq.broker_name, self.command,
                           self.header, self.body, self.cur, self.now)
        self._resume(lambda: retry._transport_failed(failure))

    def _resume(self, step: Any) -> None:
        try:
            out = step()
        except Exception:
            out = Failure()
        if isinstance(out, Deferred):
            self.fallback = out
            out.addBoth(self.settle)
        else:
            self.settle(out)

    def settle(self, outcome: Any) -> None:
        tokens = self.tokens
        if tokens is not None:
            self.tokens = None
            tokens.release()
        sink = self.sink
        if sink is None:  # cancelled
            return
        self.sink = None
        if type(sink) is _SendDeferred:
            sink.attempt = None  # a caller may keep the Deferred long after: not the attempt
        if isinstance(outcome, Failure):
            sink.fail(outcome)
        else:
            sink.ok(outcome)

    def cancel(self) -> None:
        """The caller gave up: forget the pending call (or cancel the retries, which settle the
        sink with the CancelledError)."""
        if self.sink is None:
            return
        if self.fallback is not None:
            self.fallback.cancel()
            return
        channel = self.channel
        self.channel = None
        self.sink = None
        tokens = self.tokens
        if tokens is not None:
            self.tokens = None
            tokens.release()
        if channel is not None:
            channel.forget(self.opaque)

    def _loop(self) -> _DefaultSend:
        """The retry loop as it stands after this attempt."""
        loop = _DefaultSend(self.p, self.msg, self.mode, self.begin, self.timeout_ms, self.info)
        loop.mq = self.mq
        loop.brokers_sent.append(self.mq.broker_name)
        loop.prev = self.now
        return loop


class _AsyncSend:
    """Java ``sendMessageAsync`` + ``onExceptionImpl``: transport failures retried."""

    __slots__ = ("p", "msg", "info", "addr", "broker_name", "command", "header", "body",
                 "timeout", "times", "begin")

    def __init__(self, p: Producer, msg: CodecMessage, info: TopicPublishInfo | None, addr: str,
                 broker_name: str, command: Any, header: Any, body: bytes, timeout_ms: int,
                 begin: int) -> None:
        self.p = p
        self.msg = msg
        self.info = info
        self.addr = addr
        self.broker_name = broker_name
        self.command = command
        self.header = header
        self.body = body
        self.timeout = timeout_ms
        self.times = 0
        self.begin = begin

    def start(self) -> Deferred[SendResult]:
        # no wait on a full connection here: the in-flight cap bounds what async sends hold
        return self._call()

    def _call(self) -> Deferred[SendResult]:
        p = self.p
        d = p._instance().broker_call(self.addr, self.command, self.header, body=self.body,
                                      timeout=max(self.timeout, 1) / 1000)
        return d.addCallbacks(self._answered, self._transport_failed)

    def _answered(self, response: Response[Any, Any]) -> SendResult:
        p = self.p
        p.fault_strategy.update_fault_item(self.broker_name, p._now_ms() - self.begin, False, True)
        return p.process_send_response(response, self.msg, self.broker_name, self.addr)

    def _transport_failed(self, failure: Failure) -> Any:
        p = self.p
        cost = p._now_ms() - self.begin
        if failure.check(BrokerResponseError):
            # processSendResponse threw: Java reports it without a retry
            p.fault_strategy.update_fault_item(self.broker_name, cost, True, True)
            return failure
        p.fault_strategy.update_fault_item(self.broker_name, cost, True, True)
        need_retry = failure.check(RemotingError) is not None and not failure.check(RemotingTooManyRequestsError)
        self.times += 1
        remaining = self.timeout - cost
        if not need_retry or self.times > p.config.retry_times_when_send_async_failed or remaining <= 0:
            return failure
        # Java re-sends the same request to the broker chosen for the retry; the header here
        # follows that broker's queue (Java's keeps the first queue id, which the other broker
        # may not have).
        if self.info is not None:
            mq = p.fault_strategy.select_one_message_queue(self.info, self.broker_name, False)
            if mq is not None and mq.broker_name != self.broker_name:
                addr = p._instance().routes.find_broker_address_in_publish(mq.broker_name)
                if addr is not None:
                    self.broker_name, self.addr = mq.broker_name, addr
                    self.header = _retarget(self.header, mq)
        p.log.warn("async send msg by retry {n} times. topic={topic}, brokerAddr={addr}, "
                   "brokerName={name}: {why}", n=self.times, topic=self.msg.topic, addr=self.addr,
                   name=self.broker_name, why=failure.getErrorMessage())
        self.timeout = remaining
        self.begin = p._now_ms()
        return self._call()


def _planned_batch_text(props: dict[str, str]) -> tuple[str, bytes] | None:
    """A send plan's properties text of a batch (``Producer._batch``'s map: its WAIT, then its
    UNIQ_KEY) and that text quoted as the template writes it; None for any other map, which the
    general path encodes."""
    if len(props) != 2:
        return None
    wait = props.get(_WAIT)
    uid = props.get(_UNIQ)
    if (wait != "true" and wait != "false") or type(uid) is not str or not (
            uid.isascii() and uid.isalnum()):
        return None
    return _batch_text(wait, uid)


def _batch_text(wait: str, uid: str) -> tuple[str, bytes]:
    """``_planned_batch_text`` of a batch's WAIT and UNIQ_KEY values that pass its checks."""
    return (f"{_WAIT}\x01{wait}\x02{_UNIQ}\x01{uid}\x02",
            f'"{_WAIT}\\u0001{wait}\\u0002{_UNIQ}\\u0001{uid}\\u0002"'.encode())


def _publish_address(p: Producer, instance: ClientInstance, broker: str) -> str | None:
    """The address a send to ``broker`` dials: its master's (VIP port when enabled), or None."""
    addr = instance.routes.find_broker_address_in_publish(broker)
    if addr is not None and p.client_config.vip_channel_enabled:
        addr = _vip_address(addr)
    return addr


def _vip_address(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) - 2}"


def _retarget(header: Any, mq: MessageQueue) -> Any:
    if isinstance(header, SendMessageRequestHeaderV2):
        return dataclasses.replace(header, e=mq.queue_id, n=mq.broker_name)
    return dataclasses.replace(header, queue_id=mq.queue_id, bname=mq.broker_name)

