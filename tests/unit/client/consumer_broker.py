"""An in-memory broker for consumer tests: queues of stored messages, long-polling pulls, group
offsets and membership (with NOTIFY_CONSUMER_IDS_CHANGED), send-back to the retry topic, queue
locks; added to fake_cluster's World brokers as one more typed Processor (later registrations win,
so its HEART_BEAT / UNREGISTER_CLIENT / SEND_MESSAGE_V2 replace the producer fake's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from fake_cluster import World
from twisted.internet.defer import Deferred

from rmqwire.codec.commands import Response
from rmqwire.codec.commands.consumer import (
    CheckClientConfig,
    ConsumerSendMsgBack,
    GetConsumerListByGroup,
    GetConsumerListByGroupResponseBody,
    LockBatchMq,
    LockBatchResponseBody,
    NotifyConsumerIdsChanged,
    UnlockBatchMq,
)
from rmqwire.codec.commands.heartbeat import (
    HeartBeat,
    HeartbeatData,
    SubscriptionData,
    UnregisterClient,
)
from rmqwire.codec.commands.offset import (
    GetMaxOffset,
    GetMinOffset,
    QueryConsumerOffset,
    SearchOffsetByTimestamp,
    UpdateConsumerOffset,
)
from rmqwire.codec.commands.pull import (
    LitePullMessage,
    PullMessage,
    PullMessageResponseHeader,
    PullSysFlag,
)
from rmqwire.codec.commands.route import BrokerData, QueueData, TopicRouteData
from rmqwire.codec.commands.send import SendMessageResponseHeader, SendMessageV2
from rmqwire.codec.message import (
    MessageExt,
    decode_properties,
    encode_message,
    tags_hash,
)
from rmqwire.errors import for_code
from rmqwire.model import MessageQueue
from rmqwire.remoting import Processor

__all__ = ["ConsumerBroker", "ConsumerWorld"]


@dataclasses.dataclass
class Member:
    client_id: str
    channel: Any
    subscriptions: dict[str, SubscriptionData]


class ConsumerBroker(Processor):
    def __init__(self, world: ConsumerWorld, name: str, port: int) -> None:
        self.world = world
        self.name = name
        self.port = port
        self.queues: dict[tuple[str, int], list[MessageExt]] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.groups: dict[str, dict[str, Member]] = {}
        self.heartbeats: list[HeartbeatData] = []
        self.unregisters: list[Any] = []
        self.pulls: list[tuple[int, Any]] = []
        self.offset_updates: list[Any] = []
        self.send_backs: list[Any] = []
        self.retry_sends: list[MessageExt] = []
        self.locks: dict[tuple[str, MessageQueue], str] = {}
        self.lock_requests: list[Any] = []
        self.unlock_requests: list[Any] = []
        self.fail_send_back = False
        self.refuse_locks = False
        self.held: list[tuple[Deferred[Any], Any, Any]] = []
        self.commit_log_offset = 1000

    # ---- the store ---------------------------------------------------------------------------

    def put(self, topic: str, queue_id: int, body: bytes, *, tags: str | None = None,
            properties: dict[str, str] | None = None, reconsume_times: int = 0) -> MessageExt:
        q = self.queues.setdefault((topic, queue_id), [])
        props = dict(properties or {})
        if tags:
            props["TAGS"] = tags
        props.setdefault("UNIQ_KEY", f"UK{self.commit_log_offset:028X}")
        now = int(self.world.reactor.seconds() * 1000)
        msg = MessageExt(topic=topic, body=body, properties=props, queue_id=queue_id, queue_offset=len(q),
                         born_timestamp=now, born_host=("10.0.0.9", 50000), store_timestamp=now,
                         store_host=("127.0.0.1", self.port), commit_log_offset=self.commit_log_offset,
                         reconsume_times=reconsume_times)
        self.commit_log_offset += 200
        q.append(msg)
        self._wake(topic, queue_id)
        return msg

    def put_many(self, topic: str, queue_id: int, bodies: Iterable[bytes], **kw: Any) -> list[MessageExt]:
        return [self.put(topic, queue_id, b, **kw) for b in bodies]

    def by_offset(self, commit_log_offset: int) -> MessageExt:
        for q in self.queues.values():
            for m in q:
                if m.commit_log_offset == commit_log_offset:
                    return m
        raise KeyError(commit_log_offset)

    # ---- membership --------------------------------------------------------------------------

    @HeartBeat.responder
    def heartbeat(self, header: Any, body: HeartbeatData, context: Any) -> Response[Any, Any]:
        self.heartbeats.append(body)
        for cd in body.consumer_data_set or ():
            members = self.groups.setdefault(cd.group_name, {})
            new = body.client_id not in members
            members[body.client_id] = Member(body.client_id, context.channel,
                                             {sd.topic: sd for sd in cd.subscription_data_set or ()})
            if new:
                self._notify(cd.group_name)
        return Response()

    @UnregisterClient.responder
    def unregister(self, header: Any, body: Any, context: Any) -> Response[Any, Any]:
        self.unregisters.append(header)
        if header.consumer_group and self.groups.get(header.consumer_group, {}).pop(header.client_id, None):
            self._notify(header.consumer_group)
        return Response()

    def _notify(self, group: str) -> None:
        for m in list(self.groups.get(group, {}).values()):
            if m.channel is not None:
                m.channel.invoke_oneway(NotifyConsumerIdsChanged.request(consumer_group=group))

    @GetConsumerListByGroup.responder
    def consumer_list(self, header: Any, body: Any, context: Any) -> GetConsumerListByGroupResponseBody:
        members = self.groups.get(header.consumer_group)
        if not members:
            raise for_code(1, f"no consumer for this group, {header.consumer_group}")
        return GetConsumerListByGroupResponseBody(consumer_id_list=list(members))

    # ---- pulling -----------------------------------------------------------------------------

    @PullMessage.responder
    @LitePullMessage.responder
    def pull(self, header: Any, body: Any, context: Any) -> Any:
        self.pulls.append((context.request.code, header))
        if header.sys_flag & PullSysFlag.COMMIT_OFFSET:
            self.offsets[(header.consumer_group, header.topic, header.queue_id)] = header.commit_offset
        answer = self._answer(header)
        if answer is not None or not header.sys_flag & PullSysFlag.SUSPEND:
            return answer if answer is not None else self._not_found(header)
        d: Deferred[Any] = Deferred()
        call = self.world.reactor.callLater(header.suspend_timeout_millis / 1000, self._expire, d, header)
        self.held.append((d, header, call))
        return d

    def _wake(self, topic: str, queue_id: int) -> None:
        for item in list(self.held):
            d, header, call = item
            if (header.topic, header.queue_id) == (topic, queue_id):
                answer = self._answer(header)
                if answer is not None:
                    self.held.remove(item)
                    call.cancel()
                    d.callback(answer)

    def _expire(self, d: Deferred[Any], header: Any) -> None:
        self.held = [h for h in self.held if h[0] is not d]
        d.callback(self._answer(header) or self._not_found(header))

    def _subscription(self, header: Any) -> SubscriptionData | None:
        if header.sys_flag & PullSysFlag.SUBSCRIPTION:
            from rmqwire.codec.commands.heartbeat import build_subscription_data

            return build_subscription_data(header.topic, header.subscription, header.expression_type)
        for member in self.groups.get(header.consumer_group, {}).values():
            sd = member.subscriptions.get(header.topic)
            if sd is not None:
                return sd
        return None

    def _header(self, header: Any, nxt: int) -> PullMessageResponseHeader:
        q = self.queues.get((header.topic, header.queue_id), [])
        return PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=nxt, min_offset=0,
                                         max_offset=len(q))

    def _not_found(self, header: Any) -> Response[Any, Any]:
        return Response(self._header(header, header.queue_offset), code=19)

    def _answer(self, header: Any) -> Response[Any, Any] | None:
        q = self.queues.get((header.topic, header.queue_id), [])
        offset = header.queue_offset
        if offset > len(q) or (offset < 0):
            return Response(self._header(header, len(q)), code=21)
        if offset == len(q):
            return None
        sd = self._subscription(header)
        wanted = set(sd.code_set or ()) if sd is not None and sd.sub_string != "*" else None
        found, scanned = [], offset
        for m in q[offset : offset + max(header.max_msg_nums, 1) * 4]:
            scanned = m.queue_offset + 1
            if wanted is None or tags_hash(m.tags) in wanted:
                found.append(m)
                if len(found) >= header.max_msg_nums:
                    break
        if not found:
            return Response(self._header(header, scanned), code=20)
        return Response(self._header(header, found[-1].queue_offset + 1),
                        body=b"".join(encode_message(m) for m in found))

    # ---- offsets -----------------------------------------------------------------------------

    @QueryConsumerOffset.responder
    def query_offset(self, header: Any, body: Any, context: Any) -> Any:
        key = (header.consumer_group, header.topic, header.queue_id)
        if key not in self.offsets:
            return Response(code=22, remark="Not found")
        return QueryConsumerOffset.response_header(offset=self.offsets[key])

    @UpdateConsumerOffset.responder
    def update_offset(self, header: Any, body: Any, context: Any) -> Any:
        self.offset_updates.append(header)
        self.offsets[(header.consumer_group, header.topic, header.queue_id)] = header.commit_offset
        return Response()

    @GetMaxOffset.responder
    def max_offset(self, header: Any, body: Any, context: Any) -> Any:
        return GetMaxOffset.response_header(offset=len(self.queues.get((header.topic, header.queue_id), [])))

    @GetMinOffset.responder
    def min_offset(self, header: Any, body: Any, context: Any) -> Any:
        return GetMinOffset.response_header(offset=0)

    @SearchOffsetByTimestamp.responder
    def search_offset(self, header: Any, body: Any, context: Any) -> Any:
        q = self.queues.get((header.topic, header.queue_id), [])
        offset = next((m.queue_offset for m in q if m.store_timestamp >= header.timestamp), len(q))
        return SearchOffsetByTimestamp.response_header(offset=offset)

    # ---- retries -----------------------------------------------------------------------------

    @ConsumerSendMsgBack.responder
    def send_back(self, header: Any, body: Any, context: Any) -> Any:
        self.send_backs.append(header)
        if self.fail_send_back:
            raise for_code(1, "look message by offset failed")
        orig = self.by_offset(header.offset)
        props = dict(orig.properties)
        props.setdefault("RETRY_TOPIC", orig.topic)
        props["DELAY"] = str(header.delay_level or 3 + orig.reconsume_times)
        self.world.ensure_topic(f"%RETRY%{header.group}", 1)
        self.put(f"%RETRY%{header.group}", 0, orig.body, properties=props,
                 reconsume_times=orig.reconsume_times + 1)
        return Response()

    @SendMessageV2.responder
    def send(self, header: Any, body: bytes | None, context: Any) -> Any:
        props = decode_properties(header.i)
        msg = self.put(header.b, max(header.e, 0), body or b"", properties=props,
                       reconsume_times=header.j or 0)
        self.retry_sends.append(msg)
        return Response(SendMessageResponseHeader(msg_id=f"{msg.commit_log_offset:032X}", queue_id=msg.queue_id,
                                                  queue_offset=msg.queue_offset))

    # ---- locks -------------------------------------------------------------------------------

    @LockBatchMq.responder
    def lock(self, header: Any, body: Any, context: Any) -> LockBatchResponseBody:
        self.lock_requests.append(body)
        ok = []
        for mq in body.mq_set or ():
            key = (body.consumer_group, mq)
            holder = self.locks.get(key)
            if not self.refuse_locks and holder in (None, body.client_id):
                self.locks[key] = body.client_id
                ok.append(mq)
        return LockBatchResponseBody(lock_ok_mq_set=ok)

    @UnlockBatchMq.responder
    def unlock(self, header: Any, body: Any, context: Any) -> Response[Any, Any]:
        self.unlock_requests.append(body)
        for mq in body.mq_set or ():
            if self.locks.get((body.consumer_group, mq)) == body.client_id:
                del self.locks[(body.consumer_group, mq)]
        return Response()

    @CheckClientConfig.responder
    def check_client(self, header: Any, body: Any, context: Any) -> Response[Any, Any]:
        return Response()


class ConsumerWorld(World):
    """fake_cluster's World whose brokers also serve consumers (``world.cb[name]``)."""

    def __init__(self, brokers: tuple[str, ...] = ("broker-a",)) -> None:
        super().__init__(brokers)
        self.cb: dict[str, ConsumerBroker] = {}
        for name, b in self.brokers.items():
            cb = ConsumerBroker(self, name, b.port)
            self.servers[b.port].dispatcher.add_processor(cb)
            self.cb[name] = cb

    def ensure_topic(self, topic: str, queues: int = 4) -> None:
        if topic not in self.namesrv.routes:
            self.add_topic(topic, queues)

    def add_topic(self, topic: str, queues: int = 4, brokers: tuple[str, ...] | None = None,
                  perm: int = 6) -> TopicRouteData:
        names = brokers or tuple(self.brokers)
        route = TopicRouteData(
            queue_datas=[QueueData(broker_name=n, read_queue_nums=queues, write_queue_nums=queues,
                                   perm=perm) for n in names],
            broker_datas=[BrokerData(cluster="DefaultCluster", broker_name=n,
                                     broker_addrs={0: self.brokers[n].addr}) for n in names],
        )
        self.namesrv.routes[topic] = route
        return route
