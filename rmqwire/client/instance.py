"""One client instance per client id: connections, NameServers, routes, heartbeats (Java
``MQClientInstance`` and ``MQClientManager``).

Every producer and consumer of one client id registers with the same ``ClientInstance``, which
owns:

- the ``RemotingClient`` (one pooled connection per NameServer / broker address), with the
  processors answering the broker's requests to clients (CHECK_TRANSACTION_STATE goes to the
  producer of the message's group, PUSH_REPLY_MESSAGE_TO_CLIENT to the waiting request; consumers
  add theirs with ``add_processor``);
- the NameServer list, with a sticky choice that fails over to the next address on a transport
  error;
- the ``RouteTable`` (routes, broker addresses and versions) and the route refresh every
  ``poll_name_server_interval`` (first after 10 ms) for every topic a member uses;
- the heartbeat every ``heartbeat_broker_interval`` (first after 1 s) to every master broker in
  the routes (every broker address once a consumer is registered), and one to each broker as soon
  as a new connection to it opens (Java's channel-active listener), so a new producer is known to
  the broker before its first message;
- UNREGISTER_CLIENT to every broker when a member leaves.

Members are duck-typed (``ProducerMember``, ``ConsumerMember``); the consumer side reuses this
class unchanged. The reactor is injected; the instance is a Twisted ``Service``.
"""

from __future__ import annotations

import random as _random
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from twisted.application.service import Service
from twisted.internet import defer, task
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from rmqwire.client.config import ClientConfig
from rmqwire.client.route import (
    RouteTable,
    TopicPublishInfo,
    default_route_for,
    route_changed,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)
from rmqwire.client.validators import AUTO_CREATE_TOPIC_KEY_TOPIC
from rmqwire.codec.commands import Command, Response
from rmqwire.codec.commands.heartbeat import (
    ConsumerData,
    HeartBeat,
    HeartbeatData,
    ProducerData,
    UnregisterClient,
)
from rmqwire.codec.commands.route import GetRouteInfo, TopicRouteData
from rmqwire.codec.commands.send import (
    PushReplyMessageToClient,
    ReplyMessageRequestHeader,
)
from rmqwire.codec.commands.transaction import (
    CheckTransactionState,
    CheckTransactionStateRequestHeader,
)
from rmqwire.codec.ids import UniqueIdGenerator
from rmqwire.codec.message import (
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    compression_type_of,
    decode_messages,
    decode_properties,
    decompress,
)
from rmqwire.errors import (
    BrokerResponseError,
    ClientErrorCode,
    MQClientError,
    RemotingError,
    TopicNotExistError,
)
from rmqwire.model import MessageQueue
from rmqwire.remoting.client import RemotingClient
from rmqwire.remoting.dispatcher import Processor, RequestContext

#: Java ``FAQUrl`` suggestions, kept in the messages so they read as Java's.
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def suggest_todo(url: str = FAQ_URL) -> str:
    return f"\nSee {url} for further details."


