"""Client and server over real loopback sockets.

A ``twisted.trial.unittest.TestCase`` run by pytest: trial spins the global reactor (tests may
use it; library code never resolves it) and fails the test if sockets or delayed calls are left
behind (DirtyReactorAggregateError), which is the cleanup check we want.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.trial import unittest

from rmqwire.codec import RemotingCommand, RequestCode, SerializeType
from rmqwire.errors import ConnectionLostError, RemotingConnectError
from rmqwire.remoting import Dispatcher, RemotingClient, RemotingServer, RequestContext

BIG = bytes(range(256)) * 4096  # 1 MiB: many TCP segments in both directions


def echo(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
    return cmd.response_to(0, remark="echo", body=cmd.body)


class LoopbackTests(unittest.TestCase):
    timeout = 20

    def setUp(self) -> None:
        from twisted.internet import reactor  # the real reactor: this module's whole point

        if reactor.running:
            # e.g. crochet started it in a thread earlier in this session; trial must drive it
            raise unittest.SkipTest("global reactor already running in another thread (crochet)")
        self.reactor: Any = reactor
        self.server = RemotingServer(Dispatcher({105: echo}), response_serialize_type=SerializeType.JSON)
        port = self.server.listen(self.reactor, 0)
        self.addr = f"127.0.0.1:{port.getHost().port}"
        self.client = RemotingClient(self.reactor, serialize_type=SerializeType.ROCKETMQ)
        # LIFO: the client closes first, then the server waits for its side to go
        self.addCleanup(self.server.close)
        self.addCleanup(self.client.close)

    @defer.inlineCallbacks
    def test_round_trip_large_bodies_and_callback(self) -> Any:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, BIG)
        results = yield defer.gatherResults([self.client.invoke(self.addr, cmd, 10.0) for _ in range(3)])
        for resp in results:
            self.assertEqual((resp.code, resp.remark, resp.body), (0, "echo", BIG))
            self.assertEqual(resp.serialize_type, SerializeType.JSON)  # 5.x mode: server's own type
        # the server calls the client back over the client's own connection
        self.client.register_processor(307, lambda c, x: c.response_to(0, remark="running"))
        (to_client,) = self.server.connections
        resp = yield to_client.invoke(RemotingCommand.request(307), 10.0)
        self.assertEqual(resp.remark, "running")

    @defer.inlineCallbacks
    def test_unknown_code_and_server_drop(self) -> Any:
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(4242), 10.0)
        self.assertEqual((resp.code, resp.remark), (3, " request type 4242 not supported"))
        hang: Deferred[RemotingCommand] = Deferred()
        self.server.dispatcher.register(106, lambda c, x: hang)
        pending = self.client.invoke(self.addr, RemotingCommand.request(106), 10.0)
        yield self.client.invoke(self.addr, RemotingCommand.request(4242), 10.0)  # 106 has arrived
        (server_side,) = self.server.connections
        server_side.close()
        yield self.assertFailure(pending, ConnectionLostError)
        hang.callback(RemotingCommand(code=0))  # too late: dropped with a log line
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(4242), 10.0)
        self.assertEqual(resp.code, 3)  # reconnected on demand

    @defer.inlineCallbacks
    def test_connect_refused(self) -> Any:
        from twisted.internet.protocol import ServerFactory

        port = self.reactor.listenTCP(0, ServerFactory(), interface="127.0.0.1")
        free = port.getHost().port
        yield port.stopListening()
        yield self.assertFailure(
            self.client.invoke(f"127.0.0.1:{free}", RemotingCommand.request(105), 5.0),
            RemotingConnectError,
        )
