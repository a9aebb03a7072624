"""The pull path: one PULL_MESSAGE / LITE_PULL_MESSAGE to the broker serving a queue, and its
answer as decoded, filtered messages (Java ``PullAPIWrapper`` + ``MQClientAPIImpl.pullMessage``).

- ``PullAPIWrapper.pull_kernel`` finds the broker address (the broker id the last answer
  suggested, master by default; one route refresh when unknown), clears COMMIT_OFFSET when that
  is a slave, picks code 361 when the LITE_PULL bit is set, and maps the answer: 0 FOUND,
  19 NO_NEW_MSG, 20 NO_MATCHED_MSG, 21 OFFSET_ILLEGAL; any other code fails with its typed error.
- ``PullAPIWrapper.process_pull_result`` decodes the records (decompressing zlib, lz4, zstd),
  splits 5.x inner batches, keeps only subscribed tags (the broker matched hashes), adds
  MIN_OFFSET / MAX_OFFSET properties, sets broker name and queue id, adds ``offsetDelta``.

``Puller`` is the same path without a consumer: "pull this queue from this offset" plus the
queue offset lookups, for tools (``tail``) and Spark executors. It sends the subscription in the
request (SUBSCRIPTION bit) so that the broker needs no heartbeat for the group.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.consumer import mq_admin
from rmqwire.client.consumer.subscription import (
    SUB_ALL,
    MessageSelector,
    filter_by_tags,
    subscription_for,
)
from rmqwire.client.instance import ClientInstance
from rmqwire.client.route import MASTER_ID
from rmqwire.codec.codes import V5_0_0, ResponseCode
from rmqwire.codec.commands import Response
from rmqwire.codec.commands.heartbeat import SubscriptionData
from rmqwire.codec.commands.pull import (
    LitePullMessage,
    PullMessage,
    PullMessageRequestHeader,
    PullRequestTemplate,
    PullSysFlag,
)
from rmqwire.codec.header import BoundaryType
from rmqwire.codec.message import (
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    decode_messages,
    unwrap_inner_batch,
)
from rmqwire.errors import MQClientError, RequestCodeNotSupportedError
from rmqwire.model import ExpressionType, MessageQueue

__all__ = [
    "BROKER_SUSPEND_MAX_TIME_MILLIS",
    "CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND",
    "PullAPIWrapper",
    "PullResult",
    "PullStatus",
    "Puller",
    "plain_records",
]

#: Java push consumer: how long the broker may hold a pull, and the pull RPC timeout (ms).
BROKER_SUSPEND_MAX_TIME_MILLIS = 15_000
CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND = 30_000
#: Java ``consumerPullTimeoutMillis``: the RPC timeout of a pull the broker may not hold.
CONSUMER_PULL_TIMEOUT_MILLIS = 10_000
#: MQVersion ordinal of V4_1_0_SNAPSHOT: older brokers filter by tags only.
V4_1_0_SNAPSHOT = 236

_INNER_BATCH = int(MessageSysFlag.INNER_BATCH | MessageSysFlag.NEED_UNWRAP)
_LITE_PULL = int(PullSysFlag.LITE_PULL)
# a record with anything but one plain message of IPv4 hosts (its body length not at byte 84)
_NOT_PLAIN = int(MessageSysFlag.COMPRESSED | MessageSysFlag.BORNHOST_V6
                 | MessageSysFlag.STOREHOSTADDRESS_V6) | _INNER_BATCH
# TOTALSIZE, SYSFLAG and (IPv4 hosts) BODYLEN of a stored record
_SIZE_FLAG_BODYLEN = struct.Struct(">i32xi44xi")


def plain_records(body: bytes | None) -> tuple[int, int] | None:
    """(records, total body bytes) of a pull body whose records are each one uncompressed
    message with IPv4 hosts: what decoding it adds to a process queue at most (tag filtering
    only drops). None for anything else (compressed, inner batches, IPv6, malformed): only a
    decode tells then."""
    if not body:
        return 0, 0
    unpack, need = _SIZE_FLAG_BODYLEN.unpack_from, _SIZE_FLAG_BODYLEN.size
    pos, n = 0, len(body)
    records = size = 0
    while pos < n:
        if n - pos < need:
            return None
        total, flag, body_len = unpack(body, pos)
        if total < need or flag & _NOT_PLAIN or body_len < 0:
            return None
        records += 1
        size += body_len
        pos += total
    return (records, size) if pos == n else None


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_OF = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclasses.dataclass(slots=True)
class PullResult:
    """Java ``PullResult`` / ``PullResultExt``: ``messages`` are set by ``process_pull_result``
    (``body`` holds the raw records until then)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = dataclasses.field(default_factory=list)
    suggest_which_broker_id: int = MASTER_ID
    offset_delta: int | None = None
    body: bytes | None = dataclasses.field(default=None, repr=False)


