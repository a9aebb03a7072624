"""The periodic transaction check and what it does with a half message (Java
``TransactionalMessageCheckService``, ``AbstractTransactionalMessageCheckListener`` and
``DefaultTransactionalMessageCheckListener``).

Every ``transactionCheckInterval`` ms a check round runs (the next one waits for the previous one
to end). A due half message becomes a CHECK_TRANSACTION_STATE, oneway, to one live connection of
its producer group (PGROUP); the producer answers with END_TRANSACTION (fromTransactionCheck).
One checked ``transactionCheckMax`` times is parked in TRANS_CHECK_MAX_TIME_TOPIC.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from rmqwire.codec.codes import LanguageCode
from rmqwire.codec.commands.transaction import (
    CheckTransactionState,
    CheckTransactionStateRequestHeader,
)
from rmqwire.codec.message import (
    MessageExt,
    PropertyKey,
    encode_message,
    java_hashmap_order,
)
from rmqwire.model import PermName
from rmqwire.server.broker.topic_config import TRANS_CHECK_MAX_TIME_TOPIC
from rmqwire.server.broker.transaction.service import TransactionalMessageService
from rmqwire.server.broker.transaction.util import TCMT_QUEUE_NUMS

if TYPE_CHECKING:
    from rmqwire.server.broker.controller import Broker

__all__ = ["TransactionCheckListener", "TransactionalMessageCheckService"]


class TransactionCheckListener:
    log = Logger()

    def __init__(self, broker: Broker, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service
        self._random = random.Random()

    def resolve_half_msg(self, msg: MessageExt) -> None:
        """Ask a producer of the message's group (Java ``sendCheckMessage``). ``msg`` is the
        re-stored copy: the producer's answer names its offsets."""
        props = msg.properties
        uniq = props.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            topic=msg.topic,
            commit_log_offset=msg.commit_log_offset,
            offset_msg_id=msg.offset_msg_id,
            msg_id=uniq,
            transaction_id=uniq,
            tran_state_table_offset=msg.queue_offset,
            bname=self.broker.settings.broker.broker_name,
        )
        group = props.get(PropertyKey.PRODUCER_GROUP)
        channel = self.broker.producer_manager.get_available_channel(group)
        if channel is None:
            self.log.warn("Check transaction failed, channel is null. groupId={g}", g=group)
            return
        msg.topic = props.get(PropertyKey.REAL_TOPIC, msg.topic)
        try:
            msg.queue_id = int(props.get(PropertyKey.REAL_QUEUE_ID, ""))
        except ValueError:
            pass
        try:
            request = CheckTransactionState.request(header, encode_message(msg), language=LanguageCode.JAVA,
                                                    version=self.broker.version)
        except Exception as e:  # a record we cannot re-encode: nothing to ask about
            self.log.error("Check transaction of {u} failed: {e}", u=uniq, e=e)
            return
        channel.invoke_oneway(request).addErrback(
            lambda f: self.log.error("Check transaction failed because invoke producer exception. group={g}, "
                                     "msgId={u}, error={e}", g=group, u=uniq, e=f.getErrorMessage()))

    def resolve_discard_msg(self, msg: MessageExt) -> Deferred[bool]:
        """Park a half message checked too often in TRANS_CHECK_MAX_TIME_TOPIC."""
        self.log.error("half message {u} has been checked too many times, so discard it by moving it to "
                       "system topic TRANS_CHECK_MAXTIME_TOPIC",
                       u=msg.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        cfg = self.broker.topic_config_manager.create_in_send_back(
            TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS, int(PermName.PERM_READ | PermName.PERM_WRITE))
        if cfg is None:
            return defer.succeed(False)
        inner = MessageExt(
            topic=TRANS_CHECK_MAX_TIME_TOPIC,
            body=msg.body,
            flag=msg.flag,
            properties=java_hashmap_order(msg.properties, 128),
            queue_id=self._random.randrange(99_999_999) % TCMT_QUEUE_NUMS,
            sys_flag=msg.sys_flag,
            born_host=msg.born_host,
            born_timestamp=msg.born_timestamp,
            store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
        )
        real_topic = msg.properties.get(PropertyKey.REAL_TOPIC, "")

        def discarded(ok: bool) -> bool:
            if ok:
                self.broker.metrics.record_half(real_topic, -1)
            return ok

        return self.service.bridge.put_ok(inner).addCallback(discarded)


class TransactionalMessageCheckService:
    """Runs ``TransactionalMessageService.check`` every ``transactionCheckInterval`` ms."""

    log = Logger()

    def __init__(self, broker: Broker, service: TransactionalMessageService,
                 listener: TransactionCheckListener) -> None:
        self.broker = broker
        self.service = service
        self.listener = listener
        self._loop: LoopingCall | None = None
        self.rounds = 0

    def start(self) -> None:
        interval = self.broker.settings.broker.transaction_check_interval / 1000.0
        loop = self._loop = LoopingCall(self.run_once)
        loop.clock = self.broker.reactor
        loop.start(max(interval, 0.01), now=False).addErrback(
            lambda f: self.log.failure("transaction check service stopped", f))

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and loop.running:
            loop.stop()

    def run_once(self) -> Deferred[None]:
        if self.broker.settings.store_extras.broker_role == "SLAVE":
            return defer.succeed(None)  # a slave's halves are checked by its master
        cfg = self.broker.settings.broker
        self.rounds += 1
        begin = self.broker.now_ms()
        d = self.service.check(cfg.transaction_time_out, cfg.transaction_check_max, self.listener)

        def done(_: Any) -> None:
            self.log.debug("End to check prepare message, consumed time:{ms}", ms=self.broker.now_ms() - begin)

        return d.addCallback(done)
