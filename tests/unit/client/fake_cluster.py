"""An in-memory NameServer and brokers built from typed Processors on RemotingServers, joined to
client code by iosim on one MemoryReactorClock (no sockets, no real time).

``World.run()`` completes pending connections (refusing those to ports nobody listens on) and
pumps every connection until nothing moves; tests advance ``world.reactor`` for timeouts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.test import iosim

from rmqwire.codec.commands import Response
from rmqwire.codec.commands.heartbeat import HeartBeat, HeartbeatData, UnregisterClient
from rmqwire.codec.commands.route import (
    BrokerData,
    GetRouteInfo,
    QueueData,
    TopicRouteData,
)
from rmqwire.codec.commands.send import (
    SendBatchMessage,
    SendMessage,
    SendMessageResponseHeader,
    SendMessageV2,
)
from rmqwire.codec.commands.transaction import EndTransaction
from rmqwire.codec.ids import create_offset_msg_id
from rmqwire.codec.message import decode_batch
from rmqwire.errors import TopicNotExistError, for_code
from rmqwire.remoting import Processor, RemotingServer
from rmqwire.remoting.config import JAVA_SERVER_CONFIG


@dataclasses.dataclass
class Received:
    code: int
    header: Any
    body: bytes | None
    peer: str
    remark: str | None = None


class FakeNameServer(Processor):
    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.lookups: list[str] = []

    @GetRouteInfo.responder
    def route(self, header: Any, body: Any, context: Any) -> TopicRouteData:
        self.lookups.append(header.topic)
        if header.topic not in self.routes:
            raise TopicNotExistError(17, f"No topic route info in name server for the topic: {header.topic}")
        return self.routes[header.topic]


class FakeBroker(Processor):
    """Stores what it gets; ``fail_next`` holds response codes for the next sends."""

    def __init__(self, name: str, port: int, log: list[Received] | None = None) -> None:
        self.name = name
        self.port = port
        self.log = log if log is not None else []  # every broker's sends, in arrival order
        self.sends: list[Received] = []
        self.heartbeats: list[HeartbeatData] = []
        self.unregisters: list[Any] = []
        self.end_transactions: list[Received] = []
        self.fail_next: list[int] = []
        self.hold = False  # never answer sends (to time them out)
        self.offset = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @SendMessageV2.responder
    @SendMessage.responder
    @SendBatchMessage.responder
    def send(self, header: Any, body: bytes | None, context: Any) -> Any:
        code = context.request.code
        self.sends.append(Received(code, header, body, context.peer))
        self.log.append(self.sends[-1])
        if self.hold:
            from twisted.internet.defer import Deferred

            return Deferred()
        if self.fail_next:
            rc = self.fail_next.pop(0)
            if rc in (10, 11, 12):
                return Response(self._header(header, body, code), code=rc)
            raise for_code(rc, f"fake broker {self.name} refuses")
        return Response(self._header(header, body, code))

    def _header(self, header: Any, body: bytes | None, code: int) -> SendMessageResponseHeader:
        queue_id = header.e if hasattr(header, "e") else header.queue_id
        n = len(decode_batch(body or b"")) if code == 320 else 1
        ids = [create_offset_msg_id(("127.0.0.1", self.port), 1000 + self.offset + i) for i in range(n)]
        h = SendMessageResponseHeader(msg_id=",".join(ids), queue_id=queue_id, queue_offset=self.offset,
                                      transaction_id="TX", extra={"MSG_REGION": "DefaultRegion",
                                                                  "TRACE_ON": "true"})
        self.offset += n
        return h

    @HeartBeat.responder
    def heartbeat(self, header: Any, body: HeartbeatData, context: Any) -> None:
        self.heartbeats.append(body)
        return Response()

    @UnregisterClient.responder
    def unregister(self, header: Any, body: Any, context: Any) -> Any:
        self.unregisters.append(header)
        return Response()

    @EndTransaction.responder
    def end_transaction(self, header: Any, body: Any, context: Any) -> None:
        self.end_transactions.append(Received(37, header, body, context.peer, context.request.remark))
        return None


class World:
    """A NameServer on 9876 and brokers on 10911, 10921, ... on one MemoryReactorClock."""

    def __init__(self, brokers: tuple[str, ...] = ("broker-a",)) -> None:
        self.reactor = MemoryReactorClock()
        self.namesrv = FakeNameServer()
        self.servers: dict[int, RemotingServer] = {}
        self._listen(9876, self.namesrv)
        self.brokers: dict[str, FakeBroker] = {}
        self.sends: list[Received] = []
        for i, name in enumerate(brokers):
            b = FakeBroker(name, 10911 + 10 * i, self.sends)
            self.brokers[name] = b
            self._listen(b.port, b)
        self.pumps: list[iosim.IOPump] = []
        self.refused: list[int] = []

    namesrv_addr = "127.0.0.1:9876"

    def _listen(self, port: int, processor: Processor) -> None:
        server = RemotingServer(self.reactor, JAVA_SERVER_CONFIG, processors=(processor,), port=port)
        server.startService()
        self.servers[port] = server

    def stop_broker(self, name: str) -> None:
        """Refuse new connections to the broker and drop the open ones."""
        port = self.brokers[name].port
        self.reactor.tcpServers = [s for s in self.reactor.tcpServers if s[0] != port]
        for proto in list(self.servers[port].channels):
            proto.transport.loseConnection()
        self.run()

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

    def run(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            moved = False
            while self.reactor.tcpClients:
                host, port, factory, _timeout, _bind = self.reactor.tcpClients[0]
                if any(s[0] == port for s in self.reactor.tcpServers):
                    pump = iosim.ConnectionCompleter(self.reactor).succeedOnce(greet=False)
                    assert pump is not None
                    self.pumps.append(pump)
                else:
                    self.refused.append(port)
                    self.reactor.tcpClients.pop(0)
                    factory.clientConnectionFailed(self.reactor.connectors.pop(0),
                                                   Failure(ConnectionRefusedError("refused")))
                moved = True
            for pump in self.pumps:
                if pump.pump():
                    moved = True
            if not moved:
                return
        raise AssertionError("the world did not settle")

    def advance(self, seconds: float) -> None:
        self.reactor.advance(seconds)
        self.run()