class ProducerMember(Protocol):
    """What the instance calls on a registered producer."""

    def publish_topics(self) -> Iterable[str]: ...

    def is_publish_topic_need_update(self, topic: str) -> bool: ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...

    def check_transaction_state(
        self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None: ...


class ConsumerMember(Protocol):
    """What the instance calls on a registered consumer (heartbeat data and subscribed routes)."""

    def consumer_data(self) -> ConsumerData: ...

    def subscribed_topics(self) -> Iterable[str]: ...

    def is_subscribe_topic_need_update(self, topic: str) -> bool: ...

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...


@implementer(IPushProducer)
class WriteGate:
    """Transport flow control of one broker connection: the transport pauses us when its write
    buffer is full, and sends that must not grow memory (async, oneway) wait for the resume."""

    def __init__(self) -> None:
        self.paused = False
        self._waiters: list[Deferred[None]] = []
        self._written: list[Deferred[None]] = []  # oneway sends written past the paused gate

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.callback(None)
        written, self._written = self._written, []
        for w in written:
            w.callback(None)

    def written_past(self) -> Deferred[None]:
        """Fires when the gate opens again, for a send written while it was paused (it holds
        its in-flight slot until then: as Java's oneway permit, held until its write is done)."""
        d: Deferred[None] = Deferred()
        self._written.append(d)
        return d

    def stopProducing(self) -> None:
        # the connection is gone: waiters go on and their send fails on the closed channel
        self.resumeProducing()

    def when_writable(self) -> Deferred[None]:
        if not self.paused:
            return defer.succeed(None)
        d: Deferred[None] = Deferred(
            canceller=lambda d: self._waiters.remove(d) if d in self._waiters else None
        )
        self._waiters.append(d)
        return d


class ClientProcessor(Processor):
    """The broker's requests to this client (Java ``ClientRemotingProcessor``, producer side)."""

    log = Logger()

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    @CheckTransactionState.responder
    def check_transaction_state(
        self, header: CheckTransactionStateRequestHeader, body: bytes | None, context: RequestContext
    ) -> None:
        try:
            (msg,) = decode_messages(body or b"")
        except Exception as e:  # Java logs "decode message failed" and answers nothing (oneway)
            self.log.warn("check transaction state: cannot decode the message: {e}", e=e)
            return None
        group = msg.properties.get(PropertyKey.PRODUCER_GROUP)
        producer = self.instance.producers.get(group) if group else None
        if producer is None:
            self.log.debug("check transaction state: no producer of group {group}", group=group)
            return None
        producer.check_transaction_state(context.peer, msg, header)
        return None

    @PushReplyMessageToClient.responder
    def receive_reply_message(
        self, header: ReplyMessageRequestHeader, body: bytes | None, context: RequestContext
    ) -> Response[Any, Any]:
        now = int(self.instance.reactor.seconds() * 1000)
        try:
            msg = reply_message_from(header, body)
        except Exception:
            self.log.failure("cannot read a reply message from {peer}", peer=context.peer)
            return Response(code=1, remark="process reply message fail")
        msg.properties[PropertyKey.REPLY_MESSAGE_ARRIVE_TIME] = str(now)
        self.instance.deliver_reply(msg)
        return Response()


def _host(text: str | None) -> tuple[str, int]:
    if not text:
        return ("0.0.0.0", 0)
    host, _, port = text.rpartition(":")
    return (host.strip("[]").lstrip("/"), int(port))


def reply_message_from(header: ReplyMessageRequestHeader, body: bytes | None) -> MessageExt:
    """The MessageExt Java's ``receiveReplyMessage`` builds from a PUSH_REPLY_MESSAGE_TO_CLIENT."""
    data = body or b""
    sys_flag = header.sys_flag or 0
    if sys_flag & MessageSysFlag.COMPRESSED:
        data = decompress(data, compression_type_of(sys_flag))
    return MessageExt(
        topic=header.topic or "",
        body=data,
        flag=header.flag or 0,
        properties=decode_properties(header.properties),
        queue_id=header.queue_id or 0,
        sys_flag=sys_flag,
        born_timestamp=header.born_timestamp or 0,
        born_host=_host(header.born_host),
        store_timestamp=header.store_timestamp,
        store_host=_host(header.store_host),
        reconsume_times=header.reconsume_times or 0,
    )


class ClientInstance(Service):
    """Connections, NameServers, routes and heartbeats shared by a client id's members."""

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        config: ClientConfig,
        *,
        remoting: RemotingClient | None = None,
        rng: _random.Random | None = None,
    ) -> None:
        self.reactor = reactor
        self.config = config.resolved()
        self.client_id = self.config.client_id()
        self.rng = rng or _random.Random()
        self.remoting = remoting if remoting is not None else RemotingClient(
            reactor, self.config.remoting_config()
        )
        self.remoting.dispatcher.add_processor(ClientProcessor(self))
        self.routes = RouteTable()
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self.unique_ids = UniqueIdGenerator(self.config.client_ip)
        self.namesrv_addrs: tuple[str, ...] = self.config.namesrv_addrs
        self._namesrv_index = self.rng.randrange(len(self.namesrv_addrs)) if self.namesrv_addrs else 0
        self._route_updates: dict[tuple[str, bool], list[Deferred[bool]]] = {}
        self._heartbeat: list[Deferred[bool]] | None = None
        self._gates: dict[str, tuple[Any, WriteGate]] = {}
        self._reply_waiters: dict[str, Deferred[MessageExt]] = {}
        self._loops: list[task.LoopingCall] = []
        self._start_calls: list[Any] = []
        #: Called with (broker_name, broker_id, addr) after a heartbeat on a new connection
        #: succeeded (Java then rebalances at once); consumers append to it.
        self.channel_active_listeners: list[Callable[[str, int, str], None]] = []

    # ---- lifecycle -----------------------------------------------------------------------------

    def startService(self) -> None:
        if self.running:
            return
        super().startService()
        self.remoting.startService()
        poll = self.config.poll_name_server_interval / 1000
        beat = self.config.heartbeat_broker_interval / 1000
        for first, every, fn in ((0.01, poll, self.update_all_topic_routes),
                                 (1.0, beat, self._heartbeat_tick)):
            loop = task.LoopingCall(self._guarded, fn)
            loop.clock = self.reactor
            self._loops.append(loop)
            self._start_calls.append(self.reactor.callLater(first, self._start_loop, loop, every))
        self.log.info("client instance {cid} started", cid=self.client_id)

    def _start_loop(self, loop: task.LoopingCall, every: float) -> None:
        if self.running and not loop.running:
            loop.start(every, now=True)

    def _guarded(self, fn: Callable[[], Deferred[Any]]) -> Deferred[None]:
        # a scheduled task must never stop its LoopingCall on an error
        d = defer.maybeDeferred(fn)
        d.addErrback(lambda f: self.log.failure("scheduled task {fn} failed", f, fn=fn.__name__))
        return d.addCallback(lambda _: None)

    def stopService(self) -> Deferred[None]:
        """Stop the timers and close every connection (after in-flight calls, within the
        remoting config's close grace)."""
        super().stopService()
        for call in self._start_calls:
            if call.active():
                call.cancel()
        self._start_calls.clear()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        for d in list(self._reply_waiters.values()):
            d.cancel()
        # a transport with a producer registered waits for it before closing: let go first
        for proto, _gate in self._gates.values():
            if proto.transport is not None and getattr(proto.transport, "producer", None) is _gate:
                proto.transport.unregisterProducer()
        self._gates.clear()
        self.log.info("client instance {cid} stopping", cid=self.client_id)
        return defer.maybeDeferred(self.remoting.stopService).addCallback(lambda _: None)

    @property
    def empty(self) -> bool:
        return not self.producers and not self.consumers

    def add_processor(self, processor: Processor) -> None:
        """Answer more broker requests on this client's connections (consumers use it)."""
        self.remoting.dispatcher.add_processor(processor)

    # ---- members -------------------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerMember) -> bool:
        if group in self.producers:
            self.log.warn("the producer group[{group}] exist already.", group=group)
            return False
        self.producers[group] = producer
        return True

    def unregister_producer(self, group: str) -> Deferred[None]:
        self.producers.pop(group, None)
        return self.unregister_client(group, None)

    def register_consumer(self, group: str, consumer: ConsumerMember) -> bool:
        if group in self.consumers:
            self.log.warn("the consumer group[{group}] exist already.", group=group)
            return False
        self.consumers[group] = consumer
        return True

    def unregister_consumer(self, group: str) -> Deferred[None]:
        self.consumers.pop(group, None)
        return self.unregister_client(None, group)

    def unregister_client(self, producer_group: str | None, consumer_group: str | None) -> Deferred[None]:
        """UNREGISTER_CLIENT to every known broker address; failures are logged, as in Java."""
        calls = []
        for name, broker_id, addr in self.routes.all_broker_addresses():
            d = self.remoting.call(
                addr, UnregisterClient, client_id=self.client_id, producer_group=producer_group,
                consumer_group=consumer_group, timeout=self.api_timeout,
            )
            d.addErrback(lambda f, a=addr: self.log.warn(
                "unregister client from broker {addr} failed: {why}", addr=a, why=f.getErrorMessage()))
            calls.append(d)
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    @property
    def api_timeout(self) -> float:
        return self.config.mq_client_api_timeout / 1000

    # ---- NameServers ---------------------------------------------------------------------------

    def namesrv_call(
        self, command: type[Command], header: Any = None, *, timeout: float | None = None, **fields: Any
    ) -> Deferred[Response[Any, Any]]:
        """Call the chosen NameServer; on a transport error try the next ones (once each) within
        the timeout. A response code error is the NameServer's answer and is not retried."""
        addrs = self.namesrv_addrs
        if not addrs:
            return defer.fail(MQClientError(
                "No name server address, please set it." + suggest_todo(),
                response_code=ClientErrorCode.NO_NAME_SERVER_EXCEPTION,
            ))
        budget = self.api_timeout if timeout is None else timeout
        start = self.reactor.seconds()
        first = self._namesrv_index % len(addrs)

        def attempt(i: int) -> Deferred[Response[Any, Any]]:
            addr = addrs[(first + i) % len(addrs)]
            remaining = budget - (self.reactor.seconds() - start)
            d = self.remoting.call(addr, command, header, timeout=max(remaining, 0.001), **fields)

            def failover(f: Failure) -> Any:
                if f.check(RemotingError) and i + 1 < len(addrs) and \
                        budget - (self.reactor.seconds() - start) > 0:
                    self._namesrv_index = (first + i + 1) % len(addrs)
                    self.log.warn("name server {addr} failed ({why}); trying {nxt}", addr=addr,
                                  why=f.getErrorMessage(), nxt=addrs[self._namesrv_index])
                    return attempt(i + 1)
                return f

            return d.addErrback(failover)

        return attempt(0)

    def update_namesrv_addrs(self, addrs: Iterable[str]) -> None:
        new = tuple(addrs)
        if new != self.namesrv_addrs:
            self.namesrv_addrs = new
            self._namesrv_index = self.rng.randrange(len(new)) if new else 0

    # ---- routes --------------------------------------------------------------------------------

    def fetch_route(self, topic: str) -> Deferred[TopicRouteData]:
        """GET_ROUTEINFO_BY_TOPIC from the NameServers (TopicNotExistError when there is none)."""
        return self.namesrv_call(GetRouteInfo, topic=topic).addCallback(_route_body)

    def update_topic_route(self, topic: str, *, default_topic_queue_nums: int | None = None) -> Deferred[bool]:
        """Java ``updateTopicRouteInfoFromNameServer``: fetch the route and, if it changed (or a
        member needs it), take it and hand publish/subscribe info to every member. True when
        taken. With ``default_topic_queue_nums`` the TBW102 route stands in for ``topic`` (a topic
        the broker may auto-create), its queue counts capped at that number.

        A NameServer's error answer (TOPIC_NOT_EXIST, ...) gives False; a transport failure of
        every NameServer fails the Deferred. Concurrent calls for one topic share one request.
        """
        key = (topic, default_topic_queue_nums is not None)
        waiters = self._route_updates.get(key)
        d: Deferred[bool] = Deferred()
        if waiters is not None:
            waiters.append(d)
            return d
        waiters = self._route_updates[key] = [d]

        def done(result: bool | Failure) -> None:
            for w in self._route_updates.pop(key, []):
                if isinstance(result, Failure):
                    w.errback(result)
                else:
                    w.callback(result)

        self._do_update_topic_route(topic, default_topic_queue_nums).addBoth(done)
        return d

    def _do_update_topic_route(self, topic: str, default_queue_nums: int | None) -> Deferred[bool]:
        lookup = AUTO_CREATE_TOPIC_KEY_TOPIC if default_queue_nums is not None else topic
        d = self.fetch_route(lookup)

        def got(route: TopicRouteData) -> bool:
            if default_queue_nums is not None:
                route = default_route_for(route, default_queue_nums)
            return self.take_route(topic, route)

        def failed(f: Failure) -> Any:
            if f.check(BrokerResponseError):
                if not f.check(TopicNotExistError) or default_queue_nums is not None:
                    self.log.warn("route of {topic} not updated: {why}", topic=lookup,
                                  why=f.getErrorMessage())
                return False
            return f

        return d.addCallbacks(got, failed)

    def take_route(self, topic: str, route: TopicRouteData) -> bool:
        """Store ``route`` if it changed or a member needs it; True when stored."""
        old = self.routes.topic_routes.get(topic)
        changed = route_changed(old, route) or self._is_need_update(topic)
        if not changed:
            return False
        self.routes.store(topic, route)
        info = topic_route_to_publish_info(topic, route, rng=self.rng)
        info.have_topic_router_info = True
        for producer in list(self.producers.values()):
            producer.update_topic_publish_info(topic, info)
        if self.consumers:
            mqs = topic_route_to_subscribe_info(topic, route)
            for consumer in list(self.consumers.values()):
                consumer.update_topic_subscribe_info(topic, set(mqs))
        self.log.debug("route of {topic} updated: {route}", topic=topic, route=route)
        return True

    def _is_need_update(self, topic: str) -> bool:
        return any(p.is_publish_topic_need_update(topic) for p in self.producers.values()) or any(
            c.is_subscribe_topic_need_update(topic) for c in self.consumers.values()
        )

    def topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for c in self.consumers.values():
            topics.update(c.subscribed_topics())
        for p in self.producers.values():
            topics.update(p.publish_topics())
        return topics

    def update_all_topic_routes(self) -> Deferred[None]:
        """The periodic refresh: every topic a member uses, one failure not stopping the rest."""
        calls = []
        for topic in sorted(self.topics_in_use()):
            d = self.update_topic_route(topic)
            d.addErrback(lambda f, t=topic: self.log.warn(
                "route refresh of {topic} failed: {why}", topic=t, why=f.getErrorMessage()))
            calls.append(d)
        return defer.gatherResults(calls, consumeErrors=True).addCallback(lambda _: None)

    def find_broker_address_in_publish(self, broker_name: str | None) -> str | None:
        return self.routes.find_broker_address_in_publish(broker_name)

    # ---- heartbeats ----------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            client_id=self.client_id,
            consumer_data_set=[c.consumer_data() for c in self.consumers.values()],
            producer_data_set=[ProducerData(group_name=g) for g in self.producers],
        )

    def _heartbeat_tick(self) -> Deferred[bool]:
        gone = self.routes.clean_offline_brokers()
        for addr in gone:
            self.log.info("the broker addr[{addr}] is offline, remove it", addr=addr)
        return self.send_heartbeat_to_all_brokers()

    def send_heartbeat_to_all_brokers(self) -> Deferred[bool]:
        """HEART_BEAT to every master (every address once a consumer is registered); concurrent
        calls share the heartbeat in progress. False when there is nobody to announce or nowhere
        to send."""
        if self._heartbeat is not None:
            d: Deferred[bool] = Deferred()
            self._heartbeat.append(d)
            return d
        data = self.heartbeat_data()
        if not data.producer_data_set and not data.consumer_data_set:
            return defer.succeed(False)
        targets = self.routes.heartbeat_targets(masters_only=not data.consumer_data_set)
        if not targets:
            return defer.succeed(False)
        self._heartbeat = waiters = []
        calls = [self._send_heartbeat(t.broker_name, t.broker_id, t.addr, data) for t in targets]

        def done(_: object) -> bool:
            self._heartbeat = None
            for w in waiters:
                w.callback(True)
            return True

        return defer.gatherResults(calls, consumeErrors=True).addBoth(done)

    def send_heartbeat_to_broker(self, broker_name: str, broker_id: int, addr: str) -> Deferred[bool]:
        data = self.heartbeat_data()
        if not data.producer_data_set and not data.consumer_data_set:
            return defer.succeed(False)
        return self._send_heartbeat(broker_name, broker_id, addr, data)

    def _send_heartbeat(self, name: str, broker_id: int, addr: str, data: HeartbeatData) -> Deferred[bool]:
        d = self.remoting.call(addr, HeartBeat, body=data, timeout=self.api_timeout)

        def ok(response: Response[Any, Any]) -> bool:
            assert response.command is not None
            self.routes.set_broker_version(name, addr, response.command.version)
            return True

        def failed(f: Failure) -> bool:
            self.log.warn("send heart beat to broker[{name} {id} {addr}] failed: {why}",
                          name=name, id=broker_id, addr=addr, why=f.getErrorMessage())
            return False

        return d.addCallbacks(ok, failed)

    # ---- calls to brokers ----------------------------------------------------------------------

    def broker_call(
        self, addr: str, command: type[Command], header: Any = None, *, body: Any = None,
        timeout: float | None = None,
    ) -> Deferred[Response[Any, Any]]:
        """A call to a broker; a new connection first carries a heartbeat (see the module doc)."""
        entry = self._gates.get(addr)
        if entry is None or not entry[0].is_open:
            self._watch(addr)
        return self.remoting.call(addr, command, header, body=body, timeout=timeout)

    def broker_call_prepared(
        self, addr: str, command: type[Command], request: Any, *, timeout: float | None = None,
    ) -> Deferred[Response[Any, Any]]:
        """``broker_call`` with a ``PreparedRequest`` of ``command``."""
        entry = self._gates.get(addr)
        if entry is None or not entry[0].is_open:
            self._watch(addr)
        return self.remoting.call_prepared(addr, command, request, timeout=timeout)

    def broker_oneway(
        self, addr: str, command: type[Command], header: Any = None, *, body: Any = None,
        remark: str | None = None,
    ) -> Deferred[None]:
        entry = self._gates.get(addr)
        if entry is None or not entry[0].is_open:
            self._watch(addr)
        if remark is None:
            return self.remoting.oneway(addr, command, header, body=body)
        import dataclasses

        request = command.request(header, body, language=self.remoting.config.language,
                                  version=self.remoting.config.version)
        return self.remoting.invoke_oneway(addr, dataclasses.replace(request, remark=remark))

    def open_broker_channel(self, addr: str) -> Any | None:
        """The open connection to ``addr`` that ``broker_call`` would use without setting anything
        up (connecting, the heartbeat of a new connection); None when it would."""
        entry = self._gates.get(addr)
        if entry is None or not entry[0].is_open:
            return None
        return self.remoting.open_channel(addr)

    def oneway_broker_channel(self, addr: str) -> tuple[Any, WriteGate] | None:
        """``open_broker_channel(addr)`` and its write gate when a oneway send may be written on
        it now: no send waits for the gate (which may be paused: the send then waits for it
        after its write, ``WriteGate.written_past``), else None."""
        entry = self._gates.get(addr)
        if entry is None or not entry[0].is_open or entry[1]._waiters:
            return None
        return self.remoting.open_channel(addr), entry[1]

    def when_writable(self, addr: str) -> Deferred[None]:
        """Fires once the connection to ``addr`` may take more writes (at once if it may)."""
        entry = self._gates.get(addr)
        if entry is None or not entry[1].paused:
            return defer.succeed(None)
        return entry[1].when_writable()

    def _watch(self, addr: str) -> None:
        self.remoting.channel(addr).addCallbacks(self._channel_ready, lambda f: None,
                                                callbackArgs=(addr,))

    def _channel_ready(self, proto: Any, addr: str) -> None:
        entry = self._gates.get(addr)
        if entry is not None and entry[0] is proto:
            return
        gate = WriteGate()
        try:
            proto.transport.registerProducer(gate, True)
        except Exception:  # a transport that already has a producer: no flow control there
            self.log.debug("no write flow control on {addr}", addr=addr)
        self._gates[addr] = (proto, gate)
        found = self.routes.broker_name_of(addr)
        if found is None or self.empty:
            return
        name, broker_id = found

        def beat_done(ok: bool) -> None:
            if ok:
                for listener in list(self.channel_active_listeners):
                    listener(name, broker_id, addr)

        self.send_heartbeat_to_broker(name, broker_id, addr).addCallback(beat_done)

    # ---- request / reply -----------------------------------------------------------------------

    def new_correlation_id(self) -> str:
        """Java ``CorrelationIdUtil.createCorrelationId``: a random UUID."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def expect_reply(self, correlation_id: str) -> Deferred[MessageExt]:
        """A Deferred for the reply with ``correlation_id`` (cancel it to stop waiting)."""
        d: Deferred[MessageExt] = Deferred(
            canceller=lambda d: self._reply_waiters.pop(correlation_id, None)
        )
        self._reply_waiters[correlation_id] = d
        return d

    def deliver_reply(self, msg: MessageExt) -> None:
        cid = msg.properties.get(PropertyKey.CORRELATION_ID)
        d = self._reply_waiters.pop(cid, None) if cid else None
        if d is None:
            self.log.warn("receive reply message, but not matched any request, CorrelationId: "
                          "{cid}, reply from host: {host}", cid=cid, host=msg.born_host)
            return
        d.callback(msg)


def _route_body(response: Response[Any, Any]) -> TopicRouteData:
    if response.body is None:  # Java: a SUCCESS without a body is an error (code 0)
        raise BrokerResponseError(0, "route info has no body")
    return response.body


class ClientManager:
    """Java ``MQClientManager``: the client instances of one reactor, one per client id.

    Members ask for ``instance_for(config)``; ``release(instance)`` stops an instance once it has
    no members left.
    """

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.instances: dict[str, ClientInstance] = {}

    def instance_for(self, config: ClientConfig) -> ClientInstance:
        config = config.resolved()
        cid = config.client_id()
        instance = self.instances.get(cid)
        if instance is None:
            instance = self.instances[cid] = ClientInstance(self.reactor, config)
        return instance

    def release(self, instance: ClientInstance) -> Deferred[None]:
        if not instance.empty:
            return defer.succeed(None)
        if self.instances.get(instance.client_id) is instance:
            del self.instances[instance.client_id]
        if not instance.running:
            return defer.succeed(None)
        return instance.stopService()
