"""A typed Processor answering GET_ROUTEINFO_BY_TOPIC from a dict, called by the official Java client.

The server is rmqwire's RemotingServer with one ``@GetRouteInfo.responder``; the caller is the
official Java client (``DefaultMQProducer.fetchPublishMessageQueues`` in tools/peers/java/route).
A request missing the required ``topic`` is answered as the official NameServer answers it, which
the test asks too.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
from twisted.internet import defer, utils
from twisted.trial import unittest

from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.commands import BrokerData, GetRouteInfo, QueueData, TopicRouteData
from rmqwire.codec.java import java_str
from rmqwire.errors import TopicNotExistError
from rmqwire.remoting import (
    JAVA_SERVER_CONFIG,
    Processor,
    RemotingClient,
    RemotingServer,
)
from tools.peers.java_peer import PEER_SOURCE
from tools.reference import jars

pytestmark = pytest.mark.conformance

PROBE_SOURCE = PEER_SOURCE.parent.parent / "route" / "RouteProbe.java"
JAVA_TIMEOUT = 90.0


class RouteTable(Processor):
    """The smallest NameServer: routes from a dict, TOPIC_NOT_EXIST otherwise (Java's remark)."""

    def __init__(self, routes: dict[str, TopicRouteData]) -> None:
        self.routes = routes
        self.asked: list[str] = []

    @GetRouteInfo.responder
    def get_route_info(self, header: Any, body: None, context: Any) -> TopicRouteData:
        self.asked.append(header.topic)
        route = self.routes.get(header.topic)
        if route is None:
            raise TopicNotExistError(
                remark=f"No topic route info in name server for the topic: {java_str(header.topic)}"
            )
        return route


def _route(broker: str, queues: int) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(broker_name=broker, read_queue_nums=queues,
                               write_queue_nums=queues, perm=6, topic_sys_flag=0)],
        broker_datas=[BrokerData(cluster="DefaultCluster", broker_name=broker,
                                 broker_addrs={0: "127.0.0.1:10911"})],
    )


class TypedProcessorTests(unittest.TestCase):
    timeout = 180

    @pytest.fixture(autouse=True)
    def _inject(self, reference_cluster: Any) -> None:
        self.cluster = reference_cluster

    def setUp(self) -> None:
        from twisted.internet import (
            reactor,  # tests own the reactor; library code never does
        )

        self.reactor: Any = reactor
        self.table = RouteTable({"TopicA": _route("broker-a", 4), "TopicB": _route("broker-b", 2)})
        self.server = RemotingServer(reactor, JAVA_SERVER_CONFIG, processors=(self.table,))
        self.server.startService()
        self.addCleanup(self.server.stopService)
        self.client = RemotingClient(reactor)
        self.client.startService()
        self.addCleanup(self.client.stopService)

    @defer.inlineCallbacks
    def test_official_java_client_routes_through_the_typed_processor(self) -> Any:
        classes = jars.compile_java([PROBE_SOURCE], "route-probe", self.cluster.version)
        home = tempfile.mkdtemp(prefix="rmqwire-route-probe-")
        self.addCleanup(lambda: __import__("shutil").rmtree(home, ignore_errors=True))
        java = [jars.java_bin(), "-Xmx128m", "-XX:+UseSerialGC", f"-Duser.home={home}",
                "-cp", f"{classes}:{jars.lib_dir(self.cluster.version)}/*", "RouteProbe",
                self.server.address, "TopicA", "TopicB", "NoSuchTopic"]
        run = utils.getProcessOutputAndValue(java[0], java[1:], env=dict(os.environ), path=home)
        run.addTimeout(JAVA_TIMEOUT, self.reactor)
        out, err, rc = yield run
        self.assertEqual(rc, 0, err.decode(errors="replace")[-2000:])
        lines = [ln for ln in out.decode().splitlines() if ln.startswith(("QUEUE ", "ERROR "))]
        queues = sorted(ln for ln in lines if ln.startswith("QUEUE "))
        self.assertEqual(queues, sorted(
            [f"QUEUE TopicA broker-a {i}" for i in range(4)]
            + [f"QUEUE TopicB broker-b {i}" for i in range(2)]))
        (error,) = [ln for ln in lines if ln.startswith("ERROR ")]
        # The client gets our TOPIC_NOT_EXIST and reports it as having no queues for the topic.
        self.assertTrue(error.startswith("ERROR NoSuchTopic -1 Can not find Message Queue"), error)
        self.assertIn("NoSuchTopic", self.table.asked)

    @defer.inlineCallbacks
    def test_missing_required_field_answered_as_the_official_namesrv_answers(self) -> Any:
        # extFields present but without "topic". Java's header decoder only logs the missing
        # @CFNotNull field and hands the processor a null topic, so the official NameServer answers
        # TOPIC_NOT_EXIST for the topic "null"; the typed responder gets None and does the same.
        bare = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
        theirs = yield self.client.invoke(self.cluster.namesrv_addr, bare)
        ours = yield self.client.invoke(self.server.address, bare)
        self.assertEqual((theirs.code, ours.code), (ResponseCode.TOPIC_NOT_EXIST,) * 2)
        java_text = "No topic route info in name server for the topic: null"
        self.assertTrue(theirs.remark.startswith(java_text), theirs.remark)
        self.assertEqual(ours.remark, java_text)
        self.assertEqual(self.table.asked, [None])

    @defer.inlineCallbacks
    def test_typed_call_to_the_typed_processor(self) -> Any:
        resp = yield self.client.call(self.server.address, GetRouteInfo, topic="TopicB")
        self.assertEqual(resp.body, self.table.routes["TopicB"])
        self.assertEqual(resp.command.language.name, "JAVA")
        err = yield self.assertFailure(
            self.client.call(self.server.address, GetRouteInfo, topic="Nope"), TopicNotExistError)
        self.assertEqual(err.remark, "No topic route info in name server for the topic: Nope")
