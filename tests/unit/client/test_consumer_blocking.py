"""The blocking consumers end to end on loopback sockets: crochet's reactor thread, an in-process
NameServer (fake_cluster) and the in-memory consumer broker on real RemotingServers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consumer_broker import ConsumerBroker
from fake_cluster import FakeNameServer
from twisted.internet import defer
from twisted.python import threadable

from rmqwire import (
    ConsumeFromWhere,
    ConsumeResult,
    MessageExt,
    MessageQueue,
    PullConsumer,
    PushConsumer,
    QueuePuller,
)
from rmqwire.client import blocking
from rmqwire.codec.commands.route import BrokerData, QueueData, TopicRouteData
from rmqwire.remoting import RemotingServer
from rmqwire.remoting.config import JAVA_SERVER_CONFIG

ROOT = Path(__file__).resolve().parents[3]
WAIT = 30.0
FIRST = ConsumeFromWhere.FIRST_OFFSET


class LoopbackConsumerCluster:
    """A NameServer and one consumer broker on ephemeral loopback ports."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.namesrv = FakeNameServer()
        self.ns_server = RemotingServer(reactor, JAVA_SERVER_CONFIG, processors=(self.namesrv,), port=0)
        self.ns_server.startService()
        self.broker = ConsumerBroker(self, "broker-a", 0)  # type: ignore[arg-type]
        self.b_server = RemotingServer(reactor, JAVA_SERVER_CONFIG, processors=(self.broker,), port=0)
        self.b_server.startService()
        self.broker.port = self.b_server.port
        self.namesrv_addr = self.ns_server.address

    def add_topic(self, topic: str, queues: int = 4) -> None:
        self.namesrv.routes[topic] = TopicRouteData(
            queue_datas=[QueueData(broker_name="broker-a", read_queue_nums=queues, write_queue_nums=queues, perm=6)],
            broker_datas=[BrokerData(cluster="c", broker_name="broker-a", broker_addrs={0: self.b_server.address})],
        )

    ensure_topic = add_topic

    def stop(self) -> defer.Deferred[Any]:
        for d, _h, call in self.broker.held:
            call.cancel()
        self.broker.held.clear()
        return defer.gatherResults([self.ns_server.stopService(), self.b_server.stopService()])


@pytest.fixture
def cluster() -> Iterator[LoopbackConsumerCluster]:
    reactor = blocking.ensure_reactor()
    c = blocking.call(LoopbackConsumerCluster, reactor, timeout=WAIT)
    blocking.call(c.add_topic, "T", timeout=WAIT)
    yield c
    blocking.call(c.stop, timeout=WAIT)


def put(cluster: LoopbackConsumerCluster, queue: int, bodies: list[bytes]) -> None:
    blocking.call(cluster.broker.put_many, "T", queue, bodies, timeout=WAIT)


def wait_until(cond: Any, what: str) -> None:
    end = time.monotonic() + WAIT
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_push_listener_runs_in_consume_threads(cluster: LoopbackConsumerCluster) -> None:
    put(cluster, 0, [f"m{i}".encode() for i in range(10)])
    seen: list[tuple[str, bool, bytes]] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> ConsumeResult:
        with lock:
            seen.extend((threading.current_thread().name, threadable.isInIOThread(), m.body) for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer("bg", namesrv_addr=cluster.namesrv_addr, consume_from_where=FIRST,
                     consume_thread_min=4, consume_thread_max=4)
    c.subscribe("T", "*")
    c.register_listener(listener)
    with c:
        wait_until(lambda: len(seen) >= 10, "ten messages")
        client_id = c.client_id
    assert sorted(b for _, _, b in seen) == sorted(f"m{i}".encode() for i in range(10))
    assert all(name.startswith("ConsumeMessageThread_bg_") and not io for name, io, _ in seen)
    assert any(u.client_id == client_id and u.consumer_group == "bg" for u in cluster.broker.unregisters)
    assert not [t for t in threading.enumerate() if t.name.startswith("ConsumeMessageThread_bg_")]
    assert cluster.broker.offsets[("bg", "T", 0)] == 10  # persisted at shutdown


def test_pull_consumer_poll_and_commit(cluster: LoopbackConsumerCluster) -> None:
    put(cluster, 1, [f"p{i}".encode() for i in range(25)])
    mq = MessageQueue("T", "broker-a", 1)
    with PullConsumer("lg", namesrv_addr=cluster.namesrv_addr, consume_from_where=FIRST) as pc:
        pc.assign([mq])
        got: list[MessageExt] = []
        wait_until(lambda: got.extend(pc.poll(timeout=0.2)) or len(got) >= 25, "25 messages")
        assert [m.queue_offset for m in got] == list(range(25))
        assert pc.poll(timeout=0.1) == []
        pc.commit(persist=True)
        assert pc.committed(mq) == 25
        pc.seek(mq, 20)
        again: list[MessageExt] = []
        wait_until(lambda: again.extend(pc.poll(timeout=0.2)) or len(again) >= 5, "5 messages again")
        assert [m.queue_offset for m in again] == list(range(20, 25))
    assert cluster.broker.offsets[("lg", "T", 1)] == 25


def test_queue_puller(cluster: LoopbackConsumerCluster) -> None:
    put(cluster, 2, [b"a", b"b", b"c"])
    mq = MessageQueue("T", "broker-a", 2)
    with QueuePuller("tail", namesrv_addr=cluster.namesrv_addr) as p:
        assert p.fetch_message_queues("T") == [MessageQueue("T", "broker-a", i) for i in range(4)]
        assert (p.min_offset(mq), p.max_offset(mq)) == (0, 3)
        r = p.pull(mq, 1, 10)
        assert r.status.name == "FOUND" and [m.body for m in r.messages] == [b"b", b"c"]
        assert r.next_begin_offset == 3
        assert p.pull(mq, 3, 10).status.name == "NO_NEW_MSG"
        assert p.pull(mq, 9, 10).status.name == "OFFSET_ILLEGAL"
    (code, header), *_ = cluster.broker.pulls
    assert code == 11 and header.sys_flag & 0x4 and header.subscription == "*"


def test_interpreter_exits_with_a_consumer_left_running(tmp_path: Path) -> None:
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(Path(__file__).parent)!r}]
        from rmqwire import PushConsumer, ConsumeResult, ConsumeFromWhere
        from rmqwire.client import blocking
        from test_consumer_blocking import LoopbackConsumerCluster
        import threading
        reactor = blocking.ensure_reactor()
        c = blocking.call(LoopbackConsumerCluster, reactor, timeout=30)
        blocking.call(c.add_topic, "T", timeout=30)
        blocking.call(c.broker.put, "T", 0, b"x", timeout=30)
        got = threading.Event()
        pc = PushConsumer("g", namesrv_addr=c.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        pc.subscribe("T")
        pc.register_listener(lambda msgs: got.set() or ConsumeResult.SUCCESS)
        pc.start()
        print(got.wait(30), flush=True)
        # no shutdown: the consume threads are daemons and crochet stops the reactor at exit
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