def pull_result_of(response: Response[Any, Any]) -> PullResult:
    h = response.header
    return PullResult(
        status=_STATUS_OF[response.code],
        next_begin_offset=_int(h.next_begin_offset),
        min_offset=_int(h.min_offset),
        max_offset=_int(h.max_offset),
        suggest_which_broker_id=_int(h.suggest_which_broker_id),
        offset_delta=h.offset_delta,
        body=response.body,
    )


def _int(v: int | None) -> int:
    return 0 if v is None else v


class PullAPIWrapper:
    """Pulls for one consumer group; remembers per queue which broker id to pull from next."""

    log = Logger()

    def __init__(self, instance: ClientInstance, consumer_group: str, unit_mode: bool = False) -> None:
        self.instance = instance
        self.consumer_group = consumer_group
        self.unit_mode = unit_mode
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        #: ``connect_broker_by_user``: pull from ``default_broker_id`` whatever the broker suggests
        self.connect_broker_by_user = False
        self.default_broker_id = MASTER_ID
        #: broker addresses that answered LITE_PULL_MESSAGE with REQUEST_CODE_NOT_SUPPORTED
        self.no_lite_pull: set[str] = set()
        #: per queue, its PULL_MESSAGE frame (push consumers pull the same queue again and again)
        self._templates: dict[MessageQueue, tuple[tuple[Any, ...], PullRequestTemplate]] = {}

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        if self.connect_broker_by_user:
            return self.default_broker_id
        return self.pull_from_which_node.get(mq, MASTER_ID)

    def forget(self, mq: MessageQueue) -> None:
        """``mq`` left this consumer: its frame goes (a queue taken again gets a new one)."""
        self._templates.pop(mq, None)

    def process_pull_result(self, mq: MessageQueue, result: PullResult, sd: SubscriptionData) -> PullResult:
        self.pull_from_which_node[mq] = result.suggest_which_broker_id
        if result.status is PullStatus.FOUND:
            # Java puts MIN/MAX_OFFSET after unwrap and filter; put while decoding (one dict copy
            # per record), the same map as a put on the messages kept; inner-batch messages (new
            # objects, none of the wrapper's properties but WAIT) get them after the unwrap
            puts = {PropertyKey.MIN_OFFSET: str(result.min_offset), PropertyKey.MAX_OFFSET: str(result.max_offset)}
            name, qid, delta = mq.broker_name, mq.queue_id, result.offset_delta
            # the queue's broker name and id set while decoding, as Java sets them after
            msgs = decode_messages(result.body or b"", put_properties=puts, broker_name=name, queue_id=qid)
            for m in msgs:
                if m.sys_flag & _INNER_BATCH == _INNER_BATCH:
                    msgs = self._unwrap(mq, msgs)
                    for inner in msgs:
                        for key, value in puts.items():
                            inner.put_property(key, value)
                        inner.broker_name = name
                        inner.queue_id = qid
                    break
            if sd.tags_set and not sd.class_filter_mode:
                msgs = filter_by_tags(msgs, sd)
            if delta is not None:
                for m in msgs:
                    m.queue_offset += delta
            result.messages = msgs
        result.body = None
        return result

    def _unwrap(self, mq: MessageQueue, msgs: list[MessageExt]) -> list[MessageExt]:
        try:
            return [inner for m in msgs for inner in (
                unwrap_inner_batch(m) if m.sys_flag & _INNER_BATCH == _INNER_BATCH else (m,))]
        except Exception:
            self.log.failure("Try to decode the inner batch failed for {mq}", mq=mq)
            return msgs

    def pull_kernel(
        self,
        mq: MessageQueue,
        sub_expression: str | None,
        expression_type: str | None,
        sub_version: int,
        offset: int,
        max_nums: int,
        max_size_in_bytes: int | None,
        sys_flag: int,
        commit_offset: int,
        broker_suspend_max_time_millis: int,
        timeout_millis: int,
    ) -> Deferred[PullResult]:
        """One pull; the raw answer (call ``process_pull_result`` on it)."""
        broker_id = self.recalculate_pull_from_which_node(mq)

        def send(found: Any) -> Deferred[PullResult]:
            if found is None:
                raise mq_admin.broker_not_exist(mq.broker_name)
            if expression_type not in (None, ExpressionType.TAG) and found.broker_version < V4_1_0_SNAPSHOT:
                raise MQClientError(f"The broker[{mq.broker_name}, {found.broker_version}] does not "
                                    f"upgrade to support for filter message by {expression_type}")
            flag = int(sys_flag)  # plain int arithmetic: IntFlag operators are slow
            if found.slave:
                flag = int(PullSysFlag.clear_commit_offset(flag))  # an int, as the cached frame needs
            addr = found.broker_addr
            if flag & _LITE_PULL and (
                    addr in self.no_lite_pull or 0 < found.broker_version < V5_0_0):
                # 4.x brokers have no LITE_PULL_MESSAGE: pull as their own lite consumers do
                flag &= ~_LITE_PULL
            command = LitePullMessage if flag & _LITE_PULL else PullMessage
            if command is PullMessage and type(offset) is int and type(commit_offset) is int:
                # the queue's frame, built from the typed header once while what it holds
                # besides the offsets and sysFlag stays the same (group, topic, queue and broker
                # name are the queue's; sub_version changes on a rebalance)
                key = (max_nums, broker_suspend_max_time_millis, sub_expression, sub_version,
                       expression_type, max_size_in_bytes)
                entry = self._templates.get(mq)
                if entry is not None and entry[0] == key:
                    template = entry[1]
                else:
                    template = PullRequestTemplate(
                        PullMessage, self._header(mq, sub_expression, expression_type, sub_version,
                                                  offset, max_nums, max_size_in_bytes, flag,
                                                  commit_offset, broker_suspend_max_time_millis),
                        language=self.instance.remoting.config.language,
                        version=self.instance.remoting.config.version)
                    self._templates[mq] = (key, template)
                prepared = template.request(offset, flag, commit_offset)
                d = self.instance.broker_call_prepared(addr, PullMessage, prepared,
                                                       timeout=timeout_millis / 1000)
                return d.addCallback(pull_result_of)
            header = self._header(mq, sub_expression, expression_type, sub_version, offset, max_nums,
                                  max_size_in_bytes, flag, commit_offset, broker_suspend_max_time_millis)
            d = self.instance.broker_call(addr, command, header, timeout=timeout_millis / 1000)
            if command is LitePullMessage:
                d.addErrback(self._without_lite_pull, addr, header, timeout_millis)
            return d.addCallback(pull_result_of)

        found = self.instance.routes.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is not None:  # the usual case: no Deferred for the lookup
            try:
                return send(found)
            except Exception:
                return defer.fail()
        return mq_admin.find_broker_in_subscribe(self.instance, mq, broker_id).addCallback(send)

    def _header(self, mq: MessageQueue, sub_expression: str | None, expression_type: str | None,
                sub_version: int, offset: int, max_nums: int, max_size_in_bytes: int | None,
                flag: int, commit_offset: int, suspend_millis: int) -> PullMessageRequestHeader:
        return PullMessageRequestHeader(
            consumer_group=self.consumer_group, topic=mq.topic, queue_id=mq.queue_id,
            queue_offset=offset, max_msg_nums=max_nums, sys_flag=int(flag),
            commit_offset=commit_offset, suspend_timeout_millis=suspend_millis,
            subscription=sub_expression, sub_version=sub_version,
            max_msg_bytes=max_size_in_bytes, expression_type=expression_type,
            bname=mq.broker_name,
        )

    def _without_lite_pull(self, f: Failure, addr: str, header: PullMessageRequestHeader,
                           timeout_millis: int) -> Any:
        """A broker without LITE_PULL_MESSAGE (4.x, before its version is known) is asked again
        with PULL_MESSAGE, and from then on only so."""
        f.trap(RequestCodeNotSupportedError)
        self.no_lite_pull.add(addr)
        header.sys_flag = int(header.sys_flag or 0) & ~PullSysFlag.LITE_PULL
        return self.instance.broker_call(addr, PullMessage, header, timeout=timeout_millis / 1000)


class Puller:
    """Pull any queue from any offset, without a consumer (Java ``DefaultMQPullConsumer``'s
    ``pull``, with the offset lookups of ``MQAdminImpl``).

    ``Puller(instance, "my_group")``; the instance must be started. Every method returns a
    Deferred; ``rmqwire.client.consumer.blocking.QueuePuller`` is the blocking form.
    """

    def __init__(self, instance: ClientInstance, consumer_group: str) -> None:
        self.instance = instance
        self.consumer_group = consumer_group
        self.wrapper = PullAPIWrapper(instance, consumer_group)

    def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: str | None = SUB_ALL,
        expression_type: str = ExpressionType.TAG,
        suspend_millis: int = 0,
        timeout_millis: int | None = None,
        max_size_in_bytes: int | None = None,
    ) -> Deferred[PullResult]:
        """Messages of ``mq`` from ``offset`` (at most ``max_nums``). With ``suspend_millis`` > 0
        the broker may hold the request that long waiting for a message (long polling)."""
        if offset < 0:
            raise ValueError("offset < 0")
        if max_nums <= 0:
            raise ValueError("maxNums <= 0")
        sd = subscription_for(mq.topic, MessageSelector(expression_type, expression or SUB_ALL))
        flag = PullSysFlag.build(suspend=suspend_millis > 0, subscription=True)
        if timeout_millis is None:
            timeout_millis = (CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND if suspend_millis > 0
                              else CONSUMER_PULL_TIMEOUT_MILLIS)
        d = self.wrapper.pull_kernel(
            mq, sd.sub_string, sd.expression_type,
            0 if sd.expression_type == ExpressionType.TAG else sd.sub_version,
            offset, max_nums, max_size_in_bytes, flag, 0, suspend_millis, timeout_millis,
        )
        return d.addCallback(lambda r: self.wrapper.process_pull_result(mq, r, sd))

    def max_offset(self, mq: MessageQueue) -> Deferred[int]:
        return mq_admin.max_offset(self.instance, mq)

    def min_offset(self, mq: MessageQueue) -> Deferred[int]:
        return mq_admin.min_offset(self.instance, mq)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int,
                      boundary: BoundaryType | None = None) -> Deferred[int]:
        return mq_admin.search_offset(self.instance, mq, timestamp_ms, boundary)

    def earliest_msg_store_time(self, mq: MessageQueue) -> Deferred[int]:
        return mq_admin.earliest_msg_store_time(self.instance, mq)

    def fetch_message_queues(self, topic: str) -> Deferred[list[MessageQueue]]:
        """The topic's readable queues, sorted as Java sorts them."""
        return mq_admin.fetch_subscribe_message_queues(self.instance, topic).addCallback(sorted)

